"""Where independent units of work run: a local loop, a process pool here, or Ray tasks.

A unit is a :class:`Task`: a small picklable argument tuple, the name of the shared payload it
reads (e.g. a tournament, shipped to each worker once, not per task) and the resources it asks
for. ``fn(payload, *task.args)`` must be a top-level (importable, picklable) function; it
should catch its own errors and return a value describing them, because an exception raised
out of ``fn`` is not retried. What *is* retried is the death of the worker process running a
task (killed, out of memory, ``os._exit``): up to ``max_retries`` more attempts, then the task
is reported as :class:`Lost` with the error and the other tasks go on.

- ``local``: one task after another in this process (today's loop). A task that kills its
  process kills the run; the finished ones are what the caller saved.
- ``process``: ``workers`` spawned processes on this machine (spawn, so no lock or thread
  state is inherited). Spawned workers import the main module again, so a script must call
  this from under ``if __name__ == "__main__":``; called from a script's unguarded top-level
  code it runs ``local`` instead and warns how to get the workers back.
- ``ray``: Ray tasks, each payload put in the object store once; ``num_gpus``/``num_cpus``
  per task from ``Task.resources``. Connects to ``address`` (or ``RAY_ADDRESS``), else to a
  Ray that ``ray start`` left running on this machine, otherwise starts a local Ray with
  ``workers`` CPUs and stops it afterwards (:func:`init_ray`: token authentication, and one
  line instead of minutes of retries when a head is not there or refuses the token).

Results arrive in completion order; callers that need a fixed order sort them.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
import warnings
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator, Sequence

from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.ray_cluster import init_ray, ray_module

EXECUTORS = ("local", "process", "ray")
DEFAULT_MAX_RETRIES = 2

@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(payloads[group], *args)``."""

    key: str  # unique within a run; names the task in errors and progress
    group: str  # which shared payload it reads
    args: tuple = ()
    resources: dict[str, float] = field(default_factory=lambda: {"num_cpus": 1.0}, hash=False, compare=False)


@dataclass
class Lost:
    """A task that produced no value: its worker died ``attempts`` times, or ``fn`` raised."""

    error: str
    attempts: int


def check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise UsageError(f"executor (--executor) must be one of {', '.join(EXECUTORS)}, got {name!r}")
    return name


def run_tasks(
    fn: Callable[..., Any],
    payloads: dict[str, Any],
    tasks: Sequence[Task],
    executor: str = "local",
    *,
    workers: int | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    ray_address: str | None = None,
) -> Iterator[tuple[Task, Any]]:
    """Run every task and yield ``(task, value or Lost)`` as each finishes."""
    check_executor(executor)
    if max_retries < 0:
        raise UsageError(f"max_retries must be >= 0, got {max_retries}")
    missing = sorted({t.group for t in tasks} - set(payloads))
    if missing:
        raise RoutingGymError(f"tasks read payload(s) {missing} that were not given")
    if not tasks:
        return iter(())
    if executor == "process":
        from routing_gym.grading.base import unguarded_main_script

        script = unguarded_main_script()
        if script is not None:
            warnings.warn(
                f"running {len(tasks)} task(s) in this process, not in worker processes: {script} calls this from "
                "top-level code outside 'if __name__ == \"__main__\":', and every spawned worker would run that "
                "script again. Move the script's code under that guard (or use --executor ray).",
                RuntimeWarning, stacklevel=2,
            )
            executor = "local"
    if executor == "local":
        return _run_local(fn, payloads, tasks)
    if executor == "process":
        return _run_processes(fn, payloads, tasks, workers or os.cpu_count() or 1, max_retries)
    return _run_ray(fn, payloads, tasks, workers, max_retries, ray_address)


def _describe_exception(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" (at {where})" if where else "")


def _run_local(fn: Callable[..., Any], payloads: dict[str, Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any]]:
    for task in tasks:
        try:
            value = fn(payloads[task.group], *task.args)
        except Exception as exc:
            value = Lost(_describe_exception(exc), 1)
        yield task, value


