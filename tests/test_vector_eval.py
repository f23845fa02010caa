"""RoutingVectorEnv.evaluate / observations (held-out scoring through the one scorer) and the
``to_sb3`` export from ``routing_gym.envs``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.envs import ObservationBatch, RoutingEnv, RoutingVectorEnv, to_sb3
from routing_gym.envs.vector_env import to_sb3 as to_sb3_in_module


def test_to_sb3_is_exported_from_envs():
    assert to_sb3 is to_sb3_in_module


def test_vector_evaluate_matches_the_single_env(toy):
    vec = gym.make_vec("RoutingGym/Replay-v0", num_envs=4, tournament=toy, split="test", coefficients={"lambda_e": 0.7})
    single = RoutingEnv(tournament=toy, split="test", coefficients={"lambda_e": 0.7})
    batch = vec.observations()
    assert isinstance(batch, ObservationBatch)
    assert list(batch.query_ids) == list(single.observations().query_ids)
    actions = np.arange(len(batch)) % toy.n_models
    actions[0] = -1  # an invalid action is scored, not raised
    got, want = vec.evaluate(actions), single.evaluate(actions)
    np.testing.assert_array_equal(got.rewards, want.rewards)
    np.testing.assert_array_equal(got.correct, want.correct)
    assert got.metrics() == want.metrics() and got.metrics()["invalid_rate"] > 0


def test_vector_observations_in_feature_mode_are_the_step_features(toy):
    vec = RoutingVectorEnv(num_envs=3, tournament=toy, split="test", observation="features",
                           order="sequential", feature_params={"dim": 8})
    features = vec.observations()
    obs, _ = vec.reset(seed=0)
    np.testing.assert_array_equal(obs, features[:3])  # sequential order shows rows 0, 1, 2 first
    assert vec.evaluate(np.zeros(len(features), dtype=int)).metrics()["invalid_rate"] == 0.0


def test_vector_evaluate_rejects_the_wrong_length(toy):
    vec = RoutingVectorEnv(num_envs=2, tournament=toy, split="test")
    with pytest.raises(ValueError, match="one per query"):
        vec.evaluate([0, 1])
