"""BudgetRoutingEnv (Eq. 7) and the Lagrangian agent that keeps to the budget."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament
from gymnasium.utils.env_checker import check_env

from routing_gym.envs import BUDGET_ID, Reward
from routing_gym.envs.budget_env import BudgetRoutingEnv, budget_report
from routing_gym.errors import RoutingGymError
from routing_gym_agents import FitContext
from routing_gym_agents.lagrangian import LagrangianAgent, run_budget_episodes

# The stated tolerance: in expectation (mean over all queries of all test episodes) the
# Lagrangian agent spends at most B * (1 + TOLERANCE) joules per query.
TOLERANCE = 0.03


def test_check_env_and_registered_id(toy):
    check_env(gym.make(BUDGET_ID, tournament=toy, horizon=7).unwrapped)
    env = gym.make(BUDGET_ID, tournament=toy, horizon=3, budget_j=50.0)
    obs, _ = env.reset(seed=0)
    assert obs["budget_left"][0] == 1.0 and obs["queries_left"][0] == 1.0


def test_budget_left_tracks_spend_and_the_episode_ends_after_horizon(toy):
    env = BudgetRoutingEnv(tournament=toy, horizon=5, budget_j=40.0)
    obs, info = env.reset(seed=1)
    spent, correct = 0.0, []
    for t in range(5):
        row = toy.query_ids.index(info["query_id"] if t == 0 else info["next_query_id"])
        obs, reward, terminated, truncated, info = env.step(t % toy.n_models)
        spent += toy.energy_j[row, t % toy.n_models]
        correct.append(toy.correct[row, t % toy.n_models])
        assert info["spent_j"] == pytest.approx(spent)
        assert obs["budget_left"][0] == pytest.approx(max(0.0, 1 - spent / 200.0), abs=1e-6)
        assert obs["queries_left"][0] == pytest.approx((5 - t - 1) / 5)
        assert terminated is (t == 4) and truncated is False
    assert info["budget_episode"]["mean_energy_j"] == pytest.approx(spent / 5)
    assert info["budget_episode"]["accuracy"] == pytest.approx(np.mean(correct))
    assert info["budget_episode"]["violation_j"] == pytest.approx(max(0.0, spent / 5 - 40.0))
    with pytest.raises(RoutingGymError):
        env.step(0)


def test_overspend_penalty_charges_only_the_joules_beyond_the_budget(toy):
    plain = BudgetRoutingEnv(tournament=toy, horizon=6, budget_j=20.0)
    priced = BudgetRoutingEnv(tournament=toy, horizon=6, budget_j=20.0, overspend_penalty=0.5)
    plain.reset(seed=3), priced.reset(seed=3)
    largest = toy.n_models - 1
    spent = 0.0
    for _ in range(6):
        _, r0, *_, info = plain.step(largest)
        _, r1, *_ = priced.step(largest)
        before, spent = spent, info["spent_j"]
        over = max(0.0, spent - 120.0) - max(0.0, before - 120.0)
        assert r0 - r1 == pytest.approx(0.5 * over / 20.0)
    assert spent > 120.0  # the largest model overspends this budget, so the penalty was exercised


def test_default_budget_and_bad_options(toy):
    env = BudgetRoutingEnv(tournament=toy)
    assert env.budget_j == pytest.approx(np.median(toy.energy_j[env.rows].mean(axis=0)))
    for bad in ({"budget_j": 0.0}, {"horizon": 0}, {"overspend_penalty": -1.0}):
        with pytest.raises(ValueError):
            BudgetRoutingEnv(tournament=toy, **bad)
    with pytest.raises(TypeError, match="unknown option"):
        BudgetRoutingEnv(tournament=toy, budget=3)
    with pytest.raises(RoutingGymError, match="no options"):
        env.reset(options={"index": 0})


def test_budget_report():
    energy = np.array([[10.0, 30.0], [50.0, 70.0]])
    rep = budget_report(energy, np.array([[1, 0], [1, 1]]), budget_j=30.0)
    assert rep.mean_energy_j == 40.0 and rep.violation_j == 10.0 and rep.accuracy == 0.75
    assert rep.episode_violation_rate == 0.5 and rep.mean_episode_overspend_j == 15.0


@pytest.fixture(scope="module")
def stream():
    return make_tournament(n=1500, k=4, seed=3)


@pytest.mark.parametrize("budget", [60.0, 100.0, 150.0])
def test_lagrangian_agent_keeps_the_budget_in_expectation(stream, budget):
    test_rows = stream.split_rows("test")
    model_joules = stream.energy_j[test_rows].mean(axis=0)
    assert model_joules.min() < budget < model_joules.max()  # feasible and binding
    agent = LagrangianAgent(budget_j=budget)
    logs = agent.fit(FitContext(stream, Reward("gated_rank"), seed=0))
    env = BudgetRoutingEnv(tournament=stream, split="test", horizon=50, budget_j=budget)
    report, trace = run_budget_episodes(agent, env, episodes=10, seed=0)
    assert report.mean_energy_j <= budget * (1 + TOLERANCE), report
    assert logs["train_budget"]["mean_energy_j"] <= budget * (1 + TOLERANCE)
    # It spends the budget on accuracy instead of hiding in the cheapest model.
    cheapest = int(np.argmin(model_joules))
    assert report.accuracy > stream.correct[test_rows, cheapest].mean()
    assert report.mean_energy_j > 0.8 * budget
    assert np.isfinite(trace["mu"]).all() and (trace["mu"] >= 0).all()


def test_without_a_binding_budget_the_multiplier_stays_near_zero(stream):
    agent = LagrangianAgent(budget_j=10_000.0)
    logs = agent.fit(FitContext(stream, Reward("gated_rank"), seed=0))
    assert logs["mu"][-1] == 0.0
    # ... and the budget binds the same agent when it is tight.
    tight = LagrangianAgent(budget_j=60.0)
    tight.fit(FitContext(stream, Reward("gated_rank"), seed=0))
    assert tight.mu > 0.0
