"""Throughput and memory of RoutingVectorEnv against gymnasium's native CartPoleVectorEnv,
measured in the same run (one thread).

Prints:
1. env-steps/s of ``RoutingVectorEnv`` (text and feature observations) and of gymnasium's
   ``CartPoleVectorEnv`` at B = 1, 64, 1,024, and the ratios (target >= 1.0x CartPole at
   B = 64 and 1,024 for the text observation);
2. memory for a 100,000 x 16 procedural tournament (16 models of the ``many-models`` preset)
   at B = 1,024: the tournament's own arrays, what the env keeps, and the env's peak while
   it is built and stepped (tracemalloc), as a share of the tournament's arrays (target <= 20 %);
3. PPO training throughput (env-steps/s including updates; same MlpPolicy net, n_steps and
   n_envs) on the feature observation through the SB3 adapter against SB3's own vectorized
   CartPole-v1 (target >= 0.8x).

    python experiments/bench_vector_env.py [--tournament default] [--seconds 1.0] [--ppo-steps 16384]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
import tracemalloc

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # noqa: E402

import routing_gym  # noqa: E402,F401  (registers the ids)
from routing_gym.envs.vector_env import RoutingVectorEnv, to_sb3  # noqa: E402

SIZES = (1, 64, 1024)


def steps_per_second(env: gym.vector.VectorEnv, seconds: float, seed: int = 0) -> float:
    """Env-steps/s of ``env`` stepped with pre-drawn random actions for about ``seconds``."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, env.single_action_space.n, (256, env.num_envs))
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a in actions[: max(1, min(256, 65536 // env.num_envs))]:
            env.step(a)
            steps += 1
    return steps * env.num_envs / (time.perf_counter() - start)


def best_of(fn, repeats: int = 3) -> float:
    return max(fn() for _ in range(repeats))


def throughput(args: argparse.Namespace) -> None:
    print(f"1. env-steps/s (best of 3 x {args.seconds:g} s; tournament {args.tournament!r}, split all)")
    print(f"{'B':>6} {'routing text':>14} {'routing features':>17} {'CartPole':>12} {'text/CP':>8} {'feat/CP':>8}")
    for b in SIZES:
        text = RoutingVectorEnv(b, tournament=args.tournament, split="all")
        features = RoutingVectorEnv(b, tournament=args.tournament, split="all", observation="features")
        cartpole = CartPoleVectorEnv(num_envs=b)
        rates = [best_of(lambda env=env: steps_per_second(env, args.seconds)) for env in (text, features, cartpole)]
        target = "  (target >= 1.0 for text)" if b > 1 else ""
        print(f"{b:>6} {rates[0]:>14,.0f} {rates[1]:>17,.0f} {rates[2]:>12,.0f} {rates[0] / rates[2]:>8.2f} {rates[1] / rates[2]:>8.2f}{target}")


def memory(args: argparse.Namespace) -> None:
    from routing_gym.sources.synthetic import generate, preset_config

    many = preset_config("many-models")
    config = dataclasses.replace(many, name="bench-100k-x16", n_queries=args.mem_queries, models=many.models[:16])
    tournament = generate(config)
    arrays = sum(getattr(tournament, name).nbytes for name in ("correct", "energy_j", "latency_s", "mean_power_w", "input_tokens", "output_tokens"))
    queries = int(tournament.queries.memory_usage(deep=True).sum())
    # The tournament's own cached views, built once and shared by every env over it.
    tournament.benchmark_codes
    prompts = tournament.prompts
    texts = sum(len(t.encode()) + 49 for t in prompts) + prompts.nbytes  # derived: str objects + pointers
    print(f"\n2. memory: {tournament.n_queries:,} x {tournament.n_models} procedural tournament at B = 1,024 (split all)")
    print(f"   tournament outcome arrays {arrays / 1e6:8.1f} MB; its queries table {queries / 1e6:.1f} MB; "
          f"its shared prompt strings (derived, ~49 B header per str) {texts / 1e6:.1f} MB")
    tracemalloc.start()
    env = RoutingVectorEnv(1024, tournament=tournament, split="all")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, tournament.n_models, (200, 1024))
    for a in actions:
        env.step(a)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"   env keeps {kept / 1e6:8.1f} MB, peak while built and stepped 200 times {peak / 1e6:.1f} MB")
    for label, own in (("outcome arrays", arrays), ("outcome arrays + queries table + prompt strings", arrays + queries + texts)):
        print(f"   env peak = {peak / own:6.1%} of the tournament's {label} (target <= 20 %)")


def ppo(args: argparse.Namespace) -> None:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    print(f"\n3. PPO training throughput (env-steps/s incl. updates; MlpPolicy [64], rollouts of 2,048 steps, {args.ppo_steps:,} steps, best of 2 alternated)")
    for n_envs in (8, 64):
        kwargs = dict(n_steps=2048 // n_envs, batch_size=256, n_epochs=4, learning_rate=1e-3, policy_kwargs={"net_arch": [64]}, device="cpu", verbose=0)
        make_env = {
            "routing": lambda: to_sb3(RoutingVectorEnv(n_envs, tournament=args.tournament, split="train", observation="features")),
            "cartpole": lambda: make_vec_env("CartPole-v1", n_envs=n_envs, seed=0),
        }
        best = {name: 0.0 for name in make_env}
        for _ in range(2):  # alternated, best of 2: the machine's load drifts between runs
            for name, make in make_env.items():
                model = PPO("MlpPolicy", make(), seed=0, **kwargs)
                start = time.perf_counter()
                model.learn(total_timesteps=args.ppo_steps)
                best[name] = max(best[name], model.num_timesteps / (time.perf_counter() - start))
        rates = [best["routing"], best["cartpole"]]
        print(f"   n_envs {n_envs:>3}: routing features {rates[0]:9,.0f}  CartPole-v1 {rates[1]:9,.0f}  ratio {rates[0] / rates[1]:.2f}  (target >= 0.8)")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--mem-queries", type=int, default=100_000)
    parser.add_argument("--ppo-steps", type=int, default=16_384)
    parser.add_argument("--only", choices=("throughput", "memory", "ppo"), default=None)
    args = parser.parse_args()
    for part in (throughput, memory, ppo):
        if args.only in (None, part.__name__):
            part(args)


if __name__ == "__main__":
    main()
