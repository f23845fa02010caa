"""The yardstick fixed on the training split: which policies a router is measured against.

The hulls of ``fronts/hull.py`` envelope *test* points: which fixed models (and which per-benchmark
routes) form the hull is decided by their test values, so the hull keeps the points that were
lucky on test and a label router lands below its own yardstick (a bias of +0.05-0.5 pp on smooth
parts of the hull, several pp at its steep cheap end). Here the policies are chosen on train, once
(the chain: the vertices of the train hull with the null policy, answer nothing: 0 J, 0 %); on
test (and in every bootstrap resample) the yardstick is the best random mix of *those* policies:
the upper, non-decreasing concave hull of the null point and the chain policies' test points, flat
beyond its most accurate vertex. Candidates that are not chain policies never enter, however lucky
on test.

Why a hull of the chosen policies and not the chain read in train order: when two chain policies
swap order in test joules (they do in some resamples), a chain read in train order has a vertical
segment there, and the yardstick at a given joules jumps between resamples (on zeroeval-math's
math-l5 fold "always Llama-3.1-70B", itself a chain policy, had gain 0 in 75 % of resamples and
down to -11.2 pp in the rest). Mixing the chain policies adjacent in *test* joules keeps each chain
policy's own gain at 0 but still jumps when two policies on the same side of the method's joules
swap. The best mix of a fixed set of points moves continuously with the points, so the yardstick
has no jumps; the price is a small optimism (the hull picks, among the few chain policies, the ones
above their neighbours on test), which ``experiments/verdict_calibration.py`` measures. A chain
policy below the test hull in some resamples has a gain <= 0 with an atom at 0: compare flags
such rows (``eval/core/stats.resample_shape``).

- routing gain = accuracy - fixed-model yardstick at the method's mean joules (pp);
- joules saved = 1 - method J / yardstick J at the method's accuracy (%), a continuous function
  of the same hull; none where the method is more accurate than every chain policy in more than
  the interval's tail of resamples;
- content gain = accuracy - task-aware yardstick (fixed models and per-benchmark routes) at the
  method's mean joules (pp).

``experiments/verdict_calibration.py`` measures the error rates of verdicts read from these
yardsticks (and from the test-enveloped hulls) on procedural tournaments whose truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from routing_gym.fronts.hull import (TaskRouting, _interpolate, _points, hull_vertices, task_aware_points, task_routing,
                                   train_chain)

WITHIN = "within"
DEARER_THAN_CHAIN = "beyond the dearest policy of the chain: compared with it (flat)"
MORE_ACCURATE_THAN_CHAIN = "more accurate than every policy of the chain: no joules saved"
NULL_POLICY = "answer nothing"  # the chain's first point: 0 J, 0 % (a router may always decline)
YARDSTICK_RULE = (
    "a chain of policies chosen on the training split: the upper concave hull of the candidates' train (mean J, "
    "accuracy) together with the null policy (answer nothing: 0 J, 0 %); on test the yardstick is the best random mix "
    "of those policies alone (the upper concave hull of their test points and the null point; no other candidate "
    "enters), flat beyond the most accurate; bootstrap resamples keep the chain and resample only its policies' test "
    "values, so the yardstick moves continuously between resamples (no jump when two policies swap order)")


@dataclass(frozen=True)
class Yardstick:
    """A chain of candidate policies chosen on the training split (``YARDSTICK_RULE``).

    ``index``: the chain's policies as indices into the candidate points (``[V]``, cheapest on
    train first; the null point comes before them and has no index); ``names``: their labels.
    A yardstick is evaluated on any candidate point set of the same layout (``[..., C]``: test
    values, or one set per bootstrap resample): the best mix of the null point and the chosen
    candidates' points there (``envelope``); no test point of another candidate enters."""

    index: np.ndarray
    names: list[str]
    train_energy_j: np.ndarray
    train_accuracy: np.ndarray

    @classmethod
    def chosen_on_train(cls, train_energy_j: np.ndarray, train_accuracy: np.ndarray, names: list[str]) -> "Yardstick":
        """The chain of ``[C]`` candidates' train points: vertices of the upper concave hull of the
        candidates and the null point (0 J, 0 %), cheapest first."""
        xs, ys = _points(train_energy_j, train_accuracy)
        if xs.ndim != 1 or len(names) != len(xs):
            raise ValueError(f"a yardstick is chosen from one set of [C] named points, got {xs.shape} and {len(names)} names")
        index = train_chain(xs, ys)
        return cls(index=index, names=[names[i] for i in index], train_energy_j=xs[index],
                   train_accuracy=ys[index])

    def envelope(self, energy_j: np.ndarray, accuracy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The yardstick on ``[..., C]`` points: the vertices of the upper, non-decreasing concave
        hull of the null point and the chain policies' points (``[..., V + 1]`` joules and accuracy,
        cheapest first; slots past a set's vertex count hold +inf) and the vertex count ``[...]``.
        Which chain policies are vertices may change between resamples; the value at any joules
        moves continuously with the points (the hull of a fixed set of points does)."""
        joules, acc = _points(energy_j, accuracy)
        zero = np.zeros(joules.shape[:-1] + (1,))
        vx, vy, _, n = hull_vertices(np.concatenate([zero, joules[..., self.index]], axis=-1),
                                     np.concatenate([zero, acc[..., self.index]], axis=-1))
        return vx, vy, n

    def chain(self, energy_j: np.ndarray, accuracy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The yardstick's vertices on one set of ``[C]`` points (test values): joules and accuracy,
        the null point first, then the chain policies on the test hull, cheapest first."""
        if np.ndim(energy_j) != 1:
            raise ValueError(f"chain reads one set of [C] points, got shape {np.shape(energy_j)}; use envelope for sets")
        vx, vy, n = self.envelope(energy_j, accuracy)
        return vx[:n], vy[:n]

    def accuracy_at(self, energy_j: np.ndarray, accuracy: np.ndarray, joules: np.ndarray) -> np.ndarray:
        """The yardstick's accuracy at mean ``joules`` (``[...]``): the best random mix of the chain
        policies (and the null policy) spending at most ``joules``, their dearest vertex's accuracy beyond it."""
        vx, vy, n = self.envelope(energy_j, accuracy)
        x = np.asarray(joules, dtype=np.float64)
        return _interpolate(vx, vy, n, x, (vx <= x[..., None]).sum(axis=-1))

    def joules_at(self, energy_j: np.ndarray, accuracy: np.ndarray, target_accuracy: np.ndarray) -> np.ndarray:
        """Least mean joules at which the yardstick reaches ``target_accuracy`` (the same hull read
        along its accuracy axis, strictly increasing there); NaN where no chain policy is that
        accurate (outside the yardstick's range)."""
        vx, vy, n = self.envelope(energy_j, accuracy)
        a = np.asarray(target_accuracy, dtype=np.float64)
        shape = np.broadcast_shapes(vy.shape[:-1], a.shape)
        top = np.take_along_axis(np.broadcast_to(vy, shape + vy.shape[-1:]), np.broadcast_to(n - 1, shape)[..., None], -1)[..., 0]
        at = _interpolate(vy, vx, n, a, (vy < a[..., None]).sum(axis=-1))
        return np.where(a <= 0, 0.0, np.where(a <= top, at, np.nan))

    def gain(self, energy_j: np.ndarray, accuracy: np.ndarray, method_energy_j: np.ndarray,
             method_accuracy: np.ndarray) -> np.ndarray:
        """Method accuracy minus the yardstick's at the method's mean joules (a fraction)."""
        return np.asarray(method_accuracy, dtype=np.float64) - self.accuracy_at(energy_j, accuracy, method_energy_j)

    def joules_saved(self, energy_j: np.ndarray, accuracy: np.ndarray, method_energy_j: np.ndarray,
                     method_accuracy: np.ndarray) -> np.ndarray:
        """``1 - method J / yardstick J at the method's accuracy`` (a fraction): > 0 when the method
        is cheaper than the yardstick at its accuracy; NaN beyond the yardstick's most accurate policy."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1 - np.asarray(method_energy_j, dtype=np.float64) / self.joules_at(energy_j, accuracy, method_accuracy)

    def mean_gain_over_range(self, energy_j: np.ndarray, accuracy: np.ndarray, curve_energy_j: np.ndarray,
                             curve_accuracy: np.ndarray, n_grid: int = 256) -> np.ndarray:
        """Area between a method's curve and the yardstick over the curve's joule range up to the
        costliest candidate, divided by its width: the mean gain along the curve (fraction).

        The curve's ``[..., Q]`` points come in their own chain order, chosen without test data
        (``frontier``: the knob values chosen on validation, cheapest knob first), and are read as a
        chain (``chain_accuracy_at``: the mix of consecutive points at each joule value), never
        enveloped on test points, so no test (or resampled) point is chosen because it was lucky.
        The yardstick is read by the same rule here: its chain (the null point, then its policies in
        train order), never an envelope of its policies' test points either, so neither side keeps
        its lucky points (an envelope on one side only biases the mean gain by about the optimism of
        that envelope, ``experiments/frontier_null.py``). An area under a chain read through a
        running maximum moves continuously when two of its points swap order in test joules, so the
        mean gain has no jump there. Candidates ``[..., C]``; ``[...]``, NaN where the range is empty
        (a single point, or a curve beyond every candidate). A trapezoid rule on ``n_grid`` evenly
        spaced joule values."""
        curve_j, curve_acc = _points(curve_energy_j, curve_accuracy)
        low = curve_j[..., 0]  # the chain's first point; its last is the dearest (running maximum)
        high = np.minimum(curve_j.max(axis=-1), np.asarray(energy_j, dtype=np.float64).max(axis=-1))
        grid = low[..., None] + np.maximum(high - low, 0.0)[..., None] * np.linspace(0.0, 1.0, n_grid)
        joules, acc = _points(energy_j, accuracy)
        null = np.zeros(joules.shape[:-1] + (1,))
        stick = chain_accuracy_at(np.concatenate([null, joules[..., self.index]], axis=-1)[..., None, :],
                                  np.concatenate([null, acc[..., self.index]], axis=-1)[..., None, :], grid)
        gap = chain_accuracy_at(curve_j[..., None, :], curve_acc[..., None, :], grid) - stick
        area = ((gap[..., 1:] + gap[..., :-1]) / 2).mean(axis=-1)
        return np.where(high > low, area, np.nan)

    def record(self, energy_j: np.ndarray, accuracy: np.ndarray) -> dict[str, Any]:
        """The yardstick for outputs on ``[C]`` test points: its vertices (names, test points), the
        chain chosen on train (names, train and test points) and the rule."""
        joules, acc = _points(energy_j, accuracy)
        vx, vy, vi, n = hull_vertices(np.concatenate([[0.0], joules[self.index]]), np.concatenate([[0.0], acc[self.index]]))
        names = [NULL_POLICY, *self.names]
        return {"vertices": [names[i] for i in vi[:n]], "energy_j": vx[:n].tolist(), "accuracy": vy[:n].tolist(),
                "chain": names, "chain_energy_j": [0.0, *joules[self.index].tolist()],
                "chain_accuracy": [0.0, *acc[self.index].tolist()],
                "train_energy_j": [0.0, *self.train_energy_j.tolist()], "train_accuracy": [0.0, *self.train_accuracy.tolist()],
                "rule": YARDSTICK_RULE}


@dataclass(frozen=True)
class Yardsticks:
    """Both yardsticks of one comparison, chosen on the training split: the fixed models' chain
    (routing gain) and the chain of fixed models and per-benchmark routes (content gain). Candidate
    points are laid out ``[..., K + P]``: the K fixed models, then the P routes."""

    routes: TaskRouting
    fixed: Yardstick
    task: Yardstick
    n_models: int
    unseen: dict[str, Any] = field(default_factory=lambda: {"codes": [], "share": 0.0})  # unseen_test_share

    def gains(self, fixed_energy_j: np.ndarray, fixed_accuracy: np.ndarray, route_energy_j: np.ndarray,
              route_accuracy: np.ndarray, method_energy_j: np.ndarray, method_accuracy: np.ndarray) -> dict[str, np.ndarray]:
        """Routing gain (pp) and joules saved (%) against the fixed-model chain,
        content gain (pp) against the task-aware chain, for ``M`` methods per leading index: fixed
        ``[..., K]``, routes ``[..., P]``, methods ``[..., M]``; every value ``[..., M]``."""
        joules, acc = (np.asarray(v, dtype=np.float64)[..., None, :] for v in
                       task_aware_points(fixed_energy_j, fixed_accuracy, route_energy_j, route_accuracy))
        mj, ma = np.asarray(method_energy_j, dtype=np.float64), np.asarray(method_accuracy, dtype=np.float64)
        return {"routing_gain_pp": 100 * self.fixed.gain(joules, acc, mj, ma),
                "joules_saved_pct": 100 * self.fixed.joules_saved(joules, acc, mj, ma),
                "content_gain_pp": 100 * self.task.gain(joules, acc, mj, ma)}


def chain_accuracy_at(energy_j: np.ndarray, accuracy: np.ndarray, joules: np.ndarray) -> np.ndarray:
    """Accuracy at mean ``joules`` (``[...]``) of a chain of ``[..., Q]`` points in the order given
    (chosen without test data): the mix of the two consecutive points around it, the first point's
    accuracy below it and the last's beyond. Joules are read through a running maximum, so a point
    cheaper on test than its predecessor is passed at once; no test value reorders or drops a point
    (never an envelope of test points: a method's curve in ``frontier``)."""
    joules_chain, acc = _points(energy_j, accuracy)
    joules_chain = np.maximum.accumulate(joules_chain, axis=-1)
    x = np.asarray(joules, dtype=np.float64)
    n = np.full(np.broadcast_shapes(joules_chain.shape[:-1], x.shape), joules_chain.shape[-1])
    return _interpolate(joules_chain, acc, n, x, (joules_chain <= x[..., None]).sum(axis=-1))


def train_yardsticks(correct: np.ndarray, energy_j: np.ndarray, codes: np.ndarray, n_benchmarks: int,
                     model_ids: list[str], test_codes: np.ndarray | None = None) -> Yardsticks:
    """Both yardsticks from training outcomes (``[n, K]``) and benchmark codes (``[n]``): the
    per-benchmark routes (``task_routing``), then each chain chosen on the same training rows.

    ``test_codes`` (the test queries' benchmark codes; no outcome is read) matter only where some
    test benchmark has no training rows: there the label carries nothing, and every route sends
    those queries where the fixed-model choice at the same price (its lambda, on all training
    rows) would (``hull.benchmark_means``). The task-aware chain is then chosen on the training
    points those routes would have on the test mix: each route's training point is its value on
    the seen benchmarks' rows and its unseen choice's value on all rows, weighted by the unseen
    share of the test queries. With only unseen benchmarks in test every route is a copy of a fixed
    model, so the task-aware chain is the fixed-model chain and content gain equals routing gain."""
    routes = task_routing(correct, energy_j, codes, n_benchmarks)
    fixed_j, fixed_acc = np.asarray(energy_j, float).mean(axis=0), np.asarray(correct, float).mean(axis=0)
    route_j, route_acc = routes.per_query(energy_j, codes).mean(axis=0), routes.per_query(correct, codes).mean(axis=0)
    unseen = unseen_test_share(codes, n_benchmarks, test_codes)
    if unseen["share"] > 0:
        choice = routes.choices[:, unseen["codes"][0]]  # one label-blind choice per route, whichever unseen benchmark
        w = unseen["share"]
        route_j, route_acc = (1 - w) * route_j + w * fixed_j[choice], (1 - w) * route_acc + w * fixed_acc[choice]
    # The fixed-model chain indexes the first K of the [K + P] layout: routes are never its candidates.
    fixed = Yardstick.chosen_on_train(fixed_j, fixed_acc, list(model_ids))
    task = Yardstick.chosen_on_train(*task_aware_points(fixed_j, fixed_acc, route_j, route_acc),
                                     list(model_ids) + routes.labels())
    return Yardsticks(routes=routes, fixed=fixed, task=task, n_models=len(model_ids), unseen=unseen)


def unseen_test_share(codes: np.ndarray, n_benchmarks: int, test_codes: np.ndarray | None) -> dict[str, Any]:
    """The test benchmarks with no training rows (``codes``: the training rows' benchmark codes):
    their codes and the share of test queries they hold (0 without ``test_codes``)."""
    if test_codes is None or len(test_codes) == 0:
        return {"codes": [], "share": 0.0}
    test_codes = np.asarray(test_codes, dtype=np.int64)
    trained = np.bincount(np.asarray(codes, dtype=np.int64), minlength=n_benchmarks) > 0
    missing = sorted({int(c) for c in test_codes if not trained[c]})
    return {"codes": missing, "share": float(np.isin(test_codes, missing).mean())}
