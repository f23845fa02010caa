"""RoutingVectorEnv and the registered vector path: every step a real, correctly scored decision."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament
from gymnasium.vector import AutoresetMode

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.envs import REPLAY_ID, Reward, RoutingEnv, registered_ids
from routing_gym.envs.vector_env import RoutingVectorEnv, per_env_infos, to_sb3
from routing_gym.envs.wrappers import BoxObservation
from routing_gym.errors import InvalidActionError, RoutingGymError

COEFFICIENTS = {"lambda_e": 0.4, "lambda_t": 0.2}
OUTCOME_KEYS = ("correct", "energy_j", "latency_s", "mean_power_w")


@pytest.fixture(scope="module")
def tournament():
    return make_tournament(n=300, k=5, seed=4)


def logged_reward(t, rows, actions) -> np.ndarray:
    """The reward of each (row, action) computed from the tournament's logged outcomes, without the env."""
    return Reward("gated_rank", COEFFICIENTS).matrix(t, np.asarray(rows))[np.arange(len(rows)), actions]


def test_make_vec_default_scores_every_step_with_the_logged_outcome(tournament):
    """Issue 17 item 4: B = 8 over 1,000 steps, no zero-filled autoreset step, every reward the
    logged outcome's reward for the question shown."""
    env = gym.make_vec(REPLAY_ID, num_envs=8, tournament=tournament, split="all", coefficients=COEFFICIENTS)
    assert isinstance(env.unwrapped, RoutingVectorEnv) and env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    t = tournament
    prompts = t.queries["prompt"].to_numpy(dtype=object)
    obs, info = env.reset(seed=11)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(1000):
        shown = info["row"]
        assert list(obs["text"]) == list(prompts[shown]) and (obs["benchmark"] == t.benchmark_codes[shown]).all()
        actions = rng.integers(0, t.n_models, 8)
        obs, rewards, terminated, truncated, info = env.step(actions)
        assert terminated.all() and not truncated.any()
        np.testing.assert_array_equal(rewards, logged_reward(t, shown, actions))
        final = info["final_info"]
        assert (final["row"] == shown).all()
        for key in OUTCOME_KEYS:
            np.testing.assert_array_equal(final[key], getattr(t, key)[shown, actions])
        seen.update(shown.tolist())
    assert len(seen) == t.n_queries  # 8,000 draws over 300 queries: every one shown


def test_every_registered_id_vectorizes_with_same_step_autoreset():
    small = {"n_queries": 120}
    for env_id in registered_ids():
        kwargs = small if env_id != REPLAY_ID and "Budget" not in env_id and "Pool" not in env_id and "MultiTurn" not in env_id else {}
        env = gym.make_vec(env_id, num_envs=3, **kwargs)
        assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP, env_id
        env.reset(seed=0)
        env.step(env.action_space.sample())
        env.close()


def test_multi_step_fallback_never_returns_a_zero_reset_step():
    """Budget episodes last several steps: with same-step autoreset an ended episode's env shows
    the next episode's first question in the same step, so no step is a reward-0 reset step."""
    env = gym.make_vec("RoutingGym/Budget-v0", num_envs=4, horizon=3)
    assert isinstance(env, gym.vector.SyncVectorEnv)
    env.reset(seed=0)
    ends = 0
    for _ in range(30):
        _, rewards, terminated, truncated, info = env.step(np.zeros(4, dtype=np.int64))
        assert (rewards != 0).all()
        ends += int((terminated | truncated).sum())
        if (terminated | truncated).any():
            assert info["_final_info"][terminated | truncated].all()
    assert ends >= 4 * 9


def test_same_seed_same_streams_and_one_env_replays_routing_env(tournament):
    def run(env, seed, steps=60):
        obs, info = env.reset(seed=seed)
        shown, rewards = [info["row"]], []
        for step in range(steps):
            _, r, _, _, info = env.step(np.full(env.num_envs, step % tournament.n_models))
            shown.append(info["row"])
            rewards.append(r)
        return np.array(shown), np.array(rewards)

    make = lambda b: RoutingVectorEnv(b, tournament=tournament, split="train", coefficients=COEFFICIENTS)
    a, b = run(make(16), 5), run(make(16), 5)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], run(make(16), 6)[0])
    # Within a pass the B envs are dealt distinct queries: the first 12 steps x 16 envs = 192 <= 200 train queries.
    first_pass = a[0][:12].reshape(-1)
    assert len(set(first_pass.tolist())) == len(first_pass)
    # B = 1 with a seed shows exactly the queries RoutingEnv shows with that seed.
    single = RoutingEnv(tournament=tournament, split="train", coefficients=COEFFICIENTS)
    _, info = single.reset(seed=5)
    rows = [info["row"]]
    for step in range(60):
        single.step(step % tournament.n_models)
        rows.append(single.reset()[1]["row"])
    np.testing.assert_array_equal(run(make(1), 5)[0].reshape(-1), rows)


