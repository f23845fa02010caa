"""Nine-model tournament from LLMRouter's RouterDC scores, with DERIVED energy.

Source: ``<data_dir>/outcomes/llmrouter/`` (ulab-uiuc/LLMRouter @ 4e7a7969, MIT):
``dcrouter_preprocessed/{train,test}.json.gz`` give, per question, a score in [0, 1] for
each of nine models (no texts, tokens or energy); ``example_data/query_data`` gives each
question's task name and ground truth, joined here on the exact question text.

- **correct** (real): LLMRouter's score (exact match, F1 for open QA, coverage for
  CommonGen, pass@1 for code), used as it is.
- **input tokens** (proxy): the question counted with the Qwen2/Qwen2.5 tokenizer.
- **output tokens** (assumption): one length per task for every model,
  :data:`OUTPUT_TOKENS_BY_TASK` (GSM8K and MATH from the median output lengths of the
  ZeroEval pool; the others assumed from the answer format). No per-query lengths exist.
- **energy, latency, power** (derived): output tokens x the model's H100 joules and seconds
  per output token, plus prefill, exactly as in :mod:`routing_gym.sources.zeroeval`
  (ML.ENERGY v2 run of the same model at max batch size 128, else the power-law fit), or under
  another energy model (:mod:`routing_gym.sources.energy_model`, ``energy_model=``).

Because every model's length is the same assumption per task, energy here ranks models by
size only, never by verbosity: use it for routing experiments that need a plausible
accuracy-energy trade-off, not for energy claims.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.sources import BUILD_VERSIONS
from routing_gym.paths import data_dir as resolve_data_dir
from routing_gym.sources.energy_model import (
    MLENERGY_SOURCE,
    ModelSpec,
    card_energy_fit,
    derive_energy_profiles,
    serving_fields,
    tournament_name,
)
from routing_gym.sources.zeroeval import BuildReport, count_tokens
from routing_gym.tournament.duplicates import duplicate_counts

LLMROUTER_SOURCE = "ulab-uiuc/LLMRouter @ 4e7a7969, data/dcrouter_preprocessed/ and data/example_data/ (MIT)"

# The nine scored models (LLMRouter ids); parameters from their model cards. ML.ENERGY
# measured four of them (codegemma-7b on its code task) and the architecture of the two ChatQA
# models (Llama-3 8B / 70B); the rest use the energy law. Serving as LLMRouter states it (NVIDIA_API).
NVIDIA_API = ("answered through NVIDIA's API (LLMRouter example_data/llm_candidates/default_llm.json: service "
              "'NVIDIA'); precision and GPUs not stated: priced as the bf16 checkpoint")
LLMROUTER_MODELS: dict[str, ModelSpec] = {name: replace(spec, serving_note=NVIDIA_API) for name, spec in {
    "qwen2.5-7b-instruct": ModelSpec("Qwen/Qwen2.5-7B-Instruct", "qwen2.5", 7.62),
    "llama-3.1-8b-instruct": ModelSpec("meta-llama/Llama-3.1-8B-Instruct", "llama3.1", 8.03,
                                       mlenergy_id="meta-llama/Meta-Llama-3.1-8B-Instruct"),
    "gemma-2-9b-it": ModelSpec("google/gemma-2-9b-it", "gemma2", 9.24, mlenergy_id="google/gemma-2-9b-it"),
    "mistral-7b-instruct-v0.3": ModelSpec("mistralai/Mistral-7B-Instruct-v0.3", "mistral", 7.25,
                                          mlenergy_id="mistralai/Mistral-7B-Instruct-v0.3"),
    "codegemma-7b": ModelSpec("google/codegemma-7b", "gemma", 8.54, mlenergy_id="google/codegemma-7b"),
    "llama3-chatqa-1.5-8b": ModelSpec("nvidia/Llama3-ChatQA-1.5-8B", "llama3", 8.03,
                                      same_architecture_as="meta-llama/Meta-Llama-3.1-8B-Instruct"),
    "llama3-chatqa-1.5-70b": ModelSpec("nvidia/Llama3-ChatQA-1.5-70B", "llama3", 70.6,
                                       same_architecture_as="meta-llama/Meta-Llama-3.1-70B-Instruct"),
    "llama-3.1-nemotron-51b-instruct": ModelSpec("nvidia/Llama-3_1-Nemotron-51B-Instruct", "nemotron", 51.5),
    "llama-3.3-nemotron-super-49b-v1": ModelSpec("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "nemotron", 49.9),
}.items()}

# Assumed output tokens per answer, by LLMRouter task (the same for every model).
OUTPUT_TOKENS_BY_TASK: dict[str, int] = {
    "gsm8k": 154,  # median over the 16-model ZeroEval pool on GSM8K (JSON reasoning + answer), Qwen2.5 tokens
    "agentverse-mgsm": 154,  # same kind of grade-school word problems
    "math": 359,  # median over the ZeroEval pool on MATH level 5 (harder than LLMRouter's MATH mix)
    "agentverse-logicgrid": 256,  # a short deduction chain
    "human_eval": 160,  # one Python function
    "mbpp": 160,
    "mmlu": 64,  # a letter with a sentence of justification
    "arc_challenge": 64,
    "openbook_qa": 64,
    "commonsense_qa": 64,
    "gpqa": 128,  # hard multiple choice: a longer justification
    "natural_qa": 24,  # a short factual answer
    "trivia_qa": 24,
    "commongen": 40,  # one sentence
}

# LLMRouter task names that are routing-gym benchmarks under another name.
BENCHMARK_NAMES = {"human_eval": "humaneval"}


def _root(data_dir: str | os.PathLike | None) -> Path:
    root = resolve_data_dir(data_dir)
    assert root is not None
    return root


def _read_json_gz(path: Path, lines: bool = False) -> Any:
    if not path.exists():
        raise RoutingGymError(f"{path}: missing (expected LLMRouter data in the data directory; see its README)")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            if not lines:
                return json.load(f)
            out = []
            for row, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise RoutingGymError(f"{path}, row {row}: not valid JSON ({exc.msg})") from None
            return out
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise RoutingGymError(f"{path}: cannot read ({exc}); the file may be truncated or corrupt") from None
    except json.JSONDecodeError as exc:
        raise RoutingGymError(f"{path}: not valid JSON ({exc.msg} at char {exc.pos}); truncated or corrupt?") from None


def load_task_index(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Question text -> its records in ``example_data/query_data`` (train file first)."""
    index: dict[str, list[dict[str, Any]]] = {}
    for split in ("train", "test"):
        path = root / "outcomes" / "llmrouter" / "example_data" / "query_data" / f"default_query_{split}.jsonl.gz"
        for row, rec in enumerate(_read_json_gz(path, lines=True), start=1):
            for key in ("task_name", "query"):
                if not isinstance(rec.get(key), str):
                    raise RoutingGymError(f"{path}, row {row}, field {key!r}: missing or not text")
            index.setdefault(rec["query"], []).append(rec)
    return index


