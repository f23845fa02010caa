"""Question-set loaders: counts, references the graders accept, prompts, and bad files."""

from __future__ import annotations

import gzip
import shutil

import pytest

from routing_gym.errors import RoutingGymError
from routing_gym.grading import get_grader
from routing_gym.sources.benchmarks import BENCHMARKS, PROMPT_TEMPLATES, load_benchmark, load_benchmarks, render_prompt

COUNTS = {"mmlu": 14042, "gsm8k": 1319, "bbh": 6511, "arc_challenge": 1172, "hellaswag": 500, "math500": 500,
          "humaneval": 164}


@pytest.fixture(scope="module")
def all_questions(data_dir):
    return load_benchmarks(data_dir=data_dir)


def test_counts_and_ids(all_questions):
    assert all_questions.groupby("benchmark").size().to_dict() == COUNTS
    assert all_questions["query_id"].is_unique
    assert set(all_questions.columns) >= {"query_id", "benchmark", "prompt", "reference", "difficulty", "metadata"}
    assert all(q.startswith(b + "/") for q, b in zip(all_questions.query_id, all_questions.benchmark))


def test_every_reference_is_accepted_by_its_grader(all_questions):
    # check_reference raises on a reference its grader cannot use (letters, numbers, test code)
    for row in all_questions.itertuples():
        get_grader(row.benchmark).check_reference(row.reference, row.metadata)


def test_references_match_their_sources(all_questions):
    q = all_questions.set_index("query_id")
    assert q.loc["gsm8k/test/0", "reference"] == "18"
    assert q.loc["mmlu/abstract_algebra/0", "reference"] == "B"  # answer index 1
    assert q.loc["arc_challenge/0", "reference"] == "C"  # gold index 2
    assert q.loc["math500/test/precalculus/807", "difficulty"] == pytest.approx(0.25)  # level 2
    assert q.loc["bbh/boolean_expressions/0", "metadata"]["task"] == "boolean_expressions"
    he = q.loc["humaneval/0", "metadata"]
    assert he["entry_point"] == "has_close_elements" and "def check" in q.loc["humaneval/0", "reference"]
    hs = q.loc["hellaswag/1", "metadata"]
    assert len(hs["choices"]) == 4 and hs["choices"][0].startswith(", two boys")


def test_prompts_render_every_template(all_questions):
    first = all_questions.groupby("benchmark").head(1).set_index("benchmark")
    assert "A. 0\nB. 4\nC. 2\nD. 6" in first.loc["mmlu", "prompt"]
    assert "abstract algebra" in first.loc["mmlu", "prompt"]
    assert first.loc["gsm8k", "prompt"].endswith('as "#### N".')
    assert "\\boxed{}" in first.loc["math500", "prompt"]
    assert "```python\nfrom typing import List" in first.loc["humaneval", "prompt"]
    assert set(PROMPT_TEMPLATES) == set(BENCHMARKS)
    with pytest.raises(RoutingGymError, match="no prompt template"):
        render_prompt("unknown", "q")


def test_canonical_answers_grade_correct(all_questions):
    sample = all_questions.groupby("benchmark").head(3)
    for row in sample.itertuples():
        if row.benchmark == "humaneval":
            continue  # run by tests/test_grading_humaneval.py
        answer = {"gsm8k": f"#### {row.reference}", "math500": f"$\\boxed{{{row.reference}}}$"}.get(
            row.benchmark, f"So the answer is {row.reference}."
        )
        result = get_grader(row.benchmark).grade(answer, row.reference, row.metadata)
        assert result.correct, (row.query_id, result.reason)


def test_corrupt_and_missing_files_name_the_file(data_dir, tmp_path):
    root = tmp_path / "data"
    (root / "benchmarks" / "gsm8k").mkdir(parents=True)
    src = (data_dir / "benchmarks" / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    bad = src[:3] + ['{"question": "q", "answer": "no final marker"}'] + src[3:5] + ["{not json"]
    (root / "benchmarks" / "gsm8k" / "test.jsonl").write_text("\n".join(bad), encoding="utf-8")
    with pytest.raises(RoutingGymError, match=r"test\.jsonl, row 4, field 'answer'"):
        load_benchmark("gsm8k", root)
    (root / "benchmarks" / "gsm8k" / "test.jsonl").write_text("\n".join(src[:3] + ["{not json"]), encoding="utf-8")
    with pytest.raises(RoutingGymError, match=r"row 4: not valid JSON"):
        load_benchmark("gsm8k", root)
    (root / "benchmarks" / "humaneval").mkdir()
    payload = (data_dir / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz").read_bytes()
    (root / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz").write_bytes(payload[: len(payload) // 2])
    with pytest.raises(RoutingGymError, match="truncated or corrupt"):
        load_benchmark("humaneval", root)
    with pytest.raises(RoutingGymError, match=r"math500/test\.jsonl: missing"):
        load_benchmark("math500", root)
    with pytest.raises(RoutingGymError, match="unknown benchmark"):
        load_benchmark("mmlu-pro", root)


def test_hellaswag_layout_error(data_dir, tmp_path):
    folder = tmp_path / "benchmarks" / "hellaswag"
    folder.mkdir(parents=True)
    shutil.copy(data_dir / "benchmarks" / "hellaswag" / "hellaswag_val_sample500.csv.gz", folder)
    assert len(load_benchmark("hellaswag", tmp_path)) == 500
    text = gzip.decompress((folder / "hellaswag_val_sample500.csv.gz").read_bytes()).decode()
    (folder / "hellaswag_val_sample500.csv.gz").write_bytes(gzip.compress(text.replace("Options:", "Choices:", 1).encode()))
    with pytest.raises(RoutingGymError, match="row 1, field 'processed_input'"):
        load_benchmark("hellaswag", tmp_path)
