"""Energy models of the derived tournaments: batched, batch-1 extrapolation, measured-architecture law."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from routing_gym.errors import RoutingGymError
from routing_gym.sources.energy_model import (
    BATCH1_FIT_MAX_BATCH,
    batch1_curves,
    derive_energy_profiles,
    fit_energy_law,
    load_calibration,
    parse_energy_model,
    tournament_name,
)
from routing_gym.sources.llmrouter import LLMROUTER_MODELS, build_llmrouter_tournament
from routing_gym.sources.zeroeval import build_zeroeval_tournament, energy_profiles

H100 = ("energy", "mlenergy_v2", "data", "llm_text_generation", "chat", "H100 80GB HBM3")


def test_parse_energy_model_names_and_errors(tmp_path):
    assert parse_energy_model("batched").suffix == ""
    assert tournament_name("zeroeval-math", "batch1") == "zeroeval-math-batch1"
    table = tmp_path / "cal.csv"
    table.write_text("x\n1\n")
    assert parse_energy_model(f"measured-arch:{table}").table == table
    assert tournament_name("llmrouter", f"measured-arch:{table}") == "llmrouter-measured-arch"
    with pytest.raises(RoutingGymError, match="--energy-model 'batch-1': unknown; choose one of batched, law, params, batch1"):
        parse_energy_model("batch-1")
    with pytest.raises(RoutingGymError, match="missing.csv' is not a file"):
        parse_energy_model(f"measured-arch:{tmp_path / 'missing.csv'}")


def test_batch1_extrapolation_matches_an_independent_fit_of_the_files(data_dir):
    curves = batch1_curves(data_dir).set_index("model")
    # Llama-3.1-8B on one H100: fit TPOT and per-GPU power straight from its JSON files
    folder = data_dir.joinpath(*H100, "meta-llama", "Meta-Llama-3.1-8B-Instruct")
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("bs*+tp1+pp1.json"))]
    runs = [r for r in runs if r["Avg BS (reqs)"] <= BATCH1_FIT_MAX_BATCH]
    batch = np.array([r["Avg BS (reqs)"] for r in runs])
    tpot = np.polyval(np.polyfit(batch, [r["Avg TPOT (s)"] for r in runs], 1), 1.0)
    power = np.polyval(np.polyfit(batch, [r["Energy/req (J)"] / r["Avg Output Tokens"] * r["Token tput (tok/s)"]
                                          for r in runs], 1), 1.0)
    row = curves.loc["meta-llama/Meta-Llama-3.1-8B-Instruct"]
    assert row["runs"] == len(runs) == 6
    assert row["tpot1_s"] == pytest.approx(tpot) and row["power1_w_per_gpu"] == pytest.approx(power)
    assert row["joules_per_token1"] == pytest.approx(tpot * power)
    # extrapolating down to one request: faster than the smallest measured batch, slower than
    # the HBM-bandwidth floor (bf16 weights read once per token); power stays a plausible board power
    assert (curves["tpot1_s"] < curves["tpot_at_min_batch_s"]).all()
    assert (curves["tpot1_s"] > curves["hbm_floor_tpot_s"]).all()
    assert curves["power1_w_per_gpu"].between(150, 700).all()
    assert curves.loc["meta-llama/Meta-Llama-3.1-405B-Instruct", "n_gpus"] == 16


def test_batch1_profiles_cost_more_per_token_than_batched(data_dir):
    models = list(LLMROUTER_MODELS)
    batched, _ = energy_profiles(models, data_dir, specs=LLMROUTER_MODELS)
    batch1, info = derive_energy_profiles("batch1", models, data_dir, specs=LLMROUTER_MODELS)
    for m in models:
        assert batch1[m].joules_per_output_token > 10 * batched[m].joules_per_output_token, m
        assert batch1[m].prefill_joules_per_input_token == batched[m].prefill_joules_per_input_token
    assert batch1["gemma-2-9b-it"].method == "batch1-extrapolated-same-model"
    assert batch1["codegemma-7b"].method == "batch1-extrapolated-same-model"  # ML.ENERGY code task
    assert batch1["llama3-chatqa-1.5-70b"].method == "batch1-extrapolated-same-architecture"  # Llama-3.1-70B's shape
    assert batch1["llama3-chatqa-1.5-70b"].n_gpus == 4
    assert batch1["llama-3.1-nemotron-51b-instruct"].method == "batch1-power-law-fit"
    assert info["provenance"] == "derived" and any("HBM-bandwidth floor" in n for n in info["card_notes"])


@pytest.fixture(scope="module")
def llmrouter_pair(data_dir):
    return build_llmrouter_tournament(data_dir)[0], build_llmrouter_tournament(data_dir, energy_model="batch1")[0]


def test_llmrouter_batch1_build_changes_only_energy(llmrouter_pair):
    batched, batch1 = llmrouter_pair
    assert (batched.card.name, batch1.card.name) == ("llmrouter", "llmrouter-batch1")
    assert np.array_equal(batched.correct, batch1.correct)
    assert np.array_equal(batched.output_tokens, batch1.output_tokens)
    assert (batch1.energy_j > batched.energy_j).all()
    assert batch1.card.provenance == "derived" and set(batch1.models["energy_provenance"]) == {"derived"}
    assert "energy model 'batch1'" in batch1.card.description + " ".join(batch1.card.notes)
    assert batch1.card.extra["energy_model"] == "batch1"
    k = batch1.model_index("gemma-2-9b-it")
    s = batch1.models["serving"].iloc[k]
    assert batch1.energy_j[7, k] == pytest.approx(batch1.output_tokens[7, k] * s["joules_per_output_token"]
                                                  + batch1.input_tokens[7, k] * s["prefill_joules_per_input_token"])
    assert "batch 1" in batch1.models["energy_source"].iloc[k]


def test_zeroeval_batch1_build_names_the_energy_model(data_dir):
    t, report = build_zeroeval_tournament(data_dir, ["gemma-2-2b-it", "Qwen2-7B-Instruct"], benchmarks=("gsm8k",),
                                          limit=4, processes=1, disable_progress=True, energy_model="batch1")
    assert t.card.name == report.name == "zeroeval-math-batch1"
    assert "one request at a time" in t.card.hardware
    assert any(n.startswith("energy model 'batch1'") for n in t.card.notes)
    methods = [s["energy_method"] for s in t.models["serving"]]
    assert methods == ["batch1-extrapolated-same-model", "batch1-power-law-fit"]


def test_real_data_names_cache_each_energy_model_separately(data_dir, tmp_path, monkeypatch):
    from routing_gym.sources import build_real_tournament, list_tournaments, resolve_tournament

    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    monkeypatch.setenv("ROUTING_GYM_DATA_DIR", str(data_dir))
    assert {"llmrouter-batch1", "zeroeval-math-batch1"} <= set(list_tournaments())
    batched, batch1 = resolve_tournament("llmrouter"), resolve_tournament("llmrouter-batch1")
    assert (batched.card.name, batch1.card.name) == ("llmrouter", "llmrouter-batch1")
    assert batch1.energy_j.mean() > 10 * batched.energy_j.mean()
    cached = tmp_path / "tournaments" / "llmrouter-batch1" / "card.json"
    stamp = cached.stat().st_mtime_ns
    assert build_real_tournament("llmrouter-batch1") == cached.parent and cached.stat().st_mtime_ns == stamp


def test_cli_build_with_energy_model(data_dir, tmp_path):
    env = {**os.environ, "ROUTING_GYM_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "routing_gym", "data", "build", "llmrouter", "--out"]
    done = subprocess.run([*cli, str(tmp_path / "b1"), "--energy-model", "batch1"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    card = json.loads((tmp_path / "b1" / "card.json").read_text())
    assert card["name"] == "llmrouter-batch1" and card["extra"]["energy_model"] == "batch1"
    bad = subprocess.run([*cli, str(tmp_path / "x"), "--energy-model", "batch2"], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "--energy-model 'batch2': unknown" in bad.stderr


def _calibration(meter: str = "nvml-counter") -> pd.DataFrame:
    """Calls whose joules follow known per-architecture coefficients exactly."""
    truth = {"llama-3.1-8b": (8.03, 0.02, 1.5), "gemma-2-9b": (9.24, 0.03, 2.0), "qwen2.5-7b": (7.62, 0.015, 1.2)}
    rows = []
    for arch, (params, e_in, e_out) in truth.items():
        for prompt, output in ((100, 50), (400, 20), (50, 300), (200, 200)):
            rows.append({"architecture": arch, "params_b": params, "prompt_tokens": prompt, "output_tokens": output,
                         "seconds": 1e-4 * prompt + 0.02 * output, "joules": e_in * prompt + e_out * output,
                         "meter": meter, "device": "NVIDIA H200"})
    return pd.DataFrame(rows)


def test_energy_law_recovers_known_coefficients_and_prices_models(tmp_path):
    laws = fit_energy_law(_calibration())
    assert laws["gemma-2-9b"].joules_per_output_token == pytest.approx(2.0)
    assert laws["gemma-2-9b"].joules_per_input_token == pytest.approx(0.03)
    assert laws["llama-3.1-8b"].seconds_per_output_token == pytest.approx(0.02) and laws["llama-3.1-8b"].joules_r2 == 1
    table = tmp_path / "calibration.csv"
    _calibration().to_csv(table, index=False)
    models = ["llama-3.1-8b-instruct", "gemma-2-9b-it", "qwen2.5-7b-instruct", "llama3-chatqa-1.5-8b",
              "llama-3.1-nemotron-51b-instruct"]
    profiles, info = derive_energy_profiles(f"measured-arch:{table}", models, specs=LLMROUTER_MODELS)
    assert profiles["gemma-2-9b-it"].joules_per_output_token == pytest.approx(2.0)
    assert profiles["llama3-chatqa-1.5-8b"].joules_per_output_token == pytest.approx(1.5)  # Llama-3-8B shape
    assert profiles["llama-3.1-nemotron-51b-instruct"].method == "measured-architecture-power-law-fit"
    assert profiles["llama-3.1-nemotron-51b-instruct"].joules_per_output_token > 2.0
    assert info["provenance"] == "derived" and info["gpu"] == "NVIDIA H200"
    _calibration(meter="replay").to_csv(table, index=False)
    _, info = derive_energy_profiles(f"measured-arch:{table}", models[:1], specs=LLMROUTER_MODELS)
    assert info["provenance"] == "synthetic" and any("SYNTHETIC" in n for n in info["card_notes"])


def test_bad_calibration_tables_name_file_row_and_column(tmp_path):
    table = tmp_path / "cal.csv"
    _calibration().drop(columns="seconds").to_csv(table, index=False)
    with pytest.raises(RoutingGymError, match=r"cal.csv: missing column\(s\) \['seconds'\]"):
        load_calibration(table)
    bad = _calibration()
    bad.loc[3, "joules"] = -1.0
    bad.to_csv(table, index=False)
    with pytest.raises(RoutingGymError, match=r"cal.csv, line 5, column 'joules': '-1.0' is not a non-negative number"):
        load_calibration(table)
    same_ratio = _calibration()
    same_ratio[["prompt_tokens", "output_tokens"]] = [[100, 50]] * len(same_ratio)
    with pytest.raises(RoutingGymError, match="separate prefill from decode"):
        fit_energy_law(same_ratio)
