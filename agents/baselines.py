"""Reference routers without learning: fixed model, per benchmark, random and the oracle.

- ``fixed`` (``model_id=...``) routes every query to one model; ``fixed-smallest``,
  ``fixed-medium`` and ``fixed-largest`` pick it by size (``params_b``; by mean training
  joules when some size is unknown).
- ``per-benchmark`` reads only the benchmark label: each benchmark goes to the fixed model that
  did best on it in training (by mean training reward, or with its cost knob ``mu`` by training
  accuracy - mu x J / J_ref, J_ref the largest mean training joules). The router any learned
  router must beat to show it reads the question (the task-aware hull, ``fronts/hull.py``).
- ``random`` picks a model uniformly, as a deterministic function of (seed, question text),
  so ``act`` and ``act_batch`` agree and reruns are identical.
- ``oracle`` looks up the best route of each held-out query under the evaluation reward
  (``FitContext.reward``, i.e. compare's common coefficients): an upper bound that declares
  ``privileged = {"test_outcomes"}``, so it is reported as not deployable.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import numpy as np

import pandas as pd

from routing_gym.envs import ObservationBatch, oracle_targets
from routing_gym.errors import UnknownNameError
from routing_gym.eval.frontier import CostKnob
from routing_gym.fronts.hull import benchmark_means, best_per_benchmark
from routing_gym_agents.base import Agent, FitContext, PrivilegedAccess
from routing_gym_agents.registry import register_agent

SIZES = ("smallest", "medium", "largest")


def models_by_size(models: pd.DataFrame, energy_j: np.ndarray) -> np.ndarray:
    """Model indices from smallest to largest.

    Size is ``params_b``; if any model's size is unknown (NaN), all are ranked by mean joules
    (``energy_j``: ``[n, K]``, e.g. the training outcomes) instead, since a partial parameter
    ranking would mix two scales. Ties go to the lower index.
    """
    params = models["params_b"].to_numpy(dtype=float)
    key = params if np.isfinite(params).all() else np.asarray(energy_j).mean(axis=0)
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
    seed_dependent = False
    trains_on_reward = False  # one model, whatever the reward
    reads_question = False

    def __init__(self, model_id: str | None = None, size: Literal["smallest", "medium", "largest"] | None = None):
        if (model_id is None) == (size is None):
            raise ValueError("fixed model: pass exactly one of model_id=<id> or size=smallest|medium|largest")
        if size is not None and size not in SIZES:
            raise UnknownNameError("fixed-model size", size, list(SIZES))
        self.model_id = model_id
        self.size = size
        self.model_index: int | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        ids = ctx.model_ids
        if self.size is not None:
            order = models_by_size(ctx.models, ctx.train_outcomes().energy_j)
            self.model_index = int(order[{"smallest": 0, "medium": (len(order) - 1) // 2, "largest": -1}[self.size]])
        elif self.model_id not in ids:
            raise UnknownNameError("model", self.model_id, ids, known_as="in this tournament")
        else:
            self.model_index = ids.index(self.model_id)
        return {"model_id": ids[self.model_index]}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.model_index is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return np.full(len(batch), self.model_index, dtype=np.int64)


# mu prices joules relative to the costliest model's: small models cost ~1-2 % of it, so the
# cheap end of a per-benchmark curve needs mu in the tens.
PER_BENCHMARK_KNOB = CostKnob("mu", applies="act", cheaper_when="higher",
                              grid=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0))


@register_agent("per-benchmark")
class PerBenchmark(Agent):
    """Each benchmark to one fixed model chosen on the training outcomes (module docstring):
    ``mu=None`` maximises the mean training reward, a number ``mu >= 0`` maximises training
    accuracy - mu x J / J_ref. Ties go to the cheaper model. A benchmark without training rows
    (an unseen benchmark, listed in the fit logs' ``unseen_benchmarks``) is routed as all
    training rows together would be: the pooled choice."""

    name = "per-benchmark"
    feedback = "full"
    seed_dependent = False
    cost_knob = PER_BENCHMARK_KNOB  # routing reads mu, training does not: frontier fits once
    reads_question = False  # the benchmark label only

    def __init__(self, mu: float | None = None):
        if mu is not None and not (np.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu (price of joules) must be None or a finite number >= 0, got {mu}")
        self.mu = mu
        self.accuracy: np.ndarray | None = None  # [n_benchmarks, K] training means
        self.joules: np.ndarray | None = None
        self.reward: np.ndarray | None = None
        self.j_ref = 1.0

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        codes, n_benchmarks = ctx.train_observations().benchmarks, len(ctx.benchmarks)
        outcomes = ctx.train_outcomes()
        self.accuracy = benchmark_means(outcomes.correct, codes, n_benchmarks)
        self.joules = benchmark_means(outcomes.energy_j, codes, n_benchmarks)
        self.reward = benchmark_means(ctx.train_reward_matrix(), codes, n_benchmarks)
        self.j_ref = max(float(outcomes.energy_j.mean(axis=0).max()), 1e-12)
        # benchmark_means gives a benchmark without training rows the mean of all rows: the pooled choice
        seen = set(np.unique(codes).tolist())
        unseen = [b for i, b in enumerate(ctx.benchmarks) if i not in seen]
        return {"routes": dict(zip(ctx.benchmarks, (ctx.model_ids[m] for m in self.routes()))), "unseen_benchmarks": unseen,
                "objective": ctx.objective if self.mu is None else f"accuracy - {self.mu:g} x J / {self.j_ref:.4g} J"}

    def routes(self) -> np.ndarray:
        """``[n_benchmarks]``: the model each benchmark goes to under the current ``mu``."""
        if self.accuracy is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        score = self.reward if self.mu is None else self.accuracy - self.mu * self.joules / self.j_ref
        return best_per_benchmark(score, self.joules)

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        routes = self.routes()
        codes = np.asarray(batch.benchmarks, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= len(routes)):
            raise ValueError(f"{self.name}: benchmark codes {codes.min()}..{codes.max()} outside the "
                             f"{len(routes)} benchmarks it was trained on")
        return routes[codes]


@register_agent("random")
class RandomRouter(Agent):
    """Uniform over the K models; the draw is a hash of (seed, text) so it is reproducible."""

    name = "random"

    feedback = "full"
    trains_on_reward = False
    reads_question = False  # the draw hashes the text but reads nothing in it

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.n_models: int | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.n_models = ctx.n_models
        self.seed = ctx.seed if self.seed is None else self.seed
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.n_models is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return (text_hashes(batch.texts, self.seed) % np.uint64(self.n_models)).astype(np.int64)


def text_hashes(texts: Any, seed: int) -> np.ndarray:
    """``[n]`` uint64 hashes of (seed, text): a seeded draw per question that does not depend on
    the batch it comes in."""
    salt = str(seed).encode()[:16]
    draws = [int.from_bytes(hashlib.blake2b(str(text).encode(), digest_size=8, salt=salt).digest(), "little")
             for text in texts]
    return np.asarray(draws, dtype=np.uint64)


@register_agent("oracle")
class Oracle(Agent):
    """The best route of each query under the fit context's reward (ties: ``tie_break``).

    Reads held-out outcomes (declared: ``privileged``), looked up by the batch's query ids.
    """

    name = "oracle"
    feedback = "full"
    seed_dependent = False
    privileged = frozenset({"test_outcomes"})

    def __init__(self, tie_break: str = "auto"):
        self.tie_break = tie_break
        self.access: PrivilegedAccess | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.access = ctx.privileged
        return {"objective": ctx.objective}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.access is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        rows = self.access.rows_of(batch)
        return oracle_targets(self.access.tournament, self.access.reward, self.tie_break, rows=rows)
