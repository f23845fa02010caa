"""ChangingPoolEnv: the model pool changes mid-stream (models added or removed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.routing_env import BatchResult, RoutingEnv
from routing_gym.envs.routing_env import default_config as routing_default_config
from routing_gym.errors import InvalidActionError, RoutingGymError

if TYPE_CHECKING:
    from routing_gym.tournament import Tournament

CHANGING_POOL_ID = "RoutingGym/ChangingPool-v0"
EVENT_KINDS = ("add", "remove")


@dataclass(frozen=True)
class PoolEvent:
    """At decision ``step`` (0-based, counted from the last seeded reset), ``kind`` ("add" or
    "remove") ``model_id``; the change applies before that decision is made."""

    step: int
    kind: str
    model_id: str

    @classmethod
    def parse(cls, event: PoolEvent | Sequence[Any] | dict[str, Any]) -> PoolEvent:
        if isinstance(event, PoolEvent):
            return event
        if isinstance(event, dict):
            return cls(int(event["step"]), str(event["kind"]), str(event["model_id"]))
        step, kind, model_id = event
        return cls(int(step), str(kind), str(model_id))


def default_config() -> dict[str, Any]:
    """Every ChangingPoolEnv option with its default (RoutingEnv's options plus two; invalid
    actions are penalized by default)."""
    return {
        **routing_default_config(),
        # Absent models are part of the action space, so penalizing them (not raising) is the
        # default: a random or learning agent meets them as the env's dynamics.
        "invalid_action": "penalize",
        "events": (),  # PoolEvents, (step, "add"|"remove", model_id) tuples or dicts
        "initial_models": None,  # model ids available at step 0; None: all but those first added by an event
    }


class ChangingPoolEnv(RoutingEnv):
    """
    ## Description
    `RoutingEnv` with a model pool that changes during the stream, as in GreenServ's
    adaptability study: a schedule of events adds a model (a new release) or removes one (a
    deprecation or an outage) at given decision steps. The step counter runs across
    episodes from the last seeded `reset`, so a bandit's training stream sees the change
    once, mid-stream.

    ## Action Space
    `Discrete(K)` over the whole tournament's models (so indices never shift). Routing to a
    model that is not in the pool right now is an invalid action: it earns `invalid_penalty`,
    costs nothing and counts as wrong (`invalid_action="penalize"`, the default here), or
    raises `InvalidActionError` (`invalid_action="raise"`).

    ## Observation Space
    `RoutingEnv`'s `Dict` plus `"available"`: `MultiBinary(K)` — 1 for the models in the pool
    at this decision.

    ## Rewards
    As `RoutingEnv` (the registered reward of the chosen route); `info["oracle_reward"]` is
    the best reward among the models *available* at this step, so regret curves measure
    the gap to the best current model.

    ## Starting State
    `reset()` applies the events due by the current step and shows the next query;
    `reset(seed=...)` restarts the stream (step 0, the initial pool, a new query order).

    ## Episode End
    One step per episode (`terminated=True`), as `RoutingEnv`.

    ## Info
    `RoutingEnv`'s, plus `stream_step` (the decision's step), `available` (the mask) and,
    when events fired at this step, `pool_events`.

    ## Arguments
    `default_config()`: RoutingEnv's options plus `events` and `initial_models`. Registered
    id: `RoutingGym/ChangingPool-v0`. `evaluate(actions)` scores against the current pool.
    """

    def __init__(self, **overrides: Any):
        config = default_config()
        unknown = set(overrides) - set(config)
        if unknown:
            raise TypeError(f"ChangingPoolEnv got unknown option(s) {sorted(unknown)}; options: {sorted(config)}")
        config.update(overrides)
        events, initial = config.pop("events"), config.pop("initial_models")
        super().__init__(**config)
        self.events = sorted((PoolEvent.parse(e) for e in events or ()), key=lambda e: e.step)
        ids = self.tournament.model_ids
        for e in self.events:
            if e.kind not in EVENT_KINDS:
                raise RoutingGymError(f"pool event {e}: kind must be one of {EVENT_KINDS}")
            if e.model_id not in ids:
                raise RoutingGymError(f"pool event {e}: unknown model {e.model_id!r}; models: {', '.join(ids)}")
            if e.step < 0:
                raise RoutingGymError(f"pool event {e}: step must be >= 0")
        if initial is None:
            first = {}
            for e in self.events:
                first.setdefault(e.model_id, e.kind)
            initial = [m for m in ids if first.get(m) != "add"]
        unknown_ids = sorted(set(initial) - set(ids))
        if unknown_ids:
            raise RoutingGymError(f"initial_models: unknown model(s) {unknown_ids}; models: {', '.join(ids)}")
        self.config.update(events=tuple(self.events), initial_models=tuple(initial))
        self._initial = np.isin(ids, list(initial))
        self._check_schedule()
        self.observation_space = spaces.Dict({**self.observation_space.spaces, "available": spaces.MultiBinary(len(ids))})
        self._available = self._initial.copy()
        self._stream_step = 0
        self._next_event = 0
        self._fired: list[PoolEvent] = []

    @property
    def available(self) -> np.ndarray:
        """Boolean ``[K]`` mask of the models in the pool now (a copy)."""
        return self._available.copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._available, self._stream_step, self._next_event = self._initial.copy(), 0, 0
        self._fired = self._apply_due_events()
        obs, info = super().reset(seed=seed, options=options)
        return self._with_mask(obs), info

    def step(self, action):
        position = self._current
        obs, reward, terminated, truncated, info = super().step(action)
        a = int(action) if info["valid"] else None
        if a is not None and not self._available[a]:
            if self.config["invalid_action"] == "raise":
                self._current = position  # the decision is still pending
                raise InvalidActionError(
                    f"model {self.tournament.model_ids[a]!r} (action {a}) is not in the pool at step {self._stream_step}; "
                    f"available: {', '.join(np.asarray(self.tournament.model_ids)[self._available])}"
                )
            reward = float(self.reward.invalid_penalty)
            info.update(model_id=None, requested_model_id=self.tournament.model_ids[a], valid=False, correct=0.0,
                        energy_j=0.0, latency_s=0.0, mean_power_w=0.0)
            for name in self._components:  # they describe a route that was not taken
                info.pop(name, None)
        info["oracle_reward"] = float(self._reward_matrix[position][self._available].max())
        info.update(stream_step=self._stream_step, available=self.available)
        if self._fired:
            info["pool_events"] = [f"{e.kind} {e.model_id}" for e in self._fired]
        self._stream_step += 1
        return self._with_mask(obs), reward, terminated, truncated, info

    def evaluate(self, actions: np.ndarray) -> BatchResult:
        """Batched scoring (``RoutingEnv.evaluate``) where models outside the current pool
        count as invalid actions."""
        actions = np.asarray(actions).astype(np.int64, copy=False)
        in_range = (actions >= 0) & (actions < len(self._available))
        allowed = in_range & self._available[np.where(in_range, actions, 0)]
        result = super().evaluate(np.where(allowed, actions, -1))
        result.actions = actions
        return result

    def _apply_due_events(self) -> list[PoolEvent]:
        fired = []
        while self._next_event < len(self.events) and self.events[self._next_event].step <= self._stream_step:
            e = self.events[self._next_event]
            self._available[self.tournament.model_index(e.model_id)] = e.kind == "add"
            fired.append(e)
            self._next_event += 1
        return fired

    def _check_schedule(self) -> None:
        pool = self._initial.copy()
        for e in self.events:
            pool[self.tournament.model_index(e.model_id)] = e.kind == "add"
            if not pool.any():
                raise RoutingGymError(f"pool event {e} leaves no model in the pool")
        if not self._initial.any():
            raise RoutingGymError("the initial pool is empty")

    def _with_mask(self, obs: dict[str, Any]) -> dict[str, Any]:
        obs["available"] = self._available.astype(np.int8)
        return obs


# ---------------------------------------------------------------------- regret under a pool change
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
    model. The agents are unmodified: a ``FitContext`` whose ``make_env`` builds a
    ``ChangingPoolEnv`` (so penalized picks of absent models teach them the pool)."""
    from routing_gym.envs.rewards import Reward
    from routing_gym_agents import FitContext, make_agent  # lazily: agents import routing_gym, not the reverse

    reward = reward if isinstance(reward, Reward) else Reward("gated_rank", dict(reward or {}))
    parsed = [PoolEvent.parse(e) for e in events]

    class _PoolContext(FitContext):
        def make_env(self, **overrides: Any) -> ChangingPoolEnv:
            env = super().make_env(**overrides)
            return ChangingPoolEnv(**env.config, events=parsed, initial_models=initial_models)

    result = PoolRegret(events=parsed)
    for name in agents:
        regrets, actions = [], []
        for seed in seeds:
            steps: list[tuple[float, int]] = []
            hook = lambda step, a, r, info: steps.append((info["oracle_reward"] - r, a))  # noqa: E731
            ctx = _PoolContext(tournament=tournament, reward=reward, train_split=train_split, seed=seed, step_hooks=[hook])
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


if CHANGING_POOL_ID not in gym.registry:
    gym.register(CHANGING_POOL_ID, entry_point="routing_gym.envs.changing_pool_env:ChangingPoolEnv")
