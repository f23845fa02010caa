"""Reference routers without learning: fixed model, random and the oracle.

- ``fixed`` (``model_id=...``) routes every query to one model; ``fixed-smallest``,
  ``fixed-medium`` and ``fixed-largest`` pick it by size (``params_b``; by mean training
  joules when some size is unknown).
- ``random`` picks a model uniformly, as a deterministic function of (seed, question text),
  so ``act`` and ``act_batch`` agree and reruns are identical.
- ``oracle`` looks up the best route of each held-out query under the evaluation reward
  (``FitContext.reward``, i.e. compare's common coefficients): an upper bound, not deployable.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import numpy as np

from routing_gym.envs import Reward, oracle_targets
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.tournament import Tournament
from routing_gym_agents.base import Agent, FitContext, QueryBatch
from routing_gym_agents.registry import register_agent

SIZES = ("smallest", "medium", "largest")


def models_by_size(tournament: Tournament, rows: np.ndarray | None = None) -> np.ndarray:
    """Model indices from smallest to largest.

    Size is ``params_b``; if any model's size is unknown (NaN), all are ranked by mean joules
    over ``rows`` instead, since a partial parameter ranking would mix two scales. Ties go to
    the lower index.
    """
    params = tournament.models["params_b"].to_numpy(dtype=float)
    key = params if np.isfinite(params).all() else tournament.energy_j[rows if rows is not None else slice(None)].mean(axis=0)
    return np.argsort(key, kind="stable")


@register_agent("fixed")
@register_agent("fixed-smallest", size="smallest")
@register_agent("fixed-medium", size="medium")
@register_agent("fixed-largest", size="largest")
class FixedModel(Agent):
    """Every query goes to one model: ``model_id``, or the ``size`` alias resolved at fit time
    (medium = the lower median of the size ranking)."""

    name = "fixed"

    feedback = "full"

    def __init__(self, model_id: str | None = None, size: Literal["smallest", "medium", "largest"] | None = None):
        if (model_id is None) == (size is None):
            raise ValueError("fixed model: pass exactly one of model_id=<id> or size=smallest|medium|largest")
        if size is not None and size not in SIZES:
            raise UnknownNameError("fixed-model size", size, list(SIZES))
        self.model_id = model_id
        self.size = size
        self.model_index: int | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        t = ctx.tournament
        if self.size is not None:
            order = models_by_size(t, ctx.train_rows)
            self.model_index = int(order[{"smallest": 0, "medium": (len(order) - 1) // 2, "largest": -1}[self.size]])
        else:
            self.model_index = t.model_index(self.model_id)  # unknown ids list the known ones
        return {"model_id": t.model_ids[self.model_index]}

    def act_batch(self, batch: QueryBatch) -> np.ndarray:
        if self.model_index is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return np.full(len(batch), self.model_index, dtype=np.int64)


@register_agent("random")
class RandomRouter(Agent):
    """Uniform over the K models; the draw is a hash of (seed, text) so it is reproducible."""

    name = "random"

    feedback = "full"

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.n_models: int | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.n_models = ctx.n_models
        self.seed = ctx.seed if self.seed is None else self.seed
        return {}

    def act_batch(self, batch: QueryBatch) -> np.ndarray:
        if self.n_models is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        salt = str(self.seed).encode()
        draws = [
            int.from_bytes(hashlib.blake2b(str(text).encode(), digest_size=8, salt=salt[:16]).digest(), "little")
            for text in batch.texts
        ]
        return (np.asarray(draws, dtype=np.uint64) % np.uint64(self.n_models)).astype(np.int64)


@register_agent("oracle")
class Oracle(Agent):
    """The best route of each query under the fit context's reward (ties: ``tie_break``).

    Reads held-out outcomes, so it needs rows of a tournament: ``act`` on a bare observation
    raises.
    """

    name = "oracle"

    feedback = "full"
    uses_test_outcomes = True

    def __init__(self, tie_break: str = "auto"):
        self.tie_break = tie_break
        self.reward: Reward | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.reward = ctx.reward
        return {"reward": ctx.reward.describe()}

    def act_batch(self, batch: QueryBatch) -> np.ndarray:
        if self.reward is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return oracle_targets(require_rows(batch, self.name), self.reward, self.tie_break, rows=batch.rows)


def require_rows(batch: QueryBatch, agent: str) -> Tournament:
    """The batch's tournament, for agents that read held-out outcomes or outputs."""
    if batch.tournament is None or (np.asarray(batch.rows) < 0).any():
        raise RoutingGymError(
            f"{agent} reads the logged outcomes of each query, so it needs a QueryBatch built with "
            "QueryBatch.from_rows(tournament, rows); a bare observation (act) has none"
        )
    return batch.tournament
