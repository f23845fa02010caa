"""RL clients by env id, unmodified (issue 27): the -features and -features-stream ids,
gymnasium's constructor conventions (render_mode, Python's unknown-keyword wording), streams,
and SB3 / TorchRL driving the ids by name."""

from __future__ import annotations

import json
import runpy
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament, two_skill_tournament
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import routing_gym
from routing_gym.envs import (
    BUDGET_ID,
    CHANGING_POOL_ID,
    MULTITURN_ID,
    REPLAY_ID,
    STREAM_LENGTH,
    RoutingEnv,
    RoutingVectorEnv,
    features_id,
    features_ids,
    registered_ids,
    stream_id,
    stream_ids,
)
from routing_gym.envs.observation import ObservationBatch
from routing_gym.envs.wrappers import BoxObservation

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "clients_check.py"
TOURNAMENT_IDS = (REPLAY_ID, BUDGET_ID, CHANGING_POOL_ID, MULTITURN_ID)
SMALL_FEATURES = {"feature_params": {"dim": 8}}


def clients_check() -> dict:
    return runpy.run_path(str(SCRIPT), run_name="clients_check")


def small_kwargs(env_id: str) -> dict:
    """Keywords that keep an id small: the toy tournament, or a 120-query procedural one."""
    base = env_id.replace("-features-stream", "").replace("-features", "")
    return {"tournament": make_tournament()} if base in TOURNAMENT_IDS else {"n_queries": 120}


def test_ids_are_registered_for_every_family():
    assert len(registered_ids()) == 11
    assert features_ids() == [features_id(i) for i in registered_ids()]
    assert "RoutingGym/Replay-features-v0" in features_ids() and "RoutingGym/PaperPool-features-stream-v0" in stream_ids()
    one_query = set(registered_ids()) - {BUDGET_ID, MULTITURN_ID}  # budget and multi-turn episodes are already several steps
    assert stream_ids() == [stream_id(i) for i in registered_ids() if i in one_query]
    for env_id in features_ids() + stream_ids():
        assert env_id in gym.registry and gym.spec(env_id).kwargs["observation"] == "features"
    assert all(gym.spec(i).kwargs["stream"] == STREAM_LENGTH for i in stream_ids())


@pytest.mark.parametrize("env_id", features_ids() + stream_ids())
def test_every_new_id_passes_gymnasium_and_sb3_check_env(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, **small_kwargs(env_id), **SMALL_FEATURES)
    assert isinstance(env.observation_space, spaces.Box) and env.observation_space.dtype == np.float32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
        sb3_check_env(env)
        check_env(env)  # warns only that it was handed a wrapper (BoxObservation is one)
    messages = [str(w.message) for w in caught]
    assert all("different from the unwrapped version" in m for m in messages), messages
    assert len(messages) == 1


def shared_objects(*infos: dict) -> list[str]:
    """Keys whose mutable values (dict, list, array) are one object in two of ``infos``
    (what gymnasium 1.4's ``check_returned_data_not_reused`` refuses; 1.3 does not check)."""
    seen: dict[int, str] = {}
    shared = []

    def walk(value, where):
        if isinstance(value, (dict, list, np.ndarray)):
            if id(value) in seen and seen[id(value)] != where.split("/")[0]:
                shared.append(where)
            seen[id(value)] = where.split("/")[0]
            for key, inner in (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []):
                walk(inner, f"{where}/{key}")

    for n, info in enumerate(infos):
        walk(info, f"info{n}")
    return shared


@pytest.mark.parametrize("env_id", registered_ids() + features_ids() + stream_ids())
def test_every_id_passes_check_env_and_env_check_with_fresh_infos_and_no_episode_key(env_id, tmp_path, capsys):
    """Gymnasium's checker and `routing-gym env check` on every id; on gymnasium 1.4 (the newest
    the core pin allows, .ci/run's second leg) the checker also refuses infos that share objects."""
    from routing_gym.cli import main

    kwargs = {**small_kwargs(env_id), **(SMALL_FEATURES if "-features" in env_id else {})}
    env = gym.make(env_id, **kwargs)
    check_env(env.unwrapped)
    _, first = env.reset(seed=0)
    infos = [first]
    for _ in range(2):  # as gymnasium's check: up to two steps of the episode, then a reset
        *_, terminated, truncated, info = env.step(env.action_space.sample())
        infos.append(info)
        if terminated or truncated:
            break
    infos.append(env.reset(seed=0)[1])
    assert shared_objects(*infos) == []
    # info["episode"] is the end-of-episode record (r, l, t) of RecordEpisodeStatistics and SB3's Monitor
    assert all("episode" not in info and info.keys() == first.keys() for info in infos)
    if "tournament" in kwargs:
        kwargs["tournament"].save(tmp_path / "toy")
        kwargs["tournament"] = str(tmp_path / "toy")
    assert main(["env", "check", "--id", env_id, "--steps", "5", "--kwargs", json.dumps(kwargs)]) == 0
    assert f"gymnasium check_env: passed for {env_id}" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("env_id", features_ids() + stream_ids())
