"""Bootstrap statistics over queries, spread over seeds, paired Pareto-dominance test.

Every policy in one comparison is scored on the same held-out queries, so the bootstrap
resamples *queries* and one ``BootstrapPlan`` (one set of resampled index multisets) serves
every policy and every metric: intervals are computed on the same resamples and paired
differences are exact per resample.

Intervals are percentile bootstrap intervals of a mean. A resample is stored as the count of
each query in it (a ``[B, n]`` matrix), so the B resampled means of any ``[n, m]`` block of
per-query values are one matrix product.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

import numpy as np

# Resamples are generated in chunks so that B x n never has to sit in memory at once for
# large splits; small plans keep their chunks cached.
_CHUNK_CELLS = 4_000_000


class BootstrapPlan:
    """``n_resamples`` resamples (with replacement) of ``n`` queries, reproducible from ``seed``."""

    def __init__(self, n: int, n_resamples: int = 2000, seed: int = 0):
        if n <= 0:
            raise ValueError(f"cannot bootstrap over {n} queries")
        if n_resamples < 10:
            raise ValueError(f"n_resamples must be >= 10, got {n_resamples}")
        self.n, self.n_resamples, self.seed = int(n), int(n_resamples), int(seed)
        self._chunk = max(1, min(self.n_resamples, _CHUNK_CELLS // self.n))
        self._cache: list[np.ndarray] | None = [] if self.n * self.n_resamples <= 2 * _CHUNK_CELLS else None

    def _counts(self) -> Iterator[np.ndarray]:
        if self._cache:
            yield from self._cache
            return
        rng = np.random.default_rng(self.seed)
        done = 0
        while done < self.n_resamples:
            b = min(self._chunk, self.n_resamples - done)
            idx = rng.integers(0, self.n, size=(b, self.n))
            offsets = (np.arange(b) * self.n)[:, None]
            counts = np.bincount((idx + offsets).ravel(), minlength=b * self.n).reshape(b, self.n).astype(np.float64)
            if self._cache is not None:
                self._cache.append(counts)
            done += b
            yield counts

    def means(self, values: np.ndarray) -> np.ndarray:
        """Resampled means of per-query ``values`` (``[n]`` or ``[n, m]``): ``[B]`` or ``[B, m]``."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape[0] != self.n:
            raise ValueError(f"expected {self.n} per-query values, got shape {values.shape}")
        flat = values.reshape(self.n, -1)
        out = np.concatenate([c @ flat for c in self._counts()], axis=0) / self.n
        return out.reshape((self.n_resamples,) + values.shape[1:])

    def ci(self, values: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile interval of the mean of each column of ``values``."""
        _check_confidence(confidence)
        tail = 100 * (1 - confidence) / 2
        low, high = np.percentile(self.means(values), [tail, 100 - tail], axis=0)
        return low, high


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_mean_ci(
    values: np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of one ``[n]`` sample."""
    low, high = BootstrapPlan(len(values), n_resamples, seed).ci(np.asarray(values), confidence)
    return float(low), float(high)


def seed_spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (0 for one seed), min and max of a per-seed metric.

    Equal values give their value exactly as the mean (a float sum would round), so a
    deterministic agent's row equals the fixed-model row it reproduces bit for bit.
    """
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return {"mean": float("nan"), "sd": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {
        "mean": float(v[0]) if (v == v[0]).all() else float(v.mean()),
        "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "min": float(v.min()),
        "max": float(v.max()),
        "n": int(len(v)),
    }


@dataclass
class DominanceTest:
    """Paired bootstrap test of "A Pareto-dominates B" on the same queries.

    A dominates B when its accuracy is higher or equal and its mean joules lower or equal,
    one of them strictly. ``prob_dominates`` is the share of bootstrap resamples in which
    that holds; ``p_value = 1 - prob_dominates`` (conservative: at least the
    intersection-union p-value of the component one-sided tests); ``dominates`` is
    ``prob_dominates >= confidence``.
    """

    delta_accuracy: float  # accuracy(A) - accuracy(B)
    delta_accuracy_ci: tuple[float, float]
    delta_energy_j: float  # mean J(A) - mean J(B)
    delta_energy_ci: tuple[float, float]
    prob_dominates: float
    p_value: float
    dominates: bool
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_dominance_test(
    correct_a: np.ndarray,
    energy_a: np.ndarray,
    correct_b: np.ndarray,
    energy_b: np.ndarray,
    plan: BootstrapPlan | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> DominanceTest:
    """Does A Pareto-dominate B (accuracy up, joules down) beyond query-sampling noise?

    Inputs are per-query values of both policies on the same queries in the same order.
    ``plan`` reuses one set of resamples across many tests (as ``compare`` does).
    """
    _check_confidence(confidence)
    arrays = [np.asarray(x, dtype=np.float64) for x in (correct_a, energy_a, correct_b, energy_b)]
    n = len(arrays[0])
    if any(a.shape != (n,) for a in arrays):
        raise ValueError(f"paired test needs four [n] arrays of equal length, got {[a.shape for a in arrays]}")
    plan = plan or BootstrapPlan(n, n_resamples, seed)
    diffs = np.stack([arrays[0] - arrays[2], arrays[1] - arrays[3]], axis=1)
    boot = plan.means(diffs)
    # A difference of 0/1 means can be exactly zero; treat float dust as a tie.
    scale = np.maximum(1.0, np.abs(diffs).max(axis=0))
    tol = 1e-12 * scale
    d_acc, d_j = boot[:, 0], boot[:, 1]
    weakly = (d_acc >= -tol[0]) & (d_j <= tol[1])
    strictly = (d_acc > tol[0]) | (d_j < -tol[1])
    prob = float((weakly & strictly).mean())
    tail = 100 * (1 - confidence) / 2
    ci = np.percentile(boot, [tail, 100 - tail], axis=0)
    return DominanceTest(
        delta_accuracy=float(diffs[:, 0].mean()),
        delta_accuracy_ci=(float(ci[0, 0]), float(ci[1, 0])),
        delta_energy_j=float(diffs[:, 1].mean()),
        delta_energy_ci=(float(ci[0, 1]), float(ci[1, 1])),
        prob_dominates=prob,
        p_value=1.0 - prob,
        dominates=prob >= confidence,
        confidence=confidence,
    )
