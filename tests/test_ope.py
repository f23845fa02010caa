"""Off-policy evaluation against the exact value a full tournament gives."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tournament
from sklearn.linear_model import LinearRegression

from routing_gym.envs import Reward
from routing_gym.eval.offline.ope import (
    LoggedData,
    as_probabilities,
    epsilon_greedy_logging,
    ips,
    ope_trials,
    simulate_log,
    snips,
    summarize_trials,
    true_value,
    uniform_logging,
)


def test_true_value_is_the_policy_mean_over_the_table():
    values = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0]])
    assert true_value(values, as_probabilities(np.array([0, 1, 0]), 2)) == pytest.approx((1 + 3 + 2) / 3)
    stochastic = np.array([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]])
    assert true_value(values, stochastic) == pytest.approx((0.5 + 2.25 + 2.0) / 3)


def test_logging_policies_and_simulated_logs():
    base = np.array([0, 2, 1, 2])
    probs = epsilon_greedy_logging(base, 3, epsilon=0.3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    np.testing.assert_allclose(probs[np.arange(4), base], 0.7 + 0.1)
    values = np.arange(12.0).reshape(4, 3)
    counts = np.zeros((4, 3))
    for seed in range(2000):
        log = simulate_log(values, probs, np.random.default_rng(seed))
        np.testing.assert_allclose(log.rewards[:, 0], values[np.arange(4), log.actions])
        np.testing.assert_allclose(log.propensities, probs[np.arange(4), log.actions])
        counts[np.arange(4), log.actions] += 1
    np.testing.assert_allclose(counts / 2000, probs, atol=0.035)  # 4 sd of a 0.1 share over 2000 draws
    with pytest.raises(ValueError, match="epsilon"):
        epsilon_greedy_logging(base, 3, epsilon=0.0)


@pytest.fixture(scope="module")
def case():
    t = make_tournament(n=300, k=4, seed=11)
    values = Reward("gated_rank", {"lambda_e": 0.4}).matrix(t)
    features = np.eye(len(t.benchmarks))[t.benchmark_codes]
    target = np.argmax(values.mean(axis=0)) * np.ones(t.n_queries, dtype=np.int64)
    return t, values, features, target


@pytest.mark.parametrize("logging", ["uniform", "epsilon-greedy"])
def test_ips_and_dr_are_unbiased_against_the_exact_value(case, logging):
    t, values, features, target = case
    n, k = values.shape
    probs = uniform_logging(n, k) if logging == "uniform" else epsilon_greedy_logging(np.zeros(n, np.int64), k, 0.4)
    # Exactly: E[IPS] = mean_i sum_a pi0(a|i) * pi(a|i) / pi0(a|i) * V[i, a] = the true value.
    pi = as_probabilities(target, k)
    assert (probs * (pi / probs) * values).sum(axis=1).mean() == pytest.approx(true_value(values, pi))
    trials = ope_trials({"reward": values, "correct": t.correct}, features, target, probs, seeds=range(300),
                        estimators=("ips", "dr"), regressor="ridge")
    summary = summarize_trials(trials).set_index(["metric", "estimator"])
    for metric in ("reward", "correct"):
        for estimator in ("ips", "dr"):
            row = summary.loc[(metric, estimator)]
            # The mean over 300 logs is within 4 standard errors of the truth.
            assert abs(row["bias"]) < 4 * row["sd"] / np.sqrt(300) + 1e-12, (metric, estimator, row.to_dict())
    # DR's regression removes most of IPS's variance on this easy case.
    assert summary.loc[("reward", "dr"), "sd"] < summary.loc[("reward", "ips"), "sd"]


def test_direct_method_is_exact_when_the_regressor_is_right():
    # Values depend only on (benchmark, model): per-model linear regression on the benchmark
    # one-hot is the true model, so DM is exact on every log that saw each pair.
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, 400)
    table = rng.normal(size=(3, 4))
    values = table[codes]
    features = np.eye(3)[codes]
    target = rng.integers(0, 4, 400)
    trials = ope_trials(values, features, target, uniform_logging(400, 4), seeds=range(5), estimators=("dm",),
                        regressor=lambda: LinearRegression(fit_intercept=False))
    np.testing.assert_allclose(trials["error"], 0.0, atol=1e-9)


def test_snips_is_exact_for_a_constant_reward_and_ips_is_not():
    values = np.full((50, 3), 0.7)
    log = simulate_log(values, epsilon_greedy_logging(np.zeros(50, np.int64), 3, 0.5), np.random.default_rng(1))
    target = as_probabilities(np.full(50, 2), 3)
    assert snips(log, target).value[0] == pytest.approx(0.7)
    assert ips(log, target).value[0] != pytest.approx(0.7)


def test_no_overlap_is_an_error():
    probs = np.tile([0.5, 0.5, 0.0], (10, 1))
    with pytest.raises(ValueError, match="never takes"):
        ope_trials(np.ones((10, 3)), np.ones((10, 1)), np.full(10, 2), probs, seeds=[0])
    with pytest.raises(ValueError, match="propensity 0"):
        ips(LoggedData(np.array([0]), np.array([0.0]), np.array([[1.0]])), np.array([[1.0]]))
