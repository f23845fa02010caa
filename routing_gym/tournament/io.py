"""Tournaments on disk.

A tournament is a directory::

    card.json          data card (provenance, licence, units, hardware, split)
    CARD.md            the same card rendered for people
    queries.parquet    one row per question        (or queries.jsonl)
    models.parquet     one row per candidate model (or models.jsonl)
    outcomes.parquet   one row per (question, model) (or outcomes.jsonl)

Parquet is the default (pyarrow); JSONL is the interchange format for hand-made or exported
data. JSON-valued columns (``metadata``, ``serving``) are stored as JSON strings in Parquet.
This module reads and writes the tables and the card; ``Tournament.load`` / ``save`` (and
``load_tournament`` / ``save_tournament`` in ``tournament.py``) build and validate the
Tournament on top of it, naming the file, row (from 1) and column of each problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from routing_gym.errors import TournamentValidationError
from routing_gym.tournament.card import DataCard
from routing_gym.tournament.schema import MODEL_COLUMNS, QUERY_COLUMNS

TABLES = ("queries", "models", "outcomes")
JSON_COLUMNS = {c.name for c in QUERY_COLUMNS + MODEL_COLUMNS if c.kind == "json"}


def write_tables(path: str | os.PathLike, tables: dict[str, pd.DataFrame], card: DataCard, format: str = "parquet") -> Path:
    """Write the ``queries``, ``models`` and ``outcomes`` tables and the card into ``path``."""
    if format not in ("parquet", "jsonl"):
        raise ValueError(f"format must be 'parquet' or 'jsonl', got {format!r}")
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    for name in TABLES:  # never leave a stale table of the other format behind
        for ext in ("parquet", "jsonl"):
            (root / f"{name}.{ext}").unlink(missing_ok=True)
    for name in TABLES:
        frame = tables[name]
        file = root / f"{name}.{format}"
        if format == "parquet":
            frame = frame.copy()
            for column in JSON_COLUMNS & set(frame.columns):
                frame[column] = [json.dumps(v, sort_keys=True) for v in frame[column]]
            # Fixed writer settings so that regenerating a tournament gives identical bytes.
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), file, compression="zstd")
        else:
            frame.to_json(file, orient="records", lines=True, force_ascii=False)
    (root / "card.json").write_text(json.dumps(card.to_dict(), indent=2, sort_keys=True) + "\n")
    (root / "CARD.md").write_text(card.to_markdown())
    return root


def read_tables(path: str | os.PathLike) -> tuple[dict[str, pd.DataFrame], dict[str, str], DataCard]:
    """The three tables of a tournament directory, the file each came from, and its card."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"tournament directory {root} does not exist")
    card_file = root / "card.json"
    if not card_file.exists():
        raise TournamentValidationError([(str(card_file), None, None, "data card is missing")])
    try:
        card = DataCard.from_dict(json.loads(card_file.read_text()), source=str(card_file))
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise TournamentValidationError([(str(card_file), None, None, f"unreadable data card: {exc}")]) from exc
    frames, files = {}, {}
    for name in TABLES:
        frames[name], files[name] = _read_table(root, name)
    return frames, files, card


def _read_table(root: Path, name: str) -> tuple[pd.DataFrame, str]:
    parquet, jsonl = root / f"{name}.parquet", root / f"{name}.jsonl"
    if parquet.exists():
        file = parquet
        try:
            frame = pq.read_table(parquet).to_pandas()
        except (pa.ArrowException, OSError) as exc:
            raise TournamentValidationError([(str(parquet), None, None, f"unreadable Parquet file: {exc}")]) from exc
    elif jsonl.exists():
        file = jsonl
        frame = _read_jsonl(jsonl)
    else:
        raise TournamentValidationError([(str(root), None, None, f"table {name} is missing ({name}.parquet or {name}.jsonl)")])
    for column in JSON_COLUMNS & set(frame.columns):
        frame[column] = [_json_cell(v, str(file), row + 1, column) for row, v in enumerate(frame[column])]
    return frame, str(file)


def _read_jsonl(file: Path) -> pd.DataFrame:
    records, problems = [], []
    with open(file, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append((str(file), line_no, None, f"not valid JSON: {exc.msg}"))
                continue
            if not isinstance(record, dict):
                problems.append((str(file), line_no, None, "a record must be a JSON object"))
                continue
            records.append(record)
    if problems:
        raise TournamentValidationError(problems)
    return pd.DataFrame.from_records(records)


def _json_cell(value, file: str, row: int, column: str) -> dict:
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return {}
    try:
        parsed = json.loads(value)
    except (TypeError, json.JSONDecodeError) as exc:
        raise TournamentValidationError([(file, row, column, f"not a JSON object: {exc}")]) from exc
    if not isinstance(parsed, dict):
        raise TournamentValidationError([(file, row, column, "must be a JSON object")])
    return parsed
