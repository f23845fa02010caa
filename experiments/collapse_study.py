"""Routing-collapse study: when does an RL router stop routing?

A thin caller of ``routing-gym collapse`` (``routing_gym/eval/collapse/study.py`` explains the
study) that writes under ``experiments/results/collapse/<tournament>/`` unless ``--out`` is given.
Every option of the command works here, ``--import`` included:

    OMP_NUM_THREADS=1 python experiments/collapse_study.py                 # PPO, ~2-4 min
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --rewards all --seeds 0 1 2
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --agent linucb --agent-kwargs '{"alpha": 0.5}'
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --import my_router --agent per-benchmark-greedy
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from routing_gym.cli import main  # noqa: E402
from results_readme import write_index, write_readme  # noqa: E402  (experiments/results_readme.py)

RESULTS = Path(__file__).resolve().parent / "results" / "collapse"


def default_out(argv: list[str]) -> list[str]:
    """``--out experiments/results/collapse/<tournament name>`` unless the caller gave one."""
    if any(a == "--out" or a.startswith("--out=") for a in argv):
        return argv
    tournament = "collapse-prone"
    for i, a in enumerate(argv):
        if a == "--tournament" and i + 1 < len(argv):
            tournament = argv[i + 1]
        elif a.startswith("--tournament="):
            tournament = a.split("=", 1)[1]
    return [*argv, "--out", str(RESULTS / (Path(tournament).name or tournament))]


def out_dir(argv: list[str]) -> Path:
    for i, a in enumerate(argv):
        if a == "--out":
            return Path(argv[i + 1])
        if a.startswith("--out="):
            return Path(a.split("=", 1)[1])
    raise AssertionError("default_out always sets --out")


if __name__ == "__main__":
    argv = default_out(sys.argv[1:])
    status = main(["collapse", *argv])
    if status == 0:
        out = out_dir(argv)
        write_readme(out, f"Routing-collapse study: {out.name}", __doc__)
        if out.resolve().parent == RESULTS:
            write_index(RESULTS, "`experiments/collapse_study.py` results", "Each folder's `table.md` is the study's table.")
    sys.exit(status)
