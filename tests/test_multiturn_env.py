"""MultiTurnRoutingEnv: Stop ends an episode, energy accumulates, verdicts; cascade baselines."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from routing_gym.envs import Reward
from routing_gym.envs import MULTITURN_ID
from routing_gym.envs.multiturn_env import JUDGED_CORRECT, JUDGED_WRONG, NO_ANSWER, MultiTurnRoutingEnv
from routing_gym.errors import InvalidActionError, RoutingGymError
from routing_gym.eval.execution.rollout import rollout
from routing_gym_agents import FitContext, ObservationBatch, make_agent
from routing_gym_agents.cascade import CascadeAgent  # registers the cascades (until the registry lists them)


def test_check_env_with_perfect_and_noisy_verifiers(toy):
    check_env(gym.make(MULTITURN_ID, tournament=toy).unwrapped)
    check_env(gym.make(MULTITURN_ID, tournament=toy, verifier_accuracy=0.7, include_difficulty=True).unwrapped)


def test_stop_ends_the_episode(toy):
    env = MultiTurnRoutingEnv(tournament=toy, max_turns=5)
    stop = env.stop_action
    assert env.action_space.n == toy.n_models + 1 and stop == toy.n_models
    obs, _ = env.reset(seed=0)
    assert (obs["turn"], obs["previous_model"], obs["verdict"]) == (0, stop, NO_ANSWER)
    # Stop before any answer: ends at once, costs nothing, counts as wrong.
    _, reward, terminated, truncated, info = env.step(stop)
    assert terminated and not truncated and reward == env.wrong_reward
    assert info["turns"] == 0 and info["total_energy_j"] == 0.0 and info["final_model_id"] == "" and info["stopped"]
    with pytest.raises(RoutingGymError, match="before reset"):
        env.step(0)
    # Stop after one answer: the answer stands.
    _, info = env.reset()
    _, _, terminated, _, _ = env.step(1)
    assert not terminated
    _, reward, terminated, _, info = env.step(stop)
    c = toy.correct[info["row"], 1]
    assert terminated and info["final_correct"] == c and info["final_model_id"] == "m1" and info["turns"] == 1
    assert reward == (env.correct_reward if c else env.wrong_reward)


def test_energy_accumulates_over_turns_and_the_return_adds_up(toy):
    env = MultiTurnRoutingEnv(tournament=toy, max_turns=3, lambda_e=0.7, scale_j=100.0)
    obs, info = env.reset(seed=2, options={"index": 4})
    row, total, ret = info["row"], 0.0, 0.0
    for turn, model in enumerate((0, 2, 1), start=1):
        obs, reward, terminated, _, info = env.step(model)
        total += toy.energy_j[row, model]
        ret += reward
        assert info["total_energy_j"] == pytest.approx(total) and info["energy_j"] == toy.energy_j[row, model]
        assert obs["spent"][0] == pytest.approx(total / 100.0, rel=1e-6)
        assert obs["turn"] == turn and obs["previous_model"] == model
        expected_verdict = JUDGED_CORRECT if toy.correct[row, model] else JUDGED_WRONG
        assert obs["verdict"] == expected_verdict  # perfect verifier
        assert terminated is (turn == 3)
    # The turn limit ends the episode with the last answer (not a Stop).
    final = toy.correct[row, 1]
    assert info["stopped"] is False and info["final_correct"] == final
    assert ret == pytest.approx((2.0 if final else -1.0) - 0.7 * total / 100.0)


def test_noisy_verifier_is_right_at_its_stated_rate(toy):
    env = MultiTurnRoutingEnv(tournament=toy, max_turns=1, verifier_accuracy=0.75)
    agree = []
    env.reset(seed=0)
    for i in range(1200):
        env.reset() if i else None
        obs, _, _, _, info = env.step(i % toy.n_models)
        agree.append((obs["verdict"] == JUDGED_CORRECT) == bool(info["correct"]))
    # Binomial(1200, 0.75): sd 0.0125; 4 sd either side.
    assert abs(np.mean(agree) - 0.75) < 0.05


def test_invalid_actions_and_options(toy):
    env = MultiTurnRoutingEnv(tournament=toy)
    env.reset(seed=0)
    for bad in (toy.n_models + 1, -1, 1.5, "a"):
        with pytest.raises(InvalidActionError):
            env.step(bad)
    for bad in ({"max_turns": 0}, {"verifier_accuracy": 0.3}, {"scale_j": 0.0}, {"correct_reward": -2.0}):
        with pytest.raises(ValueError):
            MultiTurnRoutingEnv(tournament=toy, **bad)


def test_cascade_with_a_perfect_verifier_stops_at_the_first_correct_rung(toy):
    agent = make_agent("cascade-cheapest")
    logs = agent.fit(FitContext(toy, Reward()))
    order = agent.order
    train = toy.split_rows("train")
    assert list(np.argsort(toy.energy_j[train].mean(axis=0), kind="stable")) == order
    assert logs["chain"] == [toy.model_ids[i] for i in order]
    env = MultiTurnRoutingEnv(tournament=toy, split="test", order="sequential", max_turns=toy.n_models)
    out = rollout(env, agent.act)
    rows = toy.split_rows("test")
    correct = toy.correct[rows][:, order]
    first = np.where(correct.any(axis=1), correct.argmax(axis=1), len(order) - 1)
    energy = np.cumsum(toy.energy_j[rows][:, order], axis=1)[np.arange(len(rows)), first]
    np.testing.assert_allclose(out["final_correct"], correct.any(axis=1))
    np.testing.assert_allclose(out["energy_j"], energy)
    np.testing.assert_allclose(out["turns"], first + 1)
    # One-step routing cannot escalate: the first rung.
    assert agent.act_batch(ObservationBatch.from_tournament(toy, rows)).tolist() == [order[0]] * len(rows)


def test_pareto_cascade_escalates_only_to_more_accurate_models(toy):
    agent = CascadeAgent(chain="pareto")
    agent.fit(FitContext(toy, Reward()))
    train = toy.split_rows("train")
    acc, joules = toy.correct[train].mean(axis=0)[agent.order], toy.energy_j[train].mean(axis=0)[agent.order]
    assert (np.diff(acc) > 0).all() and (np.diff(joules) > 0).all()
    env = MultiTurnRoutingEnv(tournament=toy, split="test", order="sequential", max_turns=toy.n_models, verifier_accuracy=0.8)
    out = rollout(env, agent.act, seed=0)
    assert (out["turns"] >= 1).all() and (out["turns"] <= len(agent.order)).all()
