"""Calibration of the suite's verdicts on procedural tournaments whose truth is known.

A verdict ("routes", "routes beyond the task label", "worse than routing by the label") is a claim
about an error rate. This study measures the rates, before -> after, on the same seeds:

- **before**: the yardsticks of the previous release, hulls of *test* points (which fixed models and
  per-benchmark routes form the hull decided by their test values; outside the range the nearest end
  point), verdicts from each row's marginal 95 % interval, rows resampled one by one;
- **after**: the yardsticks fixed on train (``routing_gym/eval/core/yardstick.py``), verdict lines by the
  Romano-Wolf step-down over the deployable rows (``routing_gym/eval/core/familywise.py``), copies of a
  question resampled together.

Three parts, each over many fresh tournaments (a new generator seed each; models and benchmarks are
the preset's, so their population values are fixed):

- ``null``: ``paper-pool`` with ``text_signal 0``: the question text carries nothing about who is
  right, so no router can read it. Rates: the label router's content-gain CI covers its population
  value (nominal 95 %); *any* deployable row called "routes beyond the task label" (family-wise,
  nominal <= 5 %); the label router called "worse than routing by the label".
- ``power``: ``specialist-pool`` (``specialization_signal 1``: per-model topic skills named in the
  text): how often the verdict finds a content router's real gain.
- ``coverage``: for every row, both gains' CIs against population values computed by routing a
  large fresh draw of the same generator (``--population`` queries) with the same trained agents,
  the yardstick's policies evaluated there too (for "before": the hull of population points).

Agents (fast, deployable): ``per-benchmark`` (the label router of the reward), ``per-benchmark``
at ``mu`` 0.2 (a label router at accuracy - mu x J, ``label-mu``), ``knn`` (reads the text),
``linucb`` (bandit feedback), ``random``. Every number comes with its binomial (Wilson) 95 % interval.

    OMP_NUM_THREADS=1 python experiments/verdict_calibration.py --tournaments 200

writes ``experiments/results/verdict_calibration/`` (``calibration.md``, ``calibration.json``,
``runs.csv`` with one line per tournament x row, ``README.md``). ``--budget-s`` stops starting new
tournaments after that many seconds (the table says how many ran); ``--resume`` keeps the
tournaments already in ``runs.csv`` and adds the missing seeds (the elapsed and CPU seconds in the
README are those of the last run).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.eval.core import familywise
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardsticks, train_yardsticks
from routing_gym.eval.execution.fitting import fit_and_act
from routing_gym.fronts import hull as H
from routing_gym.sources.synthetic import generate, preset_config
from routing_gym.tournament import Tournament
from results_readme import write_readme  # experiments/results_readme.py

OUT = Path(__file__).parent / "results" / "verdict_calibration"
AGENTS = {"per-benchmark": ("per-benchmark", {}), "label-mu": ("per-benchmark", {"mu": 0.2}), "knn": ("knn", {}),
          "linucb": ("linucb", {}), "random": ("random", {})}
LABEL_ROUTER = "per-benchmark"
PARTS = {"null": ("paper-pool", {"text_signal": 0.0}), "power": ("specialist-pool", {})}  # preset, overrides
GAINS = ("routing_gain_pp", "content_gain_pp")
CONFIDENCE = 0.95


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def draw(part: str, seed: int, population: int) -> tuple[Tournament, Tournament]:
    """One tournament of the part's preset at its own size and split, and ``population`` further
    queries of the same draw for population values: one generator call (the model side, e.g. the
    specialist pool's per-model topic skills, is drawn from the seed) split at random into the two;
    questions are independent given the model side, so both are samples of one population."""
    preset, overrides = PARTS[part]
    config = preset_config(preset, **overrides)
    whole = generate(replace(config, n_queries=config.n_queries + population, seed=seed, splits=None), progress=False)
    order = np.random.default_rng(seed).permutation(whole.n_queries)
    sample = whole.subset(rows=np.sort(order[:config.n_queries])).with_splits(seed=seed, proportions=dict(sorted(config.splits.items())))
    return sample, whole.subset(rows=np.sort(order[config.n_queries:]))


def routed(t: Tournament, rows: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-query correctness and joules of ``actions`` on ``rows`` (every agent here acts validly)."""
    picked = np.arange(len(rows)), np.asarray(actions, dtype=np.int64)
    return t.correct[rows][picked], t.energy_j[rows][picked]


def candidates(t: Tournament, rows: np.ndarray, sticks: Yardsticks) -> np.ndarray:
    """``[n, 2 (K + P)]`` per-query correctness then joules of the fixed models and the routes."""
    codes = t.benchmark_codes[rows]
    return np.concatenate([t.correct[rows], sticks.routes.per_query(t.correct[rows], codes),
                           t.energy_j[rows], sticks.routes.per_query(t.energy_j[rows], codes)], axis=1)


def before_gains(width: int, k: int, cand: np.ndarray, method_acc: np.ndarray, method_j: np.ndarray) -> dict[str, np.ndarray]:
    """The previous release's gains: hulls of the given points (test or population), nearest end point
    outside their range. ``cand`` ``[..., 2 (K + P)]`` means; methods ``[..., M]``."""
    acc, joules = cand[..., :width], cand[..., width:]
    fa, fj = acc[..., None, :k], joules[..., None, :k]
    return {"routing_gain_pp": 100 * H.routing_gain(fj, fa, method_j, method_acc),
            "content_gain_pp": 100 * H.routing_gain(joules[..., None, :], acc[..., None, :], method_j, method_acc)}


def after_gains(sticks: Yardsticks, width: int, k: int, cand: np.ndarray, method_acc: np.ndarray,
                method_j: np.ndarray) -> dict[str, np.ndarray]:
    acc, joules = cand[..., :width], cand[..., width:]
    gains = sticks.gains(joules[..., :k], acc[..., :k], joules[..., k:], acc[..., k:], method_j, method_acc)
    return {name: gains[name] for name in GAINS}


def one_tournament(part: str, seed: int, population: int, n_bootstrap: int) -> list[dict[str, Any]]:
    """Every row's gains, intervals and verdicts under both rules, with population truths."""
    t, big = draw(part, seed, population)
    train, test, every = t.split_rows("train"), t.split_rows("test"), np.arange(big.n_queries)
    sticks = train_yardsticks(t.correct[train], t.energy_j[train], t.benchmark_codes[train], len(t.benchmarks),
                              list(t.model_ids))
    k, width = t.n_models, t.n_models + len(sticks.routes)
    reward = Reward()
    values, truth_values = [], []
    for name, (agent, kwargs) in AGENTS.items():
        fitted = fit_and_act(agent, kwargs, reward, "train", seed, t, test, [])
        values.append(np.stack(routed(t, test, fitted.actions), axis=1))
        batch = ObservationBatch.from_tournament(big, every)  # the same fitted agent routes the fresh draw
        truth_values.append(np.stack(routed(big, every, fitted.agent.act_batch(batch)), axis=1).mean(axis=0))
    methods = np.concatenate(values, axis=1)  # [n, 2M]: (correct, J) per agent
    test_cand = candidates(t, test, sticks)
    pop_cand = candidates(big, every, sticks).mean(axis=0)
    pop_methods = np.stack(truth_values)  # [M, 2]
    plans = {"before": BootstrapPlan(len(test), n_bootstrap, seed),
             "after": BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test], n_bootstrap, seed)}
    rows = []
    for rule, plan in plans.items():
        block = np.concatenate([methods, test_cand], axis=1)
        boot, point = plan.means(block), block.mean(axis=0)
        width_m = 2 * len(AGENTS)  # (correct, J) per agent, then the candidates
        m_acc, m_j = point[0:width_m:2], point[1:width_m:2]
        b_acc, b_j = boot[:, 0:width_m:2], boot[:, 1:width_m:2]
        gains = before_gains if rule == "before" else (lambda *a: after_gains(sticks, *a))
        est = gains(width, k, point[width_m:], m_acc, m_j)
        res = gains(width, k, boot[:, width_m:], b_acc, b_j)
        truth = gains(width, k, pop_cand, pop_methods[:, 0], pop_methods[:, 1])
        decided = _decide(rule, est, res)
        for i, name in enumerate(AGENTS):
            row: dict[str, Any] = {"part": part, "seed": seed, "rule": rule, "method": name}
            for g in GAINS:
                low, high = percentile_interval(res[g][:, i], CONFIDENCE)
                row.update({g: float(est[g][i]), f"{g}_ci_low": float(low), f"{g}_ci_high": float(high),
                            f"{g}_truth": float(truth[g][i]), f"{g}_decision": decided[g][i]})
            rows.append(row)
    return rows


