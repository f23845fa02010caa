"""BoxObservation: a Box view of every routing env for SB3, computed from the observation
(features fitted on train only)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import make_tournament
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import gymnasium as gym

import routing_gym
from routing_gym.envs import ObservationBatch, RoutingEnv
from routing_gym.envs.budget_env import BudgetRoutingEnv
from routing_gym.envs.wrappers import BoxObservation, question_featurizer
from routing_gym.errors import RoutingGymError


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
    featurizer = question_featurizer(env, "train", dim=12)
    assert env.featurizer is featurizer  # the shared, cached featurizer: no private copy
    for _ in range(5):
        obs, info = env.reset()
        row = info["row"]
        question = ObservationBatch.from_tournament(toy, [row])
        np.testing.assert_allclose(obs, featurizer.transform(question)[0], atol=1e-6)
        onehot = obs[12:]
        assert onehot.sum() == 1.0 and onehot[toy.benchmark_codes[row]] == 1.0
    # the public batched method gives what stepping gives, for a whole split
    split = env.unwrapped.observations()
    np.testing.assert_allclose(env.features(split)[3], env.observation(split.observation(3)))


def test_box_over_the_budget_env_shows_the_query_it_returns(toy):
    """The budget env returns the *next* query after each step; the Box view must be its features."""
    base = BudgetRoutingEnv(tournament=toy, horizon=6, budget_j=100.0)
    env = BoxObservation(base, dim=8)
    featurizer = env.featurizer
    obs, info = env.reset(seed=2)
    shown = [info["query_id"]]
    for step in range(5):
        expected = featurizer.transform(ObservationBatch.from_tournament(toy, [toy.query_ids.index(shown[-1])]))[0]
        np.testing.assert_allclose(obs[: len(expected)], expected, atol=1e-6)
        assert obs[-2] == pytest.approx(max(0.0, 1 - base._spent / base.total_budget_j))  # budget_left is kept
        obs, _, terminated, _, info = env.step(step % toy.n_models)
        assert not terminated
        shown.append(info["next_query_id"])
    assert len(set(shown)) > 1


@pytest.mark.parametrize("env_id", sorted(routing_gym.envs.registered_ids()))
def test_every_registered_env_passes_check_env_wrapped_and_unwrapped(env_id):
    replay_ids = (routing_gym.envs.REPLAY_ID, routing_gym.envs.BUDGET_ID, routing_gym.envs.CHANGING_POOL_ID, routing_gym.envs.MULTITURN_ID)
    env = gym.make(env_id, **({"tournament": "two-model"} if env_id in replay_ids else {}))
    check_env(env.unwrapped, skip_render_check=True)
    boxed = BoxObservation(env, dim=8)
    _check(boxed)
    assert isinstance(boxed.observation_space, spaces.Box)


def test_features_are_fitted_on_train_even_for_a_test_split_env():
    t = make_tournament(n=60, seed=4)
    queries = t.queries.copy()
    test_rows = t.split_rows("test")
    # A word only held-out questions use: a train-fitted vocabulary cannot know it.
    queries.loc[test_rows, "prompt"] = queries.loc[test_rows, "prompt"] + " zebraword"
    from dataclasses import replace

    t = replace(t, queries=queries)
    env = BoxObservation(RoutingEnv(tournament=t, split="test"), kind="tfidf", dim=500)
    assert "zebraword" not in env.featurizer.vectorizer_.vocabulary_
    assert "joules" in env.featurizer.vectorizer_.vocabulary_


def test_wrapper_errors_are_clear(toy):
    no_splits = make_tournament(with_splits=False)
    with pytest.raises(RoutingGymError, match="split 'train'.*with_splits"):
        BoxObservation(RoutingEnv(tournament=no_splits, split="all"))
    featurizer = question_featurizer(RoutingEnv(tournament=toy), "train", dim=8)
    with pytest.raises(TypeError, match="either a fitted featurizer or feature options"):
        BoxObservation(RoutingEnv(tournament=toy), featurizer=featurizer, dim=8)
    other = make_tournament(n=30, seed=1).subset(benchmarks=["gsm8k", "mmlu"])
    with pytest.raises(RoutingGymError, match="fitted for 3 benchmarks.*has 2"):
        BoxObservation(RoutingEnv(tournament=other.with_splits(seed=0, proportions={"train": 2, "test": 1})), featurizer=featurizer)
    with pytest.raises(RoutingGymError, match="Dict observation with 'text' and 'benchmark'"):
        BoxObservation(gym.make("CartPole-v1"), featurizer=featurizer)
    with pytest.raises(RoutingGymError, match="not a replay env"):
        BoxObservation(gym.make("CartPole-v1"))
