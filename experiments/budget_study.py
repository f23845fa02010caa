"""Budget study: accuracy under an average energy budget B (the paper's Eq. 7), and how far
each router overshoots it.

For each budget B (default: eight values, log-spaced between the cheapest and the dearest
model's mean joules on the training split):

- **lagrangian (online)**: ``LagrangianAgent`` trained on the training split with B, then run
  through ``BudgetRoutingEnv`` episodes (``--horizon`` queries each) over the held-out split,
  updating its multiplier on the joules it is charged;
- **lagrangian (paced)**: the same trained agent routing the held-out split in one batch with
  no feedback, pacing its multiplier on predicted joules (``act_batch``);
- **best affordable model**: the most accurate single model whose *training* mean joules are
  <= B (what a budget-aware operator would deploy without a router);
- **linucb (ignores B)**: the unconstrained bandit with the same reward, for scale;
- **budget oracle** (not deployable): the held-out routes that maximise accuracy subject to
  mean joules <= B, from the Lagrangian relaxation of the knapsack (bisection on the price
  of a joule): an upper bound on any router.

Reward: ``gated_rank`` with no energy term (correct 2, wrong -1), so the budget alone prices
energy. Violation is ``max(0, mean J - B)``; "episodes over B" is the share of episodes whose
own mean exceeds B. Intervals: 95 % percentile bootstrap over episodes (online) or over
held-out queries (the rest).

Outputs under ``--out`` (default ``experiments/results/budget/<tournament>/``): ``budget.csv``,
``table.md`` and ``budget.png``.

    OMP_NUM_THREADS=1 python experiments/budget_study.py             # ~1-2 min
    OMP_NUM_THREADS=1 python experiments/budget_study.py --budgets 150 300 600 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from routing_gym.envs import Reward
from routing_gym.envs.budget_env import BudgetRoutingEnv
from routing_gym.eval.core.stats import bootstrap_mean_ci
from routing_gym.sources import resolve_tournament
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, ObservationBatch, make_agent
from routing_gym_agents.lagrangian import LagrangianAgent, run_budget_episodes
from results_readme import write_index, write_readme  # experiments/results_readme.py

RESULTS = Path(__file__).resolve().parent / "results" / "budget"
N_BUDGETS = 8
N_BOOT = 1000


def default_budgets(t: Tournament) -> list[float]:
    joules = t.energy_j[t.split_rows("train")].mean(axis=0)
    return [float(round(b, -1 if b < 1000 else -2)) for b in np.geomspace(joules.min() * 1.15, joules.max() * 0.9, N_BUDGETS)]


def budget_oracle(correct: np.ndarray, energy: np.ndarray, budget: float) -> np.ndarray:
    """Routes maximising accuracy with mean joules <= budget: per query ``argmax c - mu E``
    with the smallest price ``mu`` that meets the budget (ties go to the cheaper route)."""
    def routes(mu: float) -> np.ndarray:
        # Subtracting a tiny multiple of the joules breaks ties towards cheaper routes.
        return np.argmax(correct - (mu + 1e-9) * energy, axis=1)

    rows = np.arange(len(correct))
    if energy[rows, routes(0.0)].mean() <= budget:
        return routes(0.0)
    low, high = 0.0, 1.0
    while energy[rows, routes(high)].mean() > budget:
        high *= 2
        if high > 1e6:
            return np.argmin(energy, axis=1)  # infeasible: the cheapest route everywhere
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if energy[rows, routes(mid)].mean() > budget else (low, mid)
    return routes(high)


def _row(method: str, budget: float, correct: np.ndarray, energy: np.ndarray, seeds: int, unit: str,
         episode_over: float = float("nan")) -> dict:
    """Summary row; ``correct``/``energy`` are the per-unit means the intervals resample."""
    acc_ci, j_ci = bootstrap_mean_ci(correct, n_resamples=N_BOOT), bootstrap_mean_ci(energy, n_resamples=N_BOOT)
    mean_j = float(energy.mean())
    return {
        "budget_j": budget, "method": method, "accuracy": float(correct.mean()), "accuracy_ci_low": acc_ci[0],
        "accuracy_ci_high": acc_ci[1], "mean_energy_j": mean_j, "mean_energy_j_ci_low": j_ci[0],
        "mean_energy_j_ci_high": j_ci[1], "violation_j": max(0.0, mean_j - budget), "spend_ratio": mean_j / budget,
        "episodes_over_budget": episode_over, "seeds": seeds, "ci_unit": unit,
    }


def study(t: Tournament, budgets: list[float], seeds: list[int], horizon: int) -> pd.DataFrame:
    reward = Reward("gated_rank")
    test = t.split_rows("test")
    batch = ObservationBatch.from_tournament(t, test)
    c_test, e_test = t.correct[test], t.energy_j[test]
    train_joules = t.energy_j[t.split_rows("train")].mean(axis=0)
    train_acc = t.correct[t.split_rows("train")].mean(axis=0)
    episodes = len(test) // horizon
    idx = np.arange(len(test))

    unconstrained = []
    for seed in seeds:
        agent = make_agent("linucb")
        agent.fit(FitContext(t, reward, seed=seed))
        unconstrained.append(agent.act_batch(batch))
    linucb_c = np.mean([c_test[idx, a] for a in unconstrained], axis=0)
    linucb_e = np.mean([e_test[idx, a] for a in unconstrained], axis=0)

    rows = []
    for budget in budgets:
        tic = time.perf_counter()
        online_c, online_e, paced_c, paced_e = [], [], [], []
        for seed in seeds:
            agent = LagrangianAgent(budget_j=budget)
            agent.fit(FitContext(t, reward, seed=seed))
            a = agent.act_batch(batch)
            paced_c.append(c_test[idx, a])
            paced_e.append(e_test[idx, a])
            env = BudgetRoutingEnv(tournament=t, split="test", horizon=horizon, budget_j=budget)
            _, trace = run_budget_episodes(agent, env, episodes, seed=seed)
            online_c.append(trace["correct"].mean(axis=1))
            online_e.append(trace["energy_j"].mean(axis=1))
        episode_e = np.concatenate(online_e)
        rows.append(_row("lagrangian (online)", budget, np.concatenate(online_c), episode_e, len(seeds),
                         f"{len(episode_e)} episodes of {horizon}", float((episode_e > budget).mean())))
        rows.append(_row("lagrangian (paced)", budget, np.mean(paced_c, axis=0), np.mean(paced_e, axis=0), len(seeds), "queries"))
        affordable = np.flatnonzero(train_joules <= budget)
        if len(affordable):
            k = int(affordable[np.argmax(train_acc[affordable])])
            rows.append(_row("best affordable model", budget, c_test[:, k], e_test[:, k], 1, "queries") | {"model": t.model_ids[k]})
        rows.append(_row("linucb (ignores B)", budget, linucb_c, linucb_e, len(seeds), "queries"))
        oracle = budget_oracle(c_test, e_test, budget)
        rows.append(_row("budget oracle", budget, c_test[idx, oracle], e_test[idx, oracle], 1, "queries"))
        print(f"B={budget:g} J: {time.perf_counter() - tic:.1f}s")
    return pd.DataFrame(rows)


def plot(frame: pd.DataFrame, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    colours = matplotlib.colormaps["tab10"].colors
    for i, (method, group) in enumerate(frame.groupby("method", sort=False)):
        c = colours[i % len(colours)]
        b = group["budget_j"]
        style = {"marker": "o", "color": c, "label": method, "capsize": 2, "elinewidth": 0.8, "ms": 4}
        if method == "budget oracle":
            style.update(ls="--", marker="x")
        ax1.errorbar(b, 100 * group["accuracy"], yerr=[100 * (group["accuracy"] - group["accuracy_ci_low"]),
                     100 * (group["accuracy_ci_high"] - group["accuracy"])], **style)
        ax2.errorbar(b, group["mean_energy_j"], yerr=[group["mean_energy_j"] - group["mean_energy_j_ci_low"],
                     group["mean_energy_j_ci_high"] - group["mean_energy_j"]], **style)
    budgets = np.sort(frame["budget_j"].unique())
    ax2.plot(budgets, budgets, color="k", lw=1, ls=":", label="spend = B")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("budget B (mean joules per query, log)")
    ax2.set_yscale("log")
    ax1.set_ylabel("held-out accuracy % (95% CI)")
    ax2.set_ylabel("mean joules per held-out query (95% CI, log)")
    ax1.set_title("accuracy under the budget")
    ax2.set_title("spend vs budget (on or below the dotted line = kept)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(frame: pd.DataFrame, header: str) -> str:
    lines = [header, "", "| B (J) | method | accuracy % [95% CI] | mean J [95% CI] | spend / B | violation J | episodes over B |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for _, r in frame.iterrows():
        name = r["method"] + (f" ({r['model']})" if isinstance(r.get("model"), str) else "")
        over = "—" if np.isnan(r["episodes_over_budget"]) else f"{r['episodes_over_budget']:.2f}"
        lines.append(
            f"| {r['budget_j']:,.0f} | {name} | {100 * r['accuracy']:.1f} [{100 * r['accuracy_ci_low']:.1f}, {100 * r['accuracy_ci_high']:.1f}] "
            f"| {r['mean_energy_j']:,.0f} [{r['mean_energy_j_ci_low']:,.0f}, {r['mean_energy_j_ci_high']:,.0f}] "
            f"| {r['spend_ratio']:.3f} | {r['violation_j']:,.1f} | {over} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default", help="preset name or tournament directory")
    parser.add_argument("--budgets", type=float, nargs="+", default=None, help="B values in joules (default: 8 log-spaced)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--horizon", type=int, default=100, help="queries per BudgetRoutingEnv episode")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    t = resolve_tournament(args.tournament)
    budgets = args.budgets or default_budgets(t)
    out = args.out or RESULTS / t.card.name
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    frame = study(t, budgets, args.seeds, args.horizon)
    frame.to_csv(out / "budget.csv", index=False)
    n_test = len(t.split_rows("test"))
    header = (
        f"# Energy-budget study on {t.card.name} ({t.card.provenance})\n\n"
        f"{n_test} held-out queries; reward gated_rank (no energy term); seeds {args.seeds}; online episodes of "
        f"{args.horizon} queries. 95% percentile bootstrap intervals over episodes (online rows, all seeds pooled) or "
        f"held-out queries (others; seed-averaged per query). The budget oracle reads held-out outcomes (not deployable). "
        f"Run time {time.perf_counter() - start:.0f} s."
    )
    (out / "table.md").write_text(markdown(frame, header))
    plot(frame, f"Average energy budget (Eq. 7) on {t.card.name}: {n_test} held-out queries", out / "budget.png")
    print(f"wrote {out}/budget.csv, table.md, budget.png in {time.perf_counter() - start:.0f} s")
    write_readme(out, f"Budget study on {t.card.name}", __doc__)
    if out.parent == RESULTS:
        write_index(RESULTS, "`experiments/budget_study.py` results", "Each folder's `table.md` is the study's table.")


if __name__ == "__main__":
    main()
