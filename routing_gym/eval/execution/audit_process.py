"""The audit's process: the second fit and act runs where the real held-out outcomes never were.

A cell (``compare.cells.run_cell``, in whichever process its executor runs it: the driver, a
process-pool worker or a Ray worker) sends the audit's run to a separate Python process that
this module starts once per process running cells and per audited tournament, and that serves
every audit run of the comparison there (nothing real is in it, so runs may share it). It is
started with ``subprocess`` (not ``fork``: it inherits no memory) and sees a *world*, a
temporary directory written once and removed when the process closes:

- ``copy/``: the replaced copy (``audit.replaced_holdout``), a tournament directory;
- ``site/routing_gym_envs_data/``: the shipped data package, first on the process's
  ``sys.path``: each shipped tournament whose data card is the audited one's is the copy, every
  other shipped tournament is absent;
- ``cache/`` (``ROUTING_GYM_CACHE``): ``tournaments/<name>`` is the copy for each cached build
  whose card is the audited one's, other builds are absent; the package's asset folders
  (``SHARED_CACHE``: embeddings, features, offline models, wheels) link to the real cache;
- ``data/`` (``ROUTING_GYM_DATA_DIR``): empty, so nothing can be rebuilt from the raw data;
- every name and directory that gave the tournament in the comparison's driver
  (``sources.aliases_of``), and the real shipped and cached directories that matched, resolve to
  the copy without anything being built or loaded (``sources.stand_in``); whatever else
  ``resolve_tournament`` returns with the original's content (a preset registered under another
  name) is the copy.

A request names a top-level function (``fitting.held_out_actions`` for a ``compare`` cell,
``frontier.audited_sweep`` for a frontier curve), called with the copy. The agent's class is
found as in a worker: built-in agents and entry points, the comparison's
``imports``, then the class's own module (a script's ``__main__`` is run again under
``__mp_main__`` as spawned workers do, unless its top-level code is not guarded). The run's
actions come back over a pipe of their own (the agent may print).
"""

from __future__ import annotations

import importlib
import json
import multiprocessing.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from routing_gym.envs.rewards import gate_reported
from routing_gym.errors import RoutingGymError
from routing_gym.eval.execution import audit as audit_results
from routing_gym.paths import CACHE_DIR_ENV, DATA_DIR_ENV, cache_dir, shipped_data_dir
from routing_gym.tournament import Tournament

# Cache folders the package fills with assets computed from texts or downloaded (not outcomes):
# the audit's process reads the real ones, so an embedding or a converted model is not redone.
SHARED_CACHE = ("embeddings", "features", "offline", "wheels")
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from routing_gym.eval.execution.audit_process import serve; serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))")
WORLD_PREFIX, OWNERS = "routing-gym-audit-", "owners"  # a world's folder, and the file naming its two processes
MAIN_MODULES = ("__main__", "__mp_main__")  # a script's module in the driver / in a spawned worker
Aliases = tuple[tuple[str, ...], tuple[str, ...]]  # names, directories (sources.aliases_of)


