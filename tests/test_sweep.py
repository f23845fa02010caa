"""``routing-gym sweep``: a grid of compare runs from a YAML/TOML config, one folder per
tournament x reward setting plus a combined table; a driver killed with SIGKILL mid-sweep
loses nothing that finished, and the rerun computes only the missing cells."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import make_tournament
from routing_gym.cli import main
from routing_gym.eval.compare.sweep import SweepConfigError, load_sweep_config

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def _write_config(tmp_path: Path, body: str, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"sweep{suffix}"
    path.write_text(body)
    return path


@pytest.fixture
def toy_dir(tmp_path) -> Path:
    folder = tmp_path / "toy"
    make_tournament(n=90, k=3).save(folder)
    return folder


def test_toml_grid_expands_and_bad_fields_are_named(tmp_path, toy_dir):
    path = _write_config(tmp_path, f"""
tournaments = ["{toy_dir}"]
seeds = [0, 3]
executor = "process"
[[agents]]
knn = {{k = 5}}
[[rewards]]
name = "gated_rank"
grid = {{lambda_e = [0.1, 0.2], lambda_t = [0.0, 0.05]}}
""", ".toml")
    config = load_sweep_config(path)
    assert config.agents == ["knn"] and config.agent_kwargs == {"knn": {"k": 5}} and config.seeds == [0, 3]
    assert [r.label for r in config.rewards] == [
        "gated_rank__lambda_e=0.1,lambda_t=0", "gated_rank__lambda_e=0.1,lambda_t=0.05",
        "gated_rank__lambda_e=0.2,lambda_t=0", "gated_rank__lambda_e=0.2,lambda_t=0.05"]
    bad = {
        "tournaments: []\n": "tournaments: expected a non-empty list",
        f"tournaments: [{toy_dir}]\nrewards: [{{name: gated_rank, grid: {{lambda_e: 0.1}}}}]\n": "rewards[0].grid.lambda_e: expected a non-empty list",
        f"tournaments: [{toy_dir}]\nexecutor: cluster\n": "executor: must be one of local, process, ray",
        f"tournaments: [{toy_dir}]\nagents: [{{knn: 5}}]\n": "agents[0].knn: expected a mapping",
        f"tournaments: [{toy_dir}]\nseed: 3\n": "unknown key(s) ['seed']",
    }
    for body, message in bad.items():
        with pytest.raises(SweepConfigError, match=r"sweep\.yaml: .*" if "unknown" in message else "sweep.yaml: "):
            load_sweep_config(_write_config(tmp_path, body))
        try:
            load_sweep_config(_write_config(tmp_path, body))
        except SweepConfigError as exc:
            assert message in str(exc)


def test_sweep_writes_a_folder_per_setting_and_a_combined_table(tmp_path, toy_dir, capsys):
    path = _write_config(tmp_path, f"""
tournaments: [{toy_dir}]
agents: [random, {{knn: {{k: 5}}}}]
seeds: 2
rewards:
  - {{name: gated_rank, coefficients: {{lambda_e: 0.1}}}}
  - {{name: gated_rank, grid: {{lambda_e: [0.3]}}}}
bootstrap: 50
plots: false
""")
    code = main(["sweep", str(path), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert folders == ["toy__gated_rank__lambda_e=0.1", "toy__gated_rank__lambda_e=0.3"]
    for folder in folders:
        assert (tmp_path / "out" / folder / "table.md").exists()
        assert len(list((tmp_path / "out" / folder / "cells").glob("*.json"))) == 4
    combined = pd.read_csv(tmp_path / "out" / "combined.csv")
    assert sorted(combined["setting"].unique()) == folders
    assert set(combined["method"]) >= {"random", "knn", "always m0"}
    # the same method scores differently under the two rewards, and identically on accuracy
    knn = combined[combined["method"] == "knn"].set_index("coefficients")
    assert knn.loc["lambda_e=0.1", "accuracy"] == knn.loc["lambda_e=0.3", "accuracy"]
    assert knn.loc["lambda_e=0.1", "mean_reward"] != knn.loc["lambda_e=0.3", "mean_reward"]
    # knn's fit ignores the seed (Agent.seed_dependent): one cell per setting serves both of its seeds
    assert captured.err.count(": ok in ") == 6 and "[6/6] toy__gated_rank__lambda_e=0.3: " in captured.err
    assert "| toy__gated_rank__lambda_e=0.1 | knn † |" in captured.out  # knn does not train on the reward
    assert "†: not trained on the reward (knn, random;" in captured.out


def test_allow_ungated_key_lets_a_sweep_study_coefficients_beyond_the_gate(tmp_path, toy_dir, capsys):
    body = f"""
tournaments: [{toy_dir}]
agents: [random]
seeds: 1
rewards: [{{name: gated_rank, coefficients: {{lambda_e: 3.5}}}}]
bootstrap: 50
plots: false
"""
    assert main(["sweep", str(_write_config(tmp_path, body)), "--out", str(tmp_path / "refused")]) == 2
    assert "sweep config: allow_ungated: true" in capsys.readouterr().err
    path = _write_config(tmp_path, body + "allow_ungated: true\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "toy__gated_rank__lambda_e=3.5" / "results.json").read_text()
    assert '"allow_ungated": true' in table


def _cells(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.glob("*/cells/*.json")}


@pytest.mark.slow
def test_driver_killed_mid_sweep_reruns_only_the_missing_cells(tmp_path, toy_dir):
    path = _write_config(tmp_path, f"""
tournaments: [{toy_dir}]
agents: [{{test-busy: {{seconds: 1.5}}}}, random]
seeds: 2
rewards: [{{name: gated_rank, grid: {{lambda_e: [0.1, 0.3]}}}}]
imports: [cluster_helpers]
executor: process
workers: 2
bootstrap: 50
plots: false
""")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}
    command = [sys.executable, "-m", "routing_gym", "sweep", str(path), "--out", str(out)]
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while len(_cells(out)) < 3 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = _cells(out)
    assert 3 <= len(before) < 8, "the driver should die mid-sweep"
    assert not (out / "combined.csv").exists()

    rerun = subprocess.run(command[:-2] + ["--out", str(out), "--executor", "local"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(before)} of 8 cells already saved (resumed); running the other {8 - len(before)}" in rerun.stderr
    assert rerun.stderr.count(": ok in ") == 8 - len(before)
    after = _cells(out)
    assert len(after) == 8 and {k: after[k] for k in before} == before  # saved cells untouched
    assert len(pd.read_csv(out / "combined.csv")["setting"].unique()) == 2
