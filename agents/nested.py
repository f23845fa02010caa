"""Label-nested correctness routers: the benchmark label first, the question text as a residual.

``cost-aware``, ``irt``, ``mf`` and ``gbdt`` model P(model k answers question x correctly)
starting from what the benchmark label alone says, the per-(benchmark, model) training rate
``r_bk``, and let the text move it only as far as a validation part of train supports:

    logit P_k(x) = logit r_{b(x)k} + s_k(x)        (gbdt: a blend of r_{b(x)k} and its own P)

``s_k`` is each agent's penalised residual; its strength (an L2 penalty, or gbdt's blend weight)
is chosen from the agent's ``strengths`` by the *value of its routes* on a validation part
(mean correctness - ``mu`` x joules / ``J_ref`` of the routed models there, at the agent's own
price ``mu``; a proper score such as log loss can improve while the argmax over K models gets
noisier), the part carved as ``routing-gym frontier`` carves it (``eval.frontier.carve_validation``: ``VALIDATION_SHARE`` of each
benchmark's training rows, seeded by the fit seed; the test split is never read), then refitted
on the whole training split. "Label only" (``s = 0``) is always a candidate, so a router whose
text does not help on validation routes exactly as the label does: the ``per-benchmark`` route
at the same price, a point of the task-aware hull (``fronts/hull.py``).

Routing prices joules per (benchmark, model), the unit in which the label already knows them:
``argmax_k P_k(x) - mu * J_{b(x)k} / J_ref``, ``J`` the mean training joules of model k on the
question's benchmark and ``J_ref`` the largest per-model mean (``per-benchmark``'s scale), so
``mu`` is the cost knob (read at routing time; ``frontier`` fits once and sweeps it).
``predict_correct`` and ``predict_energy`` expose both tables (``base.CorrectnessPredictor``,
``base.EnergyPredictor``).

A benchmark with no training rows (unseen; the fit logs' ``unseen_benchmarks``) takes the pooled
rate and joules of all training rows (``benchmark_means``' fallback) as its label part, and the
text residual reads its question with an all-zero benchmark one-hot (``ObservationFeaturizer``):
label only, it routes as ``per-benchmark`` would pool.

New models (``add_models``, ``routing_gym.eval.generalisation.unseen_models``): a new model's label part is its
per-benchmark calibration rate and joules, each shrunk towards its own calibration mean with
``CALIBRATION_PRIOR`` pseudo questions (a benchmark with few calibration questions is not decided
by them alone); its text part is fitted on the calibration questions with every parameter of the
questions kept (``fit_new_models``: the per-model weights of ``cost-aware`` and ``gbdt``, IRT's
ability vector, MF's model embedding) at the chosen strength. ``j_ref`` stays the training pool's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import UsageError
from routing_gym.eval.frontier import CostKnob, carve_validation
from routing_gym.features import ObservationFeaturizer
from routing_gym.fronts.hull import benchmark_means, best_per_benchmark
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context

if TYPE_CHECKING:
    from routing_gym.eval.generalisation.unseen_models import ModelDescription

VALIDATION_SHARE = 0.2
CALIBRATION_PRIOR = 5.0  # pseudo questions at a new model's calibration mean, per benchmark
LABEL_ONLY = math.inf  # the strength "no text": P is the per-(benchmark, model) rate
EPS = 1e-3  # rates of always- or never-right cells are clipped so their logits stay finite
PRICE_KNOB = CostKnob("mu", applies="act", cheaper_when="higher",
                      grid=(0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 1.0, 2.0, 5.0, 20.0))


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free


def minimize(loss_grad: Callable[[dict[str, np.ndarray]], tuple[float, dict[str, np.ndarray]]],
             params: dict[str, np.ndarray], maxiter: int = 200) -> dict[str, np.ndarray]:
    """scipy's L-BFGS over named arrays: ``loss_grad(params) -> (loss, gradients by name)``."""
    from scipy.optimize import minimize as scipy_minimize

    names = list(params)
    shapes = [params[k].shape for k in names]
    cuts = np.cumsum([0] + [int(np.prod(sh)) for sh in shapes])

    def unpack(flat: np.ndarray) -> dict[str, np.ndarray]:
        return {k: flat[a:b].reshape(sh) for k, a, b, sh in zip(names, cuts[:-1], cuts[1:], shapes)}

    def fun(flat: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grads = loss_grad(unpack(flat))
        return loss, np.concatenate([grads[k].ravel() for k in names])

    x0 = np.concatenate([params[k].ravel() for k in names]).astype(np.float64)
    result = scipy_minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
    return unpack(result.x)


def shrunk_benchmark_means(values: np.ndarray, codes: np.ndarray, n_benchmarks: int,
                           prior: float = CALIBRATION_PRIOR) -> np.ndarray:
    """``[n_benchmarks, K]`` per-benchmark means of ``[n, K]`` values, each shrunk towards the
    column's overall mean with ``prior`` pseudo rows (a benchmark without rows: that mean)."""
    sums = np.zeros((n_benchmarks, values.shape[1]))
    np.add.at(sums, codes, values)
    counts = np.bincount(codes, minlength=n_benchmarks)[:, None]
    return (sums + prior * values.mean(axis=0)) / (counts + prior)


def validation_parts(ctx: FitContext) -> tuple[np.ndarray, np.ndarray] | None:
    """Training-row positions of frontier's fit and validation parts, or None when the training
    split is too small to carve (some part would be empty)."""
    try:
        carved = carve_validation(ctx.train_tournament, ctx.train_split, VALIDATION_SHARE, ctx.seed)
    except UsageError:
        return None
    return carved.split_rows(f"{ctx.train_split}:fit"), carved.split_rows(f"{ctx.train_split}:validation")


class LabelNestedRouter(Agent):
    """Base of the label-nested routers (module docstring). A subclass sets ``strengths``
    (candidate residual strengths; ``LABEL_ONLY`` is always a candidate too) and implements ``fit_text`` / ``text_proba``; ``strength_in_fit = False`` says the strength
    only enters ``text_proba`` (one fit per data part serves every candidate)."""

    feedback = "full"
    trains_on_reward = False  # models correctness; joules enter through its own price mu
    cost_knob: ClassVar[CostKnob] = PRICE_KNOB
    strengths: ClassVar[tuple[float, ...]] = ()
    strength_in_fit: ClassVar[bool] = True
    describes_new_models = True

    def __init__(self, mu: float = 0.2, features: str = "tfidf-svd", dim: int = 64, strength: float | None = None):
        if not (np.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu (price of joules) must be a finite number >= 0, got {mu}")
        if strength is not None and not strength >= 0:
            raise ValueError(f"strength must be None (chosen on validation) or >= 0, got {strength}")
        self.mu = float(mu)
        self.strength = strength
        self.feature_config: dict[str, Any] = {"kind": features, "dim": dim}
        self.featurizer: ObservationFeaturizer | None = None

    # ------------------------------------------------------------------ the residual, per subclass
    def fit_text(self, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, strength: float | None, seed: int) -> Any:
        """Fit the text residual on features ``X`` [n, d], label logits ``offset`` [n, K] and
        correctness ``Y`` [n, K] (``strength`` None when ``strength_in_fit`` is False)."""
        raise NotImplementedError

    def text_proba(self, model: Any, X: np.ndarray, offset: np.ndarray, strength: float) -> np.ndarray:
        """``[n, K]`` P(correct) of a fitted residual."""
        raise NotImplementedError

    def fit_new_models(self, model: Any, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, seen_offset: np.ndarray,
                       seen_Y: np.ndarray, strength: float) -> Any:
        """The fitted residual ``model`` extended by new models' columns, fitted on calibration
        features ``X`` with their label logits ``offset`` and correctness ``Y`` ([n, K_new]) and the
        seen models' (``seen_offset``, ``seen_Y``: [n, K_seen]), the question-side parameters kept."""
        raise NotImplementedError

    def _check_fitted(self) -> None:
        if self.featurizer is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")

    def featurize(self, batch: ObservationBatch) -> np.ndarray:
        self._check_fitted()
        return self.featurizer.transform(batch).astype(np.float64)

    # ------------------------------------------------------------------ fit: label, validation, refit
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.featurizer = featurizer_for_context(ctx, **self.feature_config)
        train = ctx.train_observations()
        X, codes = self.featurize(train), np.asarray(train.benchmarks, dtype=np.int64)
        outcomes = ctx.train_outcomes()
        Y = np.asarray(outcomes.correct, dtype=np.float64)
        self.n_benchmarks = len(ctx.benchmarks)
        self.joules = benchmark_means(outcomes.energy_j, codes, self.n_benchmarks)
        self.j_ref = max(float(outcomes.energy_j.mean(axis=0).max()), 1e-12)
        E = np.asarray(outcomes.energy_j, dtype=np.float64)
        candidates = [LABEL_ONLY, *self.strengths]
        scores: dict[str, float] = {}
        parts = validation_parts(ctx) if self.strength is None else None
        if self.strength is not None:
            chosen = float(self.strength)
        elif parts is None:
            chosen = LABEL_ONLY  # too few rows to judge the text: trust the label
        else:
            fit_rows, val_rows = parts
            fit_rates = benchmark_means(Y[fit_rows], codes[fit_rows], self.n_benchmarks)
            fit_joules = benchmark_means(E[fit_rows], codes[fit_rows], self.n_benchmarks)[codes[val_rows]]
            fit_off, val_off = logit(fit_rates[codes[fit_rows]]), logit(fit_rates[codes[val_rows]])
            shared = None if self.strength_in_fit else self.fit_text(X[fit_rows], fit_off, Y[fit_rows], None, ctx.seed)
            for s in candidates:
                if s == LABEL_ONLY:
                    p = sigmoid(val_off)
                else:
                    model = shared if shared is not None else self.fit_text(X[fit_rows], fit_off, Y[fit_rows], s, ctx.seed)
                    p = self.text_proba(model, X[val_rows], val_off, s)
                # Judged by what the router is for: the validation value of its routes at its own price.
                routes = self._route(p, fit_joules)
                taken = np.arange(len(val_rows)), routes
                scores[f"{s:g}"] = float((Y[val_rows][taken] - self.mu * E[val_rows][taken] / self.j_ref).mean())
            chosen = max(candidates, key=lambda s: scores[f"{s:g}"])  # ties: the first, label only
        self.chosen_strength = chosen
        self.seed = ctx.seed
        self.rates = benchmark_means(Y, codes, self.n_benchmarks)
        self.text_model = None
        if chosen != LABEL_ONLY:
            self.text_model = self.fit_text(X, logit(self.rates[codes]), Y, chosen if self.strength_in_fit else None, ctx.seed)
        seen = set(np.unique(codes).tolist())
        return {"strength": "label only" if chosen == LABEL_ONLY else chosen, "validation_value": scores,
                "unseen_benchmarks": [b for i, b in enumerate(ctx.benchmarks) if i not in seen],
                "validation_share": VALIDATION_SHARE if parts is not None else None}

    # ------------------------------------------------------------------ new models
    def add_models(self, description: ModelDescription) -> None:
        """Append new models described by calibration outcomes (module docstring)."""
        self._check_fitted()
        codes = self._codes(description.observations)
        Y = np.asarray(description.outcomes.correct, dtype=np.float64)
        rates = shrunk_benchmark_means(Y, codes, self.n_benchmarks)
        joules = shrunk_benchmark_means(np.asarray(description.outcomes.energy_j, dtype=np.float64), codes, self.n_benchmarks)
        if self.text_model is not None:
            seen_Y = np.asarray(description.seen_outcomes.correct, dtype=np.float64)
            self.text_model = self.fit_new_models(self.text_model, self.featurize(description.observations),
                                                  logit(rates[codes]), Y, logit(self.rates[codes]), seen_Y,
                                                  self.chosen_strength)
        self.rates, self.joules = np.hstack([self.rates, rates]), np.hstack([self.joules, joules])

    # ------------------------------------------------------------------ routing
    def _codes(self, batch: ObservationBatch) -> np.ndarray:
        codes = np.asarray(batch.benchmarks, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= self.n_benchmarks):
            raise ValueError(f"{self.name}: benchmark codes {codes.min()}..{codes.max()} outside the "
                             f"{self.n_benchmarks} benchmarks it was trained on")
        return codes

    def predict_correct(self, batch: ObservationBatch) -> np.ndarray:
        """``[n, K]`` P(model k answers correctly): the label's rate moved by the text residual."""
        self._check_fitted()
        offset = logit(self.rates[self._codes(batch)])
        if self.text_model is None:  # label only: the text is not read (no features computed)
            return sigmoid(offset)
        return self.text_proba(self.text_model, self.featurize(batch), offset, self.chosen_strength)

    def predict_energy(self, batch: ObservationBatch) -> np.ndarray:
        """``[n, K]`` joules: each model's mean training joules on the query's benchmark."""
        self._check_fitted()
        return self.joules[self._codes(batch)]

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return self._route(self.predict_correct(batch), self.predict_energy(batch))

    def _route(self, p: np.ndarray, joules: np.ndarray) -> np.ndarray:
        """The routing rule on ``[n, K]`` P(correct) and joules: ``argmax P - mu J / J_ref``, ties to the cheaper."""
        return best_per_benchmark(p - self.mu * joules / self.j_ref, joules)
