"""ChangingPoolEnv: models added and removed mid-stream; bandit regret against the current pool."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament
from gymnasium.utils.env_checker import check_env

from routing_gym.envs import Reward
from routing_gym.envs import CHANGING_POOL_ID
from routing_gym.envs.changing_pool_env import ChangingPoolEnv, PoolEvent
from routing_gym.errors import InvalidActionError, RoutingGymError
from routing_gym.eval.generalisation.pool_change import pool_change_regret

EVENTS = [(3, "add", "m3"), (6, "remove", "m0")]


def test_check_env_and_registered_id(toy):
    check_env(gym.make(CHANGING_POOL_ID, tournament=toy, events=EVENTS).unwrapped)
    assert gym.make(CHANGING_POOL_ID, tournament=toy).unwrapped.config.invalid_action == "penalize"


def test_events_change_the_pool_at_their_step(toy):
    env = ChangingPoolEnv(tournament=toy, events=EVENTS, coefficients={"lambda_e": 0.5})
    matrix = env.reward_matrix
    obs, info = env.reset(seed=0)
    masks, fired = [], []
    for step in range(9):
        if step:
            obs, info = env.reset()
        masks.append(obs["available"].tolist())
        position = int(np.flatnonzero(env.rows == info["row"])[0])
        _, reward, terminated, _, info = env.step(3)
        fired.append(info["pool_events"])
        assert terminated and info["stream_step"] == step
        # Regret is measured against the best model available at this step.
        assert info["oracle_reward"] == pytest.approx(matrix[position][np.array(masks[-1], bool)].max())
        if step < 3:  # m3 is not in the pool yet: penalized, costs nothing
            assert reward == env.reward.invalid_penalty and not info["valid"] and info["energy_j"] == 0.0
            assert info["requested_model_id"] == "m3"
        else:
            assert reward == pytest.approx(matrix[position, 3]) and info["valid"]
    assert masks[:3] == [[1, 1, 1, 0]] * 3 and masks[3:6] == [[1, 1, 1, 1]] * 3 and masks[6:] == [[0, 1, 1, 1]] * 3
    assert fired[3] == "add m3" and fired[6] == "remove m0" and fired.count("") == 7
    # A seeded reset restarts the stream with the initial pool.
    obs, _ = env.reset(seed=0)
    assert obs["available"].tolist() == [1, 1, 1, 0]


def test_absent_models_raise_by_default_and_the_decision_stays_pending(toy):
    env = ChangingPoolEnv(tournament=toy, events=EVENTS, invalid_action="raise")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="not in the pool"):
        env.step(3)
    _, _, terminated, _, info = env.step(1)
    assert terminated and info["model_id"] == "m1"


def test_batched_evaluation_scores_against_the_current_pool(toy):
    env = ChangingPoolEnv(tournament=toy, split="test", initial_models=["m1", "m2"])
    actions = np.arange(len(env.rows)) % toy.n_models
    result = env.evaluate(actions)
    allowed = np.isin(actions, [1, 2])
    np.testing.assert_array_equal(result.valid, allowed)
    np.testing.assert_array_equal(result.actions, actions)
    assert (result.rewards[~allowed] == env.reward.invalid_penalty).all() and (result.energy_j[~allowed] == 0).all()


def test_bad_schedules_are_rejected(toy):
    with pytest.raises(RoutingGymError, match="unknown model"):
        ChangingPoolEnv(tournament=toy, events=[(1, "add", "gpt-9")])
    with pytest.raises(RoutingGymError, match="kind"):
        ChangingPoolEnv(tournament=toy, events=[(1, "swap", "m1")])
    with pytest.raises(RoutingGymError, match="no model"):
        ChangingPoolEnv(tournament=toy, initial_models=["m0"], events=[(2, "remove", "m0")])
    assert PoolEvent.parse({"step": 2, "kind": "add", "model_id": "m1"}) == PoolEvent(2, "add", "m1")


def test_bandit_regret_curves_and_adaptation_to_a_removed_model(tmp_path):
    t = make_tournament(n=900, k=4, seed=5)
    reward = Reward("gated_rank", {"lambda_e": 0.4})
    favourite = int(np.argmax(reward.matrix(t, t.split_rows("train")).mean(axis=0)))
    removed = t.model_ids[favourite]
    result = pool_change_regret(["linucb"], t, [(300, "remove", removed)], seeds=(0, 1), reward=reward)
    regret = result.regret["linucb"]
    assert regret.shape == (2, len(t.split_rows("train"))) and (regret >= -1e-12).all()
    assert (np.diff(result.cumulative("linucb"), axis=1) >= -1e-12).all()
    share = result.share("linucb", favourite, window=100)
    # It used the favourite before the removal and learns from the penalties to stop asking
    # for it (slowly: a stationary ridge bandit never forgets the favourite's good past).
    assert share[2] > 0.3 and share[-1] < share[2] / 4
    # The removal costs regret that the bandit then works off.
    window = result.windowed("linucb", window=100)
    assert window[3] > window[2] and window[-1] < window[3]
    # The curves plot (PNG written, events marked).
    png = result.plot(tmp_path / "regret.png", t.model_ids)
    assert png.stat().st_size > 10_000
