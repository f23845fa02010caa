"""Leave-one-benchmark-out comparisons: routers on a benchmark they never saw in training.

``run_leave_one_benchmark_out`` runs ``compare``'s cells once per fold on any executor (one
``CompareJob`` per held-out benchmark, every fold's missing cells in one ``run_jobs``), each fold
in its own sub-folder ``<out>/held-out/<benchmark>/`` (its ``cells/`` saved as they arrive, so a
rerun resumes), and then reads every fold on the yardstick of an unseen benchmark:

- the fold (``lobo_fold``): every question of the held-out benchmark, and every copy of one
  under another benchmark, is ``test``; every other question trains (a source's own test split
  included: the held-out benchmark is the only thing a router is scored on);
- routing gain: accuracy - the fixed-model chain chosen on the fold's training split at the
  router's mean joules (pp; ``eval/yardstick.py``). On an unseen benchmark the label carries
  nothing, so the task-aware chain reduces to this one;
- the privileged label value: the gain over the same chain of the route the benchmark label would
  have bought had the benchmark been seen, i.e. the ``per-benchmark`` rule (the model of best mean
  reward under compare's reward, ties to the cheaper) chosen on the held-out benchmark's own
  outcomes, cross-fitted: the questions are dealt into ``CROSS_FIT_FOLDS`` folds by copy groups and
  each question's model is chosen on the other folds. It reads held-out outcomes: a reference,
  never a router;
- share of the label's value recovered = router gain / label value, from the same resamples; it is
  reported only where the label's value is clearly positive (its interval above 0 and at least
  ``MIN_LABEL_VALUE_PP``), and the row says why not otherwise.

Intervals are percentile intervals over the fold's resamples (``compare``'s plan: copies of a
question together). Pooled figures weight each fold by its number of held-out questions; the
folds' resamples are independent, so a pooled resample is the weighted sum of one resample per
fold. Verdicts ("above"/"below" 0) come from the Romano-Wolf step-down (``eval/familywise.py``)
over the deployable agent rows of each table (each fold, and the pooled table).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from routing_gym.errors import UsageError
from routing_gym.eval import audit, familywise
from routing_gym.eval.compare import CompareConfig, CompareJob, CompareResult, run_jobs, write_outputs
from routing_gym.eval.compare.cells import scoring_env
from routing_gym.eval.hull import best_per_benchmark
from routing_gym.eval.jsonsafe import strict_json
from routing_gym.eval.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.yardstick import Yardstick
from routing_gym.tournament import Tournament, leave_one_benchmark_out
from routing_gym.tournament.duplicates import question_groups

HELD_OUT_DIR = "held-out"
CROSS_FIT_FOLDS = 5
MIN_LABEL_VALUE_PP = 1.0  # below this the share of the label's value is a ratio of noise
LABEL = "label, had it been seen (privileged)"


def lobo_folds(t: Tournament, benchmarks: Sequence[str] | None = None) -> list[tuple[str, Tournament]]:
    """One fold per benchmark (default every one): it tests, every other question trains."""
    everything_trains = t.with_splits(proportions={"train": 1.0, "test": 0.0})
    return list(leave_one_benchmark_out(everything_trains, benchmarks))


def fold_dir(out_dir: str | Path, benchmark: str) -> Path:
    return Path(out_dir) / HELD_OUT_DIR / re.sub(r"[^A-Za-z0-9_.-]", "_", benchmark)


@dataclass
class UnseenResult:
    """Every fold's ``CompareResult`` and the unseen-benchmark table (one row per fold x method,
    and the pooled rows with ``benchmark == "pooled"``)."""

    folds: dict[str, CompareResult]
    rows: list[dict[str, Any]]
    label: list[dict[str, Any]]  # the privileged label value per fold and pooled
    chains: dict[str, list[str]]  # per fold: the fixed-model chain chosen on its training split

    @property
    def failures(self) -> list[Any]:
        return [f for result in self.folds.values() for f in result.failures]


def run_leave_one_benchmark_out(config: CompareConfig, benchmarks: Sequence[str] | None = None,
                                out_dir: str | Path | None = None) -> UnseenResult:
    """Every fold's cells on ``config.executor`` (resuming from ``<out>/held-out/<b>/cells``),
    then the unseen-benchmark yardstick (module docstring)."""
    from routing_gym.sources import resolve_tournament

    if config.train_split != "train" or config.test_split != "test":
        raise UsageError("leave-one-benchmark-out sets the splits itself (train: the other benchmarks, test: the "
                         f"held-out one); got --train-split {config.train_split!r} --test-split {config.test_split!r}")
    t = resolve_tournament(config.tournament)
    jobs = {b: CompareJob(replace(config, tournament=fold), fold_dir(out_dir, b) if out_dir is not None else None,
                          label=f"{b}: ") for b, fold in lobo_folds(t, benchmarks)}
    run_jobs(list(jobs.values()), config.executor, workers=config.workers, max_retries=config.max_retries,
             ray_address=config.ray_address, progress=config.progress)
    return unseen_summary({b: job.result() for b, job in jobs.items()})


def cross_fitted_label(reward: np.ndarray, energy_j: np.ndarray, prompts: Sequence[str], seed: int = 0) -> np.ndarray:
    """The per-benchmark route of one benchmark's questions, cross-fitted: ``[n]`` model indices
    from their ``[n, K]`` reward and joules, each question's model chosen (best mean reward,
    ties to the cheaper) on the other ``CROSS_FIT_FOLDS`` folds, copies of a question in one fold."""
    groups = question_groups(prompts)
    n_groups = int(groups.max()) + 1
    if n_groups < 2:
        raise UsageError("a held-out benchmark needs at least two distinct questions to cross-fit its label")
    fold = (np.random.default_rng(seed).permutation(n_groups) % min(CROSS_FIT_FOLDS, n_groups))[groups]
    actions = np.empty(len(groups), dtype=np.int64)
    for f in np.unique(fold):
        other = fold != f
        actions[~other] = best_per_benchmark(reward[other].mean(axis=0)[None], energy_j[other].mean(axis=0)[None])[0]
    return actions


def _fold_gains(result: CompareResult, seed: int) -> dict[str, Any]:
    """Point and resampled routing gains (fractions) of every agent row and of the privileged label."""
    t, rows, config = result.tournament, result.test_rows, result.config
    train = t.split_rows(config.train_split)
    chain = Yardstick.chosen_on_train(t.energy_j[train].mean(axis=0), t.correct[train].mean(axis=0), list(t.model_ids))
    methods = [r["method"] for r in result.rows if r["kind"] == "agent" and r["seeds_ok"]]
    per_query = {m: [np.mean([run.per_query[k] for run in result.runs if run.method == m and run.status == "ok"], axis=0)
                     for k in ("correct", "energy_j")] for m in methods}
    reward = scoring_env(t, config.test_split, result.reward).core.reward_matrix  # compare's reward on held-out
    label = cross_fitted_label(reward, t.energy_j[rows], t.queries["prompt"].to_numpy()[rows], seed)
    per_query[LABEL] = [t.correct[rows, label].astype(np.float64), t.energy_j[rows, label]]
    names = methods + [LABEL]
    k = t.n_models
    block = np.concatenate([np.stack([per_query[m][0] for m in names], axis=1), np.stack([per_query[m][1] for m in names], axis=1),
                            t.correct[rows], t.energy_j[rows]], axis=1)
    # compare's plan, its seed moved per fold: pooled resamples add independent folds
    plan = BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[rows], config.n_bootstrap, config.bootstrap_seed + seed)
    boot, point = plan.means(block), block.mean(axis=0)
    m = len(names)

    def gains(values: np.ndarray) -> np.ndarray:
        acc, joules = values[..., :m], values[..., m:2 * m]
        fixed_acc, fixed_j = values[..., 2 * m:2 * m + k], values[..., 2 * m + k:]
        return chain.gain(fixed_j[..., None, :], fixed_acc[..., None, :], joules, acc)

    return {"names": names, "point": gains(point), "boot": gains(boot), "n": len(rows), "chain": chain.names,
            "accuracy": point[:m], "energy_j": point[m:2 * m],
            "deployable": {r["method"]: bool(r["deployable"]) and not audit.withheld(r["deployable_label"])
                           for r in result.rows if r["method"] in methods},
            "audit": {r["method"]: r["deployable_label"] for r in result.rows if r["method"] in methods},
            "confidence": config.confidence}


def _table(benchmark: str, n: int, names: list[str], point: np.ndarray, boot: np.ndarray, deployable: dict[str, bool],
           confidence: float, extra: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of one table (a fold or the pooled one): gains, shares and family-wise verdicts."""
    lab = names.index(LABEL)
    label_low, label_high = percentile_interval(100 * boot[:, lab], confidence)
    label_pp = 100 * float(point[lab])
    if label_low <= 0:
        why = f"label's value not above 0 (its {confidence:.0%} interval reaches {label_low:+.2f} pp)"
    elif label_pp < MIN_LABEL_VALUE_PP:
        why = f"label's value {label_pp:.2f} pp < {MIN_LABEL_VALUE_PP} pp"
    else:
        why = ""
    family = [i for i, name in enumerate(names) if name != LABEL and deployable.get(name, False)]
    decisions = {}
    if family:
        decision = familywise.stepdown(100 * point[family], 100 * boot[:, family], 1 - confidence)
        decisions = {names[i]: d for i, d in zip(family, decision.decisions)}
    rows = []
    for i, name in enumerate(names):
        if name == LABEL:
            continue
        low, high = percentile_interval(100 * boot[:, i], confidence)
        row = {"benchmark": benchmark, "n": n, "method": name, "routing_gain_pp": 100 * float(point[i]),
               "routing_gain_pp_ci_low": float(low), "routing_gain_pp_ci_high": float(high),
               "verdict": decisions.get(name, "not in family" if not deployable.get(name, False) else familywise.NONE),
               "label_value_pp": label_pp, "share_of_label": None, "share_ci_low": None, "share_ci_high": None,
               "share_note": why, **extra.get(name, {})}
        if not why:
            share_boot = boot[:, i] / boot[:, lab]  # label value > 0 in all but the tail: finite almost everywhere
            s_low, s_high = percentile_interval(share_boot[np.isfinite(share_boot)], confidence)
            row.update(share_of_label=float(point[i] / point[lab]), share_ci_low=float(s_low), share_ci_high=float(s_high))
        rows.append(row)
    label = {"benchmark": benchmark, "n": n, "label_value_pp": label_pp, "ci_low": float(label_low),
             "ci_high": float(label_high), "share_reported": not why, "note": why}
    return rows, label


