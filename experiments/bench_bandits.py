"""Online decisions per second of each hand-written bandit, against the bare env loop.

For every bandit (LinUCB, epsilon-greedy, linear Thompson) this times ``fit``: one online
pass over the training split through RoutingEnv (select, step, Sherman-Morrison update,
regret log), with the text features already cached so only the online loop is measured.
It prints decisions/s, the ratio to the same env loop with uniformly random actions (the
ceiling any agent can reach through ``step``), and frozen greedy ``act_batch`` decisions/s.

    python experiments/bench_bandits.py [--tournament default] [--dim 32] [--epochs 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from routing_gym.envs import Reward

from routing_gym.sources import resolve_tournament
from routing_gym_agents import FitContext, ObservationBatch, featurizer_for_context, make_agent

BANDITS = ("linucb", "epsilon-greedy", "thompson")


def random_env_rate(ctx: FitContext, steps: int) -> float:
    """Decisions/s of the same reset/step loop with random actions and no learning."""
    env = ctx.make_env()
    actions = np.random.default_rng(0).integers(0, ctx.n_models, steps)
    env.reset(seed=0)
    start = time.perf_counter()
    for a in actions:
        env.step(int(a))
        env.reset()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default")
    parser.add_argument("--dim", type=int, default=32, help="text feature dim (the bandits' default is 32)")
    parser.add_argument("--epochs", type=int, default=3, help="online passes over the training split")
    parser.add_argument("--lambda-e", type=float, default=0.4)
    args = parser.parse_args()

    t = resolve_tournament(args.tournament)
    ctx = FitContext(t, Reward("gated_rank", {"lambda_e": args.lambda_e}), seed=0)
    featurizer = featurizer_for_context(ctx, kind="tfidf-svd", dim=args.dim, bias=True)
    d = featurizer.transform(ctx.train_observations()).shape[1]  # warm the shared featurizer and its memo
    steps = args.epochs * ctx.n_train
    test = ObservationBatch.from_tournament(t, t.split_rows("test"))
    print(f"{t.card.name}: K={t.n_models}, d={d}, {steps} online decisions ({args.epochs} pass(es) of {ctx.n_train})")

    env_rate = max(random_env_rate(ctx, steps) for _ in range(2))
    print(f"{'env loop, random actions':26s} {env_rate:10,.0f} decisions/s")
    for name in BANDITS:
        agent = make_agent(name, dim=args.dim, epochs=args.epochs)
        start = time.perf_counter()
        agent.fit(ctx)
        online = steps / (time.perf_counter() - start)
        start = time.perf_counter()
        agent.act_batch(test)
        greedy = len(test) / (time.perf_counter() - start)
        print(
            f"{name:26s} {online:10,.0f} decisions/s online  "
            f"(ratio to env loop {online / env_rate:.2f}); frozen act_batch {greedy:10,.0f} decisions/s"
        )


if __name__ == "__main__":
    main()
