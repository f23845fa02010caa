"""Build both real-data tournaments and print what the issue asks to see.

    OMP_NUM_THREADS=1 python experiments/build_real_tournaments.py --data-dir ../shared/data --out runs/real

Prints, per tournament: build time, N x K, dropped pairs and excluded models; for ZeroEval,
the regraded accuracy of every pool model on both benchmarks beside ZeroEval's published
accuracy and ZeroEval's own scoring rule applied to the answers our parser read; for
HumanEval, the sandboxed grader on all 164 canonical solutions (all must pass) and on the
bare stubs (none may pass). Then run ``routing-gym data info runs/real/*``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="data directory (default: ROUTING_GYM_DATA_DIR)")
    parser.add_argument("--out", default="runs/real", help="where to write the two tournaments")
    parser.add_argument("--processes", type=int, default=None, help="grading workers (default: all CPUs)")
    args = parser.parse_args()
    out = Path(args.out)
    pd.set_option("display.width", 200)

    from routing_gym.sources.llmrouter import build_llmrouter_tournament
    from routing_gym.sources.zeroeval import build_zeroeval_tournament, compare_with_published

    start = time.monotonic()
    t, report = build_zeroeval_tournament(args.data_dir, processes=args.processes)
    t.save(out / "zeroeval-math")
    report.save(out / "zeroeval-math")
    print(f"zeroeval-math: {t.n_queries} x {t.n_models} built in {time.monotonic() - start:.0f} s "
          f"({', '.join(f'{k} {v:.0f}' for k, v in report.timings.items())}); "
          f"{len(report.dropped)} dropped pairs; {len(report.excluded_models)} models outside the pool")
    table = compare_with_published(report)
    print("\nregraded vs ZeroEval published accuracy (%); rule = ZeroEval's scoring rule on the answers we read")
    print(table.to_string(index=False))
    within = (table["regraded_minus_published"].abs() <= 1.0)
    print(f"\nwithin 1 pp: {int(within.sum())} of {len(table)} (model, benchmark) pairs; "
          f"ZeroEval's rule on our reading within 1 pp: {int((table['rule_minus_published'].abs() <= 1.0).sum())}")
    for row in table[~within].itertuples():
        print(f"  {row.model_id} {row.benchmark}: {row.regraded_minus_published:+.2f} pp; {row.n_we_credit} answers we "
              f"accept and ZeroEval's first-number rule rejects (mostly 'a + b = c' answers), {row.n_rule_credits} "
              f"the reverse")
    medians = report.grades.groupby("benchmark")["output_tokens"].median()
    print(f"\nmedian output tokens over the pool: {medians.to_dict()}")

    start = time.monotonic()
    t2, report2 = build_llmrouter_tournament(args.data_dir)
    t2.save(out / "llmrouter")
    report2.save(out / "llmrouter")
    print(f"\nllmrouter: {t2.n_queries} x {t2.n_models} built in {time.monotonic() - start:.0f} s")

    from routing_gym.grading import grade_batch
    from routing_gym.grading.humaneval import isolation_summary
    from routing_gym.sources.benchmarks import load_benchmark

    he = load_benchmark("humaneval", args.data_dir)
    metas, refs = list(he.metadata), list(he.reference)
    start = time.monotonic()
    good = grade_batch("humaneval", ["```python\n" + m["code_prompt"] + m["canonical_solution"] + "```" for m in metas],
                       refs, metas, processes=args.processes)
    stub = grade_batch("humaneval", [m["code_prompt"] + "    pass\n" for m in metas], refs, metas, processes=args.processes)
    print(f"\nHumanEval sandbox ({'; '.join(isolation_summary())}):")
    print(f"  canonical solutions passing: {sum(r.correct for r in good)}/164, stubs passing: "
          f"{sum(r.correct for r in stub)}/164, {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
