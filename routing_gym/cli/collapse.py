"""``routing-gym collapse``: the routing-collapse study for any registered or ``--import``ed agent."""

from __future__ import annotations

import argparse
import sys

from routing_gym.cli import check_output_path, json_object, positive_int


def add_commands(cli) -> None:
    from routing_gym.eval.collapse.study import GATE_FRACTIONS

    default_fractions = " ".join(f"{f:.3g}" for f in GATE_FRACTIONS)
    p = cli.top.add_parser(
        "collapse",
        help="does an agent stop routing? collapse onto one model over reward settings: table and plots",
        description="Train one agent (any registered name, or one from a module given with --import: bandit, "
        "baseline, SB3, text controller) over a grid of reward settings (energy coefficient as fractions of the value "
        "at which the reward's gate breaks, the entropy coefficient for agents that take one, one or all rewards) and "
        "track its decisions: online training decisions for bandit-feedback agents, held-out routes for agents that "
        "learn from the full table. Writes table.md (one row per setting, with how to read it), results.csv, "
        "summary.png, curves.png (entropy, top-1 share, cumulative regret), shares_<reward>.png and runs/*.csv to --out. "
        "routing_gym/eval/collapse/study.py explains the study.",
    )
    p.add_argument("--agent", default="ppo", help="registered agent name (default: %(default)s)")
    p.add_argument("--agent-kwargs", default="{}", help="constructor kwargs as JSON, e.g. '{\"alpha\": 0.5}'")
    p.add_argument("--tournament", default="collapse-prone", help="tournament directory or preset name (default: %(default)s)")
    p.add_argument("--rewards", nargs="+", default=["gated_rank"],
                   help="registered rewards with an energy coefficient, or 'all' (default: gated_rank; see routing-gym rewards)")
    p.add_argument("--gate-fractions", nargs="+", type=float, default=list(GATE_FRACTIONS), metavar="F",
                   help=f"energy coefficients as fractions of the gate boundary; >= 1 is ungated (default: {default_fractions})")
    p.add_argument("--ent-coefs", nargs="+", type=float, default=[0.0, 0.01, 0.05], metavar="C",
                   help="entropy coefficients, for agents that take ent_coef (default: 0 0.01 0.05)")
    p.add_argument("--timesteps", type=positive_int, default=5000,
                   help="online decisions per run, for agents that take total_timesteps (default: %(default)s)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (default: 0)")
    p.add_argument("--window", type=positive_int, default=250, help="decisions per collapse window (default: %(default)s)")
    p.add_argument("--threshold", type=float, default=0.9, help="top-1 share that counts as collapse (default: %(default)s)")
    p.add_argument("--feature-dim", type=positive_int, default=32, help="text feature dimension (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--out", default="collapse-results", help="output directory (default: %(default)s)")
    p.set_defaults(func=cmd_collapse)


def cmd_collapse(args: argparse.Namespace) -> int:
    from routing_gym.cli import USER_IMPORTS
    from routing_gym.eval.collapse.study import CollapseConfig, left_out_note, run_collapse_study, write_study

    check_output_path(args.out)
    config = CollapseConfig(
        tournament=args.tournament, agent=args.agent, agent_kwargs=json_object(args.agent_kwargs, "--agent-kwargs"),
        rewards=args.rewards,
        gate_fractions=args.gate_fractions, ent_coefs=args.ent_coefs, timesteps=args.timesteps, seeds=args.seeds,
        window=args.window, threshold=args.threshold, feature_dim=args.feature_dim, imports=list(USER_IMPORTS),
    )
    # A reward named on the command line and not swept is said now, not only in table.md.
    for name in [] if args.rewards == ["all"] else args.rewards:
        note = left_out_note(name)
        if note is not None:
            print(f"routing-gym collapse: warning: reward {note} (docs/rewards.md: the energy coefficient and the gate)",
                  file=sys.stderr)
    study = run_collapse_study(config)
    paths = write_study(study, args.out, plots=not args.no_plots)
    print(paths["table.md"].read_text())
    print(f"wrote {', '.join(sorted(paths))} and runs/ to {args.out} in {study.elapsed_s:.1f} s")
    return 0
