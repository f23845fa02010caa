"""``routing-gym headroom``: the oracle's lead over the task-aware yardstick, decomposed rung by rung."""

from __future__ import annotations

import argparse

from routing_gym.cli import check_output_path, json_object, positive_int


def add_commands(cli) -> None:
    from routing_gym.eval.headroom import DEFAULT_ROUTERS

    p = cli.top.add_parser(
        "headroom",
        help="why no router reads the question: the ladder from the fixed-model hull to the oracle at matched joules, "
             "within-benchmark and pairwise AUCs, the oracle's lead by question, the noise floor",
        description="At matched joules (knobs chosen on train with cross-fitted predictions), each rung's content gain "
        "over the task-aware yardstick on test with a paired bootstrap CI and the yardstick's local slope, and every "
        "rung at common joules: fixed-model hull, task-aware hull, the best content router (correctness predictors), "
        "the shared-difficulty ceiling (privileged: each question's share of models "
        "right) and the oracle. Also the routers' within-benchmark and pairwise AUCs, how much of the oracle's lead comes "
        "from questions only one or two models answer, the guessing rate and disagreement between copies of a question, "
        "and on procedural pools the generator's specialization_signal. Writes headroom.json, table.md and headroom.png "
        "to --out. Exit status 2 for bad settings (before any fitting), 1 for bad data or if a router failed (outputs "
        "are still written).",
    )
    p.add_argument("tournament", help="tournament directory, preset or real-data name (e.g. mmlu-pro)")
    p.add_argument("--routers", default=None,
                   help=f"comma-separated content routers exposing predict_correct (default: those of "
                        f"{','.join(DEFAULT_ROUTERS)} that are registered)")
    p.add_argument("--agent-kwargs", default="{}", help="constructor kwargs per router as JSON, e.g. '{\"cost-aware\": {\"dim\": 32}}'")
    p.add_argument("--budget-j", type=float, default=None,
                   help="matched budget in mean joules per query (default: where knowing each question's difficulty "
                        "is worth most on train, cross-fitted); every rung is also read at a grid of common joules")
    p.add_argument("--folds", type=positive_int, default=3, help="cross-fitting folds of the training split (default: %(default)s)")
    p.add_argument("--whole-folds", type=int, default=3,
                   help="cross-fit the content rung over the whole tournament (train and test) in this many outer folds, "
                        "router and strength chosen inside each; 0 turns it off (default: %(default)s)")
    p.add_argument("--whole-seeds", type=int, default=5,
                   help="fold seeds of the whole-tournament cross-fit (their spread is reported; default: %(default)s)")
    p.add_argument("--whole-budget-s", type=float, default=150.0,
                   help="the whole-tournament cross-fit's routers: the costliest left out until their nested fitting is "
                        "predicted (from their fits on train) to take at most this many seconds (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="router and fold seed (default: %(default)s)")
    p.add_argument("--train-split", default="train")
    p.add_argument("--test-split", default="test")
    p.add_argument("--bootstrap", type=positive_int, default=1000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="skip headroom.png")
    p.add_argument("--out", default="headroom-results", help="output directory (default: %(default)s)")
    p.set_defaults(func=cmd_headroom)


def cmd_headroom(args: argparse.Namespace) -> int:
    from routing_gym.eval.headroom import HeadroomConfig, run_headroom
    from routing_gym.eval.headroom.report import write_headroom_outputs

    check_output_path(args.out)
    routers = None if args.routers is None else [r.strip() for r in args.routers.split(",") if r.strip()]
    config = HeadroomConfig(tournament=args.tournament, routers=routers,
                            agent_kwargs=json_object(args.agent_kwargs, "--agent-kwargs"), budget_j=args.budget_j,
                            folds=args.folds, seed=args.seed, train_split=args.train_split, test_split=args.test_split,
                            n_bootstrap=args.bootstrap, whole_folds=args.whole_folds,
                            whole_seeds=args.whole_seeds, whole_budget_s=args.whole_budget_s)
    result = run_headroom(config)  # bad settings raise UsageError before any fitting
    paths = write_headroom_outputs(result, args.out, plots=not args.no_plots)
    print(paths["table.md"].read_text())
    print(f"wrote {', '.join(sorted(p.name for p in paths.values()))} to {args.out} in {result.elapsed_s:.1f} s "
          f"(CPU {result.cpu_s:.1f} s)")
    if result.failures:
        print(f"{len(result.failures)} router(s) failed: " + "; ".join(f"{n}: {result.routers[n]['error']}" for n in result.failures))
        return 1
    return 0
