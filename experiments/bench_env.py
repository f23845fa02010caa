"""Throughput of RoutingEnv against references measured in the same run.

Prints (targets from the core issue):
- RoutingEnv steps/s vs gymnasium CartPole-v1 steps/s, both through ``gymnasium.make`` with
  the same wrappers, and their ratio (target >= 1.0);
- batched evaluation decisions/s (``RoutingEnv.evaluate``) vs a raw numpy gather over the
  same ``[N, K]`` reward array, and that ratio (target >= 0.2).

    python experiments/bench_env.py [--tournament default] [--steps 50000]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import routing_gym


def steps_per_second(env: gym.Env, steps: int, seed: int = 0) -> float:
    env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, env.action_space.n, steps)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def best_rate(fn, repeats: int = 5) -> float:
    return max(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--batch-repeats", type=int, default=20)
    args = parser.parse_args()

    routing = gym.make(routing_gym.REPLAY_ID, tournament=args.tournament, split="all", coefficients={"lambda_e": 0.4})
    cartpole = gym.make("CartPole-v1")
    routing_rate = best_rate(lambda: steps_per_second(routing, args.steps), 3)
    cartpole_rate = best_rate(lambda: steps_per_second(cartpole, args.steps), 3)
    print(f"RoutingEnv   {routing_rate:12,.0f} steps/s")
    print(f"CartPole-v1  {cartpole_rate:12,.0f} steps/s")
    print(f"ratio RoutingEnv / CartPole = {routing_rate / cartpole_rate:.2f}  (target >= 1.0)")

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
    print(f"batched evaluate  {batch_rate:14,.0f} decisions/s over N={n}, K={env.action_space.n}")
    print(f"raw numpy gather  {raw_rate:14,.0f} decisions/s")
    print(f"ratio batched / raw = {batch_rate / raw_rate:.2f}  (target >= 0.2)")


if __name__ == "__main__":
    main()
