"""Generation rate of procedural tournaments (target from issue 3: 100,000 x 9 in seconds).

Prints the time and the rate in (question, model) outcomes per CPU second for the
paper-pool config at ``--n-queries`` questions, best of ``--repeats`` by CPU time (wall time
is printed too but depends on how busy the machine is), and how the time splits between
the vectorized outcome arrays and rendering the question texts (the only Python loop). Also prints the ratio to a bare numpy reference doing the same number of
Bernoulli draws, so the figure travels across machines.

    python experiments/bench_synthetic.py [--n-queries 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from routing_gym.sources import synthetic
from routing_gym.sources.synthetic import ProceduralConfig, generate


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): CPU time is robust to a busy machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def best(fn, repeats: int) -> tuple[float, float]:
    """The (wall, CPU) pair of the repeat with the least CPU time."""
    return min((timed(fn) for _ in range(repeats)), key=lambda r: r[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-queries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = ProceduralConfig(name="bench", n_queries=args.n_queries, seed=0)
    k = len(config.models)
    cells = args.n_queries * k
    generate(ProceduralConfig(n_queries=200))  # warm caches (imports, quadrature)

    total, total_cpu = best(lambda: generate(config, progress=False), args.repeats)

    # Text rendering alone, with the same row mix (the rest is vectorized numpy + validation).
    rng = np.random.default_rng(0)
    bench = rng.integers(0, len(config.benchmarks), args.n_queries)
    quantile = rng.random(args.n_queries)
    _, render = best(lambda: synthetic._render_all(config, bench, quantile, np.random.default_rng(1), False), args.repeats)

    # Reference: the bare minimum, one uniform draw and compare per cell.
    def reference() -> None:
        r = np.random.default_rng(0)
        p = r.random((args.n_queries, k))
        _ = r.random((args.n_queries, k)) < p

    _, ref = best(reference, args.repeats)

    print(f"generate {args.n_queries:,} queries x {k} models = {cells:,} outcomes: {total:.2f} s wall, {total_cpu:.2f} s CPU  "
          f"({cells / total_cpu:,.0f} outcomes per CPU second, {args.n_queries / total_cpu:,.0f} questions per CPU second)")
    print(f"  CPU split: rendering question texts {render:.2f} s ({render / total_cpu:.0%}); outcome arrays, costs, "
          f"tables and validation {max(total_cpu - render, 0.0):.2f} s")
    print(f"  bare numpy reference (2 draws per outcome): {ref:.3f} CPU s; generate / reference = {total_cpu / ref:.0f}x")
    verdict = "n/a at this size" if cells < 900_000 else "met" if total_cpu < 10 else "NOT met"
    print(f"  target: 100,000 x 9 in seconds (CPU) -> {verdict}")


if __name__ == "__main__":
    main()
