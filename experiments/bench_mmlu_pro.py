"""Benchmark (not a test): ``data build mmlu-pro`` and ``compare`` on it with the default agents, 1 seed.

    OMP_NUM_THREADS=1 python experiments/bench_mmlu_pro.py --data-dir ../shared/data [--out DIR] [--skip-build]

Each step is a fresh ``routing-gym`` subprocess; ``os.wait4`` gives its own peak RSS and CPU
time. The build runs with an empty cache (``ROUTING_GYM_CACHE`` set to a new folder), so the
312k answer texts are tokenized; ``--warm`` adds a second build that reuses the token-count
cache. Targets for ``compare`` (issue 24): <= 120 s wall and <= 1.5 GB peak RSS on 2 cores.
Wall time on a shared machine depends on its load: the load average is printed before and
after, and CPU seconds (user + system) next to the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_COMPARE_WALL_S, TARGET_COMPARE_RSS_MB = 120.0, 1536.0
CLI = [sys.executable, "-m", "routing_gym"]


def measured(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd``; its wall time, CPU seconds and peak RSS (its own, from ``wait4``)."""
    tic = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - tic
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {"command": _portable(" ".join(cmd[2:])), "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "tail": [_portable(line) for line in output.strip().splitlines()[-3:]]}


def _portable(text: str) -> str:
    """Machine paths out of committed figures: an absolute path keeps only its last part."""
    return re.sub(r"(?<![\w.])/[^\s]*/([^/\s]+)", r".../\1", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ROUTING_GYM_DATA_DIR"))
    parser.add_argument("--out", default=None, help="tournament directory (default: a temporary one)")
    parser.add_argument("--skip-build", action="store_true", help="reuse --out, time compare only")
    parser.add_argument("--warm", action="store_true", help="also time a second build that reuses the token cache")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    if not args.data_dir:
        sys.exit("give --data-dir or set ROUTING_GYM_DATA_DIR")
    work = Path(tempfile.mkdtemp(prefix="bench-mmlu-pro-"))
    out = Path(args.out) if args.out else work / "mmlu-pro"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ROUTING_GYM_CACHE": str(work / "cache")}
    results: dict = {"load_average_before": os.getloadavg(), "cpus": os.cpu_count()}
    if not args.skip_build:
        build = CLI + ["data", "build", "mmlu-pro", "--data-dir", args.data_dir, "--out", str(out)]
        results["build_cold"] = measured(build, env)
        if args.warm:
            results["build_warm"] = measured(build + ["--out", str(work / "again")], env)
    compare = CLI + ["compare", "--tournament", str(out), "--seeds", "1", "--out", str(work / "compare")]
    results["compare_1_seed"] = step = measured(compare, env)
    results["load_average_after"] = os.getloadavg()
    results["compare_targets"] = {
        "wall_s": TARGET_COMPARE_WALL_S, "peak_rss_mb": TARGET_COMPARE_RSS_MB,
        "wall_ratio": round(step["wall_s"] / TARGET_COMPARE_WALL_S, 2),
        "cpu_ratio": round(step["cpu_s"] / TARGET_COMPARE_WALL_S, 2),
        "rss_ratio": round(step["peak_rss_mb"] / TARGET_COMPARE_RSS_MB, 2)}
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
