"""Prompt, targets and parser of the text controller (a small LM that writes its routing choice).

The prompt shows the query's benchmark name (the label ``per-benchmark`` routes by; a benchmark
the controller never trained on is named all the same), the question, optionally a fixed legend
mapping letters to the candidate models (name and size) and, optionally, a difficulty field. Two output formats:

- ``"choice"``: exactly ``Choice: C``;
- ``"rationale"``: ``Reason: <one short sentence>``, then ``Choice: C`` on its own line.

``parse_choice`` maps a completion back to a model index, or to ``INVALID`` (-1), which the
env scores with the reward's ``invalid_penalty``. Nothing here imports torch or TRL.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

OutputFormat = Literal["choice", "rationale"]
FORMATS: tuple[str, ...] = ("choice", "rationale")
INVALID = -1
LETTERS = string.ascii_uppercase

# "Choice:" in any case, then one capital letter, optionally in brackets, and no letter or
# digit right after it. Capital letters only, so "Choice: a small model" is not read as "A".
_CHOICE_RE = re.compile(r"(?i:choice)\s*:\s*[\(\[]?([A-Z])(?![A-Za-z0-9])")


def _letter_of(match: re.Match[str]) -> str:
    return match.group(1)


@dataclass(frozen=True)
class ModelLegend:
    """The fixed letter -> candidate model mapping shown in every prompt (tournament order)."""

    model_ids: tuple[str, ...]
    params_b: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.model_ids:
            raise ValueError("a legend needs at least one candidate model")
        if len(self.model_ids) > len(LETTERS):
            raise ValueError(
                f"the text controller names models by one letter A-Z, so at most {len(LETTERS)} candidates; "
                f"got {len(self.model_ids)}"
            )
        if len(self.params_b) != len(self.model_ids):
            raise ValueError(f"{len(self.model_ids)} model ids but {len(self.params_b)} sizes")

    @classmethod
    def from_tournament(cls, tournament: Any) -> ModelLegend:
        params = tournament.models["params_b"].to_numpy(dtype=float)
        return cls(tuple(tournament.model_ids), tuple(float(p) for p in params))

    @property
    def k(self) -> int:
        return len(self.model_ids)

    @property
    def letters(self) -> str:
        return LETTERS[: self.k]

    def letter(self, index: int) -> str:
        if not 0 <= index < self.k:
            raise IndexError(f"model index {index} outside [0, {self.k})")
        return LETTERS[index]

    def size(self, index: int) -> str:
        p = self.params_b[index]
        # Two significant digits: "0.49B", "7.6B", "33B" (every digit is a prompt token).
        return "size unknown" if not math.isfinite(p) else f"{p:.2g}B"

    def describe(self, index: int) -> str:
        return f"{self.model_ids[index]} ({self.size(index)})"

    def text(self) -> str:
        return "\n".join(f"{self.letter(i)}: {self.describe(i)}" for i in range(self.k))


@dataclass(frozen=True)
class PromptBuilder:
    """Builds the controller's messages; ``system`` holds the instructions and, with
    ``show_legend``, the legend.

    Without the legend the letters are bare labels whose meaning SFT teaches (a 135M model
    cannot use model names anyway): the 9-16 legend lines were most of every training prompt's
    tokens (experiments/results/text_controller/profile/). The legend stays the letters'
    mapping either way (``legend.model_ids``): it is what a letter means and what is saved.
    """

    legend: ModelLegend
    output_format: OutputFormat = "choice"
    include_difficulty: bool = False
    max_question_chars: int = 400
    show_legend: bool = True
    include_benchmark: bool = False  # the controller's config turns it on (PromptSettings)

    def __post_init__(self) -> None:
        if self.output_format not in FORMATS:
            raise ValueError(f"output format must be one of {FORMATS}, got {self.output_format!r}")
        if self.max_question_chars < 1:
            raise ValueError(f"max_question_chars must be >= 1, got {self.max_question_chars}")

    def system(self) -> str:
        last = self.legend.letters[-1]
        if self.output_format == "choice":
            reply = f"Reply only with 'Choice: X', X in A-{last}."
        else:
            reply = f"Reply with 'Reason: ' and one short sentence, then a line 'Choice: X', X in A-{last}."
        task = "Choose the model that answers the question correctly with the fewest joules."
        if not self.show_legend:
            return f"{task} {reply}"
        return f"{task}\nModels:\n{self.legend.text()}\n{reply}"

    def user(self, question: str, difficulty: float | None = None, benchmark: str | None = None) -> str:
        # Long questions are cut: the controller decides from the opening, and every prompt
        # token costs router joules at inference time.
        q = " ".join(str(question).split())
        if len(q) > self.max_question_chars:
            q = q[: self.max_question_chars].rstrip() + " ..."
        text = f"Question: {q}"
        if self.include_benchmark:
            # First, so the label sits in the same place in every prompt.
            if not benchmark:
                raise ValueError("include_benchmark=True but the query has no benchmark name")
            text = f"Benchmark: {benchmark}\n{text}"
        if self.include_difficulty:
            if difficulty is None or not math.isfinite(float(difficulty)):
                raise ValueError("include_difficulty=True but the query has no difficulty value")
            text += f"\nDifficulty: {float(difficulty):.2f}"
        return text

    def messages(self, question: str, difficulty: float | None = None, benchmark: str | None = None) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system()},
            {"role": "user", "content": self.user(question, difficulty, benchmark)},
        ]

    def plain(self, question: str, difficulty: float | None = None, benchmark: str | None = None) -> str:
        """The same prompt as one string, for models without a chat template."""
        return f"{self.system()}\n\n{self.user(question, difficulty, benchmark)}\nAnswer:\n"

    def prompts(
        self,
        questions: Sequence[str],
        difficulty: Sequence[float] | None,
        chat: bool,
        benchmarks: Sequence[str] | None = None,
    ) -> list[Any]:
        """One prompt per question; ``benchmarks``: each question's benchmark name."""
        if self.include_difficulty and difficulty is None:
            raise ValueError("include_difficulty=True but the batch has no difficulty column")
        if self.include_benchmark and benchmarks is None:
            raise ValueError("include_benchmark=True but the batch has no benchmark names")
        d = [None] * len(questions) if difficulty is None else list(difficulty)
        b = [None] * len(questions) if benchmarks is None else list(benchmarks)
        build = self.messages if chat else self.plain
        return [build(q, x, name) for q, x, name in zip(questions, d, b)]

    def choice_line(self, index: int) -> str:
        return f"Choice: {self.legend.letter(index)}"


