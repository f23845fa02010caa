"""The decode energy law: GPU rule, leave-one-out validation, precision, and the three batched energy models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from routing_gym.errors import RoutingGymError
from routing_gym.eval.core.robustness import energy_under_laws
from routing_gym.sources.energy_law import fit_decode_law, leave_one_out, serving_gpus
from routing_gym.sources.energy_model import (
    ModelSpec,
    batched_profiles,
    derive_energy_profiles,
    load_mlenergy,
    measured_runs,
    reprice_tournament,
    select_batch_size,
)
from routing_gym.sources.llmrouter import LLMROUTER_MODELS, build_llmrouter_tournament
from routing_gym.sources.zeroeval import OPEN_MODELS

SIZES_B = {"bigcode/starcoder2-15b": 16.0, "bigcode/starcoder2-3b": 3.03, "bigcode/starcoder2-7b": 7.17,
           "codellama/CodeLlama-13b-hf": 13.0, "codellama/CodeLlama-34b-hf": 33.7, "codellama/CodeLlama-70b-hf": 69.0,
           "codellama/CodeLlama-7b-hf": 6.74, "google/codegemma-1.1-2b": 2.51, "google/codegemma-7b": 8.54}


def test_gpu_rule_reproduces_every_mlenergy_h100_configuration(data_dir):
    chat = measured_runs(data_dir)
    code = select_batch_size(load_mlenergy(data_dir, task="code"))
    code["params_b"] = code["model"].map(SIZES_B)
    runs = pd.concat([chat, code])
    assert len(runs) == 23
    assert [serving_gpus(p) for p in runs["params_b"]] == runs["n_gpus"].tolist()
    assert serving_gpus(70.6, "fp8") == 2 and serving_gpus(405.9, "int4") == 8 and serving_gpus(1000.0) == 16


def test_law_beats_the_parameter_count_fit_out_of_sample(data_dir):
    loo = leave_one_out(measured_runs(data_dir))
    assert len(loo) == 14
    law, before = loo["law_error"].abs(), loo["params_fit_error"].abs()
    assert law.median() < 0.10 < before.median() and law.max() < 0.25 < before.max()
    phi = loo.set_index("model").loc["microsoft/Phi-3-mini-4k-instruct"]
    assert phi["params_fit_error"] < -0.3 and abs(phi["law_error"]) < 0.2  # the issue's Phi-3 gap, held out


def test_each_batched_energy_model_prices_the_issue_examples(data_dir):
    ids = ["Phi-3.5-mini-instruct", "Meta-Llama-3-8B-Instruct", "Qwen2.5-3B-Instruct", "deepseek-v2.5-0908",
           "Llama-3.1-405B-Inst@sambanova", "Llama-3.1-405B-Instruct-Turbo", "gemma-2-2b-it", "Phi-3-mini-4k-instruct"]
    price = {kind: batched_profiles(ids, data_dir, OPEN_MODELS, kind)[0] for kind in ("batched", "law", "params")}
    j = {kind: {m: p.joules_per_output_token for m, p in profiles.items()} for kind, profiles in price.items()}
    # before: the parameter-count fit for unmeasured models, measured ML.ENERGY runs otherwise
    assert j["params"]["Phi-3.5-mini-instruct"] == pytest.approx(0.0889, abs=1e-4)
    assert j["params"]["Qwen2.5-3B-Instruct"] == pytest.approx(0.0745, abs=1e-4)
    assert j["params"]["deepseek-v2.5-0908"] == pytest.approx(2.733, abs=1e-3)
    # default: a measured model of the identical architecture prices Phi-3.5-mini and Llama-3-8B
    assert j["batched"]["Phi-3.5-mini-instruct"] == pytest.approx(0.1304, abs=1e-4)
    assert j["batched"]["Meta-Llama-3-8B-Instruct"] == pytest.approx(0.1307, abs=1e-4)
    assert price["batched"]["Phi-3.5-mini-instruct"].method == "measured-same-architecture"
    # Qwen2.5-3B is no longer cheaper per token than the smaller, measured gemma-2-2b
    assert j["batched"]["Qwen2.5-3B-Instruct"] > j["batched"]["gemma-2-2b-it"]
    # DeepSeek-V2.5 on the 8 GPUs its card states, 405B-Turbo at fp8 (8 GPUs) scaled from the bf16 run on 16
    assert price["batched"]["deepseek-v2.5-0908"].n_gpus == 8
    turbo, bf16 = price["batched"]["Llama-3.1-405B-Instruct-Turbo"], price["batched"]["Llama-3.1-405B-Inst@sambanova"]
    assert (turbo.n_gpus, bf16.n_gpus, turbo.method) == (8, 16, "measured-same-model-scaled")
    assert bf16.joules_per_output_token == pytest.approx(4.8247, abs=1e-4)
    assert 0.4 < turbo.joules_per_output_token / bf16.joules_per_output_token < 0.55
    assert turbo.prefill_joules_per_input_token == pytest.approx(bf16.prefill_joules_per_input_token / 2)
    # 'law': every model by the law, so the same architecture costs the same
    assert {p.method for p in price["law"].values()} == {"energy-law"}
    assert j["law"]["Phi-3.5-mini-instruct"] == j["law"]["Phi-3-mini-4k-instruct"] == pytest.approx(
        fit_decode_law(measured_runs(data_dir)).joules_per_token(1, 3.82))


def test_spec_precision_and_gpus_are_checked():
    with pytest.raises(RoutingGymError, match="ModelSpec org/m: precision 'fp4' unknown; choose one of bf16"):
        ModelSpec("org/m", "f", 7.0, precision="fp4")
    with pytest.raises(RoutingGymError, match="n_gpus must be >= 1"):
        ModelSpec("org/m", "f", 7.0, n_gpus=0)
    assert ModelSpec("org/m", "f", 70.0).gpus == 4 and ModelSpec("org/m", "f", 70.0, precision="fp8").gpus == 2


def test_card_states_the_law_its_held_out_error_and_each_method(data_dir):
    _, info = derive_energy_profiles("batched", list(LLMROUTER_MODELS), data_dir, specs=LLMROUTER_MODELS)
    notes = " ".join(info["card_notes"])
    assert "energy law (routing_gym/sources/energy_law.py): J/token = " in notes
    assert "leave-one-out error over the measured models median 8.5 %" in notes
    assert "measured-same-architecture" in notes and "energy-law" in notes
    assert set(info["alternatives"]["gemma-2-9b-it"]) == {"batched", "law", "params", "batch1"}


def test_repricing_a_build_changes_only_energy_and_matches_its_alternatives(data_dir):
    t, _ = build_llmrouter_tournament(data_dir)
    rows = np.arange(t.n_queries)
    alternatives = energy_under_laws(t, rows)
    np.testing.assert_allclose(alternatives["batched"], t.energy_j, rtol=1e-12)
    law = reprice_tournament(t, "llmrouter", "law", LLMROUTER_MODELS, data_dir)
    assert law.card.name == "llmrouter-law" and law.card.extra["energy_model"] == "law"
    assert np.array_equal(law.correct, t.correct) and np.array_equal(law.output_tokens, t.output_tokens)
    np.testing.assert_allclose(law.energy_j, alternatives["law"], rtol=1e-12)
    assert not np.allclose(law.energy_j, t.energy_j)
    assert sum(n.startswith("energy model 'law'") for n in law.card.notes) == 1
    assert not any(n.startswith("energy model 'batched'") for n in law.card.notes)
    assert set(law.models["serving"].iloc[0]) >= {"precision", "serving_note", "energy_alternatives", "output_tokens"}


def test_a_build_under_the_law_prices_every_model_by_it_and_records_the_alternatives(data_dir):
    from routing_gym.sources.zeroeval import build_zeroeval_tournament

    t, report = build_zeroeval_tournament(data_dir, ["gemma-2-2b-it", "Phi-3.5-mini-instruct"], benchmarks=("gsm8k",),
                                          limit=4, processes=1, disable_progress=True, energy_model="law")
    assert t.card.name == report.name == "zeroeval-math-law" and t.card.extra["energy_model"] == "law"
    serving = list(t.models["serving"])
    assert [s["energy_method"] for s in serving] == ["energy-law", "energy-law"]
    assert [s["precision"] for s in serving] == ["bf16", "bf16"]
    assert set(serving[1]["energy_alternatives"]) == {"batched", "law", "params", "batch1"}
    assert serving[1]["energy_alternatives"]["batched"]["method"] == "measured-same-architecture"
    assert t.card.extra["energy_fit"]["energy_law_version"] >= 2
