"""Does ``frontier``'s mean gain cover 0 when the truth is 0? Null tournaments, before -> after.

    python experiments/frontier_null.py [--tournaments 200] [--bootstrap 500] [--queries 2963]
                                        [--out experiments/results/frontier-null]

Each tournament is a paper-pool draw with ``text_signal`` 0 (seeds 0, 1, ...; the paper split).
On it both yardsticks are chosen on train (``train_yardsticks``) and two curves are built per
yardstick from the yardstick's own policies, so their population mean gain over it is exactly 0:

- ``policies``: the chain's policies themselves, in chain order (the issue's null curve);
- ``policies and mixes``: the chain's policies with, between each two consecutive ones, a policy
  that sends each query to one of the two by a fair coin (drawn once per tournament). Its
  population point lies on the chain's segment, so the curve lies on the yardstick: gain 0, and
  its interval has width (the coins and the test sample move it).

Each curve's mean gain (``Yardstick.mean_gain_over_range``, as ``frontier`` reads it) and its
percentile interval over one paired bootstrap plan (copies of a question together; the
yardstick's policies and the curve resampled together) is read two ways:

- ``before``: the curve enveloped on test points (its upper concave hull, recomputed in every
  resample: the reading ``frontier`` used before issue 58);
- ``after``: the curve read as a chain in its own order, by the yardstick's mixing rule.

The folder's README gives each (yardstick, curve, reading)'s coverage of 0 with its Wilson 95 %
interval; ``tournaments.csv`` has every tournament's estimate and interval.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from tqdm import tqdm

from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardstick, train_yardsticks
from routing_gym.fronts.hull import hull_accuracy_at
from routing_gym.sources.synthetic import ProceduralConfig, generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import write_readme  # noqa: E402  (experiments/results_readme.py)

CONFIDENCE = 0.95
TOLERANCE = 1e-9  # float dust: an interval [0, 0] covers 0
READINGS = ("before", "after")


def envelope_mean_gain(stick: Yardstick, energy_j: np.ndarray, accuracy: np.ndarray, curve_j: np.ndarray,
                       curve_acc: np.ndarray, n_grid: int = 256) -> np.ndarray:
    """The reading ``frontier`` used before issue 58: the curve's upper concave hull of test
    points (``hull_accuracy_at``) minus the yardstick over the curve's joule range, averaged."""
    low = curve_j.min(axis=-1)
    high = np.minimum(curve_j.max(axis=-1), energy_j.max(axis=-1))
    grid = low[..., None] + (high - low)[..., None] * np.linspace(0.0, 1.0, n_grid)
    gap = (hull_accuracy_at(curve_j[..., None, :], curve_acc[..., None, :], grid)
           - stick.accuracy_at(energy_j[..., None, :], accuracy[..., None, :], grid))
    return np.where(high > low, ((gap[..., 1:] + gap[..., :-1]) / 2).mean(axis=-1), np.nan)


def null_curves(policies_c: np.ndarray, policies_j: np.ndarray, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``[n, Q]`` per-query correctness and joules of the two null curves built from a chain's ``[n, V]``
    policies (chain order): the policies, and the policies interleaved with fair-coin mixes of neighbours."""
    n, v = policies_c.shape
    coin = rng.random((n, v - 1)) < 0.5
    mixes = [np.where(coin, p[:, :-1], p[:, 1:]) for p in (policies_c, policies_j)]
    order = np.argsort(np.concatenate([np.arange(v) * 2, np.arange(v - 1) * 2 + 1]), kind="stable")
    return {"policies": (policies_c, policies_j),
            "policies and mixes": tuple(np.concatenate([p, m], axis=1)[:, order]
                                        for p, m in zip((policies_c, policies_j), mixes))}


def one_tournament(seed: int, n_bootstrap: int, n_queries: int) -> list[dict[str, Any]]:
    """Every (yardstick, curve, reading)'s mean gain and interval on one null tournament."""
    t = generate(ProceduralConfig(text_signal=0.0, seed=seed, n_queries=n_queries), progress=False)
    train, test = t.split_rows("train"), t.split_rows("test")
    sticks = train_yardsticks(t.correct[train], t.energy_j[train], t.benchmark_codes[train], len(t.benchmarks),
                              list(t.model_ids))
    codes = t.benchmark_codes[test]
    cand_c = np.concatenate([t.correct[test], sticks.routes.per_query(t.correct[test], codes)], axis=1)
    cand_j = np.concatenate([t.energy_j[test], sticks.routes.per_query(t.energy_j[test], codes)], axis=1)
    rng = np.random.default_rng([seed, 58])
    curves = {}
    for tag, stick in (("routing", sticks.fixed), ("content", sticks.task)):
        if len(stick.index) >= 2:  # a chain of one policy gives a curve of one point: no range
            curves.update({(tag, name): (stick, c) for name, c in
                           null_curves(cand_c[:, stick.index], cand_j[:, stick.index], rng).items()})
    blocks = [cand_c, cand_j] + [v for _, (c, j) in curves.values() for v in (c, j)]
    plan = BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test], n_bootstrap, seed)
    columns = np.cumsum([0] + [b.shape[1] for b in blocks])
    test_means = np.concatenate(blocks, axis=1).mean(axis=0)
    boot = plan.means(np.concatenate(blocks, axis=1))
    part = lambda values, i: values[..., columns[i]:columns[i + 1]]  # noqa: E731
    rows = []
    for n, ((tag, name), (stick, _)) in enumerate(curves.items()):
        at = (lambda values: (part(values, 1), part(values, 0), part(values, 3 + 2 * n), part(values, 2 + 2 * n)))
        for reading in READINGS:
            gain = stick.mean_gain_over_range if reading == "after" else (
                lambda *a, s=stick: envelope_mean_gain(s, *a))
            estimate = 100 * float(gain(*at(test_means)))
            low, high = percentile_interval(100 * gain(*at(boot)), CONFIDENCE)
            rows.append({"seed": seed, "yardstick": tag, "curve": name, "reading": reading, "points": part(test_means, 2 + 2 * n).size,
                         "estimate_pp": estimate, "ci_low": float(low), "ci_high": float(high),
                         "covers_0": bool(low <= TOLERANCE and high >= -TOLERANCE), "zero_width": bool(high - low <= TOLERANCE)})
    return rows


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson score 95 % interval of a binomial proportion (scipy)."""
    ci = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (yardstick, curve, reading): coverage of 0 with its Wilson interval, the mean estimate and width."""
    out = []
    for (tag, curve, reading), g in frame.groupby(["yardstick", "curve", "reading"], sort=False):
        covered = int(g["covers_0"].sum())
        low, high = wilson(covered, len(g))
        out.append({"yardstick": tag, "curve": curve, "reading": reading, "tournaments": len(g), "covered": covered,
                    "coverage": covered / len(g), "coverage_low": low, "coverage_high": high,
                    "mean_estimate_pp": g["estimate_pp"].mean(), "mean_width_pp": (g["ci_high"] - g["ci_low"]).mean(),
                    "zero_width": int(g["zero_width"].sum())})
    return pd.DataFrame(out)


