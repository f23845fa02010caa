"""The collection runner: every model answers every question once, energy measured per call.

A run folder holds::

    config.json      the config the run started with (a resume must match its work fingerprint)
    queries.json     the sampled questions (snapshot; never re-sampled)
    records.jsonl    append-only log: sessions, idle baselines, one line per call
    .lock            held while a collector writes here

Work units are (question, model) pairs, model by model (each model is warmed up once and stays
resident). A pair is finished when the log has an ``ok`` call record for it; a resumed run
skips those, retries failed ones, and tolerates a torn last line from a killed process.

What happens on bad input:

- model not pulled / server down at the start: stop before measuring anything, naming the
  models and the ``ollama pull`` commands;
- server errors, timeouts, malformed responses: retried with exponential backoff; a pair that
  fails every attempt gets a ``failed`` record; ``retry.stop_after_failed_pairs`` such pairs in
  a row (a dead server) stop the run;
- a model that disappears mid-run: its remaining pairs are skipped, the run goes on;
- a grader exception: the answer is kept with ``correct: null`` and the error; grading is
  retried when the tournament is built;
- a write error (full disk): the run stops at once, the unsaved record goes to stderr.

Every stop says how many records are saved and that rerunning the same command resumes.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from routing_gym.collect.backends import Backend, make_backends
from routing_gym.collect.config import CollectConfig, ModelSpec, config_from_dict
from routing_gym.collect.errors import (
    BackendError,
    CollectError,
    MeterUnavailable,
    ModelUnavailable,
    ServerUnreachable,
)
from routing_gym.collect.meters import Meter, energy_reading, make_meter
from routing_gym.collect.questions import (
    Grader,
    read_queries,
    resolve_graders,
    sample_questions,
    score_of,
    write_queries,
)
from routing_gym.collect.records import SCHEMA_VERSION, RecordLog, read_records, write_json_atomic

CONFIG_FILE = "config.json"
QUERIES_FILE = "queries.json"
RECORDS_FILE = "records.jsonl"


@dataclass
class RunSummary:
    out_dir: Path
    total_pairs: int
    done_before: int
    done_now: int = 0
    failed_now: int = 0
    skipped_models: dict[str, str] = field(default_factory=dict)
    joules: float = 0.0  # net joules of every ok record so far (measured ones)
    unmeasured: bool = False

    @property
    def done(self) -> int:
        return self.done_before + self.done_now

    @property
    def complete(self) -> bool:
        return self.done == self.total_pairs

    def __str__(self) -> str:
        energy = "energy unmeasured" if self.unmeasured else f"{self.joules:,.1f} J net"
        text = (
            f"{self.done}/{self.total_pairs} pairs done ({self.done_now} this run, {self.failed_now} failed), "
            f"{energy}; records in {self.out_dir / RECORDS_FILE}"
        )
        for model, why in self.skipped_models.items():
            text += f"\n  skipped model {model}: {why}"
        return text


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def prepare_run(config: CollectConfig, out_dir: Path, data_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Create or check the run folder; return the question snapshot.

    A new run samples its questions (which refuses an unknown benchmark or an ``n`` larger
    than the question set) before it writes anything, so a refused config leaves the folder
    as it was and the corrected config can start there.
    """
    config_path = out_dir / CONFIG_FILE
    queries_path = out_dir / QUERIES_FILE
    if config_path.exists():
        stored = load_run_config(out_dir)
        if stored.work_fingerprint() != config.work_fingerprint():
            diff = _diff(stored.work_fingerprint(), config.work_fingerprint())
            raise CollectError(
                f"{out_dir} holds a run with a different config ({'; '.join(diff[:5])}). Resume with the "
                f"original config, or collect into a new --out folder."
            )
        if queries_path.exists():
            return read_queries(queries_path)
    rows = sample_questions(config, data_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not config_path.exists():
        write_json_atomic(config_path, {"schema": SCHEMA_VERSION, "config": config.to_dict()})
    write_queries(queries_path, rows)
    return rows


def load_run_config(out_dir: Path) -> CollectConfig:
    import json

    path = out_dir / CONFIG_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CollectError(f"{out_dir} is not a collection run folder (no {CONFIG_FILE})") from None
    except (OSError, ValueError) as exc:
        raise CollectError(f"{path}: unreadable ({exc})") from exc
    return config_from_dict(data.get("config"), source=str(path))


def _diff(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{where}.{k}" if where else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} -> {b!r}"]


def finished_pairs(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["query_id"], r["model_id"]) for r in records if r.get("type") == "call" and r.get("status") == "ok"}


def build_messages(question: dict[str, Any], system_prompt: str | None) -> list[dict[str, str]]:
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": question["prompt"]})
    return messages


