"""Compare on a split with a benchmark held out of training: is any fixed model "beyond the label"?

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python experiments/held_out_content.py \
        [--tournament zeroeval-math] [--hold-out math-l5] [--before DIR] [--out experiments/results/held-out-content]

``routing-gym data split <tournament> --hold-out-benchmarks <benchmark>`` (every question of the
benchmark in test, the other benchmarks split as usual), then ``routing-gym compare`` with the
default agents, one seed, the audit on. Cells are kept under ``.cache/held-out-content/`` (not
committed), so a rerun resumes. The folder gets the compare ``table.md``, ``summary.csv`` and
``results.json``; with ``--before DIR`` (the output folder of the same compare run on an earlier
commit) also its ``table.md`` / ``results.json`` under ``before/`` and a before -> after table of the
content-gain section: each agent row's content gain, whether it can read the question, and its
content verdict, and the fixed-model rows' content gains.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from routing_gym.cli import main as cli
from routing_gym.eval.compare.report import row_verdict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import write_readme  # noqa: E402  (experiments/results_readme.py)

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "held-out-content"
KEPT = ("table.md", "summary.csv", "results.json")


def _ci(row: dict[str, Any], metric: str) -> str:
    return f"{row[metric]:+.1f} [{row[f'{metric}_ci_low']:+.1f}, {row[f'{metric}_ci_high']:+.1f}]"


def _content_lines(table: str) -> list[str]:
    """The verdict lines of a table's content-gain section."""
    section = table.split("## Content gain over the task-aware yardstick")[1].split("\n## ")[0]
    return [line for line in section.splitlines() if line.startswith("- ") and "(content gain" in line
            or line.startswith("- not distinguishable from the task-aware")]


def before_after(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Every row's content gain and, for agents, its content verdict, before -> after."""
    old = {r["method"]: r for r in before["rows"] if r["seeds_ok"]}
    lines = ["| Row | Reads the question (after) | Content gain pp before | after | Verdict before | after |",
             "|---|---|---:|---:|---|---|"]
    for r in after["rows"]:
        if not r["seeds_ok"] or r["method"] not in old:
            continue
        b = old[r["method"]]
        agent = r["kind"] != "fixed-model"
        lines.append(f"| {r['method']} | {'yes' if r.get('reads_question') else 'no'} | {_ci(b, 'content_gain_pp')} | "
                     f"{_ci(r, 'content_gain_pp')} | {row_verdict(b) if agent else '—'} | {row_verdict(r) if agent else '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tournament", default="zeroeval-math")
    parser.add_argument("--hold-out", default="math-l5")
    parser.add_argument("--before", default=None, help="the same compare's output folder from an earlier commit")
    parser.add_argument("--out", default="experiments/results/held-out-content")
    args = parser.parse_args(argv)
    tic, cpu = time.perf_counter(), time.process_time()
    split, compare = CACHE / "tournament", CACHE / "compare"
    if cli(["data", "split", args.tournament, "--hold-out-benchmarks", args.hold_out, "--out", str(split),
            "--name", "zem-l5"]) != 0:
        return 1
    if cli(["compare", "--tournament", str(split), "--agents", "default", "--seeds", "1", "--no-plots",
            "--out", str(compare)]) != 0:
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        shutil.copy(compare / name, out / name)
    after = json.loads((compare / "results.json").read_text())
    table = (compare / "table.md").read_text()
    about = [f"`routing-gym data split {args.tournament} --hold-out-benchmarks {args.hold_out}` (every {args.hold_out} "
             "question in test, the other benchmarks split as usual), then `routing-gym compare --agents default --seeds 1` "
             "(audit on) on it: `table.md`, `summary.csv`, `results.json`.", "",
             "Content-gain verdict lines (after):", "", *_content_lines(table), ""]
    if args.before:
        (out / "before").mkdir(exist_ok=True)
        if Path(args.before).resolve() != (out / "before").resolve():  # a rerun reads the folder's own copy
            for name in ("table.md", "results.json"):
                shutil.copy(Path(args.before) / name, out / "before" / name)
        before = json.loads((Path(args.before) / "results.json").read_text())
        about += ["Before (`before/`: the same compare run on commit 14a68bd, before issue 58's item 4, with that "
                  "commit's code; its cells are the ones this run resumed from, the agents' routing code being unchanged):", "", *_content_lines((Path(args.before) / "table.md").read_text()), "",
                  "Every row, before → after (agent verdicts from the content section's rule, `compare.report.row_verdict`):",
                  "", before_after(before, after), ""]
    about.append(f"Run time of this script: {time.perf_counter() - tic:.0f} s wall, {time.process_time() - cpu:.0f} s CPU "
                 "(this process; cells resumed from `.cache/held-out-content/` run in none), a shared 2-core machine.")
    write_readme(out, f"Compare with {args.hold_out} held out of training ({args.tournament})", "\n".join(about))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
