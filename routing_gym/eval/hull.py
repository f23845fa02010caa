"""The fixed-model hull and routing gain: does a router route, or only mix fixed models?

Sending each query to fixed model i with probability w_i (a random mix of fixed models,
RouterBench's "zero router") reaches every convex combination of the fixed models' (mean
joules, accuracy) points. With free disposal (a budget of x joules may be under-spent) the
best accuracy a mix reaches at mean joules x is the **upper, non-decreasing concave hull**
of those points. A router *routes* when it sits above that hull:

- **routing gain** = accuracy - hull accuracy at the router's mean joules (pp);
- **joules saved** = (hull joules at the router's accuracy - router joules) / hull joules (%).

Outside the hull's range (cheaper than the cheapest fixed model, or more accurate than the
most accurate one) there is no mix to compare with; the nearest end point of the hull is
used instead and the result is labelled (``HullPosition``).

Every function broadcasts over leading batch axes: points have shape ``[..., K]`` and the
queried values ``[...]``, so one call evaluates a hull per bootstrap resample (``[B, K]``
points, ``[B]`` queries). The hull value is computed from all K^2 pairs of points (in two
dimensions every point of a convex hull's boundary mixes at most two points), which needs
no per-resample hull construction and stays vectorized.

**The task-aware hull: does a router read the question, or only its benchmark?** A router
that sees only the benchmark label can still beat the fixed-model hull by sending each
benchmark to its own model. The yardstick for that: for every trade-off lambda >= 0, per
benchmark the model maximising accuracy - lambda x joules *on the training split*
(``task_routing``; the distinct choices are enumerated exactly, one per interval between the
per-benchmark hulls' slopes), evaluated on test; with the fixed models, their random mixes'
upper hull is the **task-aware hull** (so it never lies below the fixed-model hull and equals
it when there is one benchmark):

- **content gain** = accuracy - task-aware hull accuracy at the method's mean joules (pp): what
  the method gains from reading the question beyond its benchmark label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Labels of where a method lies relative to the hull's range (stored in every output).
WITHIN = "within"
CHEAPER_THAN_HULL = "cheaper than every fixed model: compared with the cheapest end point"
COSTLIER_THAN_HULL = "beyond the most accurate fixed model: compared with it"
LESS_ACCURATE_THAN_HULL = "less accurate than the cheapest fixed model: compared with it"
MORE_ACCURATE_THAN_HULL = "more accurate than every fixed model: compared with the most accurate"
TASK_ROUTE_PREFIX = "per-benchmark #"  # the task-aware hull's routes in outputs
TASK_HULL_RULE = ("upper hull of random mixes of the fixed models and of the per-benchmark routes: for every trade-off "
                  "lambda, each benchmark to the model maximising accuracy - lambda x J on the training split, evaluated "
                  "on test; content gain = accuracy - task-aware hull accuracy at the method's mean J (pp), what the "
                  "method gains from reading the question beyond its benchmark label")


def _points(energy_j: np.ndarray, accuracy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    joules = np.asarray(energy_j, dtype=np.float64)
    acc = np.asarray(accuracy, dtype=np.float64)
    if joules.shape != acc.shape or joules.ndim == 0 or joules.shape[-1] == 0:
        raise ValueError(f"hull points need equal shapes [..., K] with K >= 1, got {joules.shape} and {acc.shape}")
    if not (np.isfinite(joules).all() and np.isfinite(acc).all()):
        raise ValueError("hull points must be finite")
    return joules, acc


def hull_accuracy_at(energy_j: np.ndarray, accuracy: np.ndarray, joules: np.ndarray) -> np.ndarray:
    """Best accuracy a random mix of the points reaches spending at most ``joules`` on average.

    ``energy_j``, ``accuracy``: ``[..., K]`` points; ``joules``: ``[...]``. Below the cheapest
    point (no mix is that cheap) the cheapest point's accuracy is returned (the nearest end
    point; among equally cheap points the most accurate).
    """
    xs, ys = _points(energy_j, accuracy)
    x = np.asarray(joules, dtype=np.float64)[..., None, None]
    xi, yi = xs[..., :, None], ys[..., :, None]  # the cheaper end of a pair (axis -2)
    xj, yj = xs[..., None, :], ys[..., None, :]  # the other end (axis -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Mixing i with a costlier j until the budget x is spent (or all on j once x >= xj).
        t = np.clip((x - xi) / (xj - xi), 0.0, 1.0)
        mixed = np.where(xj > xi, yi + t * (yj - yi), yi)
    value = np.where(xi <= x, np.maximum(mixed, yi), -np.inf).max(axis=(-2, -1))
    cheapest = np.take_along_axis(ys, _cheapest(xs, ys)[..., None], axis=-1)[..., 0]
    return np.where(np.isfinite(value), value, cheapest)


def hull_joules_at(energy_j: np.ndarray, accuracy: np.ndarray, target_accuracy: np.ndarray) -> np.ndarray:
    """Least mean joules with which a random mix of the points reaches ``target_accuracy``.

    Above the most accurate point (no mix gets there) its joules are returned (the nearest
    end point; among equally accurate points the cheapest).
    """
    xs, ys = _points(energy_j, accuracy)
    a = np.asarray(target_accuracy, dtype=np.float64)[..., None, None]
    xi, yi = xs[..., :, None], ys[..., :, None]  # the less accurate end of a pair
    xj, yj = xs[..., None, :], ys[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.clip((a - yi) / (yj - yi), 0.0, 1.0)
        mixed = np.where(yj > yi, xi + t * (xj - xi), xi)
    # A pair reaches a if its better end does; if i alone reaches it, i alone is a candidate.
    reach = np.where(yi >= a, xi, np.where(yj >= a, mixed, np.inf))
    value = reach.min(axis=(-2, -1))
    best = np.take_along_axis(xs, _most_accurate(xs, ys)[..., None], axis=-1)[..., 0]
    return np.where(np.isfinite(value), value, best)


def _cheapest(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Index of the cheapest point, the most accurate among ties (``[...]``)."""
    return np.lexsort((-ys, xs), axis=-1)[..., 0]


