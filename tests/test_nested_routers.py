"""The label-nested correctness routers (cost-aware, irt, mf, gbdt): they fall back to the
benchmark label when the text says nothing, read the text when it does, and expose their
correctness and energy predictions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament, text_skill_tournament, two_skill_tournament
from scipy.optimize import check_grad

from routing_gym.envs import Reward
from routing_gym.fronts.hull import benchmark_means
from routing_gym_agents import CorrectnessPredictor, EnergyPredictor, FitContext, ObservationBatch, make_agent
from routing_gym_agents.irt import irt_loss
from routing_gym_agents.mf import pairwise_loss, preference_pairs
from routing_gym_agents.nested import LABEL_ONLY, validation_parts

NESTED = ("cost-aware", "irt", "mf", "gbdt")
TFIDF = {"gbdt": {"features": "tfidf-svd", "dim": 16}}  # e5 would embed the toy texts


def _fit(name, t, **kwargs):
    agent = make_agent(name, **{**TFIDF.get(name, {}), **kwargs})
    agent.fit(FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
    return agent


def _test_batch(t):
    return ObservationBatch.from_tournament(t, t.split_rows("test"))


@pytest.fixture(scope="module")
def text_skill():
    return text_skill_tournament()


@pytest.fixture(scope="module")
def label_only_pool():
    """The label decides (model 0 for arithmetic benchmarks, 1 for trivia); texts are noise words."""
    t = two_skill_tournament(n=900, n_benchmarks=4)
    rng = np.random.default_rng(5)
    words = np.array(["alpha", "beta", "gamma", "delta", "omega", "sigma"])
    queries = t.queries.copy()
    queries["prompt"] = [" ".join(rng.choice(words, 6)) for _ in range(t.n_queries)]
    return replace(t, queries=queries)


@pytest.mark.parametrize("name", NESTED)
def test_reads_the_text_when_the_text_decides(name, text_skill):
    agent = _fit(name, text_skill)
    assert agent.chosen_strength != LABEL_ONLY
    test = text_skill.split_rows("test")
    actions = agent.act_batch(_test_batch(text_skill))
    label = make_agent("per-benchmark", mu=agent.mu)
    label.fit(FitContext(text_skill, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
    label_actions = label.act_batch(_test_batch(text_skill))
    # The skill sits in the text only: the label route is right about half the time, the text route nearly always.
    assert text_skill.correct[test, actions].mean() > text_skill.correct[test, label_actions].mean() + 0.2


@pytest.mark.parametrize("name", NESTED)
def test_routes_as_the_label_when_the_text_is_noise(name, label_only_pool):
    t = label_only_pool
    agent = _fit(name, t, mu=0.3)
    label = make_agent("per-benchmark", mu=0.3)
    label.fit(FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
    same = (agent.act_batch(_test_batch(t)) == label.act_batch(_test_batch(t))).mean()
    assert same > 0.97, (agent.chosen_strength, same)


@pytest.mark.parametrize("name", NESTED)
def test_label_only_is_exactly_per_benchmark_at_the_same_price(name, label_only_pool):
    t = label_only_pool
    for mu in (0.0, 0.3, 5.0):
        agent = _fit(name, t, mu=mu, strength=LABEL_ONLY)
        label = make_agent("per-benchmark", mu=mu)
        label.fit(FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
        assert (agent.act_batch(_test_batch(t)) == label.act_batch(_test_batch(t))).all()


@pytest.mark.parametrize("name", NESTED)
def test_predictions_follow_the_contract(name, text_skill):
    agent = _fit(name, text_skill)
    assert isinstance(agent, CorrectnessPredictor) and isinstance(agent, EnergyPredictor)
    batch = _test_batch(text_skill)
    p, joules = agent.predict_correct(batch), agent.predict_energy(batch)
    assert p.shape == joules.shape == (len(batch), text_skill.n_models)
    assert ((0 <= p) & (p <= 1)).all()
    train = text_skill.split_rows("train")
    means = benchmark_means(text_skill.energy_j[train], text_skill.benchmark_codes[train], len(text_skill.benchmarks))
    assert np.allclose(joules, means[batch.benchmarks])
    assert agent.cost_knob.parameter == "mu" and agent.cost_knob.applies == "act"


@pytest.mark.parametrize("name", ("irt", "mf", "gbdt"))
def test_deterministic_for_a_seed_and_saved(name, text_skill, tmp_path):
    a, b = _fit(name, text_skill), _fit(name, text_skill)
    batch = _test_batch(text_skill)
    assert np.allclose(a.predict_correct(batch), b.predict_correct(batch))
    a.save(tmp_path / "agent.pkl")
    from routing_gym_agents import Agent

    assert (Agent.load(tmp_path / "agent.pkl").act_batch(batch) == a.act_batch(batch)).all()


def test_validation_part_is_carved_from_training_rows_only(text_skill):
    ctx = FitContext(text_skill, Reward("gated_rank", {"lambda_e": 0.4}), seed=0)
    fit_rows, val_rows = validation_parts(ctx)
    assert len(fit_rows) + len(val_rows) == ctx.n_train and not set(fit_rows) & set(val_rows)
    assert 0.15 < len(val_rows) / ctx.n_train < 0.25
    tiny = make_tournament(n=6, k=3)  # too few rows per benchmark to carve: the label decides
    assert validation_parts(FitContext(tiny, Reward("gated_rank", {"lambda_e": 0.4}), seed=0)) is None
    assert _fit("irt", tiny).chosen_strength == LABEL_ONLY


def test_pairwise_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    Y = (rng.random((7, 4)) < 0.5).astype(float)
    Y[0] = [0.25, 1.0, 0.0, 0.5]  # fractional rows give fractional preferences
    pairs = preference_pairs(Y)
    error = check_grad(lambda d: pairwise_loss(d.reshape(7, 4), pairs)[0],
                       lambda d: pairwise_loss(d.reshape(7, 4), pairs)[1].ravel(), rng.standard_normal(28))
    assert error < 1e-5
    loss, _ = pairwise_loss(np.zeros((1, 3)), preference_pairs(np.array([[1.0, 0.0, 0.0]])))
    assert np.isclose(loss, 2 * np.log(2))  # two preferred pairs at margin 0


def test_irt_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    X, offset, Y = rng.standard_normal((9, 5)), rng.standard_normal((9, 3)), (rng.random((9, 3)) < 0.5).astype(float)
    shapes = {"W": (5, 2), "a": (3, 2), "wb": (5,)}
    cuts = np.cumsum([0] + [int(np.prod(s)) for s in shapes.values()])

    def unpack(flat):
        return {k: flat[a:b].reshape(s) for (k, s), a, b in zip(shapes.items(), cuts[:-1], cuts[1:])}

    def grad(flat):
        return np.concatenate([g.ravel() for g in irt_loss(unpack(flat), X, offset, Y, 0.1)[1].values()])

    assert check_grad(lambda f: irt_loss(unpack(f), X, offset, Y, 0.1)[0], grad, rng.standard_normal(cuts[-1])) < 1e-5


def test_bad_settings_are_refused():
    for name, kwargs, match in (("irt", {"rank": 0}, "rank"), ("mf", {"rank": 0}, "rank"), ("gbdt", {"mu": -1.0}, "mu"),
                                ("irt", {"strength": -0.5}, "strength")):
        with pytest.raises(ValueError, match=match):
            make_agent(name, **kwargs)
    with pytest.raises(RuntimeError, match="fit"):
        make_agent("mf").predict_correct(ObservationBatch.from_tournament(make_tournament(), np.arange(3)))
