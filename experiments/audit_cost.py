"""The audit's cost on the main job: ``routing-gym compare`` with its default settings.

One run, the audit on (the default): each cell times its own fit + act and, separately, the
audit's second fit + act (``audit.seconds`` per run in results.json). The wall time without the
audit is the run's wall time minus the audit seconds (cells run one after another on the local
executor), printed beside the measured total; ``--also-without`` runs the same job again with
``--no-audit`` and prints its measured wall time too.

    python experiments/audit_cost.py --out /tmp/audit-cost [--also-without] [compare options ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def run(out: Path, extra: list[str]) -> float:
    tic = time.perf_counter()
    subprocess.run([sys.executable, "-m", "routing_gym", "compare", "--out", str(out), "--no-plots", *extra], check=True)
    return time.perf_counter() - tic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="a fresh folder (saved cells would be reused)")
    parser.add_argument("--also-without", action="store_true", help="run the job again with --no-audit")
    args, extra = parser.parse_known_args()
    wall = run(args.out / "with-audit", extra)
    results = json.loads((args.out / "with-audit" / "results.json").read_text())
    per_method: dict[str, list[float]] = {}
    for r in results["runs"]:
        if r.get("audit"):
            per_method.setdefault(r["method"], []).append(r["audit"]["seconds"])
    audit_s = sum(sum(v) for v in per_method.values())
    cells_s = sum(r["fit_s"] + r["act_ms_per_query"] * results["settings"]["tournament"]["n_test"] / 1000
                  for r in results["runs"] if r["kind"] == "agent" and r["status"] == "ok")
    print(f"compare {' '.join(extra) or '(defaults)'}: {len(results['runs'])} runs")
    print(f"wall time with the audit:    {wall:8.1f} s (compare's own elapsed_s {results['settings']['elapsed_s']:.1f} s)")
    print(f"audit (second fit + act):    {audit_s:8.1f} s = {100 * audit_s / wall:.0f} % of the wall time; "
          f"first fit + act of the agents {cells_s:.1f} s")
    print(f"wall time without the audit: {wall - audit_s:8.1f} s (derived: wall time minus audit seconds)")
    for method, seconds in sorted(per_method.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {method:16s} audit {sum(seconds):7.2f} s over {len(seconds)} seed(s)")
    if args.also_without:
        plain = run(args.out / "without-audit", [*extra, "--no-audit"])
        print(f"wall time measured with --no-audit: {plain:.1f} s")


if __name__ == "__main__":
    main()
