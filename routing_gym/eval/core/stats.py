"""Bootstrap statistics over queries, spread over seeds, paired Pareto-dominance test.

Every policy in one comparison is scored on the same held-out queries, so the bootstrap
resamples *queries* and one ``BootstrapPlan`` (one set of resampled index multisets) serves
every policy and every metric: intervals are computed on the same resamples and paired
differences are exact per resample.

Intervals are percentile bootstrap intervals of a mean. A resample is stored as the count of
each query in it (a ``[B, n]`` matrix), so the B resampled means of any ``[n, m]`` block of
per-query values are one matrix product. The counts are drawn once per plan and kept as
``uint8`` (B x n bytes: 60 MB for 2,000 resamples of 30,000 queries); callers that need many
statistics should stack their per-query values and call ``means`` once (``compare`` does).

Copies of one question are not independent draws: with ``groups`` (one id per query, e.g.
``tournament.duplicates.question_groups`` of the prompts) a plan resamples groups, not rows, and a
resampled mean divides by the resample's own number of rows (``BootstrapPlan.of_rows``). Without
copies the groups are the rows and every draw is the same as without them.

With ``strata`` (one label per query, e.g. its benchmark) each resample draws, within every
stratum, as many groups as the stratum holds, from that stratum's groups only: the splits are
stratified by benchmark, so the resamples keep each benchmark's share too (a copy group belongs to
the stratum of its first row). With one stratum the draws are those of the plain plan.

``resample_shape`` says when a percentile interval of resampled statistics is a poor summary: an
atom (one value held by many resamples) or two modes (a gap inside the interval).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from routing_gym.tournament.duplicates import question_groups

# Counts are converted to float64 for the matrix product in chunks of this many cells, so
# B x n float64 values never sit in memory at once.
_CHUNK_CELLS = 4_000_000
# Plans above this many cells (B x n bytes) are not kept; their counts are redrawn per call.
_MAX_CACHED_CELLS = 512_000_000


class BootstrapPlan:
    """``n_resamples`` resamples (with replacement) of ``n`` queries, reproducible from ``seed``."""

    def __init__(self, n: int, n_resamples: int = 2000, seed: int = 0, groups: np.ndarray | None = None,
                 strata: np.ndarray | None = None):
        if n <= 0:
            raise ValueError(f"cannot bootstrap over {n} queries")
        if n_resamples < 10:
            raise ValueError(f"n_resamples must be >= 10, got {n_resamples}")
        self.n, self.n_resamples, self.seed = int(n), int(n_resamples), int(seed)
        self._groups: np.ndarray | None = None
        if groups is not None:
            codes = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
            if len(codes) != self.n:
                raise ValueError(f"groups needs one id per query ({self.n}), got {len(codes)}")
            self._groups = None if codes.max() + 1 == self.n else codes  # all distinct: plain rows
        # each stratum's groups (ascending ids), or None for one stratum: the plain draw
        self._strata: list[np.ndarray] | None = None
        if strata is not None:
            labels = np.unique(np.asarray(strata), return_inverse=True)[1].ravel()
            if len(labels) != self.n:
                raise ValueError(f"strata needs one label per query ({self.n}), got {len(labels)}")
            groups_of = np.arange(self.n) if self._groups is None else self._groups
            first = np.unique(groups_of, return_index=True)[1]  # each group's first row
            group_stratum = labels[first]
            if group_stratum.max() > 0:
                self._strata = [np.flatnonzero(group_stratum == s) for s in range(group_stratum.max() + 1)]
        self._chunk = max(1, min(self.n_resamples, _CHUNK_CELLS // self.n))
        self._cache: list[np.ndarray] | None = [] if self.n * self.n_resamples <= _MAX_CACHED_CELLS else None

    @classmethod
    def of_rows(cls, prompts: Sequence[str], n_resamples: int = 2000, seed: int = 0,
                strata: np.ndarray | None = None) -> "BootstrapPlan":
        """A plan over queries with these question texts that resamples copies of a question
        (the same normalised text) together, within each stratum when ``strata`` is given."""
        return cls(len(prompts), n_resamples, seed, groups=question_groups(prompts), strata=strata)

    @property
    def n_groups(self) -> int:
        """How many independent units a resample draws (queries, or copy groups)."""
        return self.n if self._groups is None else int(self._groups.max()) + 1

    def _draw(self) -> Iterator[np.ndarray]:
        """The resample counts per query as integer ``[chunk, n]`` blocks, in resample order."""
        rng = np.random.default_rng(self.seed)
        units = self.n_groups
        done = 0
        while done < self.n_resamples:
            b = min(self._chunk, self.n_resamples - done)
            if self._strata is None:
                idx = rng.integers(0, units, size=(b, units))
            else:  # each stratum's groups drawn from its own groups, as many as it has
                idx = np.concatenate([members[rng.integers(0, len(members), size=(b, len(members)))]
                                      for members in self._strata], axis=1)
            offsets = (np.arange(b) * units)[:, None]
            counts = np.bincount((idx + offsets).ravel(), minlength=b * units).reshape(b, units)
            yield counts if self._groups is None else counts[:, self._groups]
            done += b

    def _counts(self) -> Iterator[np.ndarray]:
        """The resample counts as float64 blocks; drawn once and kept when the plan is small
        enough (a count above 255 would need astronomically bad luck, but stays exact)."""
        if self._cache is None:
            yield from (c.astype(np.float64) for c in self._draw())
            return
        if not self._cache:
            self._cache = [c.astype(np.uint8 if c.max() <= 255 else np.uint16) for c in self._draw()]
        yield from (c.astype(np.float64) for c in self._cache)

    def means(self, values: np.ndarray) -> np.ndarray:
        """Resampled means of per-query ``values`` (``[n]`` or ``[n, m]``): ``[B]`` or ``[B, m]``."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape[0] != self.n:
            raise ValueError(f"expected {self.n} per-query values, got shape {values.shape}")
        flat = values.reshape(self.n, -1)
        if self._groups is None:
            out = np.concatenate([c @ flat for c in self._counts()], axis=0) / self.n
        else:  # a resample of groups holds as many rows as its groups have
            out = np.concatenate([(c @ flat) / c.sum(axis=1, keepdims=True) for c in self._counts()], axis=0)
        return out.reshape((self.n_resamples,) + values.shape[1:])

    def ci(self, values: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile interval of the mean of each column of ``values``."""
        return percentile_interval(self.means(values), confidence)


def percentile_interval(resampled: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each column of ``[B, ...]`` resampled statistics."""
    _check_confidence(confidence)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail], axis=0)
    return low, high


