"""Multiple choice (MMLU, ARC-Challenge, HellaSwag): the chosen option letter equals the key."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from routing_gym.grading.base import Grader, GraderInputError, GradeResult
from routing_gym.grading.extract import json_answer, last_boxed


def _letters(n: int) -> str:
    return string.ascii_uppercase[:n]


def _normalise_text(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def letter_in(value: str, letters: str) -> str | None:
    """The option letter a short answer string names: ``"B"``, ``"(B)"``, ``"**B**"``, ``"B. Paris"``,
    ``"Option B"``, ``"\\boxed{B}"``, ``"\\text{(B)}"``; ``None`` if it names none."""
    s = value.strip()
    boxed = last_boxed(s)
    if boxed is not None:
        s = boxed
    s = re.sub(r"\\text\{([^}]*)\}", r"\1", s)
    s = s.strip().strip("*_`'\"$ ").strip()
    cls = f"[{letters}]"
    patterns = (
        rf"^\(({cls})\)",  # "(B)", "(B) Paris"
        rf"^\[({cls})\]",  # "[B]"
        rf"^({cls})(?:[.:)\]]|\s*$)",  # "B", "B.", "B)", "B: Paris"
        rf"^({cls})\s+(?:[-\u2013\u2014]\s|\()",  # "B - Paris", "B (with correction)"
        rf"^(?i:option|choice|answer|letter)\s*[:#]?\s*\(?({cls})\)?(?![A-Za-z0-9])",
    )
    for pat in patterns:
        m = re.match(pat, s)
        if m:
            return m.group(1)
    return None


# Words match in any case, the letter only in capitals ("the answer is a prime" names no option).
_PHRASES = (
    # "the answer is (B)", "Answer: B", "correct option is **B**", "answer would be B"
    r"(?i:answer|option|choice)\s*(?i:is|would be|should be|:|=)\s*:?\s*(?i:option\s*|choice\s*|letter\s*)?"
    r"[\*_`\"']*[\(\[]?({cls})[\)\]]?[\*_`\"']*(?![A-Za-z0-9])",
    r"(?i:I\s+(?:choose|pick|select)|I'd\s+go\s+with)\s*(?i:option\s*)?[\*_`\"']*\(?({cls})\)?(?![A-Za-z0-9])",
    r"\\boxed\{\s*(?:\\text\{)?\(?({cls})\)?\}?\s*\}",
)


def lists_options(lines: Sequence[str], letters: str) -> bool:
    """Whether two or more lines start with different option letters (``"A. radio tower"``,
    ``"B. road"``): the model repeated the options, which is no answer."""
    starts = {m.group(1) for line in lines if (m := re.match(rf"^\s*\(?([{letters}])[.)]\s+\S", line))}
    return len(starts) >= 2


class MultipleChoiceGrader(Grader):
    """Reads the option letter a model chose.

    Order: a JSON ``answer`` field; the last "answer is (B)" / "Answer: B" / "**B**" / ``\\boxed{B}``
    phrase; a last line that is just a letter (``B``, ``(B)``, ``B.``, ``**B**``); an output that
    starts with a letter (``"B. Paris"``, for prompts that ask for a single letter); a last line
    that repeats exactly one option's text. An output that only lists the options
    (``"A. radio tower\\nB. road"``, seen from a real llama.cpp server) chose none. Valid letters come from ``metadata["choices"]``
    (or ``metadata["n_choices"]``), default A-D. The reference is a letter or a 0-based index.
    """

    name = "multiple_choice"

    def check_reference(self, reference: Any, metadata: Mapping[str, Any]) -> None:
        self.reference_letter(reference, metadata)

    def reference_letter(self, reference: Any, metadata: Mapping[str, Any]) -> str:
        letters = self.letters(metadata)
        if isinstance(reference, (int,)) and not isinstance(reference, bool):
            if 0 <= reference < len(letters):
                return letters[reference]
        elif isinstance(reference, str):
            letter = letter_in(reference, letters)
            if letter:
                return letter
        raise GraderInputError(f"{self.name}: reference {reference!r} is not an option of {letters}")

    @staticmethod
    def letters(metadata: Mapping[str, Any]) -> str:
        choices = metadata.get("choices")
        n = len(choices) if isinstance(choices, Sequence) and not isinstance(choices, str) and choices else None
        n = n or int(metadata.get("n_choices") or 4)
        return _letters(n)

    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult:
        gold = self.reference_letter(reference, metadata)
        letter, how = self.extract(output, metadata)
        if letter is None:
            return GradeResult(False, None, how)
        ok = letter == gold
        return GradeResult(ok, letter, f"{how}: {letter} {'==' if ok else '!='} {gold}")

    def extract(self, output: str, metadata: Mapping[str, Any]) -> tuple[str | None, str]:
        letters = self.letters(metadata)
        field = json_answer(output)
        if field is not None:
            letter = letter_in(field, letters) or self._match_choice_text(field, metadata)
            if letter:
                return letter, "json answer field"
        cls = f"[{letters}]"
        hits: list[tuple[int, str]] = []
        for pat in _PHRASES:
            hits.extend((m.start(), m.group(1)) for m in re.finditer(pat.replace("{cls}", cls), output))
        if hits:
            return max(hits)[1], "answer phrase"
        lines = [ln for ln in output.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
        bold = re.findall(rf"\*\*\(?({cls})\)?\*\*", output)
        letter = letter_in(last, letters) if len(last.strip().strip('*_`')) <= 4 else None
        if letter:
            return letter, "letter on the last line"
        if bold and len(set(bold)) == 1:
            return bold[-1], "bold letter"
        if lists_options(lines, letters):
            return None, "the output lists the options without choosing one"
        letter = letter_in(lines[0], letters) if lines else None
        if letter and len(lines) <= 3:
            return letter, "output starts with a letter"
        letter = self._match_choice_text(last, metadata)
        if letter:
            return letter, "last line repeats an option's text"
        return None, "no option letter found"

    @staticmethod
    def _match_choice_text(text: str, metadata: Mapping[str, Any]) -> str | None:
        choices = metadata.get("choices")
        if not isinstance(choices, Sequence) or isinstance(choices, str):
            return None
        target = _normalise_text(text)
        if not target:
            return None
        hits = [i for i, c in enumerate(choices) if _normalise_text(str(c)) == target]
        return _letters(len(choices))[hits[0]] if len(hits) == 1 else None
