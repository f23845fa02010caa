"""``collect sweep``: batch curves measured on your own server, N requests in flight at a time.

For each swept model (``sweep.models``, default every model) and each N of
``sweep.concurrency``, N threads keep N requests in flight against the model's Ollama or
OpenAI-compatible server (a closed loop: a thread sends its next request as soon as its last
answer is back) until ``sweep.requests(N)`` requests are answered. The questions are the
run's sampled questions, in order, cycled: request r of every level asks question
``r mod len(questions)``, so every N sees the same prompts. Nothing is graded.

Energy per request. One meter serves the whole sweep (``energy.meter``, as ``collect run``).
Its window is cut at every request start and finish, under one lock, so between two cuts the
set of requests in flight is fixed; that interval's joules are split equally among them. A
request's ``gross_j`` is the sum of its shares (the iteration-share attribution of a batching
server), its ``net_j`` subtracts the idle baseline's share (``idle_w`` x the sum of
interval/in-flight), never below zero. The idle baseline is measured as ``collect run`` does:
after each model's warm-up, and again between levels every ``energy.idle_every_s``.

Steady requests. The last N-1 requests of a level to finish run while the level drains
(fewer than N in flight). A request is *steady* when at least N-1 requests of its level were
still unfinished when it finished: it ran with N in flight throughout. The table uses steady
requests only.

A sweep folder holds::

    config.json, queries.json   as a collect run (``runner.prepare_run``)
    requests.jsonl              append-only, fsynced: session, idle and request records
    batch_curves.csv            the batch-curve table (``BATCH_CURVE_COLUMNS``), rewritten
                                after every finished level

A request is done when the log has an ``ok`` record for its (model, N, request); a killed
sweep loses only the requests in flight, and rerunning the same command sends exactly the
missing ones. Changing ``sweep`` between runs is allowed (add an N, raise ``rounds``); changing
what an answer means (models, generation, questions) is refused as for ``collect run``.
"""

from __future__ import annotations

import csv
import io
import platform
import queue
import statistics
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from routing_gym.collect.backends import Backend, Generation, make_backends
from routing_gym.collect.config import CollectConfig, ModelSpec, sweep_models
from routing_gym.collect.errors import BackendError, CollectError, MeterUnavailable, ModelUnavailable
from routing_gym.collect.meters import Meter, make_meter
from routing_gym.collect.records import SCHEMA_VERSION, RecordLog, write_text_atomic
from routing_gym.collect.runner import (
    _measure_idle,
    _now,
    _preflight,
    _with_retries,
    build_messages,
    close_run,
    prepare_run,
)

REQUESTS_FILE = "requests.jsonl"
TABLE_FILE = "batch_curves.csv"
# The batch-curve table shared with the serving simulator (its contract is this column list).
BATCH_CURVE_COLUMNS = (
    "model_id", "gpu", "n_gpus", "batch_size", "time_per_output_token_s", "power_w", "energy_per_request_j",
    "output_tokens_mean", "provenance", "source", "idle_power_w",
)
NVML_METERS = ("nvml-counter", "nvml-poll")
Level = tuple[str, int]  # (model id, N)


@dataclass(eq=False)
class Share:
    """One request's part of the meter's intervals while it was in flight."""

    started: float
    in_flight_at_start: int
    gross_j: float | None = 0.0  # None once any interval was unmeasured
    idle_s: float = 0.0  # sum of interval / in flight: the request's share of wall time
    weighted_s: float = 0.0  # sum of interval x in flight (for the mean in flight)
    finished: float | None = None

    @property
    def latency_s(self) -> float:
        assert self.finished is not None
        return self.finished - self.started


class EnergyLedger:
    """Splits the meter's energy among the requests in flight (thread-safe)."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self._lock = threading.Lock()
        self._open: list[Share] = []

    def _close_interval(self) -> None:
        window = self.meter.stop()
        n = len(self._open)
        for share in self._open:
            if share.gross_j is not None and window.gross_j is not None:
                share.gross_j += window.gross_j / n
            else:
                share.gross_j = None
            share.idle_s += window.latency_s / n
            share.weighted_s += window.latency_s * n

    def begin(self) -> Share:
        with self._lock:
            if self._open:
                self._close_interval()
            share = Share(self.meter.clock(), len(self._open) + 1)
            self._open.append(share)
            self.meter.start()
            return share

    def end(self, share: Share) -> None:
        with self._lock:
            self._close_interval()
            self._open.remove(share)
            share.finished = self.meter.clock()
            if self._open:
                self.meter.start()


@dataclass
class SweepSummary:
    out_dir: Path
    total: int  # requests of every configured (model, N)
    done_before: int
    done_now: int = 0
    failed_now: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a level has no row, skipped models

    @property
    def complete(self) -> bool:
        return self.done_before + self.done_now == self.total

    def __str__(self) -> str:
        text = (f"{self.done_before + self.done_now}/{self.total} requests done ({self.done_now} this run, "
                f"{self.failed_now} failed); {len(self.rows)} batch-curve row(s) in {self.out_dir / TABLE_FILE}; "
                f"requests in {self.out_dir / REQUESTS_FILE}")
        return "\n  ".join([text, *self.notes])


def _tpot(generation: Generation, latency_s: float) -> tuple[float | None, str]:
    """Seconds per output token: the server's decode time where it reports one (Ollama's
    ``eval_duration``), else the client's latency (which includes prefill and queueing)."""
    if not generation.output_tokens:
        return None, "no output tokens"
    decode = generation.server.get("eval_duration_s")
    if decode:
        return decode / generation.output_tokens, "server-decode"
    return latency_s / generation.output_tokens, "client-latency"


