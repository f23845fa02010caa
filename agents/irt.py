"""``irt``: IRT-Router's item-response model of correctness, nested in the benchmark label.

IRT-Router (Song et al., "IRT-Router: Effective and Interpretable Multi-LLM Routing via Item
Response Theory", ACL 2025, arXiv 2506.01048) models P(model m answers query x) with
multidimensional IRT: each model has an ability vector, each query a discrimination vector
and a difficulty computed from the query's embedding, and
``P = sigma(a_m . theta(x) - b(x))``. Here ``theta(x) = x W`` ([d] -> [rank]) and
``b(x) = x . w_b`` are linear in the question features ``x`` (TF-IDF + SVD by default, e5 with
``features="e5"``), ``a_m`` is model m's learned vector, and the logit starts from the
per-(benchmark, m) training rate (``agents/nested.py``)::

    logit P_m(x) = logit r_{b(x)m} + a_m . theta(x) - b(x)

fitted by L-BFGS on the full training table's log loss with an L2 penalty on ``W``, ``w_b``
and ``a``; the penalty is chosen on frontier's validation part of train ("label only"
among the candidates). Departures from the paper: its embeddings come from a BERT-style
encoder and it adds a warm-up on semantically similar queries; routing here is the shared
``P - mu * J_bm / J_ref`` rule (the paper's score also trades performance for cost).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routing_gym_agents.nested import LabelNestedRouter, minimize, sigmoid
from routing_gym_agents.registry import register_agent


def irt_loss(params: dict[str, np.ndarray], X: np.ndarray, offset: np.ndarray, Y: np.ndarray,
             strength: float) -> tuple[float, dict[str, np.ndarray]]:
    """Mean per-query log loss (summed over models) plus ``strength / 2`` x the squared norm of
    every parameter, and its gradients (``W`` [d, rank], ``a`` [K, rank], ``wb`` [d])."""
    n = len(X)
    theta = X @ params["W"]
    z = offset + theta @ params["a"].T - (X @ params["wb"])[:, None]
    G = (sigmoid(z) - Y) / n
    penalty = sum((v**2).sum() for v in params.values())
    loss = float((np.logaddexp(0, z) - Y * z).sum() / n + 0.5 * strength * penalty)
    return loss, {"W": X.T @ (G @ params["a"]) + strength * params["W"],
                  "a": G.T @ theta + strength * params["a"],
                  "wb": -X.T @ G.sum(axis=1) + strength * params["wb"]}


@register_agent("irt")
class IRTRouter(LabelNestedRouter):
    """Multidimensional IRT with query-side discrimination and difficulty (module docstring)."""

    name = "irt"
    strengths = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)  # L2 penalty per query on W, w_b and a

    def __init__(self, rank: int = 8, **kwargs: Any):
        super().__init__(**kwargs)
        if rank < 1:
            raise ValueError(f"rank (IRT dimensions) must be >= 1, got {rank}")
        self.rank = rank

    def fit_text(self, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, strength: float | None, seed: int) -> dict[str, np.ndarray]:
        d = X.shape[1]
        rng = np.random.default_rng(seed)
        # A bilinear model has a saddle at zero: start from small seeded values.
        start = {"W": 0.01 * rng.standard_normal((d, self.rank)), "a": 0.01 * rng.standard_normal((Y.shape[1], self.rank)),
                 "wb": np.zeros(d)}
        return minimize(lambda params: irt_loss(params, X, offset, Y, strength), start)

    def fit_new_models(self, model: dict[str, np.ndarray], X: np.ndarray, offset: np.ndarray, Y: np.ndarray,
                       seen_offset: np.ndarray, seen_Y: np.ndarray, strength: float) -> dict[str, np.ndarray]:
        """A new model's ability vector ``a`` from its calibration answers, ``W`` and ``w_b`` kept
        (a logistic regression on ``theta(x)``: convex, so it starts at zero)."""
        n, theta, difficulty = len(X), X @ model["W"], (X @ model["wb"])[:, None]

        def loss_grad(params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
            a = params["a"]
            z = offset + theta @ a.T - difficulty
            loss = float((np.logaddexp(0, z) - Y * z).sum() / n + 0.5 * strength * (a**2).sum())
            return loss, {"a": ((sigmoid(z) - Y) / n).T @ theta + strength * a}

        a = minimize(loss_grad, {"a": np.zeros((Y.shape[1], self.rank))})["a"]
        return {**model, "a": np.vstack([model["a"], a])}

    def text_proba(self, model: dict[str, np.ndarray], X: np.ndarray, offset: np.ndarray, strength: float) -> np.ndarray:
        return sigmoid(offset + (X @ model["W"]) @ model["a"].T - (X @ model["wb"])[:, None])
