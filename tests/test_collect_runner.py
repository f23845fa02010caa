"""The collector end to end against a real loopback HTTP server that speaks Ollama's API
(``collect_server.FakeOllama``, shared with the sweep's tests)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from collect_server import DIGESTS, FakeOllama, calls_of, kill_9_when, make_config, rerun

from routing_gym.collect import CollectError, ConfigError, config_from_dict, load_config
from routing_gym.collect.convert import records_to_tournament
from routing_gym.collect.records import RecordLog, read_records
from routing_gym.collect.runner import run_collection, run_status

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def server():
    fake = FakeOllama()
    yield fake
    fake.stop()


def test_full_run_produces_a_valid_tournament(tmp_path, server):
    from routing_gym.envs import RoutingEnv
    from routing_gym.tournament import Tournament

    config = config_from_dict(make_config(tmp_path, server.url))
    summary = run_collection(config, tmp_path / "run", progress=False)
    assert summary.complete and summary.total_pairs == 20 and summary.done_now == 20
    assert summary.joules > 0

    records = calls_of(tmp_path / "run")
    assert len(records) == 20
    good = [r for r in records if r["model_id"] == "good"]
    assert {r["digest"] for r in good} == {DIGESTS["good:7b"]}
    assert all(r["done_reason"] == "stop" and r["server"]["eval_duration_s"] == pytest.approx(0.2) for r in records)
    assert all(r["output_tokens"] == len(r["output_text"].split()) for r in records)
    assert all(r["energy"]["measured"] and r["energy"]["net_j"] >= 0 and r["energy"]["meter"] == "replay" for r in records)
    idle = [r for r in read_records(tmp_path / "run" / "records.jsonl").records if r["type"] == "idle"]
    assert [r["model_id"] for r in idle] == ["good", "bad"]  # re-measured per model, after warm-up

    # the server saw deterministic decoding settings and the keep-alive
    chats = [r for r in server.requests if r["path"] == "/api/chat"]
    assert all(r["options"]["temperature"] == 0 and r["options"]["seed"] == 11 and r["options"]["num_predict"] == 64
               and r["options"]["num_ctx"] == 2048 and r["keep_alive"] == "5m" for r in chats)
    loads = [r for r in server.requests if r["path"] == "/api/generate" and not r.get("prompt")]
    assert [r["model"] for r in loads] == ["good:7b", "bad:1b"]
    assert len(chats) == 20 + 2  # plus one warm-up call per model

    t = records_to_tournament(tmp_path / "run")
    assert (t.n_queries, t.n_models) == (10, 2)
    assert t.model_ids == ["good", "bad"]
    np.testing.assert_array_equal(t.correct[:, 0], 1.0)
    np.testing.assert_array_equal(t.correct[:, 1], 0.0)
    assert set(t.models["energy_provenance"]) == {"synthetic"}  # a replayed trace is not a measurement
    assert t.models["serving"][0]["digest"] == DIGESTS["good:7b"]
    assert t.models["serving"][0]["quantization"] == "Q4_K_M"
    assert "replayed trace" in t.card.hardware
    assert np.all(t.energy_j >= 0) and np.all(t.latency_s > 0)
    t.save(tmp_path / "tournament")
    loaded = Tournament.load(tmp_path / "tournament")
    np.testing.assert_allclose(loaded.energy_j, t.energy_j)
    env = RoutingEnv(tournament=loaded, split="all")
    obs, info = env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(0)
    assert terminated and not truncated and np.isfinite(reward)


def test_generate_endpoint_and_openai_compatible_server(tmp_path, server):
    data = make_config(tmp_path, server.url, generation={"api": "generate", "system_prompt": "Be brief."})
    data["models"][1]["backend"] = "openai"
    data["server"]["openai_base_url"] = server.url + "/v1"
    config = config_from_dict(data)
    summary = run_collection(config, tmp_path / "run", progress=False)
    assert summary.complete
    paths = {r["path"] for r in server.requests if r.get("prompt") or r.get("messages")}
    assert paths == {"/api/generate", "/v1/chat/completions"}
    gen = [r for r in server.requests if r["path"] == "/api/generate" and r.get("prompt") and "ready" not in r["prompt"]]
    assert len(gen) == 10 and all(r["system"] == "Be brief." for r in gen)
    oai = [r for r in server.requests if r["path"] == "/v1/chat/completions" and "ready" not in r["messages"][-1]["content"]]
    assert len(oai) == 10
    assert all(r["messages"][0] == {"role": "system", "content": "Be brief."} and r["max_tokens"] == 64 and r["temperature"] == 0 for r in oai)
    t = records_to_tournament(tmp_path / "run")
    assert t.correct[:, t.model_index("good")].mean() == 1.0
    bad = [r for r in calls_of(tmp_path / "run") if r["model_id"] == "bad"]
    assert all(r["input_tokens"] > 0 and r["done_reason"] == "stop" for r in bad)


def test_server_errors_are_retried_with_backoff_and_recorded(tmp_path, server):
    waits: list[float] = []
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), warmup={"calls": 0},
                                          retry={"max_attempts": 5}))
    server.plan = [500, "malformed", "drop", "incomplete"]
    summary = run_collection(config, tmp_path / "run", progress=False, sleep=waits.append)
    assert summary.complete and summary.failed_now == 0
    first = calls_of(tmp_path / "run")[0]
    assert first["attempts"] == 5 and first["correct"] == 1.0
    kinds = " | ".join(first["errors"])
    assert "HTTP 500" in kinds and "MalformedResponse" in kinds and "broke" in kinds and "incomplete" in kinds
    assert waits == [0.01, 0.02, 0.04, 0.05]  # exponential backoff, capped


def test_a_pair_that_fails_every_attempt_is_recorded_and_retried_on_resume(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), warmup={"calls": 0},
                                          retry={"max_attempts": 2}))
    server.plan = [503, 503]
    summary = run_collection(config, tmp_path / "run", progress=False, sleep=lambda s: None)
    assert not summary.complete and summary.failed_now == 1 and summary.done == 9
    failed = calls_of(tmp_path / "run", "failed")
    assert len(failed) == 1 and failed[0]["attempts"] == 2 and failed[0]["error_kind"] == "transient"
    assert run_status(tmp_path / "run")["done_pairs"] == 9
    with pytest.raises(CollectError, match="1 of 10 pairs have no answer"):
        records_to_tournament(tmp_path / "run")

    summary = run_collection(config, tmp_path / "run", progress=False)
    assert summary.complete and summary.done_now == 1
    ok = calls_of(tmp_path / "run")
    assert len(ok) == 10 and len({(r["query_id"], r["model_id"]) for r in ok}) == 10
    assert len(calls_of(tmp_path / "run", "failed")) == 1  # the failure stays in the log
    records_to_tournament(tmp_path / "run")


def test_model_not_pulled_stops_before_anything_is_measured(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b", "qwen3:32b")))
    with pytest.raises(CollectError, match=r"ollama pull qwen3:32b") as exc:
        run_collection(config, tmp_path / "run", progress=False)
    assert "pulled: bad:1b, good:7b" in str(exc.value)
    assert calls_of(tmp_path / "run", None) == []
    assert not [r for r in server.requests if r["path"] == "/api/chat"]


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_nothing_listening_is_a_clear_error(tmp_path, backend):
    data = make_config(tmp_path, "http://127.0.0.1:9", models=("good:7b",), retry={"max_attempts": 1})
    data["models"][0]["backend"] = backend
    data["server"]["openai_base_url"] = "http://127.0.0.1:9/v1"
    config = config_from_dict(data)
    with pytest.raises(CollectError, match=r"cannot start: .*(no Ollama server|nothing) answers at http://127.0.0.1:9"):
        run_collection(config, tmp_path / "run", progress=False)


def test_server_dying_mid_run_stops_and_resume_completes(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, retry={"max_attempts": 2}))
    port = server.port
    server.after_call = lambda n: n == 6 and server.stop()  # 1 warm-up + 5 answers, then gone
    with pytest.raises(CollectError, match=r"stopping: 2 pairs in a row failed.*5/20 pairs are saved.*rerun") as exc:
        run_collection(config, tmp_path / "run", progress=False, sleep=lambda s: None)
    assert "no Ollama server answers" in str(exc.value)
    assert len(calls_of(tmp_path / "run")) == 5
    assert len(calls_of(tmp_path / "run", "failed")) == 2

    revived = FakeOllama(port=port)
    try:
        summary = run_collection(config, tmp_path / "run", progress=False)
    finally:
        revived.stop()
    assert summary.complete and summary.done_before == 5 and summary.done_now == 15
    ok = calls_of(tmp_path / "run")
    assert len(ok) == 20 and len({(r["query_id"], r["model_id"]) for r in ok}) == 20


def test_model_removed_mid_run_is_skipped_others_go_on(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url))
    messages: list[str] = []
    server.after_call = lambda n: n == 4 and server.models.pop("good:7b")
    summary = run_collection(config, tmp_path / "run", progress=False, log=messages.append)
    assert "good" in summary.skipped_models and "not found" in summary.skipped_models["good"]
    assert summary.done == 3 + 10  # 3 good answers before removal, every bad one
    assert any("skipping the rest of model good" in m for m in messages)
    t = records_to_tournament(tmp_path / "run", allow_partial=True)
    assert t.n_queries == 3 and t.card.extra["dropped_incomplete_queries"] == 7


def test_grader_exception_keeps_the_answer_and_grades_at_conversion(tmp_path, server):
    from routing_gym.grading import get_grader

    def flaky(output, reference, metadata):
        if reference == "12":
            raise RuntimeError("grader bug")
        return get_grader("gsm8k").grade(output, reference, metadata)

    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",)))
    summary = run_collection(config, tmp_path / "run", progress=False, graders={"arith": flaky})
    assert summary.complete
    broken = [r for r in calls_of(tmp_path / "run") if r["correct"] is None]
    assert len(broken) == 1 and broken[0]["grade_error"] == "RuntimeError: grader bug"
    assert broken[0]["output_text"] and broken[0]["energy"]["net_j"] is not None  # nothing measured is lost
    assert run_status(tmp_path / "run")["ungraded"] == 1
    with pytest.raises(CollectError, match="cannot be graded.*grader bug"):
        records_to_tournament(tmp_path / "run", graders={"arith": flaky})
    t = records_to_tournament(tmp_path / "run")  # the registry's gsm8k grader works
    assert t.correct.mean() == 1.0


def test_bad_config_names_the_file_and_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "x", "benchmarks": ["gsm8k"], "models": [{"id": "m", "params_b": "seven"}]}))
    with pytest.raises(ConfigError, match=r"bad.json: models\[0\].params_b: expected a number, got 'seven'"):
        load_config(path)
    path.write_text(json.dumps({"name": "x", "benchmarks": ["gsm8k"], "models": ["m"], "energy": {"meterr": "auto"}}))
    with pytest.raises(ConfigError, match=r"energy: unknown key\(s\) \['meterr'\]"):
        load_config(path)
    yaml_path = tmp_path / "ok.yaml"
    yaml_path.write_text("name: y\nbenchmarks:\n  - {name: arith, path: q.jsonl, n: 2}\nmodels: ['llama3.2:1b']\n")
    config = load_config(yaml_path)
    assert config.models[0].served_name == "llama3.2:1b" and config.benchmarks[0].path == str(tmp_path / "q.jsonl")
    toml_path = tmp_path / "ok.toml"
    toml_path.write_text('name = "z"\nbenchmarks = ["gsm8k"]\nmodels = ["m"]\n[energy]\nmeter = "banana"\n')
    with pytest.raises(ConfigError, match="energy.meter: 'banana' is not one of"):
        load_config(toml_path)
    example = load_config(REPO / "experiments" / "collect_example.yaml")
    assert example.energy.meter == "auto" and len(example.models) >= 2


def test_resume_with_a_different_config_is_refused(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",)))
    run_collection(config, tmp_path / "run", progress=False)
    changed = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), generation={"num_predict": 128}))
    with pytest.raises(CollectError, match=r"different config \(generation.num_predict: 64 -> 128\)"):
        run_collection(changed, tmp_path / "run", progress=False)
    moved = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), server={"ollama_host": server.url + "/"}))
    assert run_collection(moved, tmp_path / "run", progress=False).complete  # another host is fine


def test_changed_model_digest_is_refused_on_resume(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), retry={"max_attempts": 1}))
    server.plan = [None, None, 500]  # warm-up, one answer, then a failure
    run_collection(config, tmp_path / "run", progress=False)
    server.models["good:7b"] = "c" * 64  # re-pulled: different weights
    with pytest.raises(CollectError, match="digest"):
        run_collection(config, tmp_path / "run", progress=False)


def test_a_second_collector_on_the_same_folder_is_refused(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",)))
    (tmp_path / "run").mkdir()
    holder = RecordLog(tmp_path / "run" / "records.jsonl")
    holder.open()
    try:
        with pytest.raises(CollectError, match="another collector is writing"):
            run_collection(config, tmp_path / "run", progress=False)
    finally:
        holder.close()


def test_without_a_gpu_energy_is_unmeasured_never_zero(tmp_path, server):
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), energy={"meter": "auto"}))
    messages: list[str] = []
    summary = run_collection(config, tmp_path / "run", progress=False, log=messages.append)
    assert summary.complete and summary.unmeasured
    assert any("NVML Shared Library Not Found" in m and "unmeasured" in m for m in messages)
    for r in calls_of(tmp_path / "run"):
        assert r["energy"]["measured"] is False and r["energy"]["gross_j"] is None and r["energy"]["net_j"] is None
        assert r["latency_s"] > 0
    with pytest.raises(CollectError, match="was not measured .*NVML"):
        records_to_tournament(tmp_path / "run")


def test_cli_run_status_and_to_tournament(tmp_path, server, capsys):
    from routing_gym.cli import main

    path = tmp_path / "run.json"
    path.write_text(json.dumps(make_config(tmp_path, server.url)))
    assert main(["collect", "run", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert "20/20 pairs done" in capsys.readouterr().out
    assert main(["collect", "status", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "loopback: 20/20 pairs" in out and "meter replay" in out
    assert main(["collect", "to-tournament", str(tmp_path / "run"), "--dest", str(tmp_path / "t")]) == 0
    assert "10 questions x 2 models" in capsys.readouterr().out
    assert main(["data", "validate", str(tmp_path / "t")]) == 0
    assert main(["collect", "status", str(tmp_path / "nowhere")]) == 1


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode == 0


def test_full_disk_stops_the_run_and_loses_nothing(tmp_path, server, capfd):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mount_tmpfs(disk, "24k"):
        pytest.skip("needs root to mount a tiny tmpfs")
    try:
        data = make_config(tmp_path, server.url, models=("good:7b",))
        long_q = tmp_path / "long.jsonl"
        long_q.write_text("".join(json.dumps({"query_id": f"long-{i}", "prompt": f"long answer please {i}", "reference": "0"}) + "\n" for i in range(30)))
        data["benchmarks"] = [{"name": "long", "path": str(long_q), "grader": "gsm8k"}]
        config = config_from_dict(data)
        with pytest.raises(CollectError, match=r"ENOSPC.*disk is full.*rerun the same command"):
            run_collection(config, disk / "run", progress=False)
        assert "unsaved record" in capfd.readouterr().err
        saved = calls_of(disk / "run")
        assert 0 < len(saved) < 30
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
        summary = run_collection(config, disk / "run", progress=False)
        assert summary.complete and summary.done_before == len(saved)
        ok = calls_of(disk / "run")
        assert len(ok) == 30 and len({r["query_id"] for r in ok}) == 30
        assert ok[: len(saved)] == saved  # records from before the failure are untouched
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_keeps_exactly_one_record_per_pair(tmp_path):
    fake = FakeOllama(latency_s=0.03)
    try:
        path = tmp_path / "run.json"
        data = make_config(tmp_path, fake.url)
        path.write_text(json.dumps(data))
        out = tmp_path / "run"
        cmd = kill_9_when(["collect", "run", str(path), "--out", str(out), "--no-progress"],
                          lambda: (out / "records.jsonl").exists() and len(calls_of(out)) >= 7)
        before = calls_of(out)
        assert 7 <= len(before) < 20
        # a kill inside a write leaves a torn line: simulate the worst case on top
        with open(out / "records.jsonl", "ab") as handle:
            handle.write(b'{"type": "call", "status": "ok", "query_id": "mc-3", "model_')
        status = run_status(out)
        assert status["torn_tail_bytes"] > 0 and status["done_pairs"] == len(before)

        result = rerun(cmd)
        assert result.returncode == 0, result.stderr
        assert "20/20 pairs done" in result.stdout and "torn last line" in result.stderr
        after = calls_of(out)
        pairs = [(r["query_id"], r["model_id"]) for r in after]
        assert len(pairs) == 20 and len(set(pairs)) == 20
        assert after[: len(before)] == before  # nothing recorded before the kill was lost or changed
        assert (out / "records.jsonl.torn").read_bytes().startswith(b'{"type": "call"')
        records_to_tournament(out)
    finally:
        fake.stop()


def test_nvml_counter_meter_gives_measured_energy_and_records_the_hardware(tmp_path, server):
    from routing_gym.collect.meters import NvmlCounterMeter
    from routing_gym.collect.replay import PowerTrace, TraceNVML

    trace = PowerTrace([0.0, 3600.0], [180.0, 180.0], name="flat")
    # a 10 ms counter period keeps the short test calls' quantisation small (real GPUs: ~100 ms)
    meter = NvmlCounterMeter(nvml=TraceNVML(trace, name="NVIDIA H100 80GB HBM3", counter_period_s=0.01), idle_step_s=0.2)
    server.latency_s = 0.12
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), energy={"idle_window_s": 0.6}))
    try:
        summary = run_collection(config, tmp_path / "run", progress=False, meter=meter)
    finally:
        meter.close()
    assert summary.complete
    idle = [r for r in read_records(tmp_path / "run" / "records.jsonl").records if r["type"] == "idle"]
    assert idle[0]["idle_w"] == pytest.approx(180.0, rel=0.05) and idle[0]["meter"] == "nvml-counter"
    for r in calls_of(tmp_path / "run"):
        e = r["energy"]
        assert e["meter"] == "nvml-counter" and e["measured"]
        # flat load at the baseline: gross = 180 W x latency up to the counter's 100 ms steps at
        # both window edges; net is what is left above idle, never negative
        assert e["gross_j"] == pytest.approx(180.0 * e["latency_s"], abs=180.0 * 0.01 * 2 + 0.5)
        assert 0.0 <= e["net_j"] <= 180.0 * 0.01 * 2 + 0.5 + 0.1 * e["gross_j"]
    t = records_to_tournament(tmp_path / "run")
    assert list(t.models["energy_provenance"]) == ["measured"] and t.card.provenance == "measured"
    assert t.card.hardware.startswith("1x NVIDIA H100 80GB HBM3 (driver trace)")
    assert "nvml-counter" in t.models["energy_source"][0]


def test_gpu_lost_mid_run_stops_with_every_record_kept(tmp_path, server):
    import pynvml

    from routing_gym.collect.meters import NvmlCounterMeter
    from routing_gym.collect.replay import PowerTrace, TraceNVML

    fake = TraceNVML(PowerTrace([0.0, 3600.0], [150.0, 150.0]))
    meter = NvmlCounterMeter(nvml=fake, idle_step_s=0.1)
    config = config_from_dict(make_config(tmp_path, server.url, models=("good:7b",), energy={"idle_window_s": 0.2}))
    # the GPU falls off the bus while the 4th answer is generated (request 5, after one warm-up)
    server.before_call = lambda n: n == 5 and fake.fail.update(nvmlDeviceGetTotalEnergyConsumption=pynvml.NVMLError_GpuIsLost)
    try:
        with pytest.raises(CollectError, match=r"energy meter failed: reading the GPU energy counter failed \(NVMLError_GpuIsLost.*3/10 pairs are saved"):
            run_collection(config, tmp_path / "run", progress=False, meter=meter)
    finally:
        meter.close()
    assert len(calls_of(tmp_path / "run")) == 3
