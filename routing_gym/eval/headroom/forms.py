"""The shared-difficulty map's forms: P(model k right | the question's share of models right, its benchmark).

**Shared shape** (the ceiling's forms, ``SHARED_FORMS``): ``logit P(k right | q in b) = a_bk +
g_b(d)``, one curve ``g_b`` over difficulty ``d`` per benchmark shared by every model, each model
only shifting it by its level ``a_bk``. Difficulty then moves every model alike on the logit
scale and never re-orders them: within a benchmark the model order is the label's, so the map
cannot say who wins a question, only how much the gap between models is worth on it (on the
probability scale the gaps shrink on questions every model gets right or wrong, where the price
rule then takes a cheaper model). One logistic regression per benchmark on (question, model)
pairs: the model's one-hot plus the features of ``d``:

- ``shared-linear``: ``g_b`` linear in the share;
- ``shared-spline``: ``g_b`` a quadratic spline of the share (``SHARE_KNOTS`` knots over [0, 1]).

**Crossing** (``CROSSING_FORMS``, a labelled *upper variant*): each model its own curve, so curves
cross and a "difficulty" score can re-order models on a question (a review found such a leak-free
map with pairwise AUC 0.70 on specialist-pool: it had learned who wins, not how hard):

- ``spline``: per (benchmark, model) a logistic regression on the spline of the share;
- ``pooled-spline``: per model one logistic regression on the spline plus the benchmark's
  one-hot, fitted on every benchmark at once.

The form is not picked by hand: every form is fitted on the training split with the headroom
folds (out of fold: a question is scored by a fit that never saw it), and within each family the
one with the lowest cross-fitted log loss is used (``FORM_RULE``, frozen here); the ceiling of
every form is reported beside it (``HeadroomResult.forms``). Test outcomes choose nothing.

A (benchmark, model) with one outcome class gets its rate; a benchmark absent from the fit rows,
the model's fit over all benchmarks.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

SHARE_KNOTS = 4  # the spline: knots at 0, 1/3, 2/3, 1 of the share of models right
SHARED_FORMS = ("shared-linear", "shared-spline")  # logit a_bk + g_b(d): difficulty never re-orders models
CROSSING_FORMS = ("spline", "pooled-spline")  # each model its own curve: the labelled upper variant
SHARE_FORMS = SHARED_FORMS + CROSSING_FORMS
FORM_RULE = (f"of the shared-shape forms {', '.join(SHARED_FORMS)} (logit P(k right | q in b) = a_bk + g_b(d)), the one "
             "with the lowest cross-fitted log loss of the training outcomes (the headroom folds: each question scored by "
             f"a fit that never saw it); the crossing upper variant likewise among {', '.join(CROSSING_FORMS)}; test "
             "outcomes choose nothing")
LOG_LOSS_CLIP = 1e-6


def share_right(correct: np.ndarray) -> np.ndarray:
    """``[n]`` each question's share of models right (mean correctness over the pool): its difficulty."""
    return np.asarray(correct, dtype=np.float64).mean(axis=1)


def _features(form: str, share: np.ndarray, codes: np.ndarray, n_benchmarks: int) -> np.ndarray:
    if form == "shared-linear":
        return share[:, None]
    from sklearn.preprocessing import SplineTransformer

    spline = SplineTransformer(n_knots=SHARE_KNOTS, degree=2, knots=np.linspace(0, 1, SHARE_KNOTS)[:, None],
                               extrapolation="constant").fit(np.array([[0.0], [1.0]]))
    x = spline.transform(share[:, None])
    return np.hstack([x, np.eye(n_benchmarks)[codes]]) if form == "pooled-spline" else x


