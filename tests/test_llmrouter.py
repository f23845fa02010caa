"""LLMRouter tournament: real scores joined to tasks, derived energy clearly labelled."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from routing_gym.errors import RoutingGymError
from routing_gym.sources import BUILD_VERSIONS
from routing_gym.sources.llmrouter import LLMROUTER_MODELS, OUTPUT_TOKENS_BY_TASK, build_llmrouter_tournament
from routing_gym.tournament.duplicates import duplicate_counts, normalise_question


@pytest.fixture(scope="session")
def llmrouter_build(data_dir):
    return build_llmrouter_tournament(data_dir)


def test_shape_split_and_tasks(llmrouter_build):
    t, _ = llmrouter_build
    assert (t.n_queries, t.n_models) == (6108, 9)
    assert t.queries["split"].value_counts().to_dict() == {"train": 5608, "test": 500}


def test_the_split_has_no_question_on_both_sides_and_keeps_the_test_task_mix(llmrouter_build):
    t, _ = llmrouter_build
    q = t.queries
    from_file = q["metadata"].map(lambda m: m["llmrouter_split"])
    texts = q["prompt"].map(normalise_question)
    # LLMRouter's own files: 119 test questions whose text is also in train (the leak).
    assert texts[from_file == "test"].isin(set(texts[from_file == "train"])).sum() == 119
    assert duplicate_counts(q["prompt"], q["split"])["cross_split_texts"] == 0
    assert not texts[q["split"] == "test"].isin(set(texts[q["split"] == "train"])).any()
    # each task keeps its number of test questions from LLMRouter's test file
    assert (q[q["split"] == "test"]["benchmark"].value_counts().sort_index()
            == q[from_file == "test"]["benchmark"].value_counts().sort_index()).all()
    assert t.card.extra["build_version"] == BUILD_VERSIONS["llmrouter"]
    assert {"mmlu", "gsm8k", "math", "humaneval", "mbpp", "gpqa", "arc_challenge"} <= set(t.benchmarks)
    assert set(t.models["model_id"]) == set(LLMROUTER_MODELS)


def test_scores_are_the_source_scores(llmrouter_build, data_dir):
    t, _ = llmrouter_build
    with gzip.open(data_dir / "outcomes" / "llmrouter" / "dcrouter_preprocessed" / "test.json.gz", "rt") as f:
        test_items = json.load(f)
    rows = np.flatnonzero(t.queries["query_id"].str.startswith("llmrouter/test/").to_numpy())  # the test file's rows
    for j in (0, 17, 499):
        i = rows[j]
        assert t.queries["prompt"].iloc[i] == test_items[j]["question"]
        for k, m in enumerate(t.model_ids):
            assert t.correct[i, k] == test_items[j]["scores"][m]
    assert ((t.correct > 0) & (t.correct < 1)).any()  # CommonGen coverage is fractional
    assert t.correct.mean() == pytest.approx(0.4244, abs=0.002)


def test_energy_is_derived_from_assumed_lengths_and_labelled(llmrouter_build):
    t, _ = llmrouter_build
    assert t.card.provenance == "derived" and "ASSUMED output lengths" in t.card.description
    assert set(t.models["energy_provenance"]) == {"derived"}
    assert all("output length assumed per task" in s for s in t.models["energy_source"])
    methods = dict(zip(t.models["model_id"], (s["energy_method"] for s in t.models["serving"])))
    assert methods["codegemma-7b"] == "measured-same-model"  # ML.ENERGY code task
    assert "code, bs128" in t.models.set_index("model_id").loc["codegemma-7b", "energy_source"]
    assert methods["llama3-chatqa-1.5-70b"] == "measured-same-architecture"  # Llama-3.1-70B's shape
    assert methods["llama-3.1-nemotron-51b-instruct"] == "energy-law"
    tasks = [m["task_name"] for m in t.queries["metadata"]]
    assert np.array_equal(t.output_tokens[:, 0], [OUTPUT_TOKENS_BY_TASK[x] for x in tasks])
    assert (t.output_tokens == t.output_tokens[:, :1]).all()  # one length per task for every model
    i, k = 123, t.model_index("gemma-2-9b-it")
    s = t.models["serving"].iloc[k]
    assert t.energy_j[i, k] == pytest.approx(t.output_tokens[i, k] * s["joules_per_output_token"]
                                             + t.input_tokens[i, k] * s["prefill_joules_per_input_token"])
    # same question, bigger model, more joules
    assert t.energy_j[i, t.model_index("llama3-chatqa-1.5-70b")] > t.energy_j[i, t.model_index("llama3-chatqa-1.5-8b")]


def test_ambiguous_task_names_are_recorded(llmrouter_build):
    t, _ = llmrouter_build
    multi = [m for m in t.queries["metadata"] if len(m["task_candidates"]) > 1]
    assert len(multi) >= 1 and all(m["task_name"] == m["task_candidates"][0] for m in multi)
    assert any("two task names" in n for n in t.card.notes)


def _copy_llmrouter(data_dir, tmp_path, mutate_test=None):
    root = tmp_path / "data"
    src = data_dir / "outcomes" / "llmrouter"
    dst = root / "outcomes" / "llmrouter"
    for rel in ("dcrouter_preprocessed/train.json.gz", "dcrouter_preprocessed/test.json.gz",
                "example_data/query_data/default_query_train.jsonl.gz",
                "example_data/query_data/default_query_test.jsonl.gz"):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes((src / rel).read_bytes())
    (root / "energy").symlink_to(data_dir / "energy")
    if mutate_test:
        path = dst / "dcrouter_preprocessed" / "test.json.gz"
        items = json.loads(gzip.decompress(path.read_bytes()))
        mutate_test(items)
        path.write_bytes(gzip.compress(json.dumps(items).encode()))
    return root


def test_bad_rows_are_errors_naming_file_and_row(data_dir, tmp_path):
    def out_of_range(items):
        items[4]["scores"]["gemma-2-9b-it"] = 1.5

    with pytest.raises(RoutingGymError, match=r"test\.json\.gz, row 5, field 'scores': values outside"):
        build_llmrouter_tournament(_copy_llmrouter(data_dir, tmp_path / "a", out_of_range))

    def unknown_question(items):
        items[9]["question"] = "a question no task file knows"

    with pytest.raises(RoutingGymError, match=r"test\.json\.gz, row 10: question has no task record"):
        build_llmrouter_tournament(_copy_llmrouter(data_dir, tmp_path / "b", unknown_question))

    def missing_model(items):
        del items[0]["scores"]["codegemma-7b"]

    with pytest.raises(RoutingGymError, match=r"row 1, field 'scores': expected the nine models"):
        build_llmrouter_tournament(_copy_llmrouter(data_dir, tmp_path / "c", missing_model))


def test_a_cached_build_of_an_older_version_is_rebuilt(tmp_path, monkeypatch, data_dir):
    from routing_gym.sources import build_real_tournament

    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    stale = tmp_path / "tournaments" / "llmrouter"
    stale.mkdir(parents=True)
    (stale / "card.json").write_text(json.dumps({"name": "llmrouter", "extra": {}}))  # a build from before versions
    out = build_real_tournament("llmrouter", data_dir)
    card = json.loads((out / "card.json").read_text())
    assert out == stale and card["extra"]["build_version"] == BUILD_VERSIONS["llmrouter"]
    built = (out / "card.json").stat().st_mtime_ns
    assert build_real_tournament("llmrouter", data_dir) == out and (out / "card.json").stat().st_mtime_ns == built
