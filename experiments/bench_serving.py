"""Speed of the serving simulator: simulated requests per second with a trivial policy (issue 62).

Prints three rates measured in this run, on one thread (CPU time of this process):
the simulator core (``ServingSimulator.submit`` for every arrival, then ``drain``), the
``RoutingGym/Serving-v0`` env stepped with a fixed action, and the replay env
``RoutingGym/PaperPool-v0`` stepped the same way (reset + step per query); and the ratios of the
first two to the third. Target: >= 20,000 simulated requests per second for the core.

    OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR=../shared/data python experiments/bench_serving.py
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.serving.simulator import ServingSimulator


def cpu_rate(run, n: int) -> float:
    start = time.process_time()
    run()
    return n / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--env-steps", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=20.0, help="arrivals per second (paper-pool, one replica per model)")
    args = parser.parse_args()

    env = gym.make("RoutingGym/Serving-v0", episode_length=args.env_steps, rate=args.rate).unwrapped
    tournament = env.tournament
    rng = np.random.default_rng(0)
    n = args.requests
    arrivals = np.cumsum(rng.exponential(1 / args.rate, n)).tolist()
    models = rng.integers(0, tournament.n_models, n).tolist()  # trivial policy: uniform at random
    rows = rng.integers(0, tournament.input_tokens.shape[0], n)
    inp = tournament.input_tokens[rows, models].tolist()
    out = tournament.output_tokens[rows, models].tolist()
    sim = ServingSimulator(env.physics)

    def core() -> None:
        for i in range(n):
            sim.submit(arrivals[i], models[i], inp[i], out[i])
        sim.drain()

    core_rate = cpu_rate(core, n)

    def serving() -> None:
        env.reset(seed=0)
        terminated = False
        while not terminated:
            terminated = env.step(2)[2]

    env_rate = cpu_rate(serving, args.env_steps)
    replay = gym.make("RoutingGym/PaperPool-v0").unwrapped

    def replay_steps() -> None:
        replay.reset(seed=0)
        for _ in range(args.env_steps):
            replay.step(2)
            replay.reset()

    replay_rate = cpu_rate(replay_steps, args.env_steps)
    print(f"simulator core : {core_rate:12,.0f} simulated requests/s (uniform policy, {n:,} requests at {args.rate:g}/s)")
    print(f"Serving-v0 env : {env_rate:12,.0f} steps/s (fixed action)")
    print(f"PaperPool-v0   : {replay_rate:12,.0f} steps/s (replay env, reset + step)")
    print(f"ratio core / replay env    : {core_rate / replay_rate:.2f}")
    print(f"ratio serving / replay env : {env_rate / replay_rate:.2f}")
    print(f"target >= 20,000 requests/s for the core: {'met' if core_rate >= 20_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
