"""``routing-gym data info``, ``data validate``, ``data split``, ``data import`` and ``data export``."""

from __future__ import annotations

import argparse
import json
import time

from routing_gym.cli import (
    PAPER_SPLIT_SPEC,
    UsageError,
    add_split_arguments,
    check_output_path,
    describe_splits,
    split_proportions,
)


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
    split.add_argument("--name", default=None, help="tournament name (default: the --out folder's name; the input's "
                       "name when --out is the input directory)")
    split.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
    add_split_arguments(split)
    split.add_argument("--hold-out-benchmarks", default=None, metavar="B1,B2,...",
                       help="unseen benchmarks: every question of these (and every copy of one in another benchmark) "
                            "goes to the test split; the other benchmarks are split as without this option")
    split.set_defaults(func=cmd_split)
    add_import_export_commands(data)


def cmd_info(args: argparse.Namespace) -> int:
    from routing_gym.eval.core.summary import describe, side_by_side, summary_table
    from routing_gym.sources import resolve_tournament

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

    check_output_path(args.out)
    proportions = split_proportions(args.split)
    if proportions is None:
        raise UsageError("data split needs proportions (--split NAME=WEIGHT,...), not 'none'")
    from dataclasses import replace
    from pathlib import Path

    held_out = [b.strip() for b in (args.hold_out_benchmarks or "").split(",") if b.strip()]
    if args.hold_out_benchmarks is not None and not held_out:
        raise UsageError(f"--hold-out-benchmarks {args.hold_out_benchmarks!r}: expected benchmark names like B1,B2")
    source = resolve_tournament(args.tournament)
    tournament = source.with_splits(seed=args.split_seed, proportions=proportions, hold_out_benchmarks=held_out)
    # a copy written elsewhere is a new tournament: it takes the folder's name, as `data import` does
    in_place = Path(args.tournament).is_dir() and Path(args.out).resolve() == Path(args.tournament).resolve()
    name = args.name or (source.card.name if in_place else Path(args.out).name)
    if name != tournament.card.name:
        card = replace(tournament.card, name=name, notes=[*tournament.card.notes, f"split copy of {source.card.name}"])
        tournament = replace(tournament, card=card, source=name)
    tournament.save(args.out, format=args.format)
    from routing_gym.eval.core.summary import duplicates_line

    print(f"wrote {args.out}: {tournament.n_queries} questions x {tournament.n_models} models, {describe_splits(tournament)}")
    print(duplicates_line(tournament))
    return 0


