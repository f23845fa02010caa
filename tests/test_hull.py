"""The fixed-model hull, routing gain and joules saved on hand-made points and random mixes."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.eval.core.stats import BootstrapPlan
from routing_gym.fronts import hull as H

# (joules, accuracy): a cheap model, a vertex, an interior point, a dominated one, a point on
# an edge, a tie in joules with a vertex, and the most accurate model.
POINTS_J = np.array([10.0, 20.0, 30.0, 50.0, 40.0, 20.0, 60.0])
POINTS_ACC = np.array([0.40, 0.60, 0.55, 0.50, 0.70, 0.52, 0.80])


def test_vertices_skip_interior_dominated_tied_and_edge_points():
    hull = H.fixed_model_hull(POINTS_J, POINTS_ACC)
    # (40, .70) lies on the edge from (20, .60) to (60, .80): not a vertex.
    assert hull.vertex_index.tolist() == [0, 1, 6]
    assert hull.energy_j.tolist() == [10.0, 20.0, 60.0] and hull.accuracy.tolist() == [0.40, 0.60, 0.80]
    assert hull.joule_range == (10.0, 60.0) and hull.accuracy_range == (0.40, 0.80)


def test_a_more_accurate_cheaper_model_dominates_the_rest():
    hull = H.fixed_model_hull(np.array([5.0, 10.0, 20.0]), np.array([0.9, 0.5, 0.7]))
    assert hull.vertex_index.tolist() == [0]
    # every budget reaches 0.9
    assert np.allclose(H.hull_accuracy_at([5.0, 10.0, 20.0], [0.9, 0.5, 0.7], [5.0, 15.0, 100.0]), 0.9)


def test_hull_values_interpolate_between_vertices_and_clamp_outside():
    acc = H.hull_accuracy_at(POINTS_J, POINTS_ACC, np.array([5.0, 10.0, 15.0, 30.0, 40.0, 60.0, 90.0]))
    assert np.allclose(acc, [0.40, 0.40, 0.50, 0.65, 0.70, 0.80, 0.80])


def best_mix_by_brute_force(xs: np.ndarray, ys: np.ndarray, budget: float) -> float:
    """The most accurate mix of at most two points spending at most ``budget`` (every pair
    tried; in two dimensions the hull's boundary mixes at most two points), or the cheapest
    point's accuracy when nothing is that cheap."""
    best = -np.inf
    for i in range(len(xs)):
        for j in range(len(xs)):
            if xs[i] <= budget:
                share = 1.0 if xs[j] <= budget else (budget - xs[i]) / (xs[j] - xs[i])
                best = max(best, ys[i], ys[i] + share * (ys[j] - ys[i]))
    return best if np.isfinite(best) else ys[np.lexsort((-ys, xs))[0]]


def test_vertex_chain_matches_brute_force_mixes_on_random_points():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 9))
        xs, ys = rng.uniform(1, 100, k).round(0), rng.uniform(0, 1, k).round(2)  # rounding makes ties
        hull = H.fixed_model_hull(xs, ys)
        assert np.all(np.diff(hull.energy_j) > 0) and np.all(np.diff(hull.accuracy) > 0)
        grid = np.linspace(0, 110, 57)
        expected = np.interp(grid, hull.energy_j, hull.accuracy)  # np.interp clamps to the end points
        assert np.allclose(H.hull_accuracy_at(xs, ys, grid), expected)
        assert np.allclose(expected, [best_mix_by_brute_force(xs, ys, x) for x in grid])
        # no fixed model lies above its own hull
        assert np.all(H.routing_gain(xs, ys, xs, ys) <= 1e-12)


def test_batched_over_resamples():
    rng = np.random.default_rng(1)
    xs, ys = rng.uniform(1, 100, (30, 5)), rng.uniform(0, 1, (30, 5))
    queries = rng.uniform(0, 100, 30)
    batched = H.hull_accuracy_at(xs, ys, queries)
    assert batched.shape == (30,)
    assert np.allclose(batched, [H.hull_accuracy_at(xs[b], ys[b], queries[b]) for b in range(30)])


def test_gain_and_saving_of_hand_made_methods():
    gain = H.routing_gain(POINTS_J, POINTS_ACC, np.array([30.0, 30.0]), np.array([0.70, 0.60]))
    assert np.allclose(gain, [0.05, -0.05])


def test_random_mix_of_two_fixed_models_has_no_gain():
    """Routing each query to one of two fixed models by a coin flip is a point on the hull:
    its paired bootstrap gain interval covers 0 (hull recomputed per resample)."""
    rng = np.random.default_rng(3)
    n = 3000
    correct = np.stack([rng.uniform(size=n) < 0.45, rng.uniform(size=n) < 0.80], axis=1).astype(float)
    energy = np.stack([rng.gamma(2.0, 10.0, n), rng.gamma(2.0, 80.0, n)], axis=1)
    pick = (rng.uniform(size=n) < 0.4).astype(int)
    mix_c, mix_j = correct[np.arange(n), pick], energy[np.arange(n), pick]
    plan = BootstrapPlan(n, 1000, seed=0)
    boot = plan.means(np.column_stack([correct, energy, mix_c, mix_j]))
    gains = H.routing_gain(boot[:, 2:4], boot[:, 0:2], boot[:, 5], boot[:, 4])
    low, high = np.percentile(gains, [2.5, 97.5])
    point = H.routing_gain(energy.mean(0), correct.mean(0), mix_j.mean(), mix_c.mean())
    assert low < 0 < high and abs(point) < 0.02
    # a router that sends the cheap model's failures to the big model does route
    smart = np.where(correct[:, 0] == 1, 0, 1)
    smart_c, smart_j = correct[np.arange(n), smart], energy[np.arange(n), smart]
    boot_smart = plan.means(np.column_stack([smart_c, smart_j]))
    smart_gains = H.routing_gain(boot[:, 2:4], boot[:, 0:2], boot_smart[:, 1], boot_smart[:, 0])
    assert np.percentile(smart_gains, 2.5) > 0.05


def test_bad_points():
    with pytest.raises(ValueError, match="equal shapes"):
        H.fixed_model_hull(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="finite"):
        H.hull_accuracy_at(np.array([1.0, np.nan]), np.array([0.1, 0.2]), 1.0)
    with pytest.raises(ValueError, match="one set"):
        H.fixed_model_hull(np.ones((2, 3)), np.ones((2, 3)))
