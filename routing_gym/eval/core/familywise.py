"""Family-wise control of verdict lines: which gains a table may call above or below 0.

A table gives each row a marginal 95 % interval; with ~20 rows x 2 gains, some interval excludes
0 by chance in most tables. The verdict lines are therefore decided by a *balanced* Romano-Wolf
step-down on the bootstrap resamples the table already draws (Romano & Wolf 2005, "Exact and
approximate stepdown methods for multiple hypothesis testing"; balanced as in Beran 1988,
"Balanced simultaneous confidence sets", and Romano & Wolf 2010, "Balanced control of generalized
error rates"):

- hypotheses: "gain h is 0", one per (row, gain) in the family (the deployable, verified rows);
  a rejection is read in the direction of the estimate ("above" or "below");
- each hypothesis's centred resamples ``|resample_h - estimate_h|`` are mapped to their own
  bootstrap CDF (their ranks over the B resamples), so every hypothesis has the same marginal
  distribution whatever its scale or tails;
- step 1 takes, per resample, the largest of those CDF values over the family; its (1 - alpha)
  quantile ``q`` is one common level, and hypothesis h is rejected where ``|estimate_h|`` exceeds
  the ``q`` quantile of its own centred resamples; each later step repeats this over the
  hypotheses not yet rejected, until none is added.

Why balanced and not ``max |T| / se``: the gains are non-smooth functions of means (a yardstick
read at the method's joules), some heavy-tailed (kurtosis ~100 where a statistic sits near a
yardstick vertex); dividing by a bootstrap standard deviation does not make such statistics
alike, so the heaviest-tailed hypotheses set everyone's critical value (3.7-4.1 standard errors
where Gaussian statistics with the same correlations give 3.4) and power is lost on the rest.
Balancing gives every hypothesis the same share of the error rate.

This controls the probability of any false claim across the family at alpha (asymptotically);
a gain that is 0 in every resample (a policy of the yardstick itself) has no spread and is left
out of the family: nothing can be claimed about it. ``tests/test_familywise.py`` checks the rate
by simulation; ``experiments/verdict_calibration.py`` measures it on tournaments whose truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ABOVE, BELOW, NONE = "above", "below", ""
_NO_SPREAD = 1e-12  # a standard error this small (in the gain's units) is float dust: no test


@dataclass(frozen=True)
class FamilyDecision:
    """Per hypothesis: the decision (``ABOVE``, ``BELOW`` or ``NONE``), its bootstrap standard
    error and the simultaneous two-sided bound ``estimate -/+ critical_h`` of the first step, with
    ``critical_h`` the first step's quantile of its own centred resamples (NaN for a hypothesis
    without spread); ``level`` is that first step's common quantile level (above 1 - alpha: the
    family's maximum needs more than each one's marginal 95 %)."""

    decisions: list[str]
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    steps: int


def stepdown(estimate: np.ndarray, resampled: np.ndarray, alpha: float = 0.05) -> FamilyDecision:
    """Balanced Romano-Wolf step-down decisions for ``[H]`` estimates from their ``[B, H]``
    resamples (the same resamples for every hypothesis, so their dependence is kept). NaN
    resamples (a statistic undefined in that resample) are not allowed: leave such hypotheses out."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    estimate, resampled = np.asarray(estimate, dtype=np.float64), np.asarray(resampled, dtype=np.float64)
    if resampled.ndim != 2 or resampled.shape[1:] != estimate.shape:
        raise ValueError(f"need [H] estimates and [B, H] resamples, got {estimate.shape} and {resampled.shape}")
    if not (np.isfinite(estimate).all() and np.isfinite(resampled).all()):
        raise ValueError("family-wise decisions need finite estimates and resamples")
    b, h = resampled.shape
    se = resampled.std(axis=0, ddof=1) if b > 1 else np.zeros(h)
    tested = se > _NO_SPREAD * np.maximum(1.0, np.abs(estimate))
    centred = np.sort(np.abs(resampled - estimate), axis=0)  # [B, H], each column ascending
    # each centred resample's bootstrap CDF value within its own column (ties share the highest rank)
    cdf = np.stack([np.searchsorted(centred[:, j], np.abs(resampled[:, j] - estimate[j]), side="right")
                    for j in range(h)], axis=1) / b if h else np.zeros((b, 0))
    rejected, remaining = np.zeros(h, dtype=bool), tested.copy()
    level, critical, steps = np.nan, np.full(h, np.nan), 0
    while remaining.any():
        q = float(np.quantile(cdf[:, remaining].max(axis=1), 1 - alpha, method="inverted_cdf"))
        # the q quantile of each hypothesis's own centred resamples: its critical value
        c = centred[np.clip(np.ceil(q * b).astype(int) - 1, 0, b - 1)]
        if steps == 0:  # the first step's critical values give the simultaneous bounds
            level, critical = q, np.where(tested, c, np.nan)
        steps += 1
        new = remaining & (np.abs(estimate) > c)
        if not new.any():
            break
        rejected |= new
        remaining &= ~new
    decisions = [(ABOVE if e > 0 else BELOW) if r else NONE for e, r in zip(estimate, rejected)]
    return FamilyDecision(decisions, se, estimate - critical, estimate + critical, level, steps)
