"""BIG-Bench Hard: per-task normalised exact match of the final answer."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from routing_gym.grading.base import Grader, GradeResult
from routing_gym.grading.choice import letter_in
from routing_gym.grading.extract import json_answer, last_boxed, numbers_equal, numbers_in, parse_number

# Answer type of each of the 27 tasks (targets as in suzgun/BIG-Bench-Hard).
TASK_KINDS: dict[str, str] = {
    "boolean_expressions": "bool",
    "causal_judgement": "yesno",
    "date_understanding": "option",
    "disambiguation_qa": "option",
    "dyck_languages": "dyck",
    "formal_fallacies": "valid",
    "geometric_shapes": "option",
    "hyperbaton": "option",
    "logical_deduction_five_objects": "option",
    "logical_deduction_seven_objects": "option",
    "logical_deduction_three_objects": "option",
    "movie_recommendation": "option",
    "multistep_arithmetic_two": "number",
    "navigate": "yesno",
    "object_counting": "number",
    "penguins_in_a_table": "option",
    "reasoning_about_colored_objects": "option",
    "ruin_names": "option",
    "salient_translation_error_detection": "option",
    "snarks": "option",
    "sports_understanding": "yesno",
    "temporal_sequences": "option",
    "tracking_shuffled_objects_five_objects": "option",
    "tracking_shuffled_objects_seven_objects": "option",
    "tracking_shuffled_objects_three_objects": "option",
    "web_of_lies": "yesno",
    "word_sorting": "words",
}

_WORDS = {
    "bool": ("true", "false"),
    "yesno": ("yes", "no"),
    "valid": ("valid", "invalid"),
}


def _kind(task: str | None, target: str) -> str:
    if task in TASK_KINDS:
        return TASK_KINDS[task]
    t = target.strip()
    if re.fullmatch(r"\([A-Z]\)", t):
        return "option"
    low = t.lower()
    for kind, words in _WORDS.items():
        if low in words:
            return kind
    if parse_number(t) is not None:
        return "number"
    return "text"


def _final_answer_text(output: str) -> tuple[str, str]:
    """The part of the output that states the answer, and how it was found."""
    field = json_answer(output)
    if field is not None and field.strip():
        return field, "json answer field"
    boxed = last_boxed(output)
    if boxed is not None:
        return boxed, "boxed answer"
    matches = list(re.finditer(r"(?i:the\s+(?:final\s+)?answer\s+is|answer\s*:)\s*(.+)", output))
    if matches:
        return matches[-1].group(1), "'answer is' phrase"
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else ""), "last line"


def _clean(s: str) -> str:
    s = re.sub(r"\\text\{([^}]*)\}", r"\1", s)
    return s.strip().strip("*_`'\"$ ").rstrip(".").strip()


def _option_letters(metadata: Mapping[str, Any]) -> str:
    found = re.findall(r"^\(([A-Z])\)", str(metadata.get("input", "")), re.MULTILINE)
    return "".join(sorted(set(found))) or string.ascii_uppercase[:18]


def _dyck_tokens(s: str) -> list[str]:
    return re.findall(r"[\[\]\(\)\{\}<>]", s)


class BBHGrader(Grader):
    """Normalised exact match, by the answer type of ``metadata["task"]``.

    The stated answer is read from a JSON ``answer`` field, a ``\\boxed{}``, the last
    "the answer is ..." (BBH's own chain-of-thought format) or the last line. Then:
    options compare the letter (``"(B)"``, ``"B"``, ``"B. text"``); True/False, Yes/No and
    valid/invalid compare the word case-insensitively (``"invalid"`` is never read as
    ``"valid"``); numbers compare numerically; word lists compare the lower-cased word
    sequence; Dyck sequences compare the bracket sequence, also accepting the input prefix
    followed by the expected closing brackets (``metadata["input"]``).
    """

    name = "bbh"

    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult:
        target = str(reference).strip()
        kind = _kind(metadata.get("task"), target)
        stated, how = _final_answer_text(output)
        answer = _clean(stated)
        if not answer:
            return GradeResult(False, None, f"no answer found ({how})")
        verdict = getattr(self, f"_{kind}", self._text)(answer, target, metadata)
        if verdict is None:
            return GradeResult(False, answer[:200], f"{how}: no {kind} answer in {answer[:80]!r}")
        ok, extracted = verdict
        return GradeResult(ok, extracted, f"{how} ({kind}): {extracted!r} {'==' if ok else '!='} {target!r}")

    def _option(self, answer: str, target: str, metadata: Mapping[str, Any]):
        gold = re.fullmatch(r"\(?([A-Z])\)?", target)
        letters = _option_letters(metadata)
        letter = letter_in(answer, letters)
        if letter is None:
            m = re.findall(rf"\(([{letters}])\)", answer)
            letter = m[-1] if m else None
        if gold is None:  # a few BBH targets are option texts, e.g. "Monsters, Inc"
            return self._text(answer, target, metadata)
        if letter is None:
            return None
        return letter == gold.group(1), f"({letter})"

    def _choose_word(self, answer: str, target: str, kind: str):
        words = _WORDS[kind]
        low = answer.lower()
        found = [(m.start(), m.group(0)) for m in re.finditer(rf"\b({'|'.join(words)})\b", low)]
        if not found:
            return None
        # The first word stated is the answer ("No, because ..."); "invalid" never matches "valid"
        # thanks to the word boundary.
        word = found[0][1]
        return word == target.lower(), word

    def _bool(self, answer: str, target: str, metadata: Mapping[str, Any]):
        return self._choose_word(answer, target, "bool")

    def _yesno(self, answer: str, target: str, metadata: Mapping[str, Any]):
        return self._choose_word(answer, target, "yesno")

    def _valid(self, answer: str, target: str, metadata: Mapping[str, Any]):
        return self._choose_word(answer, target, "valid")

    def _number(self, answer: str, target: str, metadata: Mapping[str, Any]):
        nums = numbers_in(answer.split("=")[-1]) or numbers_in(answer)
        gold = parse_number(target)
        if not nums or gold is None:
            return None
        value = parse_number(nums[0])
        return (value is not None and numbers_equal(value, gold)), nums[0]

    def _words(self, answer: str, target: str, metadata: Mapping[str, Any]):
        got = re.findall(r"[a-z0-9&'\-]+", answer.lower())
        want = re.findall(r"[a-z0-9&'\-]+", target.lower())
        return got == want, " ".join(got)

    def _dyck(self, answer: str, target: str, metadata: Mapping[str, Any]):
        got = _dyck_tokens(answer)
        want = _dyck_tokens(target)
        if not got:
            return None
        prefix = _dyck_tokens(str(metadata.get("input", "")).rsplit("Input:", 1)[-1])
        ok = got == want or (bool(prefix) and got == prefix + want)
        return ok, " ".join(got)

    def _text(self, answer: str, target: str, metadata: Mapping[str, Any]):
        norm = lambda s: re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()  # noqa: E731
        return norm(answer) == norm(target), answer[:200]
