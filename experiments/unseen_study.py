"""Committed results: does reading the question help on a benchmark never seen in training?

Part ``benchmarks``: leave-one-benchmark-out (``routing_gym.eval.generalisation.unseen_benchmarks``) on
zeroeval-math (2 benchmarks), specialist-pool (7), mmlu-pro (14 subjects) and llmrouter (14), one
fold per benchmark, each router trained on every other benchmark's questions and scored on the
held-out one: its routing gain over the fixed-model chain chosen on train, and the share it
recovers of the privileged label value (the cross-fitted per-benchmark route of the held-out
benchmark). Outputs: ``experiments/results/unseen/<tournament>/`` (``unseen.md`` / ``.csv`` /
``.json``, each fold's compare ``table.md`` under ``held-out/<benchmark>/``).

Part ``models``: unseen models (UniRoute's protocol, ``routing_gym.eval.generalisation.unseen_model_gains``) on
zeroeval-math and llmrouter: a quarter of each pool (4 of 16, 2 of 9 models) drawn with
``numpy.random.default_rng(draw)``, three draws, is held out of training and described to the agents that can use
a description by their outcomes on 0, 50 and 200 training questions; the other agents say they
cannot. Outputs: ``experiments/results/unseen/models/<tournament>.md`` / ``.csv``.

Part ``report``: ``README.md``, ``summary.md`` and ``unseen.png`` from the saved tables.

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 nice -n 10 python experiments/unseen_study.py --resume

Routers: compare's default set (``DEFAULT_AGENTS``, and smoothie where a tournament logs answer
texts); the oracle is a privileged reference outside the verdict family. Time on a shared 2-core
machine forces one seed and no audit (rows are "unverified"). Compare cells are saved
under ``.cache/unseen/`` (ignored by git) as they finish; ``--resume`` keeps them, so a study
stopped on a busy machine restarts where it stopped (without it the cells are deleted first).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import time
from pathlib import Path

from routing_gym.eval.compare import CompareConfig
from routing_gym.eval.generalisation.unseen_benchmarks import run_leave_one_benchmark_out, write_unseen_outputs
from results_readme import write_readme  # experiments/results_readme.py

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "unseen"
CELLS = ROOT / ".cache" / "unseen"
TOURNAMENTS = ("zeroeval-math", "specialist-pool", "mmlu-pro", "llmrouter")
# per-benchmark (label), cost-aware / irt / mf (label-nested), knn / uniroute / routellm (content), oracle (privileged)
# the columns of the per-fold tables (every router is in the pooled tables and unseen.md)
FOLD_COLUMNS = ("per-benchmark", "cost-aware", "irt", "mf", "gbdt", "knn", "uniroute", "routellm", "greenserv", "linucb")
PARTS = ("benchmarks", "models", "report")
MODELS_TOURNAMENTS = ("zeroeval-math", "llmrouter")
CALIBRATION_SIZES = (0, 50, 200)
MODEL_DRAWS = (0, 1, 2)
DESCRIBERS = ("uniroute", "cost-aware", "irt", "mf", "gbdt")  # describes_new_models = True
CANNOT = ("per-benchmark", "knn", "routellm")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the local executor runs cells here)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_benchmarks(name: str, seeds: int, resume: bool) -> dict[str, float]:
    """The folds of one tournament; ``timing.json`` lists every run that computed cells (a
    resumed run adds itself) and their sums."""
    cells = CELLS / name
    if not resume and cells.exists():
        shutil.rmtree(cells)
    before = len(list(cells.glob("held-out/*/cells/*.json")))
    wall, cpu = time.perf_counter(), cpu_s()
    config = CompareConfig(tournament=name, agents=None, seeds=seeds, audit=False, executor="local", progress=False)
    result = run_leave_one_benchmark_out(config, None, cells)
    run = {"wall_s": time.perf_counter() - wall, "cpu_s": cpu_s() - cpu,
           "cells_run": len(list(cells.glob("held-out/*/cells/*.json"))) - before}
    record = RESULTS / name / "timing.json"
    runs = json.loads(record.read_text())["runs"] if resume and record.is_file() else []
    runs += [run] if run["cells_run"] else []
    timing = {"tournament": name, "folds": len(result.folds), "runs": runs,
              "cells": sum(r.kind == "agent" for fold in result.folds.values() for r in fold.runs),
              "failed_cells": len(result.failures),
              **{key: sum(r[key] for r in runs) for key in ("wall_s", "cpu_s", "cells_run")}}
    if (RESULTS / name).exists():  # the folder holds exactly this run's files
        shutil.rmtree(RESULTS / name)
    write_unseen_outputs(result, RESULTS / name, plots=False, fold_tables_only=True)
    record.write_text(json.dumps(timing, indent=1))
    log(f"{name}: {len(result.folds)} folds, {timing['cells_run']} of {timing['cells']} cells run in {timing['wall_s']:.0f} s "
        f"wall, {timing['cpu_s']:.0f} s CPU ({len(result.failures)} failed cells)")
    return timing


def run_models(name: str, seed: int) -> None:
    """The unseen-model gains on ``name`` for each draw of held-out models (``MODEL_DRAWS``)."""
    import numpy as np
    import pandas as pd

    from routing_gym.envs import Reward
    from routing_gym.eval.generalisation.unseen_model_gains import answer, table_lines, unseen_model_gains
    from routing_gym.sources import resolve_tournament

    t = resolve_tournament(name)
    n_held_out = t.n_models // 4
    wall, cpu = time.perf_counter(), cpu_s()
    rows, sections, cannot = [], [], {}
    for draw in MODEL_DRAWS:
        held_out = sorted(np.random.default_rng(draw).choice(t.model_ids, n_held_out, replace=False).tolist())
        found = [{"draw": draw, **r} for r in unseen_model_gains(t, DESCRIBERS + CANNOT, held_out, CALIBRATION_SIZES,
                                                                 Reward(), seed=seed)]
        rows += found
        sections += [f"### Draw {draw}: held out {', '.join(held_out)}", "",
                     f"Fixed-model chain of the full pool, chosen on train: {next(r['chain'] for r in found if 'chain' in r)}", "",
                     answer(found), "", *table_lines(found), ""]
        cannot.update({r["agent"]: r["note"] for r in found if r["status"] != "ok"})
    out = RESULTS / "models"
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / f"{name}.csv", index=False)
    lines = [f"# Unseen models on {name}", "",
             f"{n_held_out} of {t.n_models} models held out of training per draw (numpy.random.default_rng(draw)), agent "
             f"seed {seed}; the calibration questions are training questions drawn with default_rng(0). Routing gain over "
             "the full pool's fixed-model chain chosen on train (pp, 95 % interval over test questions, copies together), "
             "Romano-Wolf verdict over every scored row of a draw; new-model share = test questions routed to a held-out "
             "model; 0 calibration questions = routing among the seen models. "
             f"{time.perf_counter() - wall:.0f} s wall, {cpu_s() - cpu:.0f} s CPU for all draws.", "",
             "Cannot use a description (no rows with calibration questions): "
             + "; ".join(f"{agent} ({note})" for agent, note in cannot.items()) + ".", "", *sections]
    (out / f"{name}.md").write_text("\n".join(lines))
    log(f"models on {name}: {time.perf_counter() - wall:.0f} s wall")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help="some of " + ", ".join(PARTS))
    parser.add_argument("--tournaments", default=",".join(TOURNAMENTS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--resume", action="store_true", help="keep the saved cells and run only the missing ones")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    names = args.tournaments.split(",")
    if "benchmarks" in parts:
        for name in names:
            run_benchmarks(name, args.seeds, args.resume)
    if "models" in parts:
        for name in MODELS_TOURNAMENTS:
            run_models(name, 0)
    if "report" in parts:
        write_report()
    return 0


def _pp(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def write_report() -> None:
    """``summary.md`` (per tournament: timing, the pooled table, every fold's gains), ``unseen.png``
    and the README, from the saved ``unseen.json`` / ``timing.json`` / ``models.md``."""
    import pandas as pd

    lines = ["Leave-one-benchmark-out (`routing_gym.eval.generalisation.unseen_benchmarks`): each fold trains on every other "
             "benchmark's questions and is scored on the held-out benchmark's. Routing gain: accuracy - the fixed-model "
             "chain chosen on the fold's training split at the router's mean joules (pp). Label value (privileged "
             "reference): at the same joules, the held-out benchmark's own chain, chosen on its own outcomes and "
             "cross-fitted over 5 copy-grouped folds of its questions, minus the fixed-model chain: what the label "
             "would have been worth had the benchmark been seen. Share = gain / label value, only where the label's "
             "value is above 0 in its 95 % interval and >= 1 pp. Verdicts: one Romano-Wolf step-down over the verified "
             "rows of every table of a tournament (its folds and the pooled table, their independent resamples stacked); "
             "unverified rows are listed with 'no verdict'. A tournament whose tables were written before issue 58 keeps "
             "that run's rule (one step-down per table, unverified rows inside it): its `unseen.md` header says which.", "",
             "Routers: compare's default set (smoothie too on zeroeval-math, which logs answer texts): per-benchmark "
             "is the label router; cost-aware, irt, mf, gbdt are label-nested; knn, uniroute, routellm, greenserv and "
             "the bandits read the text; oracle is privileged, outside the verdict family. One seed (0); no audit "
             "(rows are 'unverified': since issue 58 they get no verdict). Each fold's full compare table: `<tournament>/held-out/<benchmark>/table.md`.", "",
             "| tournament | folds | cells run | wall (s) | CPU (s) | failed cells |", "|---|---|---|---|---|---|"]
    frames = {}
    for name in TOURNAMENTS:
        folder = RESULTS / name
        if not (folder / "unseen.json").is_file():
            continue
        timing = json.loads((folder / "timing.json").read_text())
        lines.append(f"| {name} | {timing['folds']} | {timing['cells_run']} of {timing['cells']} | {timing['wall_s']:.0f} | "
                     f"{timing['cpu_s']:.0f} | {timing['failed_cells']} |")
        frames[name] = pd.DataFrame(json.loads((folder / "unseen.json").read_text())["rows"])
    lines.append("\n(wall and CPU of the run that computed the cells, one process on a 2-core machine shared with other "
                 "jobs, nice 10, summed over the runs that computed them: `timing.json`)\n")
    for name, rows in frames.items():
        pooled = rows[rows["benchmark"] == "pooled"]
        lines += [f"## {name}: pooled over {rows['benchmark'].nunique() - 1} held-out benchmarks ({int(pooled['n'].iloc[0])} questions)", "",
                  "| router | routing gain (pp) [95 % CI] | verdict | label value at its joules (pp) [95 % CI] | share of the label's value [95 % CI] |",
                  "|---|---|---|---|---|"]
        for r in pooled.itertuples():
            share = (f"{r.share_of_label:.2f} [{r.share_ci_low:.2f}, {r.share_ci_high:.2f}]" if pd.notna(r.share_of_label)
                     else f"— ({r.share_note})")
            lines.append(f"| {r.method} | {_pp(r.routing_gain_pp)} [{_pp(r.routing_gain_pp_ci_low)}, {_pp(r.routing_gain_pp_ci_high)}] "
                         f"| {r.verdict} | {_pp(r.label_value_pp)} [{_pp(r.label_value_pp_ci_low)}, {_pp(r.label_value_pp_ci_high)}] | {share} |")
        folds = rows[rows["benchmark"] != "pooled"]
        methods = [m for m in FOLD_COLUMNS if m in set(folds["method"])]
        lines += ["", f"Per held-out benchmark: routing gain (pp; ▲ above / ▼ below 0 by the step-down of that fold's table), "
                  "and the label's value at the per-benchmark router's joules (pp [95 % CI]):", "",
                  "| held out | n | " + " | ".join(methods) + " | label value |", "|---|---|" + "---|" * (len(methods) + 1)]
        for benchmark, group in folds.groupby("benchmark", sort=True):
            by = group.set_index("method")
            mark = {"above": " ▲", "below": " ▼"}
            cells = [f"{by.loc[m, 'routing_gain_pp']:+.2f}{mark.get(str(by.loc[m, 'verdict']).split(' ')[0], '')}" for m in methods]
            lab = by.loc["per-benchmark"]
            lines.append(f"| {benchmark} | {int(group['n'].iloc[0])} | " + " | ".join(cells)
                         + f" | {lab['label_value_pp']:+.2f} [{lab['label_value_pp_ci_low']:+.2f}, {lab['label_value_pp_ci_high']:+.2f}] |")
        lines.append("")
    for name in MODELS_TOURNAMENTS:
        models = RESULTS / "models" / f"{name}.md"
        if models.is_file():
            lines += [f"## Unseen models on {name}", "", models.read_text().split("\n", 2)[2]]
    if frames:
        _plot(frames, RESULTS / "unseen.png")
        lines += ["![pooled routing gain and label value per router](unseen.png)", ""]
    (RESULTS / "summary.md").write_text("\n".join(lines))
    write_readme(RESULTS, "Unseen benchmarks (and models): does reading the question help on a new task?",
                 "`summary.md` (below), `unseen.png`; per tournament `unseen.md` / `unseen.csv` / `unseen.json`, "
                 "`timing.json` and every fold's compare `table.md` under `held-out/`; `models/` the unseen-model part. "
                 "Compare cells are kept under `.cache/unseen/` (not committed). The folder was written in parts "
                 "(`--parts benchmarks`, `--parts models`, `--parts report`; the benchmark cells of specialist-pool, "
                 "mmlu-pro and llmrouter in two resumed runs, `timing.json` lists both); the command above runs them all."
                 "\n\n" + "\n".join(lines), argv=[__file__, "--resume"])


def _plot(frames: dict, path: Path) -> None:
    """Per tournament: each deployable router's pooled routing gain (95 % CI) and the label's value at its joules."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(frames), figsize=(4.2 * len(frames), 3.8), squeeze=False)
    for ax, (name, rows) in zip(axes[0], frames.items()):
        pooled = rows[(rows["benchmark"] == "pooled") & (rows["method"] != "oracle")]
        x = range(len(pooled))
        gain = pooled["routing_gain_pp"].to_numpy()
        err = [gain - pooled["routing_gain_pp_ci_low"].to_numpy(), pooled["routing_gain_pp_ci_high"].to_numpy() - gain]
        ax.errorbar(x, gain, yerr=err, fmt="o", capsize=3, label="routing gain (95 % CI)")
        ax.plot(x, pooled["label_value_pp"], "x", color="tab:red", label="label value at its joules (privileged)")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(list(x), pooled["method"], rotation=45, ha="right")
        ax.set_title(f"{name} (pooled folds)")
        ax.set_ylabel("pp over the fixed-model chain")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