def _card(path: Path) -> Any:
    try:
        return json.loads((path / "card.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_world(root: Path, t: Tournament, test_split: str, aliases: Aliases = ((), ())) -> None:
    """Write the world of the audit of ``t`` under ``root`` (module docstring); ``aliases``:
    the names and directories that gave ``t`` (``sources.aliases_of``)."""
    copy = audit_results.replaced_holdout(t, test_split)
    copy.save(root / "copy")
    card = json.loads(json.dumps(t.card.to_dict(), sort_keys=True))
    names, originals = list(aliases[0]), list(aliases[1])
    package = root / "site" / "routing_gym_envs_data"
    package.mkdir(parents=True)
    for entry in shipped_data_dir().iterdir():
        if (entry / "card.json").exists():
            if _card(entry) == card:
                (package / entry.name).symlink_to(root / "copy", target_is_directory=True)
                originals.append(str(entry))
        elif entry.is_file():  # the package's __init__.py
            shutil.copy2(entry, package / entry.name)
    (root / "cache" / "tournaments").mkdir(parents=True)
    real_cache = cache_dir()
    for entry in sorted((real_cache / "tournaments").glob("*/")):
        if _card(entry) == card:
            (root / "cache" / "tournaments" / entry.name).symlink_to(root / "copy", target_is_directory=True)
            originals.append(str(entry))
    for name in SHARED_CACHE:
        if (real_cache / name).is_dir():
            (root / "cache" / name).symlink_to(real_cache / name, target_is_directory=True)
    (root / "data").mkdir()
    (root / "world.json").write_text(json.dumps({"fingerprint": t.fingerprint, "test_split": test_split,
                                                 "names": names, "directories": originals}))


class AuditProcess:
    """The audit's process for one tournament and held-out split, with its world."""

    def __init__(self, t: Tournament, test_split: str, aliases: Aliases = ((), ())) -> None:
        self.key = (t.fingerprint, t.split_fingerprint, test_split, aliases)
        remove_stale_worlds()
        self.root = Path(tempfile.mkdtemp(prefix=WORLD_PREFIX))
        try:
            write_world(self.root, t, test_split, aliases)
            child_reads, parent_writes = os.pipe()
            parent_reads, child_writes = os.pipe()
            env = dict(os.environ, **{CACHE_DIR_ENV: str(self.root / "cache"), DATA_DIR_ENV: str(self.root / "data")})
            # The same modules as here (a test folder, a user's folder), the world's package first.
            env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(self.root / "site"), str(self.root), str(child_reads), str(child_writes)],
                # its own session: a signal to the cell's process group (Ray stopping a worker) leaves it to
                # see the pipe close and remove its world
                env=env, pass_fds=(child_reads, child_writes), stdin=subprocess.DEVNULL, start_new_session=True)
            os.close(child_reads)
            os.close(child_writes)
            (self.root / OWNERS).write_text(f"{os.getpid()} {self.process.pid}\n")
            self.outbox = Connection(parent_writes, readable=False)
            self.inbox = Connection(parent_reads, writable=False)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, request: dict[str, Any]) -> tuple[np.ndarray | None, str, float]:
        """Fit and act in the audit's process: ``(actions, "", seconds)`` or ``(None, error, seconds)``."""
        tic = time.perf_counter()
        try:
            self.outbox.send(request)
            reply = self.inbox.recv()
        except (EOFError, OSError):
            self.process.wait()
            return None, f"the audit's process died (exit code {self.process.returncode})", time.perf_counter() - tic
        if reply[0] == "ok":
            return reply[1], "", time.perf_counter() - tic
        return None, reply[1], time.perf_counter() - tic

    def close(self) -> None:
        try:
            self.outbox.send(None)
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.outbox.close()
        self.inbox.close()
        shutil.rmtree(self.root, ignore_errors=True)


