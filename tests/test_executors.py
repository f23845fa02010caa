"""Executors for compare's cells: a process pool and Ray retry a dead worker's cell, finished
cells are saved and reused by a rerun, and every executor gives the same table.

Worker processes import what they run by name, so the agents and task functions live in
``tests/cluster_helpers.py`` (on ``sys.path`` here, on the workers' ``PYTHONPATH`` via the
``ray_local`` fixture).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import cluster_helpers
from conftest import make_tournament
from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs
from routing_gym.eval.execution.executors import Lost, Task, run_tasks

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def test_process_pool_retries_tasks_whose_worker_died_and_ships_each_payload_once(tmp_path):
    tasks = [Task(f"t{i}", "big", (str(tmp_path), f"k{i}")) for i in range(3)]
    out = dict(run_tasks(cluster_helpers.die_once_task, {"big": "payload"}, tasks, "process", workers=2))
    assert {t.key for t in out} == {"t0", "t1", "t2"}
    for task, (payload, attempt, pid) in out.items():
        assert payload == "payload" and attempt == 2 and pid != os.getpid()  # ran in a replacement worker
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"k{i}.{n}" for i in range(3) for n in (1, 2)]


def test_process_pool_reports_a_task_whose_worker_keeps_dying_and_finishes_the_rest(tmp_path):
    (tmp_path / "lives.1").touch()  # this task's first attempt is already used up: it returns
    tasks = [Task("dies", "g", (str(tmp_path), "dies")), Task("lives", "g", (str(tmp_path), "lives"))]
    out = {t.key: v for t, v in run_tasks(cluster_helpers.die_once_task, {"g": 1}, tasks, "process", max_retries=0)}
    assert isinstance(out["dies"], Lost) and out["dies"].attempts == 1
    assert "worker process died (exit code 3) on each of 1 attempt(s)" in out["dies"].error
    assert out["lives"][:2] == (1, 2)


def test_unguarded_script_runs_in_process_with_a_warning(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import os
        import cluster_helpers
        from routing_gym.eval.execution.executors import Task, run_tasks

        out = list(run_tasks(cluster_helpers.echo_task, {"g": 0}, [Task("a", "g", (1,)), Task("b", "g", (2,))], "process"))
        print("PIDS", sorted({v[2] for _, v in out}) == [os.getpid()], sorted(v[1] for _, v in out))
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "PIDS True [1, 2]" in done.stdout
    assert "outside 'if __name__ == \"__main__\":'" in done.stderr and "RuntimeWarning" in done.stderr


def _config(tmp_path: Path, agents: list[str], executor: str, seeds: int = 2, **kwargs) -> CompareConfig:
    return CompareConfig(tournament=make_tournament(n=90, k=3), agents=agents, seeds=seeds, n_bootstrap=50,
                         progress=False, executor=executor, workers=2, imports=["cluster_helpers"], **kwargs)


def test_ray_retries_a_cell_that_kills_its_own_worker_once(ray_local, tmp_path):
    markers = tmp_path / "markers"
    config = _config(tmp_path, ["test-die-once", "random"], "ray",
                     agent_kwargs={"test-die-once": {"marker_dir": str(markers)}})
    result = run_compare(config, out_dir=tmp_path / "out")
    assert not result.failures
    assert result.row("test-die-once")["seeds_ok"] == 2
    # each seed's cell died once (its worker os._exit-ed) and succeeded on the retry, whose audit
    # (a second fit, eval/execution/audit.py) claimed the third marker
    assert sorted(p.name for p in markers.iterdir()) == ["seed0.1", "seed0.2", "seed0.3", "seed1.1", "seed1.2", "seed1.3"]
    assert sorted(p.name for p in (tmp_path / "out" / "cells").glob("*.json")) == [
        "random-0.json", "random-1.json", "test-die-once-0.json", "test-die-once-1.json"]


def test_a_cell_whose_worker_always_dies_is_a_failed_row_after_bounded_retries(tmp_path):
    markers = tmp_path / "markers"
    config = _config(tmp_path, ["test-always-die", "random"], "process", seeds=1, max_retries=1,
                     agent_kwargs={"test-always-die": {"marker_dir": str(markers)}})
    result = run_compare(config, out_dir=tmp_path / "out")
    (failed,) = result.failures
    assert failed.method == "test-always-die" and "worker process died (exit code 9) on each of 2 attempt(s)" in failed.error
    assert sorted(p.name for p in markers.iterdir()) == ["always0.1", "always0.2"]
    assert result.row("random")["seeds_ok"] == 1
    paths = write_outputs(result, tmp_path / "out", plots=False)
    assert "failed: worker process died" in paths["table.md"].read_text()
    # a failed cell is not saved: a rerun tries it again
    assert not list((tmp_path / "out" / "cells").glob("test-always-die*"))


def test_rerun_reuses_saved_cells_and_recomputes_missing_or_changed_ones(tmp_path, capsys):
    out = tmp_path / "out"
    config = _config(tmp_path, ["test-busy", "random"], "local", agent_kwargs={"test-busy": {"seconds": 0.0}})
    first = write_outputs(run_compare(config, out_dir=out), out, plots=False)["table.md"].read_text()
    cells = out / "cells"
    stamps = {p.name: p.stat().st_mtime_ns for p in cells.glob("*.json")}
    assert len(stamps) == 4
    (cells / "random-1.json").unlink()

    config.progress = None  # stderr is not a terminal: one line per finished cell
    capsys.readouterr()
    second = write_outputs(run_compare(config, out_dir=out), out, plots=False)["table.md"].read_text()
    err = capsys.readouterr().err
    assert "3 of 4 cells already saved (resumed); running the other 1" in err
    assert "[1/1] random seed 1: ok" in err and "test-busy seed" not in err
    assert second == first
    assert {n: t for n, t in stamps.items() if n != "random-1.json"} == {
        p.name: p.stat().st_mtime_ns for p in cells.glob("*.json") if p.name != "random-1.json"}

    config.agent_kwargs = {"test-busy": {"seconds": 0.001}}  # a changed setting: its cells are stale
    run_compare(config, out_dir=out)
    err = capsys.readouterr().err
    assert "2 of 4 cells already saved (resumed); running the other 2" in err
    assert "test-busy seed 0: ok" in err and "test-busy seed 1: ok" in err
    saved = json.loads((cells / "test-busy-0.json").read_text())
    assert saved["method"] == "test-busy" and saved["status"] == "ok" and len(saved["fingerprint"]) == 20


def _table_without_timing(folder: Path) -> tuple[str, pd.DataFrame]:
    per_seed = pd.read_csv(folder / "per_seed.csv").drop(columns=["fit_s", "act_ms_per_query"])
    return (folder / "table.md").read_text(), per_seed


@pytest.mark.slow
@pytest.mark.realdata
def test_local_and_ray_give_identical_tables_on_paper_pool(ray_local, tmp_path, data_dir):
    tables = {}
    for executor in ("local", "ray"):
        # audit=False: the audit's own executors are covered in test_audit.py; here it would double 6 PPO trainings
        config = CompareConfig(tournament="paper-pool", agents=["default", "ppo"], seeds=3, progress=False,
                               executor=executor, audit=False)
        result = run_compare(config, out_dir=tmp_path / executor)
        assert not result.failures and result.row("ppo")["seeds_ok"] == 3
        write_outputs(result, tmp_path / executor, plots=False)
        tables[executor] = _table_without_timing(tmp_path / executor)
    assert tables["local"][0] == tables["ray"][0]
    pd.testing.assert_frame_equal(tables["local"][1], tables["ray"][1])


def test_text_controller_cells_ask_for_a_gpu_and_fall_back_to_a_cpu_on_a_gpu_less_cluster():
    from routing_gym.eval.compare import agent_resources
    from routing_gym.eval.execution.executors import _ray_options

    assert [agent_resources(a) for a in ("sft", "grpo", "kl-grpo")] == [{"num_gpus": 1.0}] * 3
    assert agent_resources("ppo") == agent_resources("knn") == {"num_cpus": 1.0}
    assert _ray_options({"num_gpus": 1.0}, cluster_gpus=4.0) == {"num_gpus": 1.0}
    with pytest.warns(RuntimeWarning, match="asks for 1 GPU.*cluster has 0; running it on one CPU"):
        assert _ray_options({"num_gpus": 1.0}, cluster_gpus=0.0) == {"num_cpus": 1.0}
