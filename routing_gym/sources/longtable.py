"""A researcher's own outcome logs as a tournament: the long table (``routing-gym data import``).

A long table has one row per (question, model), as CSV, JSONL or Parquet (by file suffix):

========================  ========  ====================================================
column                    required  meaning
========================  ========  ====================================================
``query_id``              yes       question id (the same on every model's row)
``prompt``                yes       question text the router sees
``benchmark``             yes       question set / task
``model_id``              yes       answer model
``correct``               yes       ``true``/``false``, 0/1, or a score in [0, 1]
``reference``             no        reference answer
``split``                 no        split name (train/test); kept as given
``input_tokens``          no        prompt tokens
``output_tokens``         no        generated tokens
``latency_s``             no        seconds
``energy_j``              no        joules (as logged: ``--energy-provenance`` says what it is)
``mean_power_w``          no        watts; energy / latency when absent
``output_text``           no        the model's answer
========================  ========  ====================================================

Other names are mapped with :class:`ColumnMap` (``--column correct=score`` or a config file).
Where energy (or latency) is missing it is *derived* from the token counts with an energy model
of :mod:`routing_gym.sources.energy_model` and a :class:`ModelSpec` per model
(``--model-spec id=PARAMS_B[,ACTIVE_B]``), and such models are labelled ``derived``; where the
tokens are missing too the import refuses and says what to add. Every problem is one
:class:`~routing_gym.errors.RoutingGymError` line naming the file, row (data rows from 1) and
column. :func:`write_tournament_atomically` writes into a temporary sibling directory and renames
it, so a failed import never leaves a half-written tournament. :func:`export_long_table` writes a
tournament back as a long table (the import's inverse for the outcome arrays).
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.sources.energy_model import (
    ModelSpec,
    card_energy_fit,
    derive_energy_profiles,
    parse_energy_model,
    serving_fields,
)
from routing_gym.tournament import DataCard, Tournament
from routing_gym.tournament.schema import ENERGY_PROVENANCES

REQUIRED = ("query_id", "prompt", "benchmark", "model_id", "correct")
OPTIONAL = ("reference", "split", "input_tokens", "output_tokens", "latency_s", "energy_j", "mean_power_w",
            "output_text")
QUESTION_FIELDS = ("prompt", "benchmark", "reference", "split")  # must agree on every row of a question
NUMERIC = ("input_tokens", "output_tokens", "latency_s", "energy_j", "mean_power_w")
FORMATS = (".csv", ".jsonl", ".parquet")
TRUE_WORDS = {"true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0, "correct": 1.0, "wrong": 0.0}


@dataclass(frozen=True)
class ColumnMap:
    """Canonical column name -> the name in the file (identity where not given)."""

    names: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, pairs: list[str] | None) -> ColumnMap:
        """``["correct=score", "query_id=doc_id"]`` (the ``--column`` flags)."""
        names = {}
        for pair in pairs or []:
            canonical, sep, theirs = pair.partition("=")
            if not sep or not theirs.strip():
                raise UsageError(f"--column {pair!r}: expected CANONICAL=THEIRS, e.g. correct=score")
            names[canonical.strip()] = theirs.strip()
        return cls(names).checked()

    def checked(self) -> ColumnMap:
        unknown = sorted(set(self.names) - set(REQUIRED + OPTIONAL))
        if unknown:
            raise UsageError(f"column mapping: unknown column(s) {unknown}; known: {list(REQUIRED + OPTIONAL)}")
        return self

    def source(self, canonical: str) -> str:
        return self.names.get(canonical, canonical)


# ``--model-spec`` keys (and a config file's ``model_specs`` mapping keys) -> ModelSpec fields
SPEC_KEYS = {"params_b": "params_b", "active_b": "active_params_b", "active_params_b": "active_params_b",
             "id": "hf_id", "hf_id": "hf_id", "precision": "precision", "gpus": "n_gpus", "n_gpus": "n_gpus",
             "measured": "mlenergy_id", "mlenergy_id": "mlenergy_id", "arch": "same_architecture_as",
             "same_architecture_as": "same_architecture_as", "family": "family", "serving_note": "serving_note"}
SPEC_SYNTAX = ("MODEL=[PARAMS_B[,ACTIVE_B]][,id=PUBLIC_ID][,precision=bf16|fp8|int4][,gpus=N] (billions, > 0), "
               "e.g. mixtral=46.7,12.9 or llama-405b-turbo=405.9,id=meta-llama/Meta-Llama-3.1-405B-Instruct,precision=fp8,gpus=8")


def model_spec_from_fields(model_id: str, fields: Mapping[str, Any], where: str) -> ModelSpec:
    """A :class:`ModelSpec` from ``--model-spec`` / config keys (:data:`SPEC_KEYS`). Parameters may be left
    out for a model whose ML.ENERGY measurement is found by id or name (they are then its)."""
    unknown = sorted(set(fields) - set(SPEC_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {unknown}; known: {sorted(SPEC_KEYS)}")
    values: dict[str, Any] = {"hf_id": model_id, "family": "", "params_b": float("nan")}
    for key, value in fields.items():
        name = SPEC_KEYS[key]
        try:
            if name in ("params_b", "active_params_b"):
                value = float(value)
                if not value > 0:
                    raise ValueError
            elif name == "n_gpus":
                value = int(value)
            else:
                value = str(value).strip()
        except (TypeError, ValueError):
            raise UsageError(f"{where}: {key}={value!r} is not valid; expected {SPEC_SYNTAX}") from None
        values[name] = value
    return ModelSpec(**values)


def parse_model_spec(text: str) -> tuple[str, ModelSpec]:
    """``"my-model=7.6"``, ``"my-moe=46.7,12.9"`` (billions of total, active parameters), then any
    ``key=value`` of :data:`SPEC_KEYS`: ``"turbo=405.9,id=meta-llama/...,precision=fp8,gpus=8"``."""
    model_id, sep, rest = text.partition("=")
    where = f"--model-spec {text!r}"
    if not sep or not model_id.strip() or not rest.strip():
        raise UsageError(f"{where}: expected {SPEC_SYNTAX}")
    fields: dict[str, Any] = {}
    numbers = []
    for part in (p.strip() for p in rest.split(",")):
        key, is_key, value = part.partition("=")
        if is_key:
            fields[key.strip()] = value
        elif fields:  # a bare number after key=value pairs is ambiguous
            raise UsageError(f"{where}: numbers come first; expected {SPEC_SYNTAX}")
        else:
            numbers.append(part)
    if len(numbers) > 2:
        raise UsageError(f"{where}: at most two numbers (PARAMS_B, ACTIVE_B); expected {SPEC_SYNTAX}")
    fields.update(zip(("params_b", "active_b"), numbers))
    return model_id.strip(), model_spec_from_fields(model_id.strip(), fields, where)


def config_model_spec(model_id: str, value: Any, where: str) -> ModelSpec:
    """A config file's ``model_specs`` entry: ``7.6``, ``[46.7, 12.9]`` or a mapping of :data:`SPEC_KEYS`."""
    if isinstance(value, Mapping):
        return model_spec_from_fields(model_id, value, f"{where}, model_specs.{model_id}")
    numbers = value if isinstance(value, list) else [value]
    if not 1 <= len(numbers) <= 2:
        raise UsageError(f"{where}, model_specs.{model_id}: expected PARAMS_B, [PARAMS_B, ACTIVE_B] or a mapping")
    return model_spec_from_fields(model_id, dict(zip(("params_b", "active_b"), numbers)), f"{where}, model_specs.{model_id}")


