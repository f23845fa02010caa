"""Per-policy metrics against direct numpy computations on a toy tournament."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routing_gym.envs import RoutingEnv
from routing_gym.eval.core.metrics import policy_metrics, selection_entropy, selection_frequencies


@pytest.fixture
def scored(toy):
    env = RoutingEnv(tournament=toy, split="test", coefficients={"lambda_e": 0.4}, invalid_action="penalize")
    rng = np.random.default_rng(3)
    actions = rng.integers(0, toy.n_models, len(env.rows))
    actions[[0, 5]] = [-1, toy.n_models]  # two invalid actions
    result = env.evaluate(actions)
    codes = toy.benchmark_codes[env.rows]
    return toy, env, actions, policy_metrics(result, toy.model_ids, codes, toy.benchmarks, env.reward.describe())


def test_metrics_match_direct_computation(scored):
    t, env, actions, m = scored
    rows = env.rows
    valid = (actions >= 0) & (actions < t.n_models)
    safe = np.where(valid, actions, 0)
    pick = lambda a: np.where(valid, a[rows, safe], 0.0)  # noqa: E731
    assert m.n == len(rows) and m.invalid_count == 2 and m.invalid_rate == pytest.approx(2 / len(rows))
    assert m.accuracy == pytest.approx(pick(t.correct).mean())
    assert m.mean_energy_j == pytest.approx(pick(t.energy_j).mean())
    assert m.mean_latency_s == pytest.approx(pick(t.latency_s).mean())
    assert m.mean_power_w == pytest.approx(pick(t.mean_power_w).mean())
    matrix = env.reward_matrix
    expected_reward = np.where(valid, matrix[np.arange(len(rows)), safe], env.reward.invalid_penalty).mean()
    assert m.mean_reward == pytest.approx(expected_reward)
    assert m.reward_name == "gated_rank(lambda_e=0.4)"
    counts = np.array([(actions == k).sum() for k in range(t.n_models)])
    assert [m.selection[mid] for mid in t.model_ids] == pytest.approx(counts / len(rows))
    assert sum(m.selection.values()) == pytest.approx(1 - 2 / len(rows))
    p = counts / counts.sum()
    p = p[p > 0]
    assert m.selection_entropy == pytest.approx(-(p * np.log(p)).sum() / np.log(t.n_models))
    assert m.top1_share == pytest.approx(counts.max() / len(rows)) and m.top1_model == t.model_ids[counts.argmax()]


def test_per_benchmark_breakdown_and_energy_shares(scored):
    t, env, actions, m = scored
    valid = (actions >= 0) & (actions < t.n_models)
    joules = np.where(valid, t.energy_j[env.rows, np.where(valid, actions, 0)], 0.0)
    correct = np.where(valid, t.correct[env.rows, np.where(valid, actions, 0)], 0.0)
    names = np.asarray(t.queries["benchmark"])[env.rows]
    assert [b.benchmark for b in m.per_benchmark] == sorted(set(names))
    for b in m.per_benchmark:
        mask = names == b.benchmark
        assert b.n == mask.sum()
        assert b.accuracy == pytest.approx(correct[mask].mean())
        assert b.mean_energy_j == pytest.approx(joules[mask].mean())
        assert b.energy_share == pytest.approx(joules[mask].sum() / joules.sum())
    assert sum(b.energy_share for b in m.per_benchmark) == pytest.approx(1.0)
    assert sum(b.n * b.accuracy for b in m.per_benchmark) / m.n == pytest.approx(m.accuracy)


def test_entropy_and_frequency_edge_cases():
    assert str(selection_entropy(np.array([1.0, 0, 0]))) == "0.0"  # collapse (and not -0.0)
    assert selection_entropy(np.array([0.25] * 4)) == pytest.approx(1.0)
    assert selection_entropy(np.array([0.1] * 4)) == pytest.approx(1.0)  # shares of valid picks only
    assert selection_entropy(np.array([0.0, 0.0])) == 0.0 and selection_entropy(np.array([1.0])) == 0.0
    assert selection_frequencies(np.array([0, 0, 2, -1]), 3).tolist() == [0.5, 0.0, 0.25]


def test_all_invalid_policy_has_no_energy_share(toy):
    env = RoutingEnv(tournament=toy, split="test", invalid_action="penalize")
    result = env.evaluate(np.full(len(env.rows), -1))
    m = policy_metrics(result, toy.model_ids, toy.benchmark_codes[env.rows], toy.benchmarks, "r")
    assert m.invalid_count == m.n and m.accuracy == 0 and m.mean_reward == env.reward.invalid_penalty
    assert all(math.isnan(b.energy_share) for b in m.per_benchmark)
    with pytest.raises(ValueError, match="benchmark_codes has shape"):
        policy_metrics(result, toy.model_ids, toy.benchmark_codes, toy.benchmarks, "r")
