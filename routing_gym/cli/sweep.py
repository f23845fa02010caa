"""``routing-gym sweep CONFIG``: compare over tournaments x reward settings, one executor, resumable."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from routing_gym.cli import check_output_path


def add_commands(cli) -> None:
    from routing_gym.cli.compare import add_executor_arguments

    p = cli.top.add_parser(
        "sweep",
        help="run compare for every tournament x reward setting of a YAML/TOML grid; one folder each plus a combined table",
        description="Read a sweep config (tournaments, agents with kwargs, seeds, reward grid, executor; see "
        "docs/scaling.md), run every agent x seed cell of every setting on one executor, and write one compare "
        "folder per tournament x reward setting plus combined.csv and combined.md. Finished cells are saved as "
        "they arrive; rerunning the same command runs only the missing ones. Progress: one line per finished "
        "cell on stderr. Exit status 2 for a bad config, 1 if any cell failed (outputs are still written).",
    )
    p.add_argument("config", help="sweep config (.yaml, .yml or .toml)")
    p.add_argument("--out", default=None, help="results folder (default: the config's 'out', else sweep-results)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    add_executor_arguments(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from routing_gym.cli.compare import executor_settings
    from routing_gym.eval.compare.sweep import load_sweep_config, run_sweep

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, *rest, **kw: print(f"routing-gym sweep: warning: {message}", file=sys.stderr)
        # errors: routing_gym.cli.exit_status (a bad config 2, bad data 1)
        config = load_sweep_config(args.config)
        for key, value in executor_settings(args).items():  # the command line wins over the file
            setattr(config, key, value)
        if args.no_plots:
            config.plots = False
        check_output_path(args.out or config.out, "--out" if args.out else f"{args.config}: out")
        outcome = run_sweep(config, out=args.out)
    out = args.out or config.out
    print((Path(out) / "combined.md").read_text())
    print(f"wrote {len(outcome['folders'])} setting folder(s) and combined.csv, combined.md to {out}")
    if outcome["failures"]:
        print(f"{len(outcome['failures'])} cell(s) failed: " + "; ".join(outcome["failures"]))
        return 1
    return 0