@dataclass
class _Level:
    """One (model, N) being measured: what is left and how many have finished."""

    model: ModelSpec
    n: int
    todo: deque[int]
    pending: int
    finished: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> int | None:
        with self.lock:
            return self.todo.popleft() if self.todo else None

    def finish(self) -> bool:
        """Count one finished request; True when it finished steady (>= N-1 others unfinished)."""
        with self.lock:
            self.finished += 1
            return self.pending - self.finished >= self.n - 1


def run_sweep(
    config: CollectConfig,
    out_dir: str | Path,
    *,
    meter: Meter | None = None,
    backends: dict[str, Backend] | None = None,
    progress: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] | None = None,
    data_dir: str | Path | None = None,
) -> SweepSummary:
    """Measure (or resume measuring) the concurrency sweep of ``config`` into ``out_dir``.

    ``meter`` and ``backends`` override what the config would make. Raises
    :class:`CollectError` when the sweep must stop; every answered request stays in
    ``requests.jsonl`` and the table covers every finished level."""
    out_dir = Path(out_dir)
    say = log or (lambda msg: print(f"routing-gym: {msg}", file=sys.stderr))
    models = sweep_models(config)
    questions = prepare_run(config, out_dir, data_dir)
    record_log = RecordLog(out_dir / REQUESTS_FILE)
    contents = record_log.open()
    records = contents.records
    levels = [(m, n) for m in models for n in config.sweep.concurrency]
    done = _done_requests(records)
    todo = {(m.id, n): [r for r in range(config.sweep.requests(n)) if (m.id, n, r) not in done] for m, n in levels}
    total = sum(config.sweep.requests(n) for _, n in levels)
    summary = SweepSummary(out_dir, total, total - sum(len(v) for v in todo.values()))
    own_meter, own_backends = meter is None, backends is None
    bar = None
    try:
        if contents.torn_tail:
            say(f"cut a torn last line ({len(contents.torn_tail)} bytes, from an interrupted write) off {record_log.path}")
        pending_models = [m for m in models if any(todo[(m.id, n)] for n in config.sweep.concurrency)]
        if not pending_models:
            say(f"nothing to do: all {total} requests are recorded in {record_log.path}")
            return _finish(summary, config, records, levels)
        biggest = max(config.sweep.concurrency)
        backends = backends if backends is not None else make_backends(config, connections=biggest)
        serving = _preflight(config, pending_models, backends, records, record_type="request")
        meter = meter if meter is not None else make_meter(
            config.energy.meter, devices=config.energy.devices, interval_s=config.energy.interval_s,
            trace=config.energy.trace, warn=say,
        )
        session = uuid.uuid4().hex[:12]
        start = {
            "type": "session", "schema": SCHEMA_VERSION, "session": session, "time": _now(), "host": platform.node(),
            "python": platform.python_version(), "meter": meter.kind, "hardware": meter.hardware(),
            "config_fingerprint": config.fingerprint_hash(), "serving": serving, "sweep": config.to_dict()["sweep"],
            "pending_requests": total - summary.done_before,
        }
        record_log.append(start)
        records.append(start)
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=summary.done_before, unit="req", desc=f"{config.name} sweep",
                   disable=None if progress is None else not progress, dynamic_ncols=True)
        ledger = EnergyLedger(meter)
        failed_in_a_row = 0
        for model in pending_models:
            backend = backends[model.id]
            try:
                _with_retries(config, lambda: backend.warmup(model, config.warmup.prompt, config.warmup.calls), sleep)
            except ModelUnavailable as exc:
                summary.notes.append(f"skipped model {model.id}: {exc}")
                say(f"skipping model {model.id}: {exc}")
                continue
            except BackendError as exc:
                raise _stop(summary, f"warm-up of {model.id} failed: {exc}") from exc
            idle_w, idle_at = _measure_idle(config, meter, _appender(record_log, records), session, model.id)
            for n in config.sweep.concurrency:
                if not todo[(model.id, n)]:
                    continue
                if time.monotonic() - idle_at >= config.energy.idle_every_s:
                    idle_w, idle_at = _measure_idle(config, meter, _appender(record_log, records), session, model.id)
                level = _Level(model, n, deque(todo[(model.id, n)]), len(todo[(model.id, n)]))
                bar.set_description(f"{config.name} sweep [{model.id} N={n}]")
                for record, exc in _run_level(config, level, questions, backend, ledger, idle_w, session,
                                              serving[model.id], sleep):
                    record_log.append(record)
                    records.append(record)
                    if exc is None:
                        failed_in_a_row = 0
                        summary.done_now += 1
                        bar.update(1)
                        continue
                    summary.failed_now += 1
                    failed_in_a_row += 1
                    if failed_in_a_row >= config.retry.stop_after_failed_pairs:
                        raise _stop(summary, f"{failed_in_a_row} requests in a row failed every attempt; last error: {exc}") from exc
                _write_table(out_dir, _table(config, records, levels, out_dir)[0])
        return _finish(summary, config, records, levels)
    except MeterUnavailable as exc:  # the GPU or driver went away mid-sweep
        raise _stop(summary, f"the energy meter failed: {exc}") from exc
    except KeyboardInterrupt:
        say(f"interrupted; every answered request is saved in {record_log.path}; rerun the same command to resume")
        raise
    finally:
        close_run(bar, meter if own_meter else None, backends if own_backends else None, record_log)


