"""GSM8K: the final number of the output equals the reference number."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from routing_gym.grading.base import Grader, GraderInputError, GradeResult
from routing_gym.grading.extract import (
    answer_is_phrase,
    eval_arithmetic,
    json_answer,
    last_boxed,
    numbers_equal,
    numbers_in,
    parse_number,
)


def reference_number(reference: str) -> str:
    """The gold number of a GSM8K reference: a bare number, ``"# 18"`` or a full solution ``... #### 18``."""
    text = str(reference)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
    nums = numbers_in(text)
    if not nums:
        raise GraderInputError(f"gsm8k reference has no number: {reference!r}")
    return nums[-1] if "####" in str(reference) else nums[0]


def _number_in_answer_field(value: str) -> str | None:
    """The number a stated answer means: the value after the last ``=``, else the value of a
    bare arithmetic expression, else the first number.

    ``"9 * 2 = 18"`` means 18; ``"(300 * 4) / 12"`` means 100; ``"18 dollars (9 eggs x $2)"``
    means 18.
    """
    if "=" in value:
        tail = value.rsplit("=", 1)[1]
        tail_nums = numbers_in(tail)
        if tail_nums:
            return tail_nums[0]
    computed = eval_arithmetic(value)
    if computed is not None:
        return format(computed.normalize(), "f")
    nums = numbers_in(value)
    return nums[0] if nums else None


LAST_LINE_MAX_CHARS = 300
# A model that goes on to write a new prompt ("## Question: ...") answers questions of its own
# after this point; its answer to the real question comes before.
_INVENTED_PROMPT = re.compile(r"\n[ \t]*(?:#+[ \t]*)?(?:Question|Instruction)\b")


def answer_part(output: str) -> str:
    """``output`` up to the first new prompt the model writes itself, when an answer precedes it."""
    m = _INVENTED_PROMPT.search(output)
    if m and json_answer(output[: m.start()]) is not None:
        return output[: m.start()]
    return output


class GSM8KGrader(Grader):
    """Numeric match on the final answer.

    The answer is read, in order, from the *last* JSON ``answer`` field, ``#### N``, a ``\\boxed{N}``,
    "the answer is N", and finally the last number of a short last line. An answer field
    that is an equation is read after its last ``=``, a bare arithmetic expression is evaluated. Thousands separators,
    currency signs, units, percent signs and trailing periods are ignored; simple fractions
    (``7/2``) are evaluated; numbers are compared with a relative tolerance of 1e-6.

    Why the last JSON answer: in the 16-model zeroeval-math tournament 68 GSM8K outputs hold
    two or more JSON answers and 32 of them grade differently by first or last. In 29 the
    last one is the model's final answer (a "corrected JSON" after it rechecks its arithmetic,
    or one JSON object per step, e.g. gsm8k/test/17, /115, /1052); in 3 the first one is
    right: gsm8k/test/299 and /745, where Phi-3.5-mini goes on to invent and answer new
    problems, and gsm8k/test/1008, where Yi-1.5-9B first writes the correct expression
    ``(45 * 10) - (55 * 4)`` and then states 110 as its result: graded wrong, as it should be.
    (ZeroEval's published rule takes the first.) In the two Phi-3.5 outputs, and two more
    where its last answer is wrong, it goes on to write ``Question:`` / ``## Instruction``
    prompts of its own and answers them: the output is read only up to such a new prompt
    when an answer precedes it (5 GSM8K outputs in that tournament, all Phi-3.5-mini). ``docs/grading.md``
    has the numbers.
    """

    name = "gsm8k"

    def check_reference(self, reference: Any, metadata: Mapping[str, Any]) -> None:
        super().check_reference(reference, metadata)
        reference_number(reference)

    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult:
        gold_lit = reference_number(reference)
        gold = parse_number(gold_lit)
        assert gold is not None
        literal, how = self.extract(output)
        if literal is None:
            return GradeResult(False, None, how)
        value = parse_number(literal)
        if value is None:
            return GradeResult(False, literal, f"unparsable number {literal!r} ({how})")
        ok = numbers_equal(value, gold)
        return GradeResult(ok, literal, f"{how}: {literal} {'==' if ok else '!='} {gold_lit}")

    @staticmethod
    def extract(output: str) -> tuple[str | None, str]:
        """``(number literal or None, how it was found / why not)``."""
        output = answer_part(output)
        field = json_answer(output, last=True)
        if field is not None:
            num = _number_in_answer_field(field)
            if num is not None:
                return num, "json answer field"
            boxed = last_boxed(field)
            if boxed is None:
                return None, f"json answer field has no number: {field[:80]!r}"
        hashes = re.findall(r"####\s*([^\n]+)", output)
        if hashes:
            nums = numbers_in(hashes[-1])
            if nums:
                return nums[0], "#### marker"
        boxed = last_boxed(output)
        if boxed is not None:
            num = _number_in_answer_field(boxed)
            if num is not None:
                return num, "boxed answer"
        phrase = answer_is_phrase(output)
        if phrase is not None:
            num = _number_in_answer_field(phrase)
            if num is not None:
                return num, "'answer is' phrase"
        # Last resort: the last number of a short final line ("... so she makes $18 a day.").
        # Not of a long one: a generation cut off mid-loop ends in an arbitrary number.
        lines = [ln for ln in output.strip().splitlines() if ln.strip()]
        if lines and len(lines[-1]) <= LAST_LINE_MAX_CHARS:
            nums = numbers_in(lines[-1])
            if nums:
                return nums[-1], "last number of the last line"
        return None, "no answer field, marker or phrase, and no number on a short last line"
