"""The seven question sets under ``<data_dir>/benchmarks/`` as query records, with prompts.

Each loader returns a DataFrame with the tournament query columns ``query_id``,
``benchmark``, ``prompt``, ``reference``, ``difficulty`` and ``metadata`` (a dict). The
``prompt`` is the full text a model receives, rendered from :data:`PROMPT_TEMPLATES`; the
``reference`` and ``metadata`` are what :mod:`routing_gym.grading` needs (the grader of a
benchmark is registered under the benchmark's name).

===============  ========================================  =====  ==========================
benchmark        file                                      items  reference
===============  ========================================  =====  ==========================
mmlu             ``mmlu/test/*.csv`` (57 subjects)         14042  option letter A-D
gsm8k            ``gsm8k/test.jsonl``                       1319  final number
bbh              ``bbh/*.json`` (27 tasks)                  6511  BBH target string
arc_challenge    ``arc_challenge/arc_challenge.jsonl``      1172  option letter
hellaswag        ``hellaswag/hellaswag_val_sample500...``    500  option letter A-D
math500          ``math500/test.jsonl``                      500  LaTeX answer
humaneval        ``humaneval/HumanEval.jsonl.gz``            164  test code (``check``)
===============  ========================================  =====  ==========================
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import string
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.paths import data_dir as resolve_data_dir

BENCHMARKS = ("mmlu", "gsm8k", "bbh", "arc_challenge", "hellaswag", "math500", "humaneval")

# One template per benchmark; ``{...}`` fields are filled by ``render_prompt``. They ask for
# the answer in the form each grader reads first, so grading does not depend on luck.
PROMPT_TEMPLATES: dict[str, str] = {
    "mmlu": (
        "The following is a multiple choice question about {subject}.\n\n{question}\n\n{options}\n\n"
        "Think briefly, then give your final answer on the last line as \"Answer: X\", where X is "
        "the letter of the correct option."
    ),
    "arc_challenge": (
        "The following is a multiple choice science question.\n\n{question}\n\n{options}\n\n"
        "Think briefly, then give your final answer on the last line as \"Answer: X\", where X is "
        "the letter of the correct option."
    ),
    "hellaswag": (
        "Choose the most plausible continuation of the text.\n\nContext: {question}\n\n{options}\n\n"
        "Give your final answer on the last line as \"Answer: X\", where X is the letter of the "
        "correct option."
    ),
    "gsm8k": (
        "Solve the following math word problem step by step.\n\n{question}\n\n"
        "End your response with the final numeric answer on its own line as \"#### N\"."
    ),
    "math500": (
        "Solve the following math problem step by step.\n\n{question}\n\n"
        "Put your final answer within \\boxed{{}}."
    ),
    "bbh": (
        "{question}\n\nThink step by step, then finish with \"So the answer is X.\" where X is the "
        "answer in the form the question asks for."
    ),
    "humaneval": (
        "Complete the following Python function. Return the complete function (signature and "
        "body, with any imports it needs) in a single ```python code block.\n\n```python\n{question}```"
    ),
}


def render_prompt(benchmark: str, question: str, choices: list[str] | None = None, subject: str = "") -> str:
    """The prompt for one question, from :data:`PROMPT_TEMPLATES`.

    ``choices`` are rendered as ``A. text`` lines for the multiple-choice benchmarks.
    """
    if benchmark not in PROMPT_TEMPLATES:
        raise RoutingGymError(f"no prompt template for benchmark {benchmark!r}; known: {', '.join(PROMPT_TEMPLATES)}")
    options = "\n".join(f"{string.ascii_uppercase[i]}. {c}" for i, c in enumerate(choices or []))
    return PROMPT_TEMPLATES[benchmark].format(question=question, options=options, subject=subject.replace("_", " "))


def _data_root(data_dir: str | os.PathLike | None) -> Path:
    root = resolve_data_dir(data_dir)
    assert root is not None
    return root


def _require(path: Path) -> Path:
    if not path.exists():
        raise RoutingGymError(f"{path}: missing (expected in the data directory; see its README)")
    return path


def _jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(_require(path), "rt", encoding="utf-8") as f:
            for row, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RoutingGymError(f"{path}, row {row}: not valid JSON ({exc.msg})") from None
                if not isinstance(obj, dict):
                    raise RoutingGymError(f"{path}, row {row}: expected a JSON object, got {type(obj).__name__}")
                yield row, obj
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise RoutingGymError(f"{path}: cannot read ({exc}); the file may be truncated or corrupt") from None


def _field(obj: dict[str, Any], name: str, path: Path, row: int, kind: type | tuple[type, ...] = str) -> Any:
    if name not in obj:
        raise RoutingGymError(f"{path}, row {row}, field {name!r}: missing")
    value = obj[name]
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise RoutingGymError(f"{path}, row {row}, field {name!r}: expected non-empty {kind}, got {value!r:.80}")
    return value


def _record(benchmark: str, qid: str, prompt: str, reference: str, metadata: dict[str, Any],
            difficulty: float = float("nan")) -> dict[str, Any]:
    return {"query_id": qid, "benchmark": benchmark, "prompt": prompt, "reference": reference,
            "difficulty": difficulty, "metadata": metadata}


def _gsm8k(root: Path) -> list[dict[str, Any]]:
    path = root / "benchmarks" / "gsm8k" / "test.jsonl"
    out = []
    for row, obj in _jsonl(path):
        question = _field(obj, "question", path, row)
        solution = _field(obj, "answer", path, row)
        if "####" not in solution:
            raise RoutingGymError(f"{path}, row {row}, field 'answer': no '####' final answer")
        reference = solution.rsplit("####", 1)[1].strip().replace(",", "")
        out.append(_record("gsm8k", f"gsm8k/test/{row - 1}", render_prompt("gsm8k", question), reference,
                           {"question": question, "solution": solution}))
    return out


def _math500(root: Path) -> list[dict[str, Any]]:
    path = root / "benchmarks" / "math500" / "test.jsonl"
    out = []
    for row, obj in _jsonl(path):
        problem = _field(obj, "problem", path, row)
        answer = _field(obj, "answer", path, row)
        level = _field(obj, "level", path, row, int)
        uid = _field(obj, "unique_id", path, row)
        out.append(_record("math500", f"math500/{uid.removesuffix('.json')}", render_prompt("math500", problem), answer,
                           {"question": problem, "subject": obj.get("subject", ""), "level": level, "unique_id": uid},
                           difficulty=(level - 1) / 4))  # MATH levels 1-5 -> [0, 1]
    return out


def _mmlu(root: Path) -> list[dict[str, Any]]:
    folder = _require(root / "benchmarks" / "mmlu" / "test")
    files = sorted(folder.glob("*_test.csv"))
    if not files:
        raise RoutingGymError(f"{folder}: no *_test.csv files")
    out = []
    for path in files:
        subject = path.name.removesuffix("_test.csv")
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            expected = {"question", "choice0", "choice1", "choice2", "choice3", "answer"}
            if not expected <= set(reader.fieldnames or []):
                raise RoutingGymError(f"{path}: columns {reader.fieldnames}, expected {sorted(expected)}")
            for row, rec in enumerate(reader, start=1):
                choices = [rec[f"choice{i}"] for i in range(4)]
                try:
                    answer = int(rec["answer"])
                    if not 0 <= answer < 4:
                        raise ValueError
                except ValueError:
                    raise RoutingGymError(f"{path}, row {row}, field 'answer': {rec['answer']!r} is not 0-3") from None
                question = rec["question"]
                out.append(_record("mmlu", f"mmlu/{subject}/{row - 1}", render_prompt("mmlu", question, choices, subject),
                                   "ABCD"[answer], {"question": question, "choices": choices, "subject": subject}))
    return out


def _arc(root: Path) -> list[dict[str, Any]]:
    path = root / "benchmarks" / "arc_challenge" / "arc_challenge.jsonl"
    out = []
    for row, obj in _jsonl(path):
        query = _field(obj, "query", path, row)
        choices = _field(obj, "choices", path, row, list)
        gold = _field(obj, "gold", path, row, int)
        if not 0 <= gold < len(choices):
            raise RoutingGymError(f"{path}, row {row}, field 'gold': {gold} outside the {len(choices)} choices")
        question = query.removeprefix("Question:").strip()
        out.append(_record("arc_challenge", f"arc_challenge/{row - 1}",
                           render_prompt("arc_challenge", question, [str(c) for c in choices]),
                           string.ascii_uppercase[gold], {"question": question, "choices": [str(c) for c in choices]}))
    return out


_HS_OPTION = re.compile(r"^([A-D])\. ?(.*)$")


def _hellaswag(root: Path) -> list[dict[str, Any]]:
    path = _require(root / "benchmarks" / "hellaswag" / "hellaswag_val_sample500.csv.gz")
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise RoutingGymError(f"{path}: cannot read ({exc}); the file may be truncated or corrupt") from None
    out = []
    for row, rec in enumerate(csv.DictReader(io.StringIO(text)), start=1):
        rendered = rec.get("processed_input") or ""
        m = re.search(r"Context:\n(.*?)\nOptions:\n(.*?)\nAnswer:", rendered, re.DOTALL)
        if not m:
            raise RoutingGymError(f"{path}, row {row}, field 'processed_input': no 'Context:/Options:/Answer:' layout")
        context = m.group(1).strip()
        choices = []
        for line in m.group(2).splitlines():
            om = _HS_OPTION.match(line)
            if om:
                choices.append(om.group(2))
            elif choices:  # an option text that spans lines
                choices[-1] += "\n" + line
        reference = (rec.get("reference") or "").strip()
        if len(choices) != 4 or reference not in "ABCD" or not reference:
            raise RoutingGymError(f"{path}, row {row}: expected 4 options and a reference A-D, got "
                                  f"{len(choices)} options and {reference!r}")
        out.append(_record("hellaswag", f"hellaswag/{(rec.get('id') or str(row)).removeprefix('hellaswag_')}", render_prompt("hellaswag", context, choices),
                           reference, {"question": context, "choices": choices}))
    return out


def _bbh(root: Path) -> list[dict[str, Any]]:
    folder = _require(root / "benchmarks" / "bbh")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise RoutingGymError(f"{folder}: no task files (*.json)")
    out = []
    for path in files:
        task = path.stem
        try:
            examples = json.loads(path.read_text(encoding="utf-8"))["examples"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise RoutingGymError(f"{path}: not a BBH task file with an 'examples' list ({exc})") from None
        for row, obj in enumerate(examples, start=1):
            question = _field(obj, "input", path, row)
            target = _field(obj, "target", path, row)
            out.append(_record("bbh", f"bbh/{task}/{row - 1}", render_prompt("bbh", question), target,
                               {"question": question, "task": task, "input": question}))
    return out


def _humaneval(root: Path) -> list[dict[str, Any]]:
    path = root / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
    out = []
    for row, obj in _jsonl(path):
        task_id = _field(obj, "task_id", path, row)
        code_prompt = _field(obj, "prompt", path, row)
        test = _field(obj, "test", path, row)
        entry = _field(obj, "entry_point", path, row)
        out.append(_record("humaneval", f"humaneval/{task_id.split('/')[-1]}", render_prompt("humaneval", code_prompt),
                           test, {"task_id": task_id, "entry_point": entry, "code_prompt": code_prompt,
                                  "canonical_solution": obj.get("canonical_solution", "")}))
    return out


_LOADERS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    "mmlu": _mmlu,
    "gsm8k": _gsm8k,
    "bbh": _bbh,
    "arc_challenge": _arc,
    "hellaswag": _hellaswag,
    "math500": _math500,
    "humaneval": _humaneval,
}


def load_benchmark(name: str, data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One question set as query records (``data_dir`` defaults to ``ROUTING_GYM_DATA_DIR``)."""
    if name not in _LOADERS:
        raise RoutingGymError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return pd.DataFrame(_LOADERS[name](_data_root(data_dir)))


def load_benchmarks(names: Iterable[str] | None = None, data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Several question sets (default: all seven) concatenated, in :data:`BENCHMARKS` order."""
    frames = [load_benchmark(n, data_dir) for n in (list(names) if names is not None else BENCHMARKS)]
    return pd.concat(frames, ignore_index=True)
