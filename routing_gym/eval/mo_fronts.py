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
``mean_w max_p w . p``, over the same equally spaced weights. ``compare_indicators`` scores
``compare``'s rows and fronts with both, at a stated reference point. pymoo is imported inside
the functions.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from routing_gym.eval import hull as fixed_hull
from routing_gym.tournament import Outcomes, Tournament

EU_WEIGHTS = 101  # equally spaced weights of the expected utility (MORL-Baselines' default is 100)
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


def fixed_model_front(values: np.ndarray, outcomes: Outcomes) -> np.ndarray:
    """``[V, d]``: the fixed-model hull's vertices (accuracy vs mean joules of every model sent
    every query) as objective vectors."""
    v = _check_values(values)
    h = fixed_hull.fixed_model_hull(np.asarray(outcomes.energy_j).mean(axis=0), np.asarray(outcomes.correct).mean(axis=0))
    return v.mean(axis=0)[h.vertex_index]


def task_aware_front(values: np.ndarray, core: Any, tournament: Tournament) -> np.ndarray:
    """``[V, d]``: the task-aware hull's vertices (the fixed models and the per-benchmark routes
    chosen on the training split, ``hull.task_routing``) as objective vectors of ``core``'s split."""
    v = _check_values(values)
    t = tournament
    train = t.split_rows("train")
    routes = fixed_hull.task_routing(t.correct[train], t.energy_j[train], t.benchmark_codes[train], len(t.benchmarks))
    actions = routes.choices[:, core.benchmarks].T  # [n, P]
    o = core.outcomes
    route_vectors = np.stack([policy_value(v, actions[:, p]) for p in range(len(routes))])
    route_j, route_acc = routes.per_query(o.energy_j, core.benchmarks).mean(axis=0), routes.per_query(o.correct, core.benchmarks).mean(axis=0)
    joules, accuracy = fixed_hull.task_aware_points(np.asarray(o.energy_j).mean(axis=0), np.asarray(o.correct).mean(axis=0),
                                                    route_j, route_acc)
    h = fixed_hull.fixed_model_hull(joules, accuracy)
    return np.vstack([v.mean(axis=0), route_vectors])[h.vertex_index]


# ---------------------------------------------------------------------- indicators
def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """Volume dominated by maximised ``points`` ``[p, d]`` above ``reference`` ``[d]`` (pymoo's
    HV on the negated points, as MORL-Baselines computes it); points not above it add nothing."""
    from pymoo.indicators.hv import HV

    p = np.atleast_2d(np.asarray(points, dtype=np.float64))
    ref = np.asarray(reference, dtype=np.float64)
    return float(HV(ref_point=-ref)(-p)) if len(p) else 0.0


def equally_spaced_weights(d: int, n: int = EU_WEIGHTS) -> np.ndarray:
    """``[n, d]`` equally spaced weights on the simplex: pymoo's Riesz s-energy directions, seed
    42, as MORL-Baselines' ``equally_spaced_weights``."""
    from pymoo.util.ref_dirs import get_reference_directions

    return np.asarray(get_reference_directions("energy", d, n, seed=42), dtype=np.float64)


def expected_utility(points: np.ndarray, weights: np.ndarray) -> float:
    """MORL-Baselines' expected utility: the mean over ``weights`` ``[m, d]`` of the best linear
    utility ``max_p w . p`` among ``points`` ``[p, d]`` (a convex front's mixes add nothing)."""
    p = np.atleast_2d(np.asarray(points, dtype=np.float64))
    return float((np.asarray(weights, dtype=np.float64) @ p.T).max(axis=1).mean())


def compare_indicators(rows: Sequence[Mapping[str, Any]], pareto: Mapping[str, Any], t: Tournament,
                       test_rows: np.ndarray) -> dict[str, Any]:
    """Hypervolume and expected utility of each row (one operating point) and of each front of
    a ``compare`` result, in (accuracy, -mean joules / J_ref) with J_ref the existing
    hypervolume reference's joules, reference point (0, -1): a stated, pool-tied scale on which
    both objectives lie in [0, 1] and pymoo's hypervolume equals the normalised one of ``pareto.py``.

    Fronts: the fixed-model hull and task-aware hull vertices (``pareto["hull"]``,
    ``pareto["task_hull"]``), the exact oracle front on the test split (``convex_front``), and
    the methods' fronts (``front_*``). A front's hypervolume counts its points, not their mixes."""
    j_ref = float(pareto["reference"]["energy_j"])
    reference = np.array([0.0, -1.0])
    weights = equally_spaced_weights(2)

    def point(acc: Any, joules: Any) -> np.ndarray:
        return np.stack([np.asarray(acc, dtype=np.float64), -np.asarray(joules, dtype=np.float64) / j_ref], axis=-1)

    def score(points: np.ndarray) -> dict[str, float]:
        return {"hypervolume": hypervolume(points, reference), "expected_utility": expected_utility(points, weights)}

    by_method = {r["method"]: r for r in rows if r.get("seeds_ok")}
    oracle = convex_front(point(t.correct[test_rows], t.energy_j[test_rows]))
    fronts: dict[str, dict[str, Any]] = {
        "oracle (exact, per-query best route)": {"points": len(oracle), **score(oracle)},
        "fixed-model hull": {"points": len(pareto["hull"]["accuracy"]),
                             **score(point(pareto["hull"]["accuracy"], pareto["hull"]["energy_j"]))},
        "task-aware hull": {"points": len(pareto["task_hull"]["accuracy"]),
                            **score(point(pareto["task_hull"]["accuracy"], pareto["task_hull"]["energy_j"]))},
    }
    for label in ("deployable", "all"):
        members = [by_method[m] for m in pareto.get(f"front_{label}", [])]
        if members:
            fronts[f"front of {label} methods"] = {
                "points": len(members), **score(point([m["accuracy"] for m in members], [m["mean_energy_j"] for m in members]))}
    return {
        "objectives": ["accuracy", f"-mean joules / {j_ref:.6g} J"],
        "reference_point": reference.tolist(),
        "rule": (f"objectives (accuracy, -mean J / J_ref), J_ref = {j_ref:.6g} J (the hypervolume reference's joules), "
                 f"reference point (0, -1); hypervolume: pymoo HV; expected utility: mean over {len(weights)} equally "
                 "spaced weights of the best w . p (MORL-Baselines' definition); the oracle front is exact on the test split"),
        "rows": {m: score(point(r["accuracy"], r["mean_energy_j"])) for m, r in by_method.items()},
        "fronts": fronts,
    }


def markdown_lines(indicators: Mapping[str, Any]) -> list[str]:
    """The indicators as a Markdown section (``compare``'s and ``frontier``'s table.md)."""
    lines = ["## Multi-objective indicators (hypervolume, expected utility)", "", indicators["rule"] + ".", "",
             "| Row or front | points | hypervolume | expected utility |", "|---|---:|---:|---:|"]
    for name, s in indicators["fronts"].items():
        lines.append(f"| {name} | {s['points']} | {s['hypervolume']:.4f} | {s['expected_utility']:.4f} |")
    for name, s in indicators["rows"].items():
        lines.append(f"| {name} | 1 | {s['hypervolume']:.4f} | {s['expected_utility']:.4f} |")
    return lines + [""]
