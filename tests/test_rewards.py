"""The gated rank reward: worked example, bounds, the gate, rank invariance, oracle targets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tournament
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from routing_gym.envs.rewards import (
    Reward,
    RewardBreakdown,
    check_gate_on_data,
    gated_rank,
    oracle_targets,
    rank_penalty,
    register_reward,
)
from routing_gym.tournament.scoring import coerce_actions, score_actions
from routing_gym.errors import GateViolationError, UnknownNameError
from routing_gym.tournament import Outcomes

K = 4
# Integer-valued joules keep the monotone transforms below exact in float64.
costs = arrays(np.float64, st.tuples(st.integers(1, 20), st.just(K)), elements=st.integers(0, 10**5).map(float))
binary = arrays(np.float64, st.tuples(st.integers(1, 20), st.just(K)), elements=st.sampled_from([0.0, 1.0]))
lambdas = st.floats(0, 0.99)


def outcomes_of(correct, energy, latency=None, power=None) -> Outcomes:
    energy = np.asarray(energy, dtype=float)
    latency = energy if latency is None else latency
    power = energy if power is None else power
    return Outcomes(np.asarray(correct, dtype=float), energy, np.asarray(latency, float), np.asarray(power, float))


def test_worked_example_from_the_issue():
    assert rank_penalty(np.array([85, 95, 280, 3800])).tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    o = outcomes_of([[1, 1, 0, 1]], [[85, 95, 280, 3800]], latency=[[1, 1, 1, 1]], power=[[1, 1, 1, 1]])
    r = gated_rank(o, lambda_e=0.4).total[0]
    assert r.tolist() == pytest.approx([2.0, 2 - 0.4 / 3, -1.0, 1.6])


def test_tie_rule_is_competition_min_rank():
    assert rank_penalty(np.array([10.0, 10.0, 20.0])).tolist() == [0.0, 0.0, 1.0]
    assert rank_penalty(np.array([5.0, 1.0, 5.0, 9.0])).tolist() == pytest.approx([1 / 3, 0, 1 / 3, 1])
    assert rank_penalty(np.array([[7.0]])).tolist() == [[0.0]]


@settings(max_examples=60, deadline=None)
@given(binary, costs, costs, costs, lambdas, lambdas, lambdas)
def test_bounds_and_gate(correct, energy, latency, power, lt, le, lp):
    n = min(len(correct), len(energy), len(latency), len(power))
    o = outcomes_of(correct[:n], energy[:n], latency[:n], power[:n])
    total = gated_rank(o, lambda_t=lt, lambda_e=le, lambda_p=lp).total
    assert np.all(total[o.correct == 0] == -1.0)
    right = total[o.correct == 1]
    assert np.all(right <= 2.0) and np.all(right >= 2.0 - (lt + le + lp))
    assert len(check_gate_on_data(total, o.correct)) == 0  # every correct route above every wrong one


@settings(max_examples=60, deadline=None)
@given(costs, st.sampled_from([np.log1p, np.sqrt, lambda x: 3.6e-6 * x, lambda x: x**2 + 7]))
def test_rank_penalty_invariant_to_monotone_rescaling(energy, transform):
    np.testing.assert_array_equal(rank_penalty(energy), rank_penalty(transform(energy)))


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (5, K), elements=st.floats(0, 1)), costs.filter(lambda a: len(a) >= 5))
def test_fractional_correctness_is_expected_reward(correct, energy):
    energy = energy[:5]
    total = gated_rank(outcomes_of(correct, energy), lambda_e=0.5).total
    right = gated_rank(outcomes_of(np.ones_like(correct), energy), lambda_e=0.5).total
    np.testing.assert_allclose(total, correct * right + (1 - correct) * -1.0)


def test_gate_breaking_coefficients_are_rejected_unless_opted_out():
    with pytest.raises(GateViolationError, match="sum.*>= 3|= 3: the most expensive correct route"):
        Reward("gated_rank", {"lambda_e": 2.0, "lambda_t": 1.0})
    with pytest.raises(GateViolationError, match="must be >= 0"):
        Reward("gated_rank", {"lambda_e": -0.5})
    Reward("gated_rank", {"lambda_e": 2.5, "lambda_t": 1.0}, allow_ungated=True)
    Reward("gated_rank", {"lambda_e": 2.99})


def test_bad_reward_names_coefficients_and_penalties():
    with pytest.raises(UnknownNameError, match="unknown reward 'nope'; registered: .*gated_rank"):
        Reward("nope")
    with pytest.raises(TypeError, match="no coefficient\\(s\\) \\['lambda_x'\\]"):
        Reward("gated_rank", {"lambda_x": 1.0})
    with pytest.raises(ValueError, match="invalid_penalty must be a finite negative"):
        Reward(invalid_penalty=0.5)


def test_user_registered_reward_works_through_the_same_api():
    @register_reward("test_accuracy_minus_joules")
    def accuracy_minus_joules(outcomes, mu=0.001):
        return outcomes.correct - mu * outcomes.energy_j

    t = make_tournament()
    reward = Reward("test_accuracy_minus_joules", {"mu": 0.01})
    np.testing.assert_allclose(reward.matrix(t), t.correct - 0.01 * t.energy_j)
    assert isinstance(reward(t.outcomes()), RewardBreakdown)


def test_score_actions_charges_invalid_actions():
    matrix = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    outcomes = Outcomes(*(np.full((3, 2), v) for v in (1.0, 10.0, 0.5, 100.0)))
    result = score_actions(matrix, outcomes, np.array([1, -1, 2]), invalid_penalty=-2.0)
    assert result.rewards.tolist() == [2.0, -2.0, -2.0] and result.valid.tolist() == [True, False, False]
    assert result.energy_j.tolist() == [10.0, 0.0, 0.0] and result.actions.tolist() == [1, -1, 2]
    masked = score_actions(matrix, outcomes, np.array([0, 1, 1]), -2.0, allowed=np.array([True, False]))
    assert masked.valid.tolist() == [True, False, False]


def test_one_action_rule_integers_and_integral_floats_only():
    assert coerce_actions(np.array([0, 1.0, 2.5, np.nan])).tolist() == [0, 1, -1, -1]
    assert coerce_actions(np.array([True, False])).tolist() == [-1, -1]
    assert coerce_actions(np.array([np.int64(1), True, 2.0, 2.7], dtype=object)).tolist() == [1, -1, 2, -1]


def test_oracle_targets_rules():
    t = make_tournament(n=200, k=4)
    energy_only = oracle_targets(t, {"lambda_e": 0.4})
    accuracy_only = oracle_targets(t, {})
    for i in range(t.n_queries):
        correct = np.flatnonzero(t.correct[i] == 1)
        if len(correct):
            assert energy_only[i] == correct[np.argmin(t.energy_j[i, correct])]
            assert accuracy_only[i] == correct[np.argmax(t.models["params_b"].to_numpy()[correct])]
        else:  # documented rule: every candidate wrong -> the cheapest model
            assert energy_only[i] == accuracy_only[i] == np.argmin(t.energy_j[i])
    matrix = Reward("gated_rank", {"lambda_e": 0.4}).matrix(t)
    assert np.allclose(matrix[np.arange(t.n_queries), energy_only], matrix.max(axis=1))
    with pytest.raises(UnknownNameError, match="unknown tie_break"):
        oracle_targets(t, tie_break="smallest")
