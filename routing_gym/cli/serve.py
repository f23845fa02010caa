"""``routing-gym serve``: routing policies under load on ``RoutingGym/Serving-v0``, paired on arrival seeds."""

from __future__ import annotations

import argparse

from routing_gym.cli import check_output_path, json_object, positive_int


def add_commands(cli) -> None:
    p = cli.top.add_parser(
        "serve",
        help="evaluate routing policies under load (servers that batch): accuracy, J/request, latency, SLO",
        description="Run policies on RoutingGym/Serving-v0 over the same arrival seeds (paired): heuristics "
        "(jsq, po2, energy-greedy, consolidate), registered replay agents as agent:<name> (state-blind), ppo (SB3 on "
        "the features id, trained on the training split). Reports accuracy, J per request (active, idle, total), "
        "p50/p95/p99 latency, SLO attainment, throughput and top-1 share with bootstrap intervals over episodes, and "
        "family-wise verdicts against --reference. Writes table.md and episodes.csv to --out.",
    )
    p.add_argument("--tournament", default="paper-pool", help="tournament name or directory (default: %(default)s)")
    p.add_argument("--policies", nargs="+", default=["jsq", "po2", "energy-greedy", "consolidate", "agent:per-benchmark"],
                   help="policy names (default: %(default)s)")
    p.add_argument("--reference", default="jsq", help="policy the verdicts compare with (default: %(default)s)")
    p.add_argument("--episodes", type=positive_int, default=5, help="episodes (arrival seeds 0..N-1) per policy")
    p.add_argument("--episode-length", type=positive_int, default=500, help="arrivals per episode")
    p.add_argument("--rate", type=float, default=8.0, help="mean arrivals per second (default: %(default)s)")
    p.add_argument("--arrival", default="poisson", choices=["poisson", "bursty", "daily"])
    p.add_argument("--split", default="test", help="split the traffic is drawn from (default: %(default)s)")
    p.add_argument("--env-kwargs", default="{}", help="more ServingEnv options as JSON, e.g. '{\"replicas\": 2}'")
    p.add_argument("--ppo-timesteps", type=positive_int, default=20_000, help="PPO training steps (default: %(default)s)")
    p.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--out", default="serve-results", help="output directory (default: %(default)s)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    import gymnasium as gym

    from routing_gym.eval.serving.evaluate import compare_policies, format_table, policy_names
    from routing_gym.eval.serving.policies import check_policy_names, make_policy

    check_output_path(args.out)
    check_policy_names(policy_names(args.policies), args.reference)  # before any env is built
    env_kwargs = {"tournament": args.tournament, "episode_length": args.episode_length, "rate": args.rate,
                  "arrival": args.arrival, **json_object(args.env_kwargs, "--env-kwargs")}
    names = policy_names(args.policies)
    env = gym.make("RoutingGym/Serving-v0", **env_kwargs)  # policies learn from its training split
    train_kwargs = {**env_kwargs, "split": "train"}
    policies = {name: make_policy(name, env, ppo_timesteps=args.ppo_timesteps, env_kwargs=train_kwargs) for name in names}
    result = compare_policies(policies, {**env_kwargs, "split": args.split}, args.episodes, args.reference,
                              n_resamples=args.resamples, progress=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = format_table(result)
    command = " ".join(["routing-gym serve", *[f"--{k.replace('_', '-')} {v}" for k, v in (
        ("tournament", args.tournament), ("rate", args.rate), ("arrival", args.arrival),
        ("episodes", args.episodes), ("episode_length", args.episode_length))], "--policies", *names])
    (out / "table.md").write_text(f"# Serving: {args.tournament} at {args.rate:g} requests/s ({args.arrival})\n\n"
                                  f"Command: `{command}`\n\n{table}\n", encoding="utf-8")
    result.episodes.to_csv(out / "episodes.csv", index=False)
    print(table)
    print(f"wrote {out / 'table.md'} and {out / 'episodes.csv'}")
    return 0
