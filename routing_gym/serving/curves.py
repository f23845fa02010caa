"""The batch-curve table: time per output token, power and joules per request against batch size.

One row per (model, GPU configuration, batch size), the contract between the serving simulator
(this package) and the collector's concurrency sweep, which writes it; neither imports the
other, the column list below is the contract:

| column | type | meaning |
|---|---|---|
| ``model_id`` | str | the model as named in the tournament / collector config |
| ``gpu`` | str | GPU kind (``H100 80GB HBM3``, ``A100-SXM4-40GB``, or the NVML name) |
| ``n_gpus`` | int | GPUs the replica spans |
| ``batch_size`` | int >= 1 | requests in flight together |
| ``time_per_output_token_s`` | float > 0 | mean time per output token seen by one request |
| ``power_w`` | float > 0 | mean board power during the steady part (gross, all GPUs) |
| ``energy_per_request_j`` | float > 0 | energy attributed to one request (gross) |
| ``output_tokens_mean`` | float > 0 | mean output tokens per request in that measurement |
| ``provenance`` | ``measured`` / ``derived`` | measured by NVML/Zeus, or computed from a law |
| ``source`` | str | file path or collector run id |
| ``idle_power_w`` | float, optional | the replica's idle power if measured |

:func:`read_batch_curves` reads a CSV or JSONL file and raises :class:`BatchCurveError` naming
the file, row and column of a missing column or a bad value. :func:`mlenergy_batch_curves`
builds the same table from ML.ENERGY v2's files under the data directory. ML.ENERGY's
``batch_size`` here is the run's *average* batch (``Avg BS (reqs)``, rounded), not its maximum:
what the server actually held in flight (the two agree within 1 % for pipeline depth 1; with
two pipeline stages the server holds two micro-batches, twice the maximum).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.sources.energy_model import GPU, load_mlenergy

COLUMNS = ("model_id", "gpu", "n_gpus", "batch_size", "time_per_output_token_s", "power_w",
           "energy_per_request_j", "output_tokens_mean", "provenance", "source")
OPTIONAL = ("idle_power_w",)
PROVENANCES = ("measured", "derived")
_POSITIVE = ("time_per_output_token_s", "power_w", "energy_per_request_j", "output_tokens_mean")


class BatchCurveError(RoutingGymError):
    """A batch-curve table with a missing column or a bad value (file, row and column named)."""


def read_batch_curves(path: str | os.PathLike) -> pd.DataFrame:
    """A batch-curve table from a ``.csv`` or ``.jsonl`` file, validated row by row."""
    path = Path(path)
    if not path.is_file():
        raise BatchCurveError(f"{path}: no such batch-curve file")
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise BatchCurveError(f"{path}: row {number}: not JSON ({exc})") from None
        table = pd.DataFrame(rows)
    elif path.suffix == ".csv":
        table = pd.read_csv(path, dtype={"model_id": str, "gpu": str, "provenance": str, "source": str})
    else:
        raise BatchCurveError(f"{path}: a batch-curve table is .csv or .jsonl, got {path.suffix!r}")
    return validate_batch_curves(table, str(path))


def validate_batch_curves(table: pd.DataFrame, where: str = "batch-curve table") -> pd.DataFrame:
    """``table`` with typed columns; a missing column or bad value raises naming ``where``, the
    row (1-based, as in the file) and the column."""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise BatchCurveError(f"{where}: missing column(s) {', '.join(missing)} (a batch-curve table has "
                              f"{', '.join(COLUMNS)}; optional {', '.join(OPTIONAL)})")
    out = table.copy()
    if "idle_power_w" not in out:
        out["idle_power_w"] = math.nan
    for i, row in enumerate(out.itertuples(index=False), start=1):
        record = row._asdict()
        for column in ("model_id", "gpu", "source"):
            if not isinstance(record[column], str) or not record[column].strip():
                raise BatchCurveError(f"{where}: row {i}, column {column}: a non-empty string, got {record[column]!r}")
        if record["provenance"] not in PROVENANCES:
            raise BatchCurveError(f"{where}: row {i}, column provenance: one of {PROVENANCES}, got {record['provenance']!r}")
        for column in ("n_gpus", "batch_size"):
            value = _number(record[column], where, i, column)
            if value < 1 or value != int(value):
                raise BatchCurveError(f"{where}: row {i}, column {column}: an integer >= 1, got {record[column]!r}")
        for column in _POSITIVE:
            if not _number(record[column], where, i, column) > 0:
                raise BatchCurveError(f"{where}: row {i}, column {column}: a number > 0, got {record[column]!r}")
        idle = record["idle_power_w"]
        if idle is not None and idle == idle and idle != "" and not _number(idle, where, i, "idle_power_w") > 0:
            raise BatchCurveError(f"{where}: row {i}, column idle_power_w: empty or a number > 0, got {idle!r}")
    out["idle_power_w"] = pd.to_numeric(out["idle_power_w"].replace("", math.nan))
    for column in ("n_gpus", "batch_size"):
        out[column] = out[column].astype(int)
    for column in _POSITIVE:
        out[column] = out[column].astype(float)
    duplicated = out.duplicated(["model_id", "gpu", "n_gpus", "batch_size"], keep=False)
    if duplicated.any():
        i = int(duplicated.to_numpy().argmax()) + 1
        raise BatchCurveError(f"{where}: row {i}: (model_id, gpu, n_gpus, batch_size) appears more than once")
    return out[[*COLUMNS, *OPTIONAL]].reset_index(drop=True)


def _number(value: object, where: str, row: int, column: str) -> float:
    if isinstance(value, bool):
        raise BatchCurveError(f"{where}: row {row}, column {column}: a number, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BatchCurveError(f"{where}: row {row}, column {column}: a number, got {value!r}") from None
    if math.isnan(number):
        raise BatchCurveError(f"{where}: row {row}, column {column}: a number, got an empty value")
    return number


def mlenergy_batch_curves(data_dir: str | os.PathLike | None = None, gpu: str = GPU, task: str = "chat") -> pd.DataFrame:
    """ML.ENERGY v2's ``task`` runs on ``gpu`` as a batch-curve table (every configuration)."""
    runs = load_mlenergy(data_dir, task=task, gpu=gpu)
    table = pd.DataFrame({
        "model_id": runs["model"],
        "gpu": gpu,
        "n_gpus": runs["n_gpus"].astype(int),
        "batch_size": runs["avg_batch"].round().clip(lower=1).astype(int),
        "time_per_output_token_s": runs["tpot_s"],
        # board power of the whole replica: J per token x tokens per second
        "power_w": runs["joules_per_token"] * runs["tokens_per_s"],
        "energy_per_request_j": runs["energy_j"],
        "output_tokens_mean": runs["output_tokens"],
        "provenance": "measured",
        "source": runs["file"],
        "idle_power_w": math.nan,
    })
    # two runs of one configuration can round to the same average batch: keep the larger maximum
    return validate_batch_curves(table.drop_duplicates(["model_id", "gpu", "n_gpus", "batch_size"], keep="last"),
                                 f"ML.ENERGY {task}/{gpu}")


def mlenergy_tables(data_dir: str | os.PathLike | None = None, gpu: str = GPU) -> pd.DataFrame:
    """The chat task's batch-curve table plus the code task's rows of models measured only there
    (``google/codegemma-7b``)."""
    chat = mlenergy_batch_curves(data_dir, gpu, "chat")
    code = mlenergy_batch_curves(data_dir, gpu, "code")
    return pd.concat([chat, code[~code["model_id"].isin(set(chat["model_id"]))]], ignore_index=True)
