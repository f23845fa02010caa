"""Hand-written linear bandits: online learning through real RoutingEnvs, frozen greedy evaluation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.envs import Reward, RoutingEnv
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, ObservationBatch, make_agent
from routing_gym_agents.bandits import EpsilonGreedy, RidgeArms

BANDITS = ["linucb", "epsilon-greedy", "thompson"]
COEF = {"lambda_e": 0.5}
TOPICS = ("algebra", "history", "chemistry", "poetry", "law", "biology")


def topical_tournament(n: int = 600, k: int = 4, seed: int = 0) -> Tournament:
    """Learnable text signal: each question names a topic and one specialist model per topic is
    right 90 % of the time (the others 15 %); the rest of the prompt is random filler."""
    t = make_tournament(n=n, k=k, seed=seed)
    rng = np.random.default_rng(seed + 1)
    topic = rng.integers(0, k, n)
    filler = "route the question to a model that answers it with few joules please".split()
    queries = t.queries.copy()
    queries["prompt"] = [f"{TOPICS[c]} " + " ".join(rng.choice(filler, 4)) + f" #{i}?" for i, c in enumerate(topic)]
    p = np.where(np.arange(k)[None, :] == topic[:, None], 0.9, 0.15)
    return replace(t, queries=queries, correct=(rng.uniform(size=(n, k)) < p).astype(float))


def held_out(agent: Any, t: Tournament, coef: dict[str, float] = COEF) -> dict[str, float]:
    """Metrics of the agent's routes on the test split, scored by a real RoutingEnv."""
    env = RoutingEnv(tournament=t, split="test", coefficients=coef)
    return env.evaluate(agent.act_batch(ObservationBatch.from_tournament(t, env.rows))).metrics()


def fitted(name: str, t: Tournament, seed: int = 0, hooks: list | None = None, **kwargs: Any) -> tuple[Any, dict]:
    agent = make_agent(name, **kwargs)
    logs = agent.fit(FitContext(t, Reward("gated_rank", COEF), seed=seed, step_hooks=hooks or [], grants=agent.privileged))
    return agent, logs


@pytest.fixture(scope="module")
def topical() -> Tournament:
    return topical_tournament()


@pytest.mark.parametrize("name", BANDITS)
def test_bandit_beats_random_on_held_out(topical: Tournament, name: str) -> None:
    agent, _ = fitted(name, topical)
    random, _ = fitted("random", topical)
    ours, theirs = held_out(agent, topical), held_out(random, topical)
    assert ours["mean_reward"] > theirs["mean_reward"] + 1.0, (ours, theirs)
    assert ours["accuracy"] > 0.8 and ours["invalid_rate"] == 0.0


def test_linucb_beats_random_on_the_procedural_default() -> None:
    from routing_gym.errors import UnknownNameError
    from routing_gym.sources import resolve_tournament

    try:
        t = resolve_tournament("paper-pool")
    except UnknownNameError:  # the procedural presets are another issue's work
        pytest.skip("paper-pool preset not in this checkout")
    agent, _ = fitted("linucb", t)
    random, _ = fitted("random", t)
    assert held_out(agent, t)["mean_reward"] > held_out(random, t)["mean_reward"]


@pytest.mark.parametrize("name", BANDITS)
def test_online_pass_logs_regret_and_calls_hooks(topical: Tournament, name: str) -> None:
    calls: list[tuple[int, int, float, dict]] = []
    _, logs = fitted(name, topical, hooks=[lambda step, a, r, info: calls.append((step, a, r, info))])
    n_train = len(topical.split_rows("train"))
    assert [c[0] for c in calls] == list(range(n_train))
    assert sorted(c[3]["row"] for c in calls) == topical.split_rows("train").tolist(), "one pass = every row once"
    # The hooks (the evaluator's side) see the oracle reward; the agent's env does not.
    regret = np.array([info["oracle_reward"] - r for _, _, r, info in calls])
    assert "oracle_reward" not in logs and logs["reward"] == [c[2] for c in calls]
    assert logs["actions"] == [c[1] for c in calls] and (regret >= -1e-12).all()
    third = n_train // 3
    assert regret[-third:].mean() < 0.5 * regret[:third].mean(), "regret per step must fall as the bandit learns"


