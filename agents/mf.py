"""``mf``: RouteLLM's matrix-factorisation router, generalised from two models to K.

RouteLLM (Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data", ICLR 2025,
arXiv 2406.18665, section 4.1) scores a model m on a query q with a bilinear form of the
model's learned embedding and the query's embedding,
``delta(m, q) = w_2^T (v_m * (W_1^T v_q + b))``, and trains it on preference pairs:
``P(m_w beats m_l | q) = sigma(delta(m_w, q) - delta(m_l, q))``. RouteLLM has one strong and one weak model; with K models every training
question gives a preference for each pair where one model is more correct than the other
(weight ``c_i - c_j`` for fractional correctness), the Bradley-Terry generalisation of its loss.

Here ``v_q`` are the question features (TF-IDF + SVD by default; the bias column of the
featurizer plays ``b``), ``w_2`` is folded into the model vectors, and the score starts from
the label (``agents/nested.py``): ``delta_m(x) = logit r_{b(x)m} + v_m . (x W_1)``. The L2
penalty on ``W_1`` and ``v`` is chosen on frontier's validation part of train ("label only"
among the candidates). ``predict_correct`` reads ``sigma(delta)``:
exactly the label's rate when the text adds nothing, a ranking score calibrated by the label
otherwise (pairwise training fixes differences between models, not levels). Routing is the
shared ``P - mu * J_bm / J_ref`` rule; RouteLLM's threshold on P(strong wins) is the K = 2 case
of ranking by ``delta`` with a price.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routing_gym_agents.nested import LabelNestedRouter, minimize, sigmoid
from routing_gym_agents.registry import register_agent


Pairs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # query, preferred model, other model, weight


def preference_pairs(Y: np.ndarray) -> Pairs:
    """Every (query, i, j) with ``y_i > y_j`` in ``[n, K]`` correctness, weighted ``y_i - y_j``
    (kept sparse: a query whose models all agree gives none)."""
    weight = Y[:, :, None] - Y[:, None, :]
    rows, better, worse = np.nonzero(weight > 0)
    return rows, better, worse, weight[rows, better, worse]


def pairwise_loss(D: np.ndarray, pairs: Pairs) -> tuple[float, np.ndarray]:
    """Mean over the ``n`` queries of ``sum_pairs weight * softplus(-(D_i - D_j))`` and its
    gradient in the ``[n, K]`` scores ``D``."""
    rows, better, worse, weight = pairs
    n, k = D.shape
    margin = D[rows, better] - D[rows, worse]
    s = weight * sigmoid(-margin) / n  # d softplus(-m) / dm = -sigma(-m)
    grad = (np.bincount(rows * k + worse, s, n * k) - np.bincount(rows * k + better, s, n * k)).reshape(n, k)
    return float((weight * np.logaddexp(0, -margin)).sum() / n), grad


@register_agent("mf")
class MatrixFactorisationRouter(LabelNestedRouter):
    """RouteLLM's bilinear preference model over all K models (module docstring)."""

    name = "mf"
    strengths = (1e-1, 1e-2, 1e-3)  # L2 penalty per query on W_1 and v (three: the pairwise loss is the costliest fit)

    def __init__(self, rank: int = 16, **kwargs: Any):
        super().__init__(**kwargs)
        if rank < 1:
            raise ValueError(f"rank (embedding dimensions) must be >= 1, got {rank}")
        self.rank = rank

    def fit_text(self, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, strength: float | None, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        start = {"W": 0.01 * rng.standard_normal((X.shape[1], self.rank)), "v": 0.01 * rng.standard_normal((Y.shape[1], self.rank))}

        pairs = preference_pairs(Y)

        def loss_grad(params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
            h = X @ params["W"]
            loss, dD = pairwise_loss(offset + h @ params["v"].T, pairs)
            loss += 0.5 * strength * sum((v**2).sum() for v in params.values())
            return loss, {"W": X.T @ (dD @ params["v"]) + strength * params["W"], "v": dD.T @ h + strength * params["v"]}

        return minimize(loss_grad, start, maxiter=100)

    def fit_new_models(self, model: dict[str, np.ndarray], X: np.ndarray, offset: np.ndarray, Y: np.ndarray,
                       seen_offset: np.ndarray, seen_Y: np.ndarray, strength: float) -> dict[str, np.ndarray]:
        """New models' embeddings ``v`` from preference pairs on the calibration questions against
        every model (the seen models' ``v`` and the projection ``W_1`` kept)."""
        h, n_seen = X @ model["W"], seen_Y.shape[1]
        pairs = preference_pairs(np.hstack([seen_Y, Y]))
        seen_scores = seen_offset + h @ model["v"].T

        def loss_grad(params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
            v = params["v"]
            loss, dD = pairwise_loss(np.hstack([seen_scores, offset + h @ v.T]), pairs)
            return loss + 0.5 * strength * (v**2).sum(), {"v": dD[:, n_seen:].T @ h + strength * v}

        v = minimize(loss_grad, {"v": np.zeros((Y.shape[1], self.rank))}, maxiter=100)["v"]
        return {**model, "v": np.vstack([model["v"], v])}

    def text_proba(self, model: dict[str, np.ndarray], X: np.ndarray, offset: np.ndarray, strength: float) -> np.ndarray:
        return sigmoid(offset + (X @ model["W"]) @ model["v"].T)