def test_sb3_ppo_trains_by_id_on_every_box_id(env_id):
    """`PPO("MlpPolicy", id)` as a user writes it (SB3 makes the env by id and wraps it in its
    Monitor), on every Box id: the budget ids once failed here with KeyError 'r'."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env(env_id, n_envs=1, seed=0, env_kwargs={**small_kwargs(env_id), **SMALL_FEATURES})
    model = PPO("MlpPolicy", vec, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu").learn(256)
    assert model.num_timesteps == 256
    assert len(model.ep_info_buffer) >= 1 and all({"r", "l", "t"} <= set(e) for e in model.ep_info_buffer)


@pytest.mark.parametrize("env_id", registered_ids())
def test_every_id_takes_render_mode_and_rejects_unknown_keywords_in_pythons_words(env_id):
    env = gym.make(env_id, render_mode=None, **small_kwargs(env_id))
    assert env.render_mode is None and env.unwrapped.metadata["render_modes"] == []
    with pytest.raises(NotImplementedError, match="nothing to draw"):
        env.unwrapped.render()
    # TorchRL retries without `frameskip` on exactly Python's message; the options follow it.
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'frameskip' \(unknown option\(s\).*options: \["):
        gym.make(env_id, frameskip=4, **small_kwargs(env_id))
    with pytest.raises(TypeError, match=r"render_mode='human', which it does not support \(render_modes: \[\]\)"):
        gym.make(env_id, render_mode="human", **small_kwargs(env_id))


def test_vector_envs_take_render_mode_and_reject_unknown_keywords(toy):
    venv = gym.make_vec(REPLAY_ID, num_envs=2, tournament=toy, render_mode=None)
    assert venv.render_mode is None
    with pytest.raises(TypeError, match="RoutingVectorEnv.__init__\\(\\) got an unexpected keyword argument 'frameskip'"):
        RoutingVectorEnv(2, tournament=toy, frameskip=4)
    with pytest.raises(TypeError, match="does not support"):  # SB3 asks for rgb_array and retries without on a TypeError
        RoutingVectorEnv(2, tournament=toy, render_mode="rgb_array")


@pytest.mark.parametrize("base_id", [REPLAY_ID, BUDGET_ID, CHANGING_POOL_ID, MULTITURN_ID])
def test_feature_ids_show_exactly_box_observation_vectors(base_id, toy):
    made = gym.make(features_id(base_id), tournament=toy, **SMALL_FEATURES)
    same = gym.make(base_id, tournament=toy, observation="features", **SMALL_FEATURES)  # gym.make takes it too
    boxed = BoxObservation(gym.make(base_id, tournament=toy), dim=8)
    assert made.observation_space == boxed.observation_space == same.observation_space
    runs = []
    for env in (made, same, boxed):
        obs, _ = env.reset(seed=3)
        seen = [obs]
        for step in range(6):
            obs, _, terminated, truncated, _ = env.step(step % 2)
            seen.append(obs)
            if terminated or truncated:
                obs, _ = env.reset()
                seen.append(obs)
        runs.append(np.stack(seen))
    np.testing.assert_array_equal(runs[0], runs[2])
    np.testing.assert_array_equal(runs[1], runs[2])


def test_feature_vectors_are_the_vector_envs_and_the_featurizers(toy):
    env = gym.make(features_id(REPLAY_ID), tournament=toy, split="test", **SMALL_FEATURES)
    venv = gym.make_vec(features_id(REPLAY_ID), num_envs=3, tournament=toy, split="test", **SMALL_FEATURES)
    assert isinstance(venv, RoutingVectorEnv) and venv.observation_mode == "features"
    assert venv.featurizer is env.get_wrapper_attr("featurizer")  # one fit, shared by content
    obs, info = venv.reset(seed=0)
    rows = [int(np.flatnonzero(venv.core.rows == r)[0]) for r in info["row"]]
    for row, vector in zip(rows, obs):
        single, _ = env.reset(options={"index": row})
        np.testing.assert_allclose(single, vector, atol=1e-6)
        fresh = venv.featurizer.transform(ObservationBatch.from_tournament(toy, [venv.core.rows[row]]))[0]
        np.testing.assert_allclose(single, np.clip(fresh, -1, 1), atol=1e-5)  # the cache holds what the featurizer computes


def test_a_stream_scores_every_step_as_the_one_query_env_and_truncates_after_t(toy):
    env = gym.make(REPLAY_ID, tournament=toy, stream=5)
    base = env.unwrapped
    obs, info = env.reset(seed=1)
    shown = info["query_id"]
    for step in range(5):
        assert obs["text"] == base.core.texts[base.core.position_of(shown)]
        action = step % toy.n_models
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["query_id"] == shown  # the routed query is the one shown
        assert reward == base.reward_matrix[base.core.position_of(shown), action]
        assert not terminated and truncated == (step == 4)
        shown = info["next_query_id"]
    assert obs["text"] == base.core.texts[base.core.position_of(shown)]  # the final observation: the next query
    with pytest.raises(routing_gym.errors.RoutingGymError, match="before reset"):
        env.step(0)
    one_query = gym.make(REPLAY_ID, tournament=toy)
    one_query.reset(seed=1)
    _, _, terminated, truncated, _ = one_query.step(0)
    assert terminated and not truncated


def test_stream_option_rules(toy):
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="stream"):
            RoutingEnv(tournament=toy, stream=bad)
    with pytest.raises(ValueError, match="set horizon, not stream"):
        gym.make(BUDGET_ID, tournament=toy, stream=10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
        gym.make(MULTITURN_ID, tournament=toy, stream=10)
    with pytest.raises(ValueError, match="make_vec"):
        RoutingVectorEnv(2, tournament=toy, stream=10)
    venv = gym.make_vec(REPLAY_ID, num_envs=3, tournament=toy, stream=4)
    assert isinstance(venv, gym.vector.SyncVectorEnv) and venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    venv.reset(seed=0)
    for _ in range(9):
        _, rewards, terminated, truncated, _ = venv.step(np.zeros(3, dtype=np.int64))
        assert (rewards != 0).all() and not terminated.any()  # same-step autoreset: no reset step
    assert isinstance(gym.make_vec(stream_id("RoutingGym/TwoModel-v0"), num_envs=2, n_queries=120, **SMALL_FEATURES), gym.vector.SyncVectorEnv)


def test_changing_pool_stream_shows_the_pool_of_the_next_decision(toy):
    env = gym.make(CHANGING_POOL_ID, tournament=toy, stream=6, events=[(3, "remove", "m3")])
    obs, _ = env.reset(seed=0)
    masks = [obs["available"].copy()]
    for _ in range(5):
        obs, _, _, _, info = env.step(0)
        masks.append(obs["available"].copy())
    assert [int(m[3]) for m in masks] == [1, 1, 1, 0, 0, 0]  # removed before decision 3 is shown


def test_stream_ids_cut_cleanrl_style_reset_steps_from_half_to_one_in_t_plus_one():
    reset_step_share = clients_check()["reset_step_share"]  # the measurement experiments/clients_check.py reports
    kwargs = {"n_queries": 120, **SMALL_FEATURES}
    assert reset_step_share(features_id("RoutingGym/TwoModel-v0"), **kwargs) == pytest.approx(0.5, abs=0.01)
    share = reset_step_share(stream_id("RoutingGym/TwoModel-v0"), **kwargs)
    assert share == pytest.approx(1 / (STREAM_LENGTH + 1), abs=1e-9)  # 404 steps: 4 streams of 100 and 4 resets


def _held_out_reward(model, box, tournament) -> float:
    test = RoutingEnv(tournament=tournament, split="test")
    obs = box.features(test.observations())
    actions, _ = model.predict(obs, deterministic=True)
    return float(test.evaluate(actions).rewards.mean())


def test_sb3_by_id_and_ppo_on_a_feature_id_matches_the_box_observation_route():
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    t = two_skill_tournament(n=300)
    vec = make_vec_env(features_id(REPLAY_ID), n_envs=4, env_kwargs={"tournament": t, **SMALL_FEATURES})
    assert vec.observation_space.shape == (8 + 2,)
    by_id = PPO("MlpPolicy", vec, n_steps=16, batch_size=32, seed=0, device="cpu").learn(64)
    assert by_id.num_timesteps == 64

    results = []
    for env in (gym.make(features_id(REPLAY_ID), tournament=t, **SMALL_FEATURES), BoxObservation(gym.make(REPLAY_ID, tournament=t), dim=8)):
        model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, learning_rate=3e-3, seed=0, device="cpu")
        model.learn(512)
        results.append(_held_out_reward(model, env.get_wrapper_attr("box"), t))
    assert results[0] == results[1]
    random_route = float(RoutingEnv(tournament=t, split="test").reward_matrix.mean())
    assert results[0] > random_route + 0.3, (results, random_route)


def test_torchrl_gym_env_by_id():
    import torch
    from torchrl.envs import GymEnv  # the [clients] extra, part of [all]

    # GymEnv passes frameskip first and retries without it on Python's own keyword message.
    env = GymEnv("RoutingGym/TwoModel-features-stream-v0", n_queries=120, **SMALL_FEATURES)
    rollout = env.rollout(250, break_when_any_done=False)
    assert rollout["next", "reward"].shape == (250, 1)
    assert (rollout["next", "reward"] != 0).all()
    assert int(rollout["next", "truncated"].sum()) == 2  # streams of 100
    observations = rollout["observation"]
    assert observations.shape[0] == 250 and observations.dtype == torch.float32 and observations.abs().max() <= 1
