"""Graders, one per benchmark, in a registry by name.

>>> from routing_gym.grading import get_grader
>>> get_grader("gsm8k").grade('{"reasoning": "...", "answer": "$1,200."}', "1200").correct
True

Every grader returns a :class:`GradeResult` (verdict, extracted answer, reason) and never
raises on a malformed model output. Registered names: ``mmlu``, ``arc_challenge``,
``hellaswag`` (multiple choice), ``gsm8k``, ``math`` (also ``math500`` and ``math-l5``),
``bbh``, ``humaneval``. :func:`grade_batch` grades many outputs in worker processes.
"""

from routing_gym.grading.base import (
    MAX_OUTPUT_CHARS,
    Grader,
    GraderInputError,
    GradeResult,
    get_grader,
    grade,
    grade_batch,
    grader_names,
    register_grader,
)
from routing_gym.grading.bbh import BBHGrader
from routing_gym.grading.choice import MultipleChoiceGrader
from routing_gym.grading.gsm8k import GSM8KGrader
from routing_gym.grading.humaneval import HumanEvalGrader, RunResult, SandboxLimits, run_sandboxed
from routing_gym.grading.mathexpr import MathGrader

# Benchmark name -> grader factory; the names match ``routing_gym.sources.benchmarks``.
_BUILTIN = {
    "mmlu": lambda: MultipleChoiceGrader("mmlu"),
    "arc_challenge": lambda: MultipleChoiceGrader("arc_challenge"),
    "hellaswag": lambda: MultipleChoiceGrader("hellaswag"),
    "gsm8k": lambda: GSM8KGrader("gsm8k"),
    "math": lambda: MathGrader("math"),
    "math500": lambda: MathGrader("math500"),
    "math-l5": lambda: MathGrader("math-l5"),
    "bbh": lambda: BBHGrader("bbh"),
    "humaneval": lambda: HumanEvalGrader("humaneval"),
}
for _name, _factory in _BUILTIN.items():
    if _name not in grader_names():
        register_grader(_name, _factory)

__all__ = [
    "BBHGrader",
    "GSM8KGrader",
    "Grader",
    "GraderInputError",
    "GradeResult",
    "HumanEvalGrader",
    "MAX_OUTPUT_CHARS",
    "MathGrader",
    "MultipleChoiceGrader",
    "RunResult",
    "SandboxLimits",
    "get_grader",
    "grade",
    "grade_batch",
    "grader_names",
    "register_grader",
    "run_sandboxed",
]