def _most_accurate(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Index of the most accurate point, the cheapest among ties (``[...]``)."""
    return np.lexsort((xs, -ys), axis=-1)[..., 0]


@dataclass(frozen=True)
class Hull:
    """The vertices of the upper, non-decreasing concave hull of one set of points, from the
    cheapest point to the most accurate one (both coordinates strictly increasing)."""

    energy_j: np.ndarray
    accuracy: np.ndarray
    vertex_index: np.ndarray  # index of each vertex among the input points

    @property
    def joule_range(self) -> tuple[float, float]:
        return float(self.energy_j[0]), float(self.energy_j[-1])

    @property
    def accuracy_range(self) -> tuple[float, float]:
        return float(self.accuracy[0]), float(self.accuracy[-1])

    def gain_position(self, joules: float) -> str:
        """Where a method's mean joules lie relative to the hull (one of the labels above);
        an end point's own value, up to float rounding, is within."""
        low, high = _widen(*self.joule_range)
        return CHEAPER_THAN_HULL if joules < low else COSTLIER_THAN_HULL if joules > high else WITHIN

    def saving_position(self, accuracy: float) -> str:
        low, high = _widen(*self.accuracy_range)
        return LESS_ACCURATE_THAN_HULL if accuracy < low else MORE_ACCURATE_THAN_HULL if accuracy > high else WITHIN


def _widen(low: float, high: float) -> tuple[float, float]:
    """The range plus float dust: a mean computed in another order may differ in the last bits."""
    return low - 1e-9 * max(1.0, abs(low)), high + 1e-9 * max(1.0, abs(high))


def fixed_model_hull(energy_j: np.ndarray, accuracy: np.ndarray) -> Hull:
    """Vertices of the upper, non-decreasing concave hull of ``[K]`` points (monotone chain).

    Points strictly inside, on a hull edge, dominated, or duplicating a vertex are not
    vertices; of several equally cheap points only the most accurate can be one.
    """
    xs, ys = _points(energy_j, accuracy)
    if xs.ndim != 1:
        raise ValueError(f"fixed_model_hull takes one set of [K] points, got shape {xs.shape}")
    start, stop = int(_cheapest(xs, ys)), int(_most_accurate(xs, ys))
    # Candidates: from the cheapest point to the most accurate one, by joules then accuracy.
    keep = [i for i in np.lexsort((-ys, xs)) if xs[start] <= xs[i] <= xs[stop] and ys[i] >= ys[start]]
    chain: list[int] = []
    for i in keep:
        if chain and xs[i] == xs[chain[-1]]:
            continue  # equally cheap and (by the sort) no more accurate
        # Pop the last vertex while it lies on or below the segment from its predecessor to i.
        while len(chain) >= 2:
            o, m = chain[-2], chain[-1]
            cross = (xs[m] - xs[o]) * (ys[i] - ys[o]) - (ys[m] - ys[o]) * (xs[i] - xs[o])
            if cross < 0:
                break
            chain.pop()
        if chain and ys[i] <= ys[chain[-1]]:
            continue  # no more accurate than a cheaper vertex: dominated
        chain.append(i)
    index = np.array(chain, dtype=np.int64)
    return Hull(energy_j=xs[index], accuracy=ys[index], vertex_index=index)


def routing_gain(
    energy_j: np.ndarray, accuracy: np.ndarray, method_energy_j: np.ndarray, method_accuracy: np.ndarray
) -> np.ndarray:
    """Method accuracy minus the hull's accuracy at the method's mean joules (a fraction;
    x 100 for pp). Broadcasts: points ``[..., K]``, method values ``[...]``."""
    return np.asarray(method_accuracy, dtype=np.float64) - hull_accuracy_at(energy_j, accuracy, method_energy_j)


def joules_saved(
    energy_j: np.ndarray, accuracy: np.ndarray, method_energy_j: np.ndarray, method_accuracy: np.ndarray
) -> np.ndarray:
    """Share of the hull's joules at the method's accuracy that the method does not spend
    (a fraction; x 100 for %; negative when the method spends more than a mix would)."""
    hull_j = hull_joules_at(energy_j, accuracy, method_accuracy)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (hull_j - np.asarray(method_energy_j, dtype=np.float64)) / hull_j


def mean_gain_over_range(
    energy_j: np.ndarray,
    accuracy: np.ndarray,
    curve_energy_j: np.ndarray,
    curve_accuracy: np.ndarray,
    n_grid: int = 256,
) -> np.ndarray:
    """Area between a curve of operating points and the fixed-model hull over their common
    joule range, divided by its width: the mean routing gain along the curve (fraction).

    The curve is read as its own hull (its operating points can be mixed too). Points
    ``[..., K]``, curve ``[..., C]``; the result is ``[...]``, NaN where the ranges do not
    overlap. A trapezoid rule on ``n_grid`` evenly spaced joule values.
    """
    xs, ys = _points(energy_j, accuracy)
    cx, cy = _points(curve_energy_j, curve_accuracy)
    low = np.maximum(xs.min(axis=-1), cx.min(axis=-1))
    high = np.minimum(xs.max(axis=-1), cx.max(axis=-1))
    grid = low[..., None] + (high - low)[..., None] * np.linspace(0.0, 1.0, n_grid)
    gap = hull_accuracy_at(cx[..., None, :], cy[..., None, :], grid) - hull_accuracy_at(xs[..., None, :], ys[..., None, :], grid)
    area = ((gap[..., 1:] + gap[..., :-1]) / 2).mean(axis=-1)
    return np.where(high > low, area, np.nan)


# ---------------------------------------------------------------------- the task-aware hull
def benchmark_means(values: np.ndarray, codes: np.ndarray, n_benchmarks: int) -> np.ndarray:
    """``[n_benchmarks, K]`` per-benchmark means of per-query ``[n, K]`` values; a benchmark with
    no rows gets the mean over all rows (a router meeting a benchmark it never trained on)."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    if values.ndim != 2 or len(values) != len(codes) or len(codes) == 0:
        raise ValueError(f"benchmark_means needs [n, K] values and n >= 1 codes, got {values.shape} and {codes.shape}")
    if codes.min() < 0 or codes.max() >= n_benchmarks:
        raise ValueError(f"benchmark codes must lie in [0, {n_benchmarks}), got {codes.min()}..{codes.max()}")
    sums = np.zeros((n_benchmarks, values.shape[1]))
    np.add.at(sums, codes, values)
    counts = np.bincount(codes, minlength=n_benchmarks)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, values.mean(axis=0))


def best_per_benchmark(score: np.ndarray, joules: np.ndarray) -> np.ndarray:
    """``[B]`` model index maximising ``score`` per benchmark (``[B, K]``), the cheapest
    (``joules``) among ties, then the lowest index."""
    score = np.asarray(score, dtype=np.float64)
    best = score.max(axis=-1, keepdims=True)
    tied = score >= best - 1e-12 * np.maximum(1.0, np.abs(best))
    return np.where(tied, np.asarray(joules, dtype=np.float64), np.inf).argmin(axis=-1)


@dataclass(frozen=True)
class TaskRouting:
    """The routes a benchmark-label-only router takes along the trade-off lambda: row ``p`` of
    ``choices`` is the model of each benchmark (``[P, n_benchmarks]``), optimal on the training
    split for every lambda in ``[lambda_low[p], lambda_high[p]]`` (accuracy per joule; the last
    interval is unbounded). Ordered from lambda = 0 (the most accurate) to the cheapest."""

    choices: np.ndarray
    lambda_low: np.ndarray
    lambda_high: np.ndarray

    def __len__(self) -> int:
        return len(self.choices)

    def per_query(self, values: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """``[n, P]``: each query's value (``[n, K]``, e.g. test correctness) under each route."""
        values = np.asarray(values)
        return np.take_along_axis(values, self.choices[:, np.asarray(codes, dtype=np.int64)].T, axis=1)

    def labels(self) -> list[str]:
        """``per-benchmark #p``, the name of each route in outputs (``p`` counts from lambda = 0)."""
        return [f"{TASK_ROUTE_PREFIX}{p}" for p in range(len(self))]

    def describe(self, benchmarks: list[str], model_ids: list[str]) -> list[dict[str, Any]]:
        """Each route as a JSON-ready record: its label, lambda interval and model per benchmark."""
        return [{"route": label, "lambda_low": float(low), "lambda_high": float(high),
                 "models": {b: model_ids[m] for b, m in zip(benchmarks, choice)}}
                for label, low, high, choice in zip(self.labels(), self.lambda_low, self.lambda_high, self.choices)]


def task_routing(correct: np.ndarray, energy_j: np.ndarray, codes: np.ndarray, n_benchmarks: int) -> TaskRouting:
    """Every distinct per-benchmark choice of ``argmax_m accuracy_b(m) - lambda x J_b(m)`` over
    lambda >= 0, from training outcomes (``[n, K]``) and benchmark codes (``[n]``).

    Each benchmark's optimum moves along its own (J, accuracy) hull and changes only at the
    slopes between consecutive vertices, so one lambda inside each interval between the sorted
    slopes (and one beyond the largest) gives every choice exactly once; ties go to the
    cheaper model, as ``best_per_benchmark`` breaks them for the ``per-benchmark`` agent."""
    acc, joules = benchmark_means(correct, codes, n_benchmarks), benchmark_means(energy_j, codes, n_benchmarks)
    slopes = []
    for b in range(n_benchmarks):
        hull = fixed_model_hull(joules[b], acc[b])
        slopes += (np.diff(hull.accuracy) / np.diff(hull.energy_j)).tolist()
    edges = np.unique(slopes)  # lambdas at which some benchmark switches, ascending
    bounds = np.concatenate([[0.0], edges, [np.inf]])
    probes = np.concatenate([[0.0], (edges[:-1] + edges[1:]) / 2, edges[-1:] * 2])
    choices = np.stack([best_per_benchmark(acc - lam * joules, joules) for lam in probes])
    return TaskRouting(choices=choices, lambda_low=bounds[:-1], lambda_high=bounds[1:])


def task_aware_points(
    fixed_energy_j: np.ndarray, fixed_accuracy: np.ndarray, task_energy_j: np.ndarray, task_accuracy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The points the task-aware hull mixes: the fixed models (``[..., K]``), then the task
    routes (``[..., P]``), as ``[..., K + P]`` joules and accuracy."""
    return (np.concatenate([np.asarray(fixed_energy_j, float), np.asarray(task_energy_j, float)], axis=-1),
            np.concatenate([np.asarray(fixed_accuracy, float), np.asarray(task_accuracy, float)], axis=-1))


def content_gain(
    fixed_energy_j: np.ndarray, fixed_accuracy: np.ndarray, task_energy_j: np.ndarray, task_accuracy: np.ndarray,
    method_energy_j: np.ndarray, method_accuracy: np.ndarray,
) -> np.ndarray:
    """Method accuracy minus the task-aware hull's accuracy at the method's mean joules (a
    fraction). Broadcasts: fixed ``[..., K]``, task routes ``[..., P]``, method ``[...]``."""
    joules, acc = task_aware_points(fixed_energy_j, fixed_accuracy, task_energy_j, task_accuracy)
    return routing_gain(joules, acc, method_energy_j, method_accuracy)
