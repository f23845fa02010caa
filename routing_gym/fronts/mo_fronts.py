"""Exact multi-objective fronts of a replayed tournament, and MORL's indicators over them.

A policy's expected reward vector on a split is the mean over queries of its routes' vectors
(``[n, K, d]`` objective values, ``envs.mo_env.objective_values``). For every weight w the best
policy takes, per query, the route maximising ``w . r``; the set of those policies' vectors
(the *convex coverage set*) are the vertices of the convex front, and any stochastic policy
is dominated by a mix of two neighbours. It is enumerated here from the outcome matrix:

- two objectives (``convex_front``): exactly. Each query's best route moves along its own
  upper hull (``hull.hull_vertices``, one per query) and switches at the slopes between its
  vertices, so sorting every query's hull edges by slope and summing them from the cheapest
  routes gives every vertex of the front, once;
- more objectives (``weighted_front``): the per-query best route of each weight of a stated
  set (pymoo's Das-Dennis simplex grid on range-scaled objectives), non-dominated ones kept:
  each point is exactly optimal for its weight; the set is a subset of the vertices.

``fixed_model_front`` and ``task_aware_front`` give the vertices of ``hull.py``'s two hulls
(accuracy vs joules) as objective vectors. Hypervolume is pymoo's ``HV`` (what MORL-Baselines'
``hypervolume`` calls); expected utility is MORL-Baselines' definition (Zintgraf et al. 2015),
``mean_w max_p w . p``, over the same equally spaced weights. ``indicators`` scores the rows
and fronts of ``compare`` and ``frontier`` with both, at a stated reference point. pymoo is imported inside
the functions.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from routing_gym.fronts import hull as fixed_hull
from routing_gym.tournament import Tournament

EU_WEIGHTS = 101  # equally spaced weights of the expected utility (MORL-Baselines' default is 100)
# pymoo's Riesz s-energy directions for (2 objectives, EU_WEIGHTS), written by pymoo itself: computing
# them takes ~0.8 GB and ~2 s, the whole of compare's peak memory (tests/test_mo_env.py checks equality)
SHIPPED_WEIGHTS = {(2, EU_WEIGHTS): Path(__file__).with_name("riesz_energy_weights_d2_n101.npy")}
GRID_PARTITIONS = 12  # Das-Dennis partitions of the weight grid for fronts of > 2 objectives


def _check_values(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 3 or v.shape[0] == 0 or v.shape[1] == 0 or v.shape[2] < 2:
        raise ValueError(f"objective values must be [n, K, d] with n, K >= 1 and d >= 2, got shape {v.shape}")
    return v


def convex_front(values: np.ndarray) -> np.ndarray:
    """``[V, 2]``: every vertex of the convex front of two maximised objectives, from the best
    on objective 1 to the best on objective 0 (``values``: ``[n, K, 2]``)."""
    v = _check_values(values)
    if v.shape[2] != 2:
        raise ValueError(f"convex_front takes two objectives, got {v.shape[2]}; use weighted_front")
    n = len(v)
    # hull.py's axes: x = a cost (-objective 1), y = a value (objective 0), both per query.
    vx, vy, _, count = fixed_hull.hull_vertices(-v[..., 1], v[..., 0])
    start = np.array([vy[:, 0].sum(), -vx[:, 0].sum()]) / n  # each query's best route on objective 1
    k = vx.shape[1]
    has_edge = np.arange(1, k)[None, :] < count[:, None]
    with np.errstate(invalid="ignore"):  # inf - inf past each query's last vertex, masked out
        dx, dy = np.diff(vx, axis=1)[has_edge], np.diff(vy, axis=1)[has_edge]
    if len(dx) == 0:
        return start[None, :]
    slope = dy / dx
    order = np.argsort(-slope, kind="stable")  # most objective 0 per unit of objective 1 first
    slope, steps = slope[order], np.stack([dy[order], -dx[order]], axis=1) / n
    points = start + np.cumsum(steps, axis=0)
    last_of_slope = np.append(~np.isclose(slope[1:], slope[:-1], rtol=1e-12, atol=0.0), True)
    return np.vstack([start, points[last_of_slope]])


def weight_grid(d: int, partitions: int = GRID_PARTITIONS) -> np.ndarray:
    """``[m, d]`` weights on the simplex: pymoo's Das-Dennis grid."""
    from pymoo.util.ref_dirs import get_reference_directions

    return np.asarray(get_reference_directions("das-dennis", d, n_partitions=partitions), dtype=np.float64)


