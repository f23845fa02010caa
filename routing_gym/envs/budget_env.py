"""BudgetRoutingEnv: route a stream of queries under an average energy budget (Eq. 7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from routing_gym.envs.replay import ReplayEnv, RoutingConfig
from routing_gym.errors import RoutingGymError


@dataclass(frozen=True)
class BudgetConfig(RoutingConfig):
    """RoutingEnv's options plus the budget."""

    horizon: int = 100  # queries per episode
    budget_j: float | None = None  # B, mean joules per query; None: the split's median per-model mean joules
    overspend_penalty: float = 0.0  # reward charged per B joules spent beyond the episode's budget

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stream is not None:
            raise ValueError("BudgetRoutingEnv episodes are already streams of `horizon` queries: set horizon, not stream")
        if not (isinstance(self.horizon, (int, np.integer)) and not isinstance(self.horizon, bool) and self.horizon >= 1):
            raise ValueError(f"horizon must be an integer >= 1, got {self.horizon!r}")
        if self.budget_j is not None and not (np.isfinite(self.budget_j) and self.budget_j > 0):
            raise ValueError(f"budget_j (B, mean joules per query) must be a finite number > 0, got {self.budget_j!r}")
        if not (np.isfinite(self.overspend_penalty) and self.overspend_penalty >= 0):
            raise ValueError(f"overspend_penalty must be a finite number >= 0, got {self.overspend_penalty!r}")


def _no_episode_yet() -> dict[str, float]:
    """``budget_episode`` before the episode's last step."""
    return dict.fromkeys(("accuracy", "mean_energy_j", "budget_j", "violation_j"), 0.0)


def default_config() -> dict[str, Any]:
    """Every BudgetRoutingEnv option with its default (``BudgetConfig``)."""
    return BudgetConfig().to_dict()


def median_model_budget(energy_j: np.ndarray) -> float:
    """The default B from ``[n, K]`` joules: the median over the pool of each model's mean
    joules (a budget that affords always routing to the median-cost model)."""
    return float(np.median(np.asarray(energy_j).mean(axis=0)))


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


class BudgetRoutingEnv(ReplayEnv):
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
    `budget_left_j` (`B * horizon - spent`, negative once overspent), `t` (queries routed),
    `next_query_id` (`""` at the end) and `budget_episode`: `accuracy`, `mean_energy_j`, `budget_j`,
    `violation_j` of the episode at its last step, zeros before. `reset` returns the same keys
    (the route's with their not-applicable values: `""`, 0.0, `valid=False`), and every info is
    a new object. The key is not `episode`: `info["episode"]` is the end-of-episode record
    (`r`, `l`, `t`) of Gymnasium's `RecordEpisodeStatistics` and SB3's `Monitor`, which read it.

    ## Arguments
    `BudgetConfig` (`default_config()`): RoutingEnv's options plus `horizon`, `budget_j` and
    `overspend_penalty`. Registered id: `RoutingGym/Budget-v0`. There is no `evaluate()`: a
    budget couples the queries of an episode, so score runs with
    `routing_gym_agents.lagrangian.run_budget_episodes` and `budget_report`.
    """

    config_class: ClassVar[type[BudgetConfig]] = BudgetConfig
    config: BudgetConfig

    def __init__(self, config: BudgetConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self.horizon = int(self.config.horizon)
        self.budget_j = median_model_budget(self.core.outcomes.energy_j) if self.config.budget_j is None else float(self.config.budget_j)
        self.overspend_penalty = float(self.config.overspend_penalty)
        self.observation_space = spaces.Dict(
            {
                **self._question_spaces,
                "budget_left": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
                "queries_left": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            }
        )
        self.action_space = spaces.Discrete(self.tournament.n_models)
        self._current: int | None = None
        self._spent = 0.0
        self._t = 0
        self._correct_sum = 0.0

    @property
    def total_budget_j(self) -> float:
        return self.budget_j * self.horizon

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if options:
            raise RoutingGymError(f"BudgetRoutingEnv.reset takes no options (got {sorted(options)}): an episode is a stream")
        super().reset(seed=seed)
        if seed is not None:
            self.sampler.restart()
        self._spent, self._t, self._correct_sum = 0.0, 0, 0.0
        self._current = self.sampler.next(self.np_random)
        info = {**self.core.query_info(self._current), **self._budget_info(), "budget_episode": _no_episode_yet()}
        return self._observe(self._current), self._complete_info(info)

    def step(self, action):
        if self._current is None:
            raise RoutingGymError("step() called before reset() (or after the episode ended)")
        a = self._checked_action(action, self.action_space.n, mode=self.config.invalid_action)
        position = self._current
        info = self.core.route_info(position, a)
        reward = float(self.reward.invalid_penalty if a is None else self.core.reward_matrix[position, a])
        overspent_before = max(0.0, self._spent - self.total_budget_j)
        self._spent += info["energy_j"]
        self._correct_sum += info["correct"]
        self._t += 1
        overspent_after = max(0.0, self._spent - self.total_budget_j)
        reward -= self.overspend_penalty * (overspent_after - overspent_before) / self.budget_j
        info.update(self._budget_info())
        done = self._t >= self.horizon
        if done:
            # The final observation repeats the last query with the closing budget state.
            self._current = None
            mean_j = self._spent / self.horizon
            info["budget_episode"] = {
                "accuracy": self._correct_sum / self.horizon,
                "mean_energy_j": mean_j,
                "budget_j": self.budget_j,
                "violation_j": max(0.0, mean_j - self.budget_j),
            }
        else:
            self._current = position = self.sampler.next(self.np_random)
            info["next_query_id"] = self.core.query_ids[position]
            info["budget_episode"] = _no_episode_yet()
        return self._observe(position), float(reward), done, False, self._complete_info(info)

    def info_defaults(self) -> dict[str, Any]:
        """``ReplayEnv.info_defaults`` plus the route's keys, the budget state, ``next_query_id``
        and ``budget_episode`` (zeros until the episode's last step, ``t == horizon``; a new
        dict in every info, never the template's)."""
        return {**super().info_defaults(), **self.core.route_info_defaults(), **self._budget_info(),
                "next_query_id": "", "budget_episode": _no_episode_yet()}

    def _budget_info(self) -> dict[str, Any]:
        return {"spent_j": self._spent, "budget_j": self.budget_j, "budget_left_j": self.total_budget_j - self._spent, "t": self._t}

    def _observe(self, position: int) -> dict[str, Any]:
        obs = self._question(position)
        obs["budget_left"] = np.array([max(0.0, 1.0 - self._spent / self.total_budget_j)], dtype=np.float32)
        obs["queries_left"] = np.array([(self.horizon - self._t) / self.horizon], dtype=np.float32)
        return obs