ATOM = "atom"
TWO_MODES = "two modes"
ATOM_SHARE = 0.05  # twice a 95 % interval's tail: an atom this heavy moves an interval's end by itself
MODE_BINS = 16  # histogram bins across the interval for the two-modes rule
MODE_SHARE = 0.02  # each mode holds a bin with at least this share of the resamples
VALLEY_RATIO = 0.25  # a valley bin holds at most this share of the lower of the two modes' bins


def resample_shape(resampled: np.ndarray, confidence: float = 0.95) -> str:
    """What makes the percentile interval of ``[B]`` resampled statistics a poor summary: ``ATOM``
    where one value (to 1e-9 relative) is held by >= ``ATOM_SHARE`` of the resamples while the
    others differ, ``TWO_MODES`` where a histogram of the resamples across the interval (``MODE_BINS``
    bins) has a valley: a bin holding at most ``VALLEY_RATIO`` of the fuller bins on both sides,
    each holding >= ``MODE_SHARE`` of the resamples (a statistic that jumps between resamples;
    a unimodal histogram falls away from its peak, so no bin lies that far below both sides);
    both joined by ", "; "" for neither, for no spread and for NaN values (an undefined statistic)."""
    _check_confidence(confidence)
    v = np.sort(np.asarray(resampled, dtype=np.float64).ravel())
    if len(v) < 2 or not np.isfinite(v).all():
        return ""
    scale = max(1.0, float(np.abs(v).max()))
    if v[-1] - v[0] <= 1e-9 * scale:
        return ""
    flags = []
    ties = np.flatnonzero(np.diff(v) > 1e-9 * scale)  # ends of runs of equal values
    runs = np.diff(np.concatenate([[-1], ties, [len(v) - 1]]))
    if runs.max() >= ATOM_SHARE * len(v):
        flags.append(ATOM)
    low, high = percentile_interval(v, confidence)
    if high > low:
        counts = np.histogram(v, bins=MODE_BINS, range=(float(low), float(high)))[0]
        left, right = np.maximum.accumulate(counts), np.maximum.accumulate(counts[::-1])[::-1]
        sides = np.minimum(left[:-2], right[2:])  # the fuller bin on each side of bins 1 .. MODE_BINS - 2
        if ((counts[1:-1] <= VALLEY_RATIO * sides) & (sides >= MODE_SHARE * len(v))).any():
            flags.append(TWO_MODES)
    return ", ".join(flags)


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


