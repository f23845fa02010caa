"""Regret of online agents while the model pool changes (``ChangingPoolEnv``), and its plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from routing_gym.envs.changing_pool_env import ChangingPoolConfig, ChangingPoolEnv, PoolEvent
from routing_gym.errors import RoutingGymError

if TYPE_CHECKING:
    from routing_gym.tournament import Tournament


@dataclass
class PoolRegret:
    """Per agent: per-seed instantaneous regret ``[seeds, steps]`` and choice shares."""

    events: list[PoolEvent]
    regret: dict[str, np.ndarray] = field(default_factory=dict)
    actions: dict[str, np.ndarray] = field(default_factory=dict)

    def cumulative(self, agent: str) -> np.ndarray:
        """``[seeds, steps]`` cumulative regret."""
        return np.cumsum(self.regret[agent], axis=1)

    def windowed(self, agent: str, window: int = 100) -> np.ndarray:
        """Mean regret per tumbling window of ``window`` steps, averaged over seeds."""
        r = self.regret[agent].mean(axis=0)
        n = len(r) // window
        return r[: n * window].reshape(n, window).mean(axis=1)

    def share(self, agent: str, model_index: int, window: int = 100) -> np.ndarray:
        """Share of decisions that chose ``model_index``, per window, averaged over seeds."""
        hits = (self.actions[agent] == model_index).mean(axis=0)
        n = len(hits) // window
        return hits[: n * window].reshape(n, window).mean(axis=1)

    def plot(self, path: str | Path, model_ids: Sequence[str], window: int = 100) -> Path:
        """PNG: cumulative regret (mean and min-max over seeds) and windowed mean regret per
        agent, and the choice share of every model named in an event; events as vertical lines."""
        import matplotlib

        matplotlib.use("Agg")  # files only
        import matplotlib.pyplot as plt

        fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
        colours = matplotlib.colormaps["tab10"].colors
        watched = list(dict.fromkeys(e.model_id for e in self.events))
        for i, agent in enumerate(self.regret):
            c = colours[i % len(colours)]
            cumulative = self.cumulative(agent)
            steps = np.arange(1, cumulative.shape[1] + 1)
            ax1.plot(steps, cumulative.mean(axis=0), color=c, label=agent)
            ax1.fill_between(steps, cumulative.min(axis=0), cumulative.max(axis=0), color=c, alpha=0.15)
            centres = (np.arange(len(self.windowed(agent, window))) + 0.5) * window
            ax2.plot(centres, self.windowed(agent, window), color=c, marker="o", ms=3, label=agent)
            for j, model in enumerate(watched):
                ax3.plot(centres, self.share(agent, list(model_ids).index(model), window), color=c,
                         ls=("-", "--", ":", "-.")[j % 4], label=f"{agent}: {model}")
        for ax in (ax1, ax2, ax3):
            for e in self.events:
                ax.axvline(e.step, color="k", lw=0.8, ls=":")
            ax.set_xlabel("online decision (training stream)")
        ax1.set_ylabel("cumulative regret vs best available model")
        ax2.set_ylabel(f"mean regret per {window} decisions")
        ax3.set_ylabel(f"choice share per {window} decisions")
        ax1.set_title("; ".join(f"step {e.step}: {e.kind} {e.model_id}" for e in self.events), fontsize=8)
        ax1.legend(fontsize=8)
        ax3.legend(fontsize=7)
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def pool_change_regret(
    agents: Iterable[str],
    tournament: Tournament,
    events: Sequence[PoolEvent | Sequence[Any] | dict[str, Any]],
    seeds: Sequence[int] = (0, 1, 2),
    reward: Any = None,
    initial_models: Sequence[str] | None = None,
    train_split: str = "train",
    agent_kwargs: dict[str, dict[str, Any]] | None = None,
) -> PoolRegret:
    """Train each registered bandit-feedback agent online on ``train_split`` while the pool
    changes per ``events``, and record its per-step regret against the best *available*
    model. The agents are unmodified: their ``FitContext`` builds ``ChangingPoolEnv``s
    (``env_fn``), so penalized picks of absent models teach them the pool."""
    from routing_gym.envs.rewards import Reward
    from routing_gym_agents import FitContext, make_agent  # lazily: agents import routing_gym, not the reverse

    reward = Reward.of(reward)
    parsed = [PoolEvent.parse(e) for e in events]

    def pool_env(**overrides: Any) -> ChangingPoolEnv:
        options = dict(tournament=tournament, split=train_split, reward=reward.name, coefficients=reward.coefficients,
                       invalid_penalty=reward.invalid_penalty, allow_ungated=reward.allow_ungated)
        options.update(overrides)
        return ChangingPoolEnv(ChangingPoolConfig(**options, events=tuple(parsed), initial_models=initial_models))

    result = PoolRegret(events=parsed)
    for name in agents:
        regrets, actions = [], []
        for seed in seeds:
            steps: list[tuple[float, int]] = []
            hook = lambda step, a, r, info: steps.append((info["oracle_reward"] - r, a))  # noqa: E731
            ctx = FitContext(tournament, reward, train_split=train_split, seed=seed, env_fn=pool_env, step_hooks=[hook])
            agent = make_agent(name, **(agent_kwargs or {}).get(name, {}))
            if agent.feedback != "bandit":
                raise RoutingGymError(f"agent {name!r} learns from the full table, not online: no regret stream")
            agent.fit(ctx)
            regrets.append([s[0] for s in steps])
            actions.append([s[1] for s in steps])
        length = min(len(r) for r in regrets)
        result.regret[name] = np.array([r[:length] for r in regrets])
        result.actions[name] = np.array([a[:length] for a in actions])
    return result
