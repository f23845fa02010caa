"""Baselines and routers: fixed, per-benchmark, random, oracle, kNN, UniRoute, RouteLLM, GreenServ, Smoothie."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament, two_skill_tournament
from test_bandits import COEF, fitted, held_out, topical_tournament

from routing_gym.envs import Reward, RoutingEnv, oracle_targets
from routing_gym.errors import PrivilegedAccessError, RoutingGymError, UnknownNameError
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, ObservationBatch, make_agent

DEPLOYABLE = ["fixed-smallest", "fixed-medium", "fixed-largest", "per-benchmark", "random", "knn", "uniroute", "routellm",
              "greenserv", "linucb", "epsilon-greedy", "thompson"]


@pytest.fixture(scope="module")
def topical() -> Tournament:
    return topical_tournament()


def test_fixed_model_rows_equal_a_direct_computation(topical: Tournament) -> None:
    rows = topical.split_rows("test")
    direct_reward = Reward("gated_rank", COEF).matrix(topical, rows)
    for k, model_id in enumerate(topical.model_ids):
        agent, logs = fitted("fixed", topical, model_id=model_id)
        assert logs == {"model_id": model_id}
        m = held_out(agent, topical)
        assert m["accuracy"] == pytest.approx(topical.correct[rows, k].mean())
        assert m["mean_energy_j"] == pytest.approx(topical.energy_j[rows, k].mean())
        assert m["mean_latency_s"] == pytest.approx(topical.latency_s[rows, k].mean())
        assert m["mean_power_w"] == pytest.approx(topical.mean_power_w[rows, k].mean())
        assert m["mean_reward"] == pytest.approx(direct_reward[:, k].mean())


def test_fixed_size_aliases(topical: Tournament) -> None:
    # conftest sizes grow with the index: m0 smallest ... m3 largest; medium = lower median.
    picks = {size: fitted(f"fixed-{size}", topical)[1]["model_id"] for size in ("smallest", "medium", "largest")}
    assert picks == {"smallest": "m0", "medium": "m1", "largest": "m3"}
    models = topical.models.copy()
    models["params_b"] = [np.nan, 1.0, 2.0, 3.0]  # unknown size: rank by mean training joules
    energy = topical.energy_j.copy()
    energy[:, 0] *= 100.0
    t = replace(topical, models=models, energy_j=energy)
    assert fitted("fixed-largest", t)[1]["model_id"] == "m0"
    with pytest.raises(UnknownNameError, match="m0, m1, m2, m3"):
        fitted("fixed", topical, model_id="gpt-9")
    with pytest.raises(ValueError, match="exactly one"):
        make_agent("fixed")


def test_per_benchmark_sends_each_benchmark_to_its_best_training_model() -> None:
    t = two_skill_tournament(n=600)
    agent, logs = fitted("per-benchmark", t)
    # reward-maximising (the default): the cheap arithmetic model on arithmetic, the trivia model on trivia
    assert logs["routes"] == {"arith-0": "cheap-arith", "trivia-1": "mid-trivia"}
    m = held_out(agent, t)
    rows = t.split_rows("test")
    assert m["accuracy"] > t.correct[rows].mean(axis=0).max() + 0.3  # beats every fixed model on accuracy
    # a high enough price on joules sends everything to the cheapest model
    agent.mu = 50.0
    assert agent.routes().tolist() == [0, 0]
    assert logs["objective"] == "gated_rank(lambda_e=0.5)"


def test_per_benchmark_routes_equal_a_direct_computation_for_every_knob_value() -> None:
    t = make_tournament(n=300, k=5, seed=4)
    agent, _ = fitted("per-benchmark", t, mu=0.0)
    train = t.split_rows("train")
    codes = t.benchmark_codes[train]
    j_ref = t.energy_j[train].mean(axis=0).max()
    batch = ObservationBatch.from_tournament(t, t.split_rows("test"))
    previous_j = np.inf
    for mu in agent.cost_knob.grid:
        agent.mu = mu
        expected = []
        for b in range(len(t.benchmarks)):
            acc, joules = t.correct[train][codes == b].mean(axis=0), t.energy_j[train][codes == b].mean(axis=0)
            score = acc - mu * joules / j_ref
            expected.append(min(np.flatnonzero(score >= score.max() - 1e-12), key=lambda m: joules[m]))
        assert agent.routes().tolist() == expected
        actions = agent.act_batch(batch)
        np.testing.assert_array_equal(actions, np.array(expected)[batch.benchmarks])
        # the knob trades joules: a higher price never costs more on the training split
        train_j = t.energy_j[train, np.array(expected)[codes]].mean()
        assert train_j <= previous_j + 1e-9
        previous_j = train_j
    with pytest.raises(ValueError, match="mu"):
        make_agent("per-benchmark", mu=-1.0)


def test_random_is_uniform_seeded_and_text_deterministic(topical: Tournament) -> None:
    rows = topical.split_rows("all")
    batch = ObservationBatch.from_tournament(topical, rows)
    a = fitted("random", topical, seed=0)[0].act_batch(batch)
    assert np.array_equal(a, fitted("random", topical, seed=0)[0].act_batch(batch))
    assert not np.array_equal(a, fitted("random", topical, seed=1)[0].act_batch(batch))
    explicit = make_agent("random", seed=1)  # an explicit seed wins over the context's
    explicit.fit(FitContext(topical, Reward(), seed=0))
    assert np.array_equal(explicit.act_batch(batch), fitted("random", topical, seed=1)[0].act_batch(batch))
    counts = np.bincount(a, minlength=topical.n_models)
    assert counts.min() > 0.18 * len(rows), counts


def test_oracle_is_at_or_above_every_agent(topical: Tournament) -> None:
    oracle, logs = fitted("oracle", topical)
    assert logs["objective"] == "gated_rank(lambda_e=0.5)"
    best = held_out(oracle, topical)
    env = RoutingEnv(tournament=topical, split="test", coefficients=COEF)
    assert best["mean_reward"] == pytest.approx(env.reward_matrix.max(axis=1).mean())
    scores = {name: held_out(fitted(name, topical)[0], topical)["mean_reward"] for name in DEPLOYABLE}
    assert all(best["mean_reward"] >= s for s in scores.values()), (best, scores)
    random = scores["random"]
    for name in ("knn", "uniroute", "routellm", "greenserv"):
        assert scores[name] > random + 0.15, (name, scores)


def test_oracle_follows_the_fit_reward_and_needs_its_privilege(topical: Tournament) -> None:
    rows = topical.split_rows("test")
    for coefficients in ({}, {"lambda_e": 1.5, "lambda_t": 0.5}):
        reward = Reward("gated_rank", coefficients)
        oracle = make_agent("oracle")
        oracle.fit(FitContext(topical, reward, grants=oracle.privileged))
        np.testing.assert_array_equal(
            oracle.act_batch(ObservationBatch.from_tournament(topical, rows)), oracle_targets(topical, reward, rows=rows)
        )
    with pytest.raises(RoutingGymError, match="no query ids"):
        oracle.act({"text": "what is 2 + 2?", "benchmark": 0})
    with pytest.raises(PrivilegedAccessError, match="test_outcomes"):
        make_agent("oracle").fit(FitContext(topical, Reward()))
    assert not oracle.deployable and oracle.privileged == {"test_outcomes"} and make_agent("knn").deployable


def test_routellm_uses_only_strong_and_weak_and_alpha_trades_joules(topical: Tournament) -> None:
    batch = ObservationBatch.from_tournament(topical, topical.split_rows("test"))
    strong_share = []
    for alpha in (0.05, 0.3, 0.95):
        agent, logs = fitted("routellm", topical, alpha=alpha)
        assert (logs["strong"], logs["weak"]) == ("m3", "m0")
        actions = agent.act_batch(batch)
        assert set(actions.tolist()) <= {0, 3}
        strong_share.append((actions == 3).mean())
    assert strong_share[0] > strong_share[1] > strong_share[2] == 0.0, strong_share


def test_routellm_strong_arm_is_the_most_accurate_on_train_not_the_largest(topical: Tournament) -> None:
    correct = topical.correct.copy()
    correct[:, 1] = np.maximum(correct[:, 1], correct[:, 3])  # m1 (small) now beats the largest m3 everywhere
    agent, logs = fitted("routellm", replace(topical, correct=correct))
    assert (logs["strong"], logs["weak"]) == ("m1", "m0")
    only_small = correct.copy()
    only_small[:, 0] = 1.0  # the smallest is also the most accurate: the weak arm is the next smallest
    _, logs = fitted("routellm", replace(topical, correct=only_small))
    assert (logs["strong"], logs["weak"]) == ("m0", "m1")


def test_cost_weight_pushes_knn_and_uniroute_to_the_cheapest_model(topical: Tournament) -> None:
    batch = ObservationBatch.from_tournament(topical, topical.split_rows("test"))
    for name in ("knn", "uniroute"):
        assert set(fitted(name, topical, cost_weight=100.0)[0].act_batch(batch).tolist()) == {0}
        assert len(set(fitted(name, topical, cost_weight=0.0)[0].act_batch(batch).tolist())) == topical.n_models


def test_greenserv_reward_weighs_energy(topical: Tournament) -> None:
    agent, logs = fitted("greenserv", topical, lam=1.0)  # reward = -joules / E_ref: the cheapest wins
    assert len(logs["actions"]) == len(topical.split_rows("train")) and agent.feedback == "bandit"
    actions = agent.act_batch(ObservationBatch.from_tournament(topical, topical.split_rows("test")))
    assert (actions == 0).mean() > 0.9
    with pytest.raises(ValueError, match="lam"):
        make_agent("greenserv", lam=1.5)


def with_outputs(t: Tournament, noise: tuple[float, ...], seed: int = 0) -> Tournament:
    """Answer texts: the reference solution with a model-specific share of words garbled."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    junk = [f"junk{i}" for i in range(300)]
    out = np.empty((t.n_queries, t.n_models), dtype=object)
    for i in range(t.n_queries):
        solution = rng.choice(vocab, 12)
        for k, p in enumerate(noise):
            garbled = rng.uniform(size=12) < p
            out[i, k] = " ".join(np.where(garbled, rng.choice(junk, 12), solution))
    return replace(t, output_text=out)


