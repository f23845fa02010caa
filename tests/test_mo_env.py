"""The MO ids in the style of MO-Gymnasium's own suite (tests/test_envs.py there): check_env on
the LinearReward-wrapped env, reward_space.contains on every step, seeded determinism,
pickling; and equality with the scalar twin under matching weights; the exact fronts."""

from __future__ import annotations

import itertools
import pickle

import gymnasium as gym
import numpy as np
import mo_gymnasium as mo_gym
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

from conftest import make_tournament
from routing_gym.envs import REPLAY_ID, mo_id, mo_ids, objective_values
from routing_gym.fronts import mo_fronts
from routing_gym.tournament import Tournament

SMALL = {"n_queries": 120}  # procedural ids: a small generated tournament
NUM_STEPS = 40


def make(env_id: str, **kwargs):
    if "Replay" in env_id or "ChangingPool" in env_id:
        kwargs.setdefault("tournament", make_tournament(80, 4))
    else:
        kwargs = {**SMALL, **kwargs}
    return mo_gym.make(env_id, **kwargs)


# check_env warns that LinearReward is a wrapper: MO-Gymnasium's own suite checks the wrapped env too
@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
@pytest.mark.parametrize("env_id", mo_ids())
def test_env_api_like_mo_gymnasium(env_id):
    env = mo_gym.wrappers.LinearReward(make(env_id))
    check_env(env, skip_render_check=True)
    raw = env.unwrapped
    assert raw.reward_dim == 4 and raw.reward_space.shape == (4,)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(NUM_STEPS):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert raw.reward_space.contains(info["vector_reward"])
        assert terminated and not truncated
        env.reset()
    pickled = pickle.loads(pickle.dumps(env))
    data_equivalence(env.reset(seed=3), pickled.reset(seed=3))
    data_equivalence(env.step(1), pickled.step(1))


@pytest.mark.parametrize("env_id", ["RoutingGym/MO-PaperPool-v0", "RoutingGym/MO-ChangingPool-v0"])
def test_seeded_rollouts_are_identical(env_id):
    a, b = make(env_id), make(env_id)
    a.reset(seed=7), b.reset(seed=7)
    a.action_space.seed(7)
    for _ in range(NUM_STEPS):
        action = a.action_space.sample()
        out_a, out_b = a.step(action), b.step(action)
        data_equivalence(out_a, out_b)
        data_equivalence(a.reset(), b.reset())


def test_linear_weights_reproduce_the_scalar_twins_step_for_step():
    """raw objectives x (1, mu, 0, 0) = `lagrangian`; rank objectives x (1, lambda_e, lambda_t,
    lambda_p) = `gated_rank`, through LinearReward, against the scalar id with the same seed."""
    t = make_tournament(80, 4)
    cases = [
        ("raw", np.array([1.0, 2e-3, 0.0, 0.0]), {"reward": "lagrangian", "coefficients": {"mu": 2e-3}}),
        ("rank", np.array([1.0, 0.4, 0.3, 0.2]), {"coefficients": {"lambda_e": 0.4, "lambda_t": 0.3, "lambda_p": 0.2}}),
    ]
    for scale, weight, scalar_kwargs in cases:
        mo_env = mo_gym.wrappers.LinearReward(mo_gym.make(mo_id(REPLAY_ID), tournament=t, scale=scale), weight)
        scalar = gym.make(REPLAY_ID, tournament=t, **scalar_kwargs)
        mo_env.reset(seed=1), scalar.reset(seed=1)
        rng = np.random.default_rng(0)
        rewards = []
        for _ in range(100):
            action = int(rng.integers(4))
            _, r_mo, *_, info_mo = mo_env.step(action)
            _, r_scalar, *_, info_scalar = scalar.step(action)
            assert info_mo["query_id"] == info_scalar["query_id"]
            assert r_mo == pytest.approx(r_scalar, abs=1e-12), (scale, info_mo["query_id"], action)
            rewards.append(r_scalar)
            mo_env.reset(), scalar.reset()
        assert len(set(np.round(rewards, 9))) > 3  # the rewards vary: the equality is not between constants


