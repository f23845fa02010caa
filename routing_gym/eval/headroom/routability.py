"""Does the question text say *which* model wins, or only how hard the question is?

The measures ``routing-gym headroom`` reports beside its ladder (``eval/headroom/__init__.py``), each
computed from per-model correctness estimates ``P`` (``[n, K]``) against held-out outcomes:

- **within-benchmark AUC**: per (benchmark, model), the AUC of ``P[:, k]`` for "model k is
  right", pooled as the share of (right, wrong) question pairs of one benchmark and model that
  ``P`` orders correctly (ties count half). The benchmark label alone scores 0.5 here.
- **pairwise AUC**: the pairs that decide a route. Per (benchmark, model pair i < j), over the
  questions where exactly one of the two is right, the AUC of ``P_i - P_j`` for "i is the right
  one", pooled the same way. A predictor of shared difficulty alone (or of the label's main
  effects: one model better on a benchmark) scores 0.5: within one pair and benchmark it orders
  nothing; only text that tells the models apart scores above.
- **the oracle's lead by question**: how much of the gap between two per-query correctness
  vectors (the oracle and the task-aware router at matched joules) comes from questions that
  exactly 1, 2, ... models answer right.
- **the noise floor**: the guessing rate of multiple-choice questions (options recorded in the
  queries' metadata: ``options``, or ``choices`` as a list, a ``{"text": [...]}`` mapping or its
  string form), and how often copies of one question (``tournament/duplicates.py``) within one
  split disagree on a model's outcome, which no reader of the text can predict.

Correctness is read as right when it is at least 0.5 (fractional outcomes are pass rates).
"""

from __future__ import annotations

import ast
from typing import Any, Sequence

import numpy as np
import pandas as pd

from routing_gym.tournament.duplicates import question_groups