def unseen_summary(folds: dict[str, CompareResult]) -> UnseenResult:
    """The unseen-benchmark table of finished folds (module docstring), per fold and pooled."""
    rows: list[dict[str, Any]] = []
    labels, chains, fold_gains = [], {}, {}
    for j, (benchmark, result) in enumerate(folds.items()):
        g = _fold_gains(result, seed=j)
        fold_gains[benchmark], chains[benchmark] = g, g["chain"]
        extra = {name: {"accuracy": float(g["accuracy"][i]), "mean_energy_j": float(g["energy_j"][i]),
                        "deployable": g["audit"].get(name, "")} for i, name in enumerate(g["names"])}
        fold_rows, label = _table(benchmark, g["n"], g["names"], g["point"], g["boot"], g["deployable"], g["confidence"], extra)
        rows += fold_rows
        labels.append(label)
    if len(folds) > 1:  # pooled over the methods every fold has, each fold weighted by its questions
        names = [n for n in next(iter(fold_gains.values()))["names"] if all(n in g["names"] for g in fold_gains.values())]
        total = sum(g["n"] for g in fold_gains.values())
        point = sum(g["n"] / total * g["point"][[g["names"].index(n) for n in names]] for g in fold_gains.values())
        boot = sum(g["n"] / total * g["boot"][:, [g["names"].index(n) for n in names]] for g in fold_gains.values())
        deployable = {n: all(g["deployable"].get(n, False) for g in fold_gains.values()) for n in names}
        confidence = next(iter(fold_gains.values()))["confidence"]
        pooled_rows, label = _table("pooled", total, names, point, boot, deployable, confidence, {})
        rows += pooled_rows
        labels.append(label)
    return UnseenResult(folds=folds, rows=rows, label=labels, chains=chains)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:+.{digits}f}"