def run_collection(
    config: CollectConfig,
    out_dir: str | Path,
    *,
    graders: dict[str, Grader] | None = None,
    meter: Meter | None = None,
    backends: dict[str, Backend] | None = None,
    progress: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] | None = None,
    data_dir: str | Path | None = None,
) -> RunSummary:
    """Collect (or resume collecting) a tournament into ``out_dir``.

    ``graders``, ``meter`` and ``backends`` override what the config would make (tests, custom
    setups); ``data_dir`` is where the shared question sets are (default
    ``ROUTING_GYM_DATA_DIR``), read only at the first start. Raises :class:`CollectError` when
    the run must stop; everything recorded before that stays in ``records.jsonl``.
    """
    out_dir = Path(out_dir)
    say = log or (lambda msg: print(f"routing-gym: {msg}", file=sys.stderr))
    grader_for = resolve_graders(config, graders)  # an unknown grader stops us before anything is written
    questions = prepare_run(config, out_dir, data_dir)
    record_log = RecordLog(out_dir / RECORDS_FILE)
    contents = record_log.open()
    own_meter = meter is None
    own_backends = backends is None
    bar = None
    try:
        if contents.torn_tail:
            say(f"cut a torn last line ({len(contents.torn_tail)} bytes, from an interrupted write) off {record_log.path}")
        done = finished_pairs(contents.records)
        question_ids = [q["query_id"] for q in questions]
        pending = {
            m.id: [q for q in questions if (q["query_id"], m.id) not in done] for m in config.models
        }
        summary = RunSummary(out_dir, len(questions) * len(config.models), len(done & {(q, m.id) for q in question_ids for m in config.models}))
        summary.joules = sum(
            r["energy"]["net_j"] for r in contents.records
            if r.get("type") == "call" and r.get("status") == "ok" and (r.get("energy") or {}).get("net_j") is not None
        )
        todo = [m for m in config.models if pending[m.id]]
        if not todo:
            say(f"nothing to do: all {summary.total_pairs} pairs are recorded in {record_log.path}")
            return summary

        backends = backends if backends is not None else make_backends(config)
        serving = _preflight(config, todo, backends, contents.records)
        meter = meter if meter is not None else make_meter(
            config.energy.meter, devices=config.energy.devices, interval_s=config.energy.interval_s,
            trace=config.energy.trace, warn=say,
        )
        summary.unmeasured = not meter.measured
        session = uuid.uuid4().hex[:12]
        record_log.append({
            "type": "session", "schema": SCHEMA_VERSION, "session": session, "time": _now(),
            "host": platform.node(), "python": platform.python_version(), "meter": meter.kind,
            "hardware": meter.hardware(), "config_fingerprint": config.fingerprint_hash(),
            "serving": serving, "pending_pairs": sum(len(pending[m.id]) for m in todo),
        })
        from tqdm.auto import tqdm

        bar = tqdm(total=summary.total_pairs, initial=summary.done_before, unit="call", desc=config.name,
                   disable=None if progress is None else not progress, dynamic_ncols=True)
        bar.set_postfix_str(_postfix(summary), refresh=False)
        failed_in_a_row = 0
        for model in todo:
            backend = backends[model.id]
            bar.set_description(f"{config.name} [{model.id}]")
            try:
                _with_retries(config, lambda: backend.warmup(model, config.warmup.prompt, config.warmup.calls), sleep)[0]
            except ModelUnavailable as exc:
                summary.skipped_models[model.id] = str(exc)
                say(f"skipping model {model.id}: {exc}")
                continue
            except BackendError as exc:
                raise _stop(summary, f"warm-up of {model.id} failed: {exc}") from exc
            idle_w, idle_at = _measure_idle(config, meter, record_log, session, model.id)
            for question in pending[model.id]:
                if time.monotonic() - idle_at >= config.energy.idle_every_s:
                    idle_w, idle_at = _measure_idle(config, meter, record_log, session, model.id)
                record, exc = answer_pair(config, model, question, backend, meter, idle_w,
                                          grader_for[question["benchmark"]], session, serving[model.id], sleep)
                record_log.append(record)
                if exc is not None:
                    summary.failed_now += 1
                    bar.set_postfix_str(_postfix(summary), refresh=True)
                    if isinstance(exc, ModelUnavailable):
                        summary.skipped_models[model.id] = str(exc)
                        say(f"skipping the rest of model {model.id}: {exc}")
                        break
                    failed_in_a_row += 1
                    if failed_in_a_row >= config.retry.stop_after_failed_pairs:
                        raise _stop(summary, f"{failed_in_a_row} pairs in a row failed every attempt; last error: {exc}") from exc
                    continue
                failed_in_a_row = 0
                summary.done_now += 1
                if record["energy"]["net_j"] is not None:
                    summary.joules += record["energy"]["net_j"]
                bar.set_postfix_str(_postfix(summary), refresh=False)
                bar.update(1)
        return summary
    except MeterUnavailable as exc:  # the GPU or driver went away mid-run
        raise _stop(summary, f"the energy meter failed: {exc}") from exc
    except KeyboardInterrupt:
        say(f"interrupted; every finished call is saved in {record_log.path}; rerun the same command to resume")
        raise
    finally:
        close_run(bar, meter if own_meter else None, backends if own_backends else None, record_log)


