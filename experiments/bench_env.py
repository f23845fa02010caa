"""Throughput of RoutingEnv against references measured in the same run.

Prints (targets from the core issue):
- RoutingEnv steps/s vs gymnasium CartPole-v1 steps/s, both through ``gymnasium.make`` with
  the same wrappers, and their ratio (target >= 1.0). Steps per second of this process's CPU
  time (the machine is shared: wall time would measure the neighbours), the two envs
  alternating, the best of ``--repeats`` each;
- batched evaluation decisions/s (``RoutingEnv.evaluate``) vs a raw numpy gather over the
  same ``[N, K]`` reward array, and that ratio (target >= 0.2).

    python experiments/bench_env.py [--tournament default] [--steps 50000] [--before COMMIT] [--out DIR]

``--before COMMIT`` first runs the same benchmark on that commit's code (``git archive``, first
on ``PYTHONPATH``; ``bench_compare.checkout``) in a subprocess, so both ratios come from one run;
``--out`` writes what was printed into ``DIR/README.md`` (with the command and the load).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import routing_gym


def steps_per_second(env: gym.Env, steps: int, seed: int = 0) -> float:
    env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, env.action_space.n, steps)
    start = time.process_time()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    return steps / (time.process_time() - start)


def best_rate(fn, repeats: int = 5) -> float:
    return max(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-repeats", type=int, default=20)
    parser.add_argument("--before", default=None, help="a commit whose code runs the same benchmark first")
    parser.add_argument("--out", default=None, help="write README.md (what was printed) here")
    args = parser.parse_args()
    lines: list[str] = []
    if args.before:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_compare import checkout

        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHONPATH=str(checkout(args.before, Path(tmp))))
            cmd = [sys.executable, __file__, "--tournament", args.tournament, "--steps", str(args.steps),
                   "--repeats", str(args.repeats), "--batch-repeats", str(args.batch_repeats)]
            before = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
        lines += [f"before ({args.before}):", *before.strip().splitlines(), "after (this code):"]
        print("\n".join(lines), flush=True)
    lines += measure(args)
    if args.out:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results_readme import write_readme

        write_readme(args.out, "RoutingEnv steps per second against CartPole-v1",
                     f"Ran on a {os.cpu_count()}-core machine shared with other work (1-minute load at the end: "
                     f"{os.getloadavg()[0]:.1f}); rates are steps per second of the process's CPU time.\n\n```\n"
                     + "\n".join(lines) + "\n```\n")


def measure(args: argparse.Namespace) -> list[str]:
    """Run both comparisons; print and return the lines."""
    out: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        out.append(line)

    routing = gym.make(routing_gym.REPLAY_ID, tournament=args.tournament, split="all", coefficients={"lambda_e": 0.4})
    cartpole = gym.make("CartPole-v1")
    rates: dict[str, list[float]] = {"routing": [], "cartpole": []}
    for _ in range(args.repeats):  # alternating, so a change in the machine's load hits both
        rates["routing"].append(steps_per_second(routing, args.steps))
        rates["cartpole"].append(steps_per_second(cartpole, args.steps))
    routing_rate, cartpole_rate = max(rates["routing"]), max(rates["cartpole"])
    say(f"RoutingEnv   {routing_rate:12,.0f} steps/s")
    say(f"CartPole-v1  {cartpole_rate:12,.0f} steps/s")
    say(f"ratio RoutingEnv / CartPole = {routing_rate / cartpole_rate:.2f}  (target >= 1.0)")

    env = routing.unwrapped
    n = len(env.rows)
    actions = np.random.default_rng(1).integers(0, env.action_space.n, n)
    matrix = env.reward_matrix

    def batched() -> float:
        start = time.perf_counter()
        for _ in range(args.batch_repeats):
            env.evaluate(actions)
        return n * args.batch_repeats / (time.perf_counter() - start)

    def raw_gather() -> float:
        index = np.arange(n)
        start = time.perf_counter()
        for _ in range(args.batch_repeats):
            matrix[index, actions].sum()
        return n * args.batch_repeats / (time.perf_counter() - start)

    batch_rate, raw_rate = best_rate(batched), best_rate(raw_gather)
    say(f"batched evaluate  {batch_rate:14,.0f} decisions/s over N={n}, K={env.action_space.n}")
    say(f"raw numpy gather  {raw_rate:14,.0f} decisions/s")
    say(f"ratio batched / raw = {batch_rate / raw_rate:.2f}  (target >= 0.2)")
    return out


if __name__ == "__main__":
    main()