def unseen_markdown(result: UnseenResult) -> str:
    """The pooled table, then one table per fold; each line a router's gain over the fixed-model
    chain of its fold and the share of the label's value it recovers."""
    lines = ["# Leave-one-benchmark-out: routers on benchmarks never seen in training", "",
             "Routing gain: accuracy - the fixed-model chain chosen on the fold's training split at the router's mean "
             "joules (pp; on an unseen benchmark the task-aware chain reduces to it). Label value: the gain of the "
             f"per-benchmark route chosen on the held-out benchmark's own outcomes, cross-fitted over {CROSS_FIT_FOLDS} "
             "folds of its questions (privileged: a reference, not a router). Share = routing gain / label value, shown "
             f"only where the label's value is above 0 in its interval and at least {MIN_LABEL_VALUE_PP} pp. Verdict: "
             "Romano-Wolf step-down over the deployable rows of each table (above / below 0; blank: undecided).", ""]
    labels = {entry["benchmark"]: entry for entry in result.label}
    for benchmark in (["pooled"] if "pooled" in labels else []) + list(result.folds):
        entry = labels[benchmark]
        chain = "" if benchmark == "pooled" else f"; fixed-model chain on train: {', '.join(result.chains[benchmark])}"
        lines += [f"## {benchmark} ({entry['n']} held-out questions{chain})", "",
                  f"Label value (privileged): {_fmt(entry['label_value_pp'])} pp [{_fmt(entry['ci_low'])}, "
                  f"{_fmt(entry['ci_high'])}]" + (f"; share not reported: {entry['note']}" if entry["note"] else ""), "",
                  "| method | routing gain (pp) | 95 % CI | verdict | share of label value | 95 % CI |",
                  "|---|---|---|---|---|---|"]
        for row in (r for r in result.rows if r["benchmark"] == benchmark):
            share = "—" if row["share_of_label"] is None else f"{row['share_of_label']:.2f}"
            share_ci = "—" if row["share_ci_low"] is None else f"[{row['share_ci_low']:.2f}, {row['share_ci_high']:.2f}]"
            lines.append(f"| {row['method']} | {_fmt(row['routing_gain_pp'])} | [{_fmt(row['routing_gain_pp_ci_low'])}, "
                         f"{_fmt(row['routing_gain_pp_ci_high'])}] | {row['verdict']} | {share} | {share_ci} |")
        lines.append("")
    return "\n".join(lines)


def write_unseen_outputs(result: UnseenResult, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """Each fold's compare outputs in its sub-folder, and ``unseen.md`` / ``unseen.csv`` /
    ``unseen.json`` (the pooled and per-fold unseen-benchmark tables) in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for benchmark, fold in result.folds.items():
        write_outputs(fold, fold_dir(out, benchmark), plots=plots)
    paths = {name: out / name for name in ("unseen.md", "unseen.csv", "unseen.json")}
    paths["unseen.md"].write_text(unseen_markdown(result))
    pd.DataFrame(result.rows).to_csv(paths["unseen.csv"], index=False)
    payload = {"rows": result.rows, "label": result.label, "chains": result.chains,
               "rule": __doc__.split("\n\n", 1)[1].strip()}
    paths["unseen.json"].write_text(json.dumps(strict_json(payload), indent=1))
    return paths
