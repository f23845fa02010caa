"""HumanEval: run the completion against the unit tests in a sandboxed subprocess.

The program never runs in the calling process. Each run gets:

- a fresh Python interpreter (``-I``: no user site, no ``PYTHON*`` variables) in its own
  session, killed with its whole process group at the wall-clock timeout;
- resource limits: address space (``RLIMIT_AS``), CPU seconds, file size, open files and,
  for a non-root user, no new processes (``RLIMIT_NPROC``);
- a throw-away working directory that is also ``HOME`` and ``TMPDIR``, removed afterwards,
  and an empty environment;
- no network: a new network namespace when the kernel allows it (``unshare``), and in every
  case ``socket`` disabled inside the interpreter;
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


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run (defaults suit HumanEval's small unit tests)."""

    timeout_s: float = 10.0  # wall clock, from start to kill
    cpu_s: int = 10  # RLIMIT_CPU
    memory_mb: int = 1024  # RLIMIT_AS (virtual address space)
    file_mb: int = 8  # RLIMIT_FSIZE: largest file the program may write
    open_files: int = 64  # RLIMIT_NOFILE


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
import builtins, faulthandler, io, os, sys
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
               "unsetenv", "popen", "startfile", "register_at_fork"):
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
os.environ.clear()
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


def _libc_unshare(flags: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(flags) == 0
    except (OSError, AttributeError):
        return False


def _limit_child(limits: SandboxLimits) -> None:
    """preexec_fn: runs in the forked child just before it executes Python."""
    # Network namespace: as root directly, otherwise inside a new user namespace.
    if os.geteuid() == 0:
        _libc_unshare(CLONE_NEWNET)
    else:
        _libc_unshare(CLONE_NEWUSER | CLONE_NEWNET)
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC; the guard blocks fork for root too
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def run_sandboxed(program: str, entry_point: str, limits: SandboxLimits | None = None) -> RunResult:
    """Run ``program`` (solution + ``check`` function) in a sandboxed interpreter.

    Passes when ``check(<entry_point>)`` returns without raising.
    """
    limits = limits or SandboxLimits()
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
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "guard.py", token, str(result_path), entry_point],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True, preexec_fn=lambda: _limit_child(limits), close_fds=True,
            )
            try:
                proc.wait(timeout=limits.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        seconds = time.monotonic() - start
        if timed_out:
            return RunResult("timeout", None, f"killed after {limits.timeout_s:g} s wall clock", seconds)
        passed = _read_small(result_path) == token
        if passed and proc.returncode == 0:
            return RunResult("passed", 0, "all tests passed", seconds)
        detail = _last_error(_read_small(workdir / "stderr", 20_000))
        if proc.returncode is not None and proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else proc.returncode
            return RunResult("crashed", proc.returncode, f"killed by {sig} (resource limit?) {detail}".strip(), seconds)
        return RunResult("failed", proc.returncode, detail or f"exit status {proc.returncode} without passing", seconds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    # The whole session: also kills anything the program managed to start.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


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
