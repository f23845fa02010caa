"""An offline mini-tournament: SmolLM2 answers real GSM8K and ARC questions in process."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.collect import config_from_dict
from routing_gym.collect.convert import records_to_tournament
from routing_gym.collect.records import read_records
from routing_gym.collect.runner import run_collection


@pytest.mark.slow
def test_smollm2_mini_tournament_is_graded_and_loads_in_routing_env(tmp_path, data_dir):
    from routing_gym.envs import RoutingEnv
    from routing_gym.tournament import Tournament

    smol = {"backend": "transformers", "name": "smollm2-135m-instruct", "family": "smollm2", "params_b": 0.135}
    config = config_from_dict({
        "name": "offline-smollm2",
        "seed": 0,
        "benchmarks": [{"name": "gsm8k", "n": 2}, {"name": "arc_challenge", "n": 2}],
        # one model at two token budgets: two operating points to route between
        "models": [{"id": "smollm2-16tok", **smol}, {"id": "smollm2-6tok", **smol, "options": {"num_predict": 6}}],
        "generation": {"num_predict": 16},
        "energy": {"meter": "replay", "idle_window_s": 2.0},
        "warmup": {"calls": 1},
    })
    summary = run_collection(config, tmp_path / "run", progress=False, data_dir=data_dir)
    assert summary.complete and summary.total_pairs == 8

    calls = [r for r in read_records(tmp_path / "run" / "records.jsonl").records if r["type"] == "call"]
    assert len(calls) == 8 and all(r["status"] == "ok" for r in calls)
    assert all(r["correct"] in (0.0, 1.0) and r["grade_error"] is None for r in calls)  # graded by the shared graders
    short = [r for r in calls if r["model_id"] == "smollm2-6tok"]
    assert all(1 <= r["output_tokens"] <= 6 for r in short) and any(r["done_reason"] == "length" for r in short)
    assert all(r["input_tokens"] > 20 and r["output_text"] for r in calls)
    assert {r["digest"] for r in calls} == {"sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}

    t = records_to_tournament(tmp_path / "run")
    assert (t.n_queries, t.n_models) == (4, 2) and t.benchmarks == ["arc_challenge", "gsm8k"]
    assert set(t.models["energy_provenance"]) == {"synthetic"}
    assert np.all(t.latency_s > 0) and np.all(t.energy_j >= 0)
    t.save(tmp_path / "tournament")
    env = RoutingEnv(tournament=Tournament.load(tmp_path / "tournament"), split="all", order="sequential")
    env.reset(seed=0)
    seen = []
    for _ in range(t.n_queries):
        _, reward, terminated, _, info = env.step(1)
        seen.append(info["query_id"])
        assert terminated and np.isfinite(reward)
        env.reset()
    assert sorted(seen) == sorted(t.query_ids)
