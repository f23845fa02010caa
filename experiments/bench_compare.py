"""Benchmark (not a test): ``compare`` with the default agents, 1 seed, on the shipped
paper-pool and on a procedural paper-pool of ``--n-queries`` questions.

    OMP_NUM_THREADS=1 python experiments/bench_compare.py --n-queries 30000 [--profile 25]

Each run is a fresh subprocess (so peak RSS is its own) that prints wall time, the time in
the aggregation step (every bootstrap interval, the hull gains, the pairwise dominance tests
and the per-benchmark tables: an upper bound on the statistics' share), the agents' fit and
act time, and peak RSS. The shipped tournament is the reference measured in the same run:
the large run is also printed as a ratio to it. Targets for 30,000 queries: wall <= 12x the reference's,
<= 1 GB peak RSS, statistics <= 15 % of the run. ``--profile N`` adds the N functions with the
largest cumulative time (cProfile) of the large run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# wall as a ratio to the reference run of the same invocation: the machine's speed and load cancel
TARGET_WALL_RATIO, TARGET_RSS_MB, TARGET_STATS_SHARE = 12.0, 1024.0, 0.15


def one_run(tournament: str, n_bootstrap: int, profile: int) -> dict:
    """Runs in the child process: one compare, timed, with the aggregation timed apart."""
    from routing_gym.eval import compare

    timings = {"aggregate_s": 0.0}
    aggregate = compare.aggregate

    def timed_aggregate(*args, **kwargs):
        tic = time.perf_counter()
        try:
            return aggregate(*args, **kwargs)
        finally:
            timings["aggregate_s"] += time.perf_counter() - tic

    compare.aggregate = timed_aggregate  # CompareJob.result looks it up in compare's namespace
    config = compare.CompareConfig(tournament=tournament, seeds=1, n_bootstrap=n_bootstrap, progress=False)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    tic = time.perf_counter()
    result = compare.run_compare(config)
    wall = time.perf_counter() - tic
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(profile)
        print(text.getvalue(), file=sys.stderr)
    agents = [r for r in result.runs if r.kind == "agent"]
    return {
        "tournament": result.tournament.card.name,
        "n_queries": result.tournament.n_queries,
        "n_test": int(len(result.test_rows)),
        "methods": len(result.rows),
        "wall_s": wall,
        "aggregate_s": timings["aggregate_s"],
        "fit_s": {r.method: round(r.fit_s, 2) for r in agents},
        "act_s": sum(r.act_s for r in agents),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "failures": [f"{f.method}: {f.error}" for f in result.failures],
    }


def run_child(tournament: str, n_bootstrap: int, profile: int) -> dict:
    cmd = [sys.executable, __file__, "--child", tournament, "--bootstrap", str(n_bootstrap), "--profile", str(profile)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(label: str, r: dict) -> None:
    share = r["aggregate_s"] / r["wall_s"]
    slowest = sorted(r["fit_s"].items(), key=lambda kv: -kv[1])[:4]
    print(f"{label}: {r['n_queries']:,} queries ({r['n_test']:,} held out), {r['methods']} methods: "
          f"wall {r['wall_s']:.1f} s, aggregation/statistics {r['aggregate_s']:.2f} s ({share:.1%}), "
          f"act_batch {r['act_s']:.1f} s, peak RSS {r['peak_rss_mb']:,.0f} MB")
    print(f"  slowest fits (s): {', '.join(f'{m} {s:.1f}' for m, s in slowest)}")
    if r["failures"]:
        print(f"  failures: {r['failures']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-queries", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--profile", type=int, default=0, help="print the top N cumulative-time functions of the large run")
    parser.add_argument("--data", default=None, help="where to keep the generated tournament (default: a temporary folder)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.bootstrap, args.profile)))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data or tmp) / f"paper-pool-{args.n_queries}"
        if not (data / "card.json").exists():
            subprocess.run([sys.executable, "-m", "routing_gym", "data", "generate", "--preset", "paper-pool",
                            "--n-queries", str(args.n_queries), "--seed", str(args.seed), "--out", str(data)],
                           check=True, stdout=subprocess.DEVNULL)
        reference = run_child("paper-pool", args.bootstrap, 0)
        large = run_child(str(data), args.bootstrap, args.profile)
    report("shipped paper-pool (reference)", reference)
    report(f"paper-pool, {args.n_queries:,} queries", large)
    per_query = (large["wall_s"] / large["n_queries"]) / (reference["wall_s"] / reference["n_queries"])
    print(f"ratio large / reference: wall {large['wall_s'] / reference['wall_s']:.1f}x for "
          f"{large['n_queries'] / reference['n_queries']:.1f}x the queries ({per_query:.2f}x per query), "
          f"peak RSS {large['peak_rss_mb'] / reference['peak_rss_mb']:.1f}x")
    share = large["aggregate_s"] / large["wall_s"]
    checks = [(large["wall_s"] <= TARGET_WALL_RATIO * reference["wall_s"], f"wall <= {TARGET_WALL_RATIO:g}x the reference's"),
              (large["peak_rss_mb"] <= TARGET_RSS_MB, f"peak RSS <= {TARGET_RSS_MB:,.0f} MB"),
              (share <= TARGET_STATS_SHARE, f"statistics <= {TARGET_STATS_SHARE:.0%} of the run")]
    for ok, text in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