def weighted_front(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``[V, d]``: for each weight (``[m, d]``, applied to range-scaled objectives; default
    ``weight_grid``) the vector of the per-query best route, non-dominated and distinct ones."""
    from pymoo.util.nds.non_dominated_sorting import find_non_dominated

    v = _check_values(values)
    w = weight_grid(v.shape[2]) if weights is None else np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if w.shape[1] != v.shape[2]:
        raise ValueError(f"weights must be [m, {v.shape[2]}], got shape {w.shape}")
    spread = v.max(axis=(0, 1)) - v.min(axis=(0, 1))
    scaled = w / np.where(spread > 0, spread, 1.0)  # the same optimum as w on objectives scaled to [0, 1]
    best = np.einsum("nkd,md->nmk", v, scaled).argmax(axis=2)  # [n, m]
    points = np.take_along_axis(v, best[:, :, None], axis=1)  # [n, m, d]
    points = np.unique(points.mean(axis=0), axis=0)
    return points[find_non_dominated(-points)]


def oracle_front(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The exact convex front for two objectives (``weights`` must be None), else ``weighted_front``."""
    v = _check_values(values)
    if v.shape[2] == 2:
        if weights is not None:
            raise ValueError("with two objectives the front is exact; weights apply to three or more")
        return convex_front(v)
    return weighted_front(v, weights)


def policy_value(values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[d]``: the expected reward vector of one action per query."""
    v = _check_values(values)
    a = np.asarray(actions, dtype=np.int64)
    return v[np.arange(len(v)), a].mean(axis=0)


def fixed_model_front(values: np.ndarray, tournament: Tournament, train_split: str = "train") -> np.ndarray:
    """``[V, d]``: the policies of the fixed-model yardstick as objective vectors of ``values``'
    split: the chain chosen on ``train_split`` by the rule of ``compare``'s report
    (``hull.train_chain``, ``eval.core.yardstick``), so the same fixed models in the same order.
    Two differences from the report's chain, both by design: it starts at the null policy (answer
    nothing: 0 J, 0 %), no action of the env, so it has that one point more (adding nothing to a
    hypervolume whose reference accuracy is 0); and the report reads the chain on a test split as the
    best mix of its policies (their upper concave hull there, which can leave out a policy that is no
    vertex on that split), where these are every policy's own vector. ``tests/test_mo_env.py`` checks
    that the report's chain is the hull of these points and the null policy."""
    v = _check_values(values)
    train = tournament.split_rows(train_split)
    index = fixed_hull.train_chain(tournament.energy_j[train].mean(axis=0), tournament.correct[train].mean(axis=0))
    return v.mean(axis=0)[index]


def task_aware_front(values: np.ndarray, core: Any, tournament: Tournament, train_split: str = "train") -> np.ndarray:
    """``[V, d]``: the policies of the task-aware yardstick (the fixed models and the per-benchmark
    routes, both chosen on ``train_split``: ``hull.task_routing``, then ``hull.train_chain``) as
    objective vectors of ``core``'s split; it differs from the report's chain as
    ``fixed_model_front`` says (the null policy, the hull read on test)."""
    v = _check_values(values)
    t = tournament
    train = t.split_rows(train_split)
    correct, energy, codes = t.correct[train], t.energy_j[train], t.benchmark_codes[train]
    routes = fixed_hull.task_routing(correct, energy, codes, len(t.benchmarks))
    index = fixed_hull.train_chain(*fixed_hull.task_aware_points(
        energy.mean(axis=0), correct.mean(axis=0), routes.per_query(energy, codes).mean(axis=0),
        routes.per_query(correct, codes).mean(axis=0)))
    actions = routes.choices[:, core.benchmarks].T  # [n, P]
    route_vectors = np.stack([policy_value(v, actions[:, p]) for p in range(len(routes))])
    return np.vstack([v.mean(axis=0), route_vectors])[index]


# ---------------------------------------------------------------------- indicators
def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """Volume dominated by maximised ``points`` ``[p, d]`` above ``reference`` ``[d]`` (pymoo's
    HV on the negated points, as MORL-Baselines computes it); points not above it add nothing."""
    from pymoo.indicators.hv import HV

    p = np.atleast_2d(np.asarray(points, dtype=np.float64))
    ref = np.asarray(reference, dtype=np.float64)
    return float(HV(ref_point=-ref)(-p)) if len(p) else 0.0


@functools.lru_cache(maxsize=8)
def equally_spaced_weights(d: int, n: int = EU_WEIGHTS) -> np.ndarray:
    """``[n, d]`` equally spaced weights on the simplex: pymoo's Riesz s-energy directions, seed
    42, as MORL-Baselines' ``equally_spaced_weights`` (the shipped copy where there is one:
    ``SHIPPED_WEIGHTS``). Read-only: the array is cached."""
    weights = np.load(SHIPPED_WEIGHTS[(d, n)]) if (d, n) in SHIPPED_WEIGHTS else pymoo_equally_spaced_weights(d, n)
    weights.setflags(write=False)
    return weights


def pymoo_equally_spaced_weights(d: int, n: int = EU_WEIGHTS) -> np.ndarray:
    """pymoo's computation of ``equally_spaced_weights`` (what the shipped copies are checked against)."""
    from pymoo.util.ref_dirs import get_reference_directions

    return np.asarray(get_reference_directions("energy", d, n, seed=42), dtype=np.float64)


def expected_utility(points: np.ndarray, weights: np.ndarray) -> float:
    """MORL-Baselines' expected utility: the mean over ``weights`` ``[m, d]`` of the best linear
    utility ``max_p w . p`` among ``points`` ``[p, d]`` (a convex front's mixes add nothing)."""
    p = np.atleast_2d(np.asarray(points, dtype=np.float64))
    return float((np.asarray(weights, dtype=np.float64) @ p.T).max(axis=1).mean())


def indicators(t: Tournament, test_rows: np.ndarray, j_ref: float, hull: Mapping[str, Any], task_hull: Mapping[str, Any],
               rows: Mapping[str, tuple[float, float]], fronts: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> dict[str, Any]:
    """Hypervolume and expected utility of operating points (``rows``: name -> (accuracy, mean J))
    and fronts (name -> (accuracies, mean Js)) of ``compare`` or ``frontier``, beside the exact
    oracle front of the test split (``convex_front``) and both hulls' vertices (``hull``,
    ``task_hull``: records with ``accuracy`` and ``energy_j`` lists).

    Objectives (accuracy, -mean J / ``j_ref``), reference point (0, -1): a stated, pool-tied
    scale on which both lie in [0, 1], so pymoo's hypervolume equals the normalised one of
    ``pareto.py``. A front's hypervolume counts its points, not their mixes; expected utility
    is the same either way (a linear utility peaks at a vertex)."""
    reference = np.array([0.0, -1.0])
    weights = equally_spaced_weights(2)

    def point(acc: Any, joules: Any) -> np.ndarray:
        return np.stack([np.asarray(acc, dtype=np.float64), -np.asarray(joules, dtype=np.float64) / j_ref], axis=-1)

    def score(points: np.ndarray) -> dict[str, Any]:
        points = np.atleast_2d(points)
        return {"points": len(points), "hypervolume": hypervolume(points, reference),
                "expected_utility": expected_utility(points, weights)}

    oracle = convex_front(point(t.correct[test_rows], t.energy_j[test_rows]))
    scored = {"oracle (exact, per-query best route)": score(oracle),
              "fixed-model hull": score(point(hull["accuracy"], hull["energy_j"])),
              "task-aware hull": score(point(task_hull["accuracy"], task_hull["energy_j"]))}
    scored.update({name: score(point(*front)) for name, front in fronts.items() if len(front[0])})
    return {
        "objectives": ["accuracy", f"-mean joules / {j_ref:.6g} J"],
        "reference_point": reference.tolist(),
        "rule": (f"objectives (accuracy, -mean J / J_ref), J_ref = {j_ref:.6g} J (the hypervolume reference's joules), "
                 f"reference point (0, -1); hypervolume: pymoo HV; expected utility: mean over {len(weights)} equally "
                 "spaced weights of the best w . p (MORL-Baselines' definition); the oracle front is exact on the test split"),
        "rows": {name: score(point(*xy)) for name, xy in rows.items()},
        "fronts": scored,
    }


def frontier_indicators(result: Any, reference_factor: float = 1.1) -> dict[str, Any]:
    """``indicators`` of a ``frontier`` result: each fixed model a row, each agent's chosen
    operating points a front; J_ref = ``reference_factor`` x the largest fixed-model mean
    joules on the test split (``compare``'s hypervolume reference rule)."""
    t, fixed = result.tournament, result.fixed
    test_rows = t.split_rows(result.config.test_split)
    rows = {f"always {m}": (a, j) for m, a, j in zip(fixed["model"], fixed["accuracy"], fixed["mean_energy_j"])}
    fronts = {f"{c.agent} curve": ([p.test_accuracy for p in c.selected], [p.test_energy_j for p in c.selected])
              for c in result.curves if not c.error}
    j_ref = reference_factor * float(fixed["mean_energy_j"].max())
    return indicators(t, test_rows, j_ref, result.hull, result.task_hull, rows, fronts)


def markdown_lines(indicators: Mapping[str, Any]) -> list[str]:
    """The indicators as a Markdown section (``compare``'s and ``frontier``'s table.md)."""
    lines = ["## Multi-objective indicators (hypervolume, expected utility)", "", indicators["rule"] + ".", "",
             "| Row or front | points | hypervolume | expected utility |", "|---|---:|---:|---:|"]
    for name, s in [*indicators["fronts"].items(), *indicators["rows"].items()]:
        lines.append(f"| {name} | {s['points']} | {s['hypervolume']:.4f} | {s['expected_utility']:.4f} |")
    return lines + [""]
