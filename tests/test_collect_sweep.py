"""``collect sweep`` against the loopback server of ``collect_server``: it decodes like a batching
server (each output token takes longer with more requests in flight), so the sweep's N in flight,
its time per token and its energy attribution can be checked; then resume after ``kill -9`` and
the config's errors."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest
from collect_server import REPO, FakeOllama, calls_of, kill_9_when, make_config, rerun

from routing_gym.collect import ConfigError, config_from_dict, load_config
from routing_gym.collect.records import read_records
from routing_gym.collect.sweep import BATCH_CURVE_COLUMNS, run_sweep

# the column list of the batch-curve contract (issue 62's BATCHCURVES.md), spelled out here
CONTRACT = ["model_id", "gpu", "n_gpus", "batch_size", "time_per_output_token_s", "power_w", "energy_per_request_j",
            "output_tokens_mean", "provenance", "source", "idle_power_w"]
PER_TOKEN_S = 0.003  # the loopback server's seconds per output token per request in flight


def sweep_data(tmp_path: Path, url: str, concurrency=(1, 2, 4), watts: float = 200.0, **overrides) -> dict:
    """One model, a flat power trace (so every joule is known), N = ``concurrency``;
    requests per level max(6, 3 N): 6, 6, 12."""
    trace = tmp_path / "flat.csv"
    trace.write_text(f"t_s,power_w\n0,{watts}\n3600,{watts}\n")
    data = make_config(tmp_path, url, models=("good:7b",), energy={"meter": "replay", "trace": str(trace)}, **overrides)
    data["sweep"] = {"concurrency": list(concurrency), "rounds": 3, "min_requests": 6}
    return data


def requests_of(out: Path, status: str | None = "ok") -> list[dict]:
    return calls_of(out, status, kind="request", log="requests.jsonl")


def table(out: Path) -> tuple[list[str], list[dict]]:
    with open(out / "batch_curves.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture
def server():
    fake = FakeOllama()
    fake.token_s = lambda in_flight: PER_TOKEN_S * in_flight
    yield fake
    fake.stop()


def test_ollama_sweep_keeps_n_in_flight_and_writes_the_batch_curve_table(tmp_path, server):
    config = config_from_dict(sweep_data(tmp_path, server.url))
    summary = run_sweep(config, tmp_path / "sweep", progress=False)
    assert summary.complete and summary.total == 24 and summary.done_now == 24 and summary.notes == []

    # the server saw exactly N at once at each level, never more (after the one warm-up call)
    arrivals = server.arrivals[1:]
    assert len(arrivals) == 24
    assert [max(arrivals[:6]), max(arrivals[6:12]), max(arrivals[12:])] == [1, 2, 4]

    records = requests_of(tmp_path / "sweep")
    assert sorted((r["concurrency"], r["request"]) for r in records) == sorted(
        [(1, r) for r in range(6)] + [(2, r) for r in range(6)] + [(4, r) for r in range(12)])
    for n, count in ((1, 6), (2, 6), (4, 12)):
        level = [r for r in records if r["concurrency"] == n]
        assert max(r["in_flight_at_start"] for r in level) == n
        steady = [r for r in level if r["steady"]]
        assert len(steady) == count - n + 1  # the last N-1 ran while the level drained
        assert statistics.fmean(r["mean_in_flight"] for r in steady) > n - 0.5
        # the idle baseline (flat 200 W) takes every joule: net is zero, gross = 200 W x the wall share
        for r in level:
            e = r["energy"]
            assert e["meter"] == "replay" and e["idle_w"] == pytest.approx(200.0)
            assert e["gross_j"] == pytest.approx(200.0 * e["wall_share_s"], rel=1e-6)
            assert e["net_j"] == pytest.approx(0.0, abs=1e-6)
    idle = [r for r in read_records(tmp_path / "sweep" / "requests.jsonl").records if r["type"] == "idle"]
    assert [(r["model_id"], r["idle_w"]) for r in idle] == [("good", pytest.approx(200.0))]

    header, rows = table(tmp_path / "sweep")
    assert header == CONTRACT and list(BATCH_CURVE_COLUMNS) == CONTRACT
    assert [(r["model_id"], int(r["batch_size"])) for r in rows] == [("good", 1), ("good", 2), ("good", 4)]
    by_n = {int(r["batch_size"]): r for r in rows}
    for n, row in by_n.items():
        steady = [r for r in records if r["concurrency"] == n and r["steady"]]
        assert row["provenance"] == "synthetic" and row["gpu"] == "none (replayed power trace)" and row["n_gpus"] == "1"
        assert "requests.jsonl" in row["source"] and "server-decode" in row["source"]
        # units: W, J per request = W x s / N, s per token, tokens
        assert float(row["power_w"]) == pytest.approx(200.0, rel=0.05)
        assert float(row["idle_power_w"]) == pytest.approx(200.0)
        mean_latency = statistics.fmean(r["latency_s"] for r in steady)
        assert float(row["energy_per_request_j"]) == pytest.approx(200.0 * mean_latency / n, rel=0.1)
        assert float(row["output_tokens_mean"]) == pytest.approx(statistics.fmean(r["output_tokens"] for r in steady))
        # seconds per token: the server's decode time (Ollama's eval_duration) over its output tokens
        tpot = float(row["time_per_output_token_s"])
        assert tpot == pytest.approx(statistics.fmean(r["server"]["eval_duration_s"] / r["output_tokens"] for r in steady))
        assert PER_TOKEN_S <= tpot <= PER_TOKEN_S * n * 3
    tpots = [float(by_n[n]["time_per_output_token_s"]) for n in (1, 2, 4)]
    print("time per token at N = 1, 2, 4:", tpots)
    assert tpots[0] < tpots[1] < tpots[2] and tpots[2] > 2 * tpots[0]

    # a rerun finds nothing to do and rewrites the same table
    again = run_sweep(config, tmp_path / "sweep", progress=False, log=lambda msg: None)
    assert again.done_now == 0 and again.complete and table(tmp_path / "sweep")[1] == rows


def test_openai_compatible_server_with_the_nvml_counter_gives_measured_rows(tmp_path, server):
    from routing_gym.collect.meters import NvmlCounterMeter
    from routing_gym.collect.replay import PowerTrace, TraceNVML

    data = sweep_data(tmp_path, server.url, concurrency=(1, 3))
    data["models"][0]["backend"] = "openai"
    data["server"]["openai_base_url"] = server.url + "/v1"
    data["energy"] = {"meter": "nvml-counter", "idle_window_s": 0.2}
    trace = PowerTrace([0.0, 3600.0], [180.0, 180.0], name="flat")
    # the project's NVML stand-in answers the real meter's calls from a trace (1 ms counter updates)
    meter = NvmlCounterMeter(nvml=TraceNVML(trace, name="NVIDIA H100 80GB HBM3", counter_period_s=0.001), idle_step_s=0.05)
    try:
        summary = run_sweep(config_from_dict(data), tmp_path / "sweep", progress=False, meter=meter)
    finally:
        meter.close()
    assert summary.complete and summary.total == 6 + 9
    chats = [r for r in server.requests if r["path"] == "/v1/chat/completions" and "ready" not in r["messages"][-1]["content"]]
    assert len(chats) == 15 and max(server.arrivals[1 + 6:]) == 3
    header, rows = table(tmp_path / "sweep")
    assert header == CONTRACT and [int(r["batch_size"]) for r in rows] == [1, 3]
    for row in rows:
        assert row["provenance"] == "measured" and row["gpu"] == "NVIDIA H100 80GB HBM3" and row["n_gpus"] == "1"
        assert "client-latency" in row["source"]  # no server decode time over the OpenAI API
        assert float(row["power_w"]) == pytest.approx(180.0, rel=0.1)
        assert float(row["idle_power_w"]) == pytest.approx(180.0, rel=0.05)
    one, three = (float(r["time_per_output_token_s"]) for r in rows)
    assert three > 1.5 * one


def test_without_a_power_reading_there_are_no_energy_rows(tmp_path, server):
    data = sweep_data(tmp_path, server.url, concurrency=(1, 2))
    data["energy"] = {"meter": "none"}
    summary = run_sweep(config_from_dict(data), tmp_path / "sweep", progress=False)
    assert summary.complete and summary.rows == []
    assert len(summary.notes) == 2 and all("energy unmeasured (meter none)" in note for note in summary.notes)
    assert table(tmp_path / "sweep") == (CONTRACT, [])
    for r in requests_of(tmp_path / "sweep"):
        assert r["energy"]["measured"] is False and r["energy"]["gross_j"] is None and r["latency_s"] > 0
        assert r["tpot_s"] > 0  # latencies are still recorded


def test_bad_sweep_config_names_the_field(tmp_path, server):
    from routing_gym.cli import main

    base = sweep_data(tmp_path, server.url)
    cases = [
        ({"concurrency": [1, 0]}, r"sweep.concurrency\[1\]: must be >= 1, got 0"),
        ({"concurrency": [2, 2]}, r"sweep.concurrency: each N once"),
        ({"concurrency": "4"}, r"sweep.concurrency: expected a list"),
        ({"concurrency": [1], "models": ["nope"]}, r"sweep.models\[0\]: unknown model id 'nope'"),
        ({"concurrency": [1], "rounds": 0}, r"sweep.rounds: must be >= 1"),
        ({"concurency": [1]}, r"sweep: unknown key\(s\) \['concurency'\]"),
    ]
    path = tmp_path / "bad.json"
    for sweep, message in cases:
        path.write_text(json.dumps({**base, "sweep": sweep}))
        with pytest.raises(ConfigError, match=rf"bad.json: {message}"):
            load_config(path)
    path.write_text(json.dumps({**base, "sweep": {}}))
    with pytest.raises(ConfigError, match=r"bad.json: sweep.concurrency: list the numbers of requests in flight"):
        run_sweep(load_config(path), tmp_path / "none", progress=False)
    local = {**base, "models": [*base["models"], {"id": "local", "backend": "transformers", "name": "smollm2-135m-instruct"}]}
    path.write_text(json.dumps(local))
    with pytest.raises(ConfigError, match=r"models\[1\].backend: model 'local' has backend 'transformers'.*sweep.models"):
        run_sweep(load_config(path), tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()  # refused before anything was written
    path.write_text(json.dumps(base))
    assert main(["collect", "sweep", str(path), "--out", str(tmp_path / "x"), "--concurrency", "1,x"]) == 2
    assert main(["collect", "sweep", str(path), "--out", str(tmp_path / "x"), "--concurrency", "0"]) == 2
    example = load_config(REPO / "experiments" / "collect_example.yaml")
    assert example.sweep.concurrency and example.sweep.requests(max(example.sweep.concurrency)) >= max(example.sweep.concurrency)


@pytest.mark.slow
def test_kill_9_mid_sweep_then_resume_has_every_request_once(tmp_path, server):
    server.token_s = lambda in_flight: 0.01 * in_flight  # slow enough to be killed mid-level
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep_data(tmp_path, server.url)))
    out = tmp_path / "sweep"
    cmd = kill_9_when(["collect", "sweep", str(path), "--out", str(out), "--no-progress"],
                      lambda: (out / "requests.jsonl").exists() and len(requests_of(out)) >= 9)
    before = requests_of(out)
    assert 9 <= len(before) < 24
    assert table(out)[1] and int(table(out)[1][-1]["batch_size"]) < 4  # finished levels only

    result = rerun(cmd)
    assert result.returncode == 0, result.stderr
    assert "24/24 requests done" in result.stdout and "3 batch-curve row(s)" in result.stdout
    after = requests_of(out)
    keys = [(r["model_id"], r["concurrency"], r["request"]) for r in after]
    assert len(keys) == 24 and set(keys) == {("good", n, r) for n, k in ((1, 6), (2, 6), (4, 12)) for r in range(k)}
    assert after[: len(before)] == before  # nothing answered before the kill was lost or changed
    assert len({r["session"] for r in after}) == 2
    assert [int(r["batch_size"]) for r in table(out)[1]] == [1, 2, 4]


def test_a_request_that_fails_every_attempt_is_recorded_and_sent_again_on_resume(tmp_path, server):
    config = config_from_dict(sweep_data(tmp_path, server.url, concurrency=(1, 2), retry={"max_attempts": 2}))
    server.plan = [None, 500, "malformed"]  # the warm-up, then both attempts of N=1's request 0
    summary = run_sweep(config, tmp_path / "sweep", progress=False, sleep=lambda s: None)
    assert not summary.complete and summary.failed_now == 1 and summary.done_now == 11
    (failed,) = requests_of(tmp_path / "sweep", "failed")
    assert (failed["concurrency"], failed["request"], failed["attempts"]) == (1, 0, 2)
    assert "HTTP 500" in failed["errors"][0] and "MalformedResponse" in failed["errors"][1]
    assert [int(r["batch_size"]) for r in table(tmp_path / "sweep")[1]] == [2]  # no row from part of a level

    resumed = run_sweep(config, tmp_path / "sweep", progress=False)
    assert resumed.complete and resumed.done_now == 1
    ok = requests_of(tmp_path / "sweep")
    assert len(ok) == 12 and len({(r["concurrency"], r["request"]) for r in ok}) == 12
    assert [int(r["batch_size"]) for r in table(tmp_path / "sweep")[1]] == [1, 2]
