"""``collect run --ray``: one collector actor per GPU host, one log owned by the driver.

Each shard (``CollectConfig.shards``, or one per Ray node with the models dealt round robin)
is a Ray actor placed on its node. It builds its own backends (so ``127.0.0.1`` is *its*
host's server), its own meter (its own GPUs) and its graders, warms each of its models up,
measures idle baselines, and answers one (question, model) pair per call with the same code
as the single-machine runner (``runner.answer_pair``). Records travel back to the driver,
which alone appends them to ``records.jsonl`` (one write + fsync per record, as always).

No pair is ever written twice: the driver appends an ``ok`` call record only for a pair the
log does not already have (a retried call after a lost reply, or a restarted actor, cannot
add a second one), and a rerun sends only pairs without an ``ok`` record. A driver killed
mid-run loses at most the replies in flight; the rerun asks for those pairs again. An actor
that dies is restarted by Ray (bounded) and its in-flight pairs are sent again.

Every record carries the ``shard`` that produced it and each shard logs its own ``session``
record (host, meter, hardware, models), so ``collect status`` shows progress per shard.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from routing_gym.collect.config import CollectConfig, config_from_dict
from routing_gym.collect.errors import BackendError, CollectError, ModelUnavailable
from routing_gym.collect.records import SCHEMA_VERSION, RecordLog
from routing_gym.collect.runner import (
    RECORDS_FILE,
    RunSummary,
    _measure_idle,
    _now,
    _preflight,
    _stop,
    _with_retries,
    answer_pair,
    check_digests,
    finished_pairs,
    prepare_run,
)

IN_FLIGHT_PER_SHARD = 2  # pairs queued at each actor: keeps it busy, bounds what a driver crash loses
ACTOR_RESTARTS = 2  # Ray restarts a dead shard actor this often; its in-flight pairs are sent again
PAIR_ATTEMPTS = 3  # sends of one pair whose actor died under it, before the run stops


@dataclass
class Shard:
    name: str
    models: list[str]
    node: str = ""
    num_gpus: float = 0.0


def plan_shards(config: CollectConfig, nodes: list[dict[str, Any]]) -> list[Shard]:
    """The config's shards, or one per alive Ray node with the models dealt round robin."""
    if config.shards:
        return [Shard(s.name, list(s.models), s.node, s.num_gpus) for s in config.shards]
    alive = [n for n in nodes if n.get("Alive")]
    count = max(1, min(len(alive), len(config.models)))
    return [Shard(f"node{i}", [m.id for m in config.models[i::count]], alive[i]["NodeManagerAddress"] if alive else "")
            for i in range(count)]


def resolve_backend_factory(spec: str | None) -> Callable[[CollectConfig], dict[str, Any]] | None:
    """``"module:function"`` -> the function (called with the config, returns model id -> Backend)."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise CollectError(f"--backend-factory {spec!r}: cannot load it ({exc}); expected MODULE:FUNCTION") from None


class ShardWorker:
    """The actor body: one shard's backends, meter and graders; one pair per ``answer`` call."""

    def __init__(self, config_data: dict[str, Any], shard: Shard, session: str, backend_factory: str | None) -> None:
        from routing_gym.collect.backends import make_backends
        from routing_gym.collect.meters import make_meter
        from routing_gym.collect.questions import resolve_graders

        # "<memory>": paths were made absolute where the config file was read, on the driver
        self.config = config_from_dict(config_data)
        self.shard, self.session = shard, session
        self.models = {m.id: m for m in self.config.models if m.id in shard.models}
        factory = resolve_backend_factory(backend_factory)
        self.backends = (factory or make_backends)(self.config)
        self.graders = resolve_graders(self.config, None)
        self.warnings: list[str] = []
        e = self.config.energy
        self.meter = make_meter(e.meter, devices=e.devices, interval_s=e.interval_s, trace=e.trace, warn=self.warnings.append)
        self.idle: dict[str, tuple[float | None, float]] = {}  # model -> (idle W, measured at)
        self.serving: dict[str, dict[str, Any]] = {}

    def start(self) -> dict[str, Any]:
        """Check every model of the shard is served; the shard's ``session`` record."""
        self.serving = _preflight(self.config, list(self.models.values()), self.backends, [])
        return {
            "type": "session", "schema": SCHEMA_VERSION, "session": self.session, "time": _now(),
            "shard": self.shard.name, "shard_models": self.shard.models, "host": platform.node(),
            "python": platform.python_version(), "meter": self.meter.kind, "hardware": self.meter.hardware(),
            "config_fingerprint": self.config.fingerprint_hash(), "serving": self.serving, "warnings": self.warnings,
        }

    def answer(self, model_id: str, question: dict[str, Any]) -> list[dict[str, Any]]:
        """Records for one pair: idle baselines measured first (if due), then the call record;
        ``[{"type": "skip", ...}]`` when the model cannot be warmed up."""
        if not self.serving:  # a restarted actor (Ray re-runs __init__ only) checks its models again
            self.start()
        model, out = self.models[model_id], []
        emit = out.append
        if model_id not in self.idle:
            try:
                _with_retries(self.config, lambda: self.backends[model_id].warmup(model, self.config.warmup.prompt,
                                                                                  self.config.warmup.calls), time.sleep)
            except BackendError as exc:
                return [{"type": "skip", "model_id": model_id, "error": str(exc),
                         "unavailable": isinstance(exc, ModelUnavailable)}]
            self.idle[model_id] = _measure_idle(self.config, self.meter, emit, self.session, model_id)
        elif time.monotonic() - self.idle[model_id][1] >= self.config.energy.idle_every_s:
            self.idle[model_id] = _measure_idle(self.config, self.meter, emit, self.session, model_id)
        record, _ = answer_pair(self.config, model, question, self.backends[model_id], self.meter,
                                self.idle[model_id][0], self.graders[question["benchmark"]], self.session,
                                self.serving[model_id])
        out.append(record)
        for r in out:
            r["shard"] = self.shard.name
        return out

    def close(self) -> None:
        self.meter.close()
        for backend in set(self.backends.values()):
            backend.close()