def read_long_table(path: str | os.PathLike, encoding: str = "utf-8") -> pd.DataFrame:
    """CSV, JSONL or Parquet by suffix (a text file in ``encoding``); errors name the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise RoutingGymError(f"{path}: unknown long-table format {suffix!r} (use {', '.join(FORMATS)})")
    if not path.is_file():
        raise RoutingGymError(f"{path}: no such file")
    if suffix in (".csv", ".jsonl"):
        _check_encoding(path, encoding)
    try:
        if suffix == ".csv":
            _check_field_counts(path, encoding)
            # ids stay text ("007"); numbers are parsed per column below; the first column is never an index
            return pd.read_csv(path, dtype=str, index_col=False, encoding=encoding)
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False, precise_float=True, encoding=encoding)
        return pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise RoutingGymError(f"{path}: cannot read as {suffix[1:]} ({exc})") from None


def _check_encoding(path: Path, encoding: str) -> None:
    """The whole file decodes as ``encoding``; else an error naming the line and byte, and the two ways out."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise RoutingGymError(f"{path}: unknown encoding {encoding!r}") from None
    data = path.read_bytes()
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RoutingGymError(
            f"{path}, line {line}: byte {data[exc.start:exc.start + 1]!r} is not valid {encoding} ({exc.reason}). "
            f"Re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 IN > OUT), or name its encoding: "
            f"--encoding latin-1 (import_long_table(..., encoding='latin-1'))"
        ) from None


