"""The MMLU-Pro builder: published correctness, per-answer tokens and energy, the grouped split."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from routing_gym.errors import RoutingGymError
from routing_gym.sources.mmlu_pro import (
    MMLU_PRO_MODELS,
    accuracy_table,
    available_models,
    build_mmlu_pro_tournament,
    group_keys,
    grouped_split,
    load_run,
    repository_rule,
)

POOL = ["Meta-Llama-3_1-8B-Instruct", "Mixtral-8x7B-v0.1", "Qwen1.5-7B-Chat"]


@pytest.fixture(scope="module")
def built(data_dir: Path):
    return build_mmlu_pro_tournament(data_dir, POOL, limit=400)


def test_every_published_model_has_a_spec(data_dir: Path) -> None:
    models = available_models(data_dir)
    assert len(models) == 26 and set(models) == set(MMLU_PRO_MODELS)
    assert MMLU_PRO_MODELS["Mixtral-8x7B-v0.1"].active_b == 12.9
    assert MMLU_PRO_MODELS["jamba-1.5-large"].active_b == 94.0
    assert MMLU_PRO_MODELS["Qwen1.5-110B"].active_b == MMLU_PRO_MODELS["Qwen1.5-110B"].params_b  # dense


def test_correctness_is_the_published_extraction(built) -> None:
    tournament, report = built
    table = accuracy_table(report, tournament)
    assert (table["tournament_minus_published_pp"].abs() < 1e-9).all()
    grades = report.grades
    # an answer the publisher could not extract is wrong, not a guess
    unextracted = grades["pred"].isna()
    assert unextracted.any() and not grades.loc[unextracted, "correct"].any()
    assert (table["published_unextracted_guess_pct"] >= table["published_unextracted_wrong_pct"]).all()


def test_tokens_energy_and_power_vary_per_answer(built) -> None:
    tournament, _ = built
    assert (tournament.output_tokens > 0).mean() > 0.99
    assert (tournament.input_tokens > tournament.output_tokens.mean()).all()  # five worked examples in the prompt
    j = tournament.model_index("Meta-Llama-3_1-8B-Instruct")
    subject = tournament.queries["benchmark"].mode()[0]
    rows = tournament.queries["benchmark"].to_numpy() == subject
    assert np.unique(np.round(tournament.energy_j[rows, j], 6)).size > 10  # within one model and one subject
    assert not np.allclose(tournament.energy_j[:, 0], tournament.energy_j[:, 1])
    assert tournament.card.provenance == "derived" and set(tournament.models["energy_provenance"]) == {"derived"}
    moe = tournament.models.set_index("model_id").loc["Mixtral-8x7B-v0.1", "serving"]
    assert moe["active_params_b"] == 12.9 and moe["variant"] == "base"


def test_split_is_grouped_and_stratified(built) -> None:
    tournament, _ = built
    keys = tournament.queries["prompt"].str.casefold().str.split().str.join(" ")
    assert (tournament.queries.groupby(keys)["split"].nunique() == 1).all()
    share = (tournament.queries["split"] == "test").groupby(tournament.queries["benchmark"]).mean()
    big = tournament.queries["benchmark"].value_counts() >= 20
    assert share[big[big].index].between(0.1, 0.3).all()


def test_grouped_split_keeps_groups_together() -> None:
    rng = np.random.default_rng(0)
    groups = np.array([f"g{i}" for i in rng.integers(0, 300, 1000)], dtype=object)
    benchmarks = np.array(["a", "b"], dtype=object)[rng.integers(0, 2, 1000)]
    split = grouped_split(benchmarks, groups, {"train": 0.8, "test": 0.2}, seed=3)
    assert all(len(set(split[groups == g])) == 1 for g in np.unique(groups))
    assert 0.15 < (split == "test").mean() < 0.25
    assert (grouped_split(benchmarks, groups, {"train": 0.8, "test": 0.2}, seed=3) == split).all()


def test_group_keys_normalise_case_and_space_but_not_options() -> None:
    keys = group_keys(["What  is X?", "what is x?", "What is X?"], [["1", "2"], ["1", "2"], ["1", "3"]])
    assert keys[0] == keys[1] != keys[2]


def test_repository_rule_guesses_only_when_nothing_is_found() -> None:
    texts = ["so the answer is (B).", "Answer: C", "I pick D", "no letter here"]
    assert repository_rule(texts[:1], ["B"], "l1") == 100.0
    assert repository_rule(texts[1:3], ["C", "D"], "l2") == 100.0
    assert repository_rule(texts[3:] * 1000, ["A"] * 1000, "l2") == pytest.approx(10.0, abs=3.0)


def test_corrupt_zip_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "outcomes" / "mmlu-pro"
    folder.mkdir(parents=True)
    (folder / "model_outputs_Yi-6B_5shots.zip").write_bytes(b"not a zip")
    with pytest.raises(RoutingGymError, match=r"model_outputs_Yi-6B_5shots.zip: cannot read"):
        load_run(tmp_path, "Yi-6B")
    items = [{"question_id": 1, "question": "q", "options": ["a", "b"], "answer": "A", "category": "law", "src": "s",
              "pred": "Z", "generated_text": "x"}]
    with zipfile.ZipFile(folder / "model_outputs_Yi-6B_5shots.zip", "w") as z:
        z.writestr("model_outputs_Yi-6B_5shots.json", json.dumps(items))
    with pytest.raises(RoutingGymError, match=r"row 1: answer 'A' / pred 'Z' is not a letter"):
        load_run(tmp_path, "Yi-6B")


def _script_l2(text: str) -> str | None:
    """compute_accuracy.py's level-2 extraction, verbatim regexes (quadratic on long lines)."""
    import re

    for pattern, flags in ((r"answer is \(?([A-J])\)?", 0), (r".*[aA]nswer:\s*([A-J])", 0)):
        m = re.search(pattern, text, flags)
        if m:
            return m.group(1)
    m = re.search(r"\b[A-J]\b(?!.*\b[A-J]\b)", text, re.DOTALL)
    return m.group(0) if m else None


