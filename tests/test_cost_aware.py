"""The cost-aware router: label-nested per-model success probabilities and a price on joules."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament, two_skill_tournament

from routing_gym.envs import Reward, RoutingEnv
from routing_gym.eval.frontier import CostKnob
from routing_gym_agents import Agent, FitContext, ObservationBatch, make_agent


@pytest.fixture(scope="module")
def graded():
    """Bigger models are more accurate and costlier; 600 queries."""
    return make_tournament(n=600, k=4, seed=3)


def _fit(t, **kwargs):
    agent = make_agent("cost-aware", **kwargs)
    agent.fit(FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
    return agent


def _routed(agent, t, rows):
    actions = agent.act_batch(ObservationBatch.from_tournament(t, rows))
    return t.correct[rows, actions].mean(), t.energy_j[rows, actions].mean()


def test_the_price_of_joules_moves_the_router_down_the_joule_axis(graded):
    agent = _fit(graded)
    test = graded.split_rows("test")
    points = []
    for mu in (0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 5.0):
        agent.mu = mu
        points.append(_routed(agent, graded, test))
    acc, joules = np.array(points).T
    assert np.all(np.diff(joules) <= 1e-9) and joules[0] > 1.5 * joules[-1]
    assert acc[0] > acc[-1]
    cheapest = int(graded.energy_j[graded.split_rows("train")].mean(axis=0).argmin())
    agent.mu = 5.0  # a price beyond any difference in P: always the cheapest model
    assert (agent.act_batch(ObservationBatch.from_tournament(graded, test)) == cheapest).all()


def test_the_threshold_rule_spends_more_as_tau_rises(graded):
    agent = _fit(graded, rule="threshold")
    assert agent.cost_knob.parameter == "tau" and agent.cost_knob.cheaper_when == "lower"
    test = graded.split_rows("test")
    joules = []
    for tau in (0.05, 0.3, 0.5, 0.7, 0.99):
        agent.tau = tau
        joules.append(_routed(agent, graded, test)[1])
    assert np.all(np.diff(joules) >= -1e-9) and joules[-1] > joules[0]


def test_probabilities_are_calibrated_on_held_out_queries(graded):
    agent = _fit(graded)
    test = graded.split_rows("test")
    p = agent.predict_correct(ObservationBatch.from_tournament(graded, test))
    assert p.shape == (len(test), graded.n_models) and ((0 <= p) & (p <= 1)).all()
    # Each model's mean predicted success matches its held-out accuracy within sampling noise.
    assert np.abs(p.mean(axis=0) - graded.correct[test].mean(axis=0)).max() < 0.08


def test_grouped_rows_still_learn_each_benchmark():
    t = two_skill_tournament(n_benchmarks=6, grouped=True)  # rows come grouped by benchmark
    agent = _fit(t)
    test = t.split_rows("test")
    p = agent.predict_correct(ObservationBatch.from_tournament(t, test))
    arith = np.char.startswith(t.queries["benchmark"].to_numpy()[test].astype(str), "arith")
    assert p[arith, 0].mean() > 0.85 and p[~arith, 0].mean() < 0.2
    assert (agent.act_batch(ObservationBatch.from_tournament(t, test)) == np.where(arith, 0, 1)).mean() > 0.95


def test_constant_and_fractional_outcomes(graded):
    correct = graded.correct.copy()
    correct[:, 0] = 1.0  # always right in training: a constant, no classifier
    correct[:, 1] = np.where(correct[:, 1] > 0, 0.75, 0.25)  # fractional correctness
    t = replace(graded, correct=correct)
    agent = _fit(t)
    p = agent.predict_correct(ObservationBatch.from_tournament(t, t.split_rows("test")))
    assert (p[:, 0] > 0.99).all() and 0.2 < p[:, 1].mean() < 0.8


def test_routes_env_observations_and_survives_save_load(graded, tmp_path):
    agent = _fit(graded, mu=0.3)
    env = RoutingEnv(tournament=graded, split="test")
    obs, _ = env.reset(seed=0)
    assert 0 <= agent.act(obs) < graded.n_models
    agent.save(tmp_path / "agent.pkl")
    loaded = Agent.load(tmp_path / "agent.pkl")
    batch = ObservationBatch.from_tournament(graded, graded.split_rows("test"))
    assert (loaded.act_batch(batch) == agent.act_batch(batch)).all()


def test_bad_settings_are_refused():
    for kwargs, match in (({"rule": "cheapest"}, "rule"), ({"mu": -0.1}, "mu"), ({"tau": 1.5}, "tau"),
                          ({"strength": -1.0}, "strength")):
        with pytest.raises(ValueError, match=match):
            make_agent("cost-aware", **kwargs)
    with pytest.raises(RuntimeError, match="fit"):
        make_agent("cost-aware").act_batch(ObservationBatch.from_tournament(make_tournament(), np.arange(3)))
    with pytest.raises(ValueError, match="applies"):
        CostKnob("mu", applies="sometimes", cheaper_when="higher", grid=(0.0,))