def test_an_invalid_route_scores_the_penalty_and_costs_nothing():
    env = mo_gym.make(mo_id("RoutingGym/ChangingPool-v0"), tournament=make_tournament(80, 4),
                      initial_models=("m0", "m1"), invalid_action="penalize")
    env.reset(seed=0)
    _, vector, *_ = env.step(3)
    assert vector.tolist() == [env.unwrapped.reward.invalid_penalty, 0.0, 0.0, 0.0]
    assert env.unwrapped.reward_space.contains(vector)


def test_make_vec_names_the_mo_vector_env():
    with pytest.raises(TypeError, match="MOSyncVectorEnv"):
        gym.make_vec("RoutingGym/MO-PaperPool-v0", num_envs=2, n_queries=60)


def test_bad_options_are_named():
    with pytest.raises(Exception, match="objective scale"):
        make(mo_id(REPLAY_ID), scale="log")
    with pytest.raises(Exception, match="joules"):
        make(mo_id(REPLAY_ID), objectives=("correct", "joules"))
    with pytest.raises(Exception, match="stream"):
        make(mo_id(REPLAY_ID), stream=5)


# ---------------------------------------------------------------------- exact fronts
def _brute_force_convex_front(values: np.ndarray) -> np.ndarray:
    """Every deterministic policy's value (K^n of them), then the vertices of the upper-right
    convex hull of those points: the exact front by enumeration."""
    n, k, _ = values.shape
    points = np.array([values[np.arange(n), list(a)].mean(axis=0) for a in itertools.product(range(k), repeat=n)])
    angles = np.linspace(0, np.pi / 2, 4001)
    weights = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    best = np.unique(points[(points @ weights.T).argmax(axis=0)], axis=0)
    dominated = [((points >= p).all(axis=1) & (points > p).any(axis=1)).any() for p in best]  # ties at w = (1, 0)
    return best[~np.array(dominated)]


def test_the_two_objective_front_is_exact_against_enumeration():
    rng = np.random.default_rng(3)
    for _ in range(5):
        values = np.stack([rng.integers(0, 2, (6, 3)).astype(float), -rng.gamma(2.0, 50.0, (6, 3))], axis=-1)
        front = mo_fronts.convex_front(values)
        brute = _brute_force_convex_front(values)
        # every enumerated supported point is a vertex found, and every vertex found is achievable
        for p in brute:
            assert np.isclose(front, p).all(axis=1).any(), (p, front)
        assert len(front) == len(brute)
        assert (np.diff(front[:, 0]) > 0).all() and (np.diff(front[:, 1]) < 0).all()


def test_env_fronts_dominate_their_hulls_and_match_policies():
    env = mo_gym.make("RoutingGym/MO-PaperPool-v0", n_queries=300, objectives=("correct", "energy")).unwrapped
    front = np.array(env.pareto_front(gamma=0.9))
    fixed, task = env.fixed_model_hull(), env.task_aware_hull()
    values = env.objective_matrix
    # every fixed model's vector is a policy's value: none lies above the oracle's front
    for p in np.vstack([fixed, task]):
        assert mo_fronts.expected_utility(front, [[1.0, 0.0]]) >= p[0] - 1e-12
        assert not ((front[:, 0] < p[0] - 1e-12) & (front[:, 1] < p[1] - 1e-12)).all()
    # the front's most accurate end is the per-query most accurate (then cheapest) route
    t: Tournament = env.tournament
    assert front[-1, 0] == pytest.approx(values[..., 0].max(axis=1).mean())
    assert front[0, 1] == pytest.approx(values[..., 1].max(axis=1).mean())
    assert mo_fronts.hypervolume(front, [0.0, -1e4]) > mo_fronts.hypervolume(fixed, [0.0, -1e4])
    assert len(task) >= 2 and t.n_models == values.shape[1]


