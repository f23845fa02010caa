"""``cost-aware``: per-model P(correct | question) nested in the label, routed with a price on joules.

For each model k a logistic regression whose intercept is the per-(benchmark, k) training
rate and whose text part (TF-IDF + SVD features with the benchmark one-hot,
``featurizer_for_context``) is an L2-penalised residual (``agents/nested.py``):
``logit P_k(x) = logit r_{b(x)k} + w_k . x``. The penalty is chosen on frontier's validation
part of train by the value of the routes there (under the agent's rule), "label only" among the candidates, then refitted on all of train.
Two rules, with ``J_bk`` model k's mean training joules on benchmark b:

- ``rule="penalty"`` (default): ``argmax_k P_k(x) - mu * J_{b(x)k} / J_ref``; ``mu = 0`` routes
  to the most likely correct model, a large ``mu`` to the cheapest;
- ``rule="threshold"``: the cheapest model with ``P_k(x) >= tau`` (the most likely correct one
  when none reaches it); a lower ``tau`` is cheaper.

Either number is the agent's cost knob (``cost_knob``): routing reads it, training does not,
so ``routing-gym frontier`` fits once and sweeps it. Fractional correctness c enters the log
loss as an expectation (weight c on "right", 1 - c on "wrong").
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from routing_gym.eval.frontier import CostKnob
from routing_gym_agents.nested import PRICE_KNOB, LabelNestedRouter, minimize, sigmoid
from routing_gym_agents.registry import register_agent

THRESHOLD_KNOB = CostKnob("tau", applies="act", cheaper_when="lower", grid=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9))
RULES = ("penalty", "threshold")


@register_agent("cost-aware")
class CostAwareRouter(LabelNestedRouter):
    """Label-nested per-model logistic regressions minus a price on joules (module docstring)."""

    name = "cost-aware"
    strengths = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)  # L2 penalty on the text weights (per query)

    def __init__(self, rule: Literal["penalty", "threshold"] = "penalty", tau: float = 0.5, **kwargs: Any):
        super().__init__(**kwargs)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if not 0 <= tau <= 1:
            raise ValueError(f"tau (success threshold) must be in [0, 1], got {tau}")
        self.rule, self.tau = rule, float(tau)

    @property
    def cost_knob(self) -> CostKnob:  # type: ignore[override]
        return PRICE_KNOB if self.rule == "penalty" else THRESHOLD_KNOB

    def fit_text(self, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, strength: float | None, seed: int) -> np.ndarray:
        n = len(X)

        def loss_grad(params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
            W = params["W"]
            z = offset + X @ W
            p = sigmoid(z)
            loss = float((np.logaddexp(0, z) - Y * z).sum() / n + 0.5 * strength * (W**2).sum())
            return loss, {"W": X.T @ (p - Y) / n + strength * W}

        return minimize(loss_grad, {"W": np.zeros((X.shape[1], Y.shape[1]))})["W"]

    def text_proba(self, model: np.ndarray, X: np.ndarray, offset: np.ndarray, strength: float) -> np.ndarray:
        return sigmoid(offset + X @ model)

    def fit_new_models(self, model: np.ndarray, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, seen_offset: np.ndarray,
                       seen_Y: np.ndarray, strength: float) -> np.ndarray:
        # One regression per model, no shared part: a new model's weights are fitted alone.
        return np.hstack([model, self.fit_text(X, offset, Y, strength, self.seed)])

    def _route(self, p: np.ndarray, joules: np.ndarray) -> np.ndarray:
        if self.rule == "penalty":
            return super()._route(p, joules)
        # Cheapest model that clears tau: the lowest joules among those that do, else the most likely right.
        reaches = p >= self.tau
        cheapest = np.where(reaches, joules, np.inf).argmin(axis=1)
        return np.where(reaches.any(axis=1), cheapest, p.argmax(axis=1))
