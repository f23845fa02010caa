"""Family-wise control of verdict lines: which gains a table may call above or below 0.

A table gives each row a marginal 95 % interval; with ~20 rows x 2 gains, some interval excludes
0 by chance in most tables. The verdict lines are therefore decided by the Romano-Wolf step-down
procedure on the bootstrap resamples the table already draws (Romano & Wolf 2005, "Exact and
approximate stepdown methods for multiple hypothesis testing"; the studentised ``max |T|`` form):

- hypotheses: "gain h is 0", one per (row, gain) in the family (the deployable, verified rows);
  a rejection is read in the direction of the estimate ("above" or "below");
- statistic: ``|estimate| / se`` with ``se`` the bootstrap standard deviation;
- step 1 rejects every hypothesis whose statistic exceeds the (1 - alpha) quantile of
  ``max_h |resample_h - estimate_h| / se_h`` over the family; each later step repeats this over the
  hypotheses not yet rejected, until none is added.

This controls the probability of any false claim across the family at alpha (asymptotically);
a gain that is 0 in every resample (a policy of the yardstick itself) has no spread and is left
out of the family: nothing can be claimed about it. ``experiments/verdict_calibration.py``
measures the realised rate on tournaments whose truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ABOVE, BELOW, NONE = "above", "below", ""
_NO_SPREAD = 1e-12  # a standard error this small (in the gain's units) is float dust: no test


@dataclass(frozen=True)
class FamilyDecision:
    """Per hypothesis: the decision (``ABOVE``, ``BELOW`` or ``NONE``), its standard error and the
    simultaneous two-sided bound ``estimate -/+ critical x se`` of the first step (NaN for a
    hypothesis without spread); ``critical`` is that first-step critical value."""

    decisions: list[str]
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    critical: float
    steps: int


def stepdown(estimate: np.ndarray, resampled: np.ndarray, alpha: float = 0.05) -> FamilyDecision:
    """Romano-Wolf step-down decisions for ``[H]`` estimates from their ``[B, H]`` resamples
    (the same resamples for every hypothesis, so their dependence is kept). NaN resamples (a
    statistic undefined in that resample) are not allowed: leave such hypotheses out."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    estimate, resampled = np.asarray(estimate, dtype=np.float64), np.asarray(resampled, dtype=np.float64)
    if resampled.ndim != 2 or resampled.shape[1:] != estimate.shape:
        raise ValueError(f"need [H] estimates and [B, H] resamples, got {estimate.shape} and {resampled.shape}")
    if not (np.isfinite(estimate).all() and np.isfinite(resampled).all()):
        raise ValueError("family-wise decisions need finite estimates and resamples")
    h = len(estimate)
    se = resampled.std(axis=0, ddof=1) if len(resampled) > 1 else np.zeros(h)
    tested = se > _NO_SPREAD * np.maximum(1.0, np.abs(estimate))
    safe_se = np.where(tested, se, 1.0)
    statistic = np.where(tested, np.abs(estimate) / safe_se, 0.0)
    centred = np.abs(resampled - estimate) / safe_se  # [B, H]
    rejected, remaining = np.zeros(h, dtype=bool), tested.copy()
    critical, steps = np.nan, 0
    while remaining.any():
        c = float(np.quantile(centred[:, remaining].max(axis=1), 1 - alpha))
        if steps == 0:  # the first step's critical value gives the simultaneous bounds
            critical = c
        steps += 1
        new = remaining & (statistic > c)
        if not new.any():
            break
        rejected |= new
        remaining &= ~new
    decisions = [(ABOVE if e > 0 else BELOW) if r else NONE for e, r in zip(estimate, rejected)]
    width = np.where(tested, critical * se, np.nan) if np.isfinite(critical) else np.full(h, np.nan)
    return FamilyDecision(decisions, se, estimate - width, estimate + width, critical, steps)
