"""Deployable means verified (issues 22 and 31): the doors to held-out outcomes, and the audit.

Each cheating agent (``cheating_agents.py``) reads what a deployed router would not have through
one door; each is refused (``PrivilegedAccessError``: the row fails) or labelled not deployable by
the audit, and none is listed in any verdict line. The roads past a same-process audit (a cached
loader, module state, ``gc``, the shipped and the cached files read with pandas) are caught
because the audit's run happens in a process of its own (``eval/execution/audit_process.py``). Honest
agents of every family pass the audit with not one action changed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import make_tournament

import cheating_agents
from routing_gym.envs import ObservationBatch, Reward
from routing_gym.errors import PrivilegedAccessError
from routing_gym.eval.compare import CompareConfig, markdown_report, run_compare
from routing_gym.eval.core.robustness import NO_VERDICT, ROUTES, verdict_robustness
from routing_gym.eval.core.stats import BootstrapPlan
from routing_gym.eval.execution import audit_process
from routing_gym.eval.execution.audit import FAILED_LABEL, replaced_holdout
from routing_gym.fronts.hull import BEYOND_TASK_LABEL
from routing_gym.paths import cache_dir, shipped_data_dir
from routing_gym.sources import aliases_of, resolve_tournament
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, make_agent

REFUSED = ("cheat-test-env", "cheat-reward-matrix", "cheat-oracle-info")
AUDITED_OUT = ("cheat-by-name", "cheat-private", "cheat-env-tournament", "cheat-best-on-test", "cheat-at-act")


def routes_line(table: str) -> str:
    return next(line for line in table.splitlines() if line.startswith("- routes ("))


def verdict_lines(table: str) -> list[str]:
    """Every line of table.md that calls a method routing: the routing-gain and content-gain verdicts."""
    return [line for line in table.splitlines() if line.startswith(("- routes (", f"- {BEYOND_TASK_LABEL}"))]


def assert_caught(result, names, label=FAILED_LABEL):
    """Each of ``names`` labelled ``label`` and absent from every verdict: table lines, the
    deployable Pareto front, the ``deployable`` field."""
    table = markdown_report(result)
    for name in names:
        row = result.row(name)
        assert row["deployable_label"].startswith(label) and row["deployable"] is False, (name, row["deployable_label"])
        assert name not in result.pareto["front_deployable"], name
        assert not any(name in line for line in verdict_lines(table)), name
    return table


def test_the_replaced_copy_changes_held_out_outcomes_only():
    t = make_tournament(n=300)
    copy = replaced_holdout(t, "test")
    train, test = t.split_rows("train"), t.split_rows("test")
    assert copy.queries["prompt"].tolist() == t.queries["prompt"].tolist() and copy.correct.shape == t.correct.shape
    for name in ("correct", "energy_j", "latency_s", "output_tokens"):
        np.testing.assert_array_equal(getattr(copy, name)[train], getattr(t, name)[train])
        # model k's held-out outcomes are a permutation of model k+1's: every per-model mean moves
        for k in range(t.n_models):
            assert sorted(getattr(copy, name)[test, k]) == sorted(getattr(t, name)[test, (k + 1) % t.n_models])
    assert (copy.energy_j[test] != t.energy_j[test]).all(axis=1).mean() > 0.95  # no query keeps its outcomes
    assert replaced_holdout(t, "test").fingerprint == copy.fingerprint  # one copy per tournament, whatever the cell's seed


def test_the_names_and_directories_of_a_tournament_are_recorded(tmp_path):
    t = make_tournament(n=60)
    t.save(tmp_path / "toy")
    assert resolve_tournament(str(tmp_path / "toy")).fingerprint == t.fingerprint
    assert resolve_tournament(cheating_agents.BY_NAME) is not None
    names, directories = aliases_of(t.fingerprint)  # the registry is per process: other tests may add the same toy
    assert names == [] and str((tmp_path / "toy").resolve()) in directories
    assert aliases_of(resolve_tournament(cheating_agents.BY_NAME).fingerprint) == ([cheating_agents.BY_NAME], [])


def test_the_audit_world_holds_the_copy_or_nothing(tmp_path, monkeypatch):
    """Shipped package, cache and data directory of the audit's process: the copy where the
    original was, nothing else of the real ones (other tournaments, raw data, token caches)."""
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path / "cache"))
    t = resolve_tournament("default")
    t.save(cache_dir() / "tournaments" / "paper-pool-build")  # a "build" of the same tournament
    make_tournament(n=60).save(cache_dir() / "tournaments" / "other-build")
    (cache_dir() / "embeddings").mkdir()
    (cache_dir() / "mmlu-pro-tokens").mkdir()
    named = tmp_path / "named"
    t.save(named)
    root = tmp_path / "world"
    audit_process.write_world(root, t, "test", (("default",), (str(named),)))
    copy = Tournament.load(root / "copy")
    assert copy.fingerprint == replaced_holdout(t, "test").fingerprint != t.fingerprint  # saved exactly
    package = root / "site" / "routing_gym_envs_data"
    assert sorted(p.name for p in package.iterdir()) == ["__init__.py", "paper-pool"]
    assert (package / "paper-pool").resolve() == (root / "copy").resolve()
    assert sorted(p.name for p in (root / "cache" / "tournaments").iterdir()) == ["paper-pool-build"]
    assert sorted(p.name for p in (root / "cache").iterdir()) == ["embeddings", "tournaments"]  # no token cache
    assert list((root / "data").iterdir()) == []
    world = json.loads((root / "world.json").read_text())
    assert world["fingerprint"] == t.fingerprint and world["names"] == ["default"]
    assert str(named) in world["directories"] and str(shipped_data_dir() / "paper-pool") in world["directories"]


def test_the_training_context_refuses_held_out_and_counterfactual_doors():
    t = make_tournament(n=120)
    ctx = FitContext(t, Reward(), seed=0)
    for door in (lambda: ctx.make_env(split="test"), lambda: ctx.make_vec_env(2, split="test"),
                 lambda: ctx.make_env(tournament=t)):
        with pytest.raises(PrivilegedAccessError, match="training"):
            door()
    env = ctx.make_env()
    _, reset_info = env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert "oracle_reward" not in info and "correct" in info and "energy_j" in info  # the route taken only
    assert list(reset_info) == list(info)  # reset's info has the step's keys, its placeholder oracle_reward gone too
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
    assert t.fingerprint == resolve_tournament(cheating_agents.BY_NAME).fingerprint  # nothing replaced here


def test_roads_past_a_same_process_audit_are_caught():
    """A cached loader, module state and an object found through gc each gave the original in a
    second run in the same process; in the audit's process they give the copy."""
    worlds = set(Path(tempfile.gettempdir()).glob("routing-gym-audit-*"))
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=[*cheating_agents.ROADS, "knn"],
                                       seeds=2, n_bootstrap=100, progress=False))
    assert not result.failures
    assert result.row("cheat-module-state")["routing_gain_pp_ci_low"] > 5  # they would have routed
    assert_caught(result, cheating_agents.ROADS)
    assert result.row("knn")["deployable_label"] == "yes" and "knn" in routes_line(markdown_report(result))
    assert set(Path(tempfile.gettempdir()).glob("routing-gym-audit-*")) <= worlds  # its world is removed afterwards