def _decide(rule: str, est: dict[str, np.ndarray], res: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """Each row's above / below / "" per gain: marginal intervals (before) or the step-down (after)."""
    if rule == "before":
        out = {}
        for g in GAINS:
            low, high = percentile_interval(res[g], CONFIDENCE)
            out[g] = [familywise.ABOVE if lo > 0 else familywise.BELOW if hi < 0 else familywise.NONE
                      for lo, hi in zip(low, high)]
        return out
    m = len(AGENTS)
    decision = familywise.stepdown(np.concatenate([est[g] for g in GAINS]),
                                   np.concatenate([res[g] for g in GAINS], axis=1), 1 - CONFIDENCE)
    return {g: decision.decisions[j * m:(j + 1) * m] for j, g in enumerate(GAINS)}


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson score 95 % interval of a binomial proportion."""
    if n == 0:
        return math.nan, math.nan
    z, p = 1.959963984540054, successes / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def rate(flags: pd.Series) -> dict[str, Any]:
    n, s = int(len(flags)), int(flags.sum())
    low, high = wilson(s, n)
    return {"rate": s / n if n else math.nan, "low": low, "high": high, "count": s, "n": n}


def summarise(frame: pd.DataFrame) -> dict[str, Any]:
    """The rates of the study, per rule (and part)."""
    out: dict[str, Any] = {}
    for rule, by_rule in frame.groupby("rule", sort=False):
        entry: dict[str, Any] = {}
        null = by_rule[by_rule["part"] == "null"]
        if len(null):
            label = null[null["method"] == LABEL_ROUTER]
            entry["null_label_content_ci_covers_truth"] = rate(
                (label["content_gain_pp_ci_low"] <= label["content_gain_pp_truth"] + 1e-9)
                & (label["content_gain_pp_truth"] - 1e-9 <= label["content_gain_pp_ci_high"]))
            entry["null_label_content_ci_covers_0"] = rate(
                (label["content_gain_pp_ci_low"] <= 1e-9) & (label["content_gain_pp_ci_high"] >= -1e-9))
            entry["null_label_called_worse"] = rate(label["content_gain_pp_decision"] == familywise.BELOW)
            any_beyond = null.groupby("seed")["content_gain_pp_decision"].apply(lambda d: (d == familywise.ABOVE).any())
            entry["null_any_row_beyond_label"] = rate(any_beyond)
        power = by_rule[(by_rule["part"] == "power") & (by_rule["method"] == "knn")]
        if len(power):
            entry["power_knn_beyond_label"] = rate(power["content_gain_pp_decision"] == familywise.ABOVE)
            entry["power_knn_content_truth_mean_pp"] = float(power["content_gain_pp_truth"].mean())
        coverage = {}
        for g in GAINS:
            for part, by_part in by_rule.groupby("part"):
                covered = (by_part[f"{g}_ci_low"] <= by_part[f"{g}_truth"] + 1e-9) & (by_part[f"{g}_truth"] - 1e-9 <= by_part[f"{g}_ci_high"])
                coverage[f"{part} {g}"] = rate(covered)
                wrong = ((by_part[f"{g}_decision"] == familywise.ABOVE) & (by_part[f"{g}_truth"] <= 0)) | (
                    (by_part[f"{g}_decision"] == familywise.BELOW) & (by_part[f"{g}_truth"] >= 0))
                coverage[f"{part} {g} wrong-sign claims"] = rate(wrong)
        entry["coverage"] = coverage
        out[str(rule)] = entry
    return out


def _fmt(r: dict[str, Any]) -> str:
    return f"{100 * r['rate']:.1f} % [{100 * r['low']:.1f}, {100 * r['high']:.1f}] ({r['count']}/{r['n']})"


def markdown(summary: dict[str, Any], settings: dict[str, Any]) -> str:
    rules = list(summary)
    lines = ["# Verdict calibration: error rates where the truth is known", "",
             f"{settings['tournaments']} tournaments per part (queries per tournament, each at its preset's size and "
             f"split: {settings['n_queries']}; "
             f"population values from {settings['population']:,} fresh queries of the same generator; "
             f"{settings['n_bootstrap']} resamples). Rates with Wilson 95 % intervals. before: hulls of test points, "
             "marginal CIs, rows resampled alone; after: yardsticks fixed on train, Romano-Wolf step-down over the "
             "deployable rows, copies of a question resampled together.", "",
             "| Rate | nominal | " + " | ".join(rules) + " |", "|---|---|" + "---|" * len(rules)]
    named = [("null_label_content_ci_covers_truth", "null: label router's content-gain CI covers its population value", "95 %"),
             ("null_label_content_ci_covers_0", "null: label router's content-gain CI covers 0", "—"),
             ("null_label_called_worse", "null: label router called 'worse than routing by the label'", "≤ 5 %"),
             ("null_any_row_beyond_label", "null: any row called 'routes beyond the task label'", "≤ 5 %"),
             ("power_knn_beyond_label", "power: knn called 'routes beyond the task label' (specialist-pool)", "high")]
    for key, label, nominal in named:
        if all(key in summary[r] for r in rules):
            lines.append(f"| {label} | {nominal} | " + " | ".join(_fmt(summary[r][key]) for r in rules) + " |")
    if all("power_knn_content_truth_mean_pp" in summary[r] for r in rules):
        lines.append("| power: knn's mean population content gain (pp) | — | " + " | ".join(
            f"{summary[r]['power_knn_content_truth_mean_pp']:+.2f}" for r in rules) + " |")
    lines += ["", "## Coverage of every row's marginal 95 % CI, and wrong-sign verdicts, against population values", "",
              "| Part, gain | " + " | ".join(rules) + " |", "|---|" + "---|" * len(rules)]
    for key in summary[rules[0]]["coverage"]:
        lines.append(f"| {key} | " + " | ".join(_fmt(summary[r]["coverage"][key]) for r in rules) + " |")
    return "\n".join(lines + [""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tournaments", type=int, default=200, help="tournaments per part")
    parser.add_argument("--parts", default="null,power", help="comma-separated: null, power")
    parser.add_argument("--population", type=int, default=20_000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--budget-s", type=float, default=math.inf, help="start no new tournament after this many seconds")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--resume", action="store_true", help="keep the tournaments in --out's runs.csv and add the missing seeds")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {sorted(PARTS)}")
    start, records = time.monotonic(), []
    previous = pd.read_csv(args.out / "runs.csv", keep_default_na=False) if args.resume and (args.out / "runs.csv").exists() else None
    if previous is not None:
        records = previous[previous["part"].isin(parts)].to_dict("records")
    done = {p: {int(r["seed"]) for r in records if r["part"] == p} for p in parts}
    for seed in range(args.tournaments):
        if time.monotonic() - start > args.budget_s:
            log(f"budget of {args.budget_s:.0f} s spent; {min(len(d) for d in done.values())} tournament(s) per part")
            break
        for part in parts:
            if seed not in done[part]:
                records += one_tournament(part, seed, args.population, args.bootstrap)
                done[part].add(seed)
        if seed % 10 == 0:
            log(f"{seed + 1} tournament(s) per part, {time.monotonic() - start:.0f} s")
    frame = pd.DataFrame(records)
    settings = {"tournaments": min(len(d) for d in done.values()), "per_part": {p: len(d) for p, d in done.items()},
                "n_queries": {p: preset_config(PARTS[p][0], **PARTS[p][1]).n_queries for p in parts},
                "population": args.population, "n_bootstrap": args.bootstrap, "agents": AGENTS,
                "elapsed_s": time.monotonic() - start, "cpu_s": time.process_time()}
    summary = summarise(frame)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "runs.csv", index=False)
    (args.out / "calibration.json").write_text(json.dumps({"settings": settings, "summary": summary}, indent=1))
    (args.out / "calibration.md").write_text(markdown(summary, settings))
    write_readme(args.out, "Verdict calibration", f"`calibration.md` (the rates), `calibration.json`, `runs.csv`. "
                 f"{settings['elapsed_s']:.0f} s wall, {settings['cpu_s']:.0f} s CPU.\n\n{__doc__}",
                 argv=[__file__] + (argv if argv is not None else sys.argv[1:]))
    print(markdown(summary, settings))


if __name__ == "__main__":
    main()
