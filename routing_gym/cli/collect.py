"""``routing-gym collect run|sweep|status|to-tournament``: build a measured tournament from served
models, and measure their batch curves under load."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from routing_gym.cli import (
    INCOMPLETE,
    INTERRUPTED,
    PAPER_SPLIT_SPEC,
    add_split_arguments,
    check_output_path,
    describe_splits,
    split_proportions,
)
from routing_gym.collect.config import METERS
from routing_gym.errors import UsageError


def add_commands(cli) -> None:
    collect = cli.group("collect")
    run = collect.add_parser("run", help="answer every question with every model, measuring GPU energy; resumes")
    run.add_argument("config", help="collection config (.yaml, .json or .toml); see docs/collecting.md")
    run.add_argument("--out", required=True, help="run folder (created; an existing one is resumed)")
    run.add_argument("--meter", default=None, choices=METERS, help="override energy.meter")
    run.add_argument("--host", default=None, help="override server.ollama_host")
    run.add_argument("--data-dir", default=None, help="shared question sets (default: ROUTING_GYM_DATA_DIR)")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--tournament", default=None, metavar="DIR", help="when every pair is done, also write the tournament here")
    run.add_argument("--ray", action="store_true",
                     help="one Ray actor per shard (config 'shards', else one per Ray node) answers from its own host's "
                     "server and meters its own GPU; this process writes the one log (see docs/scaling.md)")
    run.add_argument("--ray-address", default=None, help="Ray cluster for --ray (default: RAY_ADDRESS, else a local Ray)")
    run.add_argument("--backend-factory", default=None, metavar="MODULE:FUNCTION",
                     help="build the backends with FUNCTION(config) -> {model id: Backend} instead of from the config "
                     "(importable on every node with --ray)")
    run.set_defaults(func=cmd_run)

    sweep = collect.add_parser("sweep", help="N requests in flight at once for each N of sweep.concurrency: "
                               "time per token, power and energy per request per (model, N); resumes")
    sweep.add_argument("config", help="collection config with a 'sweep' section (see docs/collecting.md)")
    sweep.add_argument("--out", required=True, help="sweep folder (created; an existing one is resumed)")
    sweep.add_argument("--concurrency", default=None, metavar="N,N,...", help="override sweep.concurrency, e.g. 1,2,4,8")
    sweep.add_argument("--meter", default=None, choices=METERS, help="override energy.meter")
    sweep.add_argument("--host", default=None, help="override server.ollama_host")
    sweep.add_argument("--data-dir", default=None, help="shared question sets (default: ROUTING_GYM_DATA_DIR)")
    sweep.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    sweep.add_argument("--backend-factory", default=None, metavar="MODULE:FUNCTION",
                       help="build the backends with FUNCTION(config) -> {model id: Backend} instead of from the config")
    sweep.set_defaults(func=cmd_sweep)

    status = collect.add_parser("status", help="progress of a run folder: pairs done per model, failures, joules")
    status.add_argument("out", help="run folder")
    status.add_argument("--json", action="store_true", help="print machine-readable JSON")
    status.set_defaults(func=cmd_status)

    convert = collect.add_parser("to-tournament", help="turn a finished run folder into a tournament directory")
    convert.add_argument("out", help="run folder")
    convert.add_argument("--dest", required=True, help="tournament directory to write")
    convert.add_argument("--allow-partial", action="store_true", help="drop questions that lack any model's answer")
    convert.add_argument("--regrade", action="store_true", help="grade every stored answer again")
    convert.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
    add_split_arguments(convert, seed_flag="--split-seed")
    convert.set_defaults(func=cmd_to_tournament)


def _load(args: argparse.Namespace):
    """The config file with the command line's overrides."""
    from routing_gym.collect.config import load_config

    check_output_path(args.out)
    config = load_config(args.config)
    if args.meter:
        config.energy.meter = args.meter
    if args.host:
        config.server.ollama_host = args.host
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from routing_gym.collect.runner import run_collection

    config = _load(args)
    progress = False if args.no_progress else None
    try:
        if args.ray:
            from routing_gym.collect.shards import run_collection_ray

            summary = run_collection_ray(config, Path(args.out), backend_factory=args.backend_factory,
                                         ray_address=args.ray_address, progress=progress, data_dir=args.data_dir)
        else:
            from routing_gym.collect.shards import resolve_backend_factory

            factory = resolve_backend_factory(args.backend_factory)
            summary = run_collection(config, Path(args.out), progress=progress, data_dir=args.data_dir,
                                     backends=factory(config) if factory else None)
    except KeyboardInterrupt:  # the runner already said where the records are and how to resume
        return INTERRUPTED
    print(summary)
    if args.tournament and summary.complete:
        return _write_tournament(Path(args.out), Path(args.tournament), allow_partial=False, regrade=False, fmt="parquet",
                                 split=split_proportions(PAPER_SPLIT_SPEC), split_seed=0)
    if not summary.complete:
        print("incomplete: rerun the same command to retry the missing pairs (exit status 3)")
        return 3
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from routing_gym.collect.config import config_from_dict
    from routing_gym.collect.shards import resolve_backend_factory
    from routing_gym.collect.sweep import run_sweep

    check_output_path(args.out)
    config = _load(args)
    if args.concurrency is not None:
        data = config.to_dict()
        try:
            data["sweep"]["concurrency"] = [int(n) for n in args.concurrency.split(",")]
        except ValueError:
            raise UsageError(f"--concurrency {args.concurrency!r}: expected whole numbers separated by commas, e.g. 1,2,4,8") from None
        config = config_from_dict(data, source=f"{config.source} with --concurrency")
    factory = resolve_backend_factory(args.backend_factory)
    try:
        summary = run_sweep(config, Path(args.out), progress=False if args.no_progress else None, data_dir=args.data_dir,
                            backends=factory(config) if factory else None)
    except KeyboardInterrupt:  # the sweep already said where the records are and how to resume
        return INTERRUPTED
    print(summary)
    if not summary.complete:
        print(f"incomplete: rerun the same command to send the missing requests (exit status {INCOMPLETE})")
        return INCOMPLETE
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from routing_gym.collect.runner import run_status

    status = run_status(Path(args.out))
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"{status['name']}: {status['done_pairs']}/{status['total_pairs']} pairs "
          f"({status['questions']} questions x {status['models']} models), {status['net_joules']:,.1f} J net, "
          f"meter {', '.join(status['meters']) or 'none yet'}")
    for model, row in status["per_model"].items():
        print(f"  {model:30s} {row['done']:6d}/{status['questions']} done, {row['failed_records']} failed attempts recorded")
    for shard, row in status["per_shard"].items():
        print(f"  shard {shard} on {row['host']}: {row['done']}/{row['total']} pairs of {', '.join(row['models'])} done "
              f"({row['answered']} answered by this shard)")
    if status["ungraded"]:
        print(f"  {status['ungraded']} answer(s) await grading (graded again by to-tournament)")
    if status["duplicate_pairs"]:
        print(f"  WARNING: {status['duplicate_pairs']} pair(s) have more than one ok record")
    if status["torn_tail_bytes"]:
        print(f"  a torn last line ({status['torn_tail_bytes']} bytes) will be cut off on the next run")
    return 0


def cmd_to_tournament(args: argparse.Namespace) -> int:
    check_output_path(args.dest, "--dest")
    return _write_tournament(Path(args.out), Path(args.dest), args.allow_partial, args.regrade, args.format,
                             split=split_proportions(args.split), split_seed=args.split_seed)


def _write_tournament(out: Path, dest: Path, allow_partial: bool, regrade: bool, fmt: str,
                      split: dict[str, float] | None, split_seed: int) -> int:
    from routing_gym.collect.convert import records_to_tournament

    t = records_to_tournament(out, allow_partial=allow_partial, regrade=regrade)
    if split is not None:
        t = t.with_splits(seed=split_seed, proportions=split)
    t.save(dest, format=fmt)
    print(f"wrote {dest}: {t.n_queries} questions x {t.n_models} models, energy {t.card.provenance}, "
          f"hardware {t.card.hardware}, {describe_splits(t)}")
    return 0
