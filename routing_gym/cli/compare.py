"""``routing-gym compare``: train and evaluate routers on a tournament; tables and plots."""

from __future__ import annotations

import argparse
import sys
import warnings

from routing_gym.cli import check_output_path, json_object


def add_commands(cli) -> None:
    from routing_gym.eval.compare.cells import DEFAULT_AGENTS, DEFAULT_OUTPUT_INFORMED
    from routing_gym.eval.core.summary import SUMMARY_LAMBDA_E

    p = cli.top.add_parser(
        "compare",
        help="train every agent on the training split, evaluate on held-out: table, JSON/CSV, plots",
        description="Train each agent x seed on the training split, route the held-out split, score every "
        "method under one common reward, and write results.json, summary.csv, per_seed.csv, per_benchmark.csv, "
        "dominance.csv, table.md and pareto.png, selection.png, regret.png to --out; every method gets its routing gain "
        "over the fixed-model yardstick and its content gain over the task-aware yardstick (both chosen on train) (beyond routing by the benchmark label). Progress goes to stderr. Exit status 2 for bad settings (before any training), "
        "1 if any run failed (outputs are still written).",
    )
    p.add_argument("--tournament", default="default", help="tournament directory or preset name (default: %(default)s)")
    p.add_argument("--agents", default="default",
                   help=f"comma-separated registered agent names; 'default' = the fast Table 2 set "
                   f"({', '.join(DEFAULT_AGENTS)}; {', '.join(DEFAULT_OUTPUT_INFORMED)} where the tournament logs answer "
                   "texts); 'all' = every registered agent; 'default' may be combined, e.g. default,ppo,dqn; an agent of "
                   "your own module needs --import MODULE")
    p.add_argument("--list-agents", action="store_true", help="print the registered agents and exit")
    p.add_argument("--seeds", type=int, default=5, help="seeds per agent, 0..N-1 (default: %(default)s)")
    p.add_argument("--lambda-e", type=float, default=SUMMARY_LAMBDA_E, help="gated_rank energy coefficient (default: %(default)s)")
    p.add_argument("--lambda-t", type=float, default=0.0, help="gated_rank latency coefficient (default: %(default)s)")
    p.add_argument("--lambda-p", type=float, default=0.0, help="gated_rank power coefficient (default: %(default)s)")
    p.add_argument("--reward", default="gated_rank", help="registered reward (default: %(default)s)")
    p.add_argument("--allow-ungated", action="store_true",
                   help="accept reward coefficients that break the gate (a correct route could score at or below a "
                   "wrong one), to study them on purpose; see routing-gym rewards")
    p.add_argument("--coefficients", default=None,
                   help="reward coefficients as JSON, replacing --lambda-*, e.g. '{\"lambda_e\": 0.2}' (needed for rewards other than gated_rank)")
    p.add_argument("--agent-kwargs", default="{}", help="constructor kwargs per agent as JSON, e.g. '{\"knn\": {\"k\": 20}}'")
    p.add_argument("--train-split", default="train")
    p.add_argument("--test-split", default="test")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals (default: %(default)s)")
    p.add_argument("--no-fixed-models", action="store_true", help="leave out the 'always <model>' rows")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-audit", action="store_true",
                   help="skip the audit (each agent fit and run again on a copy with held-out outcomes replaced); "
                   "rows are then 'unverified', never 'yes'")
    p.add_argument("--out", default="compare-results",
                   help="output directory (default: %(default)s); finished cells are saved in OUT/cells as they "
                   "arrive and a rerun with the same settings runs only the missing ones")
    p.add_argument("--leave-one-benchmark-out", nargs="?", const="all", default=None, metavar="B1,B2",
                   help="benchmarks never seen in training: one fold per benchmark (all, or those named), each tested "
                   "on that benchmark with every other question training, in OUT/held-out/<benchmark>/ (resumable); "
                   "writes unseen.md/.csv/.json: each router's gain over the fixed-model yardstick chosen on train and "
                   "the share it recovers of what the label would have been worth had the benchmark been seen")
    p.add_argument("--unseen-models", default=None, metavar="M1,M2",
                   help="models never seen in training (UniRoute's protocol): each agent is fitted without them, then "
                   "routes the whole pool after learning each from its answers to --calibration training questions; "
                   "writes unseen-models.md/.csv (agents: 'default' = those that can use such a description)")
    p.add_argument("--calibration", default="0,50,200", metavar="N1,N2",
                   help="with --unseen-models: calibration question counts per new model, 0 = route among the seen "
                   "models (default: %(default)s)")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_compare)


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor, --workers, --ray-address, --max-retries (compare and sweep); the global
    ``--import MODULE`` modules are passed on to every worker."""
    from routing_gym.eval.execution.executors import DEFAULT_MAX_RETRIES, EXECUTORS

    p.add_argument("--executor", default=None, choices=EXECUTORS,
                   help="where agent x seed cells run: local (one after another), process (a process pool here), "
                   "ray (Ray tasks: on --ray-address / RAY_ADDRESS, else on a Ray that `ray start` left running "
                   "here, else on a local Ray started for the run) (default: local)")
    p.add_argument("--workers", type=int, default=None, help="process pool size / CPUs of a local Ray (default: every CPU)")
    p.add_argument("--ray-address", default=None,
                   help="Ray head to use: HOST:PORT given to `ray start --head`, or auto (default: RAY_ADDRESS); a head "
                   "with token authentication needs its token on this machine (docs/scaling.md)")
    p.add_argument("--max-retries", type=int, default=None,
                   help=f"further attempts of a cell whose worker process died (default: {DEFAULT_MAX_RETRIES})")


def executor_settings(args: argparse.Namespace) -> dict:
    """The CompareConfig fields the executor options set (only those given)."""
    given = {"executor": args.executor, "workers": args.workers, "ray_address": args.ray_address,
             "max_retries": args.max_retries}
    settings = {k: v for k, v in given.items() if v is not None}
    from routing_gym.cli import USER_IMPORTS

    if USER_IMPORTS:
        settings["imports"] = list(USER_IMPORTS)
    return settings


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"routing-gym compare: warning: {message}", file=sys.stderr)


def cmd_compare(args: argparse.Namespace) -> int:
    if args.list_agents:
        from routing_gym_agents import list_agents

        print("\n".join(list_agents()))
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _one_line_warning
        return _run(args)  # errors: routing_gym.cli.exit_status (bad settings 2, bad data 1)


def _run(args: argparse.Namespace) -> int:
    from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs

    check_output_path(args.out)
    if args.coefficients is not None:
        coefficients = json_object(args.coefficients, "--coefficients")
    else:
        coefficients = {"lambda_e": args.lambda_e, "lambda_t": args.lambda_t, "lambda_p": args.lambda_p}
        coefficients = {k: v for k, v in coefficients.items() if v != 0.0}  # state only what is set
    if args.agents == "default":
        agents = None
    elif args.agents == "all":
        from routing_gym_agents import list_agents

        agents = list_agents()
    else:
        agents = args.agents.split(",")
    config = CompareConfig(
        tournament=args.tournament, agents=agents, seeds=args.seeds, reward=args.reward, coefficients=coefficients,
        train_split=args.train_split, test_split=args.test_split,
        agent_kwargs=json_object(args.agent_kwargs, "--agent-kwargs"), fixed_models=not args.no_fixed_models,
        allow_ungated=args.allow_ungated, n_bootstrap=args.bootstrap, audit=not args.no_audit, **executor_settings(args),
    )
    if args.unseen_models is not None:
        return _unseen_models(args, config)
    if args.leave_one_benchmark_out is not None:
        from routing_gym.eval.generalisation.unseen_benchmarks import run_leave_one_benchmark_out, write_unseen_outputs

        result = run_leave_one_benchmark_out(config, held_out_benchmarks(args.leave_one_benchmark_out), args.out)
        paths = write_unseen_outputs(result, args.out, plots=not args.no_plots)
        table, folders = paths["unseen.md"], f" and {len(result.folds)} fold folders"
    else:
        result = run_compare(config, out_dir=args.out)
        paths = write_outputs(result, args.out, plots=not args.no_plots)
        table, folders = paths["table.md"], ""
    print(table.read_text())
    print(f"wrote {', '.join(sorted(p.name for p in paths.values()))}{folders} to {args.out} in {result.elapsed_s:.1f} s")
    if result.failures:
        print(f"{len(result.failures)} run(s) failed: " + "; ".join(f"{f.method} seed {f.seed}: {f.error}" for f in result.failures))
        return 1
    return 0


def _unseen_models(args: argparse.Namespace, config) -> int:
    """``compare --unseen-models``: ``unseen_model_gains`` on the tournament, its table written and printed."""
    import time
    from pathlib import Path

    import pandas as pd

    from routing_gym.envs import Reward
    from routing_gym.errors import UsageError
    from routing_gym.eval.generalisation import unseen_model_gains as gains
    from routing_gym.sources import resolve_tournament

    if args.leave_one_benchmark_out is not None:
        raise UsageError("--unseen-models and --leave-one-benchmark-out are two studies: run them one at a time")
    held_out = [m.strip() for m in args.unseen_models.split(",") if m.strip()]
    try:
        sizes = sorted({int(n) for n in args.calibration.split(",")})
    except ValueError:
        raise UsageError(f"--calibration {args.calibration!r}: expected whole numbers like 0,50,200") from None
    if not held_out or min(sizes) < 0:
        raise UsageError("--unseen-models needs model names and --calibration counts >= 0")
    t = resolve_tournament(args.tournament)
    agents = gains.describing_agents() if config.agents is None else list(config.agents)
    reward = Reward(config.reward, dict(config.coefficients), allow_ungated=config.allow_ungated)
    tic = time.perf_counter()
    rows = gains.unseen_model_gains(t, agents, held_out, sizes, reward, seed=0, n_bootstrap=config.n_bootstrap)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "unseen-models.csv", index=False)
    text = gains.markdown(rows, t.card.name, held_out, seed=0)
    (out / "unseen-models.md").write_text(text)
    print(text)
    print(f"wrote unseen-models.csv, unseen-models.md to {args.out} in {time.perf_counter() - tic:.1f} s")
    return 0


def held_out_benchmarks(value: str) -> list[str] | None:
    """``--leave-one-benchmark-out`` (compare, frontier): None for every benchmark, else the names given."""
    return None if value == "all" else [b.strip() for b in value.split(",") if b.strip()]