def add_import_export_commands(data) -> None:
    """``data import`` (a long table of one's own logs -> a tournament) and ``data export`` (the inverse)."""
    imp = data.add_parser(
        "import", help="turn a long table (CSV/JSONL/Parquet, one row per question x model) into a tournament",
        description="Required columns: query_id, prompt, benchmark, model_id, correct (bool or a score in [0, 1]); "
                    "optional: reference, split, input_tokens, output_tokens, latency_s, energy_j, mean_power_w, "
                    "output_text. Where energy or latency is missing it is derived from the tokens with --energy-model "
                    "and --model-spec (labelled derived). The output is written to a temporary directory and renamed: "
                    "a failed import leaves nothing behind. Recipes for common harness logs: docs/importing.md.",
    )
    imp.add_argument("table", help="long table: .csv, .jsonl or .parquet")
    imp.add_argument("--out", required=True, help="tournament directory to write")
    imp.add_argument("--column", action="append", default=[], metavar="CANONICAL=THEIRS",
                     help="map a column name, e.g. --column correct=score (repeatable)")
    imp.add_argument("--config", default=None, help="YAML/JSON/TOML with 'columns' (a mapping), 'model_specs' "
                     "(model -> params_b, [params_b, active_b] or a mapping with params_b, active_b, id, precision, "
                     "gpus), 'energy_model', 'name', 'licence'")
    imp.add_argument("--energy-model", default=None, metavar="batched|batch1|measured-arch:TABLE",
                     help="derive missing energy/latency from tokens with this energy model (needs --data-dir data)")
    imp.add_argument("--model-spec", action="append", default=[],
                     metavar="MODEL=[PARAMS_B[,ACTIVE_B]][,id=PUBLIC_ID][,precision=P][,gpus=N]",
                     help="a model whose energy is derived: parameters (billions), public id (e.g. "
                          "google/gemma-2-9b-it), precision (bf16, fp8, int4) and GPU count as served (repeatable). "
                          "A model ML.ENERGY measured (by id, or by name where unambiguous) is priced by its "
                          "measurement and needs no parameters")
    imp.add_argument("--energy-provenance", default="measured", choices=("measured", "derived", "synthetic"),
                     help="what the table's own energy column is (default measured)")
    imp.add_argument("--data-dir", default=None, help="data directory for --energy-model (default: ROUTING_GYM_DATA_DIR)")
    imp.add_argument("--name", default=None, help="tournament name (default: the output folder's name)")
    imp.add_argument("--licence", default="unknown (set with --licence)", help="licence of the logged outcomes")
    imp.add_argument("--format", default="parquet", choices=("parquet", "jsonl"))
    imp.add_argument("--encoding", default="utf-8", help="text encoding of a CSV or JSONL table (default utf-8; "
                     "e.g. latin-1 for a spreadsheet's export)")
    imp.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    imp.set_defaults(func=cmd_import)

    exp = data.add_parser("export", help="write a tournament as a long table (.csv, .jsonl or .parquet)")
    exp.add_argument("tournament", help="directory or preset name")
    exp.add_argument("--out", required=True, help="long-table file (the format follows the suffix), or with "
                     "--format minari the dataset id (written under MINARI_DATASETS_PATH)")
    add_minari_arguments(exp)
    exp.set_defaults(func=cmd_export)


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from routing_gym.configfile import read_config_file
    from routing_gym.errors import RoutingGymError
    from routing_gym.sources.longtable import (
        ColumnMap,
        config_model_spec,
        import_long_table,
        parse_model_spec,
        write_tournament_atomically,
    )

    check_output_path(args.out)
    config = read_config_file(args.config, RoutingGymError, "import config") if args.config else {}
    if not isinstance(config, dict):
        raise RoutingGymError(f"{args.config}: expected a mapping with columns / model_specs / energy_model")
    mapping = dict(config.get("columns") or {})
    mapping.update(ColumnMap.parse(args.column).names)
    specs = {str(m): config_model_spec(str(m), v, str(args.config)) for m, v in (config.get("model_specs") or {}).items()}
    specs.update(parse_model_spec(text) for text in args.model_spec)
    out = Path(args.out)
    tournament = import_long_table(
        args.table, ColumnMap(mapping).checked(), encoding=args.encoding, energy_model=args.energy_model or config.get("energy_model"),
        model_specs=specs, data_dir=args.data_dir, energy_provenance=args.energy_provenance,
        name=args.name or config.get("name") or out.name, licence=config.get("licence", args.licence),
    )
    write_tournament_atomically(tournament, out, format=args.format, overwrite=args.overwrite)
    derived = tournament.models.loc[tournament.models["energy_provenance"] == "derived", "model_id"].tolist()
    no_latency = [m for m, s in zip(tournament.model_ids, tournament.models["serving"]) if s.get("latency_logged") is False]
    print(f"wrote {out}: {tournament.n_queries} questions x {tournament.n_models} models"
          + (f"; energy DERIVED for {', '.join(derived)}" if derived else "")
          + (f"; latency not logged for {', '.join(no_latency)} (latency and power set to 0)" if no_latency else ""))
    return 0


def add_minari_arguments(exp) -> None:
    """``data export --format minari``: a logged split as a Minari dataset (``eval/offline/dataset.py``)."""
    exp.add_argument("--format", default="table", choices=("table", "minari"),
                     help="table: a long table; minari: one-step episodes logged by --policy (the `offline` extra)")
    exp.add_argument("--policy", default="uniform", metavar="AGENT|uniform",
                     help="minari: the logging policy, uniform or a registered agent trained on the training split")
    exp.add_argument("--epsilon", type=float, default=0.2, help="minari: epsilon-greedy around the agent's routes (0: none)")
    exp.add_argument("--split", default="test", help="minari: the split logged (default test)")
    exp.add_argument("--seed", type=int, default=0, help="minari: seed of the agent and of the logged draws")
    exp.add_argument("--observation", default="dict", choices=("dict", "features"), help="minari: observations stored")


def cmd_export(args: argparse.Namespace) -> int:
    from routing_gym.sources import resolve_tournament

    if args.format == "minari":
        from routing_gym.eval.offline.dataset import export_minari  # checks the dataset id before any work

        dataset = export_minari(args.tournament, args.out, args.policy, args.split, args.seed, args.epsilon,
                                observation=args.observation)
        print(f"wrote Minari dataset {args.out}: {dataset.total_episodes} one-step episodes ({args.policy} logging)")
        return 0
    from routing_gym.sources.longtable import export_long_table

    check_output_path(args.out, directory=False)
    tournament = resolve_tournament(args.tournament)
    path = export_long_table(tournament, args.out)
    print(f"wrote {path}: {tournament.n_queries * tournament.n_models} rows ({tournament.n_queries} questions x "
          f"{tournament.n_models} models)")
    return 0
