"""HumanEval: run the completion against the unit tests in a sandboxed subprocess.

The program never runs in the calling process. Each run gets:

- a fresh Python interpreter (``-I``: no user site, no ``PYTHON*`` variables) in its own
  session, killed with its whole process group at the wall-clock timeout;
- resource limits: address space (``RLIMIT_AS``), CPU seconds, file size, open files and,
  for a non-root user, at most 64 more processes (``RLIMIT_NPROC``);
- a throw-away working directory that is also ``HOME`` and ``TMPDIR``, removed afterwards,
  and an empty environment;
- no network: a new network namespace when the kernel allows it (``unshare``), and in every
  case ``socket`` disabled inside the interpreter;
- a new PID namespace when allowed, so every process the program starts dies with it;
- a guard, run before the completion, that disables process creation, signals,
  destructive file operations (``os.remove``, ``shutil.rmtree``, ``subprocess``, ...) and
  writing files outside the working directory;
- a pass only when the test harness writes a per-run random token after ``check()``
  returned, so ``sys.exit(0)`` in a completion is not a pass.

This is defence in depth for model-written code, not a security boundary against an
adversary (the guard runs in the same interpreter as the code). Run untrusted code in a
container or VM as well.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routing_gym.grading.base import Grader, GraderInputError, GradeResult

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
NPROC_MARGIN = 64


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run (defaults suit HumanEval's small unit tests)."""

    timeout_s: float = 10.0  # wall clock, from start to kill
    cpu_s: int = 10  # RLIMIT_CPU
    memory_mb: int = 1024  # RLIMIT_AS (virtual address space)
    file_mb: int = 8  # RLIMIT_FSIZE: largest file the program may write
    open_files: int = 64  # RLIMIT_NOFILE
    site_packages: bool = False  # False: standard library only (faster start, nothing installed)


@dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed run: ``status`` is passed, failed, timeout or crashed."""

    status: str
    returncode: int | None
    detail: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# Runs first in the child. Disables networking, process creation, signals and destructive
# file operations, then executes the solution in its own namespace (so a solution's
# ``if __name__ == "__main__":`` block does not run, as in the human-eval harness).
_GUARD = r'''
import os, sys
# Fork first: in a new PID namespace the child is its PID 1, and when PID 1 ends the kernel
# kills every process it started, even one that left the session. The parent records the
# child's pid so the grader can kill it at the timeout, then waits and passes on its status.
_child = os.fork()
if _child:
    with open("pid1", "w") as _f:
        _f.write(str(_child))
    _, _status = os.waitpid(_child, 0)
    os._exit(os.waitstatus_to_exitcode(_status) % 256)
import builtins, faulthandler, io
faulthandler.disable()
def _blocked(*a, **k):
    raise PermissionError("disabled in the routing-gym sandbox")
import socket
for _n in ("socket", "create_connection", "create_server", "socketpair", "fromfd", "getaddrinfo"):
    setattr(socket, _n, _blocked)
import posix, shutil, subprocess
try:
    import _posixsubprocess
    _posixsubprocess.fork_exec = _blocked
except ImportError:
    pass
for _mod in (os, posix):
    for _n in ("kill", "killpg", "system", "fork", "forkpty", "vfork", "spawnv", "spawnve", "spawnvp",
               "spawnvpe", "execv", "execve", "execvp", "execvpe", "posix_spawn", "posix_spawnp",
               "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate",
               "ftruncate", "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown", "chroot", "link",
               "symlink", "setuid", "setgid", "seteuid", "setegid", "setreuid", "setregid", "putenv",
               "unsetenv", "popen", "startfile", "setsid", "setpgid", "setpgrp"):
        if hasattr(_mod, _n):
            setattr(_mod, _n, _blocked)
for _n in ("rmtree", "move", "chown", "copytree", "copy", "copy2", "copyfile"):
    setattr(shutil, _n, _blocked)
subprocess.Popen = _blocked
subprocess.run = subprocess.call = subprocess.check_call = subprocess.check_output = _blocked
_root = os.path.realpath(os.getcwd())
_real_open, _real_os_open = builtins.open, os.open
def _inside(path):
    p = os.path.realpath(os.fspath(path))
    return p == _root or p.startswith(_root + os.sep)
def _open(file, mode="r", *a, **k):
    if not isinstance(file, int) and any(c in mode for c in "wax+") and not _inside(file):
        raise PermissionError(f"writing outside the sandbox directory: {file!r}")
    return _real_open(file, mode, *a, **k)
def _os_open(path, flags, *a, **k):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND) and not _inside(path):
        raise PermissionError(f"writing outside the sandbox directory: {path!r}")
    return _real_os_open(path, flags, *a, **k)
builtins.open = io.open = _open
os.open = posix.open = _os_open
sys.stdin = io.StringIO()
_token, _result_path, _entry = sys.argv[1], sys.argv[2], sys.argv[3]
_src = open("solution.py", encoding="utf-8").read()
_ns = {"__name__": "solution", "__builtins__": builtins}
exec(compile(_src, "solution.py", "exec"), _ns)
if _entry not in _ns:
    raise NameError(f"the program defines no function {_entry!r}")
_ns["check"](_ns[_entry])
with open(_result_path, "w") as _f:
    _f.write(_token)
'''


_ISOLATION: dict[str, int] = {}


def _unshare(flags: int) -> None:
    """unshare(2) in the forked child; maps our uid/gid when a user namespace is created."""
    if not flags:
        return
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    if flags & CLONE_NEWUSER:  # keep our own uid inside, so files stay writable
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)


def _limit_child(limits: SandboxLimits, ns_flags: int) -> None:
    """preexec_fn: runs in the forked child just before it executes Python."""
    _unshare(ns_flags)
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC; the guard and the PID namespace cover root
        # bounds a fork bomb; the margin leaves room for the guard's own fork and concurrent sandboxes
        resource.setrlimit(resource.RLIMIT_NPROC, (_count_own_processes() + NPROC_MARGIN,) * 2)


def _count_own_processes() -> int:
    uid, n = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                n += entry.stat().st_uid == uid
            except OSError:
                pass
    return n


def namespace_flags() -> int:
    """The namespaces this machine lets the sandbox use (probed once, then cached).

    Tries a new network + PID namespace (plus a user namespace when not root) and falls back
    to none where the kernel or container forbids them; the in-interpreter guard applies
    either way.
    """
    if "flags" not in _ISOLATION:
        wanted = CLONE_NEWNET | CLONE_NEWPID | (0 if os.geteuid() == 0 else CLONE_NEWUSER)
        probe = "def f():\n    return 1\n\ndef check(c):\n    assert c() == 1\n"
        _ISOLATION["flags"] = 0
        for flags in (wanted, 0):
            if _run(probe, "f", SandboxLimits(timeout_s=20), flags).passed:
                _ISOLATION["flags"] = flags
                break
    return _ISOLATION["flags"]


def isolation_summary() -> list[str]:
    """What isolates a sandboxed run on this machine, for logs and reports."""
    flags = namespace_flags()
    out = ["subprocess in its own session", "rlimits: address space, CPU, file size, open files"]
    if os.geteuid() != 0:
        out.append(f"rlimit: at most {NPROC_MARGIN} more processes")
    out.append("network namespace (no interfaces)" if flags & CLONE_NEWNET else "no network namespace (socket blocked in-process only)")
    if flags & CLONE_NEWPID:
        out.append("PID namespace (every process it starts dies with it)")
    out.append("in-process guard: no sockets, fork, exec, signals, deletes or writes outside the temp dir")
    return out


def run_sandboxed(program: str, entry_point: str, limits: SandboxLimits | None = None) -> RunResult:
    """Run ``program`` (solution + ``check`` function) in a sandboxed interpreter.

    Passes when ``check(<entry_point>)`` returns without raising.
    """
    return _run(program, entry_point, limits or SandboxLimits(), namespace_flags())


def _run(program: str, entry_point: str, limits: SandboxLimits, ns_flags: int) -> RunResult:
    workdir = Path(tempfile.mkdtemp(prefix="routing-gym-sandbox-"))
    token = secrets.token_hex(16)
    start = time.monotonic()
    try:
        (workdir / "solution.py").write_text(program, encoding="utf-8")
        (workdir / "guard.py").write_text(_GUARD, encoding="utf-8")
        result_path = workdir / "result"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        with open(workdir / "stderr", "wb") as err:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", *([] if limits.site_packages else ["-S"]), "guard.py",
                     token, str(result_path), entry_point],
                    cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    start_new_session=True, preexec_fn=lambda: _limit_child(limits, ns_flags), close_fds=True,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                return RunResult("crashed", None, f"could not start the sandbox: {exc}", time.monotonic() - start)
            try:
                proc.wait(timeout=limits.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc, workdir / "pid1")
        seconds = time.monotonic() - start
        if timed_out:
            return RunResult("timeout", None, f"killed after {limits.timeout_s:g} s wall clock", seconds)
        passed = _read_small(result_path) == token
        if passed and proc.returncode == 0:
            return RunResult("passed", 0, "all tests passed", seconds)
        detail = _last_error(_read_small(workdir / "stderr", 20_000))
        code = proc.returncode
        if code is not None and (code < 0 or code > 128):  # killed by a signal (e.g. SIGXCPU, SIGKILL)
            signum = -code if code < 0 else code - 128
            name = signal.Signals(signum).name if signum in signal.valid_signals() else str(signum)
            return RunResult("crashed", code, f"killed by {name} (resource limit?) {detail}".strip(), seconds)
        return RunResult("failed", code, detail or f"exit status {code} without passing", seconds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen, pid1_file: Path) -> None:
    """Kill the program: first its PID 1 (which tears down its PID namespace), then its group.

    PID 1's pid cannot have been reused: its parent (``proc``) has not reaped it yet, unless
    ``proc`` has exited, in which case PID 1 was reaped as it ended and is not signalled.
    """
    text = _read_small(pid1_file).strip()
    # the program could rewrite the file: only signal a pid that really is proc's child
    if proc.poll() is None and text.isdigit() and _parent_pid(int(text)) == proc.pid:
        try:
            os.kill(int(text), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after the parenthesised name


def _read_small(path: Path, limit: int = 256) -> str:
    try:
        with open(path, "rb") as f:
            if limit > 256:
                f.seek(max(0, os.path.getsize(path) - limit))
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _last_error(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(output: str, entry_point: str) -> str:
    """The code in a model's answer: the fenced block that defines ``entry_point`` (else the
    first fenced block, else a JSON ``"code"``/``"answer"`` field, else the raw text)."""
    blocks = _FENCE.findall(output)
    if blocks:
        for block in blocks:
            if re.search(rf"def\s+{re.escape(entry_point)}\s*\(", block):
                return block
        return blocks[0]
    stripped = output.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped, strict=False)
            for key in ("code", "completion", "answer", "solution"):
                if isinstance(obj, dict) and isinstance(obj.get(key), str):
                    return extract_code(obj[key], entry_point)
        except json.JSONDecodeError:
            pass
    return output


def build_program(code_prompt: str, completion: str, test: str, entry_point: str) -> str:
    """Prompt + completion + tests.

    A completion that continues the function body (indented first line) is appended to the
    prompt, as in the human-eval harness; a completion that (re)defines the function is
    appended after the prompt, so it replaces the docstring-only stub while keeping the
    prompt's imports and helper functions.
    """
    first = next((ln for ln in completion.splitlines() if ln.strip()), "")
    if first[:1] in (" ", "\t") and not re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", completion, re.M):
        body = code_prompt + completion
    else:
        body = code_prompt + "\n    pass\n\n" + completion
    return body + "\n\n" + test + "\n"


class HumanEvalGrader(Grader):
    """Functional correctness: the completion passes the problem's ``check`` function.

    ``reference`` is the test code (defining ``check(candidate)``); ``metadata`` must hold
    ``entry_point`` and ``code_prompt`` (the signature and docstring the model completed).
    """

    name = "humaneval"

    def __init__(self, name: str | None = None, limits: SandboxLimits | None = None):
        super().__init__(name)
        self.limits = limits or SandboxLimits()

    def check_reference(self, reference: Any, metadata: Mapping[str, Any]) -> None:
        super().check_reference(reference, metadata)
        if "def check" not in str(reference):
            raise GraderInputError("humaneval reference must be the test code defining check(candidate)")
        for key in ("entry_point", "code_prompt"):
            if not isinstance(metadata.get(key), str) or not metadata[key]:
                raise GraderInputError(f"humaneval metadata field {key!r} is missing or empty")

    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult:
        entry = str(metadata["entry_point"])
        code = extract_code(output, entry)
        program = build_program(str(metadata["code_prompt"]), code, str(reference), entry)
        run = run_sandboxed(program, entry, self.limits)
        return GradeResult(run.passed, code[:2000], f"{run.status} in {run.seconds:.2f} s: {run.detail}")
