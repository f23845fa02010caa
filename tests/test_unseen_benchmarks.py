"""The contract for an unseen label (issue 50, item 2): every registered agent, fitted on a
tournament where two benchmarks have no training rows, routes their test questions with valid
model indices, and the unseen label carries nothing (two unseen benchmarks are routed alike).
The contract is written in ``Agent``'s docstring and docs/agents.md."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament
from test_baselines import with_outputs

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.fronts.hull import best_per_benchmark
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, make_agent
from routing_gym_agents import registry
from routing_gym_agents.nested import LABEL_ONLY

UNSEEN = ("bbh", "mmlu")
# The text controller trains a language model: its own (slow) test below.
TEXT_CONTROLLER = ("grpo", "kl-grpo", "sft")
# Tiny budgets; agents not named here run with their defaults.
KWARGS = {
    "fixed": {"model_id": "m1"},
    "a2c": {"total_timesteps": 256, "features": {"dim": 8}},
    "ppo": {"total_timesteps": 256, "features": {"dim": 8}},
    "dqn": {"total_timesteps": 256, "features": {"dim": 8}},
    "gbdt": {"max_iter": 10},
}
# Agents that index a per-benchmark table: they refuse a code outside the tournament's list.
LABEL_TABLES = ("per-benchmark", "cost-aware", "irt", "mf", "gbdt", "chain-mix")


def built_in_agents() -> list[str]:
    """Every agent the package registers (test modules register agents of their own)."""
    registry.load_plugins()
    return sorted(n for n, (cls, _) in registry.AGENTS.items() if cls.__module__.startswith("routing_gym_agents."))


@pytest.fixture(scope="module")
def tournament() -> Tournament:
    """Four benchmarks, two of them (bbh, mmlu) held out: only gsm8k and math500 are trained on."""
    t = make_tournament(n=320, k=4, with_splits=False)
    queries = t.queries.copy()
    queries.loc[::4, "benchmark"] = "bbh"
    t = with_outputs(replace(t, queries=queries), noise=(0.7, 0.5, 0.1, 0.4))  # Smoothie reads answers
    return t.with_splits(seed=0, hold_out_benchmarks=UNSEEN)


def unseen_batch(t: Tournament) -> ObservationBatch:
    rows = np.flatnonzero(t.queries["benchmark"].isin(UNSEEN).to_numpy())
    return ObservationBatch.from_tournament(t, rows)


def relabelled(batch: ObservationBatch, codes: np.ndarray) -> ObservationBatch:
    return replace(batch, benchmarks=np.asarray(codes, dtype=np.int64))


def fitted(name: str, t: Tournament, **kwargs) -> tuple:
    agent = make_agent(name, **{**KWARGS.get(name, {}), **kwargs})
    ctx = FitContext(t, Reward(), seed=0, grants=agent.privileged, feedback=agent.feedback)
    return agent, agent.fit(ctx)


def test_the_held_out_benchmarks_have_no_training_row(tournament):
    codes = FitContext(tournament, Reward()).train_observations().benchmarks
    assert {tournament.benchmarks[c] for c in np.unique(codes)} == {"gsm8k", "math500"}


@pytest.mark.parametrize("name", [n for n in built_in_agents() if n not in TEXT_CONTROLLER])
def test_every_agent_routes_an_unseen_benchmark_as_no_label(name, tournament):
    agent, _ = fitted(name, tournament)
    batch = unseen_batch(tournament)
    actions = np.asarray(agent.act_batch(batch))
    assert actions.shape == (len(batch),) and np.issubdtype(actions.dtype, np.integer)
    assert actions.min() >= 0 and actions.max() < tournament.n_models
    # The label carries nothing: the two unseen benchmarks swapped, every route stays.
    bbh, mmlu = (tournament.benchmarks.index(b) for b in UNSEEN)
    swapped = np.where(batch.benchmarks == bbh, mmlu, bbh)
    np.testing.assert_array_equal(agent.act_batch(relabelled(batch, swapped)), actions)
    # A code outside the tournament's list: refused by name where a per-benchmark table is indexed,
    # else routed as unseen.
    outside = relabelled(batch, np.full(len(batch), len(tournament.benchmarks)))
    if name in LABEL_TABLES:
        with pytest.raises(ValueError, match="benchmark codes 4..4 outside the 4 benchmarks"):
            agent.act_batch(outside)
    else:
        np.testing.assert_array_equal(agent.act_batch(outside), actions)


def test_per_benchmark_routes_an_unseen_benchmark_to_its_pooled_choice(tournament):
    agent, logs = fitted("per-benchmark", tournament, mu=0.1)
    assert logs["unseen_benchmarks"] == sorted(UNSEEN)
    train = tournament.outcomes(tournament.split_rows("train"))
    j_ref = train.energy_j.mean(axis=0).max()
    pooled = best_per_benchmark(train.correct.mean(axis=0) - 0.1 * train.energy_j.mean(axis=0) / j_ref,
                                train.energy_j.mean(axis=0))
    assert np.all(agent.act_batch(unseen_batch(tournament)) == pooled)
    assert logs["routes"]["bbh"] == logs["routes"]["mmlu"] == tournament.model_ids[int(pooled)]


@pytest.mark.parametrize("name", ["cost-aware", "irt", "mf", "gbdt"])
def test_label_nested_routers_take_the_pooled_rate_for_an_unseen_benchmark(name, tournament):
    agent, logs = fitted(name, tournament, strength=LABEL_ONLY)
    assert logs["unseen_benchmarks"] == sorted(UNSEEN)
    train = tournament.outcomes(tournament.split_rows("train"))
    batch = unseen_batch(tournament)
    p = agent.predict_correct(batch)
    np.testing.assert_allclose(p, np.clip(np.broadcast_to(train.correct.mean(axis=0), p.shape), 1e-3, 1 - 1e-3))
    np.testing.assert_allclose(agent.predict_energy(batch), np.broadcast_to(train.energy_j.mean(axis=0), p.shape))


def test_the_featurizer_gives_an_unseen_benchmark_no_one_hot(tournament):
    agent, _ = fitted("knn", tournament)
    batch = unseen_batch(tournament)
    X = agent.batch_features(batch)
    onehot = X[:, agent.featurizer.text_dim_: agent.featurizer.text_dim_ + len(tournament.benchmarks)]
    assert not onehot.any()
    seen = ObservationBatch.from_tournament(tournament, tournament.split_rows("train")[:20])
    assert (agent.batch_features(seen)[:, agent.featurizer.text_dim_:][:, :4].sum(axis=1) == 1).all()
    np.testing.assert_array_equal(X, agent.batch_features(relabelled(batch, np.full(len(batch), -1))))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sft"])
def test_the_text_controller_routes_an_unseen_benchmark(name, tournament):
    """A 4-step SFT run (grpo and kl-grpo share its prompt and routing). The prompt holds the text
    alone; a completion it cannot parse is the invalid action, as on any question."""
    pytest.importorskip("trl")
    from routing_gym_agents.controller.prompt import INVALID

    agent, _ = fitted(name, tournament, prompt_max_question_chars=80, sft_batch_size=2, sft_learning_rate=2e-3,
                      eval_batch_size=10, sft_max_steps=4, sft_max_train_queries=8, sft_targets="oracle")
    batch = unseen_batch(tournament).select(slice(0, 10))
    actions = np.asarray(agent.act_batch(batch))
    assert set(actions.tolist()) <= {INVALID, *range(tournament.n_models)}
    bbh, mmlu = (tournament.benchmarks.index(b) for b in UNSEEN)
    swapped = np.where(batch.benchmarks == bbh, mmlu, bbh)
    np.testing.assert_array_equal(agent.act_batch(relabelled(batch, swapped)), actions)


def test_the_tests_above_cover_every_registered_agent():
    assert set(TEXT_CONTROLLER) <= set(built_in_agents())
    assert set(LABEL_TABLES) <= set(built_in_agents())