def test_bandits_learn_from_bandit_feedback_only(topical: Tournament, monkeypatch) -> None:
    def forbidden(self):
        raise AssertionError("a bandit agent read the full training table")

    monkeypatch.setattr(FitContext, "train_outcomes", forbidden)
    monkeypatch.setattr(FitContext, "train_reward_matrix", forbidden)
    for name in BANDITS:
        agent, _ = fitted(name, topical)
        assert agent.feedback == "bandit"


@pytest.mark.parametrize("name", BANDITS)
def test_seeded_and_reproducible(topical: Tournament, name: str) -> None:
    a, logs_a = fitted(name, topical, seed=3)
    b, logs_b = fitted(name, topical, seed=3)
    _, logs_c = fitted(name, topical, seed=4)
    assert logs_a["actions"] == logs_b["actions"] and logs_a["actions"] != logs_c["actions"]
    np.testing.assert_array_equal(a.arms.theta, b.arms.theta)


def test_epochs_repeat_the_training_split(topical: Tournament) -> None:
    rows: list[int] = []
    _, logs = fitted("linucb", topical, epochs=2, hooks=[lambda s, a, r, info: rows.append(info["row"])])
    train = topical.split_rows("train")
    assert len(logs["actions"]) == len(rows) == 2 * len(train)
    np.testing.assert_array_equal(np.bincount(rows, minlength=topical.n_queries)[train], 2)


def test_ridge_arms_match_the_direct_solution() -> None:
    rng = np.random.default_rng(0)
    arms = RidgeArms(n_arms=2, dim=5, ridge=0.7)
    X, r = rng.normal(size=(40, 5)), rng.normal(size=40)
    for x, reward in zip(X, r):
        arms.update(1, x, reward)
    A = 0.7 * np.eye(5) + X.T @ X
    np.testing.assert_allclose(arms.A_inv[1], np.linalg.inv(A), atol=1e-10)
    np.testing.assert_allclose(arms.theta[1], np.linalg.solve(A, X.T @ r), atol=1e-10)
    np.testing.assert_allclose(arms.variances(X[0]), [X[0] @ X[0] / 0.7, X[0] @ np.linalg.inv(A) @ X[0]])
    assert arms.counts.tolist() == [0, 40] and not arms.theta[0].any()


@pytest.mark.parametrize("name", BANDITS)
def test_save_load_round_trip_and_act_matches_act_batch(topical: Tournament, name: str, tmp_path) -> None:
    agent, _ = fitted(name, topical)
    env = RoutingEnv(tournament=topical, split="test", order="sequential")
    batch_actions = agent.act_batch(ObservationBatch.from_tournament(topical, env.rows))
    agent.save(tmp_path / "agent.pkl")
    loaded = type(agent).load(tmp_path / "agent.pkl")
    np.testing.assert_array_equal(loaded.act_batch(ObservationBatch.from_tournament(topical, env.rows)), batch_actions)
    single = [loaded.act(env.reset()[0]) for _ in range(40)]  # sequential order: the first 40 test rows
    np.testing.assert_array_equal(single, batch_actions[:40])


def test_hyperparameters_are_checked() -> None:
    assert EpsilonGreedy(epsilon=0.4, half_life=100).epsilon_at(100) == pytest.approx(0.2)
    for name, bad in [("linucb", {"alpha": -1}), ("epsilon-greedy", {"epsilon": 1.5}),
                      ("thompson", {"v": -0.1}), ("linucb", {"epochs": 0})]:
        with pytest.raises(ValueError):
            make_agent(name, **bad)
    with pytest.raises(RuntimeError, match="fit"):
        make_agent("linucb").act_batch(ObservationBatch.from_tournament(make_tournament(), np.arange(3)))