def run_collection_ray(
    config: CollectConfig,
    out_dir: str | Path,
    *,
    backend_factory: str | None = None,
    ray_address: str | None = None,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
    data_dir: str | Path | None = None,
) -> RunSummary:
    """Collect (or resume) ``out_dir`` with one Ray actor per shard; the driver writes the log.

    ``backend_factory`` (``"module:function"``, importable on every node) replaces the
    backends the config would make. Raises :class:`CollectError` when the run must stop."""
    from routing_gym.collect.questions import resolve_graders
    from routing_gym.ray_cluster import init_ray, ray_module

    out_dir = Path(out_dir)
    say = log or (lambda msg: print(f"routing-gym: {msg}", file=sys.stderr))
    resolve_graders(config, None)  # an unknown grader stops us before anything is written
    questions = prepare_run(config, out_dir, data_dir)
    record_log = RecordLog(out_dir / RECORDS_FILE)
    contents = record_log.open()
    started_ray = False
    actors: dict[str, Any] = {}
    bar = None
    try:
        if contents.torn_tail:
            say(f"cut a torn last line ({len(contents.torn_tail)} bytes, from an interrupted write) off {record_log.path}")
        done = finished_pairs(contents.records)
        pairs = [(q["query_id"], m.id) for m in config.models for q in questions]
        summary = RunSummary(out_dir, len(pairs), sum(p in done for p in pairs))
        summary.joules = sum(r["energy"]["net_j"] for r in contents.records if r.get("type") == "call"
                             and r.get("status") == "ok" and (r.get("energy") or {}).get("net_j") is not None)
        by_id = {q["query_id"]: q for q in questions}
        if summary.done_before == summary.total_pairs:
            say(f"nothing to do: all {summary.total_pairs} pairs are recorded in {record_log.path}")
            return summary

        started_ray = init_ray(ray_address)
        ray = ray_module()
        shards = plan_shards(config, ray.nodes())
        todo = {s.name: deque((q["query_id"], m) for m in s.models for q in questions if (q["query_id"], m) not in done)
                for s in shards}
        session = uuid.uuid4().hex[:12]
        for shard in shards:
            if todo[shard.name]:
                actors[shard.name] = _start_actor(ray, config, shard, f"{session}-{shard.name}", backend_factory)
        starts = {name: _get(ray, actor.start.remote(), f"shard {name}") for name, actor in actors.items()}
        check_digests({m: info for record in starts.values() for m, info in record["serving"].items()}, contents.records)
        for name, record in starts.items():
            for warning in record["warnings"]:
                say(f"shard {name}: {warning}")
            record["pending_pairs"] = len(todo[name])
            record_log.append(record)
        summary.unmeasured = any(record["meter"] == "none" for record in starts.values())

        from tqdm.auto import tqdm

        bar = tqdm(total=summary.total_pairs, initial=summary.done_before, unit="call", desc=f"{config.name} [ray]",
                   disable=None if progress is None else not progress, dynamic_ncols=True)
        in_flight: dict[Any, tuple[str, tuple[str, str]]] = {}  # ref -> (shard, pair)
        sends: dict[tuple[str, str], int] = {}
        failed_in_a_row = dict.fromkeys(actors, 0)

        def send(name: str) -> None:
            while todo[name] and sum(1 for s, _ in in_flight.values() if s == name) < IN_FLIGHT_PER_SHARD:
                pair = todo[name].popleft()
                sends[pair] = sends.get(pair, 0) + 1
                in_flight[actors[name].answer.remote(pair[1], by_id[pair[0]])] = (name, pair)

        for name in actors:
            send(name)
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            name, pair = in_flight.pop(ready[0])
            try:
                records = ray.get(ready[0])
            except ray.exceptions.RayActorError as exc:  # the actor died; Ray restarts it
                if sends[pair] >= PAIR_ATTEMPTS:
                    raise _stop(summary, f"shard {name}'s actor died {sends[pair]} times answering {pair}: {exc}") from exc
                say(f"shard {name}: actor died ({type(exc).__name__}); sending pair {pair} again")
                todo[name].appendleft(pair)
                send(name)
                continue
            except ray.exceptions.RayTaskError as exc:
                raise _stop(summary, f"shard {name} failed on {pair}: {exc.cause or exc}") from exc
            for record in records:
                if record["type"] == "skip":
                    summary.skipped_models[record["model_id"]] = record["error"]
                    say(f"shard {name}: skipping model {record['model_id']}: {record['error']}")
                    todo[name] = deque(p for p in todo[name] if p[1] != record["model_id"])
                    continue
                key = (record.get("query_id"), record.get("model_id"))
                if record["type"] == "call" and record["status"] == "ok" and key in done:
                    continue  # an answer to a pair already recorded: never a second ok record
                record_log.append(record)
                if record["type"] != "call":
                    continue
                if record["status"] == "ok":
                    done.add(key)
                    summary.done_now += 1
                    summary.joules += record["energy"]["net_j"] or 0.0
                    failed_in_a_row[name] = 0
                    bar.update(1)
                else:
                    summary.failed_now += 1
                    if record.get("error_kind") == "model_unavailable":
                        summary.skipped_models[record["model_id"]] = record["errors"][-1]
                        todo[name] = deque(p for p in todo[name] if p[1] != record["model_id"])
                        continue
                    failed_in_a_row[name] += 1
                    if failed_in_a_row[name] >= config.retry.stop_after_failed_pairs:
                        raise _stop(summary, f"shard {name}: {failed_in_a_row[name]} pairs in a row failed every "
                                    f"attempt; last: {record['errors'][-1] if record['errors'] else '?'}")
            send(name)
        return summary
    except KeyboardInterrupt:
        say(f"interrupted; every finished call is saved in {record_log.path}; rerun the same command to resume")
        raise
    finally:
        if bar is not None:
            bar.close()
        if actors:
            ray = ray_module()
            for actor in actors.values():
                ray.kill(actor)
        if started_ray:
            ray_module().shutdown()
        record_log.close()


