"""Reward variants: each one's formula, gate and registry behaviour; user rewards everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import routing_gym.envs.reward_variants as rv  # registers the variants (until routing_gym.envs imports it)
import routing_gym_agents.lagrangian  # noqa: F401  (registers "lagrangian" until the registry lists it)
from routing_gym.envs import Reward, RewardBreakdown, RoutingEnv, oracle_targets, register_reward
from routing_gym.envs.rewards import REWARDS, GateWarning, check_gate_on_data
from routing_gym.errors import GateViolationError
from routing_gym.tournament import Outcomes

GATED = ("magnitude_linear_query", "magnitude_log_query", "magnitude_linear_pool", "magnitude_log_pool", "centered_gated_rank")


def outcomes(correct, energy, latency=None, power=None) -> Outcomes:
    correct = np.asarray(correct, dtype=float)
    energy = np.asarray(energy, dtype=float)
    latency = np.ones_like(energy) if latency is None else np.asarray(latency, dtype=float)
    power = np.ones_like(energy) if power is None else np.asarray(power, dtype=float)
    return Outcomes(correct, energy, latency, power)


def random_outcomes(rng: np.random.Generator, n: int = 200, k: int = 5) -> Outcomes:
    # Heavy-tailed joules and some fractional correctness, like real pools.
    correct = (rng.random((n, k)) < 0.5).astype(float)
    correct[: n // 4, 0] = 0.5
    energy = np.exp(rng.normal(5, 2, (n, k)))
    return outcomes(correct, energy, np.exp(rng.normal(1, 1, (n, k))), rng.uniform(50, 400, (n, k)))


def test_every_variant_is_registered_with_a_documented_formula():
    for name in rv.VARIANTS:
        entry = REWARDS[name]
        assert entry.doc and ("``" in entry.doc), name
    assert REWARDS["centered_gated_rank"].defaults == REWARDS["gated_rank"].defaults


def test_magnitude_query_variants_are_proportional_within_the_query():
    o = outcomes([[1, 1, 1, 0]], [[100, 200, 1100, 50]])
    linear = Reward("magnitude_linear_query", {"lambda_e": 1.0})(o)
    # min-max of joules: 50 -> 0, 1100 -> 1; correct routes earn 2 - z, the wrong one -1
    np.testing.assert_allclose(linear.components["z_energy"], [[50 / 1050, 150 / 1050, 1.0, 0.0]])
    np.testing.assert_allclose(linear.total, [[2 - 50 / 1050, 2 - 150 / 1050, 1.0, -1.0]])
    log = Reward("magnitude_log_query", {"lambda_e": 1.0})(o).components["z_energy"]
    expected = (np.log1p([100, 200, 1100, 50]) - np.log1p(50)) / (np.log1p(1100) - np.log1p(50))
    np.testing.assert_allclose(log, [expected])
    # Equal costs (or K = 1) carry no penalty.
    assert (Reward("magnitude_linear_query", {"lambda_e": 1.0})(outcomes([[1, 1]], [[7, 7]])).total == 2).all()


def test_pool_variants_compare_across_queries_and_saturate():
    o = outcomes([[1, 1], [1, 1]], [[80, 400], [800, 5000]])
    z = Reward("magnitude_linear_pool", {"lambda_e": 1.0, "scale_j": 1000.0})(o).components["z_energy"]
    np.testing.assert_allclose(z, [[0.08, 0.4], [0.8, 1.0]])  # 5 kJ saturates at 1
    z_log = Reward("magnitude_log_pool", {"lambda_e": 1.0, "scale_j": 1000.0})(o).components["z_energy"]
    np.testing.assert_allclose(z_log[0], np.log1p([80, 400]) / np.log1p(1000))
    # Per query, the cheaper model of the second query would get 0; per pool it pays for its 800 J.
    assert z[1, 0] > Reward("magnitude_linear_query", {"lambda_e": 1.0})(o).components["z_energy"][1, 0]


def test_latency_and_power_terms_are_on_the_energy_footing():
    o = outcomes([[1, 1, 1]], [[1, 2, 3]], latency=[[10, 20, 30]], power=[[5, 50, 500]])
    r = Reward("magnitude_linear_query", {"lambda_t": 0.5, "lambda_e": 0.5, "lambda_p": 0.5})(o)
    np.testing.assert_allclose(r.components["z_latency"], r.components["z_energy"])
    np.testing.assert_allclose(r.total, 2 - 0.5 * (r.components["z_latency"] + r.components["z_energy"] + r.components["z_power"]))


@pytest.mark.parametrize("name", GATED)
def test_analytical_gate_agrees_with_the_data(name):
    rng = np.random.default_rng(0)
    o = random_outcomes(rng)
    for _ in range(20):
        lambdas = dict(zip(("lambda_t", "lambda_e", "lambda_p"), rng.uniform(0, 1.6, 3)))
        holds = sum(lambdas.values()) < 3
        if holds:
            matrix = Reward(name, lambdas)(o).total
            assert check_gate_on_data(matrix, o.correct).size == 0, (name, lambdas)
        else:
            with pytest.raises(GateViolationError):
                Reward(name, lambdas)
            matrix = Reward(name, lambdas, allow_ungated=True)(o).total
            # A broken gate shows on a query with a dear correct and a cheap wrong route.
            edge = outcomes([[1, 0]], [[1e9, 1.0]], [[1e9, 1.0]], [[1e9, 1.0]])
            kw = {"scale_s": 1.0, "scale_j": 1.0, "scale_w": 1.0} if name.endswith("pool") else {}
            edge_matrix = Reward(name, {**lambdas, **kw}, allow_ungated=True)(edge).total
            assert check_gate_on_data(edge_matrix, edge.correct).size == 1
    with pytest.raises(GateViolationError):
        Reward(name, {"lambda_e": -0.1})


def test_centering_subtracts_the_query_mean_and_keeps_the_oracle(toy):
    base = Reward("gated_rank", {"lambda_e": 0.8})
    centered = Reward("centered_gated_rank", {"lambda_e": 0.8})
    b, c = base.matrix(toy), centered.matrix(toy)
    np.testing.assert_allclose(c.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(b - c, np.repeat(b.mean(axis=1, keepdims=True), toy.n_models, axis=1))
    np.testing.assert_array_equal(oracle_targets(toy, base), oracle_targets(toy, centered))
    # A query every model answers (or none does) carries no signal at lambda 0.
    flat = Reward("centered_gated_rank")(outcomes([[1, 1, 1], [0, 0, 0]], [[1, 2, 3], [1, 2, 3]])).total
    assert np.abs(flat).max() == 0


def test_lagrangian_is_accuracy_minus_priced_joules_and_has_a_data_gate():
    o = outcomes([[1, 0], [0.5, 1]], [[1500, 100], [10, 20]])
    with pytest.warns(GateWarning, match=r"lagrangian\(mu=0.001\).*in 1 of 2 queries.*row 0.*earns -0.5, a wrong one -0.1"):
        r = Reward("lagrangian", {"mu": 1e-3})(o)
    np.testing.assert_allclose(r.total, [[1 - 1.5, -0.1], [0.5 - 0.01, 1 - 0.02]])
    # mu (E_correct - E_wrong) = 1.4 >= 1: the first query's correct route loses to its wrong one.
    np.testing.assert_array_equal(check_gate_on_data(r.total, o.correct), [0])
    assert check_gate_on_data(Reward("lagrangian", {"mu": 5e-4})(o).total, o.correct).size == 0
    with pytest.raises(ValueError, match="mu"):
        Reward("lagrangian", {"mu": -1.0})(o)


def test_greenserv_form_and_its_gate_boundary():
    o = outcomes([[1, 0, 1]], [[100, 50, 1050]])
    r = Reward("greenserv", {"lambda_e": 0.3})(o)
    e = np.array([50 / 1000, 0.0, 1.0])
    np.testing.assert_allclose(r.total[0], 0.7 * np.array([1, 0, 1]) - 0.3 * e)
    with pytest.raises(GateViolationError, match="0.5"):
        Reward("greenserv")  # GreenServ's own lambda 0.5 ties a dear correct and a cheap wrong route
    tied = Reward("greenserv", allow_ungated=True)(outcomes([[1, 0]], [[1000, 1]])).total
    np.testing.assert_allclose(tied, [[0.0, 0.0]])
    pool = Reward("greenserv_pool", {"lambda_e": 0.4, "scale_j": 2000.0})(o)
    np.testing.assert_allclose(pool.components["z_energy"], [[0.05, 0.025, 0.525]])


def test_pool_scales_are_the_dearest_models_mean(toy):
    scales = rv.pool_scales(toy)
    rows = toy.split_rows("train")
    assert scales["scale_j"] == pytest.approx(toy.energy_j[rows].mean(axis=0).max())
    r = Reward("magnitude_linear_pool", {"lambda_e": 1.0, **scales}).matrix(toy, rows)
    assert r.max() <= 2.0 and r.min() >= -1.0


# ---------------------------------------------------------------------- a user's own reward
@register_reward("test_user_accuracy_minus_kj")
def _user_reward(o: Outcomes, price: float = 0.5) -> RewardBreakdown:
    """A reward defined outside the package: ``c - price * kJ``."""
    return RewardBreakdown(o.correct - price * o.energy_j / 1000.0)


def _user_matrix(t, rows, price):
    return t.correct[rows] - price * t.energy_j[rows] / 1000.0


def test_user_reward_works_in_the_env_and_a_bandit(toy):
    from routing_gym_agents import FitContext, make_agent

    env = RoutingEnv(tournament=toy, reward="test_user_accuracy_minus_kj", coefficients={"price": 2.0})
    _, info = env.reset(seed=0)
    _, r, *_ = env.step(1)
    assert r == pytest.approx(toy.correct[info["row"], 1] - 2.0 * toy.energy_j[info["row"], 1] / 1000)

    seen = []
    ctx = FitContext(toy, Reward("test_user_accuracy_minus_kj", {"price": 2.0}), seed=0,
                     step_hooks=[lambda step, a, r, info: seen.append((info["row"], a, r))])
    make_agent("linucb").fit(ctx)
    rows, actions, rewards = map(np.array, zip(*seen))
    np.testing.assert_allclose(rewards, toy.correct[rows, actions] - 2.0 * toy.energy_j[rows, actions] / 1000)


def test_user_reward_works_in_compare(toy):
    from routing_gym.eval.compare import CompareConfig, run_compare

    result = run_compare(CompareConfig(tournament=toy, agents=["linucb", "lagrangian"], seeds=1,
                                       reward="test_user_accuracy_minus_kj", coefficients={"price": 2.0},
                                       n_bootstrap=50, progress=False))
    assert not result.failures
    expected = _user_matrix(toy, result.test_rows, 2.0)
    for run in result.runs:
        a = run.per_query["actions"]
        assert run.metrics.mean_reward == pytest.approx(expected[np.arange(len(a)), a].mean())
    assert result.reward.describe() == "test_user_accuracy_minus_kj(price=2)"