def build_llmrouter_tournament(data_dir: str | os.PathLike | None = None, energy_model: str = "batched"):
    """Build the LLMRouter tournament. Returns ``(tournament, report)``.

    Every scored question is kept; a question whose text has no task record is an error
    (the two files come from the same commit), and the six questions whose text carries two
    task names take the first one (train file first), with all names in
    ``metadata["task_candidates"]``.

    Split: LLMRouter's own files hold 119 test questions whose text is also in train, so the
    queries are re-split by group (``Tournament.with_splits``, seed 0): every copy of a
    normalised text on one side, each task cut in LLMRouter's own train : test numbers for that
    task (50 test questions for each of its 10 test tasks, none for the other 4), so the test
    split keeps its size (500) and task mix. Moving the 119 copies into train instead would
    shrink the test split by a quarter, unevenly across tasks. The file a query came from stays
    in ``metadata["llmrouter_split"]`` and its id.
    ``energy_model``: as in :func:`routing_gym.sources.zeroeval.build_zeroeval_tournament`.
    """
    from routing_gym.tournament import DataCard, Tournament

    t_start = time.monotonic()
    root = _root(data_dir)
    index = load_task_index(root)
    name = tournament_name("llmrouter", energy_model)
    profiles, energy_info = derive_energy_profiles(energy_model, list(LLMROUTER_MODELS), root, specs=LLMROUTER_MODELS)
    model_ids = list(LLMROUTER_MODELS)

    queries, scores = [], []
    ambiguous = 0
    for split in ("train", "test"):
        path = root / "outcomes" / "llmrouter" / "dcrouter_preprocessed" / f"{split}.json.gz"
        items = _read_json_gz(path)
        if not isinstance(items, list) or not items:
            raise RoutingGymError(f"{path}: expected a non-empty JSON list")
        for row, item in enumerate(items, start=1):
            question = item.get("question") if isinstance(item, dict) else None
            item_scores = item.get("scores") if isinstance(item, dict) else None
            if not isinstance(question, str) or not question.strip():
                raise RoutingGymError(f"{path}, row {row}, field 'question': missing or empty")
            if not isinstance(item_scores, dict) or set(item_scores) != set(model_ids):
                got = sorted(item_scores) if isinstance(item_scores, dict) else item_scores
                raise RoutingGymError(f"{path}, row {row}, field 'scores': expected the nine models {model_ids}, got {got}")
            bad = {m: v for m, v in item_scores.items() if not isinstance(v, (int, float)) or not 0 <= v <= 1}
            if bad:
                raise RoutingGymError(f"{path}, row {row}, field 'scores': values outside [0, 1]: {bad}")
            records = index.get(question)
            if not records:
                raise RoutingGymError(f"{path}, row {row}: question has no task record in example_data/query_data "
                                      f"({question[:60]!r}...)")
            tasks = list(dict.fromkeys(r["task_name"] for r in records))
            ambiguous += len(tasks) > 1
            rec = records[0]
            task = rec["task_name"]
            if task not in OUTPUT_TOKENS_BY_TASK:
                raise RoutingGymError(f"{path}, row {row}: task {task!r} has no output-length assumption "
                                      f"(OUTPUT_TOKENS_BY_TASK)")
            qid = f"llmrouter/{split}/{row - 1}"
            queries.append({
                "query_id": qid, "benchmark": BENCHMARK_NAMES.get(task, task), "prompt": question,
                "reference": str(rec.get("ground_truth", "")), "split": split, "difficulty": float("nan"),
                "metadata": {"llmrouter_split": split, "task_name": task, "metric": rec.get("metric"), "choices": rec.get("choices"),
                             "cluster_id": item.get("cluster_id"), "task_candidates": tasks},
            })
            scores.append([float(item_scores[m]) for m in model_ids])

    qframe = pd.DataFrame(queries)
    correct = np.asarray(scores)
    input_tokens = count_tokens(qframe["prompt"].tolist())
    output_tokens = np.array([OUTPUT_TOKENS_BY_TASK[m["task_name"]] for m in qframe["metadata"]], dtype=float)
    n, k = correct.shape
    energy = np.column_stack([profiles[m].energy_j(input_tokens, output_tokens) for m in model_ids])
    latency = np.column_stack([profiles[m].latency_s(input_tokens, output_tokens) for m in model_ids])
    outcomes = pd.DataFrame({
        "query_id": np.repeat(qframe["query_id"].to_numpy(), k), "model_id": np.tile(model_ids, n),
        "correct": correct.ravel(), "energy_j": energy.ravel(), "latency_s": latency.ravel(),
        "mean_power_w": (energy / latency).ravel(), "input_tokens": np.repeat(input_tokens, k),
        "output_tokens": np.repeat(output_tokens, k),
    })
    model_rows = [{
        "model_id": m, "family": spec.family, "params_b": spec.params_b, "reasoning": False,
        "serving": {**serving_fields(m, spec, profiles[m], energy_info),
                    "output_tokens": "assumed per task (OUTPUT_TOKENS_BY_TASK)"},
        "energy_provenance": energy_info["provenance"],
        "energy_source": profiles[m].source + "; output length assumed per task, identical for every model",
    } for m, spec in LLMROUTER_MODELS.items()]
    duplicates = duplicate_counts(qframe["prompt"], qframe["split"])
    file_sizes = qframe["split"].value_counts()
    card = DataCard(
        name=name,
        provenance=energy_info["provenance"],
        description=(
            f"{n} questions from 14 tasks x {k} models: real per-question scores from LLMRouter (RouterDC data); "
            f"energy, latency and power {energy_info['description']}, with ASSUMED output lengths per "
            "task (the same for every model). No texts, tokens or energy were measured."
        ),
        licence="MIT (LLMRouter data); Apache-2.0 (ML.ENERGY leaderboard v2 data)",
        sources=[LLMROUTER_SOURCE, MLENERGY_SOURCE],
        hardware=energy_info["hardware"],
        notes=[
            "correct: LLMRouter's score per question and model (exact match, F1, coverage or pass@1)",
            "output tokens: assumed per task, identical for every model: " + json.dumps(OUTPUT_TOKENS_BY_TASK),
            "input tokens: the question, Qwen2.5 tokenizer",
            *energy_info["card_notes"],
            f"{ambiguous} questions carry two task names in LLMRouter's files; the first (train file first) is used",
            f"{duplicates['cross_split_texts']} normalised question texts ({duplicates['cross_split_queries']} queries) "
            "occur in both of LLMRouter's train/test files; kept as separate queries, re-split by group so that all "
            "copies of a text are on one side",
        ],
        extra={"build_version": BUILD_VERSIONS["llmrouter"], "output_tokens_by_task": OUTPUT_TOKENS_BY_TASK,
               "energy_model": energy_model, "energy_fit": card_energy_fit(energy_info)},
    )
    per_task = pd.crosstab(qframe["benchmark"], qframe["split"]).reindex(columns=["train", "test"], fill_value=0)
    tournament = Tournament.from_records(qframe, model_rows, outcomes, card, source=name).with_splits(
        seed=0, proportions={"train": int(file_sizes["train"]), "test": int(file_sizes["test"])},
        benchmark_proportions={b: {"train": int(r["train"]), "test": int(r["test"])} for b, r in per_task.iterrows()})
    grades = pd.DataFrame({"query_id": outcomes["query_id"], "model_id": outcomes["model_id"],
                           "benchmark": np.repeat(qframe["benchmark"].to_numpy(), k), "correct": outcomes["correct"]})
    report = BuildReport(name, model_ids, [], [], grades, {"total_s": time.monotonic() - t_start}, energy_info)
    return tournament, report
