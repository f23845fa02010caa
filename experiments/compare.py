"""The issue's "must show" run: ``routing-gym compare`` with 5 seeds, plus its sanity checks.

    OMP_NUM_THREADS=1 python experiments/compare.py --tournament default --out /tmp/compare-check

(a check, not a committed result: the default agents on the current builds are committed by
``experiments/task_aware_study.py`` under ``experiments/results/task_aware/<tournament>/compare``)

Checks (printed; exit status 1 if any fails):

1. the oracle's reward is at or above every method's;
2. LinUCB and epsilon-greedy earn more reward than random, with non-overlapping 95 % intervals;
3. every fixed-model row (``always <model>`` and ``fixed-smallest/-medium/-largest``) equals
   a direct numpy computation from the tournament's arrays, read back from ``summary.csv``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from routing_gym.cli.compare import add_executor_arguments, executor_settings
from routing_gym.eval.compare import FIXED_PREFIX, CompareConfig, run_compare, write_outputs


def check(result, summary: pd.DataFrame) -> list[tuple[bool, str]]:
    t, reward = result.tournament, result.reward
    rows = result.test_rows
    by = summary.set_index("method")
    checks = []

    ok_rows = summary[summary["seeds_ok"] > 0]
    oracle = by.loc["oracle", "mean_reward"]
    worst = ok_rows[ok_rows["mean_reward"] > oracle + 1e-12]
    checks.append((worst.empty, f"oracle reward {oracle:.4f} >= every method's (max other "
                                f"{ok_rows[ok_rows['method'] != 'oracle']['mean_reward'].max():.4f})"))

    rnd = by.loc["random"]
    for name in ("linucb", "epsilon-greedy"):
        r = by.loc[name]
        checks.append((r["mean_reward_ci_low"] > rnd["mean_reward_ci_high"],
                       f"{name} reward {r['mean_reward']:.3f} [{r['mean_reward_ci_low']:.3f}, {r['mean_reward_ci_high']:.3f}] "
                       f"above random {rnd['mean_reward']:.3f} [{rnd['mean_reward_ci_low']:.3f}, {rnd['mean_reward_ci_high']:.3f}]"))

    matrix = reward.matrix(t, rows)
    direct = {
        "accuracy": t.correct[rows].mean(axis=0),
        "mean_energy_j": t.energy_j[rows].mean(axis=0),
        "mean_latency_s": t.latency_s[rows].mean(axis=0),
        "mean_power_w": t.mean_power_w[rows].mean(axis=0),
        "mean_reward": matrix.mean(axis=0),
    }
    fixed = [m for m in summary["method"] if m.startswith(FIXED_PREFIX) or m.startswith("fixed-")]
    mismatches = []
    for method in fixed:
        row = by.loc[method]
        k = t.model_index(row["top1_model"])
        if row["top1_share"] != 1.0:
            mismatches.append(f"{method} routes to more than one model")
        mismatches += [f"{method} {metric} {row[metric]!r} != {values[k]!r}"
                       for metric, values in direct.items() if not np.isclose(row[metric], values[k], rtol=1e-12, atol=1e-12)]
    params = t.models["params_b"].to_numpy()
    for alias, k in (("fixed-smallest", int(np.argmin(params))), ("fixed-largest", int(np.argmax(params)))):
        if alias in by.index and by.loc[alias, "top1_model"] != t.model_ids[k]:
            mismatches.append(f"{alias} routes to {by.loc[alias, 'top1_model']}, not {t.model_ids[k]}")
    checks.append((not mismatches, f"{len(fixed)} fixed-model rows equal direct computations from the table"
                   + ("" if not mismatches else ": " + "; ".join(mismatches))))
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", required=True)
    add_executor_arguments(parser)
    args = parser.parse_args()

    tic = time.perf_counter()
    result = run_compare(CompareConfig(tournament=args.tournament, seeds=args.seeds, **executor_settings(args)))
    paths = write_outputs(result, args.out)
    print(paths["table.md"].read_text())
    print(f"compare: {result.elapsed_s:.1f} s for the runs, {time.perf_counter() - tic:.1f} s with outputs")
    checks = check(result, pd.read_csv(paths["summary.csv"]))
    for passed, text in checks:
        print(("PASS " if passed else "FAIL ") + text)
    if result.failures:
        print(f"{len(result.failures)} run(s) failed")
    return 0 if all(p for p, _ in checks) and not result.failures else 1


if __name__ == "__main__":
    sys.exit(main())
