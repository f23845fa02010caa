"""Calibration v2 of the suite's verdicts, end to end through ``compare``, where the truth is known.

A verdict ("routes", "routes beyond the task label") is a claim about an error rate. This study
measures the rates with the product's own pipeline: every tournament is scored by ``run_compare``
(audit on, several seeds, the family of deployable verified rows, the step-down), nothing is
re-implemented here. The population value of every row comes from a second ``run_compare`` on the
same training rows with a large fresh draw of the same generator as its held-out split (the same
fits: every agent here is a function of its training rows and seed), so a row's truth is read with
the same train-chosen yardstick.

Cells (each a procedural preset drawn afresh per tournament, a new generator seed each):

- ``null-text``: ``paper-pool`` with ``text_signal 0``: the question says nothing about who is right.
  The family holds at least six *non-degenerate true-zero* hypotheses: ``chain-mix`` routers
  (``agents/chain_mix.py``) that mix two adjacent policies of a train-chosen chain per query at
  random, whose population gain over that chain is 0 by construction while their estimates have
  spread (three on the task-aware chain: content gain 0; three on the fixed-model chain: routing
  gain 0), beside the label routers (``per-benchmark``, ``per-benchmark`` at mu 0.2), ``knn``,
  ``linucb`` and ``random``.
- ``power-*``: ``specialist-pool`` at a small ``specialization_signal`` (per-model topic skills named
  in the text) where ``knn``'s population content gain is about 0.5, 1 and 2 pp, and the full
  specialist pool: how often "routes beyond the task label" finds a real gain.

Rates (Wilson 95 % intervals):

- family-wise: the share of tournaments with any *false* claim in the family: "above" on a
  hypothesis whose truth is <= 0 or "below" on one whose truth is >= 0 (a chain-mix row's truth is
  0 by construction; other rows' truths are their population values);
- power: the share of tournaments where ``knn`` is called "routes beyond the task label";
- coverage: every row's 95 % interval against its population value, rows whose interval has zero
  width (a policy of the yardstick itself: nothing to cover) left out. The population holds
  ``--population`` queries; its own sampling noise is corrected by widening each half of the interval
  in quadrature by z x the population value's bootstrap standard error (the raw rate beside it).

``--label`` names the statistics being measured (``before``: the release the run starts on; ``after``:
the new one); a cell's fits are cached under ``--cache`` (compare's own resumable cells), so the
second label re-aggregates the same fits on the same seeds. The README shows every label found in
``runs.csv`` side by side.

    OMP_NUM_THREADS=1 python experiments/verdict_calibration.py --label before --tournaments 200
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.eval.compare import CompareConfig, CompareResult, run_compare
from routing_gym.eval.core import familywise
from routing_gym.sources.synthetic import generate, preset_config
from routing_gym.tournament import Tournament
from routing_gym_agents import register_agent
from routing_gym_agents.registry import AGENTS as REGISTERED
from routing_gym_agents.baselines import PerBenchmark
from routing_gym_agents.chain_mix import ChainMix
from results_readme import write_readme  # experiments/results_readme.py

OUT = Path(__file__).parent / "results" / "verdict_calibration"
# True-zero rows: two adjacent policies of a train-chosen chain mixed per query (agents/chain_mix.py).
# Registered under their own names so that one compare holds several (the audit's worker imports this file).
MIXES = {"mix-task-a": dict(chain="task", segment=-2, weight=0.5), "mix-task-b": dict(chain="task", segment=-4, weight=0.3),
         "mix-task-c": dict(chain="task", segment=-6, weight=0.7), "mix-fixed-a": dict(chain="fixed", segment=-1, weight=0.5),
         "mix-fixed-b": dict(chain="fixed", segment=-2, weight=0.4), "mix-fixed-c": dict(chain="fixed", segment=-3, weight=0.6)}
for _name, _defaults in MIXES.items():
    # Stand-ins for content routers whose population gain is 0: chain-mix itself declares that it cannot read the
    # question (compare keeps it out of the content family); these join the family as a reader would. This file is
    # imported again by compare's audit worker and by the `imports` of the compare it runs: register once per process.
    if _name not in REGISTERED:
        register_agent(_name, **_defaults)(type(_name.title().replace("-", ""), (ChainMix,), {"name": _name, "reads_question": True}))
register_agent("label-mu", mu=0.2)(PerBenchmark)  # a label router at accuracy - 0.2 x J / J_ref
AGENTS = ["per-benchmark", "label-mu", *MIXES, "knn", "linucb", "random"]
# cell -> (preset, generator overrides)
# The power cells' signals were set from one probe draw each (knn's population content gain -1.1 pp at 0.40,
# +2.6 at 0.55, +5.7 at 0.70, 5,000 queries); the table reports the realised mean gain of each cell.
CELLS = {"null-text": ("paper-pool", {"text_signal": 0.0}),
         "power-0.5pp": ("specialist-pool", {"specialization_signal": 0.47}),
         "power-1pp": ("specialist-pool", {"specialization_signal": 0.49}),
         "power-2pp": ("specialist-pool", {"specialization_signal": 0.53}),
         "specialist": ("specialist-pool", {})}
GAINS = ("routing_gain_pp", "content_gain_pp")
CONTENT_READER = "knn"
Z = 1.959963984540054


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds() -> float:
    """CPU of this process and its finished children (the audit's worker)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def draw(cell: str, seed: int, population: int) -> tuple[Tournament, Tournament]:
    """The cell's tournament at its preset's size and split, and a population tournament holding the
    same training rows with ``population`` fresh queries of the same draw as its held-out split: one
    generator call (the model side, e.g. the specialist pool's per-model skills, comes from the seed)
    cut at random, so both held-out sets are samples of one population."""
    preset, overrides = CELLS[cell]
    config = preset_config(preset, **overrides)
    whole = generate(replace(config, n_queries=config.n_queries + population, seed=seed, splits=None), progress=False)
    order = np.random.default_rng(seed).permutation(whole.n_queries)
    sample_rows = np.sort(order[:config.n_queries])
    sample = whole.subset(rows=sample_rows).with_splits(seed=seed, proportions=dict(sorted(config.splits.items())))
    train_rows = sample_rows[sample.queries["split"].to_numpy() == "train"]
    rows = np.sort(np.concatenate([train_rows, order[config.n_queries:]]))
    queries = whole.queries.copy()
    queries["split"] = np.where(np.isin(np.arange(whole.n_queries), train_rows), "train", "test")
    return sample, replace(whole, queries=queries).subset(rows=rows)


def compare_config(t: Tournament, seeds: int, n_bootstrap: int, audit: bool) -> CompareConfig:
    return CompareConfig(tournament=t, agents=AGENTS, seeds=seeds, n_bootstrap=n_bootstrap, progress=False,
                         audit=audit, imports=(__file__,))


def rows_of(result: CompareResult, truth: CompareResult, cell: str, seed: int, label: str) -> list[dict[str, Any]]:
    """One record per table row: each gain's estimate, interval, family-wise decision, truth and the
    truth's standard error (from the population run's own bootstrap)."""
    out = []
    for row in result.rows:
        if not row.get("seeds_ok"):
            continue
        true_row = truth.row(row["method"])
        record = {"label": label, "cell": cell, "seed": seed, "method": row["method"], "kind": row["kind"],
                  "deployable": row.get("deployable_label", "")}
        for g in GAINS:
            record.update({g: row.get(g, math.nan), f"{g}_ci_low": row.get(f"{g}_ci_low", math.nan),
                           f"{g}_ci_high": row.get(f"{g}_ci_high", math.nan), f"{g}_fw": row.get(f"{g}_fw", "") or "",
                           f"{g}_truth": true_row.get(g, math.nan),
                           f"{g}_truth_se": (true_row.get(f"{g}_ci_high", math.nan) - true_row.get(f"{g}_ci_low", math.nan)) / (2 * Z)})
        if row["method"] in MIXES:  # 0 by construction for the gain whose chain it mixes
            record[f"{'content' if MIXES[row['method']]['chain'] == 'task' else 'routing'}_gain_pp_truth_exact"] = 0.0
        out.append(record)
    return out


def one_tournament(cell: str, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    sample, population = draw(cell, seed, args.population)
    cache = args.cache / cell / f"seed-{seed}"
    cpu0 = cpu_seconds()
    result = run_compare(compare_config(sample, args.seeds, args.bootstrap, audit=True), cache / "sample")
    cpu1 = cpu_seconds()
    truth = run_compare(compare_config(population, args.seeds, args.truth_bootstrap, audit=False), cache / "population")
    log(f"{cell} seed {seed}: compare {cpu1 - cpu0:.1f} s CPU, population {cpu_seconds() - cpu1:.1f} s CPU")
    return rows_of(result, truth, cell, seed, args.label)


def truth_of(frame: pd.DataFrame, gain: str) -> pd.Series:
    """The population value of each row's gain: exactly 0 where a chain-mix row's construction says so."""
    exact = frame.get(f"{gain}_truth_exact")
    return frame[f"{gain}_truth"] if exact is None else exact.fillna(frame[f"{gain}_truth"])


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson score 95 % interval of a binomial proportion."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre, half = (p + Z * Z / (2 * n)) / (1 + Z * Z / n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(flags: pd.Series) -> dict[str, Any]:
    n, s = int(len(flags)), int(flags.sum())
    low, high = wilson(s, n)
    return {"rate": s / n if n else math.nan, "low": low, "high": high, "count": s, "n": n}


def false_claims(frame: pd.DataFrame, gain: str) -> pd.Series:
    truth = truth_of(frame, gain)
    decided = frame[f"{gain}_fw"]
    return ((decided == familywise.ABOVE) & (truth <= 0)) | ((decided == familywise.BELOW) & (truth >= 0))


def summarise(frame: pd.DataFrame) -> dict[str, Any]:
    """The rates per label and cell."""
    out: dict[str, Any] = {}
    for label, by_label in frame.groupby("label", sort=False):
        entry: dict[str, Any] = {}
        for cell, rows in by_label.groupby("cell", sort=False):
            c: dict[str, Any] = {"tournaments": int(rows["seed"].nunique())}
            per_t = rows.assign(**{f"false_{g}": false_claims(rows, g) for g in GAINS}).groupby("seed")
            c["familywise_false_routes"] = rate(per_t["false_routing_gain_pp"].any())
            c["familywise_false_beyond_label"] = rate(per_t["false_content_gain_pp"].any())
            c["familywise_false_any"] = rate(per_t[["false_routing_gain_pp", "false_content_gain_pp"]].any().any(axis=1))
            zero = rows[rows["method"].isin(list(MIXES))]
            spread = sum(((zero[f"{g}_ci_high"] - zero[f"{g}_ci_low"] > 1e-9) & zero[f"{g}_truth_exact"].notna()).sum()
                         for g in GAINS if f"{g}_truth_exact" in zero)
            c["true_zero_hypotheses_per_tournament"] = float(spread / max(1, c["tournaments"]))  # with spread: in the family
            reader = rows[rows["method"] == CONTENT_READER]
            c["power_beyond_label"] = rate(reader["content_gain_pp_fw"] == familywise.ABOVE)
            c["reader_true_content_gain_pp"] = float(reader["content_gain_pp_truth"].mean())
            coverage = {}
            for g in GAINS:
                width = rows[f"{g}_ci_high"] - rows[f"{g}_ci_low"]
                kept = rows[(width > 1e-9) & rows[f"{g}_truth"].notna()]
                truth, est = truth_of(kept, g), kept[g]
                raw = (kept[f"{g}_ci_low"] <= truth + 1e-9) & (truth - 1e-9 <= kept[f"{g}_ci_high"])
                pad = (Z * kept[f"{g}_truth_se"].fillna(0.0)) ** 2
                low = est - np.sqrt((est - kept[f"{g}_ci_low"]) ** 2 + pad)
                high = est + np.sqrt((kept[f"{g}_ci_high"] - est) ** 2 + pad)
                coverage[g] = {"corrected": rate((low <= truth + 1e-9) & (truth - 1e-9 <= high)), "raw": rate(raw),
                               "zero_width_rows_left_out": int(len(rows) - len(kept))}
            c["coverage"] = coverage
            entry[str(cell)] = c
        out[str(label)] = entry
    return out


def _fmt(r: dict[str, Any]) -> str:
    return f"{100 * r['rate']:.1f} % [{100 * r['low']:.1f}, {100 * r['high']:.1f}] ({r['count']}/{r['n']})"


def markdown(summary: dict[str, Any], settings: dict[str, Any]) -> str:
    labels = list(summary)
    cells = [c for c in CELLS if all(c in summary[lab] for lab in labels)]
    lines = ["# Verdict calibration v2: error rates of compare's verdicts where the truth is known", "",
             f"Tournaments per cell: " + ", ".join(f"{c} {summary[labels[0]][c]['tournaments']}" for c in cells) +
             f"; seeds per agent {settings['seeds']}; {settings['n_bootstrap']} resamples; population "
             f"{settings['population']:,} fresh queries per tournament. Rates with Wilson 95 % intervals. Labels: "
             + "; ".join(f"**{lab}** = {settings['labels'].get(lab, '')}" for lab in labels) + ".", "",
             "## Family-wise rate of a false claim (nominal <= 5 %)", "",
             "| cell | non-degenerate true-zero hypotheses per tournament | " + " | ".join(
                 f"{lab}: false 'routes' | {lab}: false 'beyond the label' | {lab}: any false claim" for lab in labels) + " |",
             "|---|---|" + "---|---|---|" * len(labels)]
    for c in cells:
        lines.append(f"| {c} | {summary[labels[0]][c]['true_zero_hypotheses_per_tournament']:.1f} | " + " | ".join(
            f"{_fmt(summary[lab][c]['familywise_false_routes'])} | {_fmt(summary[lab][c]['familywise_false_beyond_label'])} | "
            f"{_fmt(summary[lab][c]['familywise_false_any'])}" for lab in labels) + " |")
    lines += ["", f"## Power: `{CONTENT_READER}` called 'routes beyond the task label'", "",
              "| cell | its mean population content gain (pp) | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for c in cells:
        lines.append(f"| {c} | {summary[labels[0]][c]['reader_true_content_gain_pp']:+.2f} | " + " | ".join(
            _fmt(summary[lab][c]["power_beyond_label"]) for lab in labels) + " |")
    lines += ["", "## Coverage of every row's 95 % interval (zero-width rows left out; population noise corrected, raw beside)", "",
              "| cell, gain | " + " | ".join(f"{lab} (corrected) | {lab} (raw) | {lab}: zero-width rows" for lab in labels) + " |",
              "|---|" + "---|---|---|" * len(labels)]
    for c in cells:
        for g in GAINS:
            lines.append(f"| {c}, {g} | " + " | ".join(
                f"{_fmt(summary[lab][c]['coverage'][g]['corrected'])} | {_fmt(summary[lab][c]['coverage'][g]['raw'])} | "
                f"{summary[lab][c]['coverage'][g]['zero_width_rows_left_out']}" for lab in labels) + " |")
    return "\n".join(lines + [""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="the statistics measured, e.g. before / after")
    parser.add_argument("--describe", default="", help="one line saying what --label's statistics are")
    parser.add_argument("--tournaments", type=int, default=200, help="tournaments per cell")
    parser.add_argument("--cells", default=",".join(CELLS), help=f"comma-separated: {', '.join(CELLS)}")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--population", type=int, default=5_000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--truth-bootstrap", type=int, default=200)
    parser.add_argument("--budget-s", type=float, default=math.inf, help="start no new tournament after this many seconds")
    parser.add_argument("--note", default="", help="a paragraph for the README (e.g. how the runs were split)")
    parser.add_argument("--same-as", default=None, help="run only the (cell, seed) pairs this other label has in runs.csv")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "routing_gym" / "verdict_calibration")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    cells = args.cells.split(",")
    unknown = sorted(set(cells) - set(CELLS))
    if unknown:
        parser.error(f"unknown cell(s) {unknown}; choose from {sorted(CELLS)}")
    start, cpu0 = time.monotonic(), cpu_seconds()
    runs_csv = args.out / "runs.csv"
    previous = pd.read_csv(runs_csv, keep_default_na=False, na_values=[""]) if runs_csv.exists() else pd.DataFrame()
    records = previous[previous["label"] != args.label].to_dict("records") if len(previous) else []
    mine = previous[previous["label"] == args.label].to_dict("records") if len(previous) else []
    done = {(r["cell"], int(r["seed"])) for r in mine}
    records += mine
    settings_file = args.out / "calibration.json"
    settings = json.loads(settings_file.read_text())["settings"] if settings_file.exists() else {}
    settings.update({"seeds": args.seeds, "population": args.population, "n_bootstrap": args.bootstrap,
                     "agents": AGENTS, "mixes": MIXES, "cells": CELLS})
    settings.setdefault("labels", {})[args.label] = args.describe or settings.get("labels", {}).get(args.label, "")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = None if args.same_as is None else {(r["cell"], int(r["seed"])) for r in records if r["label"] == args.same_as}
    ran = 0
    for seed in range(args.tournaments):
        if time.monotonic() - start > args.budget_s:
            log(f"budget of {args.budget_s:.0f} s spent at seed {seed}")
            break
        for cell in cells:
            if (cell, seed) not in done and (wanted is None or (cell, seed) in wanted):
                records += one_tournament(cell, seed, args)
                done.add((cell, seed))
                ran += 1
        if seed % 5 == 0:
            log(f"{seed + 1} tournament(s) per cell, {time.monotonic() - start:.0f} s, {cpu_seconds() - cpu0:.0f} s CPU")
            pd.DataFrame(records).to_csv(runs_csv, index=False)  # resumable: a rerun keeps these
    frame = pd.DataFrame(records)
    frame = frame[frame["cell"].isin(cells)]
    settings.setdefault("runs", {})[args.label] = {"tournaments_run_now": ran, "elapsed_s": round(time.monotonic() - start),
                                                   "cpu_s": round(cpu_seconds() - cpu0)}
    summary = summarise(frame)
    pd.DataFrame(records).to_csv(runs_csv, index=False)
    settings_file.write_text(json.dumps({"settings": settings, "summary": summary}, indent=1))
    table = markdown(summary, settings)
    (args.out / "calibration.md").write_text(table)
    timing = "; ".join(f"{lab}: {r['tournaments_run_now']} tournament(s) run, {r['elapsed_s']} s wall, {r['cpu_s']} s CPU"
                       for lab, r in settings["runs"].items())
    write_readme(args.out, "Verdict calibration v2", f"`calibration.md` (the rates), `calibration.json`, `runs.csv` (one "
                 f"line per label x tournament x row). Last runs: {timing} (2 shared cores).\n\n"
                 f"{args.note + chr(10) * 2 if args.note else ''}{__doc__}",
                 argv=[__file__] + (argv if argv is not None else sys.argv[1:]))
    print(table)


if __name__ == "__main__":
    main()
