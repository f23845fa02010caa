"""Pareto frontier and hypervolume on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.eval.core.pareto import hypervolume, pareto_front, weakly_dominates


def test_front_on_hand_case():
    acc = np.array([0.5, 0.8, 0.6, 0.8, 0.4, 0.9])
    joules = np.array([100, 150, 200, 150, 50, 400])
    # (0.6, 200) is dominated by (0.8, 150); the duplicate (0.8, 150) keeps its first index.
    assert pareto_front(acc, joules).tolist() == [4, 0, 1, 5]
    assert pareto_front([0.5], [10]).tolist() == [0]
    # equal joules: only the more accurate survives; equal accuracy: only the cheaper
    assert pareto_front([0.5, 0.7], [10, 10]).tolist() == [1]
    assert pareto_front([0.7, 0.7], [20, 10]).tolist() == [1]


def test_weak_dominance():
    assert weakly_dominates(0.8, 100, 0.8, 120) and weakly_dominates(0.9, 100, 0.8, 100)
    assert not weakly_dominates(0.8, 100, 0.8, 100)  # equal: no strict improvement
    assert not weakly_dominates(0.9, 130, 0.8, 120)  # a trade-off


def test_hypervolume_hand_cases():
    assert hypervolume([0.5], [100], reference_energy_j=200) == pytest.approx(50.0)
    # two front points: (200-100)*... split at 150: 50*0.5 + 50*0.8
    assert hypervolume([0.5, 0.8], [100, 150], 200) == pytest.approx(65.0)
    # a dominated point and a point beyond the reference add nothing
    assert hypervolume([0.5, 0.8, 0.6, 0.99], [100, 150, 180, 250], 200) == pytest.approx(65.0)
    # reference accuracy cuts from below; a point under it adds nothing
    assert hypervolume([0.5, 0.8, 0.1], [100, 150, 20], 200, reference_accuracy=0.2) == pytest.approx(50 * 0.3 + 50 * 0.6)
    assert hypervolume([0.5], [100], 200, normalise=True) == pytest.approx(50 / 200)
    assert hypervolume([1.0], [0.0], 200, normalise=True) == pytest.approx(1.0)
    assert hypervolume([0.3], [300], 200) == 0.0


def test_hypervolume_is_monotone_under_adding_points():
    rng = np.random.default_rng(0)
    acc, joules = rng.uniform(0, 1, 30), rng.uniform(0, 100, 30)
    volumes = [hypervolume(acc[:i], joules[:i], 120) for i in range(1, 31)]
    assert all(b >= a - 1e-12 for a, b in zip(volumes, volumes[1:]))
    front = pareto_front(acc, joules)
    assert hypervolume(acc[front], joules[front], 120) == pytest.approx(volumes[-1])


def test_bad_input():
    with pytest.raises(ValueError, match="same length"):
        pareto_front([0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="finite"):
        pareto_front([np.nan], [1.0])
    with pytest.raises(ValueError, match="reference_energy_j"):
        hypervolume([0.5], [1.0], 0)
