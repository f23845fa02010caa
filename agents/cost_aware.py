"""``cost-aware``: per-model calibrated P(correct | question), routed with an explicit price on joules.

For each model m a logistic regression on the question's features (TF-IDF + SVD and the
benchmark one-hot, ``featurizer_for_context``), calibrated by cross-validation
(``CalibratedClassifierCV``, sigmoid by default), estimates ``P_m(x)`` = P(m answers x
correctly). ``J_m`` is m's mean training joules and ``J_ref`` the largest of them. Two rules:

- ``rule="penalty"`` (default): ``argmax_m P_m(x) - mu * J_m / J_ref``; ``mu = 0`` routes to
  the most likely correct model, a large ``mu`` to the cheapest;
- ``rule="threshold"``: the cheapest model with ``P_m(x) >= tau`` (the most likely correct one
  when none reaches it); a lower ``tau`` is cheaper.

Either number is the agent's cost knob (``cost_knob``): routing reads it, training does not,
so ``routing-gym frontier`` fits once and sweeps it. Fractional correctness c trains as one
positive example of weight c and one negative of weight 1 - c. A model that is always (or
never) right on the training rows, or whose rarer outcome has fewer rows than calibration
folds, gets a constant P (its training rate).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym.eval.frontier import CostKnob
from routing_gym.features import ObservationFeaturizer
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context
from routing_gym_agents.registry import register_agent

PENALTY_KNOB = CostKnob("mu", applies="act", cheaper_when="higher", grid=(0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 2.0))
THRESHOLD_KNOB = CostKnob("tau", applies="act", cheaper_when="lower", grid=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9))
RULES = ("penalty", "threshold")


@register_agent("cost-aware")
class CostAwareRouter(Agent):
    """Calibrated per-model success probabilities minus a price on joules (module docstring)."""

    name = "cost-aware"
    feedback = "full"
    trains_on_reward = False  # calibrated correctness; joules are priced by its own mu / tau

    def __init__(
        self,
        rule: Literal["penalty", "threshold"] = "penalty",
        mu: float = 0.2,
        tau: float = 0.5,
        features: str = "tfidf-svd",
        dim: int = 64,
        C: float = 1.0,
        calibration: Literal["sigmoid", "isotonic"] = "sigmoid",
        folds: int = 3,
    ):
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if not (np.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu (price of joules) must be a finite number >= 0, got {mu}")
        if not 0 <= tau <= 1:
            raise ValueError(f"tau (success threshold) must be in [0, 1], got {tau}")
        if calibration not in ("sigmoid", "isotonic"):
            raise ValueError(f"calibration must be 'sigmoid' or 'isotonic', got {calibration!r}")
        if folds < 2:
            raise ValueError(f"folds (calibration cross-validation) must be >= 2, got {folds}")
        self.rule, self.mu, self.tau = rule, float(mu), float(tau)
        self.feature_config: dict[str, Any] = {"kind": features, "dim": dim}
        self.C, self.calibration, self.folds = C, calibration, folds
        self.featurizer: ObservationFeaturizer | None = None

    @property
    def cost_knob(self) -> CostKnob:
        return PENALTY_KNOB if self.rule == "penalty" else THRESHOLD_KNOB

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.featurizer = featurizer_for_context(ctx, **self.feature_config)
        X = self.featurizer.transform(ctx.train_observations())
        outcomes = ctx.train_outcomes()
        self.models = [self._fit_model(X, outcomes.correct[:, m], ctx.seed) for m in range(ctx.n_models)]
        self.joules = outcomes.energy_j.mean(axis=0)
        self.j_ref = max(float(self.joules.max()), 1e-12)
        return {"mean_joules": self.joules.tolist(),
                "constant_models": [ctx.model_ids[m] for m, model in enumerate(self.models) if isinstance(model, float)]}

    def _fit_model(self, X: np.ndarray, correct: np.ndarray, seed: int) -> Any:
        """A calibrated classifier of one model's correctness, or its training rate (a float)."""
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold

        rate = float(correct.mean())
        fractional = not np.isin(correct, (0.0, 1.0)).all()
        if fractional:  # expected log loss of c: weight c on "right", 1 - c on "wrong"
            X, y, weight = np.vstack([X, X]), np.r_[np.ones(len(correct)), np.zeros(len(correct))], np.r_[correct, 1 - correct]
            keep = weight > 0
            X, y, weight = X[keep], y[keep], weight[keep]
        else:
            y, weight = correct.astype(int), None
        if min(int((y == 1).sum()), int((y == 0).sum())) < self.folds:
            return rate
        base = LogisticRegression(C=self.C, max_iter=1000, random_state=seed)
        # Shuffled folds: tournament rows come grouped by benchmark, and unshuffled folds would
        # calibrate each classifier on benchmarks it never saw.
        folds = StratifiedKFold(self.folds, shuffle=True, random_state=seed)
        return CalibratedClassifierCV(base, method=self.calibration, cv=folds).fit(X, y, sample_weight=weight)

    def predict_correct(self, batch: ObservationBatch) -> np.ndarray:
        """``[n, K]`` calibrated P(model answers correctly)."""
        if self.featurizer is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        X = self.featurizer.transform(batch)
        return np.stack([np.full(len(X), m) if isinstance(m, float) else m.predict_proba(X)[:, 1] for m in self.models], axis=1)

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        p = self.predict_correct(batch)
        if self.rule == "penalty":
            return (p - self.mu * self.joules / self.j_ref).argmax(axis=1)
        # Cheapest model that clears tau: the lowest joules among those that do, else the most likely right.
        reaches = p >= self.tau
        cheapest = np.where(reaches, self.joules[None, :], np.inf).argmin(axis=1)
        return np.where(reaches.any(axis=1), cheapest, p.argmax(axis=1))
