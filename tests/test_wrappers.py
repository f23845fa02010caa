"""BoxObservation: a Box view of RoutingEnv for SB3 (features fitted on train only)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import make_tournament
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from routing_gym.envs import RoutingEnv
from routing_gym.envs.wrappers import BoxObservation
from routing_gym.errors import RoutingGymError
from routing_gym.features import featurizer_for


def _check(env) -> None:
    with warnings.catch_warnings():
        # check_env warns that it was handed a wrapper rather than the raw env; that is the point here.
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("include_difficulty", [False, True])
def test_wrapper_passes_check_env(toy, include_difficulty):
    env = BoxObservation(RoutingEnv(tournament=toy, include_difficulty=include_difficulty), dim=16)
    _check(env)
    assert isinstance(env.observation_space, spaces.Box)
    assert env.observation_space.dtype == np.float32
    expected = 16 + len(toy.benchmarks) + int(include_difficulty)
    assert env.observation_space.shape == (expected,)


def test_one_step_episodes_terminate_never_truncate(toy):
    env = BoxObservation(RoutingEnv(tournament=toy), dim=8)
    env.reset(seed=3)
    for a in range(toy.n_models):
        obs, info = env.reset()
        obs2, reward, terminated, truncated, step_info = env.step(a)
        assert (terminated, truncated) == (True, False)
        assert step_info["query_id"] == info["query_id"]
        assert np.array_equal(obs, obs2) and obs is not obs2  # same query, never the same array
        assert env.observation_space.contains(obs2)


def test_observation_is_the_shared_features_of_the_shown_query(toy):
    env = BoxObservation(RoutingEnv(tournament=toy, split="test"), dim=12)
    featurizer = featurizer_for(toy, "train", dim=12)
    assert env.featurizer is featurizer  # the shared, cached featurizer: no private copy
    for _ in range(5):
        obs, info = env.reset()
        row = info["row"]
        expected = featurizer.transform([toy.queries["prompt"].iloc[row]], [toy.benchmark_codes[row]])[0]
        np.testing.assert_allclose(obs, expected, atol=1e-6)
        onehot = obs[12:]
        assert onehot.sum() == 1.0 and onehot[toy.benchmark_codes[row]] == 1.0


def test_features_are_fitted_on_train_even_for_a_test_split_env():
    t = make_tournament(n=60, seed=4)
    queries = t.queries.copy()
    test_rows = t.split_rows("test")
    # A word only held-out questions use: a train-fitted vocabulary cannot know it.
    queries.loc[test_rows, "prompt"] = queries.loc[test_rows, "prompt"] + " zebraword"
    from dataclasses import replace

    t = replace(t, queries=queries)
    env = BoxObservation(RoutingEnv(tournament=t, split="test"), kind="tfidf", dim=500)
    assert "zebraword" not in env.featurizer._vectorizer.vocabulary_
    assert "joules" in env.featurizer._vectorizer.vocabulary_


def test_wrapper_errors_are_clear(toy):
    no_splits = make_tournament(with_splits=False)
    with pytest.raises(RoutingGymError, match="split 'train'.*with_splits"):
        BoxObservation(RoutingEnv(tournament=no_splits, split="all"))
    featurizer = featurizer_for(toy, "train", dim=8)
    with pytest.raises(TypeError, match="either a fitted featurizer or feature options"):
        BoxObservation(RoutingEnv(tournament=toy), featurizer=featurizer, dim=8)
    other = make_tournament(n=30, seed=1).subset(benchmarks=["gsm8k", "mmlu"])
    with pytest.raises(RoutingGymError, match="fitted for 3 benchmarks.*has 2"):
        BoxObservation(RoutingEnv(tournament=other.with_splits(seed=0, proportions={"train": 2, "test": 1})), featurizer=featurizer)
    import gymnasium as gym

    with pytest.raises(RoutingGymError, match="wraps a RoutingEnv"):
        BoxObservation(gym.make("CartPole-v1"))