def test_smoothie_prefers_the_answers_closest_to_consensus() -> None:
    t = with_outputs(make_tournament(n=120, k=4), noise=(0.7, 0.5, 0.1, 0.4))
    agent, _ = fitted("smoothie", t)
    actions = agent.act_batch(ObservationBatch.from_tournament(t, t.split_rows("test")))
    assert np.bincount(actions, minlength=4).argmax() == 2 and (actions == 2).mean() > 0.8
    assert not agent.deployable and agent.privileged == {"outputs"}
    with pytest.raises(RoutingGymError, match="output_text"):
        fitted("smoothie", make_tournament())
    assert agent.act({"text": "a question", "benchmark": 0}) in range(4)  # a new question: its neighbours' answers


@pytest.mark.parametrize("name", ["fixed-medium", "per-benchmark", "random", "knn", "uniroute", "routellm", "greenserv"])
def test_save_load_round_trip_and_act_matches_act_batch(topical: Tournament, name: str, tmp_path) -> None:
    agent, _ = fitted(name, topical)
    env = RoutingEnv(tournament=topical, split="test", order="sequential")
    batch = ObservationBatch.from_tournament(topical, env.rows)
    actions = agent.act_batch(batch)
    agent.save(tmp_path / "agent.pkl")
    loaded = type(agent).load(tmp_path / "agent.pkl")
    np.testing.assert_array_equal(loaded.act_batch(batch), actions)
    np.testing.assert_array_equal([loaded.act(env.reset()[0]) for _ in range(40)], actions[:40])


@pytest.mark.parametrize("name", ["oracle", "smoothie"])
def test_save_load_round_trip_of_output_informed_agents(name: str, tmp_path) -> None:
    t = with_outputs(make_tournament(n=90, k=4), noise=(0.6, 0.2, 0.4, 0.5))
    agent, _ = fitted(name, t)
    batch = ObservationBatch.from_tournament(t, t.split_rows("test"))
    agent.save(tmp_path / "agent.pkl")
    np.testing.assert_array_equal(type(agent).load(tmp_path / "agent.pkl").act_batch(batch), agent.act_batch(batch))
