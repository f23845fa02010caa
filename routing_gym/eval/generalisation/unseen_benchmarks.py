"""Leave-one-benchmark-out comparisons: routers on a benchmark they never saw in training.

``run_leave_one_benchmark_out`` runs ``compare``'s cells once per fold on any executor (one
``CompareJob`` per held-out benchmark, every fold's missing cells in one ``run_jobs``), each fold
in its own sub-folder ``<out>/held-out/<benchmark>/`` (its ``cells/`` saved as they arrive, so a
rerun resumes), and then reads every fold on the yardstick of an unseen benchmark:

- the fold (``lobo_folds``): every question of the held-out benchmark, and every copy of one
  under another benchmark, is ``test``; every other question trains (a source's own test split
  included: the held-out benchmark is the only thing a router is scored on);
- routing gain: accuracy - the fixed-model chain chosen on the fold's training split at the
  router's mean joules (pp; ``eval/core/yardstick.py``). On an unseen benchmark the label carries
  nothing, so the task-aware chain reduces to this one;
- the privileged label value: what the label would have been worth had the benchmark been seen,
  at the router's own mean joules: the chain the label would have given (the held-out benchmark's
  own models, its upper concave hull with the null point, as ``Yardstick.chosen_on_train`` picks
  one) chosen on the held-out benchmark's outcomes, cross-fitted (its questions dealt into
  ``CROSS_FIT_FOLDS`` folds by copy groups; each fold is routed by the chain chosen on the other
  folds, mixed at the router's joules on that fold) minus the fixed-model chain there. It reads
  held-out outcomes: a reference, never a router;
- share of the label's value recovered = routing gain / label value, from the same resamples,
  reported only where the label's value is clearly positive (its interval above 0 and at least
  ``MIN_LABEL_VALUE_PP``); the row says why not otherwise.

Intervals are percentile intervals over the fold's resamples (``compare``'s plan: copies of a
question together). Pooled figures weight each fold by its number of held-out questions; the
folds' resamples are independent, so a pooled resample is the weighted sum of one resample per
fold. Verdicts ("above"/"below" 0) come from one Romano-Wolf step-down (``eval/core/familywise.py``)
over the verified agent rows of every table (``in_family``; each fold and the pooled table, their
resamples stacked as one draw); unverified rows and rows that failed the audit are listed, tagged
"no verdict".
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from routing_gym.errors import UsageError
from routing_gym.eval.compare import CompareConfig, CompareJob, CompareResult, markdown_report, run_jobs, write_outputs
from routing_gym.eval.core import familywise
from routing_gym.eval.core.jsonsafe import strict_json
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardstick
from routing_gym.eval.execution import audit
from routing_gym.tournament import Tournament, leave_one_benchmark_out
from routing_gym.tournament.duplicates import question_groups

if TYPE_CHECKING:
    from routing_gym.eval.frontier import FrontierConfig

HELD_OUT_DIR = "held-out"
CROSS_FIT_FOLDS = 5
MIN_LABEL_VALUE_PP = 1.0  # below this the share of the label's value is a ratio of noise


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
    chains: dict[str, list[str]]  # per fold: the fixed-model chain chosen on its training split
    elapsed_s: float = 0.0

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
    start = time.perf_counter()
    t = resolve_tournament(config.tournament)
    jobs = {b: CompareJob(replace(config, tournament=fold), fold_dir(out_dir, b) if out_dir is not None else None,
                          label=f"{b}: ") for b, fold in lobo_folds(t, benchmarks)}
    run_jobs(list(jobs.values()), config.executor, workers=config.workers, max_retries=config.max_retries,
             ray_address=config.ray_address, progress=config.progress)
    result = unseen_summary({b: job.result() for b, job in jobs.items()})
    result.elapsed_s = time.perf_counter() - start
    return result


def cross_fit_folds(prompts: Sequence[str], seed: int = 0) -> np.ndarray:
    """``[n]`` fold of each held-out question (``CROSS_FIT_FOLDS``, fewer for fewer questions),
    copies of a question (same normalised text) in one fold."""
    groups = question_groups(prompts)
    n_groups = int(groups.max()) + 1
    if n_groups < 2:
        raise UsageError("a held-out benchmark needs at least two distinct questions to cross-fit its label")
    return (np.random.default_rng(seed).permutation(n_groups) % min(CROSS_FIT_FOLDS, n_groups))[groups]


def label_chains(correct: np.ndarray, energy_j: np.ndarray, fold: np.ndarray, model_ids: list[str]) -> list[Yardstick]:
    """The privileged label's route per cross-fitting fold: the chain of the held-out benchmark's
    own per-model (J, accuracy), chosen on the *other* folds' questions (``[n, K]`` outcomes).
    With one benchmark, the task-aware chain it would have had is this chain."""
    chains = []
    for f in range(int(fold.max()) + 1):
        other = fold != f
        chains.append(Yardstick.chosen_on_train(energy_j[other].mean(axis=0), correct[other].mean(axis=0), model_ids))
    return chains


def _fold_gains(result: CompareResult, seed: int) -> dict[str, Any]:
    """Point and resampled routing gains and label values (fractions, ``[M]`` and ``[B, M]``) of
    every agent row: the label value at each router's own mean joules."""
    t, rows, config = result.tournament, result.test_rows, result.config
    train = t.split_rows(config.train_split)
    models = list(t.model_ids)
    chain = Yardstick.chosen_on_train(t.energy_j[train].mean(axis=0), t.correct[train].mean(axis=0), models)
    names = [r["method"] for r in result.rows if r["kind"] == "agent" and r["seeds_ok"]]
    per_query = {m: [np.mean([run.per_query[k] for run in result.runs if run.method == m and run.status == "ok"], axis=0)
                     for k in ("correct", "energy_j")] for m in names}
    prompts = t.queries["prompt"].to_numpy()[rows]
    correct, joules = t.correct[rows].astype(np.float64), t.energy_j[rows]
    fold = cross_fit_folds(prompts, seed)
    chains = label_chains(correct, joules, fold, models)
    masks = [(fold == f).astype(np.float64)[:, None] for f in range(len(chains))]
    block = np.concatenate([np.stack([per_query[m][0] for m in names], axis=1), np.stack([per_query[m][1] for m in names], axis=1),
                            correct, joules, *[np.concatenate([w, correct * w, joules * w], axis=1) for w in masks]], axis=1)
    # compare's plan, its seed moved per fold: pooled resamples add independent folds
    plan = BootstrapPlan.of_rows(prompts, config.n_bootstrap, config.bootstrap_seed + seed)
    boot, point = plan.means(block), block.mean(axis=0)
    m, k = len(names), t.n_models

    def gains(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        acc, method_j = values[..., :m], values[..., m:2 * m]
        fixed_acc, fixed_j = values[..., 2 * m:2 * m + k, None].swapaxes(-1, -2), values[..., 2 * m + k:2 * m + 2 * k, None].swapaxes(-1, -2)
        stick = chain.accuracy_at(fixed_j, fixed_acc, method_j)
        label = np.zeros_like(stick)
        for f, fold_chain in enumerate(chains):  # each fold's own chain, mixed at the router's joules on that fold
            base = 2 * m + 2 * k + f * (2 * k + 1)
            share = values[..., base:base + 1]
            safe = np.where(share > 0, share, 1.0)
            fold_acc, fold_j = values[..., base + 1:base + 1 + k] / safe, values[..., base + 1 + k:base + 1 + 2 * k] / safe
            label += share * fold_chain.accuracy_at(fold_j[..., None, :], fold_acc[..., None, :], method_j)
        return acc - stick, label - stick

    (gain, label), (boot_gain, boot_label) = gains(point), gains(boot)
    return {"names": names, "point": gain, "boot": boot_gain, "label": label, "label_boot": boot_label,
            "n": len(rows), "chain": chain.names, "accuracy": point[:m], "energy_j": point[m:2 * m],
            "deployable": {r["method"]: in_family(r["deployable_label"]) for r in result.rows if r["method"] in names},
            "audit": {r["method"]: r["deployable_label"] for r in result.rows if r["method"] in names},
            "confidence": config.confidence}


def in_family(deployable_label: str) -> bool:
    """Rows the verdicts are decided over: those that read no held-out outcome by declaration and
    were verified by the audit. A row left unverified (``--no-audit``, or an audit that could not
    run) or caught by the audit is listed with its numbers and tagged, never given a verdict."""
    return deployable_label == "yes"


def _verdict_label(decisions: dict[str, str], name: str, audit_label: str) -> str:
    """A row's verdict column: the family's decision, or why the row is outside the family."""
    if name in decisions:
        return decisions[name]
    return f"no verdict: {audit_label}" if audit.withheld(audit_label) else "not in family"


def _family_decisions(tables: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """One Romano-Wolf step-down over every table's verified rows (``in_family``): each fold's
    resamples are independent of the other folds', so resample b of every fold (and the pooled
    resample b, their weighted sum) together is one draw of all the statistics: their columns are
    stacked side by side. Returns ``{table: {method: "above" | "below" | ""}}``."""
    keys = [(table, i) for table, g in tables for i, name in enumerate(g["names"]) if g["deployable"].get(name, False)]
    if not keys:
        return {table: {} for table, _ in tables}
    by_table = dict(tables)
    decision = familywise.stepdown(np.array([100 * by_table[t]["point"][i] for t, i in keys]),
                                   np.stack([100 * by_table[t]["boot"][:, i] for t, i in keys], axis=1),
                                   1 - tables[0][1]["confidence"])
    out: dict[str, dict[str, str]] = {table: {} for table, _ in tables}
    for (table, i), verdict in zip(keys, decision.decisions):
        out[table][by_table[table]["names"][i]] = verdict
    return out


def _share_note(low: float, value: float, confidence: float) -> str:
    """Why a row has no share of the label's value ("" when it has one)."""
    if low <= 0:
        return f"the label's value is not clearly above 0: its {confidence:.0%} interval reaches {low:+.2f} pp"
    if value < MIN_LABEL_VALUE_PP:  # shown rounded down, so that it never reads as the threshold itself
        return (f"the label's value, {math.floor(100 * value) / 100:.2f} pp, is under the {MIN_LABEL_VALUE_PP:g} pp a "
                "share needs (below it the share is a ratio of noise)")
    return ""


def _table(benchmark: str, n: int, g: dict[str, Any], extra: dict[str, dict[str, Any]],
           decisions: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of one table (a fold or the pooled one): gains, label values, shares, and the verdicts
    of the one family over every table (``_family_decisions``)."""
    names, point, boot, confidence = g["names"], 100 * g["point"], 100 * g["boot"], g["confidence"]
    label, label_boot = 100 * g["label"], 100 * g["label_boot"]
    rows = []
    for i, name in enumerate(names):
        low, high = percentile_interval(boot[:, i], confidence)
        label_low, label_high = percentile_interval(label_boot[:, i], confidence)
        verdict = _verdict_label(decisions, name, g["audit"].get(name, ""))
        why = _share_note(float(label_low), float(label[i]), confidence)
        row = {"benchmark": benchmark, "n": n, "method": name, "routing_gain_pp": float(point[i]),
               "routing_gain_pp_ci_low": float(low), "routing_gain_pp_ci_high": float(high), "verdict": verdict,
               "label_value_pp": float(label[i]), "label_value_pp_ci_low": float(label_low),
               "label_value_pp_ci_high": float(label_high), "share_of_label": None, "share_ci_low": None,
               "share_ci_high": None, "share_note": why, **extra.get(name, {})}
        if not why:  # the label's value is above 0 in all but the tail: the ratio is finite almost everywhere
            ratio = boot[:, i] / label_boot[:, i]
            s_low, s_high = percentile_interval(ratio[np.isfinite(ratio)], confidence)
            row.update(share_of_label=float(point[i] / label[i]), share_ci_low=float(s_low), share_ci_high=float(s_high))
        rows.append(row)
    return rows


def unseen_summary(folds: dict[str, CompareResult]) -> UnseenResult:
    """The unseen-benchmark table of finished folds (module docstring), per fold and pooled."""
    rows: list[dict[str, Any]] = []
    chains, fold_gains, extras = {}, {}, {}
    for j, (benchmark, result) in enumerate(folds.items()):
        g = _fold_gains(result, seed=j)
        fold_gains[benchmark], chains[benchmark] = g, g["chain"]
        extras[benchmark] = {name: {"accuracy": float(g["accuracy"][i]), "mean_energy_j": float(g["energy_j"][i]),
                                    "deployable": g["audit"].get(name, "")} for i, name in enumerate(g["names"])}
    tables = list(fold_gains.items())
    if len(folds) > 1:  # pooled over the methods every fold has, each fold weighted by its questions
        gs = list(fold_gains.values())
        names = [n for n in gs[0]["names"] if all(n in g["names"] for g in gs)]
        total = sum(g["n"] for g in gs)

        def pooled(key: str) -> np.ndarray:
            return sum(g["n"] / total * g[key][..., [g["names"].index(n) for n in names]] for g in gs)

        summary = {"names": names, "confidence": gs[0]["confidence"], "n": total,
                   **{key: pooled(key) for key in ("point", "boot", "label", "label_boot")},
                   "deployable": {n: all(g["deployable"].get(n, False) for g in gs) for n in names},
                   "audit": {n: next((g["audit"][n] for g in gs if g["audit"].get(n) != "yes"), "yes") for n in names}}
        tables.append(("pooled", summary))
    decisions = _family_decisions(tables)
    for benchmark, g in tables:
        rows += _table(benchmark, g["n"], g, extras.get(benchmark, {}), decisions[benchmark])
    return UnseenResult(folds=folds, rows=rows, chains=chains)


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or not np.isfinite(value):
        return "—"
    return "0" if abs(value) < 0.5 * 10 ** -digits else f"{value:+.{digits}f}"  # never '+0.00' or '-0.00'


ONE_SIDED = "¹"
ONE_SIDED_NOTE = (f"{ONE_SIDED} 0 at the estimate by construction: the router routes as a policy of the chain (or the two "
                  "chains meet at its joules), so the interval is one-sided: it says only how far below the chain "
                  "resamples fall, not that the value is uncertain around 0.")


def _cells(value: float, low: float, high: float) -> tuple[str, str]:
    """A value and its interval; a value that is 0 by construction (it prints as 0 and so does an
    end of its interval) is marked ``ONE_SIDED`` rather than printed as '+0.00 [-2.84, +0.00]'."""
    if abs(value) < 0.005 and min(abs(low), abs(high)) < 0.005:
        ends = [f"{e:+.2f}" if abs(e) >= 0.005 else "0" for e in (low, high)]
        return f"0{ONE_SIDED}", f"[{ends[0]}, {ends[1]}]"
    return _fmt(value), f"[{_fmt(low)}, {_fmt(high)}]"


def _verdict(verdict: str) -> str:
    """A verdict cell: an undecided row says so in words (it was a blank cell)."""
    return verdict if verdict.split(" ")[0] in ("above", "below", "not", "no") else f"not distinguishable {verdict}".strip()


def unseen_answer(rows: list[dict[str, Any]]) -> str:
    """The one-line answer: which routers beat the fixed-model chain on benchmarks they never saw
    (the pooled table's family-wise verdicts, or the only fold's)."""
    table = [r for r in rows if r["benchmark"] == "pooled"] or rows
    where = "pooled over the held-out benchmarks" if table[0]["benchmark"] == "pooled" else f"on {table[0]['benchmark']}"
    judged = [r for r in table if r["verdict"] != "not in family"]
    named = {d: [r["method"] for r in judged if r["verdict"].split(" ")[0] == d] for d in ("above", "below")}
    return (f"**Answer:** on benchmarks never seen in training ({where}), {len(named['above'])} of {len(judged)} "
            f"routers route above the fixed-model chain ({', '.join(named['above']) or 'none'}), "
            f"{len(named['below'])} below ({', '.join(named['below']) or 'none'}); the rest are not distinguishable "
            "from it (family-wise, 95 %).")


def unseen_markdown(result: UnseenResult) -> str:
    """The pooled table, then one table per fold: each router's gain over the fixed-model chain
    of its fold, the label's value at its joules and the share of it the router recovers."""
    lines = ["# Leave-one-benchmark-out: routers on benchmarks never seen in training", "", unseen_answer(result.rows), "",
             "Routing gain: accuracy - the fixed-model chain chosen on the fold's training split at the router's mean "
             "joules (pp; on an unseen benchmark the task-aware chain reduces to it). Label value (privileged, a "
             "reference): the gain, at the same joules, of the chain the label would have given had the benchmark been "
             f"seen: the held-out benchmark's own models chosen on its own outcomes, cross-fitted over {CROSS_FIT_FOLDS} "
             "folds of its questions. Share = routing gain / label value, shown only where the label's value is above 0 "
             f"in its interval and at least {MIN_LABEL_VALUE_PP} pp. Verdict: one Romano-Wolf step-down over the "
             "verified rows of every table below (each fold and the pooled one; the folds' resamples are independent, "
             "so they are stacked as one draw): above / below 0, blank: undecided; a row that is unverified (the audit "
             "did not run) or failed its audit is listed with its numbers and 'no verdict', never in the family; verdicts are "
             "family-wise: adding or removing routers can change them. "
             "Intervals: 95 % percentile bootstrap over held-out questions (copies together); pooled: "
             f"folds weighted by their questions. {ONE_SIDED_NOTE}", ""]
    folds = (["pooled"] if any(r["benchmark"] == "pooled" for r in result.rows) else []) + list(result.folds)
    for benchmark in folds:
        mine = [r for r in result.rows if r["benchmark"] == benchmark]
        chain = "" if benchmark == "pooled" else f"; fixed-model chain on train: {', '.join(result.chains[benchmark])}"
        lines += [f"## {benchmark} ({mine[0]['n']} held-out questions{chain})", "",
                  "| method | routing gain (pp) | 95 % CI | verdict | label value (pp) | 95 % CI | share of label value | 95 % CI |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in mine:
            share = "—" if row["share_of_label"] is None else f"{row['share_of_label']:.2f}"
            share_ci = ("— (" + row["share_note"] + ")" if row["share_ci_low"] is None
                        else f"[{row['share_ci_low']:.2f}, {row['share_ci_high']:.2f}]")
            gain = _cells(row["routing_gain_pp"], row["routing_gain_pp_ci_low"], row["routing_gain_pp_ci_high"])
            label = _cells(row["label_value_pp"], row["label_value_pp_ci_low"], row["label_value_pp_ci_high"])
            lines.append(f"| {row['method']} | {gain[0]} | {gain[1]} | {_verdict(row['verdict'])} | "
                         f"{label[0]} | {label[1]} | {share} | {share_ci} |")
        lines.append("")
    return "\n".join(lines)


def write_unseen_outputs(result: UnseenResult, out_dir: str | Path, plots: bool = True,
                         fold_tables_only: bool = False) -> dict[str, Path]:
    """Each fold's compare outputs in its sub-folder (only its ``table.md`` with
    ``fold_tables_only``: a committed study with many folds stays small), and ``unseen.md`` /
    ``unseen.csv`` / ``unseen.json`` (the pooled and per-fold unseen-benchmark tables) in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for benchmark, fold in result.folds.items():
        if fold_tables_only:
            fold_dir(out, benchmark).mkdir(parents=True, exist_ok=True)
            (fold_dir(out, benchmark) / "table.md").write_text(markdown_report(fold))
        else:
            write_outputs(fold, fold_dir(out, benchmark), plots=plots)
    paths = {name: out / name for name in ("unseen.md", "unseen.csv", "unseen.json")}
    paths["unseen.md"].write_text(unseen_markdown(result))
    pd.DataFrame(result.rows).to_csv(paths["unseen.csv"], index=False)
    payload = {"rows": result.rows, "chains": result.chains,
               "rule": __doc__.split("\n\n", 1)[1].strip()}
    paths["unseen.json"].write_text(json.dumps(strict_json(payload), indent=1))
    return paths


FOLD_KEY = "fold.json"  # a finished frontier fold: the settings it ran with


def run_frontier_leave_one_benchmark_out(config: FrontierConfig, benchmarks: Sequence[str] | None, out_dir: str | Path,
                                         plots: bool = True) -> dict[str, Path]:
    """``frontier`` once per fold (``lobo_folds``), each written to ``<out>/held-out/<benchmark>/``
    as it finishes; a rerun skips the folds whose ``fold.json`` records the same settings and split
    (resumable fold by fold: a frontier has no cells of its own). Returns each fold's ``table.md``.
    ``config``'s tournament is replaced by each fold's; a frontier runs in this process (no executor)."""
    from routing_gym.eval.frontier import run_frontier
    from routing_gym.eval.frontier.report import write_frontier_outputs
    from routing_gym.sources import resolve_tournament

    if config.train_split != "train" or config.test_split != "test":
        raise UsageError("leave-one-benchmark-out sets the splits itself (train: the other benchmarks, test: the "
                         f"held-out one); got --train-split {config.train_split!r} --test-split {config.test_split!r}")
    tables = {}
    for benchmark, fold in lobo_folds(resolve_tournament(config.tournament), benchmarks):
        folder = fold_dir(out_dir, benchmark)
        settings = {"tournament": fold.fingerprint, "split_assignment": fold.split_fingerprint,
                    "config": repr(replace(config, tournament=None))}
        done = folder / FOLD_KEY
        if not (done.is_file() and json.loads(done.read_text()) == settings and (folder / "table.md").is_file()):
            write_frontier_outputs(run_frontier(replace(config, tournament=fold)), folder, plots=plots)
            done.write_text(json.dumps(settings))
        tables[benchmark] = folder / "table.md"
    return tables
