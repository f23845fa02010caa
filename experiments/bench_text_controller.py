"""Benchmark: a full offline SFT + GRPO run of the text controller on CPU (not a test).

Times the default configuration (``ControllerConfig()``: SmolLM2-135M-Instruct from PyPI,
LoRA on the top layers) on the full 9-model ``paper-pool`` tournament, then routes held-out
queries greedily. Prints the ratio to the 30-minute target and the CPU contention seen
(load average, and this process's CPU time over wall time: 1.0 = it had a core to itself).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_text_controller.py
    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_text_controller.py --agent kl-grpo
    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_text_controller.py --format rationale \\
        --set '{"grpo_max_steps": 0}'

Writes ``<out>/<name>/`` (``bench.json``, ``grpo_steps.csv``, ``grpo_reward.png``,
``grpo_selection.png``, ``summary.json``, ``held_out.csv``). The tournament may also be a
directory (e.g. a built ZeroEval tournament).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

TARGET_S = 30 * 60
RESULTS = Path(__file__).resolve().parent / "results" / "text_controller"


class CpuClock:
    """Wall time, this process's CPU time and the load average over a phase."""

    def __init__(self) -> None:
        self.wall0, self.cpu0, self.load0 = time.perf_counter(), time.process_time(), os.getloadavg()

    def stop(self) -> dict[str, float]:
        wall, cpu = time.perf_counter() - self.wall0, time.process_time() - self.cpu0
        return {
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "cpu_share": round(cpu / wall, 3) if wall else float("nan"),  # < 1: waited for a core
            "loadavg_1m_start": round(self.load0[0], 2),
            "loadavg_1m_end": round(os.getloadavg()[0], 2),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="paper-pool", help="preset name or tournament directory")
    parser.add_argument("--agent", default="grpo", choices=["sft", "grpo", "kl-grpo"])
    parser.add_argument("--format", default="choice", choices=["choice", "rationale"])
    parser.add_argument(
        "--held-out",
        type=int,
        default=100,
        help="route the test split's first N queries greedily (0: none); the split is ordered by "
        "benchmark, so use `routing-gym compare` for the whole split",
    )
    parser.add_argument(
        "--set", default="{}", help="JSON of ControllerConfig overrides, e.g. '{\"sft_max_steps\": 20}'"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default=None, help="results sub-folder (default: <agent>-<format>)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (they go to stderr)")
    parser.add_argument("--readme-only", action="store_true", help="rewrite README.md from the folder's bench.json")
    args = parser.parse_args(argv)
    # The command as run, for the folder's README (--out is a machine path; --readme-only is not the run).
    shown: list[str] = []
    given = iter(sys.argv[1:] if argv is None else argv)
    for a in given:
        if a == "--out":
            next(given, None)
        elif a != "--readme-only":
            shown.append(a)
    command = "OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_text_controller.py " + " ".join(
        f"'{a}'" if " " in a or "{" in a else a for a in shown
    )
    if args.readme_only:
        out = args.out / (args.name or f"{args.agent}-{args.format}")
        write_readme(out, json.loads((out / "bench.json").read_text()), command)
        return 0

    import torch

    torch.set_num_threads(1)
    from routing_gym.envs import Reward
    from routing_gym.sources import resolve_tournament
    from routing_gym.tournament.scoring import score_actions
    from routing_gym_agents import FitContext, ObservationBatch, make_agent
    from routing_gym_agents.controller.prompt import named_model
    from routing_gym_agents.controller.report import write_training_report

    overrides = json.loads(args.set)
    t = resolve_tournament(args.tournament)
    reward = Reward("gated_rank", {"lambda_e": 0.4})
    ctx = FitContext(t, reward, seed=args.seed, progress=not args.no_progress)
    agent = make_agent(args.agent, format=args.format, **overrides)
    name = args.name or f"{args.agent}-{args.format}"
    out = args.out / name
    print(
        f"{name}: {t.card.name} ({t.n_queries} queries x {t.n_models} models), "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    clock = CpuClock()
    logs = agent.fit(ctx)
    fit = clock.stop()
    report: dict = {
        "name": name,
        "agent": args.agent,
        "tournament": t.card.name,
        "n_models": t.n_models,
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "fit": fit,
        "phases_s": {k: round(logs[k], 1) for k in ("load_s", "sft_s") if k in logs},
        "target_s": TARGET_S,
        "fit_over_target": round(fit["wall_s"] / TARGET_S, 3),
    }
    if "grpo" in logs:
        g = logs["grpo"]
        report["phases_s"]["grpo_s"] = round(g["grpo_s"], 1)
        steps = g["steps"]
        report["grpo"] = {
            "steps": len(steps),
            "expected_reward_before": g.get("expected_reward_before"),
            "expected_reward_after": g.get("expected_reward_after"),
            "probe_random_route_reward": g.get("probe_random_route_reward"),
            "probe_oracle_reward": g.get("probe_oracle_reward"),
            "reward_vs_random_first_5": float(np.mean([s["reward_vs_random"] for s in steps[:5]])),
            "reward_vs_random_last_5": float(np.mean([s["reward_vs_random"] for s in steps[-5:]])),
            "sampled_reward_first_5": float(np.mean([s["mean_reward"] for s in steps[:5]])),
            "sampled_reward_last_5": float(np.mean([s["mean_reward"] for s in steps[-5:]])),
            "valid_rate_last_5": float(np.mean([s["valid_rate"] for s in steps[-5:]])),
            "frac_reward_zero_std_last_5": float(np.mean([s["frac_reward_zero_std"] for s in steps[-5:]])),
            "collapse": g["collapse"],
        }
    if args.held_out:
        rows = t.split_rows("test")[: args.held_out]
        clock = CpuClock()
        actions = agent.act_batch(ObservationBatch.from_tournament(t, rows))
        act = clock.stop()
        # Scored here, outside the agent's FitContext: the agent only ever sees the training split.
        result = score_actions(reward.matrix(t, rows), t.outcomes(rows), actions, reward.invalid_penalty)
        valid = (actions >= 0) & (actions < t.n_models)
        report["held_out"] = {
            "n": int(len(rows)),
            "valid_rate": float(valid.mean()),
            "selection": {m: int(c) for m, c in zip(t.model_ids, np.bincount(actions[valid], minlength=t.n_models))},
            "accuracy": float(result.correct.mean()),
            "mean_answer_energy_j": float(result.energy_j.mean()),
            "overhead_means": {k: float(np.nanmean(v)) for k, v in agent.overhead.items()},
            "act": act,
        }
        if args.format == "rationale":  # does the reason name the model the choice picks?
            named = np.array([named_model(c, agent.builder_.legend) for c in agent.completions_])
            report["held_out"]["rationale_names_the_choice"] = float((named[valid] == actions[valid]).mean())
        out.mkdir(parents=True, exist_ok=True)
        import pandas as pd

        columns = {"row": rows, "action": actions, **{f"overhead_{k}": v for k, v in agent.overhead.items()}}
        if agent.completions_:  # choice routing from one forward pass writes no completion text
            columns["completion"] = agent.completions_
        pd.DataFrame(columns).to_csv(out / "held_out.csv", index=False)
    write_training_report(logs, out, title=name)
    (out / "bench.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    write_readme(out, report, command)

    print(
        f"fit: {fit['wall_s']:.0f} s wall ({fit['wall_s'] / TARGET_S:.2f} x the 30 min target), "
        f"{fit['cpu_s']:.0f} s CPU, CPU share {fit['cpu_share']:.2f}, "
        f"load {fit['loadavg_1m_start']:.1f} -> {fit['loadavg_1m_end']:.1f}; phases {report['phases_s']}"
    )
    if "grpo" in report:
        g = report["grpo"]
        print(
            f"GRPO: probe expected reward {g['expected_reward_before']} -> {g['expected_reward_after']} "
            f"(random route {g['probe_random_route_reward']}, oracle {g['probe_oracle_reward']}); sampled reward "
            f"first 5 steps {g['sampled_reward_first_5']:.3f}, last 5 {g['sampled_reward_last_5']:.3f}; minus the "
            f"random-route mean: {g['reward_vs_random_first_5']:.3f} -> {g['reward_vs_random_last_5']:.3f}"
        )
    if "held_out" in report:
        h = report["held_out"]
        print(
            f"held-out: {h['n']} queries, valid {h['valid_rate']:.1%}, accuracy {h['accuracy']:.1%}, "
            f"answer {h['mean_answer_energy_j']:.0f} J; controller {h['overhead_means']}"
        )
    print(f"wrote {out}")
    return 0


def write_readme(out: Path, report: dict, command: str) -> None:
    """``README.md`` of a benchmark folder: the command, time, and the probe after SFT -> after
    GRPO (expected reward of the sampling policy, the greedy policy's reward, top-1 share and
    selection mix), read from ``bench.json`` and ``summary.json``."""
    fit = report["fit"]
    lines = [
        f"# `{report['name']}`: {report['agent']} on `{report['tournament']}` ({report['n_models']} models)",
        "",
        "Written by:",
        "",
        f"    {command}",
        "",
        f"Fit: {fit['wall_s']:.0f} s wall, {fit['cpu_s']:.0f} s CPU (CPU share {fit['cpu_share']}, load "
        f"{fit['loadavg_1m_start']} -> {fit['loadavg_1m_end']} on {report['machine']['cpus']} cores); phases (wall s): "
        f"{report['phases_s']}.",
        "",
    ]
    summary = json.loads((out / "summary.json").read_text())
    g = summary.get("grpo") or {}
    if "expected_reward_before" in g:
        def mix(key: str) -> str:
            top = sorted(g[key].items(), key=lambda kv: -kv[1])[:4]
            return ", ".join(f"{m} {v:.2f}" for m, v in top)

        lines += [
            f"Probe: {len(g['probe_rows'])} GRPO training queries, exact (one forward pass each). Random route "
            f"{g['probe_random_route_reward']:.3f}, oracle {g['probe_oracle_reward']:.3f}.",
            "",
            "| | after SFT (before GRPO) | after GRPO |",
            "|---|---:|---:|",
            f"| expected reward (sampling policy) | {g['expected_reward_before']:.3f} | {g['expected_reward_after']:.3f} |",
        ]
        if "greedy_reward_before" in g:
            lines += [
                f"| greedy reward | {g['greedy_reward_before']:.3f} | {g['greedy_reward_after']:.3f} |",
                f"| greedy top-1 share | {g['greedy_top1_share_before']:.2f} | {g['greedy_top1_share_after']:.2f} |",
                f"| greedy mix (top 4) | {mix('greedy_mix_before')} | {mix('greedy_mix_after')} |",
            ]
        lines += ["", "GRPO steps: `grpo_steps.csv`, `grpo_reward.png`, `grpo_selection.png`; all logs: `summary.json`.", ""]
    (out / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
