"""HumanEval grader: real problems, and hostile completions that must fail without harm."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from routing_gym.grading import HumanEvalGrader, SandboxLimits, get_grader, grade_batch
from routing_gym.grading.humaneval import build_program, extract_code, isolation_summary

PROMPT = 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
META = {"entry_point": "add", "code_prompt": PROMPT}

FAST = HumanEvalGrader("humaneval-test", limits=SandboxLimits(timeout_s=4.0, cpu_s=4, memory_mb=512))


def _grade(output: str):
    t0 = time.monotonic()
    result = FAST.grade(output, TEST, META)
    return result, time.monotonic() - t0


def _fenced(body: str) -> str:
    return "Here is my solution:\n```python\n" + body + "\n```\n"


def test_correct_completion_forms_pass():
    full = _fenced("def add(a: int, b: int) -> int:\n    return a + b")
    body_only = "    return a + b\n"
    with_main = _fenced("def add(a, b):\n    return a + b\n\nif __name__ == '__main__':\n    print(add(input(), 1))")
    for output in (full, body_only, with_main):
        result, _ = _grade(output)
        assert result.correct, result.reason


def test_wrong_and_broken_completions_fail_with_reason():
    result, _ = _grade(_fenced("def add(a, b):\n    return a - b"))
    assert not result.correct and "AssertionError" in result.reason
    result, _ = _grade(_fenced("def add(a, b)\n    return a + b"))
    assert not result.correct and "SyntaxError" in result.reason
    result, _ = _grade("")
    assert not result.correct and result.reason == "empty output"
    result, _ = _grade(None)  # type: ignore[arg-type]
    assert not result.correct and "not text" in result.reason


def test_exit_zero_is_not_a_pass():
    result, _ = _grade(_fenced("import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b"))
    assert not result.correct
    result, _ = _grade(_fenced("import os\nos._exit(0)"))
    assert not result.correct


def test_infinite_loop_is_killed_at_the_timeout():
    result, elapsed = _grade(_fenced("def add(a, b):\n    while True:\n        pass"))
    assert not result.correct
    assert result.reason.startswith("timeout")
    assert elapsed < 4.0 + 3.0


def test_memory_exhaustion_fails_and_the_caller_survives():
    result, elapsed = _grade(_fenced("def add(a, b):\n    x = bytearray(4 * 1024 ** 3)\n    return a + b"))
    assert not result.correct and "MemoryError" in result.reason
    result, _ = _grade(_fenced("def add(a, b):\n    x = []\n    while True:\n        x.append(' ' * 10 ** 6)"))
    assert not result.correct
    assert elapsed < 7.0


def _marker_processes(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.mark.parametrize(
    "body",
    [
        "import subprocess\nsubprocess.Popen(['sleep', '{m}'])",
        "import os\nos.system('sleep {m} &')",
        "import os\nif os.fork() == 0:\n    os.execv('/bin/sleep', ['sleep', '{m}'])",
        "import multiprocessing, time\nmultiprocessing.Process(target=time.sleep, args=({m},)).start()",
        # bypasses the in-process guard: only the PID namespace / process group stop it
        "import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
        "if libc.fork() == 0:\n    libc.setsid()\n    os.execv('/bin/sleep', ['sleep', '{m}'])\ntime.sleep(0.5)",
    ],
    ids=["subprocess", "system", "fork", "multiprocessing", "ctypes-fork-setsid"],
)
def test_spawned_processes_fail_and_do_not_survive(body):
    marker = f"{4000 + os.getpid() % 1000}.{time.monotonic_ns() % 10_000}"
    before = set(_marker_processes(marker))
    result, elapsed = _grade(_fenced("def add(a, b):\n    " + body.format(m=marker).replace("\n", "\n    ") + "\n    return None"))
    assert not result.correct
    assert elapsed < 7.0
    time.sleep(0.3)
    survivors = set(_marker_processes(marker)) - before
    if survivors and "PID namespace" not in " ".join(isolation_summary()):
        pytest.xfail(f"no PID namespace here, a detached process survived: {survivors}")
    assert not survivors, f"sandboxed program left processes behind: {survivors}"


def test_file_deletion_and_writes_outside_are_blocked(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    attempts = [
        f"import os\nos.remove({str(victim)!r})",
        f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
        f"open({str(victim)!r}, 'w').write('overwritten')",
        f"import pathlib\npathlib.Path({str(victim)!r}).write_text('overwritten')",
        f"import os\nfd = os.open({str(victim)!r}, os.O_WRONLY | os.O_TRUNC)",
        "import shutil, os\nshutil.rmtree(os.path.expanduser('~'))\nraise SystemExit('home removed')",
    ]
    for attempt in attempts:
        result, _ = _grade(_fenced("def add(a, b):\n    " + attempt.replace("\n", "\n    ") + "\n    return a + b"))
        assert not result.correct, attempt
        assert victim.read_text() == "precious", attempt
    assert Path.cwd().exists()


def test_no_network(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    hits: list[bytes] = []

    def accept():
        server.settimeout(6)
        try:
            conn, _ = server.accept()
            hits.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    body = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}))\ns.sendall(b'leak')\nreturn a + b"
    result, _ = _grade(_fenced("def add(a, b):\n    " + body.replace("\n", "\n    ")))
    # a raw _socket bypasses the in-process guard; the network namespace still stops it
    raw = f"import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {port}))\ns.send(b'leak')\nreturn a + b"
    result_raw, _ = _grade(_fenced("def add(a, b):\n    " + raw.replace("\n", "\n    ")))
    server.close()
    thread.join()
    assert not result.correct
    if "network namespace (no interfaces)" in isolation_summary():
        assert not result_raw.correct
        assert hits == []


def test_extract_code_and_program_assembly():
    out = "Sure.\n```python\ndef helper():\n    return 1\n```\nand\n```python\ndef add(a, b):\n    return a + b\n```"
    assert extract_code(out, "add").startswith("def add")
    assert extract_code('{"code": "```python\\ndef add(a, b):\\n    return a + b\\n```"}', "add").startswith("def add")
    program = build_program(PROMPT, "    return a + b\n", TEST, "add")
    assert program.startswith(PROMPT + "    return a + b")


def test_real_problems_canonical_pass_and_stub_fails(data_dir):
    from routing_gym.sources.benchmarks import load_benchmark

    df = load_benchmark("humaneval", data_dir)
    assert len(df) == 164
    sample = df.iloc[::8]  # 21 problems keep the test fast; the build script runs all 164
    refs, metas = list(sample.reference), list(sample.metadata)
    good = ["```python\n" + m["code_prompt"] + m["canonical_solution"] + "```" for m in metas]
    stub = [m["code_prompt"] + "    pass\n" for m in metas]
    results = grade_batch("humaneval", good + stub, refs + refs, metas + metas, processes=2, disable_progress=True)
    assert all(r.correct for r in results[: len(good)]), [r.reason for r in results[: len(good)] if not r.correct]
    assert not any(r.correct for r in results[len(good):])


def test_registry_returns_the_sandboxed_grader():
    assert isinstance(get_grader("humaneval"), HumanEvalGrader)
