"""The fixed-model hull and routing gain: does a router route, or only mix fixed models?

This module holds the hull geometry (vertices of point sets, values on them, the per-benchmark
routes); ``compare``, ``frontier`` and ``headroom`` measure gains against the yardsticks of
``eval/core/yardstick.py``, whose policies are chosen on the training split with this geometry and
never re-enveloped on test points (a hull of test points keeps the lucky ones: biased).

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
points, ``[B]`` queries). The vertices of every point set are found by one monotone chain run
over all sets at once (``_vertex_chain``: a loop over the K points, each step an array operation
over the sets), and a hull value is a linear interpolation between two vertices.

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

TASK_ROUTE_PREFIX = "per-benchmark #"  # the task-aware hull's routes in outputs
# What a method's two gains say, in words (``content_verdict``).
BEYOND_TASK_LABEL = "routes beyond the task label"
TASK_ROUTING_ONLY = "task routing only"
BELOW_TASK_HULL = "worse than routing by the label"
ON_TASK_HULL = "not distinguishable from the task-aware yardstick"
TASK_HULL_RULE = ("task-aware yardstick: the same chain rule over the fixed models and the per-benchmark routes (for "
                  "every trade-off lambda, each benchmark to the model maximising accuracy - lambda x J on the training "
                  "split); content gain = accuracy - its accuracy at the method's mean J (pp), what the method gains from "
                  "reading the question beyond its benchmark label")


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
    vx, vy, _, n = _vertex_chain(*_points(energy_j, accuracy))
    x = np.asarray(joules, dtype=np.float64)
    return _interpolate(vx, vy, n, x, (vx <= x[..., None]).sum(axis=-1))


def hull_vertices(energy_j: np.ndarray, accuracy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``fixed_model_hull`` of every ``[..., K]`` point set at once: vertex joules, accuracy and
    input index ``[..., K]`` (slots past a set's vertex count hold +inf, +inf, 0) and the
    vertex count ``[...]`` (e.g. one hull per query, for the exact fronts of ``mo_fronts``)."""
    return _vertex_chain(*_points(energy_j, accuracy))