def _check_field_counts(path: Path, encoding: str = "utf-8") -> None:
    """Every CSV row has the header's number of fields. pandas would take one extra field on the first
    row as an index column and shift every value one column along, blaming the wrong column."""
    import csv

    with path.open(newline="", encoding=encoding) as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            return
        for row, fields in enumerate(rows, start=1):
            if fields and len(fields) != len(header):
                raise RoutingGymError(f"{path}, row {row}: {len(fields)} fields, but the header has {len(header)} "
                                      f"({', '.join(header)}); a value with a comma needs quotes")


def _correctness(raw: pd.Series, where: str, column: str) -> np.ndarray:
    if raw.dtype == bool:
        return raw.to_numpy(dtype=float)
    words = raw.map(lambda v: TRUE_WORDS.get(v.strip().lower(), v) if isinstance(v, str) else v)
    values = pd.to_numeric(words, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 1))
    if len(bad):
        row = int(bad[0])
        raise RoutingGymError(f"{where}, row {row + 1}, column {column!r}: {raw.iloc[row]!r} is not true/false or a "
                              f"score in [0, 1]" + (f" ({len(bad)} rows in all)" if len(bad) > 1 else ""))
    return values


def _numbers(raw: pd.Series, where: str, column: str) -> np.ndarray:
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero((raw.notna().to_numpy() & np.isnan(values)) | (values < 0) | np.isinf(values))
    if len(bad):
        row = int(bad[0])
        raise RoutingGymError(f"{where}, row {row + 1}, column {column!r}: {raw.iloc[row]!r} is not a non-negative number")
    return values


def _check_complete(table: pd.DataFrame, where: str, cols: ColumnMap) -> None:
    """Every (question, model) pair exactly once, and question fields equal on every row."""
    pair = table["query_id"] + "\x1f" + table["model_id"]
    dup = pair.duplicated(keep="first").to_numpy()
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((pair == pair.iloc[row]).to_numpy())[0])
        raise RoutingGymError(f"{where}, row {row + 1}: duplicate (question {table['query_id'].iloc[row]!r}, model "
                              f"{table['model_id'].iloc[row]!r}), first at row {first + 1}")
    questions = table["query_id"].unique()
    for model, group in table.groupby("model_id", sort=True):
        if len(group) < len(questions):
            missing = sorted(set(questions) - set(group["query_id"]))
            raise RoutingGymError(f"{where}: model {model!r} has no row for {len(missing)} of {len(questions)} questions "
                                  f"(e.g. {missing[:3]}); every model must answer every question")
    for name in QUESTION_FIELDS:
        if name not in table:
            continue
        values = table[name].fillna("").astype(str)
        differs = values.groupby(table["query_id"]).transform("nunique").to_numpy() > 1
        if differs.any():
            row = int(np.flatnonzero(differs)[0])
            raise RoutingGymError(f"{where}, row {row + 1}, column {cols.source(name)!r}: question "
                                  f"{table['query_id'].iloc[row]!r} has different {name} values on different rows")