def completion_text(completion: Any) -> str:
    """The text of a completion: a plain string or TRL's ``[{"role": "assistant", ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, (list, tuple)):
        return "".join(
            completion_text(m)
            for m in completion
            if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
        )
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


def parse_choice(completion: Any, k: int) -> int:
    """Model index chosen by ``completion``, or ``INVALID`` (-1).

    Valid when the text holds at least one ``Choice: X`` with X one of the first ``k``
    capital letters, and every ``Choice:`` in it names the same letter (a hedge such as
    ``Choice: A or Choice: B`` is invalid, not credited to either model).
    """
    if not 1 <= k <= len(LETTERS):
        raise ValueError(f"k must be in [1, {len(LETTERS)}], got {k}")
    text = completion_text(completion)
    letters = {_letter_of(m) for m in _CHOICE_RE.finditer(text)}
    if len(letters) != 1:
        return INVALID
    index = LETTERS.index(letters.pop())
    return index if index < k else INVALID


def parse_choices(completions: Sequence[Any], k: int) -> np.ndarray:
    return np.array([parse_choice(c, k) for c in completions], dtype=np.int64)


# ---------------------------------------------------------------------- SFT targets
def named_model(completion: Any, legend: ModelLegend) -> int:
    """The model a rationale names first (text before the first ``Choice:``), or ``INVALID``.

    A diagnostic for the rationale format: a controller whose reason names one model and whose
    choice names another has learnt the template, not the decision. Where ids overlap, the
    longest id at the earliest position wins.
    """
    text = completion_text(completion)
    match = _CHOICE_RE.search(text)
    reason = (text[: match.start()] if match else text).lower()
    found = [(reason.find(m.lower()), -len(m), k) for k, m in enumerate(legend.model_ids) if m.lower() in reason]
    return min(found)[2] if found else INVALID


def rationale_sentence(
    legend: ModelLegend,
    target: int,
    correct: np.ndarray,
    energy_j: np.ndarray,
) -> str:
    """One short deterministic sentence about a training row that states only logged facts.

    ``correct`` and ``energy_j`` are the row's ``[K]`` outcomes. The sentence depends on what
    is true of the target: the lowest-energy fully correct model, the lowest-energy model when
    no model was correct, or (fractional correctness) its logged pass rate and joules. Short
    and regular on purpose: a 135M controller learns it in a few steps, and every generated
    token is router cost.
    """
    correct = np.asarray(correct, dtype=float)
    energy_j = np.asarray(energy_j, dtype=float)
    name = legend.model_ids[target]  # no size here: "name (size)" lines would echo the legend
    if correct.max() <= 0.0:
        if energy_j[target] <= energy_j.min():
            return f"no model answered correctly, and {name} uses the fewest joules."
        return "no model answered correctly."
    fully = correct >= 1.0
    if fully[target] and energy_j[target] <= energy_j[fully].min():
        return f"{name} answered correctly with the fewest joules."
    # Any other target (a fractional pass rate, or a predicted-best route that this draw got
    # wrong or paid more for): its logged pass rate and joules, no claim of being best.
    return f"{name} was {correct[target]:.0%} correct at {energy_j[target]:.0f} J."


def target_completion(
    builder: PromptBuilder,
    target: int,
    correct: np.ndarray | None = None,
    energy_j: np.ndarray | None = None,
) -> str:
    """The SFT completion for one training row in the builder's output format."""
    line = builder.choice_line(target)
    if builder.output_format == "choice":
        return line
    if correct is None or energy_j is None:
        raise ValueError("rationale targets need the row's correct and energy_j outcomes")
    # A fixed first word, like "Choice:" in the short format, so the controller locks onto
    # the format from its first token.
    return f"Reason: {rationale_sentence(builder.legend, target, correct, energy_j)}\n{line}"