# Axis names used in DominanceTest.tied_axis.
ACCURACY_AXIS, ENERGY_AXIS = "accuracy", "energy_j"


@dataclass
class DominanceTest:
    """Paired bootstrap test of "A Pareto-dominates B" on the same queries (strict).

    A dominates B when, in at least ``confidence`` of the query resamples, A is better on one
    axis (accuracy higher or mean joules lower) and not worse on the other; the better axis
    must be the same one in those resamples. ``prob_dominates`` is that share (the larger of
    the two axes); ``p_value = 1 - prob_dominates``. When A dominates but is not better on
    the other axis at the same confidence as well, that axis is a tie: ``tied_axis`` names
    it ("accuracy" or "energy_j"), and reports list such pairs apart from dominance on both
    axes. ``prob_better_*`` are the one-sided shares per axis.
    """

    delta_accuracy: float  # accuracy(A) - accuracy(B)
    delta_accuracy_ci: tuple[float, float]
    delta_energy_j: float  # mean J(A) - mean J(B)
    delta_energy_ci: tuple[float, float]
    prob_better_accuracy: float
    prob_better_energy: float
    prob_dominates: float
    p_value: float
    dominates: bool
    tied_axis: str  # "" unless A dominates while tied on one axis
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dominance_from_resamples(
    resampled_a: np.ndarray,
    resampled_b: np.ndarray,
    point_a: tuple[float, float],
    point_b: tuple[float, float],
    confidence: float = 0.95,
    scale: tuple[float, float] = (1.0, 1.0),
) -> DominanceTest:
    """The dominance test from resampled (accuracy, mean joules) of A and B (``[B, 2]`` each,
    the same resamples) and their full-sample values; ``scale`` sets the float-dust tolerance
    per axis (about the largest per-query value)."""
    _check_confidence(confidence)
    diff = np.asarray(resampled_a, dtype=np.float64) - np.asarray(resampled_b, dtype=np.float64)
    # A difference of 0/1 means can be exactly zero; treat float dust as a tie.
    tol = 1e-12 * np.maximum(1.0, np.asarray(scale, dtype=np.float64))
    better_acc, worse_acc = diff[:, 0] > tol[0], diff[:, 0] < -tol[0]
    better_j, worse_j = diff[:, 1] < -tol[1], diff[:, 1] > tol[1]
    p_better_acc, p_better_j = float(better_acc.mean()), float(better_j.mean())
    prob = max(float((better_acc & ~worse_j).mean()), float((better_j & ~worse_acc).mean()))
    dominates = prob >= confidence
    tied = ""
    if dominates and p_better_j < confidence:
        tied = ENERGY_AXIS
    elif dominates and p_better_acc < confidence:
        tied = ACCURACY_AXIS
    low, high = percentile_interval(diff, confidence)
    return DominanceTest(
        delta_accuracy=float(point_a[0] - point_b[0]),
        delta_accuracy_ci=(float(low[0]), float(high[0])),
        delta_energy_j=float(point_a[1] - point_b[1]),
        delta_energy_ci=(float(low[1]), float(high[1])),
        prob_better_accuracy=p_better_acc,
        prob_better_energy=p_better_j,
        prob_dominates=prob,
        p_value=1.0 - prob,
        dominates=dominates,
        tied_axis=tied,
        confidence=confidence,
    )


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
    ``plan`` reuses one set of resamples across many tests; for many pairs, resample every
    policy once and call ``dominance_from_resamples`` (as ``compare`` does).
    """
    _check_confidence(confidence)
    arrays = [np.asarray(x, dtype=np.float64) for x in (correct_a, energy_a, correct_b, energy_b)]
    n = len(arrays[0])
    if any(a.shape != (n,) for a in arrays):
        raise ValueError(f"paired test needs four [n] arrays of equal length, got {[a.shape for a in arrays]}")
    plan = plan or BootstrapPlan(n, n_resamples, seed)
    values = np.stack(arrays, axis=1)
    boot = plan.means(values)
    return dominance_from_resamples(
        boot[:, :2], boot[:, 2:], (values[:, 0].mean(), values[:, 1].mean()), (values[:, 2].mean(), values[:, 3].mean()),
        confidence, scale=(float(np.abs(values[:, [0, 2]]).max()), float(np.abs(values[:, [1, 3]]).max())),
    )
