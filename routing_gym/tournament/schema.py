"""Columns of the three tournament tables, with units, shared by validation, I/O and docs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "str", "float", "bool", "json"
    required: bool
    description: str
    unit: str = ""


QUERY_COLUMNS = (
    Column("query_id", "str", True, "unique id of the question"),
    Column("benchmark", "str", True, "question set the question comes from"),
    Column("prompt", "str", True, "question text shown to the router"),
    Column("reference", "str", False, "reference answer used by the grader"),
    Column("split", "str", False, "split name (train/test/...); empty when not split"),
    Column("difficulty", "float", False, "optional difficulty in [0, 1]; NaN when unknown"),
    Column("metadata", "json", False, "free-form metadata (JSON object)"),
)

MODEL_COLUMNS = (
    Column("model_id", "str", True, "unique id of the answer model"),
    Column("family", "str", False, "model family, e.g. qwen2.5"),
    Column("params_b", "float", False, "parameters", "billions"),
    Column("reasoning", "bool", False, "True for reasoning (thinking) models"),
    Column("serving", "json", False, "serving details: backend, quantisation, GPU, digest, ..."),
    Column("energy_provenance", "str", True, "measured | derived | synthetic"),
    Column("energy_source", "str", False, "where this model's energy figures come from"),
)

OUTCOME_COLUMNS = (
    Column("query_id", "str", True, "question id (in the queries table)"),
    Column("model_id", "str", True, "model id (in the models table)"),
    Column("correct", "float", True, "correctness in [0, 1] (fractional = pass rate)"),
    Column("energy_j", "float", True, "GPU energy of the answer (idle-subtracted when measured)", "J"),
    Column("latency_s", "float", True, "wall-clock time of the answer", "s"),
    Column("mean_power_w", "float", True, "power attributed to the answer (energy / latency): the GPUs' draw "
           "for one request at a time, a request's share of it in a batched server", "W"),
    Column("input_tokens", "float", False, "prompt tokens; NaN when unknown", "tokens"),
    Column("output_tokens", "float", False, "generated tokens; NaN when unknown", "tokens"),
    Column("output_text", "str", False, "the model's answer text"),
)

ENERGY_PROVENANCES = ("measured", "derived", "synthetic")

# Dense [N, K] arrays held in memory, in OUTCOME_COLUMNS order.
METRIC_ARRAYS = ("correct", "energy_j", "latency_s", "mean_power_w", "input_tokens", "output_tokens")

UNITS = {c.name: c.unit for c in OUTCOME_COLUMNS + MODEL_COLUMNS if c.unit}


def required(columns: tuple[Column, ...]) -> list[str]:
    return [c.name for c in columns if c.required]
