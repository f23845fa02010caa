"""``routing-gym data info``, ``data validate`` and ``data split``."""

from __future__ import annotations

import argparse
import json
import time

from routing_gym.cli import PAPER_SPLIT_SPEC, UsageError, add_split_arguments, describe_splits, split_proportions


def add_commands(cli) -> None:
    data = cli.group("data")
    info = data.add_parser("info", help="summarise tournaments: N, K, per-model accuracy and joules, oracles")
    info.add_argument("tournaments", nargs="*", default=["default"], help="directories or preset names (default: the offline default)")
    info.add_argument("--split", default=None, help="summarise one split only (default: all queries)")
    info.add_argument("--json", action="store_true", help="print machine-readable JSON")
    info.set_defaults(func=cmd_info)

    validate = data.add_parser("validate", help="load and validate tournament directories; exit 1 on any problem")
    validate.add_argument("tournaments", nargs="+")
    validate.set_defaults(func=cmd_validate)

    split = data.add_parser(
        "split", help="write a copy of a tournament with a seeded train/test group split stratified by benchmark",
        description=f"Assign every question to a split (default proportions {PAPER_SPLIT_SPEC}, the reference "
                    "paper's ratio), shuffling each benchmark with the seed; every copy of a question (same text, "
                    "lowercase and whitespace collapsed) goes to one side. Save the tournament to --out "
                    "(which may be the input directory itself).",
    )
    split.add_argument("tournament", help="directory or preset name")
    split.add_argument("--out", required=True, help="tournament directory to write")
    split.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
    add_split_arguments(split)
    split.set_defaults(func=cmd_split)


def cmd_info(args: argparse.Namespace) -> int:
    from routing_gym.sources import resolve_tournament
    from routing_gym.tournament.summary import describe, side_by_side, summary_table

    tournaments = [resolve_tournament(spec) for spec in args.tournaments]
    if args.json:
        payload = {t.card.name: summary_table(t, args.split).to_dict(orient="records") for t in tournaments}
        print(json.dumps(payload, indent=2, default=float))
        return 0
    for t in tournaments:
        print(describe(t, args.split), end="\n\n")
    if len(tournaments) > 1:
        print("side by side:")
        print(side_by_side(tournaments, args.split).to_string())
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from routing_gym.errors import TournamentValidationError
    from routing_gym.tournament import Tournament

    failures = 0
    for path in args.tournaments:
        start = time.perf_counter()
        try:
            t = Tournament.load(path)
        except (TournamentValidationError, FileNotFoundError) as exc:
            failures += 1
            print(f"INVALID {path}\n{exc}")
            continue
        print(f"ok {path}: {t.n_queries} x {t.n_models}, splits {t.splits or 'none'} ({time.perf_counter() - start:.2f} s)")
    return 1 if failures else 0


def cmd_split(args: argparse.Namespace) -> int:
    from routing_gym.sources import resolve_tournament

    proportions = split_proportions(args.split)
    if proportions is None:
        raise UsageError("data split needs proportions (--split NAME=WEIGHT,...), not 'none'")
    tournament = resolve_tournament(args.tournament).with_splits(seed=args.split_seed, proportions=proportions)
    tournament.save(args.out, format=args.format)
    from routing_gym.tournament.summary import duplicates_line

    print(f"wrote {args.out}: {tournament.n_queries} questions x {tournament.n_models} models, {describe_splits(tournament)}")
    print(duplicates_line(tournament))
    return 0
