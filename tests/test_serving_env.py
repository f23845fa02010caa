"""RoutingGym/Serving-v0: the env checker, seeds, arrivals, and the replay env as its load-free limit (issue 62)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.envs.registration import serving_ids
from routing_gym.envs.serving_env import ServingConfig, arrival_times, default_config
from routing_gym.errors import UnknownNameError

pytestmark = pytest.mark.realdata


@pytest.mark.parametrize("env_id", ["RoutingGym/Serving-v0", "RoutingGym/Serving-features-v0"])
def test_gymnasium_and_sb3_check_env(env_id, data_dir):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, episode_length=20)
    check_env(env.unwrapped)
    if "features" in env_id:
        sb3_check_env(env)
        assert env.observation_space.shape[0] > 4 * 9
    assert env_id in serving_ids()


def run(env, policy, seed=0):
    obs, info = env.reset(seed=seed)
    rewards, infos = [], [info]
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        rewards.append(reward)
        infos.append(info)
        if terminated:
            return rewards, infos
        assert not truncated


def test_same_seed_same_episode_and_every_request_is_paid(data_dir):
    env = gym.make("RoutingGym/Serving-v0", episode_length=60, rate=4.0)
    first = run(env, lambda obs: 6)
    second = run(env, lambda obs: 6)
    assert first[0] == second[0]
    assert sum(i["completed"] for i in first[1]) == 60
    assert "episode" not in first[1][-1]
    assert first[1][-1]["idle_energy_j"] > 0 and first[1][-1]["active_energy_j"] > 0


def test_load_free_with_the_same_actions_gives_the_replay_envs_accuracy_and_joules(data_dir):
    serving = gym.make("RoutingGym/Serving-v0", episode_length=200, energy="load-free", order="sequential",
                       slo_s=1e9).unwrapped  # no SLO term: the replay env has none
    replay = gym.make("RoutingGym/PaperPool-v0", order="sequential").unwrapped
    actions = np.random.default_rng(0).integers(0, 9, 200)
    serving.reset(seed=0)
    rewards, correct, energy = [], 0.0, 0.0
    for a in actions:
        _, r, terminated, _, info = serving.step(int(a))
        rewards.append(r)
        correct += info["correct"]
        energy += info["energy_j"]
    assert terminated
    result = replay.evaluate(np.concatenate([actions, np.zeros(len(replay.rows) - 200, dtype=int)]))
    assert correct / 200 == pytest.approx(result.correct[:200].mean())
    assert energy / 200 == pytest.approx(result.energy_j[:200].mean())
    assert sum(rewards) == pytest.approx(result.rewards[:200].sum())  # same gated-rank reward, paid at completion


@pytest.mark.parametrize("arrival", ["poisson", "bursty", "daily"])
def test_arrival_processes_keep_their_mean_rate(arrival):
    config = ServingConfig(arrival=arrival, rate=5.0, episode_length=20_000, day_s=200.0, burst_mean_s=20.0)
    times = arrival_times(config, np.random.default_rng(0))
    assert np.all(np.diff(times) > 0) and len(times) == 20_000
    assert len(times) / times[-1] == pytest.approx(5.0, rel=0.06)
    gaps = np.diff(times)
    cv = gaps.std() / gaps.mean()
    # Poisson gaps: coefficient of variation 1; a modulated rate spreads them more
    assert {"poisson": 0.95 < cv < 1.05, "bursty": cv > 1.2, "daily": cv > 1.05}[arrival], cv


def test_load_raises_latency_and_lowers_active_joules_per_request(data_dir):
    light = gym.make("RoutingGym/Serving-v0", episode_length=300, rate=0.05).unwrapped
    heavy = gym.make("RoutingGym/Serving-v0", episode_length=300, rate=20.0).unwrapped
    per = {}
    for name, env in (("light", light), ("heavy", heavy)):
        _, infos = run(env, lambda obs: 2)  # everything to gemma2-2b (measured)
        per[name] = (sum(i["energy_j"] for i in infos) / 300, sum(i["latency_s"] for i in infos) / 300)
    assert per["heavy"][0] < 0.5 * per["light"][0]  # batching shares the iteration's joules
    assert per["heavy"][1] > per["light"][1]


def test_options_are_checked():
    assert default_config()["arrival"] == "poisson"
    with pytest.raises(UnknownNameError, match="unknown arrival .weekly."):
        ServingConfig(arrival="weekly")
    with pytest.raises(ValueError, match="rate must be > 0"):
        ServingConfig(rate=0.0)
