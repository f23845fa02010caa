"""MATH (MATH-500, MATH level 5): extracted final answer equivalent to the reference (math-verify)."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from routing_gym.grading.base import Grader, GradeResult
from routing_gym.grading.extract import answer_is_phrase, json_answer, last_boxed

# Per-call limits for math-verify (seconds); sympy can stall on adversarial expressions.
PARSE_TIMEOUT_S = 3
VERIFY_TIMEOUT_S = 5


def _is_prose(text: str) -> bool:
    plain = re.sub(r"\\[A-Za-z]+(\{[^}]*\})?", " ", text)  # drop \text{...}, \frac, ...
    return len(re.findall(r"\b[A-Za-z]{3,}\b", plain)) >= 3


_MATH_WORDS = {"pi", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "infty"}


# "6√2", "√(x+1)", "√{3}": math-verify drops a bare Unicode root ("6√2" parses as 6).
_UNICODE_ROOT = re.compile(r"√\s*(\d+(?:\.\d+)?|[A-Za-z]|\([^()]*\)|\{[^{}]*\})")
# An answer that ends in an ellipsis is an unending list, not its last element.
_ELLIPSIS_END = re.compile(r"(?:\.\.\.|…|\\[lc]?dots)\s*\$*\s*$")


def normalise_unicode_math(text: str) -> str:
    """``"4√2 + 8"`` -> ``"4\\sqrt{2} + 8"``, ``"√(x+1)"`` -> ``"\\sqrt{x+1}"`` (math-verify reads ``π`` itself)."""
    return _UNICODE_ROOT.sub(lambda m: "\\sqrt{" + m.group(1).strip("(){}") + "}", text)


def ends_with_ellipsis(text: str) -> bool:
    return _ELLIPSIS_END.search(text.strip()) is not None


def _strip_wrappers(answer: str) -> str:
    s = answer.strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\\(|\\\)$", "", s).strip()
    s = re.sub(r"^\\\[|\\\]$", "", s).strip()
    if not ends_with_ellipsis(s):  # "12." ends a sentence; "9, 18, 27, ..." must keep its "..."
        s = re.sub(r"[\s.]+$", "", s)
    s = s.strip("\"'`").strip()  # Answer: "23"
    # "1152 cups", "12 \text{ inches}": a number followed only by unit words
    m = re.fullmatch(r"(-?[\d.,/]*\d)\s*(?:\\text\{\s*[A-Za-z ]+\}|\\(?:mbox|mathrm)\{[A-Za-z ]+\}|[A-Za-z]+(?:\s+[A-Za-z]+)*)", s)
    if m:
        words = set(re.findall(r"[A-Za-z]+", re.sub(r"\\(?:text|mbox|mathrm)", "", s[m.end(1):])))
        if not words & _MATH_WORDS and not any(len(w) == 1 for w in words):  # "5x", "3 pi" are math
            return m.group(1).replace(",", "")
    return s


class MathGrader(Grader):
    """Answer equivalence with math-verify.

    The candidate answer is, in order: the JSON ``answer`` field (ZeroEval's format; a
    ``\\boxed{}`` inside it wins), the last ``\\boxed{}`` of the output, "the answer is ...".
    The candidate and the reference are each wrapped in ``$...$`` so math-verify reads them as
    LaTeX (``\\frac{1}{2}``, ``(3, \\pi/2)``, ``[2, 5)``), falling back to math-verify's own
    extraction from the raw text. A Unicode ``√`` is rewritten as ``\\sqrt{}`` first
    (math-verify reads ``"6√2"`` as 6), and an answer ending in an ellipsis
    (``"9, 18, 27, 36, ..."``) is an unending list, never equal to a reference without one. math-verify times out with ``signal.alarm``: call this grader
    from a main thread, or use :func:`routing_gym.grading.grade_batch` (worker processes).
    In any other thread it runs without math-verify's timeouts rather than raising.
    """

    name = "math"

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self._gold_cache: dict[str, list] = {}

    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult:
        candidate, how = self.extract(output)
        if candidate is None:
            return GradeResult(False, None, how)
        gold = self._parse_reference(str(reference))
        if not gold:
            return GradeResult(False, candidate, f"math-verify could not parse the reference {reference!r}")
        if ends_with_ellipsis(candidate) and not ends_with_ellipsis(str(reference)):
            # math-verify reads "9, 18, 27, 36, ..." as 36
            return GradeResult(False, candidate, f"{how}: an unending list (ends with an ellipsis), not {reference!r}")
        pred = self._parse(candidate)
        if not pred:
            return GradeResult(False, candidate, f"math-verify could not parse the answer ({how})")
        ok = self._verify(gold, pred)
        return GradeResult(ok, candidate, f"{how}: math-verify {'equivalent' if ok else 'not equivalent'} to {reference!r}")

    @staticmethod
    def extract(output: str) -> tuple[str | None, str]:
        field = json_answer(output)
        if field is not None and field.strip() and not re.fullmatch(r"[_\s.]*", field):
            boxed = last_boxed(field)
            return _strip_wrappers(boxed if boxed is not None else field), "json answer field"
        boxed = last_boxed(output)
        if boxed is not None:
            return _strip_wrappers(boxed), "boxed answer"
        phrase = answer_is_phrase(output)
        if phrase is not None and _strip_wrappers(phrase):
            return _strip_wrappers(phrase), "'answer is' phrase"
        return None, "no final answer found (no json answer field, \\boxed{} or 'answer is')"

    @staticmethod
    def _timeouts() -> tuple[int | None, int | None]:
        # signal.alarm only works in the main thread of the main interpreter
        if threading.current_thread() is threading.main_thread():
            return PARSE_TIMEOUT_S, VERIFY_TIMEOUT_S
        return None, None

    def _parse(self, text: str) -> list:
        from math_verify import parse

        parse_t, _ = self._timeouts()
        text = normalise_unicode_math(text)
        if _is_prose(text):
            # "The degree is 6, because ...": math-verify's own extraction reads prose quickly;
            # wrapped in $...$ it would parse every word as a product of symbols (seconds).
            result = parse(text, parsing_timeout=parse_t)
            if result:
                return result
        has_math_delims = re.search(r"(?<!\\)\$", text) or "\\boxed" in text
        result = parse(text if has_math_delims else f"${text}$", parsing_timeout=parse_t)
        return result if result else parse(text, parsing_timeout=parse_t)

    def _parse_reference(self, reference: str) -> list:
        # references repeat across models: parse each once per process
        if reference not in self._gold_cache:
            if len(self._gold_cache) > 50_000:
                self._gold_cache.clear()
            self._gold_cache[reference] = self._parse(reference)
        return self._gold_cache[reference]

    def _verify(self, gold: list, pred: list) -> bool:
        from math_verify import verify

        _, verify_t = self._timeouts()
        return bool(verify(gold, pred, timeout_seconds=verify_t))