def _start_actor(ray: Any, config: CollectConfig, shard: Shard, session: str, backend_factory: str | None) -> Any:
    # num_cpus 0: a shard mostly waits on its server; num_gpus reserves the host's GPU(s) if asked
    options: dict[str, Any] = {"num_cpus": 0, "num_gpus": shard.num_gpus, "max_restarts": ACTOR_RESTARTS}
    if shard.node:
        options["scheduling_strategy"] = _node_strategy(ray, shard)
    actor_class = ray.remote(ShardWorker)
    return actor_class.options(**options).remote(config.to_dict(), shard, session, backend_factory)


def _node_strategy(ray: Any, shard: Shard) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [n for n in ray.nodes() if n.get("Alive")]
    for node in alive:
        if shard.node in (node.get("NodeManagerAddress"), node.get("NodeManagerHostname"), node.get("NodeID")):
            return NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
    names = ", ".join(f"{n.get('NodeManagerHostname')} ({n.get('NodeManagerAddress')})" for n in alive)
    raise CollectError(f"shards: shard {shard.name!r} names node {shard.node!r}, which is not in the Ray cluster; "
                       f"alive nodes: {names or 'none'}")


def _get(ray: Any, ref: Any, what: str) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if exc.cause is not None else exc
        if isinstance(cause, CollectError):
            raise CollectError(f"{what}: {cause}") from None
        raise CollectError(f"{what} failed to start: {str(cause).splitlines()[0]}") from None
    except ray.exceptions.RayActorError as exc:
        raise CollectError(f"{what} failed to start: {str(exc).splitlines()[0]}") from None
