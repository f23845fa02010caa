"""RoutingEnv: gymnasium compliance, determinism, info, invalid actions, batched evaluation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament
from gymnasium.utils.env_checker import check_env

import routing_gym
from routing_gym.envs import RoutingEnv
from routing_gym.errors import EmptySplitError, InvalidActionError, RoutingGymError, UnknownNameError


@pytest.fixture
def env(toy):
    return RoutingEnv(tournament=toy, split="train", coefficients={"lambda_e": 0.4})


def test_check_env_passes_with_and_without_difficulty(toy):
    check_env(RoutingEnv(tournament=toy))
    check_env(RoutingEnv(tournament=toy, include_difficulty=True))


def test_registered_id_and_kwargs(toy):
    env = gym.make(routing_gym.REPLAY_ID, tournament=toy, split="test", coefficients={"lambda_t": 0.2})
    assert env.unwrapped.reward.coefficients == {"lambda_t": 0.2}
    assert len(env.unwrapped.rows) == len(toy.split_rows("test"))
    with pytest.raises(TypeError, match="unknown option\\(s\\) \\['lambda_e'\\]"):
        RoutingEnv(tournament=toy, lambda_e=0.4)


def rollout(env, seed, steps=50):
    env.reset(seed=seed)
    env.action_space.seed(seed)
    out = []
    for _ in range(steps):
        obs, info = env.reset()
        a = env.action_space.sample()
        _, r, term, trunc, step_info = env.step(a)
        out.append((info["query_id"], a, r, term, trunc))
    return out


def test_same_seed_same_trajectory_and_one_step_episodes(env):
    first, second, other = rollout(env, 3), rollout(env, 3), rollout(env, 4)
    assert first == second and first != other
    assert all(term and not trunc for *_, term, trunc in first)


def test_shuffled_pass_visits_every_query_once(env):
    env.reset(seed=0)  # a seeded reset starts a new pass and shows its first query
    first = env.unwrapped._current
    ids = [env.core.query_ids[first]] + [env.reset()[1]["query_id"] for _ in range(len(env.rows) - 1)]
    assert sorted(ids) == sorted(env.core.query_ids.tolist())
    assert ids != env.core.query_ids.tolist()  # shuffled, not table order


def test_sequential_order_follows_the_table(toy):
    env = RoutingEnv(tournament=toy, split="train", order="sequential")
    _, info = env.reset(seed=0)
    ids = [info["query_id"]] + [env.reset()[1]["query_id"] for _ in range(len(env.rows) - 1)]
    assert ids == toy.queries["query_id"].to_numpy()[env.rows].tolist()


def test_info_carries_the_logged_outcome_and_reward_components(toy, env):
    pinned = env.core.query_ids[5]
    obs, info = env.reset(options={"query_id": pinned})
    assert info["query_id"] == pinned
    row = info["row"]
    assert obs["text"] == toy.queries["prompt"].iloc[row]
    assert obs["benchmark"] == toy.benchmarks.index(toy.queries["benchmark"].iloc[row])
    assert env.observation_space.contains(obs)
    _, reward, _, _, info = env.step(2)
    assert info["model_id"] == "m2" and info["energy_j"] == toy.energy_j[row, 2]
    assert info["correct"] == toy.correct[row, 2] and info["latency_s"] == toy.latency_s[row, 2]
    expected = 2 - 0.4 * info["z_energy"] if info["correct"] else -1.0
    assert reward == pytest.approx(expected)
    assert info["oracle_reward"] >= reward


def test_invalid_actions_raise_or_are_penalized(toy):
    env = RoutingEnv(tournament=toy)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"action 7 is outside \[0, 4\) .*models: m0, m1, m2, m3"):
        env.step(7)
    env.reset()
    with pytest.raises(InvalidActionError, match="not an integer"):
        env.step("m1")
    penal = RoutingEnv(tournament=toy, invalid_action="penalize", invalid_penalty=-3.0)
    penal.reset(seed=0)
    _, reward, terminated, _, info = penal.step(-1)
    assert reward == -3.0 and terminated and info["valid"] is False


def test_bad_configuration_errors(toy):
    with pytest.raises(RoutingGymError, match="step\\(\\) called before reset"):
        RoutingEnv(tournament=toy).step(0)
    with pytest.raises(UnknownNameError, match="unknown reward 'energy'"):
        RoutingEnv(tournament=toy, reward="energy")
    with pytest.raises(EmptySplitError):
        RoutingEnv(tournament=make_tournament(with_splits=False), split="train")
    with pytest.raises(RoutingGymError, match="no difficulty"):
        t = make_tournament()
        t.queries["difficulty"] = np.nan
        RoutingEnv(tournament=t, include_difficulty=True)
    with pytest.raises(RoutingGymError, match="query_id 'zzz' is not in split"):
        RoutingEnv(tournament=toy).reset(options={"query_id": "zzz"})
    with pytest.raises(UnknownNameError, match="unknown tournament"):
        RoutingEnv(tournament="no-such-preset")


def test_batched_evaluation_matches_stepping(toy, env):
    rng = np.random.default_rng(0)
    actions = rng.integers(-1, toy.n_models + 1, len(env.rows))
    batch = env.evaluate(actions)
    penal = RoutingEnv(tournament=toy, split="train", coefficients={"lambda_e": 0.4}, invalid_action="penalize")
    for position, action in enumerate(actions):
        penal.reset(options={"index": position})
        _, reward, _, _, info = penal.step(int(action))
        assert batch.rewards[position] == pytest.approx(reward)
        assert batch.energy_j[position] == info["energy_j"] and batch.correct[position] == info["correct"]
    metrics = batch.metrics()
    assert metrics["invalid_rate"] == pytest.approx(np.mean((actions < 0) | (actions >= toy.n_models)))
    assert metrics["accuracy"] == pytest.approx(batch.correct.mean())


def test_text_space_covers_unusual_characters():
    t = make_tournament(n=12)
    t.queries.loc[0, "prompt"] = "Ünïcödé — ∑ x² ≤ 5?\nnew line\ttab"
    env = RoutingEnv(tournament=t, split="all", order="sequential")
    obs, _ = env.reset(options={"index": 0})
    assert env.observation_space.contains(obs)
