"""Generation rate of procedural tournaments (target from issue 3: 100,000 x 9 in seconds).

Prints the wall time and the rate in (question, model) outcomes per second for the
paper-pool config at ``--n-queries`` questions, best of ``--repeats``, and how the time
splits between the vectorized outcome arrays and rendering the question texts (the only
Python loop). Also prints the ratio to a bare numpy reference doing the same number of
Bernoulli draws, so the figure travels across machines.

    python experiments/bench_synthetic.py [--n-queries 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from routing_gym.sources import synthetic
from routing_gym.sources.synthetic import ProceduralConfig, generate


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-queries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = ProceduralConfig(name="bench", n_queries=args.n_queries, seed=0)
    k = len(config.models)
    cells = args.n_queries * k
    generate(ProceduralConfig(n_queries=200))  # warm caches (imports, quadrature)

    total = min(timed(lambda: generate(config, progress=False)) for _ in range(args.repeats))

    # Text rendering alone, with the same row mix (the rest is vectorized numpy + validation).
    rng = np.random.default_rng(0)
    bench = rng.integers(0, len(config.benchmarks), args.n_queries)
    quantile = rng.random(args.n_queries)
    render = min(
        timed(lambda: synthetic._render_all(config, bench, quantile, np.random.default_rng(1), False))
        for _ in range(args.repeats)
    )

    # Reference: the bare minimum, one uniform draw and compare per cell.
    def reference() -> None:
        r = np.random.default_rng(0)
        p = r.random((args.n_queries, k))
        _ = r.random((args.n_queries, k)) < p

    ref = min(timed(reference) for _ in range(args.repeats))

    print(f"generate {args.n_queries:,} queries x {k} models = {cells:,} outcomes: {total:.2f} s  "
          f"({cells / total:,.0f} outcomes/s, {args.n_queries / total:,.0f} questions/s)")
    print(f"  rendering question texts: {render:.2f} s ({render / total:.0%}); outcome arrays, costs, "
          f"tables and validation: {total - render:.2f} s")
    print(f"  bare numpy reference (2 draws per outcome): {ref:.3f} s; generate / reference = {total / ref:.0f}x")
    print(f"  target: 100,000 x 9 in seconds -> {'met' if cells >= 900_000 and total < 10 else 'n/a at this size' if cells < 900_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
