"""The audit's cost on the main job: ``routing-gym compare`` with its default settings.

Runs the same job back to back, under the same load: with the audit (the default), with
``--no-audit``, and, with ``--baseline SRC`` (a source tree of another commit, e.g. ``git archive
main | tar -x -C SRC``), that commit's code with its audit, so a change of the audit is measured
against the code before it. Each run's wall time and CPU time (user + system of the run and every
process it waited for: pool workers, the audit's process) are measured here; each cell also times
the audit's second fit + act (``audit.seconds`` in results.json). The text controller's audit is
not run here (it trains a language model): its cost at the default budget is derived from a
committed comparison's measured fit and act times (``--controller-results``), since the audit
repeats both.

    python experiments/audit_cost.py --out experiments/results/audit-cost [--baseline SRC] [compare options ...]

Writes ``README.md`` (the command, the runs, the per-agent audit seconds), ``runs.json`` and the
with-audit run's ``table.md`` into ``--out``; the comparisons themselves run in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTROLLER_RESULTS = REPO / "experiments" / "results" / "text_controller" / "compare-specialist-pool" / "results.json"
# How the repository's folders are named when installed (pyproject.toml, [tool.setuptools.package-dir]).
PACKAGES = {"routing_gym": "routing_gym", "routing_gym_agents": "agents", "routing_gym_envs_data": "envs_data"}


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(label: str, out: Path, extra: list[str], pythonpath: str | None = None) -> dict:
    """One ``compare`` in a subprocess: its wall and CPU seconds, and its results.json's audit seconds.
    It runs in ``out``'s parent folder, so that ``python -m`` finds the packages through
    ``pythonpath`` (or the installed ones), never a checkout in the working directory."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cpu, tic = cpu_of_children(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "routing_gym", "compare", "--out", str(out), "--no-plots", *extra],
                   check=True, env=env, stdout=subprocess.DEVNULL, cwd=out.parent)
    wall, cpu = time.perf_counter() - tic, cpu_of_children() - cpu
    results = json.loads((out / "results.json").read_text())
    audited = [r for r in results["runs"] if r.get("audit") and r["audit"].get("status") in ("passed", "failed")]
    per_method: dict[str, float] = {}
    for r in audited:
        per_method[r["method"]] = per_method.get(r["method"], 0.0) + r["audit"]["seconds"]
    print(f"{label}: wall {wall:.1f} s, CPU {cpu:.1f} s, audit seconds {sum(per_method.values()):.1f}", file=sys.stderr)
    return {"label": label, "wall_s": wall, "cpu_s": cpu, "audit_s": sum(per_method.values()),
            "audited_cells": len(audited), "changed": sum(r["audit"]["changed"] for r in audited),
            "statuses": sorted({r["audit"]["status"] for r in results["runs"] if r.get("audit")}),
            "audit_s_per_method": per_method}


def baseline_path(source: Path, scratch: Path) -> str:
    """A folder that imports ``source``'s packages under their installed names (for PYTHONPATH)."""
    folder = scratch / "baseline-packages"
    folder.mkdir()
    for name, sub in PACKAGES.items():
        (folder / name).symlink_to((source / sub).resolve(), target_is_directory=True)
    return str(folder)


def controller_cost(path: Path) -> list[str]:
    """Each text-controller cell's fit, act and audit seconds, as that compare run measured them."""
    results = json.loads(path.read_text())
    n_test = results["settings"]["tournament"]["n_test"]
    lines = []
    for r in results["runs"]:
        if r["method"] in ("sft", "grpo", "kl-grpo") and r["status"] == "ok":
            act = r["act_ms_per_query"] * n_test / 1000
            audit = (r.get("audit") or {}).get("seconds")
            lines.append(f"| {r['method']} | {r['fit_s']:.0f} | {act:.0f} | "
                         f"{'—' if audit is None else f'{audit:.0f}'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="where README.md, runs.json and table.md go")
    parser.add_argument("--baseline", type=Path, help="a source tree of another commit, measured with its own audit")
    parser.add_argument("--controller-results", type=Path, default=CONTROLLER_RESULTS,
                        help="a compare results.json with text-controller cells (measured fit and act times)")
    args, extra = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.baseline:
        args.baseline = args.baseline.resolve()
    runs = []
    with tempfile.TemporaryDirectory(prefix="audit-cost-") as scratch:
        scratch_dir = Path(scratch)
        if args.baseline:
            runs.append(run("baseline (its own audit)", scratch_dir / "baseline", extra,
                            baseline_path(args.baseline, scratch_dir)))
        runs.append(run("this commit, audit on", scratch_dir / "with-audit", extra))
        runs.append(run("this commit, --no-audit", scratch_dir / "without-audit", [*extra, "--no-audit"]))
        (args.out / "table.md").write_text((scratch_dir / "with-audit" / "table.md").read_text())
    (args.out / "runs.json").write_text(json.dumps(runs, indent=1) + "\n")
    command = " ".join(["python experiments/audit_cost.py --out", str(args.out)]
                       + (["--baseline SRC"] if args.baseline else []) + extra)
    with_audit = next(r for r in runs if r["label"] == "this commit, audit on")
    lines = [
        "# The audit's cost on the main job", "",
        f"Written by `{command}` (compare {' '.join(extra) or 'with its defaults'}: paper-pool, the default agents, "
        "5 seeds, local executor). The runs ran one after another on the same machine; wall time depends on its load, "
        "CPU time (user + system of the run and every process it waited for, the audit's process included) much less.", "",
        "| Run | Wall s | CPU s | Audit s (cells' second fit + act) | Audited cells | Actions changed |",
        "|---|---:|---:|---:|---:|---:|",
        *[f"| {r['label']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['audit_s']:.1f} | {r['audited_cells']} | "
          f"{r['changed']} |" for r in runs],
        "", "Audit seconds per agent (this commit, summed over seeds; wall time of the request to the audit's process, "
        "its start-up included in the first):", "",
        "| Agent | Audit s |", "|---|---:|",
        *[f"| {m} | {s:.2f} |" for m, s in sorted(with_audit["audit_s_per_method"].items(), key=lambda kv: -kv[1])],
    ]
    if args.controller_results.exists():
        rel = args.controller_results.resolve().relative_to(REPO) if args.controller_results.resolve().is_relative_to(REPO) \
            else args.controller_results.name
        lines += ["", f"Text controller at its default budget (not run by this script: the seconds its compare run measured, "
                      f"`{rel}`; one CPU run, local executor, so `sft`, `grpo` and `kl-grpo` share one SFT run in the "
                      "driver and one in the audit's process, whichever cell comes first pays for it):", "",
                  "| Agent | Fit s | Act s (all held-out queries) | Audit s (second fit + act) |", "|---|---:|---:|---:|",
                  *controller_cost(args.controller_results)]
    (args.out / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
