"""The one scorer: a vector of actions against a block of queries' reward matrix and outcomes.

``RoutingEnv.evaluate``, ``routing-gym compare``, the off-policy estimators and the text
controller's replayed rewards all score actions here, so they can never disagree.

Action rule (the same for ``env.step``): an action is a model index given as an integer or an
integral float (``2``, ``np.int64(2)``, ``2.0``). Booleans, non-integral or non-finite values and
indices outside ``[0, K)`` (or outside the ``allowed`` mask, e.g. models that left the pool) are
*invalid*: they earn the invalid penalty, count as wrong and cost 0 J / 0 s / 0 W.

It lives in the tournament layer (it needs numpy and ``Outcomes`` only), below the
environments that use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from routing_gym.tournament.tournament import Outcomes

INVALID = -1  # what an invalid action becomes once coerced


@dataclass
class BatchResult:
    """Outcome of scoring one action per query at once (``score_actions``)."""

    actions: np.ndarray  # as requested; an entry that is no integer index becomes -1 (``valid`` says what was scored)
    rewards: np.ndarray
    valid: np.ndarray
    correct: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    mean_power_w: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)

    def metrics(self) -> dict[str, float]:
        """Means over queries; invalid routes count as wrong and cost nothing."""
        return {
            "accuracy": float(self.correct.mean()),
            "mean_energy_j": float(self.energy_j.mean()),
            "mean_latency_s": float(self.latency_s.mean()),
            "mean_power_w": float(self.mean_power_w.mean()),
            "mean_reward": float(self.rewards.mean()),
            "invalid_rate": float(1.0 - self.valid.mean()),
        }


def action_index(action: Any) -> int | None:
    """One action as a model index, or None when it is not an integer or integral float.

    Range is not checked here (the caller knows K and the pool)."""
    if type(action) is int:  # the common case first: an env step's cost is mostly such checks
        return action
    if isinstance(action, (bool, np.bool_)):
        return None
    if isinstance(action, np.ndarray):
        if action.size != 1:
            return None
        return action_index(action.reshape(-1)[0].item())
    if isinstance(action, (int, np.integer)):
        return int(action)
    if isinstance(action, (float, np.floating)):
        value = float(action)
        return int(value) if math.isfinite(value) and value == int(value) else None
    return None


def coerce_actions(actions: Any, n: int | None = None) -> np.ndarray:
    """``int64`` actions with every entry that breaks the action rule set to ``INVALID``.

    Raises ``ValueError`` for a wrong shape and ``TypeError`` for non-numeric input."""
    arr = np.asarray(actions)
    if arr.ndim != 1 or (n is not None and arr.shape != (n,)):
        expected = f"({n},)" if n is not None else "one dimension"
        raise ValueError(f"expected actions of shape {expected} (one per query), got shape {arr.shape}")
    if arr.dtype.kind == "b":
        return np.full(len(arr), INVALID, dtype=np.int64)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        integral = np.isfinite(arr) & (arr == np.round(arr))
        return np.where(integral, np.nan_to_num(arr), INVALID).astype(np.int64)
    if arr.dtype.kind == "O":
        return np.array([INVALID if (a := action_index(x)) is None else a for x in arr], dtype=np.int64)
    raise TypeError(f"actions must be numeric model indices, got dtype {arr.dtype}")


class ScoringTable:
    """A ``[n, K]`` block's rewards and outcomes, stacked once so that each ``score`` is one
    gather (batched scoring stays within a small factor of a raw numpy take,
    ``experiments/bench_env.py``)."""

    def __init__(self, reward_matrix: np.ndarray, outcomes: Outcomes, invalid_penalty: float):
        self.n, self.k = reward_matrix.shape
        self.invalid_penalty = float(invalid_penalty)
        self._stacked = np.stack([reward_matrix, *outcomes], axis=-1).reshape(-1, 5)
        self._offsets = np.arange(self.n) * self.k

    def score(self, actions: Any, allowed: np.ndarray | None = None) -> BatchResult:
        """Score ``actions[i]`` on query ``i``; ``allowed`` is an optional boolean ``[K]`` (or
        ``[n, K]``) mask, and a model outside it is invalid."""
        coerced = coerce_actions(actions, self.n)
        valid = coerced.view(np.uint64) < self.k  # negatives wrap to huge
        safe = np.where(valid, coerced, 0)
        if allowed is not None:
            mask = np.asarray(allowed, dtype=bool)
            valid &= mask[safe] if mask.ndim == 1 else mask[np.arange(self.n), safe]
        picked = self._stacked.take(self._offsets + safe, axis=0)
        if not valid.all():
            picked[~valid] = (self.invalid_penalty, 0.0, 0.0, 0.0, 0.0)
        return BatchResult(coerced, picked[:, 0], valid, *(picked[:, j] for j in range(1, 5)))


def score_actions(
    reward_matrix: np.ndarray,
    outcomes: Outcomes,
    actions: Any,
    invalid_penalty: float,
    allowed: np.ndarray | None = None,
) -> BatchResult:
    """Score ``actions[i]`` on query ``i`` of a ``[n, K]`` block (see ``ScoringTable.score``)."""
    return ScoringTable(reward_matrix, outcomes, invalid_penalty).score(actions, allowed)
