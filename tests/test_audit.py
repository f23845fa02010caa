"""Deployable means verified (issue 22): the doors to held-out outcomes, and the audit.

Each cheating agent (``cheating_agents.py``) reads what a deployed router would not have through
one door; each is refused (``PrivilegedAccessError``: the row fails) or labelled not deployable by
the audit, and none is listed under "routes". Honest agents of every family pass the audit with
not one action changed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tournament

import cheating_agents
from routing_gym.envs import ObservationBatch, Reward
from routing_gym.errors import PrivilegedAccessError
from routing_gym.eval.audit import FAILED_LABEL, replaced_holdout
from routing_gym.eval.compare import CompareConfig, markdown_report, run_compare
from routing_gym.sources import resolve_tournament, substitute
from routing_gym_agents import FitContext, make_agent

REFUSED = ("cheat-test-env", "cheat-reward-matrix", "cheat-oracle-info")
AUDITED_OUT = ("cheat-by-name", "cheat-private", "cheat-env-tournament", "cheat-best-on-test", "cheat-at-act")


def routes_line(table: str) -> str:
    return next(line for line in table.splitlines() if line.startswith("- routes ("))


def test_the_replaced_copy_changes_held_out_outcomes_only():
    t = make_tournament(n=300)
    copy = replaced_holdout(t, "test", seed=0)
    train, test = t.split_rows("train"), t.split_rows("test")
    assert copy.queries["prompt"].tolist() == t.queries["prompt"].tolist() and copy.correct.shape == t.correct.shape
    for name in ("correct", "energy_j", "latency_s", "output_tokens"):
        np.testing.assert_array_equal(getattr(copy, name)[train], getattr(t, name)[train])
        # model k's held-out outcomes are a permutation of model k+1's: every per-model mean moves
        for k in range(t.n_models):
            assert sorted(getattr(copy, name)[test, k]) == sorted(getattr(t, name)[test, (k + 1) % t.n_models])
    assert (copy.energy_j[test] != t.energy_j[test]).all(axis=1).mean() > 0.95  # no query keeps its outcomes
    assert replaced_holdout(t, "test", seed=0) is copy  # built once per process and seed


def test_substitute_makes_a_rebuild_by_name_see_the_copy():
    t = resolve_tournament("two-model")
    copy = replaced_holdout(t, "test", seed=1)
    with substitute(t, copy):
        assert resolve_tournament("two-model") is copy
        assert resolve_tournament(t) is copy
    assert resolve_tournament("two-model") is t


def test_the_training_context_refuses_held_out_and_counterfactual_doors():
    t = make_tournament(n=120)
    ctx = FitContext(t, Reward(), seed=0)
    for door in (lambda: ctx.make_env(split="test"), lambda: ctx.make_vec_env(2, split="test"),
                 lambda: ctx.make_env(tournament=t)):
        with pytest.raises(PrivilegedAccessError, match="training"):
            door()
    env = ctx.make_env()
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert "oracle_reward" not in info and "correct" in info and "energy_j" in info  # the route taken only
    with pytest.raises(PrivilegedAccessError, match="routes not taken"):
        info["oracle_reward"]
    for door in (lambda: env.unwrapped.reward_matrix, lambda: env.unwrapped.evaluate(np.zeros(ctx.n_train))):
        with pytest.raises(PrivilegedAccessError, match="bandit-feedback view"):
            door()
    venv = ctx.make_vec_env(3)
    venv.reset(seed=0)
    _, _, _, _, infos = venv.step(np.zeros(3, dtype=np.int64))
    assert "oracle_reward" not in infos["final_info"] and "correct" in infos["final_info"]
    with pytest.raises(PrivilegedAccessError):
        venv.unwrapped.reward_matrix
    # A full-information agent may read every route of the *training* split, and is labelled so.
    full = FitContext(t, Reward(), feedback="full")
    assert full.make_env().unwrapped.reward_matrix.shape == (full.n_train, t.n_models)
    assert full.training_feedback == "full information"
    # The step hooks (the evaluator's side) still see the oracle reward, for regret.
    seen = []
    hooked = FitContext(t, Reward(), step_hooks=[lambda s, a, r, info: seen.append(info["oracle_reward"] - r)])
    e = hooked.make_env()
    e.reset(seed=0)
    e.step(1)
    assert len(seen) == 1 and seen[0] >= 0 and hooked.training_feedback == "bandit"


def test_every_door_is_refused_or_labelled_not_deployable_and_none_routes():
    t = resolve_tournament(cheating_agents.BY_NAME)
    names = [*REFUSED, *AUDITED_OUT, "bandit-reads-training-table", "knn"]
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=names, seeds=1, n_bootstrap=100,
                                       progress=False))
    failed = {r.method: r.error for r in result.failures}
    assert set(failed) == set(REFUSED) and all("PrivilegedAccessError" in e for e in failed.values())
    table = markdown_report(result)
    for name in AUDITED_OUT:
        row = result.row(name)
        assert row["deployable_label"] == FAILED_LABEL and row["deployable"] is False, name
        assert f"| {name} | {FAILED_LABEL} |" in table
        assert row["audit"]["changed"] > 0
    # Without the audit they would have routed: far above the hull.
    assert result.row("cheat-private")["routing_gain_pp_ci_low"] > 5
    routes = routes_line(table)
    assert not any(name in routes for name in (*REFUSED, *AUDITED_OUT))
    assert "knn" in routes and result.row("knn")["deployable_label"] == "yes"
    # Training on the training table is legitimate, and labelled so.
    honest_full = result.row("bandit-reads-training-table")
    assert honest_full["deployable_label"] == "yes" and honest_full["training_feedback"] == "full information"
    assert "| Method | Deployable | Training feedback |" in table
    assert "cross-split duplicate questions: 0" in table
    assert t.fingerprint == resolve_tournament(cheating_agents.BY_NAME).fingerprint  # the substitute is gone


@pytest.mark.parametrize("name, kwargs, feedback", [
    ("linucb", {}, "bandit"), ("thompson", {}, "bandit"), ("knn", {}, "full information"),
    ("cost-aware", {}, "full information"), ("ppo", {"total_timesteps": 512, "features": {"dim": 8}}, "bandit"),
])
def test_honest_agents_are_deterministic_and_pass_the_audit_unchanged(name, kwargs, feedback):
    t = make_tournament(n=300)
    batch = ObservationBatch.from_tournament(t, t.split_rows("test"))
    runs = []
    for _ in range(2):
        agent = make_agent(name, **kwargs)
        agent.fit(FitContext(t, Reward(), seed=3, feedback=agent.feedback))
        runs.append(agent.act_batch(batch))
    np.testing.assert_array_equal(runs[0], runs[1])  # same seed, same actions: what the audit relies on
    result = run_compare(CompareConfig(tournament=t, agents=[name], seeds=1, n_bootstrap=50, progress=False,
                                       agent_kwargs={name: kwargs} if kwargs else {}))
    row = result.row(name)
    assert row["audit"] == {"status": "passed", "changed": 0, "n": len(t.split_rows("test")),
                            "seconds": pytest.approx(row["audit"]["seconds"])}
    assert row["deployable_label"] == "yes" and row["training_feedback"] == feedback


def test_the_audit_runs_inside_process_workers():
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-by-name", "cheat-at-act", "knn"],
                                       seeds=1, n_bootstrap=50, progress=False, executor="process", workers=2,
                                       imports=["cheating_agents"]))
    assert not result.failures
    assert result.row("cheat-by-name")["deployable_label"] == FAILED_LABEL
    assert result.row("cheat-at-act")["deployable_label"] == FAILED_LABEL
    assert result.row("knn")["deployable_label"] == "yes"


def test_without_the_audit_no_row_is_called_deployable():
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-private", "knn", "oracle"],
                                       seeds=1, n_bootstrap=50, progress=False, audit=False))
    assert result.row("knn")["deployable_label"] == result.row("cheat-private")["deployable_label"] == "unverified (audit off)"
    assert result.row("oracle")["deployable_label"] == "no"
    table = markdown_report(result)
    assert "knn" not in routes_line(table) and "knn" in table.split("routes, not verified")[1].splitlines()[0]


def test_the_audit_runs_inside_ray_tasks(ray_local):
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-by-name", "knn"], seeds=1,
                                       n_bootstrap=50, progress=False, executor="ray", imports=["cheating_agents"]))
    assert not result.failures
    assert result.row("cheat-by-name")["deployable_label"] == FAILED_LABEL and result.row("knn")["deployable_label"] == "yes"


def test_an_agent_too_costly_to_audit_is_labelled_unverified_never_yes():
    result = run_compare(CompareConfig(tournament=make_tournament(n=90), agents=["costly-to-audit"], seeds=1,
                                       n_bootstrap=50, progress=False))
    assert result.row("costly-to-audit")["deployable_label"] == "unverified (not audited: too costly in this test)"
    assert result.row("costly-to-audit")["audit"]["status"] == "skipped"
