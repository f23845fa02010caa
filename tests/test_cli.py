"""The routing-gym command line, run as a real subprocess where exit codes matter."""

from __future__ import annotations

import json
import subprocess
import sys

from routing_gym.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "routing_gym", *args], capture_output=True, text=True, timeout=120)


def test_data_info_prints_models_and_oracles(tmp_path, toy, capsys):
    toy.save(tmp_path / "t")
    assert main(["data", "info", str(tmp_path / "t"), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "N=60 queries x K=4 models" in out and "energy provenance: synthetic" in out
    assert "oracle (accuracy only: largest correct)" in out and "oracle (lambda_e=0.4: cheapest correct)" in out
    assert main(["data", "info", str(tmp_path / "t"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    accuracies = [row["accuracy"] for row in payload[toy.card.name]][: toy.n_models]
    assert accuracies == toy.correct.mean(axis=0).tolist()


def test_data_info_side_by_side(tmp_path, toy, capsys):
    toy.save(tmp_path / "a")
    assert main(["data", "info", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert "side by side:" in capsys.readouterr().out


def test_data_validate_exit_codes(tmp_path, toy):
    toy.save(tmp_path / "good")
    toy.save(tmp_path / "bad", format="jsonl")
    (tmp_path / "bad" / "models.jsonl").write_text('{"model_id": "m0"}\n')
    good = run_cli("data", "validate", str(tmp_path / "good"))
    assert good.returncode == 0 and "ok" in good.stdout
    bad = run_cli("data", "validate", str(tmp_path / "bad"))
    assert bad.returncode == 1
    assert "models.jsonl, column 'energy_provenance': required column is missing" in bad.stdout


def test_env_check_passes(tmp_path, toy):
    toy.save(tmp_path / "t")
    result = run_cli("env", "check", "--tournament", str(tmp_path / "t"), "--steps", "30")
    assert result.returncode == 0, result.stderr
    assert "check_env: passed" in result.stdout and "same seed, same trajectory over 30 steps: yes" in result.stdout


def test_errors_are_reported_without_tracebacks():
    result = run_cli("data", "info", "no-such-tournament")
    assert result.returncode == 2  # an unknown name is a usage error (README, "Exit status")
    assert "routing-gym data info: error: unknown tournament" in result.stderr and "Traceback" not in result.stderr
