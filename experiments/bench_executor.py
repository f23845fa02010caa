"""Benchmark (not a test): one grid of compare cells under the local, process and ray executors.

    OMP_NUM_THREADS=1 python experiments/bench_executor.py [--workers 2] [--seeds 2]

The grid: ``--agents`` x ``--seeds`` on ``--tournament`` (default: PPO (``--ppo-steps``) and
A2C x 5 seeds = 10 CPU-bound cells of several seconds each; the bandits now train in well under
a second a cell, too short for workers to pay back their imports, so they are left out). Each executor runs the
same grid into its own fresh folder (nothing resumed), timed wall clock from the call to the
finished result, in ``--rounds`` interleaved rounds (best wall per executor counts). ``local``
is the reference measured in the same run; the others are printed as speed-ups over it
(derived: best local wall / best executor wall). Ray is timed twice: including the
start of a local Ray (a cold laptop run) and on an already started Ray (a cluster, where Ray is
up before the job). The per-cell times (each cell's own fit + act) show the grid meets the
>= 1 s per cell floor. The 1-minute load average before and after each run is printed: on a
shared machine other users' work slows every executor, and the parallel ones most; the
"parallel headroom" (pure CPU work on a warm pool of the same size vs one after another,
measured before and after) is the ceiling any executor could reach in this run. Also checks
that every executor produced the same table.md. Target: ray >= 1.6x local on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

TARGET_RAY_SPEEDUP = 1.6


def spin(n: int) -> float:
    """Pure-Python CPU work (no imports, no caches); returns its wall time."""
    tic, x = time.perf_counter(), 0
    for i in range(n):
        x += i * i % 7
    return time.perf_counter() - tic


def parallel_headroom(workers: int, n: int = 3_000_000, chunks: int = 4) -> float:
    """What this machine gives ``workers`` processes right now: the speed-up of ``chunks`` equal
    pure-CPU chunks on a warm spawned pool over the same chunks one after another. Other users'
    load lowers it; it caps what any executor can reach in this run."""
    import multiprocessing

    tic = time.perf_counter()
    for _ in range(chunks):
        spin(n)
    sequential = time.perf_counter() - tic
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(spin, [10] * workers)  # start the workers before timing
        tic = time.perf_counter()
        pool.map(spin, [n] * chunks, chunksize=1)
        parallel = time.perf_counter() - tic
    return sequential / parallel


def timed_run(executor: str, args: argparse.Namespace, out: Path) -> tuple[float, dict[str, list[float]], str]:
    from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs

    config = CompareConfig(
        tournament=args.tournament, agents=args.agents.split(","), seeds=args.seeds, progress=False,
        executor=executor, workers=args.workers, n_bootstrap=200,
        agent_kwargs={"ppo": {"total_timesteps": args.ppo_steps}} if "ppo" in args.agents.split(",") else {},
    )
    tic = time.perf_counter()
    result = run_compare(config, out_dir=out)
    wall = time.perf_counter() - tic
    if result.failures:
        raise SystemExit(f"{executor}: {len(result.failures)} cell(s) failed: {result.failures[0].error}")
    cells: dict[str, list[float]] = {}
    for r in result.runs:
        if r.kind == "agent":
            cells.setdefault(r.method, []).append(r.fit_s + r.act_s)
    table = write_outputs(result, out, plots=False)["table.md"].read_text()
    return wall, cells, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="paper-pool")
    parser.add_argument("--agents", default="ppo,a2c")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ppo-steps", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best wall of each executor counts")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from routing_gym.ray_cluster import init_ray, ray_module
    from routing_gym.sources import resolve_tournament

    resolve_tournament(args.tournament)  # build/cache it before any timing
    print(f"grid: {args.agents} x {args.seeds} seeds on {args.tournament}; {args.workers} workers; "
          f"{os.cpu_count()} CPUs", flush=True)
    headroom = [parallel_headroom(args.workers)]
    print(f"parallel headroom now (derived: {args.workers} processes of pure CPU work vs one after another): "
          f"{headroom[0]:.2f}x | load avg {os.getloadavg()[0]:.1f}", flush=True)
    walls: dict[str, list[float]] = {}
    tables = {}
    with tempfile.TemporaryDirectory() as scratch:
        # Rounds interleave the executors, so a burst of other users' load hits all of them.
        for round_ in range(args.rounds):
            for label, executor in (("local", "local"), ("process", "process"), ("ray (incl. start)", "ray"),
                                    ("ray (started)", "ray")):
                if label == "ray (started)":
                    init_ray(num_cpus=args.workers)
                load_before = os.getloadavg()[0]
                out = Path(scratch) / f"{label.replace(' ', '_')}-{round_}"
                wall, cells, tables[label] = timed_run(executor, args, out)
                walls.setdefault(label, []).append(wall)
                every = [c for times in cells.values() for c in times]
                per_agent = ", ".join(f"{name} {sum(t) / len(t):.1f}" for name, t in cells.items())
                print(f"round {round_ + 1} {label:18s} wall {wall:6.1f} s | {len(every)} cells, each "
                      f"{min(every):.1f}-{max(every):.1f} s (sum {sum(every):.1f} s; mean per agent: {per_agent}) | "
                      f"load avg {load_before:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
                if label == "ray (started)":
                    ray_module().shutdown()
    best = {label: min(times) for label, times in walls.items()}
    headroom.append(parallel_headroom(args.workers))
    print(f"parallel headroom after: {headroom[1]:.2f}x | load avg {os.getloadavg()[0]:.1f}")
    print(f"\nspeed-up over local (derived: best local wall / best executor wall over {args.rounds} round(s)):")
    for label, wall in best.items():
        if label != "local":
            print(f"  {label:18s} {best['local'] / wall:4.2f}x   (walls: {', '.join(f'{w:.1f}' for w in walls[label])} s;"
                  f" local: {', '.join(f'{w:.1f}' for w in walls['local'])} s)")
    same = all(t == tables["local"] for t in tables.values())
    print(f"same table.md from every executor: {same}")
    best_ray = max(best["local"] / best[k] for k in best if k.startswith("ray"))
    print(f"target ray >= {TARGET_RAY_SPEEDUP}x local: {'met' if best_ray >= TARGET_RAY_SPEEDUP else 'NOT met'} "
          f"(best ray {best_ray:.2f}x; this machine offered {min(headroom):.2f}-{max(headroom):.2f}x to any "
          f"{args.workers} processes during the run)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