def stratified_auc(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> pd.DataFrame:
    """Per group: ``n_pos``, ``n_neg`` and the Mann-Whitney AUC of ``scores`` for ``labels``
    (average ranks for ties; NaN where a group lacks either class). One pass for all groups."""
    frame = pd.DataFrame({"group": np.asarray(groups), "score": np.asarray(scores, dtype=np.float64),
                          "pos": np.asarray(labels, dtype=bool)})
    frame["rank"] = frame.groupby("group", sort=False)["score"].rank(method="average")
    frame["pos_rank"] = frame["rank"].where(frame["pos"], 0.0)
    per = frame.groupby("group", sort=True).agg(n=("pos", "size"), n_pos=("pos", "sum"), rank_pos=("pos_rank", "sum"))
    per["n_neg"] = per["n"] - per["n_pos"]
    pairs = per["n_pos"] * per["n_neg"]
    with np.errstate(invalid="ignore", divide="ignore"):
        per["auc"] = np.where(pairs > 0, (per["rank_pos"] - per["n_pos"] * (per["n_pos"] + 1) / 2) / pairs, np.nan)
    per["pairs"] = pairs
    return per[["n_pos", "n_neg", "pairs", "auc"]]


def pooled_auc(per_group: pd.DataFrame) -> float:
    """The share of within-group (positive, negative) pairs ordered correctly: group AUCs
    weighted by their number of pairs (NaN when no group has both classes)."""
    ok = per_group["pairs"] > 0
    if not ok.any():
        return float("nan")
    return float((per_group.loc[ok, "auc"] * per_group.loc[ok, "pairs"]).sum() / per_group.loc[ok, "pairs"].sum())


def within_benchmark_auc(p: np.ndarray, correct: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """Per (benchmark code, model): the AUC of ``P[:, k]`` for model k being right."""
    n, k = correct.shape
    groups = (np.repeat(np.asarray(codes, dtype=np.int64), k) * k + np.tile(np.arange(k), n))
    per = stratified_auc(np.asarray(p).ravel(), (np.asarray(correct) >= 0.5).ravel(), groups)
    per["benchmark"], per["model"] = per.index // k, per.index % k
    return per.reset_index(drop=True)


def pairwise_auc(p: np.ndarray, correct: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """Per (benchmark code, model i, model j), i < j, over the questions exactly one of the two
    answers right: the AUC of ``P_i - P_j`` for "i is the right one"."""
    right = np.asarray(correct) >= 0.5
    p = np.asarray(p, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    k = right.shape[1]
    first, second = np.triu_indices(k, 1)
    if not first.size:  # one model: no pair to decide
        return pd.DataFrame(columns=["n_pos", "n_neg", "pairs", "auc", "benchmark", "model_i", "model_j"])
    scores, labels, groups = [], [], []
    for pair, (i, j) in enumerate(zip(first, second)):
        split = right[:, i] != right[:, j]
        scores.append(p[split, i] - p[split, j])
        labels.append(right[split, i])
        groups.append(codes[split] * len(first) + pair)
    per = stratified_auc(np.concatenate(scores), np.concatenate(labels), np.concatenate(groups))
    pair_ids = per.index % len(first)
    per["benchmark"], per["model_i"], per["model_j"] = per.index // len(first), first[pair_ids], second[pair_ids]
    return per.reset_index(drop=True)


def routability(p: np.ndarray, correct: np.ndarray, codes: np.ndarray, benchmarks: Sequence[str],
                model_ids: Sequence[str]) -> dict[str, Any]:
    """Both AUCs pooled, per benchmark and per model (JSON-ready)."""
    within, pairs = within_benchmark_auc(p, correct, codes), pairwise_auc(p, correct, codes)
    per_benchmark = []
    for b, name in enumerate(benchmarks):
        mine = pairs[pairs["benchmark"] == b]
        per_benchmark.append({"benchmark": name, "within_benchmark_auc": pooled_auc(within[within["benchmark"] == b]),
                              "pairwise_auc": pooled_auc(mine), "decisive_pairs": int((mine["n_pos"] + mine["n_neg"]).sum())})
    per_model = []
    for m, name in enumerate(model_ids):
        mine = pairs[(pairs["model_i"] == m) | (pairs["model_j"] == m)]
        per_model.append({"model": name, "within_benchmark_auc": pooled_auc(within[within["model"] == m]),
                          "pairwise_auc": pooled_auc(mine)})
    return {"within_benchmark_auc": pooled_auc(within), "pairwise_auc": pooled_auc(pairs),
            "decisive_pairs": int((pairs["n_pos"] + pairs["n_neg"]).sum()),
            "per_benchmark": per_benchmark, "per_model": per_model}


def lead_by_models_right(lead_correct: np.ndarray, base_correct: np.ndarray, correct: np.ndarray) -> dict[str, Any]:
    """Where the lead of one per-query correctness vector over another comes from, by how many
    models answer each question right: per count, its questions and its share of the summed
    difference; ``rare_share``: the share from questions that only one or two models answer."""
    n_right = (np.asarray(correct) >= 0.5).sum(axis=1)
    diff = np.asarray(lead_correct, dtype=np.float64) - np.asarray(base_correct, dtype=np.float64)
    total = float(diff.sum())
    classes = []
    for count in range(correct.shape[1] + 1):
        mine = n_right == count
        classes.append({"models_right": count, "questions": int(mine.sum()), "lead_pp": 100 * float(diff[mine].sum()) / len(diff),
                        "share": float(diff[mine].sum()) / total if total else float("nan")})
    rare = np.isin(n_right, (1, 2))
    return {"lead_pp": 100 * total / len(diff), "by_models_right": classes,
            "rare_questions": int(rare.sum()), "rare_share": float(diff[rare].sum()) / total if total else float("nan")}


# ---------------------------------------------------------------------- the noise floor
def option_count(metadata: Any) -> int | None:
    """The number of answer options a query's metadata records, or None (not multiple choice,
    or not recorded)."""
    if not isinstance(metadata, dict):
        return None
    for key in ("options", "n_options", "choices"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip().startswith(("{", "[")):
            try:
                value = ast.literal_eval(value)  # LLMRouter stores the choices as a Python repr
            except (ValueError, SyntaxError):
                continue
        if isinstance(value, dict):
            value = value.get("text", value.get("label"))
        if isinstance(value, (list, tuple)):
            value = len(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 2:
            return int(value)
    return None


def noise_floor(queries: pd.DataFrame, correct: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """The guessing rate per benchmark (questions with recorded options, mean 1 / options) and
    the outcome disagreement between copies of one question within each split, over ``rows``."""
    rows = np.asarray(rows, dtype=np.int64)
    q = queries.iloc[rows]
    options = np.array([option_count(m) or 0 for m in q["metadata"]] if "metadata" in q else np.zeros(len(q)), dtype=float)
    guessing = []
    for name, idx in pd.Series(np.arange(len(q))).groupby(q["benchmark"].to_numpy(), sort=True):
        opts = options[idx.to_numpy()]
        mc = opts >= 2
        guessing.append({"benchmark": str(name), "questions": int(len(opts)), "multiple_choice": int(mc.sum()),
                         "median_options": float(np.median(opts[mc])) if mc.any() else None,
                         "guessing_rate": float((1 / opts[mc]).mean()) if mc.any() else None})
    mc = options >= 2
    groups = question_groups(q["prompt"])
    splits = q["split"].to_numpy(dtype=object)
    key = pd.Series(list(zip(splits, groups)))
    sizes = key.map(key.value_counts()).to_numpy()
    copied = sizes > 1
    right = (np.asarray(correct)[rows] >= 0.5)
    disagree_cells, cells = 0, 0
    if copied.any():
        frame = pd.DataFrame(right[copied]).groupby(key[copied].to_numpy())
        spread = frame.max() != frame.min()  # [groups with copies, K]: copies disagree on this model
        disagree_cells, cells = int(spread.to_numpy().sum()), int(spread.size)
    return {
        "guessing": {"rule": "1 / options over multiple-choice questions (options from the queries' metadata)",
                     "multiple_choice": int(mc.sum()), "questions": int(len(q)),
                     "guessing_rate": float((1 / options[mc]).mean()) if mc.any() else None,
                     "per_benchmark": guessing},
        "copies": {"rule": "groups of copies of one normalised question text within one split; a cell is (group, model), "
                           "disagreeing when the copies' outcomes differ",
                   "groups": int(key[copied].nunique()), "queries": int(copied.sum()), "cells": cells,
                   "disagreeing_cells": disagree_cells,
                   "disagreement_rate": disagree_cells / cells if cells else None},
    }