def _interpolate(along: np.ndarray, values: np.ndarray, n: np.ndarray, at: np.ndarray, above: np.ndarray) -> np.ndarray:
    """``values`` between the two vertices around ``at`` on the ``along`` axis (``above``: how
    many vertices lie below ``at``), clamped to the first and last vertex; broadcasts the
    vertices ``[..., K]`` against ``at`` ``[...]``."""
    shape = np.broadcast_shapes(along.shape[:-1], at.shape)
    along, values = (np.broadcast_to(v, shape + along.shape[-1:]) for v in (along, values))
    last = np.broadcast_to(n, shape) - 1
    low, high = np.clip(above - 1, 0, last)[..., None], np.minimum(above, last)[..., None]
    a0, a1 = np.take_along_axis(along, low, -1)[..., 0], np.take_along_axis(along, high, -1)[..., 0]
    v0, v1 = np.take_along_axis(values, low, -1)[..., 0], np.take_along_axis(values, high, -1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(a1 > a0, (at - a0) / (a1 - a0), 0.0)
    return v0 + share * (v1 - v0)


def _vertex_chain(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vertices of the upper, non-decreasing concave hull of every ``[..., K]`` point set, from
    the cheapest point (the most accurate among equally cheap ones) to the most accurate (the
    cheapest among equally accurate ones): joules, accuracy and input index ``[..., K]`` (slots
    past a set's vertex count hold +inf, +inf, 0) and the vertex count ``[...]``.

    Andrew's monotone chain over the points by joules (ties: most accurate first), run on all
    sets at once: a point no more accurate than the last vertex, or as cheap, is skipped (it
    is dominated or a duplicate); otherwise vertices on or below the segment from their
    predecessor to it are popped, and it is appended."""
    batch, k = xs.shape[:-1], xs.shape[-1]
    order = np.lexsort((-ys.reshape(-1, k), xs.reshape(-1, k)), axis=-1)
    xs, ys = np.take_along_axis(xs.reshape(-1, k), order, -1), np.take_along_axis(ys.reshape(-1, k), order, -1)
    sets = np.arange(len(xs))
    vx, vy, vi = np.full(xs.shape, np.inf), np.full(xs.shape, np.inf), np.zeros(xs.shape, dtype=np.int64)
    n = np.zeros(len(xs), dtype=np.int64)
    with np.errstate(invalid="ignore"):  # inf - inf in sets that are not popping
        for i in range(k):
            x, y = xs[:, i], ys[:, i]
            top = np.maximum(n - 1, 0)
            take = (n == 0) | ((x > vx[sets, top]) & (y > vy[sets, top]))
            while True:
                pop = take & (n >= 2)
                if pop.any():
                    o, m = np.maximum(n - 2, 0), np.maximum(n - 1, 0)
                    cross = (vx[sets, m] - vx[sets, o]) * (y - vy[sets, o]) - (vy[sets, m] - vy[sets, o]) * (x - vx[sets, o])
                    pop &= cross >= 0
                if not pop.any():
                    break
                n = n - pop
            at = n[take]
            vx[sets[take], at], vy[sets[take], at], vi[sets[take], at] = x[take], y[take], order[take, i]
            n = n + take
    stale = np.arange(k) >= n[:, None]  # slots of popped vertices
    vx[stale], vy[stale], vi[stale] = np.inf, np.inf, 0
    return vx.reshape(*batch, k), vy.reshape(*batch, k), vi.reshape(*batch, k), n.reshape(batch)


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


def fixed_model_hull(energy_j: np.ndarray, accuracy: np.ndarray) -> Hull:
    """Vertices of the upper, non-decreasing concave hull of ``[K]`` points (monotone chain).

    Points strictly inside, on a hull edge, dominated, or duplicating a vertex are not
    vertices; of several equally cheap points only the most accurate can be one.
    """
    xs, ys = _points(energy_j, accuracy)
    if xs.ndim != 1:
        raise ValueError(f"fixed_model_hull takes one set of [K] points, got shape {xs.shape}")
    vx, vy, vi, n = _vertex_chain(xs, ys)
    return Hull(energy_j=vx[:n], accuracy=vy[:n], vertex_index=vi[:n])


def train_chain(train_energy_j: np.ndarray, train_accuracy: np.ndarray) -> np.ndarray:
    """The policies of a yardstick chain chosen on the training split (``eval.core.yardstick``):
    indices into the ``[C]`` candidates of the vertices of the upper concave hull of their train
    points and the null point (answer nothing: 0 J, 0 %), cheapest first; the null point is the
    chain's start and has no index."""
    xs, ys = _points(train_energy_j, train_accuracy)
    hull = fixed_model_hull(np.concatenate([[0.0], xs]), np.concatenate([[0.0], ys]))
    return (hull.vertex_index[hull.vertex_index > 0] - 1).astype(np.int64)


def routing_gain(
    energy_j: np.ndarray, accuracy: np.ndarray, method_energy_j: np.ndarray, method_accuracy: np.ndarray
) -> np.ndarray:
    """Method accuracy minus the hull's accuracy at the method's mean joules (a fraction;
    x 100 for pp). Broadcasts: points ``[..., K]``, method values ``[...]``."""
    return np.asarray(method_accuracy, dtype=np.float64) - hull_accuracy_at(energy_j, accuracy, method_energy_j)


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


def content_verdict(routing_above: bool, content_above: bool, content_below: bool) -> str:
    """One of four labels from a method's decided gains, in one precedence: content gain above 0
    (it reads the question beyond its benchmark label); content gain below 0 (worse than routing
    by the label, whatever its routing gain); routing gain above 0 (the label explains it: task
    routing only); else none of these."""
    if content_above:
        return BEYOND_TASK_LABEL
    if content_below:
        return BELOW_TASK_HULL
    return TASK_ROUTING_ONLY if routing_above else ON_TASK_HULL
