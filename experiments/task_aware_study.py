"""Committed results: does a router read the question, or only its benchmark?

For paper-pool, specialist-pool, zeroeval-math and llmrouter: ``routing-gym compare`` (the
default agents, ``per-benchmark`` among them, 5 seeds) into ``task_aware/<tournament>/compare``
and ``routing-gym frontier`` (its default
agents: cost-aware, knn, uniroute, linucb, per-benchmark) into ``frontier-<tournament>``,
then ``summary.md`` / ``summary.json`` under ``experiments/results/task_aware/``: routing gain
and content gain of every agent, and each curve's mean gain over both yardsticks (chosen on train).

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 nice -n 10 python experiments/task_aware_study.py

Compare cells (agent x seed) are saved under ``.cache/task_aware/<tournament>/`` (ignored by
git) and reused by a rerun with the same settings and routing-gym version, so rerunning after
a merge that changes only the statistics or outputs costs seconds; delete that folder after a
change to an agent. ``--parts`` picks some of compare, frontier, summary; ``--tournaments``
some tournaments.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs
from routing_gym.eval.compare.report import row_verdict
from routing_gym.eval.frontier import FrontierConfig, run_frontier
from routing_gym.eval.frontier.report import write_frontier_outputs
from results_readme import write_readme  # experiments/results_readme.py

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
CELLS = ROOT / ".cache" / "task_aware"
# tournament -> (compare folder, frontier folder)
FOLDERS = {
    "paper-pool": ("task_aware/paper-pool/compare", "frontier-paper-pool"),
    "specialist-pool": ("task_aware/specialist-pool/compare", "frontier-specialist-pool"),
    "zeroeval-math": ("task_aware/zeroeval-math/compare", "frontier-zeroeval-math"),
    "llmrouter": ("task_aware/llmrouter/compare", "frontier-llmrouter"),
}
PARTS = ("compare", "frontier", "summary")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_one_compare(name: str, seeds: int) -> None:
    tic = time.perf_counter()
    result = run_compare(CompareConfig(tournament=name, seeds=seeds, executor="local", progress=False), out_dir=CELLS / name)
    write_outputs(result, RESULTS / FOLDERS[name][0])
    write_readme(RESULTS / FOLDERS[name][0], f"compare on {name} (default agents, {seeds} seeds)",
                 "`table.md` (the comparison, with the routing-gain and content-gain sections in words), `summary.csv`, "
                 "`per_seed.csv`, `per_benchmark.csv`, `dominance.csv`, the plots; settings in `results.json`. "
                 "Part `compare` of `experiments/task_aware_study.py` (its docstring explains the study).",
                 argv=[__file__, "--parts", "compare", "--tournaments", name, "--seeds", str(seeds)])
    log(f"compare {name}: {time.perf_counter() - tic:.0f} s, {len(result.failures)} failed cell(s)")


def run_one_frontier(name: str) -> None:
    tic = time.perf_counter()
    result = run_frontier(FrontierConfig(tournament=name, progress=False))
    write_frontier_outputs(result, RESULTS / FOLDERS[name][1])
    write_readme(RESULTS / FOLDERS[name][1], f"Operating-point curves on {name}",
                 "`routing-gym frontier` with its default agents, one seed: `table.md` (each curve's mean gain over the "
                 "fixed-model and task-aware yardsticks, with paired CIs; the fixed models and per-benchmark routes some point "
                 "dominates), `points.csv`, `dominance.csv`, `frontier.png`; settings in `frontier.json`. Part `frontier` "
                 "of `experiments/task_aware_study.py`.",
                 argv=[__file__, "--parts", "frontier", "--tournaments", name])
    log(f"frontier {name}: {time.perf_counter() - tic:.0f} s")


def _ci(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if value is None or not math.isfinite(value):
        return "—"
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    return f"{value:+.1f} [{low:+.1f}, {high:+.1f}]" if low is not None else f"{value:+.1f}"


def verdict(row: dict[str, Any]) -> str:
    """The gain section's words for one row (family-wise for deployable rows; tagged otherwise)."""
    words = row_verdict(row)
    return words if row["deployable"] else f"{words} (not deployable: marginal CI)"


