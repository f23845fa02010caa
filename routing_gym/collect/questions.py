"""The questions of a run: sampled from the shared question sets or read from own files.

Each benchmark of the config is sampled independently with a generator seeded by
``(seed, benchmark name)``, so adding a benchmark never changes another one's sample. The
chosen questions are written to ``queries.jsonl`` in the run folder at the first start; a
resumed run reads that snapshot and never re-samples.

An own question file (``path:``) is JSONL with ``prompt`` (or ``question``), ``reference`` (or
``answer``), and optional ``query_id``, ``difficulty`` and ``metadata``.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from routing_gym.collect.config import BenchmarkSpec, CollectConfig
from routing_gym.collect.errors import CollectError, ConfigError

Grader = Callable[[str, Any, dict[str, Any]], Any]


def read_question_file(path: str | Path, benchmark: str) -> list[dict[str, Any]]:
    path = Path(path)
    rows: list[dict[str, Any]] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read questions ({exc.strerror or exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}: line {number}: not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: line {number}: expected a JSON object")
        prompt = raw.get("prompt", raw.get("question"))
        reference = raw.get("reference", raw.get("answer"))
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"{path}: line {number}, field 'prompt': missing or empty")
        if reference is None:
            raise ConfigError(f"{path}: line {number}, field 'reference': missing")
        metadata = raw.get("metadata", {})
        if not isinstance(metadata, dict):
            raise ConfigError(f"{path}: line {number}, field 'metadata': expected an object")
        rows.append(
            {
                "query_id": str(raw.get("query_id", f"{benchmark}/{number}")),
                "benchmark": benchmark,
                "prompt": prompt,
                "reference": reference if isinstance(reference, str) else json.dumps(reference),
                "difficulty": raw.get("difficulty"),
                "metadata": metadata,
            }
        )
    if not rows:
        raise ConfigError(f"{path}: no questions")
    return rows


def load_registered(name: str, data_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """All questions of a shared question set (``routing_gym.sources.benchmarks``), read from
    ``data_dir`` (default: ``ROUTING_GYM_DATA_DIR``)."""
    try:
        from routing_gym.sources import benchmarks as shared
    except ModuleNotFoundError as exc:
        if exc.name != "routing_gym.sources.benchmarks":
            raise
        raise ConfigError(
            f"benchmark {name!r}: the shared question sets are not available in this version; "
            "give the benchmark a 'path' to a JSONL question file"
        ) from exc
    frame = shared.load_benchmark(name, data_dir)
    rows = []
    for r in frame.to_dict(orient="records"):
        difficulty = r.get("difficulty")
        rows.append(
            {
                "query_id": str(r["query_id"]),
                "benchmark": name,
                "prompt": r["prompt"],
                "reference": str(r.get("reference", "")),
                "difficulty": None if difficulty is None or difficulty != difficulty else float(difficulty),
                "metadata": _plain(dict(r.get("metadata") or {})),
            }
        )
    return rows


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, NaN to None (the snapshot is strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def sample_questions(config: CollectConfig, data_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The run's questions, benchmark by benchmark in config order."""
    out: list[dict[str, Any]] = []
    for spec in config.benchmarks:
        rows = read_question_file(spec.path, spec.name) if spec.path else load_registered(spec.name, data_dir)
        if spec.n is not None:
            if spec.n > len(rows):
                raise ConfigError(f"{config.source}: benchmark {spec.name!r}: n={spec.n} but it has only {len(rows)} questions")
            rng = np.random.default_rng([config.seed, zlib.crc32(spec.name.encode())])
            keep = np.sort(rng.choice(len(rows), size=spec.n, replace=False))
            rows = [rows[i] for i in keep]
        out.extend(rows)
    seen: dict[str, str] = {}
    for row in out:
        if row["query_id"] in seen:
            raise ConfigError(
                f"{config.source}: query_id {row['query_id']!r} appears in {seen[row['query_id']]!r} and "
                f"{row['benchmark']!r}; query ids must be unique across benchmarks"
            )
        seen[row["query_id"]] = row["benchmark"]
    return out


def resolve_graders(config: CollectConfig, overrides: dict[str, Grader] | None = None) -> dict[str, Grader]:
    """A grading function per benchmark, checked before anything is measured.

    ``overrides`` maps a benchmark name to any callable ``(output, reference, metadata)``
    returning a score in [0, 1], a bool, or an object with a ``score`` attribute. Otherwise
    the shared grader registry (``routing_gym.grading.get_grader``) is used, by the
    benchmark's ``grader`` name or, by default, its name.
    """
    overrides = overrides or {}
    graders: dict[str, Grader] = {}
    for spec in config.benchmarks:
        if spec.name in overrides:
            graders[spec.name] = overrides[spec.name]
            continue
        graders[spec.name] = _registered_grader(spec, config.source)
    return graders


def _registered_grader(spec: BenchmarkSpec, source: str) -> Grader:
    from routing_gym.errors import UnknownNameError

    try:
        import routing_gym.grading as grading
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{source}: benchmark {spec.name!r}: no grader registry is available") from exc
    name = spec.grader or spec.name
    try:
        grader = grading.get_grader(name)
    except UnknownNameError as exc:
        raise ConfigError(f"{source}: benchmark {spec.name!r}: {exc}; set its 'grader' field") from exc
    return grader.grade


def score_of(result: Any) -> tuple[float, dict[str, Any]]:
    """A grader's verdict as (score in [0, 1], details for the record)."""
    details: dict[str, Any] = {}
    if hasattr(result, "score"):
        details = {k: getattr(result, k) for k in ("extracted", "reason") if hasattr(result, k)}
        result = result.score
    if isinstance(result, bool):
        return float(result), details
    if isinstance(result, (int, float)) and 0.0 <= float(result) <= 1.0:
        return float(result), details
    raise CollectError(f"grader returned {result!r}; expected a score in [0, 1], a bool, or a result with .score")


def write_queries(path: Path, rows: list[dict[str, Any]]) -> None:
    from routing_gym.collect.records import write_json_atomic

    # JSON (not JSONL) through the atomic writer: the snapshot is all-or-nothing
    write_json_atomic(path, rows)


def read_queries(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CollectError(f"{path}: cannot read the question snapshot ({exc})") from exc
    if not isinstance(rows, list):
        raise CollectError(f"{path}: the question snapshot must be a list")
    return rows
