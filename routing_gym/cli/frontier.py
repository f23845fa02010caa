"""``routing-gym frontier``: operating-point curves of agents with a cost knob against the fixed-model and task-aware yardsticks (chosen on train)."""

from __future__ import annotations

import argparse

from routing_gym.cli import check_output_path, json_object


def add_commands(cli) -> None:
    from routing_gym.eval.core.summary import SUMMARY_LAMBDA_E
    from routing_gym.eval.frontier import DEFAULT_FRONTIER_AGENTS

    p = cli.top.add_parser(
        "frontier",
        help="sweep each agent's cost knob: curve vs the fixed-model and task-aware yardsticks, mean gains with CIs, dominated "
        "fixed models and per-benchmark routes",
        description="For each agent with a cost knob: carve a seeded, benchmark-stratified validation part out of the "
        "training split, train on the rest, route validation and test for every knob value, keep the values whose "
        "validation points are Pareto-optimal, and report them on test: each point's routing gain, the curve's mean "
        "gain over the fixed-model hull on their common joule range with a paired bootstrap CI, the same over the "
        "task-aware yardstick (content gain: beyond routing by the benchmark label), and which fixed models and "
        "per-benchmark routes some point dominates. Writes table.md, frontier.json, points.csv, dominance.csv and frontier.png to "
        "--out. Exit status 2 for bad settings (before any training), 1 if an agent failed (outputs are still written).",
    )
    p.add_argument("--tournament", default="default", help="tournament directory or preset name (default: %(default)s)")
    p.add_argument("--agents", default=",".join(DEFAULT_FRONTIER_AGENTS),
                   help="comma-separated agents that declare a cost knob (default: %(default)s)")
    p.add_argument("--grid", default="{}",
                   help="knob values per agent as JSON, replacing the agent's default grid, e.g. '{\"knn\": [0, 0.2, 1]}'")
    p.add_argument("--agent-kwargs", default="{}", help="constructor kwargs per agent as JSON, e.g. '{\"knn\": {\"k\": 20}}'")
    p.add_argument("--seed", type=int, default=0, help="agent seed (default: %(default)s)")
    p.add_argument("--validation-share", type=float, default=0.2,
                   help="share of each benchmark's training rows held out to choose knob values (default: %(default)s)")
    p.add_argument("--validation-seed", type=int, default=0, help="seed of the validation cut (default: %(default)s)")
    p.add_argument("--lambda-e", type=float, default=SUMMARY_LAMBDA_E,
                   help="gated_rank energy coefficient of the training reward, for agents whose knob is not it "
                        "(default: %(default)s)")
    p.add_argument("--train-split", default="train")
    p.add_argument("--test-split", default="test")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--no-audit", action="store_true",
                   help="skip the audit (each sweep run again on a copy with held-out outcomes replaced); no curve then "
                        "gets a dominance verdict")
    p.add_argument("--leave-one-benchmark-out", nargs="?", const="all", default=None, metavar="B1,B2",
                   help="benchmarks never seen in training: one frontier per benchmark (all, or those named), tested on "
                   "that benchmark with every other question training, in OUT/held-out/<benchmark>/; a rerun skips the "
                   "folds already written with the same settings")
    p.add_argument("--no-plots", action="store_true", help="skip frontier.png")
    p.add_argument("--out", default="frontier-results", help="output directory (default: %(default)s)")
    p.set_defaults(func=cmd_frontier)


def cmd_frontier(args: argparse.Namespace) -> int:
    from routing_gym.eval.frontier import FrontierConfig, run_frontier
    from routing_gym.eval.frontier.report import write_frontier_outputs

    check_output_path(args.out)
    config = FrontierConfig(
        tournament=args.tournament, agents=[a.strip() for a in args.agents.split(",") if a.strip()],
        grids=json_object(args.grid, "--grid"), agent_kwargs=json_object(args.agent_kwargs, "--agent-kwargs"),
        seed=args.seed, validation_share=args.validation_share, validation_seed=args.validation_seed,
        coefficients={"lambda_e": args.lambda_e}, train_split=args.train_split, test_split=args.test_split,
        n_bootstrap=args.bootstrap, audit=not args.no_audit,
    )
    if args.leave_one_benchmark_out is not None:
        from routing_gym.cli.compare import held_out_benchmarks
        from routing_gym.eval.generalisation.unseen_benchmarks import run_frontier_leave_one_benchmark_out

        tables = run_frontier_leave_one_benchmark_out(config, held_out_benchmarks(args.leave_one_benchmark_out), args.out,
                                                      plots=not args.no_plots)
        for benchmark, table in tables.items():
            print(f"## held out: {benchmark}\n\n{table.read_text()}")
        print(f"wrote {len(tables)} fold folders to {args.out}")
        return 0
    result = run_frontier(config)  # bad settings raise UsageError before any training
    paths = write_frontier_outputs(result, args.out, plots=not args.no_plots)
    print(paths["table.md"].read_text())
    print(f"wrote {', '.join(sorted(p.name for p in paths.values()))} to {args.out} in {result.elapsed_s:.1f} s")
    if result.failures:
        print(f"{len(result.failures)} agent(s) failed: " + "; ".join(f"{c.agent}: {c.error}" for c in result.failures))
        return 1
    return 0
