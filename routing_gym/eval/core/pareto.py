"""Pareto frontier and hypervolume in (accuracy up, mean joules down).

The hypervolume of a set of policies is the area of the (joules, accuracy) plane that some
policy of the set weakly dominates and that itself dominates a stated reference point
``(reference_accuracy, reference_energy_j)``: points at or below the reference accuracy or
at or above the reference joules add nothing. With ``normalise=True`` the area is divided by
the box ``[0, reference_energy_j] x [reference_accuracy, 1]``, so a policy with accuracy 1 at
0 J scores 1.
"""

from __future__ import annotations

import numpy as np


def weakly_dominates(acc_a: float, joules_a: float, acc_b: float, joules_b: float) -> bool:
    """A Pareto-dominates B: accuracy >= and joules <=, one strictly."""
    return acc_a >= acc_b and joules_a <= joules_b and (acc_a > acc_b or joules_a < joules_b)


def _as_points(accuracy: np.ndarray, energy_j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    acc = np.asarray(accuracy, dtype=np.float64).reshape(-1)
    joules = np.asarray(energy_j, dtype=np.float64).reshape(-1)
    if acc.shape != joules.shape:
        raise ValueError(f"accuracy and energy_j must have the same length, got {acc.shape} and {joules.shape}")
    if not (np.isfinite(acc).all() and np.isfinite(joules).all()):
        raise ValueError("accuracy and energy_j must be finite")
    return acc, joules


def pareto_front(accuracy: np.ndarray, energy_j: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points, by increasing joules (and accuracy).

    Of several identical points only the first is kept.
    """
    acc, joules = _as_points(accuracy, energy_j)
    # Sort by joules ascending, then accuracy descending: a point is on the front iff its
    # accuracy beats every point before it in this order.
    order = np.lexsort((-acc, joules))
    front, best = [], -np.inf
    for i in order:
        if acc[i] > best:
            front.append(int(i))
            best = acc[i]
    return np.array(front, dtype=np.int64)


def hypervolume(
    accuracy: np.ndarray,
    energy_j: np.ndarray,
    reference_energy_j: float,
    reference_accuracy: float = 0.0,
    normalise: bool = False,
) -> float:
    """Area weakly dominated by the points and dominating ``(reference_accuracy, reference_energy_j)``."""
    if not reference_energy_j > 0:
        raise ValueError(f"reference_energy_j must be > 0, got {reference_energy_j}")
    if not 0 <= reference_accuracy < 1:
        raise ValueError(f"reference_accuracy must be in [0, 1), got {reference_accuracy}")
    acc, joules = _as_points(accuracy, energy_j)
    keep = (acc > reference_accuracy) & (joules < reference_energy_j)
    acc, joules = acc[keep], joules[keep]
    area = 0.0
    if len(acc):
        front = pareto_front(acc, joules)
        a, j = acc[front], joules[front]
        # Between consecutive front points the best accuracy reachable is the cheaper one's.
        right = np.append(j[1:], reference_energy_j)
        area = float(((right - j) * (a - reference_accuracy)).sum())
    if normalise:
        area /= reference_energy_j * (1.0 - reference_accuracy)
    return area
