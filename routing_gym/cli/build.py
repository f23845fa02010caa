"""``routing-gym data build zeroeval-math|llmrouter|mmlu-pro``: real-data tournaments from the data directory."""

from __future__ import annotations

import argparse
import time

from routing_gym.cli import check_output_path

BUILDS = ("zeroeval-math", "llmrouter", "mmlu-pro")


def add_commands(cli) -> None:
    data = cli.group("data")
    build = data.add_parser(
        "build",
        help="build a tournament from real public data (ZeroEval outputs, LLMRouter scores or MMLU-Pro outputs; energy derived)",
        description="Build a tournament from the data directory (--data-dir or ROUTING_GYM_DATA_DIR) into --out. "
        "With --download the needed files are first fetched from their public repositories at pinned commits "
        "and verified against MANIFEST.sha256 checksums.",
    )
    build.add_argument("source", choices=BUILDS)
    build.add_argument("--data-dir", default=None, help="data directory (default: ROUTING_GYM_DATA_DIR)")
    build.add_argument("--out", required=True, help="output tournament directory")
    build.add_argument("--download", action="store_true", help="fetch the needed files into --data-dir first")
    build.add_argument("--download-base", default=None,
                       help="base URL laid out as {base}/{owner}/{repo}/{commit}/{path} "
                            "(default: ROUTING_GYM_DOWNLOAD_BASE or raw.githubusercontent.com)")
    build.add_argument("--models", nargs="+", default=None, help="zeroeval-math, mmlu-pro: model pool (default: "
                       "open-weight models with complete runs on both benchmarks; mmlu-pro: all 26)")
    build.add_argument("--limit", type=int, default=None, help="zeroeval-math, mmlu-pro: first N questions (per "
                       "benchmark for zeroeval-math) only")
    build.add_argument("--processes", type=int, default=None, help="grading worker processes (default: all CPUs)")
    build.add_argument("--no-text", action="store_true", help="zeroeval-math: do not store output texts")
    build.add_argument("--with-text", action="store_true", help="mmlu-pro: also store the 312k answer texts (large)")
    build.add_argument("--seed", type=int, default=0, help="zeroeval-math, mmlu-pro: split seed")
    build.add_argument("--energy-model", default="batched", metavar="batched|law|params|batch1|measured-arch:TABLE",
                       help="how per-query joules are derived (routing_gym/sources/energy_model.py): 'batched' "
                            "(ML.ENERGY at batch 128 for measured models and architectures, the energy law otherwise; "
                            "default), 'law' (the energy law for every model), 'params' (the previous method: a power "
                            "law in the parameter count for unmeasured models), 'batch1' (extrapolated to one request "
                            "at a time), 'measured-arch:TABLE' (a calibration table of "
                            "experiments/measure_architectures.py); other than batched, the tournament name gets the "
                            "suffix -law / -params / -batch1 / -measured-arch")
    build.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from routing_gym.errors import RoutingGymError, UsageError
    from routing_gym.paths import DATA_DIR_ENV, cache_dir, data_dir

    check_output_path(args.out)
    start = time.monotonic()
    if args.download and args.source == "mmlu-pro":
        raise RoutingGymError("--download does not cover mmlu-pro yet: put TIGER-AI-Lab/MMLU-Pro's eval_results zips "
                              "in <data-dir>/outcomes/mmlu-pro (see the data README)")
    if args.download:
        from routing_gym.sources.download import download

        # download into --data-dir, else ROUTING_GYM_DATA_DIR, else the cache (created if needed)
        root = Path(args.data_dir or os.environ.get(DATA_DIR_ENV) or cache_dir() / "data")
        root.mkdir(parents=True, exist_ok=True)
        files = download(args.source, root, args.download_base)
        print(f"downloaded and verified {len(files)} files into {root} ({time.monotonic() - start:.1f} s)")
    else:
        root = data_dir(args.data_dir)
    if args.source == "zeroeval-math":
        from routing_gym.sources.zeroeval import build_zeroeval_tournament, compare_with_published

        tournament, report = build_zeroeval_tournament(
            root, args.models, limit=args.limit, processes=args.processes, keep_text=not args.no_text, seed=args.seed,
            energy_model=args.energy_model,
        )
    elif args.source == "mmlu-pro":
        from routing_gym.sources.mmlu_pro import accuracy_table, build_mmlu_pro_tournament

        tournament, report = build_mmlu_pro_tournament(root, args.models, energy_model=args.energy_model, limit=args.limit,
                                                       keep_text=args.with_text, seed=args.seed)
    else:
        from routing_gym.sources.llmrouter import build_llmrouter_tournament

        if args.models or args.limit:
            raise UsageError("--models and --limit apply to zeroeval-math only")
        tournament, report = build_llmrouter_tournament(root, energy_model=args.energy_model)
    tournament.save(args.out)
    report.save(args.out)
    print(f"built {tournament.card.name}: {tournament.n_queries} queries x {tournament.n_models} models "
          f"in {time.monotonic() - start:.1f} s -> {args.out}")
    for key, value in report.timings.items():
        print(f"  {key}: {value:.1f}")
    for model, reason in report.excluded_models:
        print(f"  excluded {model}: {reason}")
    if report.dropped:
        print(f"  dropped {len(report.dropped)} (query, model) pairs; every one with its reason in "
              f"{args.out}/build_report.json, e.g. {report.dropped[0]}")
    if args.source == "zeroeval-math":
        table = compare_with_published(report)
        print("\nregraded accuracy vs ZeroEval's published accuracy (%):")
        print(table.to_string(index=False))
    if args.source == "mmlu-pro":
        print("\naccuracy (%): the tournament and the published extraction (unextracted = wrong / = a random guess; "
              "the repository's compute_accuracy.py rules: experiments/mmlu_pro_study.py):")
        print(accuracy_table(report, tournament, repository_rules=False).to_string(index=False))
    return 0