def close_run(bar: Any, meter: Meter | None, backends: dict[str, Backend] | None, record_log: RecordLog) -> None:
    """Close what a run opened (its own meter and backends: None for those the caller passed in)."""
    if bar is not None:
        bar.close()
    if meter is not None:
        meter.close()
    if backends is not None:
        for b in set(backends.values()):
            b.close()
    record_log.close()


def answer_pair(config: CollectConfig, model: ModelSpec, question: dict[str, Any], backend: Backend, meter: Meter,
                idle_w: float | None, grader: Grader, session: str, serving: dict[str, Any],
                sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Any], BackendError | None]:
    """One (question, model) pair, with retries: its ``call`` record (``ok``, or ``failed`` with
    every attempt's error) and the final error of a failed pair."""
    spec = next(b for b in config.benchmarks if b.name == question["benchmark"])
    system = spec.system_prompt if spec.system_prompt is not None else config.generation.system_prompt
    messages = build_messages(question, system)
    errors: list[str] = []

    def attempt():
        meter.start()
        try:
            generation = backend.generate(model, messages)
        finally:
            window = meter.stop()
        return generation, window

    started = _now()
    try:
        (generation, window), errors = _with_retries(config, attempt, sleep, errors)
    except BackendError as exc:
        return {
            "type": "call", "status": "failed", "session": session, "time": started,
            "query_id": question["query_id"], "model_id": model.id, "benchmark": question["benchmark"],
            "attempts": len(errors), "errors": errors, "error_kind": exc.kind,
        }, exc
    reading = energy_reading(meter.kind, window, idle_w)
    record = {
        "type": "call", "status": "ok", "session": session, "time": started,
        "query_id": question["query_id"], "model_id": model.id, "benchmark": question["benchmark"],
        "attempts": len(errors) + 1, "errors": errors,
        "digest": serving.get("digest"),
        "output_text": generation.text if config.store_output_text else None,
        "thinking": generation.thinking if config.store_output_text else None,
        "input_tokens": generation.input_tokens, "output_tokens": generation.output_tokens,
        "done_reason": generation.done_reason, "server": generation.server,
        "latency_s": reading.latency_s, "energy": reading.to_dict(),
    }
    record.update(_grade(grader, generation.text, question))
    return record, None


def _postfix(summary: RunSummary) -> str:
    energy = "energy unmeasured" if summary.unmeasured else f"{summary.joules:,.0f} J net"
    return f"{energy}, {summary.failed_now} failed"


def _stop(summary: RunSummary, why: str) -> CollectError:
    return CollectError(
        f"stopping: {why}. {summary.done}/{summary.total_pairs} pairs are saved in "
        f"{summary.out_dir / RECORDS_FILE}; fix the cause and rerun the same command to resume."
    )


def _preflight(config: CollectConfig, todo, backends: dict[str, Backend], records: list[dict[str, Any]],
               record_type: str = "call") -> dict[str, dict[str, Any]]:
    """Check every model with pending work is servable, and unchanged since earlier sessions."""
    serving: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for m in todo:
        try:
            serving[m.id] = backends[m.id].check(m)
        except ModelUnavailable as exc:
            missing.append(str(exc))
        except ServerUnreachable as exc:
            raise CollectError(f"cannot start: {exc}. Start the server (e.g. `ollama serve`) and rerun.") from exc
        except BackendError as exc:
            raise CollectError(f"cannot start: checking model {m.id} failed: {exc}") from exc
    if missing:
        raise CollectError("cannot start, model(s) not available:\n  " + "\n  ".join(missing))
    check_digests(serving, records, record_type)
    return serving


def check_digests(serving: dict[str, dict[str, Any]], records: list[dict[str, Any]], record_type: str = "call") -> None:
    """Refuse a model whose weights (digest) changed since earlier ``record_type`` records of the run."""
    previous: dict[str, str] = {}
    for r in records:
        if r.get("type") == record_type and r.get("status") == "ok" and r.get("digest"):
            previous[r["model_id"]] = r["digest"]
    changed = [
        f"{m}: {old} -> {serving[m]['digest']}" for m, old in previous.items()
        if m in serving and serving[m].get("digest") and serving[m]["digest"] != old
    ]
    if changed:
        raise CollectError(
            "model weights changed since earlier records of this run (digest): " + "; ".join(changed)
            + ". Mixing answers of two builds would corrupt the tournament: re-pull the original or start a new run."
        )


