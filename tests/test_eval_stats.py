"""Bootstrap intervals, seed spread and the paired Pareto-dominance test."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.eval.core import stats
from routing_gym.eval.core.stats import BootstrapPlan, bootstrap_mean_ci, paired_dominance_test, seed_spread


def test_bootstrap_interval_covers_the_truth_at_the_nominal_rate():
    rng = np.random.default_rng(0)
    truth, n, reps = 0.3, 200, 200
    hits = 0
    for rep in range(reps):
        sample = (rng.uniform(size=n) < truth).astype(float)
        low, high = bootstrap_mean_ci(sample, n_resamples=500, seed=rep)
        hits += low <= truth <= high
    assert 0.90 <= hits / reps <= 0.99


def test_matches_scipy_percentile_bootstrap():
    from scipy.stats import bootstrap

    sample = np.random.default_rng(1).exponential(100.0, 400)
    ours = bootstrap_mean_ci(sample, n_resamples=4000, seed=0)
    ref = bootstrap((sample,), np.mean, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    width = ref.high - ref.low
    assert abs(ours[0] - ref.low) < 0.1 * width and abs(ours[1] - ref.high) < 0.1 * width


def test_plan_is_reproducible_and_chunking_does_not_change_it(monkeypatch):
    values = np.random.default_rng(2).normal(size=(50, 3))
    whole = BootstrapPlan(50, 200, seed=7).means(values)
    assert whole.shape == (200, 3)
    assert np.array_equal(whole, BootstrapPlan(50, 200, seed=7).means(values))
    monkeypatch.setattr(stats, "_CHUNK_CELLS", 50 * 16)  # 16 resamples per chunk
    cached = BootstrapPlan(50, 200, seed=7)
    assert cached._chunk == 16 and np.allclose(cached.means(values), whole)
    assert len(cached._cache) == 13 and cached._cache[0].dtype == np.uint8  # drawn once, kept compactly
    monkeypatch.setattr(stats, "_MAX_CACHED_CELLS", 100)  # too large to keep: redrawn per call
    plan = BootstrapPlan(50, 200, seed=7)
    assert plan._cache is None
    chunked = plan.means(values)
    assert np.allclose(chunked, whole) and np.array_equal(chunked, plan.means(values))
    # each resample is a multiset of n queries
    assert np.allclose(BootstrapPlan(50, 200, seed=7).means(np.ones(50)), 1.0)


def test_seed_spread():
    s = seed_spread([1.0, 2.0, 3.0])
    assert s == {"mean": 2.0, "sd": 1.0, "min": 1.0, "max": 3.0, "n": 3}
    assert seed_spread([5.0])["sd"] == 0.0 and seed_spread([])["n"] == 0
    x = 857.4042765875694  # five copies: their float sum / 5 does not give x back
    assert np.mean([x] * 5) != x and seed_spread([x] * 5)["mean"] == x


def _policies(n=400, seed=0):
    rng = np.random.default_rng(seed)
    correct = (rng.uniform(size=n) < 0.6).astype(float)
    energy = rng.uniform(50, 500, n)
    return rng, correct, energy


def test_dominance_same_answers_fewer_joules():
    _, correct, energy = _policies()
    cheaper = paired_dominance_test(correct, energy * 0.9, correct, energy)
    assert cheaper.dominates and cheaper.prob_dominates == 1.0 and cheaper.p_value == 0.0
    assert cheaper.tied_axis == "accuracy"  # the same answers: reported apart from dominance on both axes
    assert cheaper.delta_accuracy == 0.0 and cheaper.delta_energy_j < 0
    assert cheaper.delta_energy_ci[1] < 0
    reverse = paired_dominance_test(correct, energy, correct, energy * 0.9)
    assert not reverse.dominates and reverse.prob_dominates == 0.0
    same = paired_dominance_test(correct, energy, correct, energy)
    assert not same.dominates and same.prob_dominates == 0.0  # equal is not dominance


def test_dominance_needs_both_axes_and_more_than_noise():
    rng, correct, energy = _policies()
    better = np.maximum(correct, (rng.uniform(size=len(correct)) < 0.5).astype(float))
    clear = paired_dominance_test(better, energy * 0.8, correct, energy)
    assert clear.dominates and clear.delta_accuracy > 0 and clear.delta_accuracy_ci[0] > 0
    assert clear.tied_axis == "" and clear.prob_better_accuracy >= 0.95 and clear.prob_better_energy == 1.0
    tradeoff = paired_dominance_test(better, energy * 1.2, correct, energy)
    assert not tradeoff.dominates and tradeoff.prob_dominates == 0.0
    # an independent policy of the same quality: differences are noise
    other = (rng.uniform(size=len(correct)) < 0.6).astype(float)
    noise = paired_dominance_test(other, rng.uniform(50, 500, len(correct)), correct, energy)
    assert not noise.dominates and noise.prob_dominates < 0.9
    # never worse, but better on only 2 of 400 queries: about e^-2 of the resamples miss both
    slight = correct.copy()
    slight[np.flatnonzero(correct == 0)[:2]] = 1.0
    few = paired_dominance_test(slight, energy, correct, energy)
    assert not few.dominates and 0.75 < few.prob_dominates < 0.95


def test_dominance_needs_the_same_axis_better_in_the_resamples():
    """Better on accuracy on 2 queries, cheaper on 2 others, equal elsewhere: some axis is
    better in ~98 % of resamples, but neither axis alone at 95 %: no dominance."""
    _, correct, energy = _policies()
    a_correct, a_energy = correct.copy(), energy.copy()
    wrong = np.flatnonzero(correct == 0)
    a_correct[wrong[:2]] = 1.0
    a_energy[wrong[2:4]] *= 0.5
    test = paired_dominance_test(a_correct, a_energy, correct, energy)
    assert 0.8 < test.prob_better_accuracy < 0.95 and 0.8 < test.prob_better_energy < 0.95
    assert not test.dominates and test.tied_axis == ""
    assert test.prob_dominates == pytest.approx(max(test.prob_better_accuracy, test.prob_better_energy))


def test_dominance_with_a_tie_on_joules():
    """More accurate at joules that are equal on every query: dominance, tied on joules; a
    cheaper policy whose accuracy may be worse is not dominating."""
    rng, correct, energy = _policies()
    better = np.maximum(correct, (rng.uniform(size=len(correct)) < 0.5).astype(float))
    same_j = paired_dominance_test(better, energy, correct, energy)
    assert same_j.dominates and same_j.tied_axis == "energy_j" and same_j.prob_better_energy == 0.0
    # one answer fewer at 10 % fewer joules: better on joules, worse on accuracy in most resamples
    worse = correct.copy()
    worse[np.flatnonzero(correct == 1)[0]] = 0.0
    cheaper_worse = paired_dominance_test(worse, energy * 0.9, correct, energy)
    assert not cheaper_worse.dominates and cheaper_worse.prob_dominates == pytest.approx(np.exp(-1), abs=0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        paired_dominance_test(np.ones(3), np.ones(3), np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="confidence"):
        BootstrapPlan(10, 100).ci(np.ones(10), confidence=95)
    with pytest.raises(ValueError, match="per-query values"):
        BootstrapPlan(10, 100).means(np.ones(9))


def test_a_stratified_plan_keeps_each_stratum_count_and_copies_together():
    prompts = ["a", "A", "b", "c", "d", "e", "f", "g", "h", "i"]  # "a" and "A" are copies: one group
    strata = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    plan = BootstrapPlan.of_rows(prompts, n_resamples=400, seed=5, strata=strata)
    counts = np.concatenate(list(plan._counts()))
    np.testing.assert_array_equal(counts[:, 0], counts[:, 1])
    # stratum 0 holds 3 groups, stratum 1 six: every resample draws exactly that many from each
    assert (counts[:, [0, 2, 3]].sum(axis=1) == 3).all() and (counts[:, 4:].sum(axis=1) == 6).all()
    unstratified = np.concatenate(list(BootstrapPlan.of_rows(prompts, 400, seed=5)._counts()))
    assert (unstratified[:, 4:].sum(axis=1) != 6).any()
    # the mean of a value that differs only between strata no longer varies with the strata's shares
    values = np.array([0.0] * 4 + [1.0] * 6)
    spread = [p.means(values).std() for p in (BootstrapPlan(10, 400, 5, strata=strata), BootstrapPlan(10, 400, 5))]
    assert spread[0] == pytest.approx(0.0, abs=1e-12) and spread[1] > 0.05
    # one stratum: the plain plan, draw for draw
    np.testing.assert_array_equal(BootstrapPlan(10, 400, 5, strata=np.zeros(10)).means(values),
                                  BootstrapPlan(10, 400, 5).means(values))
    with pytest.raises(ValueError, match="one label per query"):
        BootstrapPlan(10, 400, 5, strata=np.zeros(9))


def test_resample_shape_flags_atoms_and_two_modes_only():
    rng = np.random.default_rng(4)
    assert stats.resample_shape(rng.normal(size=2000)) == ""
    assert stats.resample_shape(np.zeros(2000)) == ""  # no spread: nothing to flag
    atom = np.where(rng.random(2000) < 0.3, 0.0, rng.normal(-1, 0.5, 2000))
    assert stats.ATOM in stats.resample_shape(atom).split(", ")
    jumps = np.where(rng.random(2000) < 0.75, rng.normal(0, 0.3, 2000), rng.normal(-8, 1, 2000))  # a statistic that jumps
    assert stats.resample_shape(jumps) == stats.TWO_MODES
    assert stats.resample_shape(rng.exponential(size=2000)) == ""  # skewed, one mode
    assert stats.resample_shape(np.array([1.0, np.nan, 2.0])) == ""
