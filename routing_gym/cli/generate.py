"""``routing-gym data generate``: write a procedural tournament to a directory."""

from __future__ import annotations

import argparse
import time

from routing_gym.cli import check_output_path
from routing_gym.errors import UsageError


def add_commands(cli) -> None:
    data = cli.group("data")
    gen = data.add_parser(
        "generate",
        help="generate a procedural tournament from a preset and a seed (no downloads)",
        description="Generate a procedural tournament (routing_gym.sources.synthetic) and save it with its data card.",
    )
    gen.add_argument("--preset", default="paper-pool", help="procedural preset (default: paper-pool; --list shows all)")
    gen.add_argument("--seed", type=int, default=None, help="random seed (default: the preset's)")
    gen.add_argument("--out", help="output directory (created; existing tables in it are replaced)")
    gen.add_argument("--n-queries", type=int, default=None, help="number of questions (default: the preset's)")
    gen.add_argument("--text-signal", type=float, default=None,
                     help="how much question text reveals difficulty, 0..1 (default: the preset's)")
    gen.add_argument("--noise", type=float, default=None,
                     help="model-specific share of item difficulty, 0..1 (default: the preset's)")
    gen.add_argument("--name", default=None, help="tournament name in the data card (default: the preset's)")
    gen.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="table format (default: parquet)")
    gen.add_argument("--list", action="store_true", help="list the presets and exit")
    gen.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from routing_gym.envs.registration import PRESET_IDS
    from routing_gym.sources.synthetic import PRESETS, generate, preset_config

    if args.list:
        for name, factory in PRESETS.items():
            config = factory()
            summary = (factory.__doc__ or "").strip().splitlines()[0]
            print(f"{name:15s} {config.n_queries} x {len(config.models)}  gym id {PRESET_IDS[name]}  {summary}")
        return 0
    if not args.out:
        raise UsageError("--out DIR is required (or --list)")
    check_output_path(args.out)
    overrides = {
        key: value
        for key, value in (
            ("seed", args.seed),
            ("n_queries", args.n_queries),
            ("text_signal", args.text_signal),
            ("noise", args.noise),
            ("name", args.name),
        )
        if value is not None
    }
    try:
        config = preset_config(args.preset, **overrides)
    except ValueError as exc:  # a knob out of range is a bad setting (exit status 2), named by the message
        raise UsageError(str(exc)) from None
    start = time.perf_counter()
    tournament = generate(config)
    tournament.save(args.out, format=args.format)
    print(
        f"wrote {args.out}: {config.name} N={tournament.n_queries} x K={tournament.n_models}, seed {config.seed}, "
        f"text_signal {config.text_signal:g}, noise {config.noise:g}, splits {tournament.splits or 'none'} "
        f"({time.perf_counter() - start:.2f} s)"
    )
    return 0
