"""What the Farama peers' own suites check, on every registered RoutingGym id (issue 51).

Gymnasium serialises a spec (``EnvSpec.to_json``) and Minari's ``DataCollector`` stores it;
``DataCollector(record_infos=True)`` stacks the infos of ``reset`` and every ``step`` key by key;
gymnasium's async vector env passes ``Text`` observations through shared memory.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.envs.registration import PRESET_IDS

IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("RoutingGym/"))


def make(env_id: str) -> gym.Env:
    # Gymnasium's passive checker asks for a scalar reward; an MO id's is a vector (mo_gymnasium.make does the same).
    return gym.make(env_id, disable_env_checker="/MO-" in env_id)


def valid_action(env: gym.Env) -> int:
    mask = env.unwrapped.action_masks() if hasattr(env.unwrapped, "action_masks") else None
    return int(env.action_space.sample(mask=None if mask is None else mask.astype(np.int8)))


def signature(info: dict) -> list[tuple]:
    """Keys in order, the type of each value, and the shape and dtype of arrays (nested dicts too)."""
    out = []
    for key, value in info.items():
        if isinstance(value, dict):
            out.append((key, tuple(signature(value))))
        elif isinstance(value, np.ndarray):
            out.append((key, np.ndarray, value.shape, value.dtype))
        else:
            out.append((key, type(value)))
    return out


def test_every_family_and_variant_is_registered():
    assert len(IDS) == 51 and {"RoutingGym/Budget-v0", "RoutingGym/MO-PaperPool-features-v0"} <= set(IDS)
    assert all(env_id in IDS for env_id in PRESET_IDS.values())


@pytest.mark.parametrize("env_id", IDS)
def test_spec_serialises_and_round_trips(env_id):
    spec = gym.spec(env_id)
    assert isinstance(spec.vector_entry_point, str) and ":" in spec.vector_entry_point
    back = gym.envs.registration.EnvSpec.from_json(spec.to_json())
    assert (back.id, back.entry_point, back.vector_entry_point, back.kwargs) == (
        spec.id, spec.entry_point, spec.vector_entry_point, spec.kwargs
    )


@pytest.mark.parametrize("env_id", IDS)
def test_reset_and_step_infos_have_the_same_keys_and_types(env_id):
    env = make(env_id)
    _, info = env.reset(seed=0)
    infos = [info]
    env.action_space.seed(0)
    for _ in range(40):
        _, _, terminated, truncated, info = env.step(valid_action(env))
        infos.append(info)
        if terminated or truncated:
            infos.append(env.reset()[1])
    first = signature(infos[0])
    assert all(signature(info) == first for info in infos), env_id
    assert infos[0]["query_id"] and infos[0]["row"] >= 0  # reset's own keys are real, not placeholders
    env.close()


def test_an_old_gymnasium_is_named_on_import():
    code = "import gymnasium; gymnasium.__version__ = '1.0.0'; import routing_gym"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ImportError: routing-gym needs gymnasium>=1.1, found gymnasium 1.0.0" in result.stderr


def test_a_changing_pool_reports_fired_events_as_one_string():
    env = make("RoutingGym/ChangingPool-v0")
    _, info = env.reset(seed=0)
    assert isinstance(info["pool_events"], str) and info["available"].dtype == bool
    env.close()


@pytest.mark.parametrize("copy", [True, False])
def test_async_vector_env_shows_the_question_texts(copy):
    # Gymnasium's shared memory decoded Text once, at construction: every question came back blank.
    envs = gym.make_vec("RoutingGym/PaperPool-v0", num_envs=2, vectorization_mode="async", vector_kwargs={"copy": copy})
    prompts = gym.make("RoutingGym/PaperPool-v0").unwrapped.tournament.queries["prompt"].to_numpy()
    obs, info = envs.reset(seed=0)
    for _ in range(3):
        texts = tuple(obs["text"])
        assert all(text.strip() for text in texts)
        assert texts == tuple(prompts[info["row"]])
        obs, _, _, _, info = envs.step(np.zeros(2, dtype=np.int64))
    envs.close()


@pytest.mark.skipif(
    importlib.util.find_spec("minari") is None or importlib.util.find_spec("jax") is None,
    reason="DataCollector needs minari[create] (jax); experiments/peers_check.py runs it in its own venv",
)
@pytest.mark.parametrize("env_id", IDS)
def test_data_collector_records_every_id_with_infos(env_id, tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    import minari
    from minari import DataCollector

    env = make(env_id)
    if "/MO-" in env_id:
        # Minari stores scalar rewards. gymnasium's TransformReward keeps the infos as they are
        # (MO-Gymnasium's LinearReward adds vector_reward / reward_weights at step only).
        weights = np.full(env.unwrapped.reward_dim, 1 / env.unwrapped.reward_dim)
        env = gym.wrappers.TransformReward(env, lambda vector: float(np.dot(vector, weights)))
    env = DataCollector(env, record_infos=True, data_format="arrow")
    env.reset(seed=0)
    env.action_space.seed(0)
    steps = 0
    for _ in range(6):
        _, _, terminated, truncated, _ = env.step(valid_action(env))
        steps += 1
        if terminated or truncated:
            env.reset()
    name = env_id.split("/")[1].lower().removesuffix("-v0")
    env.create_dataset(dataset_id=f"peers/{name}-v0", algorithm_name="random")
    dataset = minari.load_dataset(f"peers/{name}-v0")
    assert dataset.total_steps == steps
    episode = next(dataset.iterate_episodes())
    assert "query_id" in episode.infos and len(episode.infos["query_id"]) == len(episode.actions) + 1
    if "/MO-" not in env_id:  # a lambda wrapper has no serialisable spec: Minari then records none
        assert dataset.spec.env_spec.id == env_id and dataset.recover_environment().spec.id == env_id
    env.close()