def remove_stale_worlds() -> None:
    """Remove the worlds whose cell process and audit process are both gone: killed together
    (Ray kills a worker's children with it), neither could remove its own."""
    for root in Path(tempfile.gettempdir()).glob(f"{WORLD_PREFIX}*"):
        try:
            pids = [int(p) for p in (root / OWNERS).read_text().split()]
        except (OSError, ValueError):
            continue  # being written, or not a world
        if not any(_alive(pid) for pid in pids):
            shutil.rmtree(root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


_current: AuditProcess | None = None  # this process's audit process (one world at a time)


def audit_run(t: Tournament, test_split: str, aliases: Aliases, request: dict[str, Any]) -> tuple[np.ndarray | None, str, float]:
    """``request`` run by this process's audit process for ``t`` (started, or restarted for
    another tournament, on demand)."""
    global _current
    key = (t.fingerprint, t.split_fingerprint, test_split, aliases)
    if _current is not None and (_current.key != key or not _current.alive()):
        close_audit_process()
    if _current is None:
        _current = AuditProcess(t, test_split, aliases)
    return _current.run(request)


def close_audit_process() -> None:
    """Stop this process's audit process and remove its world (end of a run; process exit)."""
    global _current
    if _current is not None:
        current, _current = _current, None
        current.close()


# Runs at exit in the driver and in spawned pool workers alike (they leave through os._exit).
multiprocessing.util.Finalize(None, close_audit_process, exitpriority=0)


def request_for(cls: type, call: str, kwargs: dict[str, Any], imports: tuple[str, ...] = ()) -> dict[str, Any] | str:
    """A request to run ``call`` ("module:function", called with the copy and ``kwargs``) for an
    agent of class ``cls`` in the audit's process, or why the process cannot build that agent."""
    module, main_path = cls.__module__, ""
    if "<locals>" in cls.__qualname__:
        return f"{cls.__qualname__} is defined inside a function: the audit's process cannot build it again"
    if module in MAIN_MODULES:
        from routing_gym.grading.base import unguarded_main_script

        main_path = getattr(sys.modules.get(module), "__file__", None) or ""
        if not main_path.endswith(".py") or unguarded_main_script():
            return (f"{cls.__qualname__} is defined in a script's top-level code outside 'if __name__ == \"__main__\":' "
                    "or in an interactive session: the audit's process cannot build it again; define it in a module")
    return {"call": call, "kwargs": kwargs, "imports": list(imports), "module": "" if main_path else module,
            "main_path": main_path}


def audit(cls: type, t: Tournament, test_split: str, aliases: Aliases, actions: np.ndarray, call: str,
          kwargs: dict[str, Any], imports: tuple[str, ...] = ()) -> audit_results.AuditResult:
    """The audit of one run whose held-out ``actions`` are known: ``call`` again in the audit's
    process on the copy of ``t``, and the verdict (``audit.compare_actions``); unverified when
    the agent cannot be built there or the run raises."""
    if cls.audit_skip_reason:
        return audit_results.AuditResult(audit_results.SKIPPED, reason=cls.audit_skip_reason)
    request = request_for(cls, call, kwargs, imports)
    if isinstance(request, str):
        return audit_results.AuditResult(audit_results.SKIPPED, reason=f"not audited: {request}")
    audited, error, seconds = audit_run(t, test_split, aliases, request)
    if audited is None:
        return audit_results.AuditResult(audit_results.ERROR, n=int(np.size(actions)), seconds=seconds,
                                         reason=f"the audit's run failed: {error[:120]}")
    return audit_results.compare_actions(np.ravel(actions), np.ravel(audited), seconds)


# ---------------------------------------------------------------------- the audit's process
def _enter_world(root: Path) -> Tournament:
    """Check that this process reads the world, and install the copy as the stand-in."""
    from routing_gym.sources import stand_in

    package, cache = shipped_data_dir(), cache_dir()
    if package != (root / "site" / "routing_gym_envs_data").resolve() or cache.resolve() != (root / "cache").resolve():
        raise RoutingGymError(f"the audit's process reads the shipped data from {package} and the cache from {cache}, "
                              "not from its world")
    world = json.loads((root / "world.json").read_text())
    copy = Tournament.load(root / "copy")
    stand_in(world["fingerprint"], copy, root / "copy", world["names"], world["directories"])
    return copy


def _rerun(request: dict[str, Any], copy: Tournament, mains: set[str]) -> np.ndarray:
    import runpy

    from routing_gym.plugins import import_user_module
    from routing_gym_agents.registry import load_plugins

    load_plugins()
    for module in request["imports"]:
        import_user_module(module)
    if request["main_path"] and request["main_path"] not in mains:
        runpy.run_path(request["main_path"], run_name="__mp_main__")  # a guarded script: registers, runs nothing
        mains.add(request["main_path"])
    elif request["module"]:
        importlib.import_module(request["module"])
    module, function = request["call"].split(":")
    with gate_reported():
        return np.asarray(getattr(importlib.import_module(module), function)(copy, **request["kwargs"]))


def serve(root: str, read_fd: int, write_fd: int) -> None:
    """The audit's process: answer each request with the run's actions, or what it raised;
    remove the world when the cell's process closes it or goes away."""
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    world, problem, mains = Path(root), "", set()
    try:
        try:
            copy = _enter_world(world)
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        while True:
            request = inbox.recv()  # EOFError: the cell's process is gone
            if request is None:
                return
            if problem:
                outbox.send(("error", problem))
                continue
            try:
                reply = ("ok", _rerun(request, copy, mains))
            except Exception as exc:
                reply = ("error", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            outbox.send(reply)
    except (EOFError, OSError):
        return
    finally:
        shutil.rmtree(world, ignore_errors=True)
