"""experiments/measure_architectures.py on CPU: tiny configs, a real tournament, the replay meter."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from routing_gym.collect.replay import PowerTrace, ReplayMeter
from routing_gym.sources.energy_model import derive_energy_profiles
from routing_gym.sources.zeroeval import OPEN_MODELS, build_zeroeval_tournament

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "measure_architectures.py"
POOL = ["gemma-2-2b-it", "Phi-3.5-mini-instruct", "Meta-Llama-3.1-8B-Instruct", "Yi-1.5-9B-Chat"]

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("measure_architectures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def small_tournament(data_dir, tmp_path_factory):
    t, _ = build_zeroeval_tournament(data_dir, POOL, benchmarks=("gsm8k",), limit=4, processes=1, keep_text=False,
                                     disable_progress=True)
    out = tmp_path_factory.mktemp("zeroeval-small")
    t.save(out)
    return t, out


def test_configs_have_the_published_parameter_counts(script):
    from transformers import AutoModelForCausalLM

    for arch, (_, params_b, _) in script.ARCH_CONFIGS.items():
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(script.build_config(arch))
        assert sum(p.numel() for p in model.parameters()) / 1e9 == pytest.approx(params_b, rel=0.005), arch


def test_a_request_prefills_the_prompt_and_decodes_exactly_the_output_length(script):
    model = script.build_model("gemma-2-9b", tiny=True, device="cpu", dtype="float32")
    calls = []
    model.register_forward_hook(lambda mod, args, kwargs, out: calls.append(kwargs["input_ids"].shape[1]),
                                with_kwargs=True)
    script.run_request(model, 37, 12, torch.Generator().manual_seed(0))
    assert calls == [37] + [1] * 11  # one prefill that yields token 1, then 11 decode steps


class RecordingReplay(ReplayMeter):
    """The replay meter, keeping each call window (clock and trace times) for the check."""

    def __init__(self, trace: PowerTrace) -> None:
        super().__init__(trace, loop=False)
        self.windows: list[tuple[float, float, float, float]] = []

    def _on_stop(self, t0, t1):
        # trace time at the call: idle windows in between shift it later
        self.windows.append((t0, t1, self.trace_time(t0), self.trace_time(t1)))
        return super()._on_stop(t0, t1)


def test_calibration_joules_are_the_trace_integral_over_each_call(script, small_tournament):
    t, _ = small_tournament
    pairs, skipped = script.sample_pairs(t, 6, seed=3)
    assert skipped == 0 and len(pairs) == 6 and pairs == script.sample_pairs(t, 6, seed=3)[0]
    assert "Yi-1.5-9B-Chat" not in {p.model_id for p in pairs}  # no configured architecture
    times = np.arange(0.0, 600.0, 0.05)
    trace = PowerTrace(times, 150 + 80 * np.sin(times * 9.0) + 20 * (times % 1.3), name="test-trace")
    meter = RecordingReplay(trace)
    table = script.measure(pairs, meter, tiny=True, device="cpu", dtype="float32", idle_s=0.5, log=lambda m: None)
    assert len(table) == len(meter.windows) == 6
    for row, (t0, t1, a, b) in zip(table.itertuples(), meter.windows):
        pair = next(p for p in pairs if (p.query_id, p.model_id) == (row.query_id, row.model_id))
        assert (row.prompt_tokens, row.output_tokens) == (pair.prompt_tokens, pair.output_tokens)
        k, i = t.model_index(row.model_id), t.query_ids.index(row.query_id)
        assert row.output_tokens == t.output_tokens[i, k] and row.prompt_tokens == t.input_tokens[i, k]
        assert row.gross_joules == pytest.approx(trace.integral(a, b), rel=1e-9) and b - a == pytest.approx(t1 - t0)
        assert row.seconds == pytest.approx(t1 - t0)
        assert row.joules == pytest.approx(max(row.gross_joules - row.idle_w * row.seconds, 0.0))
    assert set(table["meter"]) == {"replay"} and set(table["config"]) == {"tiny"}
    assert set(table["params_b"]) <= {2.61, 3.82, 8.03}  # the architectures' published sizes, not the tiny ones


def test_script_end_to_end_writes_a_table_and_a_law_the_builder_uses(small_tournament, tmp_path):
    t, directory = small_tournament
    out = tmp_path / "cal"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--tournament", str(directory), "--pairs", "9", "--tiny",
                           "--meter", "replay", "--idle-s", "0.2", "--architectures", "gemma-2-2b", "llama-3.1-8b",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    law = json.loads((out / "energy_law.json").read_text())
    assert law["meter"] == "replay" and set(law["architectures"]) == {"gemma-2-2b", "llama-3.1-8b"}
    profiles, info = derive_energy_profiles(f"measured-arch:{out / 'calibration.csv'}", POOL, specs=OPEN_MODELS)
    assert info["provenance"] == "synthetic"
    assert profiles["gemma-2-2b-it"].method == "measured-architecture"
    assert profiles["gemma-2-2b-it"].joules_per_output_token == pytest.approx(
        law["architectures"]["gemma-2-2b"]["joules_per_output_token"])
    assert profiles["Yi-1.5-9B-Chat"].method == "measured-architecture-power-law-fit"