# ---------------------------------------------------------------------- process pool
def _process_worker(conn: Connection, fn: Callable[..., Any]) -> None:
    """A spawned worker: keeps the payloads it was sent, runs one task at a time."""
    payloads: dict[str, Any] = {}
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the driver went away
            return
        if message is None:
            return
        kind, group, body = message
        if kind == "payload":
            payloads[group] = body
            continue
        try:
            reply = ("ok", fn(payloads[group], *body))
        except Exception as exc:
            reply = ("error", _describe_exception(exc))
        try:
            conn.send(reply)
        except OSError:  # the driver went away (killed): nobody to report to
            return
        except Exception as exc:  # the value does not pickle
            conn.send(("error", f"the task's result cannot be sent back: {_describe_exception(exc)}"))


class _Worker:
    def __init__(self, ctx: Any, fn: Callable[..., Any]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_process_worker, args=(child, fn), daemon=True)
        self.process.start()
        child.close()
        self.groups: set[str] = set()
        self.task: Task | None = None

    def send_task(self, task: Task, payloads: dict[str, Any]) -> None:
        if task.group not in self.groups:
            self.conn.send(("payload", task.group, payloads[task.group]))
            self.groups.add(task.group)
        self.conn.send(("task", task.group, task.args))
        self.task = task

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _run_processes(fn: Callable[..., Any], payloads: dict[str, Any], tasks: Sequence[Task], workers: int,
                   max_retries: int) -> Iterator[tuple[Task, Any]]:
    ctx = multiprocessing.get_context("spawn")
    queue = deque(tasks)
    attempts = {t.key: 0 for t in tasks}
    pool = [_Worker(ctx, fn) for _ in range(min(workers, len(tasks)))]
    try:
        while queue or any(w.task is not None for w in pool):
            for w in pool:
                if w.task is None and queue:
                    task = queue.popleft()
                    attempts[task.key] += 1
                    w.send_task(task, payloads)
            busy = [w for w in pool if w.task is not None]
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for w in busy:
                task = w.task
                if w.conn in ready or w.conn.poll():
                    try:
                        status, value = w.conn.recv()
                    except (EOFError, OSError):
                        status, value = "died", None
                else:
                    status, value = ("died", None) if w.process.sentinel in ready else ("running", None)
                if status == "running":
                    continue
                w.task = None
                if status == "ok":
                    yield task, value
                elif status == "error":
                    yield task, Lost(value, attempts[task.key])
                else:  # the worker process died under this task: replace it, retry the task
                    w.process.join()
                    why = f"worker process died (exit code {w.process.exitcode})"
                    w.stop()
                    pool[pool.index(w)] = _Worker(ctx, fn)
                    if attempts[task.key] <= max_retries:
                        queue.appendleft(task)
                    else:
                        yield task, Lost(f"{why} on each of {attempts[task.key]} attempt(s)", attempts[task.key])
    finally:
        for w in pool:
            w.stop()


# ---------------------------------------------------------------------- Ray
def _ray_options(resources: dict[str, float], cluster_gpus: float) -> dict[str, float]:
    """A GPU request on a cluster without GPUs would wait forever: run on a CPU instead."""
    options = dict(resources)
    if options.get("num_gpus", 0) > cluster_gpus:
        warnings.warn(f"a task asks for {options['num_gpus']:g} GPU(s) but the Ray cluster has {cluster_gpus:g}; "
                      "running it on one CPU", RuntimeWarning, stacklevel=3)
        options.pop("num_gpus")
        options.setdefault("num_cpus", 1.0)
    return options


def _run_ray(fn: Callable[..., Any], payloads: dict[str, Any], tasks: Sequence[Task], workers: int | None,
             max_retries: int, address: str | None) -> Iterator[tuple[Task, Any]]:
    started = init_ray(address, num_cpus=workers)
    ray = ray_module()
    try:
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0.0))
        # Ray retries a task whose worker died (max_retries); an exception raised by fn is final.
        remote = ray.remote(max_retries=max_retries, retry_exceptions=False)(fn)
        refs = {group: ray.put(payloads[group]) for group in {t.group for t in tasks}}
        pending = {}
        for task in tasks:
            options = _ray_options(task.resources, cluster_gpus)
            pending[remote.options(**options).remote(refs[task.group], *task.args)] = task
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                value = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:  # fn raised: reported, not retried
                cause = exc.cause if exc.cause is not None else exc
                value = Lost(f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}", 1)
            except ray.exceptions.RayError as exc:  # the worker died on every attempt
                value = Lost(f"{type(exc).__name__}: {str(exc).splitlines()[0]} (after {max_retries + 1} attempt(s))",
                             max_retries + 1)
            yield task, value
    finally:
        if started:
            ray.shutdown()
