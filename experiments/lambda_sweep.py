"""Lambda sweep: how a reward's energy coefficient moves learned routers along the
accuracy-energy plane, and where they jump between accuracy bands ("phase transitions").

For each value of the coefficient (default: ``gated_rank``'s ``lambda_e`` from 0 to 2.9, just
below the gate at 3) every agent (the three linear bandits, PPO on a small budget of 2,048
online steps with the first seed only, and the oracle) is trained on the training split with
that reward and scored
on the held-out split by ``routing_gym.eval.compare`` (bootstrap 95 % intervals over held-out
queries of the seed-averaged per-query values). The oracle of the same reward is the
reference: under a gated reward it always finds a correct model when one exists, so its
accuracy stays flat while its joules fall; a learned router cannot see correctness and trades
accuracy for joules instead.

A **transition** is a step between consecutive grid values where an agent's held-out accuracy
changes by at least ``--jump`` (default 5 points) and the paired bootstrap 95 % interval of the
change (same queries at both values) excludes 0. The values between transitions form the
agent's accuracy **bands**; each band's dominant model says which regime the policy is in.

Outputs under ``--out`` (default ``experiments/results/lambda_sweep/<tournament>/``):
``sweep.csv`` (one row per agent x value), ``transitions.csv``, ``bands.csv``, ``table.md`` and
``sweep.png`` (accuracy vs the coefficient, and accuracy vs joules with the fixed models).

    OMP_NUM_THREADS=1 python experiments/lambda_sweep.py             # bandits + PPO, ~3-4 min
    OMP_NUM_THREADS=1 python experiments/lambda_sweep.py --no-sb3    # bandits only, ~2 min
    OMP_NUM_THREADS=1 python experiments/lambda_sweep.py --reward greenserv --grid 0 0.1 0.2 0.3 0.4 0.49
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

import routing_gym.envs.reward_variants  # noqa: F401  (registers the variants this script sweeps)
from routing_gym.cli.compare import add_executor_arguments, executor_settings
from routing_gym.envs import get_reward
from routing_gym.eval.compare import CompareConfig, CompareResult, run_compare
from routing_gym.eval.core.pareto import pareto_front
from routing_gym.eval.core.stats import BootstrapPlan
from routing_gym.ray_cluster import init_ray
from routing_gym.sources import resolve_tournament
from routing_gym.tournament import Tournament
from results_readme import write_index, write_readme  # experiments/results_readme.py

RESULTS = Path(__file__).resolve().parent / "results" / "lambda_sweep"
DEFAULT_GRID = (0.0, 0.5, 1.0, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 2.9)
DEFAULT_AGENTS = ("linucb", "epsilon-greedy", "thompson", "oracle")
ENERGY_COEFFICIENTS = ("lambda_e", "mu")  # the first one the reward takes is swept
SB3_STEPS = 2048


def energy_coefficient(reward: str) -> str:
    names = get_reward(reward).defaults
    for name in ENERGY_COEFFICIENTS:
        if name in names:
            return name
    raise SystemExit(f"reward {reward!r} has none of the energy coefficients {ENERGY_COEFFICIENTS}; it takes {sorted(names)}")


def sweep(
    t: Tournament, reward: str, coefficient: str, grid: list[float], agents: list[str], seeds: list[int],
    agent_kwargs: dict[str, dict[str, Any]], n_bootstrap: int, executor: dict[str, Any],
) -> tuple[pd.DataFrame, dict[tuple[str, float], np.ndarray]]:
    """One compare run per grid value; returns the summary rows and each agent's seed-averaged
    per-query correctness (for the paired transition test)."""
    rows, correct = [], {}
    for value in grid:
        tic = time.perf_counter()
        result: CompareResult = run_compare(CompareConfig(
            tournament=t, agents=agents, seeds=seeds, reward=reward, coefficients={coefficient: value},
            agent_kwargs={a: k for a, k in agent_kwargs.items() if a in agents}, fixed_models=False,
            n_bootstrap=n_bootstrap, progress=False, **executor,
        ))
        if result.failures:
            failure = result.failures[0]
            raise SystemExit(f"{failure.method} failed at {coefficient}={value}: {failure.error}")
        for r in result.rows:
            rows.append({
                "agent": r["method"], coefficient: value, "accuracy": r["accuracy"],
                "accuracy_ci_low": r["accuracy_ci_low"], "accuracy_ci_high": r["accuracy_ci_high"],
                "mean_energy_j": r["mean_energy_j"], "mean_energy_j_ci_low": r["mean_energy_j_ci_low"],
                "mean_energy_j_ci_high": r["mean_energy_j_ci_high"], "mean_reward": r["mean_reward"],
                "top1_model": r["top1_model"], "top1_share": r["top1_share"],
                "selection_entropy": r["selection_entropy"], "seeds": r["seeds_ok"], "fit_s": r["fit_s"],
            })
            runs = [run for run in result.runs if run.method == r["method"] and run.status == "ok"]
            correct[(r["method"], value)] = np.mean([run.per_query["correct"] for run in runs], axis=0)
        print(f"{coefficient}={value:g}: {time.perf_counter() - tic:.1f}s", file=sys.stderr)
    return pd.DataFrame(rows), correct


def transitions(frame: pd.DataFrame, correct: dict[tuple[str, float], np.ndarray], coefficient: str,
                jump: float, n_bootstrap: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Significant accuracy jumps between consecutive grid values, and the bands between them."""
    out, bands = [], []
    for agent, group in frame.groupby("agent", sort=False):
        group = group.sort_values(coefficient).reset_index(drop=True)
        values = group[coefficient].tolist()
        plan = BootstrapPlan(len(correct[(agent, values[0])]), n_bootstrap, seed=0)
        cuts = []
        for i in range(1, len(values)):
            diff = correct[(agent, values[i])] - correct[(agent, values[i - 1])]
            low, high = plan.ci(diff)
            delta = float(diff.mean())
            significant = abs(delta) >= jump and (low > 0 or high < 0)
            out.append({
                "agent": agent, "from": values[i - 1], "to": values[i], "delta_accuracy": delta,
                "ci_low": float(low), "ci_high": float(high), "transition": significant,
                "top1_before": group.loc[i - 1, "top1_model"], "top1_after": group.loc[i, "top1_model"],
            })
            if significant:
                cuts.append(i)
        for start, end in zip([0, *cuts], [*cuts, len(values)]):
            band = group.iloc[start:end]
            bands.append({
                "agent": agent, f"{coefficient}_from": values[start], f"{coefficient}_to": values[end - 1],
                "mean_accuracy": float(band["accuracy"].mean()), "mean_energy_j": float(band["mean_energy_j"].mean()),
                "dominant_model": band["top1_model"].mode().iloc[0],
            })
    return pd.DataFrame(out), pd.DataFrame(bands)


