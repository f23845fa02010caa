"""Off-policy evaluation (OPE) with ground truth from a full tournament.

A deployed router logs only the outcome of the model it chose. OPE estimates how another
(target) policy would have done from such logs. A tournament knows every model's outcome
on every query, so it can *simulate* the log and also give the exact answer:

1. a logging policy ``pi0`` (``uniform_logging`` or ``epsilon_greedy_logging``, with known
   propensities) picks one model per query and only that outcome is revealed
   (``simulate_log``);
2. the target policy ``pi`` (actions or ``[n, K]`` probabilities) is scored by
   - **IPS**: ``mean_i w_i r_i`` with ``w_i = pi(a_i | x_i) / pi0(a_i | x_i)``;
   - **SNIPS**: ``sum_i w_i r_i / sum_i w_i``;
   - **DM** (direct method): ``mean_i sum_a pi(a | x_i) r_hat(x_i, a)`` with ``r_hat`` a
     scikit-learn regressor per model fitted on the logged (x, r) pairs;
   - **DR** (doubly robust): ``mean_i [sum_a pi(a | x_i) r_hat(x_i, a) + w_i (r_i - r_hat(x_i, a_i))]``
     with ``r_hat`` cross-fitted (query i's prediction comes from folds without i, which keeps
     DR unbiased whatever the regressor);
3. ``true_value`` is the exact ``mean_i sum_a pi(a | x_i) V[i, a]`` from the full table.

Values may carry several metrics at once (``[n, K, m]``: reward, correctness, joules): one
logged route reveals all of them, as a real log would, and one set of regressions (fitted
on the log, whatever the target) serves every metric and every target policy.

IPS and DR are unbiased when every action the target may take has positive logging
probability; SNIPS is consistent (biased for small n); DM is biased unless the regressor is
right. ``ope_trials`` repeats the log over seeds (for several targets and metrics) and ``summarize_trials`` reports bias,
standard deviation, RMSE and the coverage of each estimator's nominal 95 % interval.

scikit-learn is imported inside the functions that fit regressors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

ESTIMATORS = ("ips", "snips", "dm", "dr")
REGRESSORS = ("ridge", "gbm")
Z95 = 1.959963984540054


@dataclass
class LoggedData:
    """One simulated log: per query the logged action, its propensity and the revealed values."""

    actions: np.ndarray  # [n] model index chosen by the logging policy
    propensities: np.ndarray  # [n] pi0(a_i | x_i)
    rewards: np.ndarray  # [n, m] V[i, a_i, :], the only outcome revealed

    def __len__(self) -> int:
        return len(self.actions)

    def subset(self, mask: np.ndarray) -> LoggedData:
        return LoggedData(self.actions[mask], self.propensities[mask], self.rewards[mask])


@dataclass
class Estimate:
    value: np.ndarray  # [m] one estimate per metric
    se: np.ndarray  # [m] standard error from the per-query terms (nan where none is defined)


# ---------------------------------------------------------------------- policies
def as_probabilities(policy: np.ndarray, n_actions: int) -> np.ndarray:
    """``[n, K]`` action probabilities from ``[n]`` deterministic actions or ``[n, K]`` probabilities."""
    policy = np.asarray(policy)
    if policy.ndim == 1:
        if policy.dtype.kind not in "iu" or (policy < 0).any() or (policy >= n_actions).any():
            raise ValueError(f"deterministic actions must be integers in [0, {n_actions})")
        return np.eye(n_actions)[policy]
    if policy.ndim != 2 or policy.shape[1] != n_actions:
        raise ValueError(f"policy probabilities must have shape [n, {n_actions}], got {policy.shape}")
    if (policy < 0).any() or not np.allclose(policy.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("policy probabilities must be >= 0 and sum to 1 per query")
    return policy.astype(np.float64)


def uniform_logging(n: int, n_actions: int) -> np.ndarray:
    """``[n, K]``: every model with probability 1/K."""
    return np.full((n, n_actions), 1.0 / n_actions)


def epsilon_greedy_logging(base_actions: np.ndarray, n_actions: int, epsilon: float) -> np.ndarray:
    """``[n, K]``: the base policy's action with probability ``1 - epsilon + epsilon / K``,
    every other model with ``epsilon / K``."""
    if not 0 < epsilon <= 1:
        raise ValueError(f"epsilon must be in (0, 1] so that every model has positive propensity, got {epsilon}")
    return (1.0 - epsilon) * as_probabilities(np.asarray(base_actions), n_actions) + epsilon / n_actions


def simulate_log(values: np.ndarray, logging_probs: np.ndarray, rng: np.random.Generator) -> LoggedData:
    """Draw one action per query from ``logging_probs`` and reveal only its values."""
    values = _as_3d(values)
    _check_probs(values, logging_probs)
    cumulative = logging_probs.cumsum(axis=1)
    u = rng.random(len(values))[:, None] * cumulative[:, -1:]
    actions = np.minimum((u >= cumulative).sum(axis=1), values.shape[1] - 1)
    idx = np.arange(len(values))
    return LoggedData(actions, logging_probs[idx, actions], values[idx, actions])


def true_value(values: np.ndarray, target_probs: np.ndarray) -> np.ndarray | float:
    """The exact value of the target policy, ``mean_i sum_a pi(a | x_i) V[i, a]`` (per metric
    for ``[n, K, m]`` values)."""
    v = _as_3d(values)
    _check_probs(v, target_probs)
    out = np.einsum("ik,ikm->m", target_probs, v) / len(v)
    return float(out[0]) if np.ndim(values) == 2 else out


# ---------------------------------------------------------------------- estimators
def _weights(log: LoggedData, target_probs: np.ndarray) -> np.ndarray:
    if (log.propensities <= 0).any():
        raise ValueError("a logged action has propensity 0; IPS-type estimators need pi0(a_i | x_i) > 0")
    return target_probs[np.arange(len(log)), log.actions] / log.propensities


def ips(log: LoggedData, target_probs: np.ndarray) -> Estimate:
    terms = _weights(log, target_probs)[:, None] * log.rewards
    return Estimate(terms.mean(axis=0), _se(terms))


def snips(log: LoggedData, target_probs: np.ndarray) -> Estimate:
    w = _weights(log, target_probs)
    m = log.rewards.shape[1]
    if w.sum() <= 0:  # no logged action is one the target would take
        return Estimate(np.full(m, np.nan), np.full(m, np.nan))
    value = (w[:, None] * log.rewards).sum(axis=0) / w.sum()
    # Delta-method standard error of a ratio estimator.
    terms = w[:, None] * (log.rewards - value) / w.mean()
    return Estimate(value, _se(terms))


def dm(log: LoggedData, target_probs: np.ndarray, predicted: np.ndarray) -> Estimate:
    """Direct method from ``predicted[n, K, m]`` (``fit_predict`` on the log)."""
    value = np.einsum("ik,ikm->m", target_probs, predicted) / len(predicted)
    return Estimate(value, np.full(len(value), np.nan))


def dr(log: LoggedData, target_probs: np.ndarray, cross_fitted: np.ndarray) -> Estimate:
    """Doubly robust from cross-fitted ``[n, K, m]`` predictions (``cross_fit_predict``)."""
    idx = np.arange(len(log))
    residual = log.rewards - cross_fitted[idx, log.actions]
    terms = np.einsum("ik,ikm->im", target_probs, cross_fitted) + _weights(log, target_probs)[:, None] * residual
    return Estimate(terms.mean(axis=0), _se(terms))


def make_regressor(regressor: str | Callable[[], Any]) -> Any:
    """A fresh scikit-learn regressor: ``"ridge"`` (Ridge, alpha 1), ``"gbm"``
    (HistGradientBoostingRegressor, 100 iterations) or a zero-argument factory."""
    if callable(regressor):
        return regressor()
    if regressor == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge(alpha=1.0)
    if regressor == "gbm":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(max_iter=100, random_state=0)
    raise ValueError(f"unknown regressor {regressor!r}; choose one of {REGRESSORS} or pass a factory")


def fit_predict(
    features: np.ndarray, log: LoggedData, predict_features: np.ndarray, n_actions: int, regressor: str | Callable[[], Any] = "ridge"
) -> np.ndarray:
    """``[p, K, m]`` predicted values of every model for ``predict_features``.

    ``"ridge"`` is one multi-output Ridge on the features crossed with the logged model's
    one-hot (a separate linear model per model with a shared intercept, in one solve).
    Other regressors are fitted per model (and per metric) on the queries logged with that
    model; a model logged fewer than twice is predicted by the mean logged value.
    """
    m = log.rewards.shape[1]
    if regressor == "ridge":
        crossed = (features[:, :, None] * np.eye(n_actions)[log.actions][:, None, :]).reshape(len(log), -1)
        model = make_regressor(regressor).fit(crossed, log.rewards)
        weights = model.coef_.reshape(m, features.shape[1], n_actions)
        return np.einsum("pd,mda->pam", predict_features, weights) + model.intercept_
    out = np.broadcast_to(log.rewards.mean(axis=0), (len(predict_features), n_actions, m)).copy()
    for a in range(n_actions):
        mask = log.actions == a
        if mask.sum() < 2:
            continue
        for j in range(m):
            out[:, a, j] = make_regressor(regressor).fit(features[mask], log.rewards[mask, j]).predict(predict_features)
    return out


def cross_fit_predict(
    features: np.ndarray, log: LoggedData, n_actions: int, regressor: str | Callable[[], Any], folds: int, rng: np.random.Generator
) -> np.ndarray:
    """``[n, K, m]`` predictions where query i's come from regressors fitted without i's fold."""
    if folds < 2:
        raise ValueError(f"cross-fitting needs folds >= 2, got {folds}")
    fold = rng.permutation(len(log)) % folds
    out = np.empty((len(log), n_actions, log.rewards.shape[1]))
    for f in range(folds):
        held_out = fold == f
        out[held_out] = fit_predict(features[~held_out], log.subset(~held_out), features[held_out], n_actions, regressor)
    return out


# ---------------------------------------------------------------------- trials over seeds
def ope_trials(
    values: np.ndarray | dict[str, np.ndarray],
    features: np.ndarray,
    targets: np.ndarray | dict[str, np.ndarray],
    logging_probs: np.ndarray,
    seeds: Sequence[int],
    estimators: Sequence[str] = ESTIMATORS,
    regressor: str | Callable[[], Any] = "ridge",
    folds: int = 2,
    logged: Mapping[int, LoggedData] | None = None,
) -> pd.DataFrame:
    """One row per (seed, target, metric, estimator): ``estimate``, ``se``, ``truth``, ``error``.

    ``values`` is an ``[n, K]`` matrix or a dict of named ones (a reward matrix,
    correctness, joules) and ``targets`` a policy (``[n]`` actions or ``[n, K]``
    probabilities) or a dict of named ones; ``features[n, d]`` is what the DM/DR regressors
    see of each query. Each seed draws one log, shared by every target and metric.
    ``logged[seed]``, where given, is that seed's log instead (e.g. read from a Minari dataset,
    ``offline_dataset.logged_data``); its ``rewards`` columns follow ``values``' order.
    """
    named_values = values if isinstance(values, dict) else {"value": values}
    named_targets = targets if isinstance(targets, dict) else {"target": targets}
    unknown = set(estimators) - set(ESTIMATORS)
    if unknown:
        raise ValueError(f"unknown estimator(s) {sorted(unknown)}; choose from {ESTIMATORS}")
    metrics = list(named_values)
    stacked = np.stack([np.asarray(named_values[k], dtype=np.float64) for k in metrics], axis=-1)  # [n, K, m]
    n, k, _ = stacked.shape
    _check_probs(stacked, logging_probs)
    if len(features) != n:
        raise ValueError(f"features have {len(features)} rows for {n} queries")
    probs = {name: as_probabilities(policy, k) for name, policy in named_targets.items()}
    for name, target in probs.items():
        uncovered = (target > 0) & (logging_probs <= 0)
        if uncovered.any():
            raise ValueError(
                f"target {name!r} takes actions the logging policy never takes ({int(uncovered.sum())} query-action "
                "pairs): no estimator here is unbiased without overlap"
            )
    truths = {name: true_value(stacked, target) for name, target in probs.items()}
    rows = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        log = simulate_log(stacked, logging_probs, rng)  # drawn even when given: the folds' draws follow it
        if logged is not None and seed in logged:
            log = logged[seed]
            if log.rewards.shape != (n, len(metrics)):
                raise ValueError(f"logged[{seed}] reveals {log.rewards.shape} values, expected ({n}, {len(metrics)})")
        predicted = fit_predict(features, log, features, k, regressor) if "dm" in estimators else None
        cross_fitted = cross_fit_predict(features, log, k, regressor, folds, rng) if "dr" in estimators else None
        for name, target in probs.items():
            results = {
                "ips": lambda: ips(log, target),
                "snips": lambda: snips(log, target),
                "dm": lambda: dm(log, target, predicted),
                "dr": lambda: dr(log, target, cross_fitted),
            }
            for estimator in estimators:
                est = results[estimator]()
                for j, metric in enumerate(metrics):
                    rows.append({
                        "seed": seed, "target": name, "metric": metric, "estimator": estimator,
                        "estimate": est.value[j], "se": est.se[j], "truth": truths[name][j],
                        "error": est.value[j] - truths[name][j],
                    })
    return pd.DataFrame(rows)


def summarize_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (target, metric, estimator): truth, mean estimate, bias with a 95 % interval over
    seeds, sd, RMSE, and the share of seeds whose ``estimate +- 1.96 se`` covers the truth
    (nan for DM, which has no standard error)."""
    out = []
    for (target, metric, name), group in trials.groupby(["target", "metric", "estimator"], sort=False):
        err = group["error"].to_numpy()
        n = len(err)
        sd = float(err.std(ddof=1)) if n > 1 else float("nan")
        half = Z95 * sd / np.sqrt(n) if n > 1 else float("nan")
        se = group["se"].to_numpy()
        out.append(
            {
                "target": target, "metric": metric, "estimator": name, "seeds": n,
                "truth": float(group["truth"].iloc[0]),
                "mean_estimate": float(group["estimate"].mean()),
                "bias": float(err.mean()),
                "bias_ci_low": float(err.mean() - half),
                "bias_ci_high": float(err.mean() + half),
                "sd": sd,
                "rmse": float(np.sqrt(np.mean(err**2))),
                "coverage95": float((np.abs(err) <= Z95 * se).mean()) if np.isfinite(se).all() else float("nan"),
            }
        )
    return pd.DataFrame(out)


def _as_3d(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 2:
        return v[:, :, None]
    if v.ndim != 3:
        raise ValueError(f"values must be [n, K] or [n, K, m], got shape {v.shape}")
    return v


def _se(terms: np.ndarray) -> np.ndarray:
    n = len(terms)
    return terms.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(terms.shape[1], np.nan)


def _check_probs(values: np.ndarray, probs: np.ndarray) -> None:
    if np.shape(probs) != values.shape[:2]:
        raise ValueError(f"policy probabilities must be [n, K] = {values.shape[:2]}, got {np.shape(probs)}")
