"""Pools whose difficulty ceiling is known: the check that the leak-free ceiling is unbiased.

``planted_pool`` draws outcomes from ``logit P(k right | q in b) = a_bk + shared x d_q`` with
``d_q ~ N(0, 1)``, independently across models given ``d_q``:

- ``shared = 0``: outcomes independent across models. Another model's outcome says nothing about
  this one's, so the value of reading difficulty from other models is **0**;
- ``shared > 0``: a planted shared difficulty. What the reference models' outcomes are worth is
  known exactly: route by ``P(k right | the reference models' outcomes) = E[sigmoid(a_bk + shared
  x d) | those outcomes]`` (``reference_posterior_p``: the posterior of ``d`` on a grid, the
  generator's own ``a`` and ``shared``). ``leak_free_ceiling(..., known=...)`` reads that rung on the
  same grid, halvings and resamples as the estimates, so estimate minus truth is paired.

``experiments/headroom_study.py`` reports both cases in the study's README; ``tests/test_headroom.py``
asserts the leak-free ceiling lands on the truth while the inclusive one (the candidates' own
outcomes) lands above it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from routing_gym.tournament import DataCard, Tournament

SIM_BENCHMARKS = ("sim-a", "sim-b")
D_GRID = np.linspace(-5.0, 5.0, 201)  # the posterior of d on this grid (prior N(0, 1))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def planted_pool(n_questions: int = 3000, n_models: int = 8, shared: float = 0.0, seed: int = 0
                 ) -> tuple[Tournament, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """A pool of ``n_models`` (larger: more accurate and dearer) on two benchmarks, and its
    ``known(candidates, reference) -> [n_questions, len(candidates)]``: each candidate's true P(right)
    given the reference models' outcomes (module docstring). Splits: 70 % train, 30 % test."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, len(SIM_BENCHMARKS), n_questions)
    size = np.linspace(0.0, 1.0, n_models)
    level = np.stack([-0.6 + 2.0 * size, 0.4 + 1.2 * size])  # a_bk: [benchmark, model]
    d = rng.standard_normal(n_questions)
    p = _sigmoid(level[codes] + shared * d[:, None])
    correct = (rng.uniform(size=p.shape) < p).astype(np.float64)
    energy = (20.0 + 180.0 * size)[None, :] * rng.uniform(0.8, 1.2, p.shape)
    latency = energy / 300.0
    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_questions)],
                            "benchmark": np.array(SIM_BENCHMARKS)[codes],
                            "prompt": [f"simulated question {i}" for i in range(n_questions)],
                            "reference": ["-"] * n_questions,
                            "split": np.where(rng.uniform(size=n_questions) < 0.7, "train", "test")})
    models = pd.DataFrame({"model_id": [f"sim{j}" for j in range(n_models)], "family": "simulated",
                           "params_b": 1.0 + 69.0 * size, "reasoning": [False] * n_models,
                           "energy_provenance": "synthetic", "energy_source": "routing_gym/eval/headroom/simulation.py"})
    t = Tournament(queries=queries, models=models, correct=correct, energy_j=energy, latency_s=latency,
                   mean_power_w=energy / latency, input_tokens=np.full(p.shape, 30.0), output_tokens=energy,
                   card=DataCard(name=f"planted-{shared:g}", provenance="synthetic",
                                 description="headroom simulation: outcomes from a_bk + shared x d, truth known"))

    def known(candidates: np.ndarray, reference: np.ndarray) -> np.ndarray:
        return reference_posterior_p(correct[:, reference], level[codes][:, reference], level[codes][:, candidates], shared)

    return t, known


def reference_posterior_p(reference_correct: np.ndarray, reference_level: np.ndarray, candidate_level: np.ndarray,
                          shared: float) -> np.ndarray:
    """``[n, C]`` E[sigmoid(a_k + shared x d) | the reference outcomes ``[n, R]``], ``d ~ N(0, 1)``
    a priori, the reference models' P ``sigmoid(a_j + shared x d)`` (levels per question: ``[n, R]``)."""
    pr = _sigmoid(reference_level[:, :, None] + shared * D_GRID[None, None, :])  # [n, R, G]
    y = np.asarray(reference_correct, dtype=np.float64)[:, :, None]
    log_like = (y * np.log(pr) + (1 - y) * np.log1p(-pr)).sum(axis=1) - D_GRID[None, :] ** 2 / 2  # [n, G]
    weight = np.exp(log_like - log_like.max(axis=1, keepdims=True))
    weight /= weight.sum(axis=1, keepdims=True)
    pc = _sigmoid(candidate_level[:, :, None] + shared * D_GRID[None, None, :])  # [n, C, G]
    return np.einsum("ncg,ng->nc", pc, weight)