def markdown(summary: pd.DataFrame) -> str:
    lines = ["| Yardstick | Curve | Tournaments | Coverage of 0 before [Wilson 95 %] | after [Wilson 95 %] | "
             "Mean estimate pp before → after | Mean CI width pp before → after | Zero-width CIs after |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (tag, curve), g in summary.groupby(["yardstick", "curve"], sort=False):
        b, a = (g[g["reading"] == r].iloc[0] for r in READINGS)
        cov = lambda r: f"{r['covered']}/{r['tournaments']} = {100 * r['coverage']:.1f} % [{100 * r['coverage_low']:.1f}, {100 * r['coverage_high']:.1f}]"  # noqa: E731
        lines.append(f"| {tag} | {curve} | {a['tournaments']} | {cov(b)} | {cov(a)} | "
                     f"{b['mean_estimate_pp']:+.3f} → {a['mean_estimate_pp']:+.3f} | {b['mean_width_pp']:.3f} → "
                     f"{a['mean_width_pp']:.3f} | {a['zero_width']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tournaments", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=500)
    parser.add_argument("--queries", type=int, default=ProceduralConfig().n_queries)
    parser.add_argument("--out", default="experiments/results/frontier-null")
    args = parser.parse_args(argv)
    tic, cpu = time.perf_counter(), time.process_time()
    rows = [r for seed in tqdm(range(args.tournaments), desc="null tournaments")
            for r in one_tournament(seed, args.bootstrap, args.queries)]
    frame = pd.DataFrame(rows)
    summary = summarise(frame)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "tournaments.csv", index=False, float_format="%.6g")
    elapsed = {"wall_s": time.perf_counter() - tic, "cpu_s": time.process_time() - cpu}
    (out / "summary.json").write_text(json.dumps({"settings": vars(args), **elapsed,
                                                  "rows": summary.to_dict(orient="records")}, indent=2) + "\n")
    table = markdown(summary)
    print(table)
    write_readme(out, "frontier's mean gain on null tournaments: coverage of 0, before → after", f"""
{args.tournaments} paper-pool tournaments of {args.queries} queries drawn with `text_signal` 0 (seeds 0 to
{args.tournaments - 1}, the paper split), {args.bootstrap} paired bootstrap resamples each, {CONFIDENCE:.0%} percentile
intervals. On each, curves made of a yardstick's own policies (true mean gain 0 over it; see the script's docstring):
`policies` (the chain's policies in chain order) and `policies and mixes` (with a fair-coin per-query mix of each two
neighbours between them: the same truth, and an interval with width). **before**: the curve enveloped on test points,
in every resample too (`frontier` before issue 58); **after**: the curve read as a chain in its own order by the
yardstick's mixing rule (`Yardstick.mean_gain_over_range`, as `frontier` reads it now). Same seeds, same resamples.

{table}

`policies` after is 0 in every resample by construction (the curve *is* the yardstick): its coverage says only that the
reading adds no bias; the `policies and mixes` rows are the test of the interval. Files: `tournaments.csv` (every
tournament, yardstick, curve and reading), `summary.json` (these rates; run time {elapsed['wall_s']:.0f} s wall,
{elapsed['cpu_s']:.0f} s CPU on a shared 2-core machine).
""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
