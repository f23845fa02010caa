"""``collect run --ray``: two shard actors answer their own models in process (no server),
metered by the replay meter; the driver alone writes the log. Killed with SIGKILL midway and
run again, the log ends with every one of the 60 pairs exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from routing_gym.cli import main
from routing_gym.collect import ConfigError, config_from_dict
from routing_gym.collect.records import read_records

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
MODELS = {"a": ["good-a", "bad-a"], "b": ["good-b", "bad-b"]}
N_QUESTIONS = 15


def _config(tmp_path: Path) -> Path:
    questions = tmp_path / "arith.jsonl"
    questions.write_text("".join(json.dumps({"query_id": f"q{i}", "prompt": f"What is {i} + {i + 4}?",
                                             "reference": str(2 * i + 4)}) + "\n" for i in range(N_QUESTIONS)))
    config = {
        "name": "ray-shards",
        "benchmarks": [{"name": "arith", "path": str(questions), "grader": "gsm8k"}],
        "models": [{"id": m, "params_b": 1.0} for shard in MODELS.values() for m in shard],
        "energy": {"meter": "replay", "idle_window_s": 0.2},
        "shards": [{"name": name, "models": models} for name, models in MODELS.items()],
    }
    path = tmp_path / "collect.json"
    path.write_text(json.dumps(config))
    return path


def _ok_pairs(run: Path) -> list[tuple[str, str, str]]:
    return [(r["query_id"], r["model_id"], r["shard"]) for r in read_records(run / "records.jsonl").records
            if r.get("type") == "call" and r.get("status") == "ok"]


def test_shards_must_cover_every_model_once():
    base = {"name": "x", "benchmarks": ["gsm8k"], "models": ["m1", "m2"]}
    with pytest.raises(ConfigError, match=r"shards\[1\]\.models\[0\]: model 'm1' is already answered by shard 'a'"):
        config_from_dict({**base, "shards": [{"name": "a", "models": ["m1"]}, {"name": "b", "models": ["m1", "m2"]}]})
    with pytest.raises(ConfigError, match=r"shards: model\(s\) \['m2'\] are in no shard"):
        config_from_dict({**base, "shards": [{"name": "a", "models": ["m1"]}]})
    with pytest.raises(ConfigError, match=r"shards\[0\]\.models\[0\]: unknown model id 'm3'"):
        config_from_dict({**base, "shards": [{"name": "a", "models": ["m3", "m1", "m2"]}]})


@pytest.mark.slow
def test_driver_killed_midway_then_rerun_records_every_pair_once(ray_local, tmp_path, capsys):
    config, run = _config(tmp_path), tmp_path / "run"
    address = ray_local.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)]), "RG_TEST_CALL_S": "0.1"}
    command = [sys.executable, "-m", "routing_gym", "collect", "run", str(config), "--out", str(run), "--ray",
               "--ray-address", address, "--backend-factory", "cluster_helpers:arithmetic_backends", "--no-progress"]
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and driver.poll() is None:
        if (run / "records.jsonl").exists() and len(_ok_pairs(run)) >= 20:
            break
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    first = _ok_pairs(run)
    assert 20 <= len(first) < 60, "the driver should die midway"

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "60/60 pairs done" in rerun.stdout
    pairs = _ok_pairs(run)
    counts = Counter((q, m) for q, m, _ in pairs)
    assert len(counts) == 60 and max(counts.values()) == 1  # none lost, none duplicated
    assert pairs[:len(first)] == first  # the first run's records are kept as they were
    for q, m, shard in pairs:  # each model answered only by its own shard
        assert m in MODELS[shard]
    records = read_records(run / "records.jsonl").records
    sessions = [r for r in records if r["type"] == "session"]
    assert sorted(r["shard"] for r in sessions) == ["a", "a", "b", "b"] and {r["meter"] for r in sessions} == {"replay"}
    assert all(r["correct"] == (1.0 if r["model_id"].startswith("good") else 0.0)
               for r in records if r["type"] == "call")

    assert main(["collect", "status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "ray-shards: 60/60 pairs" in out
    assert "shard a on" in out and "30/30 pairs of good-a, bad-a done" in out
    assert "30/30 pairs of good-b, bad-b done" in out and "WARNING" not in out