def shared_difficulty_p(fit_correct: np.ndarray, fit_codes: np.ndarray, rows_correct: np.ndarray,
                        rows_codes: np.ndarray, n_benchmarks: int, fit_share: np.ndarray | None = None,
                        rows_share: np.ndarray | None = None, form: str = "spline") -> np.ndarray:
    """``[n, K]`` P(model k right | share, benchmark) under ``form`` (module docstring), fitted on the
    ``fit`` rows. The share is that of the ``K`` routed models themselves (``share_right`` of the
    correctness given: it reads the candidates' own outcomes, an upper bound) unless ``fit_share``
    / ``rows_share`` give it from other, reference models (leak-free: ``leak_free_ceiling``);
    ``rows_correct`` is read only for the inclusive share."""
    from sklearn.linear_model import LogisticRegression

    if form not in SHARE_FORMS:
        raise ValueError(f"unknown shared-difficulty form {form!r}; forms: {SHARE_FORMS}")
    fit_share = share_right(fit_correct) if fit_share is None else np.asarray(fit_share, dtype=np.float64)
    rows_share = share_right(rows_correct) if rows_share is None else np.asarray(rows_share, dtype=np.float64)
    x_fit = _features(form, fit_share, fit_codes, n_benchmarks)
    x_rows = _features(form, rows_share, rows_codes, n_benchmarks)
    right = np.asarray(fit_correct) >= 0.5
    out = np.zeros((len(x_rows), right.shape[1]))
    if form in SHARED_FORMS:
        return _shared_shape_p(right, fit_codes, x_fit, rows_codes, x_rows, n_benchmarks)

    def fit(mask: np.ndarray, m: int, rows: np.ndarray) -> np.ndarray:
        y = right[mask, m]
        if y.all() or not y.any():
            return np.full(int(rows.sum()), float(y.mean()) if len(y) else 0.5)
        return LogisticRegression(max_iter=1000).fit(x_fit[mask], y).predict_proba(x_rows[rows])[:, 1]

    if form == "pooled-spline":
        every = np.ones(len(fit_codes), dtype=bool)
        for m in range(right.shape[1]):
            out[:, m] = fit(every, m, np.ones(len(rows_codes), dtype=bool))
        return out
    for b in range(n_benchmarks):
        rows = rows_codes == b
        if rows.any():
            mask = fit_codes == b if (fit_codes == b).any() else np.ones(len(fit_codes), dtype=bool)
            for m in range(right.shape[1]):
                out[rows, m] = fit(mask, m, rows)
    return out


def _shared_shape_p(right: np.ndarray, fit_codes: np.ndarray, x_fit: np.ndarray, rows_codes: np.ndarray,
                    x_rows: np.ndarray, n_benchmarks: int) -> np.ndarray:
    """``logit P = a_bk + g_b(d)``: per benchmark one logistic regression on every (question, model)
    pair, the model's one-hot beside the difficulty features (``x``), so the curve is shared."""
    from sklearn.linear_model import LogisticRegression

    k = right.shape[1]
    out = np.zeros((len(x_rows), k))

    def pairs(x: np.ndarray) -> np.ndarray:  # [n * K, K + F]: question-major, model-minor (as ravel())
        return np.hstack([np.tile(np.eye(k), (len(x), 1)), np.repeat(x, k, axis=0)])

    for b in range(n_benchmarks):
        rows = rows_codes == b
        if not rows.any():
            continue
        mask = fit_codes == b if (fit_codes == b).any() else np.ones(len(fit_codes), dtype=bool)
        y = right[mask].ravel()
        if y.all() or not y.any():
            out[rows] = float(y.mean())
            continue
        model = LogisticRegression(max_iter=1000).fit(pairs(x_fit[mask]), y)
        out[rows] = model.predict_proba(pairs(x_rows[rows]))[:, 1].reshape(-1, k)
    return out


def log_loss(p: np.ndarray, correct: np.ndarray) -> float:
    """Mean log loss of ``[n, K]`` P(right) against the outcomes (P clipped to ``LOG_LOSS_CLIP``)."""
    p = np.clip(p, LOG_LOSS_CLIP, 1 - LOG_LOSS_CLIP)
    y = np.asarray(correct) >= 0.5
    return float(-(y * np.log(p) + (~y) * np.log(1 - p)).mean())


def choose_form(out_of_fold_p: Mapping[str, np.ndarray], correct: np.ndarray,
                among: tuple[str, ...] = SHARED_FORMS) -> tuple[str, dict[str, float]]:
    """``FORM_RULE``: the form of ``among`` with the lowest log loss and every given form's log loss,
    from each form's out-of-fold ``[n, K]`` P on the training rows (``correct``: their outcomes)."""
    losses = {form: log_loss(p, correct) for form, p in out_of_fold_p.items()}
    return min(among, key=losses.__getitem__), losses