def _with_retries(config: CollectConfig, fn: Callable[[], Any], sleep: Callable[[float], None], errors: list[str] | None = None):
    """Call ``fn`` until it succeeds or retries run out; returns (result, earlier errors)."""
    errors = [] if errors is None else errors
    r = config.retry
    for attempt in range(1, r.max_attempts + 1):
        try:
            return fn(), errors
        except BackendError as exc:
            errors.append(f"attempt {attempt}: {type(exc).__name__}: {exc}")
            if not exc.retryable or attempt == r.max_attempts:
                raise
            sleep(min(r.backoff_max_s, r.backoff_s * 2 ** (attempt - 1)))
    raise AssertionError("unreachable")


def _measure_idle(config: CollectConfig, meter: Meter, log: RecordLog | Callable[[dict[str, Any]], None], session: str,
                  model_id: str) -> tuple[float | None, float]:
    """Idle baseline with ``model_id`` resident (just warmed up), logged (to a RecordLog, or
    handed to a callable that forwards it)."""
    at = time.monotonic()
    if not meter.measured or config.energy.idle_window_s <= 0:
        return None, at
    idle_w, n = meter.idle_power(config.energy.idle_window_s)
    (log if callable(log) else log.append)({
        "type": "idle", "session": session, "time": _now(), "model_id": model_id, "meter": meter.kind,
        "idle_w": idle_w, "n_samples": n, "window_s": config.energy.idle_window_s,
    })
    return idle_w, time.monotonic()


def _grade(grader: Grader, text: str, question: dict[str, Any]) -> dict[str, Any]:
    try:
        score, details = score_of(grader(text, question["reference"], question.get("metadata") or {}))
    except Exception as exc:  # a grader bug must not lose the measured answer
        return {"correct": None, "grade": None, "grade_error": f"{type(exc).__name__}: {exc}"}
    return {"correct": score, "grade": details or None, "grade_error": None}


def run_status(out_dir: str | Path) -> dict[str, Any]:
    """Progress of a run folder: pairs done per model, failures, energy so far, torn tail."""
    out_dir = Path(out_dir)
    config = load_run_config(out_dir)
    questions = read_queries(out_dir / QUERIES_FILE)
    contents = read_records(out_dir / RECORDS_FILE)
    ok: dict[tuple[str, str], int] = {}
    failed: dict[str, int] = {}
    ungraded = 0
    joules = 0.0
    meters: set[str] = set()
    for r in contents.records:
        if r.get("type") == "session":
            meters.add(r.get("meter", "?"))
        if r.get("type") != "call":
            continue
        if r.get("status") == "ok":
            key = (r["query_id"], r["model_id"])
            ok[key] = ok.get(key, 0) + 1
            ungraded += r.get("correct") is None
            net = (r.get("energy") or {}).get("net_j")
            joules += net if net is not None and math.isfinite(net) else 0.0
        else:
            failed[r["model_id"]] = failed.get(r["model_id"], 0) + 1
    per_model = {
        m.id: {"done": sum(1 for q in questions if (q["query_id"], m.id) in ok), "failed_records": failed.get(m.id, 0)}
        for m in config.models
    }
    # `collect run --ray`: each shard's latest session names its host and models
    per_shard: dict[str, dict[str, Any]] = {}
    for r in contents.records:
        if r.get("type") == "session" and r.get("shard"):
            per_shard[r["shard"]] = {"host": r.get("host"), "models": r.get("shard_models", []), "answered": 0}
    for r in contents.records:
        if r.get("type") == "call" and r.get("status") == "ok" and r.get("shard") in per_shard:
            per_shard[r["shard"]]["answered"] += 1
    for row in per_shard.values():
        row["done"] = sum(per_model[m]["done"] for m in row["models"] if m in per_model)
        row["total"] = len(questions) * len(row["models"])
    return {
        "name": config.name,
        "out_dir": str(out_dir),
        "questions": len(questions),
        "models": len(config.models),
        "total_pairs": len(questions) * len(config.models),
        "done_pairs": sum(v["done"] for v in per_model.values()),
        "duplicate_pairs": sum(1 for c in ok.values() if c > 1),
        "ungraded": ungraded,
        "net_joules": joules,
        "meters": sorted(meters),
        "per_model": per_model,
        "per_shard": per_shard,
        "torn_tail_bytes": len(contents.torn_tail),
    }