def summarise(names: list[str]) -> None:
    lines = ["# Routing gain and content gain", "",
             "Routing gain: accuracy - fixed-model yardstick at the method's mean joules; content gain: accuracy - "
             "task-aware yardstick (fixed models and per-benchmark routes; both chains chosen on train, evaluated on "
             "test, starting at the null policy 0 J / 0 %: `routing_gym/eval/core/yardstick.py`). pp, paired 95 % bootstrap "
             "intervals over test queries (copies of a question resampled together). Verdicts: family-wise 95 % "
             "(Romano-Wolf step-down over each table's deployable verified rows, both gains); non-deployable rows are "
             "tagged and judged by their marginal interval. Written by `experiments/task_aware_study.py`.", ""]
    payload: dict[str, Any] = {}
    for name in names:
        compare_dir, frontier_dir = (RESULTS / folder for folder in FOLDERS[name])
        entry: dict[str, Any] = {}
        if (compare_dir / "results.json").exists():
            results = json.loads((compare_dir / "results.json").read_text())
            rows = [r for r in results["rows"] if r["kind"] != "fixed-model" and r["seeds_ok"]]
            entry["compare"] = [{k: r.get(k) for k in ("method", "deployable", "accuracy", "mean_energy_j", "routing_gain_pp",
                                                        "routing_gain_pp_ci_low", "routing_gain_pp_ci_high", "routing_gain_pp_fw",
                                                        "content_gain_pp", "content_gain_pp_ci_low", "content_gain_pp_ci_high",
                                                        "content_gain_pp_fw", "same_routes_as")}
                                | {"verdict": verdict(r)} for r in rows]
            lines += [f"## {name} (`{compare_dir.relative_to(ROOT)}`, {len(results['settings']['seeds'])} seeds)", "",
                      "| Method | Deployable | Accuracy % | Mean J | Routing gain pp | Content gain pp | Verdict |",
                      "|---|---|---:|---:|---:|---:|---|"]
            lines += [f"| {r['method']} | {'yes' if r['deployable'] else 'no'} | {100 * r['accuracy']:.1f} | "
                      f"{r['mean_energy_j']:,.1f} | {_ci(r, 'routing_gain_pp')} | {_ci(r, 'content_gain_pp')} | {verdict(r)}"
                      + (f" (routes exactly as {r['same_routes_as']})" if r.get("same_routes_as") else "") + " |"
                      for r in rows]
            lines.append("")
        if (frontier_dir / "frontier.json").exists():
            frontier = json.loads((frontier_dir / "frontier.json").read_text())
            entry["frontier"] = [{"agent": c["agent"], **c["summary"]} for c in frontier["curves"] if not c["error"]]
            lines += [f"Frontier (`{frontier_dir.relative_to(ROOT)}`, one seed): mean gain over the fixed-model yardstick / "
                      "over the task-aware yardstick (pp):", ""]
            for c in entry["frontier"]:
                gain = {"mean_gain_pp": c.get("mean_gain_pp")} | {f"mean_gain_pp_ci_{e}": c.get(f"mean_gain_pp_ci_{e}") for e in ("low", "high")}
                content = {"mean_gain_pp": c.get("mean_content_gain_pp")} | {
                    f"mean_gain_pp_ci_{e}": c.get(f"mean_content_gain_pp_ci_{e}") for e in ("low", "high")}
                lines.append(f"- {c['agent']}: {_ci(gain, 'mean_gain_pp')} / {_ci(content, 'mean_gain_pp')}")
            lines.append("")
        payload[name] = entry
    out = RESULTS / "task_aware"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text("\n".join(lines))
    (out / "summary.json").write_text(json.dumps(payload, indent=1))
    write_readme(out, "Does a router read the question, or only its benchmark?",
                 "`summary.md` / `summary.json`: routing gain and content gain of every agent on each tournament, and "
                 "each frontier curve's mean gain over both yardsticks, collected from the compare folders "
                 "(`task_aware/<tournament>/compare/`) and the frontier folders (`frontier-<tournament>/`), each of which "
                 f"has the README of the command that wrote it.\n\n{__doc__}", argv=[__file__, "--parts", "summary"])
    print("\n".join(lines))


def check_choices(parser: argparse.ArgumentParser, args: argparse.Namespace, parts: tuple[str, ...],
                  tournaments: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``--parts`` and ``--tournaments`` as lists; an unknown name is a usage error listing the choices."""
    chosen = args.parts.split(","), args.tournaments.split(",")
    for value, allowed, option in zip(chosen, (parts, tournaments), ("--parts", "--tournaments")):
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            parser.error(f"{option}: unknown {unknown}; choose from {', '.join(allowed)}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--tournaments", default=",".join(FOLDERS), help="comma-separated: " + ", ".join(FOLDERS))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    parts, names = check_choices(parser, args, PARTS, tuple(FOLDERS))
    for name in names:
        if "compare" in parts:
            run_one_compare(name, args.seeds)
        if "frontier" in parts:
            run_one_frontier(name)
    if "summary" in parts:
        summarise(list(FOLDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
