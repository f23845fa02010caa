"""One pricing path: an imported model is priced exactly as the real-data builder prices it.

A small ZeroEval-style import — the outputs of a ``zeroeval-math`` build (GSM8K, a few questions),
exported as a long table without its energy columns — goes back through ``data import``: the
ML.ENERGY-measured models (matched by name, or by the public id a ``--model-spec`` names, served
at fp8 on 8 GPUs) must be priced by their measurement, the unmeasured one by the energy law, the
card must say which rule priced each, and every joule must equal the build's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from routing_gym.cli import main
from routing_gym.errors import RoutingGymError
from routing_gym.eval.core.robustness import energy_under_laws
from routing_gym.sources.energy_model import match_measurement, measured_model_ids
from routing_gym.sources.longtable import config_model_spec, export_long_table, parse_model_spec
from routing_gym.tournament import Tournament

GEMMA, LLAMA8, QWEN, TURBO = "gemma-2-9b-it", "Meta-Llama-3.1-8B-Instruct", "Qwen2-7B-Instruct", "Llama-3.1-405B-Instruct-Turbo"
TURBO_SPEC = f"{TURBO}=405.9,id=meta-llama/Meta-Llama-3.1-405B-Instruct,precision=fp8,gpus=8"


@pytest.fixture(scope="module")
def built_and_imported(data_dir: Path, tmp_path_factory) -> tuple[Tournament, Tournament, Path]:
    from routing_gym.sources.zeroeval import build_zeroeval_tournament

    built, _ = build_zeroeval_tournament(data_dir, [GEMMA, LLAMA8, QWEN, TURBO], benchmarks=("gsm8k",), limit=60,
                                         processes=1, keep_text=False, disable_progress=True)
    tmp = tmp_path_factory.mktemp("import")
    long = pd.read_csv(export_long_table(built, tmp / "built.csv"), dtype=str)
    # what a user's own logs hold: outcomes and tokens, no joules
    long.drop(columns=["energy_j", "latency_s", "mean_power_w"]).to_csv(tmp / "logs.csv", index=False)
    out = tmp / "mine"
    # gemma and Llama-8B get no --model-spec at all: their names find their measurements
    assert main(["data", "import", str(tmp / "logs.csv"), "--out", str(out), "--energy-model", "batched",
                 "--data-dir", str(data_dir), "--model-spec", f"{QWEN}=7.62", "--model-spec", TURBO_SPEC]) == 0
    return built, Tournament.load(out), out


def test_measured_models_are_priced_by_their_measurement(built_and_imported) -> None:
    built, imported, _ = built_and_imported
    serving = dict(zip(imported.model_ids, imported.models["serving"]))
    assert serving[GEMMA]["energy_method"] == serving[LLAMA8]["energy_method"] == "measured-same-model"
    assert serving[TURBO]["energy_method"] == "measured-same-model-scaled"  # fp8 on 8 GPUs, from the 405B run
    assert (serving[TURBO]["precision"], serving[TURBO]["n_gpus"]) == ("fp8", 8)
    assert serving[QWEN]["energy_method"] == "energy-law"
    assert "google/gemma-2-9b-it (by name: gemma-2-9b-it)" in serving[GEMMA]["energy_match"]
    assert "meta-llama/Meta-Llama-3.1-405B-Instruct (by id" in serving[TURBO]["energy_match"]
    assert "none" in serving[QWEN]["energy_match"]
    # the card says which rule priced each model
    notes = "\n".join(imported.card.notes)
    assert f"energy of {GEMMA}: DERIVED" in notes and "ML.ENERGY match: google/gemma-2-9b-it (by name" in notes
    assert f"energy of {QWEN}: DERIVED" in notes and "derived: energy law" in notes
    assert imported.card.provenance == "derived" and imported.card.extra["energy_model"] == "batched"


def test_the_same_model_is_priced_identically_by_build_and_import(built_and_imported) -> None:
    built, imported, _ = built_and_imported
    assert imported.model_ids == built.model_ids and imported.query_ids == built.query_ids
    for k, model in enumerate(built.model_ids):
        np.testing.assert_array_equal(imported.energy_j[:, k], built.energy_j[:, k], err_msg=model)
        np.testing.assert_array_equal(imported.latency_s[:, k], built.latency_s[:, k], err_msg=model)
        b, i = built.models["serving"].iloc[k], imported.models["serving"].iloc[k]
        assert i["joules_per_output_token"] == b["joules_per_output_token"], model
        assert i["energy_alternatives"] == b["energy_alternatives"], model


def test_compare_on_an_import_prints_the_verdicts_under_other_laws(built_and_imported, capsys, tmp_path) -> None:
    _, imported, path = built_and_imported
    assert len(energy_under_laws(imported, imported.split_rows("test"))) >= 3  # batched, law, params (+ batch1)
    assert main(["compare", "--tournament", str(path), "--agents", "random,per-benchmark", "--seeds", "1",
                 "--bootstrap", "200", "--no-plots", "--out", str(tmp_path / "cmp")]) == 0
    assert "## Verdicts under other energy laws" in capsys.readouterr().out


def test_model_spec_names_public_id_precision_and_gpus() -> None:
    model, spec = parse_model_spec(TURBO_SPEC)
    assert (model, spec.hf_id, spec.params_b, spec.precision, spec.n_gpus) == (
        TURBO, "meta-llama/Meta-Llama-3.1-405B-Instruct", 405.9, "fp8", 8)
    assert parse_model_spec("moe=46.7,12.9")[1].active_b == 12.9
    assert np.isnan(parse_model_spec("gemma=id=google/gemma-2-9b-it")[1].params_b)  # taken from the measurement
    same = config_model_spec(TURBO, {"params_b": 405.9, "id": "meta-llama/Meta-Llama-3.1-405B-Instruct",
                                     "precision": "fp8", "gpus": 8}, "spec.yaml")
    assert same == spec
    for bad, message in (("big=seven", "not valid"), ("big=7,precision=fp7", "precision 'fp7' unknown"),
                         ("big=7,colour=red", "unknown key"), ("big=id=x,7", "numbers come first"), ("big", "expected")):
        with pytest.raises(RoutingGymError, match=message):
            parse_model_spec(bad)


def test_matching_by_id_by_name_and_refusing_an_ambiguous_name(data_dir: Path) -> None:
    measured = measured_model_ids(data_dir)
    spec, match = match_measurement("my-gemma", parse_model_spec("my-gemma=id=google/gemma-2-9b-it")[1], measured)
    assert (match.rule, spec.mlenergy_id, spec.params_b) == ("id", "google/gemma-2-9b-it", 9.24)
    spec, match = match_measurement("GEMMA-2-9B-IT", None, measured)  # case-insensitive, no spec needed
    assert match.rule == "name" and spec.mlenergy_id == "google/gemma-2-9b-it"
    ambiguous = ["org-a/tiny-7b", "org-b/tiny-7b"]
    spec, match = match_measurement("tiny-7b", parse_model_spec("tiny-7b=7")[1], ambiguous)
    assert match.rule == "none" and spec.mlenergy_id is None and "org-a/tiny-7b, org-b/tiny-7b" in match.text
    assert match_measurement("Qwen2-7B-Instruct", None, measured) == (None, match_measurement("x", None, [])[1])