def test_weighted_front_points_are_optimal_for_their_weights():
    env = mo_gym.make("RoutingGym/MO-PaperPool-v0", n_queries=150, scale="rank").unwrapped
    front = np.array(env.pareto_front())
    assert front.shape[1] == 4 and len(front) >= 3
    values = env.objective_matrix
    # each point is the per-query argmax of some weight: no point is dominated by another
    for p in front:
        assert not ((front >= p).all(axis=1) & (front > p).any(axis=1)).any()
    one_weight = mo_fronts.weighted_front(values, [[1.0, 0.0, 0.0, 0.0]])
    assert one_weight[0, 0] == pytest.approx(values[..., 0].max(axis=1).mean())


def test_indicators_are_pymoo_and_agree_with_the_repository_hypervolume():
    from routing_gym.eval.core.pareto import hypervolume as area

    acc, joules, j_ref = np.array([0.4, 0.6, 0.8]), np.array([50.0, 120.0, 400.0]), 440.0
    points = np.stack([acc, -joules / j_ref], axis=1)
    assert mo_fronts.hypervolume(points, [0.0, -1.0]) == pytest.approx(area(acc, joules, j_ref, 0.0, normalise=True))
    weights = mo_fronts.equally_spaced_weights(2)
    assert weights.shape == (101, 2) and np.allclose(weights.sum(axis=1), 1)
    eu = mo_fronts.expected_utility(points, weights)
    assert eu == pytest.approx(np.mean([max(w @ p for p in points) for w in weights]))


@pytest.mark.parametrize("shape", sorted(mo_fronts.SHIPPED_WEIGHTS))
def test_shipped_weights_are_pymoos_own(shape):
    """The shipped equally spaced weights are pymoo's own (computing them costs ~0.8 GB), up to the last bits
    of its Riesz-energy optimisation, which move with the BLAS kernel (3.8e-12 seen on this machine)."""
    np.testing.assert_allclose(mo_fronts.equally_spaced_weights(*shape), mo_fronts.pymoo_equally_spaced_weights(*shape),
                               rtol=0, atol=1e-9)


def test_objective_values_units():
    t = make_tournament(30, 3)
    o = t.outcomes()
    raw = objective_values(o)
    assert np.array_equal(raw[..., 1], -o.energy_j) and np.array_equal(raw[..., 0], o.correct)
    rank = objective_values(o, "rank", ("correct", "power"))
    assert set(np.unique(rank[..., 0])) <= {-1.0, 2.0} and (rank[..., 1] <= 0).all() and (rank[..., 1] >= -1).all()


@pytest.mark.parametrize("seed", [0, 3])
def test_env_hulls_are_the_reports_train_chosen_chains(seed):
    """fixed_model_hull() / task_aware_hull() are compare's yardsticks (chosen on train, valued
    on the env's split) less the report's null policy: the report reads the chain on test as the
    best mix of its policies (their upper concave hull there), so its vertices are the env's
    policies, less any that is no vertex on this split."""
    from routing_gym.envs import MORoutingEnv
    from routing_gym.eval.compare import CompareConfig, run_compare
    from routing_gym.fronts.hull import fixed_model_hull
    from routing_gym.sources.synthetic import generate, preset_config

    t = generate(preset_config("paper-pool", n_queries=400, seed=seed))
    result = run_compare(CompareConfig(tournament=t, agents=["random"], seeds=1, n_bootstrap=50, audit=False,
                                       progress=False))
    env = MORoutingEnv(tournament=t, split="test", objectives=("correct", "energy"))
    for mine, report in ((env.fixed_model_hull(), result.pareto["hull"]), (env.task_aware_hull(), result.pareto["task_hull"])):
        names = report.get("models", report.get("vertices"))
        assert names[0] == "answer nothing" and report["energy_j"][0] == 0 == report["accuracy"][0]
        hull = fixed_model_hull(np.concatenate([[0.0], -mine[:, 1]]), np.concatenate([[0.0], mine[:, 0]]))
        np.testing.assert_allclose(hull.energy_j, report["energy_j"], rtol=1e-12)
        np.testing.assert_allclose(hull.accuracy, report["accuracy"], rtol=1e-12)