def fixed_models(t: Tournament, split: str = "test") -> pd.DataFrame:
    rows = t.split_rows(split)
    return pd.DataFrame({"model": t.model_ids, "accuracy": t.correct[rows].mean(axis=0), "mean_energy_j": t.energy_j[rows].mean(axis=0)})


def plot(frame: pd.DataFrame, fixed: pd.DataFrame, trans: pd.DataFrame, coefficient: str, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    colours = matplotlib.colormaps["tab10"].colors
    for i, (agent, group) in enumerate(frame.groupby("agent", sort=False)):
        group = group.sort_values(coefficient)
        c = colours[i % len(colours)]
        x = group[coefficient].to_numpy()
        ax1.plot(x, 100 * group["accuracy"], marker="o", color=c, label=agent)
        ax1.fill_between(x, 100 * group["accuracy_ci_low"], 100 * group["accuracy_ci_high"], color=c, alpha=0.15)
        for _, tr in trans[(trans["agent"] == agent) & trans["transition"]].iterrows():
            ax1.axvspan(tr["from"], tr["to"], color=c, alpha=0.08)
        ax2.errorbar(group["mean_energy_j"], 100 * group["accuracy"],
                     xerr=[group["mean_energy_j"] - group["mean_energy_j_ci_low"], group["mean_energy_j_ci_high"] - group["mean_energy_j"]],
                     yerr=[100 * (group["accuracy"] - group["accuracy_ci_low"]), 100 * (group["accuracy_ci_high"] - group["accuracy"])],
                     marker="o", ms=4, color=c, elinewidth=0.8, capsize=2, label=agent)
        ends = group.iloc[[0, -1]]
        for _, r in ends.iterrows():
            ax2.annotate(f"{r[coefficient]:g}", (r["mean_energy_j"], 100 * r["accuracy"]), textcoords="offset points",
                         xytext=(4, 4), fontsize=7, color=c)
    ax2.scatter(fixed["mean_energy_j"], 100 * fixed["accuracy"], marker="s", color="0.55", s=30, label="fixed models")
    for _, r in fixed.iterrows():
        ax2.annotate(r["model"], (r["mean_energy_j"], 100 * r["accuracy"]), textcoords="offset points", xytext=(4, -9), fontsize=6, color="0.4")
    front = fixed.iloc[pareto_front(fixed["accuracy"].to_numpy(), fixed["mean_energy_j"].to_numpy())]
    ax2.plot(front["mean_energy_j"], 100 * front["accuracy"], color="0.55", ls="--", lw=1, label="fixed-model Pareto front")
    ax1.set_xlabel(f"{coefficient} (reward coefficient)")
    ax1.set_ylabel("held-out accuracy % (95% CI)")
    ax1.set_title("accuracy vs coefficient (shaded: significant jumps)")
    ax2.set_xscale("log")
    ax2.set_xlabel("mean joules per held-out query (log)")
    ax2.set_ylabel("held-out accuracy %")
    ax2.set_title("accuracy-energy frontier (labels: coefficient at the ends)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(frame: pd.DataFrame, trans: pd.DataFrame, bands: pd.DataFrame, coefficient: str, header: str) -> str:
    lines = [header, "", f"| agent | {coefficient} | accuracy % [95% CI] | mean J [95% CI] | top-1 model (share) | mean reward |",
             "|---|---:|---:|---:|---|---:|"]
    for _, r in frame.iterrows():
        lines.append(
            f"| {r['agent']} | {r[coefficient]:g} | {100 * r['accuracy']:.1f} [{100 * r['accuracy_ci_low']:.1f}, {100 * r['accuracy_ci_high']:.1f}] "
            f"| {r['mean_energy_j']:,.0f} [{r['mean_energy_j_ci_low']:,.0f}, {r['mean_energy_j_ci_high']:,.0f}] "
            f"| {r['top1_model']} ({r['top1_share']:.2f}) | {r['mean_reward']:.3f} |"
        )
    lines += ["", "## Transitions (|change| >= jump and the paired 95% CI of the change excludes 0)", ""]
    sig = trans[trans["transition"]]
    if sig.empty:
        lines.append("- none")
    for _, r in sig.iterrows():
        lines.append(f"- **{r['agent']}** {coefficient} {r['from']:g} -> {r['to']:g}: accuracy {100 * r['delta_accuracy']:+.1f} pts "
                     f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}], top-1 {r['top1_before']} -> {r['top1_after']}")
    lines += ["", "## Accuracy bands", "", f"| agent | {coefficient} range | mean accuracy % | mean J | dominant model |", "|---|---|---:|---:|---|"]
    for _, r in bands.iterrows():
        lines.append(f"| {r['agent']} | {r[f'{coefficient}_from']:g} - {r[f'{coefficient}_to']:g} | {100 * r['mean_accuracy']:.1f} "
                     f"| {r['mean_energy_j']:,.0f} | {r['dominant_model']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default", help="preset name or tournament directory")
    parser.add_argument("--reward", default="gated_rank")
    parser.add_argument("--grid", type=float, nargs="+", default=list(DEFAULT_GRID))
    parser.add_argument("--agents", nargs="+", default=list(DEFAULT_AGENTS))
    parser.add_argument("--no-sb3", dest="sb3", action="store_false", help=f"skip PPO ({SB3_STEPS} steps, first seed only)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jump", type=float, default=0.05, help="minimum accuracy change of a transition")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    executor = executor_settings(args)
    if executor.get("executor") == "ray":  # one Ray for every grid value, not one start per compare run
        init_ray(executor.get("ray_address"), num_cpus=executor.get("workers"))

    t = resolve_tournament(args.tournament)
    coefficient = energy_coefficient(args.reward)
    out = args.out or RESULTS / t.card.name
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    frame, correct = sweep(t, args.reward, coefficient, args.grid, args.agents, args.seeds, {}, args.n_bootstrap, executor)
    if args.sb3:
        sb3, sb3_correct = sweep(t, args.reward, coefficient, args.grid, ["ppo"], args.seeds[:1],
                                 {"ppo": {"total_timesteps": SB3_STEPS}}, args.n_bootstrap, executor)
        frame, correct = pd.concat([frame, sb3], ignore_index=True), {**correct, **sb3_correct}
    trans, bands = transitions(frame, correct, coefficient, args.jump, args.n_bootstrap)
    frame.to_csv(out / "sweep.csv", index=False)
    trans.to_csv(out / "transitions.csv", index=False)
    bands.to_csv(out / "bands.csv", index=False)
    n_test = len(t.split_rows("test"))
    header = (
        f"# {args.reward} {coefficient} sweep on {t.card.name} ({t.card.provenance})\n\n"
        f"{n_test} held-out queries; seeds {args.seeds}{' (PPO: first seed, ' + str(SB3_STEPS) + ' steps)' if args.sb3 else ''}; "
        f"95% percentile bootstrap intervals over held-out queries ({args.n_bootstrap} resamples) of seed-averaged per-query values; "
        f"oracle = best route under the same reward (not deployable). Run time {time.perf_counter() - start:.0f} s."
    )
    (out / "table.md").write_text(markdown(frame, trans, bands, coefficient, header))
    plot(frame, fixed_models(t), trans, coefficient, f"{args.reward}: {coefficient} sweep on {t.card.name} ({n_test} held-out queries)", out / "sweep.png")
    print(f"wrote {out}/sweep.csv, transitions.csv, bands.csv, table.md, sweep.png in {time.perf_counter() - start:.0f} s")
    write_readme(out, f"Lambda sweep on {t.card.name}", __doc__)
    if out.parent == RESULTS:
        write_index(RESULTS, "`experiments/lambda_sweep.py` results", "Each folder's `table.md` is the study's table.")


if __name__ == "__main__":
    main()
