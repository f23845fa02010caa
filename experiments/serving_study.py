"""Routing under load (issue 62): state-aware against state-blind routers at three loads.

On each tournament at three arrival rates (light, medium, near saturation of the pool's servers:
one H100 replica per model, max batch 256), every policy runs the same arrival seeds (paired):
the state-aware heuristics (jsq, po2, energy-greedy, consolidate), state-blind replay agents
(per-benchmark, knn: fitted on the training split as compare fits them, shown only the question)
and SB3 PPO trained on RoutingGym/Serving-features-v0 at that load. At the medium load PPO is
also trained at other energy coefficients (--lambda-e), for how the coefficient moves collapse
(top-1 share) and SLO attainment. Each (tournament, load, policy) cell is one task of the
suite's executors (--executor local | process | ray) and is saved to cells/ as it finishes; a
rerun skips saved cells (resumable).

    OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR=../shared/data python experiments/serving_study.py --tournament paper-pool
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

# arrival rates (requests/s) per tournament: light, medium, near saturation (throughput falls
# below the rate there under jsq; measured with 300-arrival episodes before the study)
LOADS = {"paper-pool": {"light": 0.5, "medium": 2.0, "saturated": 6.0},
         "llmrouter": {"light": 2.0, "medium": 8.0, "saturated": 32.0}}
POLICIES = ("jsq", "po2", "energy-greedy", "consolidate", "agent:per-benchmark", "agent:knn", "ppo")
WINDOW_S = 240.0  # an episode spans at least this many seconds of arrivals


def env_kwargs(tournament: str, rate: float, lambda_e: float = 0.4) -> dict:
    return {"tournament": tournament, "rate": rate, "episode_length": int(max(300, rate * WINDOW_S)),
            "coefficients": {"lambda_e": lambda_e}}


def run_cell(payload: dict, tournament: str, load: str, policy: str, lambda_e: float) -> dict:
    """Fit one policy and run it on the evaluation seeds; per-episode rows and fit cost."""
    import gymnasium as gym

    import routing_gym  # noqa: F401
    from routing_gym.eval.serving.evaluate import run_episode
    from routing_gym.eval.serving.policies import make_policy

    rate = LOADS[tournament][load]
    kwargs = env_kwargs(tournament, rate, lambda_e)
    train = gym.make("RoutingGym/Serving-v0", **kwargs, split="train")
    start = time.process_time()
    made = make_policy(policy, train, seed=0, ppo_timesteps=payload["ppo_timesteps"], env_kwargs={**kwargs, "split": "train"})
    fit_cpu = time.process_time() - start
    env = gym.make("RoutingGym/Serving-v0", **kwargs, split="test")
    name = policy if lambda_e == 0.4 else f"{policy} (lambda_e {lambda_e:g})"
    rows = [{"tournament": tournament, "load": load, "rate": rate, "policy": name, "lambda_e": lambda_e, "seed": seed,
             "fit_cpu_s": fit_cpu, **run_episode(env, made, seed)} for seed in range(payload["episodes"])]
    return {"rows": rows}


def plots(frame: pd.DataFrame, out: Path) -> None:
    import matplotlib.pyplot as plt

    means = frame.groupby(["load", "rate", "policy"], sort=False).mean(numeric_only=True).reset_index()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for policy, group in means.groupby("policy", sort=False):
        group = group.sort_values("rate")
        axes[0].plot(group["rate"], group["total_j_per_request"], marker="o", label=policy)
        axes[1].plot(group["rate"], group["p95_latency_s"], marker="o", label=policy)
        axes[2].plot(group["rate"], group["slo_attainment"], marker="o", label=policy)
    for ax, label in zip(axes, ("J per request (active + idle)", "p95 latency (s)", "SLO attainment")):
        ax.set_xscale("log")
        ax.set_xlabel("arrivals per second")
        ax.set_ylabel(label)
    axes[0].set_yscale("log")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "load_curves.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(means["load"].unique()), figsize=(15, 4.2))
    for ax, (load, group) in zip(np.atleast_1d(axes), means.groupby("load", sort=False)):
        for row in group.itertuples():
            ax.scatter(row.total_j_per_request, row.accuracy)
            ax.annotate(row.policy, (row.total_j_per_request, row.accuracy), fontsize=7)
        ax.set_title(f"{load} ({group['rate'].iloc[0]:g}/s)")
        ax.set_xlabel("J per request (total)")
        ax.set_ylabel("accuracy")
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_energy.png", dpi=120)
    plt.close(fig)


def main() -> None:
    from results_readme import write_readme
    from tqdm.auto import tqdm

    from routing_gym.eval.execution.executors import Lost, Task, run_tasks
    from routing_gym.eval.serving.evaluate import format_table, summarise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tournament", default="paper-pool", choices=list(LOADS))
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--ppo-timesteps", type=int, default=15_000)
    parser.add_argument("--lambda-e", type=float, nargs="*", default=[0.0, 1.2],
                        help="extra energy coefficients for PPO at the medium load")
    parser.add_argument("--executor", default="local", choices=["local", "process", "ray"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or f"experiments/results/serving/{args.tournament}")
    cells = out / "cells"
    cells.mkdir(parents=True, exist_ok=True)
    wanted = [(load, policy, 0.4) for load in LOADS[args.tournament] for policy in POLICIES]
    wanted += [("medium", "ppo", lam) for lam in args.lambda_e]
    key = lambda load, policy, lam: f"{load}-{policy.replace(':', '_')}-le{lam:g}"  # noqa: E731
    tasks = [Task(key(*cell), "study", (args.tournament, *cell)) for cell in wanted if not (cells / f"{key(*cell)}.csv").exists()]
    payload = {"episodes": args.episodes, "ppo_timesteps": args.ppo_timesteps}
    bar = tqdm(total=len(tasks), desc=f"serving study {args.tournament}")
    for task, value in run_tasks(run_cell, {"study": payload}, tasks, args.executor, workers=args.workers):
        bar.update()
        if isinstance(value, Lost):
            print(f"cell {task.key} lost: {value.error}", file=sys.stderr)
            continue
        pd.DataFrame(value["rows"]).to_csv(cells / f"{task.key}.csv", index=False)
    bar.close()
    frame = pd.concat([pd.read_csv(cells / f"{key(*cell)}.csv") for cell in wanted if (cells / f"{key(*cell)}.csv").exists()],
                      ignore_index=True)
    frame.to_csv(out / "episodes.csv", index=False, float_format="%.6g")
    plots(frame, out)
    sections, answers = [], []
    for load, rate in LOADS[args.tournament].items():
        part = frame[frame["load"] == load].drop(columns=["tournament", "load", "rate", "lambda_e", "fit_cpu_s"])
        if part.empty:
            continue
        blind = [p for p in part["policy"].unique() if p.startswith("agent:")]
        best_blind = max(blind, key=lambda p: part[part["policy"] == p]["accuracy"].mean()) if blind else None
        versus_jsq = summarise(part, "jsq", args.resamples)
        sections.append(f"### {load}: {rate:g} arrivals/s\n\n{format_table(versus_jsq)}\n")
        if best_blind:
            versus_blind = summarise(part, best_blind, args.resamples).verdicts
            claims = versus_blind[versus_blind["verdict"] != "no claim"]
            lines = [f"- {v.policy}: {v.metric} {v.verdict} ({v.difference:+.4g})" for v in claims.itertuples()]
            sections.append(f"Against the best state-blind router on accuracy, `{best_blind}` (its own family-wise "
                            "family):\n\n" + ("\n".join(lines) or "- no claim") + "\n")
    ppo_cpu = frame[frame["policy"].str.startswith("ppo")].groupby(["load", "policy"])["fit_cpu_s"].first()
    cpu_lines = "\n".join(f"- {load}, {policy}: {cpu:.0f} s CPU" for (load, policy), cpu in ppo_cpu.items())
    about = f"""