def _appender(record_log: RecordLog, records: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    def append(record: dict[str, Any]) -> None:
        record_log.append(record)
        records.append(record)

    return append


def _run_level(config: CollectConfig, level: _Level, questions: list[dict[str, Any]], backend: Backend,
               ledger: EnergyLedger, idle_w: float | None, session: str, serving: dict[str, Any],
               sleep: Callable[[float], None]):
    """Yield (record, error) as the level's requests finish; N threads keep N in flight.

    Threads only generate and meter (no grading: math-verify's ``signal.alarm`` fails off the
    main thread); this thread writes every record."""
    results: queue.Queue = queue.Queue()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            r = level.take()
            if r is None:
                return
            try:
                results.put(_request(config, level, r, questions[r % len(questions)], backend, ledger, idle_w,
                                     session, serving, sleep))
            except BaseException as exc:  # a meter failure: the writer thread raises it and stops
                results.put(({}, exc))
                return

    threads = [threading.Thread(target=work, name=f"sweep-{level.model.id}-{level.n}-{i}", daemon=True)
               for i in range(min(level.n, level.pending))]
    for t in threads:
        t.start()
    try:
        for _ in range(level.pending):
            record, exc = results.get()
            if exc is not None and not isinstance(exc, BackendError):
                raise exc  # the meter failed (or a bug): stop the sweep
            yield record, exc
    finally:
        stop.set()
    for t in threads:
        t.join()


def _request(config: CollectConfig, level: _Level, r: int, question: dict[str, Any], backend: Backend,
             ledger: EnergyLedger, idle_w: float | None, session: str, serving: dict[str, Any],
             sleep: Callable[[float], None]) -> tuple[dict[str, Any], BackendError | None]:
    spec = next(b for b in config.benchmarks if b.name == question["benchmark"])
    system = spec.system_prompt if spec.system_prompt is not None else config.generation.system_prompt
    messages = build_messages(question, system)
    model = level.model

    def attempt() -> tuple[Generation, Share]:
        share = ledger.begin()
        try:
            return backend.generate(model, messages), share
        finally:
            ledger.end(share)

    base = {"type": "request", "session": session, "time": _now(), "model_id": model.id, "concurrency": level.n,
            "request": r, "query_id": question["query_id"], "benchmark": question["benchmark"]}
    errors: list[str] = []
    try:
        (generation, share), errors = _with_retries(config, attempt, sleep, errors)
    except BackendError as exc:
        level.finish()
        return {**base, "status": "failed", "attempts": len(errors), "errors": errors, "error_kind": exc.kind}, exc
    steady = level.finish()
    tpot, basis = _tpot(generation, share.latency_s)
    gross = share.gross_j
    net = None if gross is None else gross - (idle_w or 0.0) * share.idle_s
    return {
        **base, "status": "ok", "attempts": len(errors) + 1, "errors": errors, "digest": serving.get("digest"),
        "output_text": generation.text if config.store_output_text else None,
        "input_tokens": generation.input_tokens, "output_tokens": generation.output_tokens,
        "done_reason": generation.done_reason, "server": generation.server,
        "latency_s": share.latency_s, "tpot_s": tpot, "tpot_basis": basis, "steady": steady,
        "in_flight_at_start": share.in_flight_at_start,
        "mean_in_flight": share.weighted_s / share.latency_s if share.latency_s > 0 else float(share.in_flight_at_start),
        "energy": {"meter": ledger.meter.kind, "measured": gross is not None, "gross_j": gross,
                   "net_j": None if net is None else max(net, 0.0), "clipped": net is not None and net < 0,
                   "idle_w": idle_w, "wall_share_s": share.idle_s},
    }, None


def _stop(summary: SweepSummary, why: str) -> CollectError:
    return CollectError(
        f"stopping: {why}. {summary.done_before + summary.done_now}/{summary.total} requests are saved in "
        f"{summary.out_dir / REQUESTS_FILE}; fix the cause and rerun the same command to resume."
    )


def _done_requests(records: list[dict[str, Any]]) -> set[tuple[str, int, int]]:
    return {(r["model_id"], r["concurrency"], r["request"]) for r in records
            if r.get("type") == "request" and r.get("status") == "ok"}


def _finish(summary: SweepSummary, config: CollectConfig, records: list[dict[str, Any]], levels) -> SweepSummary:
    summary.rows, notes = _table(config, records, levels, summary.out_dir)
    summary.notes += notes
    _write_table(summary.out_dir, summary.rows)
    return summary


def _table(config: CollectConfig, records: list[dict[str, Any]], levels, out_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The batch-curve rows of every finished (model, N), and why any other has none."""
    sessions = {r["session"]: r for r in records if r.get("type") == "session"}
    ok: dict[Level, dict[int, dict[str, Any]]] = {}
    for r in records:
        if r.get("type") == "request" and r.get("status") == "ok":
            ok.setdefault((r["model_id"], r["concurrency"]), {}).setdefault(r["request"], r)
    rows, notes = [], []
    for model, n in levels:
        want = config.sweep.requests(n)
        got = [ok.get((model.id, n), {}).get(r) for r in range(want)]
        if any(r is None for r in got):
            continue  # not finished yet: no row from part of a level
        row, why = _row(model.id, n, got, sessions, out_dir / REQUESTS_FILE)
        if row is None:
            notes.append(f"{model.id} at N={n}: no batch-curve row: {why}")
        else:
            rows.append(row)
    return rows, notes


def _row(model_id: str, n: int, requests: list[dict[str, Any]], sessions: dict[str, dict[str, Any]],
         source: Path) -> tuple[dict[str, Any] | None, str]:
    steady = [r for r in requests if r["steady"]]
    if not steady:
        return None, "no steady request (each ran while the level drained)"
    meters = {r["energy"]["meter"] for r in steady}
    if any(r["energy"]["gross_j"] is None for r in steady):
        return None, f"energy unmeasured (meter {', '.join(sorted(meters))}); latencies are in {source.name}"
    setups = {tuple(sessions.get(r["session"], {}).get("hardware", {}).get("gpus") or ()) for r in steady}
    if len(setups) > 1:
        return None, f"measured on different GPU setups across resumes ({sorted(setups)})"
    gpus = setups.pop()
    tpots = [r["tpot_s"] for r in steady if r["tpot_s"] is not None]
    tokens = [r["output_tokens"] for r in steady if r["output_tokens"] is not None]
    energy = statistics.fmean(r["energy"]["gross_j"] for r in steady)
    # each steady request holds 1/N of the board over its life: power = N x its joules / its seconds
    power = n * sum(r["energy"]["gross_j"] for r in steady) / sum(r["latency_s"] for r in steady)
    if not tpots or not tokens or min(energy, power, statistics.fmean(tokens)) <= 0:
        return None, "no output tokens or no energy above zero"
    idle = [r["energy"]["idle_w"] for r in steady if r["energy"]["idle_w"] is not None]
    basis = {r["tpot_basis"] for r in steady}
    return {
        "model_id": model_id,
        "gpu": " + ".join(sorted(set(gpus))) if gpus else "none (replayed power trace)",
        "n_gpus": max(1, len(gpus)),
        "batch_size": n,
        "time_per_output_token_s": statistics.fmean(tpots),
        "power_w": power,
        "energy_per_request_j": energy,
        "output_tokens_mean": statistics.fmean(tokens),
        "provenance": "measured" if meters <= set(NVML_METERS) else "synthetic",
        "source": f"{source}; time per token from {' and '.join(sorted(basis))}",
        "idle_power_w": statistics.fmean(idle) if idle else "",
    }, ""


def _write_table(out_dir: Path, rows: list[dict[str, Any]]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=BATCH_CURVE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(out_dir / TABLE_FILE, buffer.getvalue())