def test_linear_extraction_matches_the_scripts_regexes(data_dir: Path) -> None:
    from routing_gym.sources.mmlu_pro import _extract_l2

    texts = ["A then B then\nC.", "none", "x J y", "Answer: E and later F answer: G\nAnswer: H",
             "(G) and H\n\nI think", "the Answer:\n\nB\nanswer: C", "so answer: D. Answer: E"]
    run = load_run(data_dir, "Yi-6B")
    texts += run.loc[run["pred"].isna(), "text"].head(300).tolist()  # the answers the first rule misses
    assert [_extract_l2(t) for t in texts] == [_script_l2(t) for t in texts]


def test_registered_names_and_cli_build(tmp_path: Path, data_dir: Path, capsys) -> None:
    from routing_gym.cli import main
    from routing_gym.sources import list_tournaments
    from routing_gym.tournament import Tournament

    assert {"mmlu-pro", "mmlu-pro-batch1"} <= set(list_tournaments())
    out = tmp_path / "t"
    assert main(["data", "build", "mmlu-pro", "--data-dir", str(data_dir), "--out", str(out), "--limit", "60",
                 "--models", "Yi-6B", "gemma-7b", "--energy-model", "batch1"]) == 0
    printed = capsys.readouterr().out
    assert "published_unextracted_wrong_pct" in printed and "tournament_minus_published_pp" in printed
    t = Tournament.load(out)
    assert t.card.name == "mmlu-pro-batch1" and (t.n_queries, t.n_models) == (60, 2)
    assert main(["data", "build", "mmlu-pro", "--download", "--out", str(tmp_path / "x")]) == 1
    assert "--download does not cover mmlu-pro" in capsys.readouterr().err


def test_law_variant_is_repriced_from_a_cached_build(built, tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    from routing_gym.sources import build_real_tournament
    from routing_gym.tournament import Tournament

    tournament, _ = built
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    tournament.save(tmp_path / "tournaments" / "mmlu-pro")
    law = Tournament.load(build_real_tournament("mmlu-pro-law", data_dir))
    assert law.card.name == "mmlu-pro-law" and law.card.split == tournament.card.split
    assert (law.queries["split"] == tournament.queries["split"]).all()
    np.testing.assert_array_equal(law.correct, tournament.correct)
    np.testing.assert_array_equal(law.output_tokens, tournament.output_tokens)
    qwen = tournament.model_index("Qwen1.5-7B-Chat")  # no ML.ENERGY run of its shape: priced by the law
    assert law.models.loc[qwen, "serving"]["energy_method"] == "energy-law"
    assert "batch1" in tournament.models.loc[qwen, "serving"]["energy_alternatives"]