def long_table_to_tournament(
    table: pd.DataFrame,
    where: str = "<table>",
    columns: ColumnMap | None = None,
    *,
    energy_model: str | None = None,
    model_specs: Mapping[str, ModelSpec] | None = None,
    data_dir: str | os.PathLike | None = None,
    energy_provenance: str = "measured",
    name: str = "imported",
    licence: str = "unknown (set with --licence)",
) -> Tournament:
    """Validate a long table and build the tournament; every problem raises one line naming
    ``where``, the row and the column. See the module docstring for the columns."""
    cols = (columns or ColumnMap()).checked()
    if energy_provenance not in ENERGY_PROVENANCES:
        raise RoutingGymError(f"--energy-provenance {energy_provenance!r}: choose one of {', '.join(ENERGY_PROVENANCES)}")
    missing = [c for c in REQUIRED if cols.source(c) not in table.columns]
    if missing:
        named = ", ".join(f"{c!r}" + (f" (mapped to {cols.source(c)!r})" if cols.source(c) != c else "") for c in missing)
        raise RoutingGymError(f"{where}: missing required column {named}; columns present: {list(table.columns)}; "
                              "map another name with --column CANONICAL=THEIRS")
    if table.empty:
        raise RoutingGymError(f"{where}: no rows")
    t = pd.DataFrame({c: table[cols.source(c)] for c in REQUIRED + OPTIONAL if cols.source(c) in table.columns})
    for c in ("query_id", "model_id", "prompt", "benchmark"):
        empty = (t[c].isna() | (t[c].astype(str).str.strip() == "")).to_numpy()
        if empty.any():
            raise RoutingGymError(f"{where}, row {int(np.flatnonzero(empty)[0]) + 1}, column {cols.source(c)!r}: empty")
        t[c] = t[c].astype(str)
    t["correct"] = _correctness(t["correct"], where, cols.source("correct"))
    for c in NUMERIC:
        t[c] = _numbers(t[c], where, cols.source(c)) if c in t else np.nan
    _check_complete(t, where, cols)

    models = list(dict.fromkeys(t["model_id"]))
    provenance = {m: energy_provenance for m in models}
    sources = {m: "supplied in the long table" for m in models}
    serving: dict[str, dict[str, Any]] = {m: {} for m in models}
    specs = dict(model_specs or {})
    notes: list[str] = []
    extra: dict[str, Any] = {}
    no_energy = t["energy_j"].isna().to_numpy()
    derive = sorted(set(t.loc[no_energy, "model_id"]))
    if derive:
        info = _derive_costs(t, where, cols, derive, energy_model, specs, data_dir, provenance, sources, serving)
        notes += info["card_notes"]
        extra = {"energy_model": energy_model, "energy_fit": card_energy_fit(info)}
    no_latency = t["latency_s"].isna().to_numpy()
    if no_latency.any():
        # logged joules without seconds: latency is optional, so it is 0 (latency terms of a reward are then constant)
        unknown = sorted(set(t.loc[no_latency, "model_id"]))
        t.loc[no_latency, "latency_s"] = 0.0
        for m in unknown:
            serving[m]["latency_logged"] = False
        notes.append(f"latency not logged for {', '.join(unknown)}: latency_s and mean_power_w are 0 on those rows")
    power = t["mean_power_w"].to_numpy(dtype=float)
    latency = t["latency_s"].to_numpy(dtype=float)
    t["mean_power_w"] = np.where(np.isnan(power), np.divide(t["energy_j"], latency, out=np.zeros(len(t)),
                                                             where=latency > 0), power)

    first = t.drop_duplicates("query_id")
    queries = pd.DataFrame({c: first[c] for c in ("query_id", "benchmark", "prompt", *[c for c in ("reference", "split")
                                                                                      if c in first])})
    model_rows = [{"model_id": m, "family": specs[m].family if m in specs else "",
                   "params_b": specs[m].params_b if m in specs else np.nan,
                   "serving": {**({"active_params_b": specs[m].active_b} if m in specs else {}), **serving[m]},
                   "energy_provenance": provenance[m], "energy_source": sources[m]} for m in models]
    kinds = set(provenance.values())
    card = DataCard(
        name=name, provenance=kinds.pop() if len(kinds) == 1 else "mixed",
        description=f"imported from the long table {where}: {len(queries)} questions x {len(models)} models",
        licence=licence, sources=[str(where)],
        notes=[f"energy of {m}: {sources[m]}" for m in models] + notes, extra=extra,
    )
    outcomes = t[["query_id", "model_id", "correct", "energy_j", "latency_s", "mean_power_w", "input_tokens",
                  "output_tokens", *(["output_text"] if "output_text" in t else [])]]
    return Tournament.from_records(queries, model_rows, outcomes, card, source=str(where))


