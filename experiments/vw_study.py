"""Issue 61's Vowpal Wabbit agents beside linucb: verdicts and time per query on four tournaments.

Parts (``--parts``, all by default), written under ``experiments/results/vw/``:

- ``features``: which features the VW agents read by default. The three agents on paper-pool with
  the project's featurizer (``tfidf-svd``, linucb's) and with VW's own hashed words (``text``),
  ``--seeds`` seeds, audit off (one compare per feature kind, in this process): ``features.json``;
- ``compare``: ``routing-gym compare --agents vw-squarecb,vw-epsilon,vw-regcb,linucb`` on
  paper-pool, specialist-pool, llmrouter and mmlu-pro, audit on, one after another, each as its own
  process so its wall time, CPU time and peak memory are its own (``os.wait4``); outputs in
  ``<tournament>/`` (the saved cells stay under ``.cache/vw/``, ignored by git);
- ``summary``: ``README.md`` (this command, every table) from what the parts wrote.

llmrouter and mmlu-pro are built from the public data (``ROUTING_GYM_DATA_DIR``). Run it niced on a
shared machine::

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 nice -n 5 python experiments/vw_study.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from results_readme import command_line, write_readme  # this script's folder is on sys.path
from routers_study import compare_process
from task_aware_study import _ci, check_choices

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "vw"
CELLS = ROOT / ".cache" / "vw"
TOURNAMENTS = ("paper-pool", "specialist-pool", "llmrouter", "mmlu-pro")
VW = ("vw-squarecb", "vw-epsilon", "vw-regcb")
AGENTS = (*VW, "linucb")
FEATURES = ("tfidf-svd", "text")
PARTS = ("features", "compare", "summary")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_features(seeds: int) -> None:
    """The VW agents on paper-pool with each feature kind (audit off: a choice, not a verdict)."""
    from routing_gym.eval.compare import CompareConfig, run_compare

    rows = []
    for features in FEATURES:
        config = CompareConfig(tournament="paper-pool", agents=list(VW), seeds=seeds, audit=False, progress=False,
                               fixed_models=False, agent_kwargs={name: {"features": features} for name in VW})
        result = run_compare(config)
        for name in VW:
            row = result.row(name)
            rows.append({"agent": name, "features": features, **{k: row.get(k) for k in (
                "mean_reward", "mean_reward_seed_sd", "accuracy", "mean_energy_j", "content_gain_pp",
                "content_gain_pp_ci_low", "content_gain_pp_ci_high", "routing_gain_pp", "routing_gain_pp_ci_low",
                "routing_gain_pp_ci_high", "fit_s", "act_ms_per_query")}})
        log(f"features {features} done")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "features.json").write_text(json.dumps({"command": command_line(), "seeds": seeds, "rows": rows}, indent=1))


def run_one_compare(name: str, seeds: int) -> None:
    """One ``routing-gym compare`` process; its outputs and resource use into ``OUT/<name>``."""
    args = ["compare", "--tournament", name, "--agents", ",".join(AGENTS), "--seeds", str(seeds), "--no-plots"]
    load_before = os.getloadavg()
    usage = compare_process(args, CELLS / name, OUT / name)
    (OUT / name / "run.json").write_text(json.dumps({
        "command": " ".join(["routing-gym", *args]), **usage, "niceness": os.nice(0),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }, indent=1))
    log(f"compare {name}: {usage['wall_s']:.0f} s wall, {usage['cpu_s']:.0f} s CPU, {usage['peak_rss_mb']:.0f} MB")


def _gain(row: dict[str, Any], key: str) -> str:
    """The gain with its interval and the family-wise decision's mark (compare's ▲ / ▼)."""
    return _ci(row, key) + {"above": " ▲", "below": " ▼"}.get(row.get(f"{key}_fw") or "", "")


def _verdict(row: dict[str, Any]) -> str:
    from routing_gym.eval.compare.report import row_verdict
    from routing_gym.eval.execution.audit import withheld

    return "no verdict (not verified)" if withheld(row["deployable_label"]) else row_verdict(row)


def _compare_section(name: str) -> list[str]:
    folder = OUT / name
    results = json.loads((folder / "results.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    n_train = results["settings"]["tournament"]["n_train"]
    rows = {r["method"]: r for r in results["rows"] if r["kind"] != "fixed-model" and r.get("seeds_ok")}
    lines = [f"### {name} (`{name}/`, {len(results['settings']['seeds'])} seeds, {n_train:,} training and "
             f"{results['settings']['tournament']['n_test']:,} held-out queries, "
             f"{results['settings']['tournament']['n_models']} models)", "",
             f"`{run['command']}` — {run['wall_s']:.0f} s wall, {run['cpu_s']:.0f} s CPU, peak {run['peak_rss_mb']:.0f} MB, "
             f"exit status {run['exit_status']}; load average {run['load_average_before'][0]:.1f} before, "
             f"{run['load_average_at_end'][0]:.1f} at the end (1-min).", "",
             "| Method | Deployable | Accuracy % | Mean J | Routing gain pp | Content gain pp | Verdict | "
             "Fit ms / training query | × linucb | Act ms / query | × linucb | Audit s (all seeds) |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    base = rows.get("linucb")
    for method in AGENTS:
        r = rows.get(method)
        if r is None:
            lines.append(f"| {method} | failed | | | | | | | | | | |")
            continue
        fit_ms = 1000 * r["fit_s"] / n_train
        ratio = (lambda key: f"{r[key] / base[key]:.1f}" if base and base[key] else "—")
        lines.append(f"| {method} | {r['deployable_label']} | {100 * r['accuracy']:.1f} | {r['mean_energy_j']:,.1f} | "
                     f"{_gain(r, 'routing_gain_pp')} | {_gain(r, 'content_gain_pp')} | {_verdict(r)} | {fit_ms:.3f} | "
                     f"{ratio('fit_s')} | {r['act_ms_per_query']:.3f} | {ratio('act_ms_per_query')} | "
                     f"{r['audit']['seconds']:.1f} |")
    return [*lines, ""]


def summarise(argv: list[str]) -> None:
    about = ["Each part writes its own files (`--parts features`: `features.json`; `--parts compare`: one folder per "
             "tournament, each with the `routing-gym compare` command that wrote it in `run.json`); `--parts summary` "
             "rewrites this page from them.", "",
             "Vowpal Wabbit's contextual bandits (`agents/vw.py`: `cb_explore_adf` with SquareCB, epsilon-greedy and "
             "RegCB-Opt, trained online through the training env on bandit feedback) beside `linucb` (the project's "
             "hand-written disjoint LinUCB on the same features).", ""]
    if (OUT / "features.json").exists():
        feats = json.loads((OUT / "features.json").read_text())
        about += [f"## Features (`features.json`: paper-pool, {feats['seeds']} seeds, audit off)", "",
                  f"Written by `{feats['command']}`.", "",
                  "`tfidf-svd`: the project's featurizer (32 TF-IDF + SVD columns, the benchmark one-hot, a bias; linucb's "
                  "features) as VW's dense namespace; `text`: VW's own hashed namespace of the question's words plus the "
                  "benchmark as one feature. Mean reward is the training objective (gated_rank, lambda_e 0.4), ± its "
                  "standard deviation over seeds.", "",
                  "| Agent | Features | Mean reward | Accuracy % | Mean J | Content gain pp | Fit s |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        about += [f"| {r['agent']} | {r['features']} | {r['mean_reward']:.3f} ± {r['mean_reward_seed_sd']:.3f} | "
                  f"{100 * r['accuracy']:.1f} | {r['mean_energy_j']:,.1f} | {_ci(r, 'content_gain_pp')} | {r['fit_s']:.1f} |"
                  for r in feats["rows"]]
        means = {f: sum(r["mean_reward"] for r in feats["rows"] if r["features"] == f) / len(VW) for f in FEATURES}
        about += ["", "Mean reward over the three agents: " + ", ".join(f"{f} {m:.3f}" for f, m in means.items())
                  + f"; the agents' default is `tfidf-svd` (higher here: {means['tfidf-svd'] > means['text']}), which also "
                  "makes the comparison with linucb one of the learner alone.", ""]
    about += ["## Compare on four tournaments (audit on)", "",
              "Content gain: accuracy minus the task-aware yardstick (per-benchmark routes chosen on train, the fixed "
              "models, their mixes) at the method's mean joules, pp [paired 95 % bootstrap interval over test queries]. "
              "Verdicts are family-wise (Romano-Wolf over the deployable verified rows *of this table*: the four agents), "
              "so a row's words can change in a comparison with other agents; ▲ / ▼: the gain is above / below 0 under "
              "that rule, and the verdict words are compare's content-gain section's. Fit ms / training query: the mean fit time "
              "over seeds divided by the training queries (derived; one online pass); act ms / query: `act_batch` wall "
              "time per held-out query. Time ratios are against linucb in the same compare process. Machine: 2 cores "
              "shared with other work, so wall times are load-bound (the load average is given); CPU time is beside "
              "them.", ""]
    for name in TOURNAMENTS:
        if (OUT / name / "results.json").exists():
            about += _compare_section(name)
    write_readme(OUT, "Vowpal Wabbit's contextual bandits beside linucb", "\n".join(about), argv=argv)
    print((OUT / "README.md").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--tournaments", default=",".join(TOURNAMENTS), help="comma-separated: " + ", ".join(TOURNAMENTS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds of every compare (default: compare's 5)")
    args = parser.parse_args()
    parts, names = check_choices(parser, args, PARTS, TOURNAMENTS)
    if "features" in parts:
        run_features(args.seeds)
    if "compare" in parts:
        for name in names:
            run_one_compare(name, args.seeds)
    if "summary" in parts:
        summarise(sys.argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