def test_the_shipped_files_read_with_pandas_are_the_copy_in_the_audit():
    result = run_compare(CompareConfig(tournament="default", agents=["cheat-shipped-parquet"], seeds=1, n_bootstrap=100,
                                       progress=False))
    assert result.row("cheat-shipped-parquet")["routing_gain_pp_ci_low"] > 5
    table = assert_caught(result, ["cheat-shipped-parquet"])
    assert "cheat-shipped-parquet (no (actions depend on held-out outcomes))" in table


@pytest.mark.parametrize("executor", ["local", "process"])
def test_a_cached_build_read_with_pandas_is_the_copy_and_the_data_dir_is_empty(executor, tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROUTING_GYM_DATA_DIR", str(tmp_path / "data"))
    t = resolve_tournament(cheating_agents.BY_NAME)
    folder = cache_dir() / "tournaments" / cheating_agents.CACHED_BUILD
    t.save(folder)
    t.save(tmp_path / "data" / cheating_agents.CACHED_BUILD)
    result = run_compare(CompareConfig(tournament=str(folder), agents=["cheat-cached-build", "cheat-data-dir", "knn"],
                                       seeds=1, n_bootstrap=100, progress=False, executor=executor, workers=2,
                                       imports=["cheating_agents"]))
    assert not result.failures
    assert_caught(result, ["cheat-cached-build"])
    # The audit's data directory is empty: the read fails there, and the row stays unverified.
    assert_caught(result, ["cheat-data-dir"], label="unverified (the audit's run failed: FileNotFoundError")
    assert result.row("knn")["deployable_label"] == "yes"


def test_a_world_whose_processes_were_killed_is_removed_by_the_next_audit():
    import os
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = Path(tempfile.mkdtemp(prefix=audit_process.WORLD_PREFIX))
    live = Path(tempfile.mkdtemp(prefix=audit_process.WORLD_PREFIX))
    (stale / audit_process.OWNERS).write_text(f"{gone.stdout.strip()} {gone.stdout.strip()}\n")
    (live / audit_process.OWNERS).write_text(f"{gone.stdout.strip()} {os.getpid()}\n")
    audit_process.remove_stale_worlds()
    assert not stale.exists() and live.exists()
    live.joinpath(audit_process.OWNERS).unlink()
    live.rmdir()


def test_withheld_rows_get_no_energy_law_verdict():
    rng = np.random.default_rng(0)
    correct = (rng.uniform(size=(400, 3)) < [0.3, 0.6, 0.9]).astype(float)
    energies = {law: np.array([1.0, 4.0, 9.0]) * scale * rng.uniform(0.9, 1.1, (400, 3)) for law, scale in (("a", 1), ("b", 2))}
    oracle_like = correct.argmax(axis=1)
    robust = verdict_robustness(correct, energies, {"peek": oracle_like, "peek-withheld": oracle_like}, ["s", "m", "l"],
                                BootstrapPlan(400, 200, 0), withheld={"peek-withheld"}, train=(correct, energies))
    for law in ("a", "b"):
        assert robust.per_law[law].verdicts["peek"] == ROUTES
        assert robust.per_law[law].verdicts["peek-withheld"] == NO_VERDICT
        assert robust.per_law[law].gain_pp["peek-withheld"] == robust.per_law[law].gain_pp["peek"]  # numbers kept


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
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME,
                                       agents=["cheat-by-name", "cheat-at-act", *cheating_agents.ROADS, "knn"],
                                       seeds=1, n_bootstrap=50, progress=False, executor="process", workers=2,
                                       imports=["cheating_agents"]))
    assert not result.failures
    assert_caught(result, ["cheat-by-name", "cheat-at-act", *cheating_agents.ROADS])
    assert result.row("knn")["deployable_label"] == "yes"