def _derive_costs(t: pd.DataFrame, where: str, cols: ColumnMap, models: list[str], energy_model: str | None,
                  specs: dict[str, ModelSpec], data_dir, provenance: dict[str, str], sources: dict[str, str],
                  serving: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Fill missing energy (and latency) of ``models`` from their token counts, in place, through the
    builders' pricing path (:func:`derive_energy_profiles`: a measured model by its measurement);
    ``specs`` gets each model's resolved spec, ``serving`` what a built tournament records (the
    alternative laws included). Returns the energy model's info."""
    if energy_model is None:
        raise RoutingGymError(f"{where}: column 'energy_j' missing for model(s) {models}: give it "
                              "(--column energy_j=NAME) or derive it from tokens with --energy-model batched "
                              "and --model-spec MODEL=PARAMS_B per model not measured by ML.ENERGY")
    parse_energy_model(energy_model)
    rows = t["model_id"].isin(models).to_numpy()
    no_tokens = rows & t["output_tokens"].isna().to_numpy()
    if no_tokens.any():
        row = int(np.flatnonzero(no_tokens)[0])
        raise RoutingGymError(f"{where}, row {row + 1}: energy must be derived for model {t['model_id'].iloc[row]!r} but "
                              f"output_tokens is missing: add an output-token column (--column output_tokens=NAME) "
                              "or an energy column (--column energy_j=NAME)")
    try:
        profiles, info = derive_energy_profiles(energy_model, models, data_dir, specs=specs)
    except RoutingGymError as exc:
        raise RoutingGymError(f"{where}: {exc}") from None
    for m in models:
        sel = (t["model_id"] == m).to_numpy()
        inp = np.nan_to_num(t.loc[sel, "input_tokens"].to_numpy(dtype=float))
        out = t.loc[sel, "output_tokens"].to_numpy(dtype=float)
        for column, values in (("energy_j", profiles[m].energy_j(inp, out)), ("latency_s", profiles[m].latency_s(inp, out))):
            current = t.loc[sel, column].to_numpy(dtype=float)
            t.loc[sel, column] = np.where(np.isnan(current), values, current)
        specs[m] = info["specs"][m]
        serving[m] = serving_fields(m, specs[m], profiles[m], info)
        provenance[m] = info["provenance"]
        sources[m] = f"DERIVED from tokens with energy model {energy_model!r}: {profiles[m].source}"
    return info


def import_long_table(
    path: str | os.PathLike, columns: ColumnMap | None = None, encoding: str = "utf-8", **options: Any
) -> Tournament:
    """Read ``path`` (a CSV or JSONL in ``encoding``) and build the tournament (options as
    :func:`long_table_to_tournament`)."""
    return long_table_to_tournament(read_long_table(path, encoding), str(path), columns, **options)


def write_tournament_atomically(tournament: Tournament, out: str | os.PathLike, format: str = "parquet",
                                overwrite: bool = False) -> Path:
    """Save into a temporary sibling directory, then rename it to ``out``: a failure leaves nothing."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise RoutingGymError(f"{out}: already exists (pass --overwrite to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.importing-", dir=out.parent))
    old = out.parent / f".{out.name}.replaced-{staging.name.rsplit('-', 1)[-1]}"
    try:
        tournament.save(staging, format=format)
        if out.exists():
            out.rename(old)
        try:
            staging.rename(out)
        except OSError:
            if old.exists():
                old.rename(out)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return out


def export_long_table(tournament: Tournament, path: str | os.PathLike) -> Path:
    """One row per (question, model) with every column the import reads; format by suffix."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise RoutingGymError(f"{path}: unknown long-table format {path.suffix!r} (use {', '.join(FORMATS)})")
    k = tournament.n_models
    long = tournament.to_long()
    for column in ("benchmark", "prompt", "reference", "split"):
        long[column] = np.repeat(tournament.queries[column].to_numpy(), k)
    order = ["query_id", "prompt", "benchmark", "reference", "split", "model_id", "correct", "energy_j", "latency_s",
             "mean_power_w", "input_tokens", "output_tokens", *(["output_text"] if "output_text" in long else [])]
    long = long[order]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        long.to_csv(path, index=False)
    elif path.suffix.lower() == ".jsonl":  # Python's float repr: exact round trip (pandas' writer rounds)
        records = long.astype(object).where(long.notna(), None).to_dict("records")
        with path.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        long.to_parquet(path, index=False)
    return path