@pytest.mark.parametrize("include_difficulty", [False, True])
def test_vector_results_equal_single_envs_on_the_same_queries(tournament, include_difficulty):
    b = 8
    options = dict(tournament=tournament, split="test", coefficients=COEFFICIENTS, invalid_action="penalize", include_difficulty=include_difficulty)
    vec = RoutingVectorEnv(b, **options)
    singles = [RoutingEnv(**options) for _ in range(b)]
    query_ids = tournament.queries["query_id"].to_numpy(dtype=object)
    obs, info = vec.reset(seed=2)
    rng = np.random.default_rng(3)
    for step in range(100):
        single_obs = [env.reset(options={"query_id": query_ids[row]})[0] for env, row in zip(singles, info["row"])]
        for i, o in enumerate(single_obs):
            assert o["text"] == obs["text"][i] and o["benchmark"] == obs["benchmark"][i]
            if include_difficulty:
                np.testing.assert_array_equal(o["difficulty"], obs["difficulty"][i])
        actions = rng.integers(-1, tournament.n_models + 1, b)  # some invalid: -1 and K
        obs, rewards, _, _, info = vec.step(actions)
        for i, env in enumerate(singles):
            _, reward, terminated, truncated, single_info = env.step(int(actions[i]))
            assert reward == rewards[i] and terminated and not truncated
            for key in (*OUTCOME_KEYS, "valid", "oracle_reward", "row"):
                assert single_info[key] == info["final_info"][key][i], (step, i, key)


def test_invalid_actions_follow_the_single_env_rule(tournament):
    k = tournament.n_models
    strict = RoutingVectorEnv(4, tournament=tournament, split="all")
    _, info = strict.reset(seed=0)
    for bad, why in (([0, 1, k, 0], "env 2 of 4: action 5 is outside"), ([0, True, 1, 2], "env 1 of 4.*not an integer"),
                     ([0.0, 1.0, 2.5, 1.0], "env 2 of 4.*not an integer")):
        with pytest.raises(InvalidActionError, match=why):
            strict.step(np.array(bad, dtype=object))
    # Nothing moved: the questions shown are still the ones reset showed.
    _, _, _, _, after = strict.step(np.array([0.0, 1.0, 2.0, 3.0]))  # integral floats are valid
    np.testing.assert_array_equal(after["final_info"]["row"], info["row"])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        strict.step([0, 1])

    lenient = RoutingVectorEnv(4, tournament=tournament, split="all", invalid_action="penalize", coefficients=COEFFICIENTS)
    _, info = lenient.reset(seed=0)
    _, rewards, _, _, step_info = lenient.step(np.array([1, -1, k, 2]))
    final = step_info["final_info"]
    np.testing.assert_array_equal(final["valid"], [True, False, False, True])
    np.testing.assert_array_equal(final["action"], [1, -1, -1, 2])
    assert rewards[1] == rewards[2] == lenient.reward.invalid_penalty
    np.testing.assert_array_equal(rewards[[0, 3]], logged_reward(tournament, info["row"][[0, 3]], [1, 2]))
    assert (final["energy_j"][1:3] == 0).all() and (final["correct"][1:3] == 0).all()


