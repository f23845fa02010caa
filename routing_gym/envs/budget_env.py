"""BudgetRoutingEnv: route a stream of queries under an average energy budget (Eq. 7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.envs.routing_env import default_config as routing_default_config
from routing_gym.errors import RoutingGymError

BUDGET_ID = "RoutingGym/Budget-v0"


def default_config() -> dict[str, Any]:
    """Every BudgetRoutingEnv option with its default (RoutingEnv's options plus three)."""
    return {
        **routing_default_config(),
        "horizon": 100,  # queries per episode
        "budget_j": None,  # B, mean joules per query; None: the split's median per-model mean joules
        "overspend_penalty": 0.0,  # reward charged per B joules spent beyond the episode's budget
    }


def median_model_budget(env: RoutingEnv) -> float:
    """The default B: the median over the pool of each model's mean joules on the env's split
    (a budget that affords always routing to the median-cost model)."""
    return float(np.median(env.tournament.energy_j[env.rows].mean(axis=0)))


@dataclass
class BudgetReport:
    """Accuracy and spend of a run of episodes against a budget B (joules per query)."""

    episodes: int
    queries: int
    budget_j: float
    accuracy: float
    mean_energy_j: float  # over all queries of all episodes
    violation_j: float  # max(0, mean_energy_j - B): the violation of Eq. 7 in expectation
    episode_violation_rate: float  # share of episodes whose own mean joules exceed B
    mean_episode_overspend_j: float  # mean over episodes of max(0, episode mean joules - B)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def budget_report(energy_j: np.ndarray, correct: np.ndarray, budget_j: float) -> BudgetReport:
    """Report accuracy and budget violation from ``[episodes, horizon]`` per-query arrays."""
    energy = np.atleast_2d(np.asarray(energy_j, dtype=np.float64))
    correct = np.atleast_2d(np.asarray(correct, dtype=np.float64))
    if energy.shape != correct.shape or energy.size == 0:
        raise ValueError(f"energy_j and correct must be equal, non-empty [episodes, horizon] arrays; got {energy.shape} and {correct.shape}")
    per_episode = energy.mean(axis=1)
    mean = float(energy.mean())
    return BudgetReport(
        episodes=int(energy.shape[0]),
        queries=int(energy.size),
        budget_j=float(budget_j),
        accuracy=float(correct.mean()),
        mean_energy_j=mean,
        violation_j=max(0.0, mean - budget_j),
        episode_violation_rate=float((per_episode > budget_j).mean()),
        mean_episode_overspend_j=float(np.maximum(per_episode - budget_j, 0.0).mean()),
    )


class BudgetRoutingEnv(RoutingEnv):
    """
    ## Description
    The reference paper's energy-budgeted routing (Eq. 7: the average joules per query must
    stay at or below a budget B). An episode is a stream of `horizon` queries from the split
    (drawn like `RoutingEnv` draws them); the agent routes each to one of K models and sees
    how much of the episode's budget `B * horizon` is left. Outcomes are replayed from the
    tournament as in `RoutingEnv`.

    ## Action Space
    `Discrete(K)`: the answer model of the current query (invalid actions as in `RoutingEnv`;
    a penalized invalid route costs 0 J).

    ## Observation Space
    `RoutingEnv`'s `Dict` (`text`, `benchmark`, optional `difficulty`) for the current query,
    plus:
    - `"budget_left"`: `Box(0, 1, (1,))` — `max(0, 1 - spent / (B * horizon))`;
    - `"queries_left"`: `Box(0, 1, (1,))` — queries of the episode not yet routed, over
      `horizon` (1 at the first query; 0 in the final observation).

    ## Rewards
    The registered reward of the routed query (as in `RoutingEnv`), minus
    `overspend_penalty` per B joules by which this step pushes total spend beyond `B *
    horizon` (0 by default: the budget is then a constraint for the agent to meet, e.g. by
    a Lagrangian multiplier, not part of the reward).

    ## Starting State
    `reset()` zeroes the spend and shows the episode's first query. `reset(seed=...)` also
    restarts the query order. Pinning a query (`options`) is not supported.

    ## Episode End
    `terminated=True` after `horizon` queries (the budget horizon is part of the task, so no
    value is bootstrapped past it); never truncated. Spending past the budget does not end
    the episode: violation is measured, and priced only through `overspend_penalty`.

    ## Info
    Per step: `RoutingEnv`'s step info for the routed query, plus `spent_j`, `budget_j` (B),
    `budget_left_j` (`B * horizon - spent`, negative once overspent), `t` (queries routed).
    At the end also `episode`: `accuracy`, `mean_energy_j`, `budget_j`, `violation_j` of the episode.

    ## Arguments
    `default_config()`: RoutingEnv's options plus `horizon`, `budget_j` and
    `overspend_penalty`. Registered id: `RoutingGym/Budget-v0`.
    """

    def __init__(self, **overrides: Any):
        config = default_config()
        unknown = set(overrides) - set(config)
        if unknown:
            raise TypeError(f"BudgetRoutingEnv got unknown option(s) {sorted(unknown)}; options: {sorted(config)}")
        config.update(overrides)
        horizon, budget, penalty = config.pop("horizon"), config.pop("budget_j"), config.pop("overspend_penalty")
        super().__init__(**config)
        self.config.update(horizon=horizon, budget_j=budget, overspend_penalty=penalty)
        if not (isinstance(horizon, (int, np.integer)) and horizon >= 1):
            raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}")
        self.horizon = int(horizon)
        self.budget_j = median_model_budget(self) if budget is None else float(budget)
        if not (np.isfinite(self.budget_j) and self.budget_j > 0):
            raise ValueError(f"budget_j (B, mean joules per query) must be a finite number > 0, got {budget!r}")
        if not (np.isfinite(penalty) and penalty >= 0):
            raise ValueError(f"overspend_penalty must be a finite number >= 0, got {penalty!r}")
        self.overspend_penalty = float(penalty)
        self.observation_space = spaces.Dict(
            {
                **self.observation_space.spaces,
                "budget_left": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
                "queries_left": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            }
        )
        self._spent = 0.0
        self._t = 0
        self._correct_sum = 0.0

    @property
    def total_budget_j(self) -> float:
        return self.budget_j * self.horizon

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if options:
            raise RoutingGymError(f"BudgetRoutingEnv.reset takes no options (got {sorted(options)}): an episode is a stream")
        self._spent, self._t, self._correct_sum = 0.0, 0, 0.0
        obs, info = super().reset(seed=seed)
        return self._with_budget(obs), info

    def step(self, action):
        _, reward, _, _, info = super().step(action)
        overspent_before = max(0.0, self._spent - self.total_budget_j)
        self._spent += info["energy_j"]
        self._correct_sum += info["correct"]
        self._t += 1
        overspent_after = max(0.0, self._spent - self.total_budget_j)
        reward -= self.overspend_penalty * (overspent_after - overspent_before) / self.budget_j
        info.update(spent_j=self._spent, budget_j=self.budget_j, budget_left_j=self.total_budget_j - self._spent, t=self._t)
        done = self._t >= self.horizon
        if done:
            # The final observation repeats the last query with the closing budget state.
            obs = self._observation(self._position_of[info["query_id"]])
            mean_j = self._spent / self.horizon
            info["episode"] = {
                "accuracy": self._correct_sum / self.horizon,
                "mean_energy_j": mean_j,
                "budget_j": self.budget_j,
                "violation_j": max(0.0, mean_j - self.budget_j),
            }
        else:
            obs, next_info = super().reset()
            info.update(next_query_id=next_info["query_id"], next_row=next_info["row"])
        return self._with_budget(obs), float(reward), done, False, info

    def _with_budget(self, obs: dict[str, Any]) -> dict[str, Any]:
        left = max(0.0, 1.0 - self._spent / self.total_budget_j)
        obs["budget_left"] = np.array([left], dtype=np.float32)
        obs["queries_left"] = np.array([(self.horizon - self._t) / self.horizon], dtype=np.float32)
        return obs


if BUDGET_ID not in gym.registry:
    gym.register(BUDGET_ID, entry_point="routing_gym.envs.budget_env:BudgetRoutingEnv")