def test_without_the_audit_no_row_is_called_deployable():
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-private", "knn", "oracle"],
                                       seeds=1, n_bootstrap=50, progress=False, audit=False))
    assert result.row("knn")["deployable_label"] == result.row("cheat-private")["deployable_label"] == "unverified (audit off)"
    assert result.row("oracle")["deployable_label"] == "no"
    table = markdown_report(result)
    assert "knn" not in routes_line(table) and "knn (unverified (audit off))" in table.split("- no verdict: ")[1].splitlines()[0]
    assert not any("knn" in line or "cheat-private" in line for line in verdict_lines(table))
    assert "knn" not in result.pareto["front_deployable"] and result.row("knn")["deployable"] is False


def test_the_audit_runs_inside_ray_tasks(ray_local):
    result = run_compare(CompareConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-by-name", *cheating_agents.ROADS, "knn"],
                                       seeds=1, n_bootstrap=50, progress=False, executor="ray", imports=["cheating_agents"]))
    assert not result.failures
    assert_caught(result, ["cheat-by-name", *cheating_agents.ROADS])
    assert result.row("knn")["deployable_label"] == "yes"


def test_an_agent_too_costly_to_audit_is_labelled_unverified_never_yes():
    result = run_compare(CompareConfig(tournament=make_tournament(n=90), agents=["costly-to-audit"], seeds=1,
                                       n_bootstrap=50, progress=False))
    assert result.row("costly-to-audit")["deployable_label"] == "unverified (not audited: too costly in this test)"
    assert result.row("costly-to-audit")["audit"]["status"] == "skipped"


def test_a_frontier_curve_is_audited_and_a_failed_one_gets_no_verdict():
    from routing_gym.eval.frontier import FrontierConfig, run_frontier
    from routing_gym.eval.frontier.report import markdown_report as frontier_report

    result = run_frontier(FrontierConfig(tournament=cheating_agents.BY_NAME, agents=["cheat-frontier", "per-benchmark"],
                                         n_bootstrap=100, progress=False))
    curves = {c.agent: c for c in result.curves}
    cheat, honest = curves["cheat-frontier"], curves["per-benchmark"]
    assert cheat.deployable_label == FAILED_LABEL and cheat.audit["changed"] > 0 and cheat.withheld
    assert honest.deployable_label == "yes" and honest.audit["changed"] == 0
    assert any(d["dominated"] for d in cheat.dominance)  # it would have dominated fixed models
    report = frontier_report(result)
    assert f"| cheat-frontier ({FAILED_LABEL}) |" in report and "| no verdict | no verdict |" in report
    header = next(line for line in report.splitlines() if line.startswith("| Fixed model |"))
    assert "cheat-frontier" not in header and "per-benchmark" in header
    assert f"- **cheat-frontier** no verdict: {FAILED_LABEL}." in report