def test_vector_api_checks(tournament):
    """The checks gymnasium's check_env makes, for the vector API."""
    env = RoutingVectorEnv(6, tournament=tournament, split="train", include_difficulty=True)
    with pytest.raises(RoutingGymError, match="before reset"):
        env.step(np.zeros(6, dtype=int))
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and env.single_observation_space.contains({k: v[0] for k, v in obs.items()} | {"difficulty": obs["difficulty"][0]})
    assert obs["text"].dtype == object and obs["benchmark"].dtype == np.int64 and obs["difficulty"].shape == (6, 1)
    assert env.action_space == gym.spaces.MultiDiscrete([tournament.n_models] * 6)
    first_text = obs["text"].copy()
    next_obs, rewards, terminated, truncated, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(next_obs)
    assert rewards.shape == (6,) and rewards.dtype == np.float64
    assert terminated.dtype == bool and terminated.shape == (6,) and truncated.shape == (6,)
    # Observations are fresh arrays: what an earlier call returned never changes.
    assert next_obs["text"] is not obs["text"] and (obs["text"] == first_text).all()
    for key, values in info["final_info"].items():
        assert len(values) == 6, key
        if not key.startswith("_"):
            assert info["final_info"][f"_{key}"].all()
    # The reset seed must be one int for the whole vector.
    with pytest.raises(TypeError, match="one int"):
        env.reset(seed=[0, 1, 2, 3, 4, 5])
    with pytest.raises(RoutingGymError, match="needs 6 values"):
        env.reset(options={"index": [0, 1]})
    with pytest.raises(RoutingGymError, match="env 1 is 999"):
        env.reset(options={"index": [0, 999, 1, 2, 3, 4]})
    pinned, info = env.reset(options={"index": [5, 4, 3, 2, 1, 0]})
    np.testing.assert_array_equal(info["row"], env.core.rows[[5, 4, 3, 2, 1, 0]])
    with pytest.raises(ValueError, match="num_envs"):
        RoutingVectorEnv(0, tournament=tournament)
    with pytest.raises(TypeError, match="unknown option"):
        RoutingVectorEnv(2, tournament=tournament, splitt="train")
    with pytest.raises(NotImplementedError, match="nothing to draw"):
        env.render()


def test_core_is_shared_and_lean(tournament):
    """One core for all B envs: no copy of the outcome arrays, no scoring tables."""
    env = RoutingVectorEnv(64, tournament=tournament, split="all")
    env.reset(seed=0)
    for _ in range(10):
        env.step(env.action_space.sample())
    assert "outcomes" not in vars(env.core) and env.core.reward_matrix is None
    assert all(np.shares_memory(flat, getattr(tournament, name)) for name, flat in env._outcome_flat.items())
    assert env.reward_matrix.shape == (tournament.n_queries, tournament.n_models)


def test_feature_observations_equal_the_box_view_of_the_single_env(tournament):
    vec = RoutingVectorEnv(4, tournament=tournament, split="test", observation="features", feature_params={"dim": 8})
    single = BoxObservation(RoutingEnv(tournament=tournament, split="test"), dim=8)
    assert vec.single_observation_space == single.observation_space
    obs, info = vec.reset(seed=1)
    assert obs.dtype == np.float32 and obs.shape == (4, single.n_features) and vec.observation_space.contains(obs)
    query_ids = tournament.queries["query_id"].to_numpy(dtype=object)
    for i, row in enumerate(info["row"]):
        np.testing.assert_allclose(obs[i], single.reset(options={"query_id": query_ids[row]})[0], atol=1e-6)
    with pytest.raises(TypeError, match="observation='features' only"):
        RoutingVectorEnv(2, tournament=tournament, feature_params={"dim": 8})


def test_sb3_adapter_trains_ppo_and_reports_per_env_infos(tournament):
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecEnv

    vec = RoutingVectorEnv(8, tournament=tournament, split="train", observation="features", feature_params={"dim": 8})
    sb3 = to_sb3(vec)
    assert isinstance(sb3, VecEnv) and sb3.num_envs == 8 and sb3.observation_space == vec.single_observation_space
    sb3.seed(3)
    obs = sb3.reset()
    assert obs.shape == (8, vec.single_observation_space.shape[0])
    _, rewards, dones, infos = sb3.step(np.zeros(8, dtype=np.int64))
    assert dones.all() and len(infos) == 8 and all(not i["TimeLimit.truncated"] for i in infos)
    assert all(info["oracle_reward"] >= r - 1e-6 and info["action"] == 0 for info, r in zip(infos, rewards))
    model = PPO("MlpPolicy", sb3, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=512)
    assert model.num_timesteps == 512
    with pytest.raises(RoutingGymError, match="same-step autoreset"):
        to_sb3(gym.vector.SyncVectorEnv([lambda: RoutingEnv(tournament=tournament)]))


def test_per_env_infos_reads_final_info_where_an_episode_ended():
    infos = {
        "row": np.array([7, 8]), "_row": np.array([True, True]),
        "final_info": {"row": np.array([1, 2]), "_row": np.array([True, False]), "x": np.array([0.5, 0.0]), "_x": np.array([True, False])},
        "_final_info": np.array([True, False]),
    }
    assert per_env_infos(infos, 2) == [{"row": 1, "x": 0.5}, {"row": 8}]
