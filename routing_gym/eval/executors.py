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

import contextlib
import multiprocessing
import os
import socket
import sys
import traceback
import warnings
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from routing_gym.errors import RoutingGymError, UsageError

EXECUTORS = ("local", "process", "ray")
DEFAULT_MAX_RETRIES = 2
# Environment for a quiet, offline Ray start: no usage report, no dashboard download checks.
RAY_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
                 "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "RAY_DEDUP_LOGS": "0"}
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"  # token | disabled; Ray's name
RAY_CONNECT_TIMEOUT_S = 5.0  # a head that does not accept a TCP connection in this time is not there
SCALING_DOCS = "docs/scaling.md, 'Starting a cluster'"
TOKEN_COPY = "copy the head's ~/.ray/auth_token to ~/.ray/auth_token here (or set RAY_AUTH_TOKEN_PATH to a copy)"


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
def ray_module() -> Any:
    """``import ray`` with the quiet, offline environment set; a clear error if missing."""
    for key, value in RAY_QUIET_ENV.items():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ModuleNotFoundError:
        raise RoutingGymError("the ray executor needs Ray: pip install 'routing-gym[ray]'") from None
    return ray


class RayConnectionError(UsageError):
    """No Ray head answers at an address, or it refuses this driver (a missing or wrong token):
    a setting that cannot work, exit status 2."""


def running_local_ray() -> str | None:
    """The address of a Ray that ``ray start`` left running on this machine, else None: the
    check ``ray start --head`` itself makes (the address it recorded, and a live GCS there)."""
    from ray._private import services

    address = services.find_bootstrap_address(None)
    return address if address and address in services.find_gcs_addresses() else None


def init_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Connect to ``address`` (or ``RAY_ADDRESS``; ``auto``: the Ray running here), else to a Ray
    that ``ray start`` left running on this machine, else start a local Ray with ``num_cpus``
    CPUs. True when this call connected or started Ray (the caller shuts it down), False when
    Ray was already up. A cluster that cannot be reached or refuses this driver's token is a
    one-line :class:`RayConnectionError` naming the cause and the fix."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address in (None, "auto"):
        running = running_local_ray()
        if running is None and address == "auto":
            raise RayConnectionError("Ray address 'auto': no Ray started with `ray start` runs on this machine; "
                                     "start one (`ray start --head`) or give no address to let routing-gym start its own")
        if running is not None:
            extra = f"; --workers {num_cpus} does not apply to it" if num_cpus else ""
            warnings.warn(f"using the Ray already running on this machine at {running} (from `ray start`){extra}",
                          RuntimeWarning, stacklevel=2)
        address = running
    if address is None:
        # A new local Ray turns token authentication on (Ray 2.60's default); saying so explicitly
        # keeps Ray from warning about that default on every run.
        if AUTH_MODE_VARIABLE not in os.environ:
            _set_ray_auth_mode("token")
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING")
        return True
    if not address.startswith("ray://"):  # Ray Client has its own protocol and reports its own errors
        _check_ray_head(address)
    try:
        ray.init(address=address, include_dashboard=False, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ray.exceptions.RayError) as exc:
        raise RayConnectionError(f"connecting to the Ray cluster at {address} failed: {_first_line(exc)}") from None
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _set_ray_auth_mode(mode: str) -> None:
    os.environ[AUTH_MODE_VARIABLE] = mode
    # Ray reads RAY_AUTH_MODE into its config once; make it read it again (what Ray itself does
    # when it turns token authentication on for a new local cluster).
    from ray._raylet import Config

    Config.initialize("")


def ray_token_source() -> str | None:
    """Where Ray finds this machine's authentication token, in Ray's order of precedence; None
    when there is none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH ({os.environ['RAY_AUTH_TOKEN_PATH']})"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Ray's C++ client logs each refused attempt to file descriptor 2; the caller's one-line
    error says it instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _check_ray_head(address: str) -> None:
    """Fail fast, in one line, where ``ray.init(address)`` would retry for minutes (nothing
    listens there) or log an authentication failure every second for 20 s before a traceback.

    Ray 2.60 turns token authentication on for a head that finds a token (``ray start --head``),
    but a driver given an address sends its token only with ``RAY_AUTH_MODE=token``. As Ray does
    for ``address="auto"``: with ``RAY_AUTH_MODE`` unset and a token on this machine, use it."""
    ray = ray_module()
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayConnectionError(f"Ray address {address!r} (--ray-address / RAY_ADDRESS): expected HOST:PORT, "
                                 "e.g. 10.0.0.1:6379, the port given to `ray start --head --port`")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise RayConnectionError(
            f"no Ray head answers at {address} ({exc.strerror or exc}): start one there with "
            f"`ray start --head --port={port}`, or correct --ray-address / RAY_ADDRESS") from None
    token = ray_token_source()
    mode = os.environ.get(AUTH_MODE_VARIABLE, "").lower() or None
    if mode is None and token:
        _set_ray_auth_mode(mode := "token")
    if mode == "token" and not token:
        raise RayConnectionError(f"RAY_AUTH_MODE=token but this machine has no Ray authentication token: "
                                 f"{TOKEN_COPY} ({SCALING_DOCS})")
    try:
        with _native_stderr_silenced():
            ray._raylet.GcsClient(address=address)  # what `ray status` opens first; refused at once without the token
    except ray.exceptions.AuthenticationError:
        if mode != "token" and token:
            raise RayConnectionError(f"the Ray cluster at {address} requires its authentication token and "
                                     f"RAY_AUTH_MODE is {mode!r} here: export RAY_AUTH_MODE=token to send the "
                                     f"token from {token} ({SCALING_DOCS})") from None
        if mode != "token":
            raise RayConnectionError(f"the Ray cluster at {address} requires its authentication token and this "
                                     f"machine has none: {TOKEN_COPY} and export RAY_AUTH_MODE=token "
                                     f"({SCALING_DOCS})") from None
        raise RayConnectionError(
            f"the Ray cluster at {address} refused the authentication token from {token}: it is not the head's; "
            f"`ray get-auth-token` on the head prints the right one ({SCALING_DOCS})") from None
    except ray.exceptions.RayError as exc:
        raise RayConnectionError(f"{address} accepts connections but no Ray head answers there ({_first_line(exc)}); "
                                 "is it the port given to `ray start --head --port`?") from None


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
