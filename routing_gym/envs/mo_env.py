"""MORoutingEnv: the replayed tournament with a vector reward (MO-Gymnasium's API)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from routing_gym.envs.changing_pool_env import ChangingPoolEnv
from routing_gym.envs.rewards import CORRECT_BASE, WRONG_REWARD, rank_penalty
from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.tournament import Outcomes
from routing_gym.tournament.scoring import action_index

OBJECTIVES = ("correct", "energy", "latency", "power")  # reward vector order: (correct, -J, -s, -W)
SCALES = ("raw", "rank")
UNITS = {"raw": ("correct (0/1)", "-joules", "-seconds", "-watts"),
         "rank": ("2 correct / -1 wrong", "-c x energy rank", "-c x latency rank", "-c x power rank")}


def objective_values(outcomes: Outcomes, scale: str = "raw", objectives: Sequence[str] = OBJECTIVES) -> np.ndarray:
    """``[n, K, d]``: the reward vector of routing each query to each model.

    ``raw``: (correct, -joules, -seconds, -watts) as logged. ``rank``: the terms of the gated rank
    reward, (3c - 1, -c z_e, -c z_t, -c z_p) with z the rank penalties in [0, 1] among the query's
    K candidates, so that ``gated_rank = r . (1, lambda_e, lambda_t, lambda_p)`` exactly.
    """
    if scale not in SCALES:
        raise UnknownNameError("objective scale", scale, list(SCALES))
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if unknown or not objectives or len(set(objectives)) != len(objectives):
        raise UnknownNameError("objective", (unknown or [str(objectives)])[0], list(OBJECTIVES))
    c = np.asarray(outcomes.correct, dtype=np.float64)
    costs = {"energy": outcomes.energy_j, "latency": outcomes.latency_s, "power": outcomes.mean_power_w}
    if scale == "raw":
        columns = {"correct": c, **{k: -np.asarray(v, dtype=np.float64) for k, v in costs.items()}}
    else:  # c x z: the gate, a wrong route pays no cost term, as in gated_rank
        columns = {"correct": c * CORRECT_BASE + (1.0 - c) * WRONG_REWARD,
                   **{k: -c * rank_penalty(v) for k, v in costs.items()}}
    return np.stack([columns[o] for o in objectives], axis=-1)


class MultiObjective:
    """Mixin turning a one-query replay env into its MO twin: ``step`` returns the reward vector
    of the route (``objective_values``), ``reward_space`` / ``reward_dim`` declare it, and the
    exact fronts of the split are methods. The scalar reward of the base env is not returned."""

    def __init__(self, config: Any = None, *, scale: str = "raw", objectives: Sequence[str] = OBJECTIVES, **overrides: Any):
        super().__init__(config, **overrides)  # type: ignore[call-arg]
        if self.config.stream is not None:
            raise RoutingGymError("the MO ids replay one query per episode (stream=None); the exact fronts are per step")
        self.scale, self.objectives = scale, tuple(objectives)
        self._values = objective_values(self.core.outcomes, scale, self.objectives)
        # Bounds over the whole tournament, so every split of one tournament has the same space.
        everything = objective_values(self.tournament.outcomes(), scale, self.objectives)
        # An invalid route (e.g. a model outside the pool) scores invalid_penalty on the first
        # objective and costs nothing, as the scorer counts it.
        self._invalid = np.zeros(len(self.objectives))
        if self.objectives[0] == "correct":
            self._invalid[0] = self.reward.invalid_penalty
        low = np.minimum(everything.min(axis=(0, 1)), self._invalid)
        high = np.maximum(everything.max(axis=(0, 1)), self._invalid)
        self.reward_space = spaces.Box(low, high, dtype=np.float64)
        self.reward_dim = len(self.objectives)

    def step(self, action: Any):
        position = self._current  # type: ignore[attr-defined]
        obs, _, terminated, truncated, info = super().step(action)  # type: ignore[misc]
        a = action_index(action) if info["valid"] else None
        vector = self._invalid.copy() if a is None else self._values[position, a].copy()
        return obs, vector, terminated, truncated, info

    # ------------------------------------------------------------------ exact fronts
    @property
    def objective_matrix(self) -> np.ndarray:
        """``[n_split, K, d]`` reward vector of every route of the split (privileged, as ``reward_matrix``)."""
        self._check_counterfactuals("objective_matrix")  # type: ignore[attr-defined]
        return self._values

    def pareto_front(self, gamma: float = 1.0, weights: np.ndarray | None = None) -> list[np.ndarray]:
        """The oracle's front on this split: expected reward vectors of per-query best routes.

        Episodes are one step, so ``gamma`` (MO-Gymnasium's signature) changes nothing. With
        two objectives the front is exact: every vertex of the convex front (every weight's
        per-query best route; mixes of neighbours fill the edges). With more, the per-query best
        route of each weight in ``weights`` (default a simplex grid), non-dominated ones kept:
        each point is exactly optimal for its weight, the set is a subset of the vertices."""
        from routing_gym.fronts import mo_fronts

        return list(mo_fronts.oracle_front(self.objective_matrix, weights))

    def fixed_model_hull(self) -> np.ndarray:
        """``[V, d]``: the fixed-model yardstick of ``compare``'s report as reward vectors of this
        split: its chain of fixed models chosen on the training split (``mo_fronts.fixed_model_front``
        states the two differences: the report's chain starts at the null policy, 0 J and 0 %, no
        action here, and is read on the split as the best mix of its policies, their upper hull)."""
        from routing_gym.fronts import mo_fronts

        return mo_fronts.fixed_model_front(self.objective_matrix, self.tournament)

    def task_aware_hull(self) -> np.ndarray:
        """``[V, d]``: the task-aware yardstick of ``compare``'s report (fixed models and
        per-benchmark routes, chosen on the training split) as reward vectors of this split, with
        the differences of ``fixed_model_hull`` (``mo_fronts.task_aware_front``)."""
        from routing_gym.fronts import mo_fronts

        return mo_fronts.task_aware_front(self.objective_matrix, self.core, self.tournament)


def _doc(base: type) -> str:
    return f"""
    ## Description
    The multi-objective twin of `{base.__name__}` (MO-Gymnasium's API): the same replayed
    tournament, observations, actions and episodes, but `step` returns the chosen route's
    **reward vector**, `reward_space` (a `Box`) and `reward_dim` declare it, and the exact
    fronts of the split are methods (`pareto_front`, `fixed_model_hull`, `task_aware_hull`).
    Build it with `mo_gymnasium.make("RoutingGym/MO-...-v0")` (gymnasium's passive checker wants
    a scalar reward); `mo_gymnasium.wrappers.LinearReward(env, w)` scalarises it.

    ## Action Space
    As `{base.__name__}`: `Discrete(K)`, the answer model.

    ## Observation Space
    As `{base.__name__}` (a `Dict`; the `-features-v0` ids: a `Box`).

    ## Reward
    A float64 vector over `objectives` (default all four, in this order):
    - `scale="raw"` (default): (correct in [0, 1], -joules [J], -seconds [s], -mean watts [W]),
      the chosen model's logged outcome. `LinearReward` with weights (1, mu, 0, 0) equals the
      scalar `lagrangian` reward (`correct - mu J`) step for step.
    - `scale="rank"`: the gated rank reward's terms, (3c - 1, -c z_e, -c z_t, -c z_p) with z
      the rank penalty in [0, 1] among the query's candidates (`rewards.rank_penalty`), so
      weights (1, lambda_e, lambda_t, lambda_p) give `gated_rank` exactly.
    An invalid route scores the env's `invalid_penalty` on `correct` and 0 on the costs.
    `reward_space` bounds are the tournament's extremes (every split the same space).

    ## Starting State
    As `{base.__name__}`.

    ## Episode End
    One step (`terminated=True`); `stream` is refused (the fronts are per step).

    ## Fronts
    `pareto_front()` (exact for two objectives), `fixed_model_hull()`, `task_aware_hull()`:
    expected reward vectors on this split, every model of the tournament available (a pool
    schedule is not applied); see `routing_gym.fronts.mo_fronts`.

    ## Arguments
    `{base.__name__}`'s options, plus `scale` ("raw" | "rank") and `objectives` (a subset of
    {OBJECTIVES}, in the order given; two objectives make `pareto_front` exact).
    """


class MORoutingEnv(MultiObjective, RoutingEnv):
    __doc__ = _doc(RoutingEnv)


class MOChangingPoolEnv(MultiObjective, ChangingPoolEnv):
    __doc__ = _doc(ChangingPoolEnv)
