"""Vowpal Wabbit's contextual bandits (agents/vw.py, issue 61): they learn from bandit feedback
through the training env, are reproducible per seed, move between processes (the model's bytes),
and pass compare's isolated audit."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from conftest import BENCHMARKS, make_tournament

pytest.importorskip("vowpalwabbit", reason="the vw extra (pip install -e '.[vw]')")

from routing_gym.envs import ObservationBatch, Reward  # noqa: E402
from routing_gym.eval.compare import CompareConfig, run_compare  # noqa: E402
from routing_gym.tournament import Tournament  # noqa: E402
from routing_gym_agents import Agent, FitContext, make_agent  # noqa: E402

VW_AGENTS = ["vw-squarecb", "vw-epsilon", "vw-regcb"]


def specialist_pool(n: int = 900, seed: int = 0) -> Tournament:
    """One model best on each benchmark: model j answers benchmark j's questions right 95 % of
    the time, every other model 10 % (and the fourth model is nobody's specialist)."""
    t = make_tournament(n=n, k=len(BENCHMARKS) + 1, seed=seed)
    rng = np.random.default_rng(seed + 7)
    code = np.array([BENCHMARKS.index(b) for b in t.queries["benchmark"]])
    p = np.where(np.arange(t.n_models)[None, :] == code[:, None], 0.95, 0.10)
    return replace(t, correct=(rng.uniform(size=p.shape) < p).astype(float))


def fit(name: str, t: Tournament, seed: int = 0, **kwargs) -> tuple[Agent, dict, FitContext]:
    agent = make_agent(name, **kwargs)
    ctx = FitContext(t, Reward(), seed=seed, feedback=agent.feedback)
    return agent, agent.fit(ctx), ctx


@pytest.fixture(scope="module")
def pool() -> Tournament:
    return specialist_pool()


@pytest.mark.parametrize("features", ["tfidf-svd", "text"])
@pytest.mark.parametrize("name", VW_AGENTS)
def test_one_pass_routes_each_benchmark_to_its_specialist(pool: Tournament, name: str, features: str) -> None:
    agent, logs, ctx = fit(name, pool, features=features)
    rows = pool.split_rows("test")
    actions = agent.act_batch(ObservationBatch.from_tournament(pool, rows))
    specialist = np.array([BENCHMARKS.index(b) for b in pool.queries["benchmark"].to_numpy()[rows]])
    assert (actions == specialist).mean() >= 0.90, np.bincount(actions, minlength=pool.n_models)
    # One pass over the training split, learned from the env: bandit feedback only.
    assert len(logs["actions"]) == ctx.n_train and ctx.training_feedback == "bandit"
    assert sum(logs["arm_counts"]) == ctx.n_train and min(logs["arm_counts"]) > 0  # it explored every model


@pytest.mark.parametrize("name", VW_AGENTS)
def test_a_seed_gives_the_same_run_and_another_seed_another(pool: Tournament, name: str) -> None:
    batch = ObservationBatch.from_tournament(pool, pool.split_rows("test"))
    (a, logs_a, _), (b, logs_b, _), (c, logs_c, _) = (fit(name, pool, seed=s) for s in (3, 3, 4))
    assert logs_a["actions"] == logs_b["actions"] and logs_a["vw_args"] == logs_b["vw_args"]
    np.testing.assert_array_equal(a.act_batch(batch), b.act_batch(batch))
    assert logs_c["actions"] != logs_a["actions"] and "--random_seed 4" in logs_c["vw_args"]
    # Acting learns nothing: the routes do not depend on the order of the queries.
    order = np.random.default_rng(0).permutation(len(batch))
    shuffled = ObservationBatch(batch.texts[order], batch.benchmarks[order])
    np.testing.assert_array_equal(a.act_batch(shuffled), a.act_batch(batch)[order])


def test_a_fitted_agent_pickles_through_its_model_bytes(pool: Tournament, tmp_path) -> None:
    agent, _, _ = fit("vw-regcb", pool, features="text")
    batch = ObservationBatch.from_tournament(pool, pool.split_rows("test"))
    copy = pickle.loads(pickle.dumps(agent))
    assert copy._ws is not agent._ws
    np.testing.assert_array_equal(copy.act_batch(batch), agent.act_batch(batch))
    agent.save(tmp_path / "vw.pkl")
    np.testing.assert_array_equal(Agent.load(tmp_path / "vw.pkl").act_batch(batch), agent.act_batch(batch))
    with pytest.raises(RuntimeError, match="call fit"):
        make_agent("vw-epsilon").act_batch(batch)
    assert pickle.loads(pickle.dumps(make_agent("vw-epsilon")))._ws is None  # unfitted: nothing to save


@pytest.mark.parametrize("kwargs, message", [
    ({"exploration": "bagging"}, "exploration must be one of"), ({"epsilon": 1.5}, "epsilon must be in"),
    ({"reward_range": (2.0, -1.0)}, "reward_range"), ({"epochs": 0}, "epochs must be"), ({"bits": 40}, "bits must be"),
])
def test_bad_settings_are_refused_by_name(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_agent("vw-squarecb", **kwargs)


def test_compare_audits_them_deployable(pool: Tournament) -> None:
    """The audit refits each agent in its own process on a copy whose held-out outcomes are
    replaced: the same routes, so each row is "Deployable yes"."""
    result = run_compare(CompareConfig(tournament=pool, agents=[*VW_AGENTS, "linucb"], seeds=2, n_bootstrap=100,
                                       progress=False))
    assert not result.failures
    n_test = len(pool.split_rows("test"))
    for name in VW_AGENTS:
        row = result.row(name)
        assert row["deployable_label"] == "yes" and row["training_feedback"] == "bandit", (name, row["audit"])
        assert row["audit"]["status"] == "passed" and row["audit"]["changed"] == 0 and row["audit"]["n"] == 2 * n_test
        assert row["accuracy"] > result.row("linucb")["accuracy"] - 0.05 and row["accuracy"] > 0.85
