"""Graders: pinned tricky forms, malformed outputs, and hundreds of real ZeroEval outputs."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest

from routing_gym.errors import UnknownNameError
from routing_gym.grading import (
    MAX_OUTPUT_CHARS,
    GraderInputError,
    GradeResult,
    get_grader,
    grade,
    grade_batch,
    grader_names,
    register_grader,
)
from routing_gym.grading.extract import eval_arithmetic, json_answer


def test_registry_names_and_unknown_name():
    assert {"mmlu", "arc_challenge", "hellaswag", "gsm8k", "math", "math500", "math-l5", "bbh", "humaneval"} <= set(
        grader_names()
    )
    with pytest.raises(UnknownNameError, match="registered: .*gsm8k"):
        get_grader("no-such-benchmark")
    with pytest.raises(Exception, match="already registered"):
        register_grader("gsm8k", lambda: get_grader("gsm8k"))


@pytest.mark.parametrize("name,reference", [("gsm8k", "18"), ("math", "18"), ("mmlu", "B"), ("bbh", "True")])
@pytest.mark.parametrize(
    "output,why",
    [(None, "not text"), (b"18", "not text"), (["18"], "not text"), ("", "empty"), ("  \n ", "empty"),
     ("9" * (MAX_OUTPUT_CHARS + 1), "too long")],
)
def test_malformed_outputs_are_false_with_a_reason(name, reference, output, why):
    result = grade(name, output, reference)
    assert isinstance(result, GradeResult)
    assert result.correct is False and why in result.reason


def test_bad_reference_raises_naming_the_grader():
    with pytest.raises(GraderInputError, match="gsm8k"):
        grade("gsm8k", "18", "no number here")
    with pytest.raises(GraderInputError):
        grade("mmlu", "B", "Z")
    with pytest.raises(GraderInputError, match="entry_point"):
        grade("humaneval", "def f(): pass", "def check(c): pass", {"code_prompt": "def f():\n"})


# ----------------------------------------------------------------------------- GSM8K
@pytest.mark.parametrize(
    "output,expected",
    [
        ('```json\n{"reasoning": "9 * 2", "answer": "18"}\n```', "18"),
        ('{"reasoning": "...", "answer": "$1,200.50"}', "1,200.50"),
        ('{"reasoning": "...", "answer": 18}', "18"),
        ('{"answer": "1500 - 1090 - 157 - 74 - 102 = 77"}', "77"),  # Yi-1.5-34B, gsm8k #165
        ('{"answer": "((300 * 4) + (120 * 6) + (60 * 24)) / 12"}', "280"),  # yi-large-preview
        ('{"answer": "-$8"}', "-8"),  # the sign survives the currency sign
        ('{"answer": "18 dollars (9 eggs x $2)"}', "18"),
        ("She makes 9 * 2 = 18 dollars.\n#### 18", "18"),
        ("so the answer is $18.", "18"),
        ("The final answer is: $\\boxed{145}$", "145"),
        ("Step 1 ... 5 + 4 = 9\nShe sells 9 eggs for $2 each: $18 per day.", "18"),
        ('Answer: "answer": "220"', "220"),  # Phi-3.5-mini, gsm8k #591
    ],
)
def test_gsm8k_extraction_forms(output, expected):
    result = get_grader("gsm8k").grade(output, "#### " + expected.replace(",", ""))
    assert result.correct, result.reason
    assert result.extracted is not None


def test_gsm8k_rejects_wrong_and_degenerate_answers():
    g = get_grader("gsm8k")
    assert not g.grade('{"answer": "10 pounds * 2 tablespoons/pound = 20 tablespoons"}', "10").correct
    loop = "Let's try 4 + 4 + 2 = 10.  This still doesn't add up to 19. " * 40  # cut off mid-loop
    result = g.grade(loop, "10")
    assert not result.correct and result.extracted is None
    assert not g.grade('{"answer": "___"}', "18").correct
    assert g.grade('{"answer": "499.99999999999994"}', "500").correct  # float noise, not a new answer


def test_arithmetic_evaluator_refuses_code():
    assert eval_arithmetic("(5 + 4 + 2) * 7") == 77
    for expr in ("__import__('os')", "9 ** 9 ** 9", "1/0", "x + 1", "7"):
        assert eval_arithmetic(expr) is None


def test_json_answer_skips_echoed_template_and_reads_invalid_json():
    # Phi-3-mini math-l5: first object has LaTeX (invalid JSON), later the echoed prompt template
    text = '{"reasoning": "$\\sqrt{9}$ so", "answer": "24"}\n## Instruction\n{"reasoning": "___", "answer": "___"}'
    assert json_answer(text) == "24"
    assert json_answer('{"answer": "\\frac{1}{2}"}') == "\\frac{1}{2}"  # valid JSON, \f is a form feed


# ----------------------------------------------------------------------------- MATH
@pytest.mark.parametrize(
    "output,reference,ok",
    [
        ('{"answer": "\\\\frac{1}{2}"}', "\\frac{1}{2}", True),
        ('{"answer": "\\frac{1}{2}"}', "0.5", True),
        ('{"answer": "$\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$"}', "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("Therefore the area is $\\boxed{3\\sqrt{13}}$.", "3\\sqrt{13}", True),
        ('{"answer": "1152 cups"}', "1152", True),  # Yi-1.5-34B math-l5: a unit after the number
        ('{"answer": "6\\\\sqrt{2}"}', "6", False),  # ZeroEval's first-number rule would accept this
        ('{"answer": "2 + 3 = 5"}', "2", False),
        ('{"answer": "[2, 5)"}', "[2,5)", True),
        ("The answer is x = 5.", "5", True),
        ("no final answer anywhere", "5", False),
    ],
)
def test_math_equivalence(output, reference, ok):
    result = get_grader("math").grade(output, reference)
    assert result.correct is ok, result.reason


def test_math_grader_works_outside_the_main_thread():
    box: list[GradeResult] = []
    thread = threading.Thread(target=lambda: box.append(grade("math", "$\\boxed{\\frac{2}{4}}$", "\\frac12")))
    thread.start()
    thread.join()
    assert box[0].correct, box[0].reason


# ----------------------------------------------------------------------------- multiple choice
@pytest.mark.parametrize(
    "output,letter",
    [
        ('{"reasoning": "...", "answer": "D"}', "D"),
        ('{"reasoning": "...", "answer": "B (with correction)"}', "B"),  # Athene-70B, MMLU-Redux anatomy #1
        ("Answer: B", "B"),
        ("The correct answer is (C).", "C"),
        ("the answer is **A**", "A"),
        ("Reasoning first.\n\nFinal answer: \\boxed{D}", "D"),
        ("B", "B"),
        ("(D)", "D"),
        ("**C**", "C"),
        ("Let me think.\nThe options differ.\nC.", "C"),
        ("A. , two boys begin treading water", "A"),  # HellaSwag style: the option echoed
        ("I choose B because it fits.", "B"),
    ],
)
def test_multiple_choice_forms(output, letter):
    result = get_grader("mmlu").grade(output, letter)
    assert result.correct and result.extracted == letter, result.reason


def test_multiple_choice_does_not_mistake_words_for_letters():
    g = get_grader("arc_challenge")
    assert g.grade("A man walks into the bar and sits.", "A").extracted is None
    assert g.grade("The answer is a tricky one, I cannot tell.", "A").extracted is None
    meta = {"choices": ["Paris", "Rome", "Oslo", "Bern", "Wien"]}
    assert g.grade("Answer: E", "E", meta).correct  # five options
    assert g.grade("I am quite sure.\nRome", 1, meta).extracted == "B"  # option text, index reference


# ----------------------------------------------------------------------------- BBH
@pytest.mark.parametrize(
    "task,output,target,ok",
    [
        ("hyperbaton", "Let's think. ... So the answer is (B).", "(B)", True),
        ("hyperbaton", "So the answer is (A).", "(B)", False),
        ("date_understanding", '{"answer": "(D) 01/08/2019"}', "(D)", True),
        ("boolean_expressions", "not ( True ) and ( True ) = False. So the answer is False.", "False", True),
        ("formal_fallacies", "So the answer is invalid.", "valid", False),
        ("formal_fallacies", "So the answer is valid.", "valid", True),
        ("sports_understanding", "So the answer is yes.", "yes", True),
        ("navigate", "No, you do not return. So the answer is No.", "No", True),
        ("object_counting", "So the answer is 8.", "8", True),
        ("multistep_arithmetic_two", "(-6 + 2) * 6 = -24. So the answer is -24.", "-24", True),
        ("word_sorting", "So the answer is: barn damp delmarva dot.", "barn damp delmarva dot", True),
        ("word_sorting", "So the answer is: damp barn delmarva dot.", "barn damp delmarva dot", False),
        ("dyck_languages", "So the answer is ] ].", "] ]", True),
        ("dyck_languages", "So the answer is [ [ ] ].", "] ]", True),  # full sequence, input prefix + closing
        ("movie_recommendation", "So the answer is Monsters, Inc.", "Monsters, Inc", True),  # a BBH text target
    ],
)
def test_bbh_per_task_match(task, output, target, ok):
    meta = {"task": task}
    if task == "dyck_languages":
        meta["input"] = "Complete the rest of the sequence. Input: [ ["
    result = get_grader("bbh").grade(output, target, meta)
    assert result.correct is ok, result.reason


# ----------------------------------------------------------------------------- real ZeroEval outputs
def _zeroeval(data_dir: Path, bench: str, model: str) -> list[dict]:
    with gzip.open(data_dir / "outcomes" / "zeroeval" / bench / f"{model}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


# Accuracy of our GSM8K grader on every output of these runs, pinned (the comparison with
# ZeroEval's published numbers is in tests/test_zeroeval.py).
# Reading the last JSON answer (up to any prompt the model invents) moved Phi-3.5 from 84.69 and
# Yi-1.5-34B from 87.34: docs/grading.md lists every flipped grade.
GSM_PINNED = {"gemma-2-9b-it": 87.41, "Yi-1.5-34B-Chat": 87.57, "Phi-3.5-mini-instruct": 85.52}


@pytest.mark.parametrize("model", sorted(GSM_PINNED))
def test_gsm8k_on_all_real_outputs_of_a_model(data_dir, model):
    items = _zeroeval(data_dir, "gsm", model)
    assert len(items) == 1319
    results = [get_grader("gsm8k").grade(x["output"][0], x["answer"]) for x in items]
    acc = 100 * sum(r.correct for r in results) / len(results)
    assert acc == pytest.approx(GSM_PINNED[model], abs=0.005)
    assert all(r.reason for r in results)
    # every correct verdict read an answer; nearly all outputs yield one
    assert all(r.extracted is not None for r in results if r.correct)
    assert sum(r.extracted is None for r in results) < 0.02 * len(results)


def test_math_on_real_outputs_in_worker_processes(data_dir):
    items = _zeroeval(data_dir, "math-l5", "Qwen2.5-7B-Instruct")[:300]
    results = grade_batch("math-l5", [x["output"][0] for x in items], [x["answer"] for x in items],
                          processes=2, disable_progress=True)
    serial = [get_grader("math-l5").grade(x["output"][0], x["answer"]) for x in items[:40]]
    assert [r.correct for r in results[:40]] == [r.correct for r in serial]
    acc = sum(r.correct for r in results) / len(results)
    assert 0.45 < acc < 0.65  # 51.3 % over all 721 items
    by_id = {x["id"]: r for x, r in zip(items, results)}
    assert by_id[items[0]["id"]].extracted is not None


def test_math_reads_answers_that_json_loads_rejects(data_dir):
    items = _zeroeval(data_dir, "math-l5", "Phi-3-mini-4k-instruct")
    g = get_grader("math-l5")
    extracted = [g.extract(x["output"][0])[0] for x in items]
    # Phi-3-mini often writes LaTeX without escaping it and then echoes the prompt template:
    # the real answer must still be found.
    assert sum(e is None for e in extracted) < 0.05 * len(items)
    assert not any(e in ("___", "") for e in extracted if e is not None)


# GSM8K outputs with several JSON answers: the last one is the model's final answer. Real
# outputs, one per kind (docs/grading.md has all 32).
GSM_LAST_ANSWER = [
    ("Yi-1.5-9B-Chat", 17, "57500", True),  # "the correct total ... should be:" a corrected JSON
    ("Yi-1.5-9B-Chat", 115, "90", True),
    ("Yi-1.5-34B-Chat", 1052, "110", True),  # one JSON object per step, the last is the result
    ("Yi-1.5-9B-Chat", 1008, "110", False),  # first the right expression (230), then 110 as its result
    ("Phi-3.5-mini-instruct", 299, "31800", True),  # then invents "Question:"s and answers them
]


@pytest.mark.parametrize("model, line, extracted, correct", GSM_LAST_ANSWER)
def test_gsm8k_reads_the_last_json_answer_of_real_outputs(data_dir, model, line, extracted, correct):
    item = next(x for x in _zeroeval(data_dir, "gsm", model) if x["id"] == f"gsm8k-main-test-#{line}")
    result = get_grader("gsm8k").grade(item["output"][0], item["answer"])
    assert (result.extracted, result.correct) == (extracted, correct), result.reason