Routing under load on `{args.tournament}` (`RoutingGym/Serving-v0`, H100 physics from ML.ENERGY,
one replica per model, max batch 256, SLO 60 s, gated-rank reward with lambda_e 0.4 unless
stated): {args.episodes} episodes per policy on arrival seeds 0..{args.episodes - 1} of the test
split (paired: the same traffic for every policy), each spanning at least {WINDOW_S:g} s of
Poisson arrivals. Policies learn from the training split. Intervals: 95 % percentile bootstrap
over episodes; verdicts: paired differences, Romano-Wolf step-down over every policy x metric.
Few episodes: intervals are wide, and a claim needs a consistent difference.

- `episodes.csv`: one row per (load, policy, seed) with every metric; `cells/`: the same per cell
  (a rerun skips cells already there);
- `load_curves.png`: J per request, p95 latency and SLO attainment against the arrival rate;
- `accuracy_vs_energy.png`: accuracy against total J per request at each load.

PPO: SB3 PPO (MlpPolicy, n_steps 512, gamma 0.9), {args.ppo_timesteps:,} steps on
`RoutingGym/Serving-features-v0` at the cell's load; fitting CPU time (one thread, machine shared):

{cpu_lines}

## Results

{chr(10).join(sections)}
"""
    write_readme(out, f"Serving study: {args.tournament}", about)
    if args.out is None:
        write_study_index(out.parent)
    print((out / "README.md").read_text())


def write_study_index(parent: Path) -> None:
    """experiments/results/serving/README.md: what the study asks and each tournament's run."""
    from results_readme import write_index

    write_index(parent, "Serving study (issue 62)", """
Does a state-aware router beat the best state-blind router and join-shortest-queue on accuracy,
J per request and p95 latency when servers batch (`RoutingGym/Serving-v0`), at a light, a
medium and a near-saturation load? How does PPO's energy coefficient move collapse (top-1 share)
and SLO attainment? Each folder's README holds its tables, verdicts and plots.
""")


if __name__ == "__main__":
    main()
