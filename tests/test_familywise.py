"""The balanced Romano-Wolf step-down: its decisions, its family-wise error rate by simulation, its power."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.eval.core import familywise
from routing_gym.eval.core.stats import BootstrapPlan

N, N_NULL, N_ALT, DRAWS, RESAMPLES = 500, 10, 5, 2000, 1000


def _draw(rng: np.random.Generator, effect: float) -> np.ndarray:
    """``[N, N_NULL + N_ALT]`` per-query values, correlated through a shared factor, some heavy-
    tailed (t with 4 degrees of freedom) and some skewed (centred log-normal): the null columns
    have mean 0, the others ``effect`` standard deviations."""
    shared = rng.standard_normal((N, 1))
    noise = np.concatenate([rng.standard_normal((N, 5)), rng.standard_t(4, (N, 5)) / np.sqrt(2),
                            (rng.lognormal(0.0, 0.75, (N, 5)) - np.exp(0.75 ** 2 / 2)) / 0.87], axis=1)
    values = 0.6 * shared + 0.8 * noise[:, rng.permutation(15)]
    values[:, N_NULL:] += effect
    return values


def _simulate(effect: float, seed: int) -> tuple[float, float]:
    """Share of ``DRAWS`` simulated families with any null rejected, and the share of
    alternatives rejected. One ``BootstrapPlan`` of the N queries serves every family (its
    resamples are drawn independently of the data, so each family's bootstrap is an ordinary one;
    drawing them once keeps the test to a matrix product per family)."""
    rng = np.random.default_rng(seed)
    plan = BootstrapPlan(N, RESAMPLES, seed=seed)
    any_false, power = 0, 0.0
    for _ in range(DRAWS):
        values = _draw(rng, effect)
        decision = familywise.stepdown(values.mean(axis=0), plan.means(values), 0.05)
        rejected = np.array([d != familywise.NONE for d in decision.decisions])
        any_false += rejected[:N_NULL].any()
        power += rejected[N_NULL:].mean()
    return any_false / DRAWS, power / DRAWS


def test_the_familywise_error_rate_is_near_nominal_with_heavy_tails_and_correlation():
    # 2,000 families of 10 true nulls and 5 clear alternatives at n = 500: the nominal rate is
    # 5 %; 6.5 % is three binomial standard errors above it (a procedure at 8 % fails)
    rate, power = _simulate(effect=0.3, seed=11)
    assert rate <= 0.065, rate
    assert power >= 0.95, power  # alternatives 0.3 sd away (~6 standard errors) are found


def test_stepdown_rejects_real_effects_and_leaves_nulls_and_constants_alone():
    rng = np.random.default_rng(1)
    b = 4000
    noise = rng.normal(size=(b, 4))
    estimate = np.array([5.0, -4.0, 0.3, 0.0])
    resampled = estimate + noise
    resampled[:, 3] = 0.0  # no spread: outside the family
    decision = familywise.stepdown(estimate, resampled, 0.05)
    assert decision.decisions == [familywise.ABOVE, familywise.BELOW, familywise.NONE, familywise.NONE]
    assert np.isnan(decision.low[3]) and decision.level > 0.95  # wider than a marginal 95 % bound
    assert decision.high[0] - decision.low[0] > 2 * 1.96  # simultaneous bounds, wider than marginal ones
    assert decision.steps >= 2  # the second step tests the rest against a smaller family
    with pytest.raises(ValueError, match="finite"):
        familywise.stepdown(np.array([1.0]), np.array([[np.nan]] * 20))


def test_a_heavy_tailed_hypothesis_does_not_set_the_others_critical_value():
    # one hypothesis with rare huge excursions beside four Gaussian ones of the same variance:
    # balanced, each Gaussian hypothesis keeps a Gaussian-sized critical value
    rng = np.random.default_rng(3)
    b = 4000
    gauss = rng.normal(size=(b, 4))
    heavy = np.where(rng.random(b) < 0.02, rng.normal(0, 7, b), rng.normal(0, 0.3, b))[:, None]
    resampled = np.concatenate([gauss, heavy], axis=1)
    decision = familywise.stepdown(np.zeros(5), resampled, 0.05)
    gaussian_width = (decision.high - decision.low)[:4] / 2
    assert np.all(gaussian_width < 3.0)  # max-|T| over 4-5 Gaussians needs ~2.6; max |T|/se here would need more
    unbalanced = np.quantile(np.abs(resampled / resampled.std(axis=0)).max(axis=1), 0.95)
    assert unbalanced > gaussian_width.max()
