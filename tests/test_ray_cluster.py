"""The documented Ray cluster workflow (docs/scaling.md) against a real head node.

A head is started with ``ray start --head`` in a subprocess on a free loopback port, with
authentication as Ray 2.60 sets it up by default: a token in ``~/.ray/auth_token`` (made by
``ray get-auth-token --generate``) and ``RAY_AUTH_MODE`` unset, so the head turns token
authentication on. A two-cell ``routing-gym compare --executor ray --ray-address`` must give the
local executor's table; a missing or wrong token and an address where nothing listens must each
give one line on stderr (no traceback, no retry per second).

The head has its own HOME (token), temp dir and process group, so it touches no other Ray on the
machine, and it is stopped by its own process (never ``ray stop``, which stops every Ray here).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import make_tournament
from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs
from routing_gym.tournament.tournament import save_tournament

pytestmark = pytest.mark.slow

# compare's rule: settings that cannot work, found before any training, exit with status 2.
BAD_SETTINGS_STATUS = 2
RAY_ENV_OF_THE_CALLER = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the caller's Ray settings, with its own HOME."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_ENV_OF_THE_CALLER}
    env.update(HOME=str(home), OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0", **extra)
    return env


def _ray_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ray.scripts.scripts", *args]


def _processes_of(base: Path) -> list[int]:
    """Processes whose command line or environment (HOME) names ``base``: every process of a head
    started there, including the agents and workers that rename themselves ``ray::...``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and any(str(base).encode() in (entry / name).read_bytes()
                                            for name in ("cmdline", "environ")):
                pids.append(int(entry.name))
        except OSError:  # the process ended while we looked, or is not ours to read
            continue
    return pids


class Head:
    """A ``ray start --head --block`` in its own process group, HOME and temp dir."""

    def __init__(self, base: Path) -> None:
        self.base, self.home, self.temp_dir = base, base / "home", base / "ray"
        self.home.mkdir()
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        subprocess.run(_ray_cli("get-auth-token", "--generate"), env=_env(self.home), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        self.log = base / "head.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                _ray_cli("start", "--head", f"--port={self.port}", "--num-cpus=2", "--include-dashboard=false",
                         f"--dashboard-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
                         f"--temp-dir={self.temp_dir}", "--block"),
                # no drain on SIGTERM: nothing to drain, and it would wait 30 s
                env=_env(self.home, RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0"),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def wait_until_up(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while "Ray runtime started" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start --head did not come up:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to this head's ``ray start`` (it stops its own processes), then SIGKILL to
        anything of this head's still running."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for pid in _processes_of(self.base):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def head():
    # Short path: Ray's Unix sockets live under the temp dir (a 107-byte limit).
    base = Path(tempfile.mkdtemp(prefix="rg-head-", dir="/tmp"))
    started = Head(base)
    try:
        started.wait_until_up()
        yield started
    finally:
        started.stop()
        shutil.rmtree(base, ignore_errors=True)
    time.sleep(1)  # SIGKILLed processes leave the process table
    assert not _processes_of(base), "the head left processes running"


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory) -> Path:
    return save_tournament(make_tournament(), tmp_path_factory.mktemp("toy") / "toy")


def _compare(toy_dir: Path, out: Path, env: dict[str, str], *executor: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "routing_gym", "compare", "--tournament", str(toy_dir), "--agents", "linucb,knn",
               "--seeds", "1", "--bootstrap", "200", "--no-plots", "--out", str(out), "--executor", *executor]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _local_table(toy_dir: Path, out: Path) -> str:
    config = CompareConfig(tournament=str(toy_dir), agents=["linucb", "knn"], seeds=1, n_bootstrap=200,
                           progress=False, executor="local")
    return write_outputs(run_compare(config, out_dir=out), out, plots=False)["table.md"].read_text()


def test_two_cells_on_a_token_authenticated_head_give_the_local_table(head, toy_dir, tmp_path):
    assert "Token authentication is enabled for this Ray cluster" in head.log.read_text()
    # The driver has the head's token (same HOME) and RAY_AUTH_MODE unset, as on a node that got
    # the token file: routing-gym sends the token, as Ray does for a local cluster.
    run = _compare(toy_dir, tmp_path / "ray", _env(head.home), "ray", "--ray-address", head.address)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "[2/2]" in run.stderr and "Traceback" not in run.stderr
    assert "InvalidAuthToken" not in run.stderr and "Token authentication is" not in run.stderr
    assert (tmp_path / "ray" / "table.md").read_text() == _local_table(toy_dir, tmp_path / "local")


def test_a_ray_started_here_with_ray_start_is_reused_without_an_address(head, toy_dir, tmp_path):
    run = _compare(toy_dir, tmp_path / "ray", _env(head.home, RAY_TMPDIR=str(head.base)), "ray", "--workers", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    # ray start records the head under this machine's address, whichever address the driver would use
    assert re.search(rf"routing-gym compare: warning: using the Ray already running on this machine at \S+:{head.port} "
                     r"\(from `ray start`\); --workers 2 does not apply to it", run.stderr), run.stderr[-3000:]
    assert (tmp_path / "ray" / "table.md").read_text() == _local_table(toy_dir, tmp_path / "local")


def _one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == BAD_SETTINGS_STATUS, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "InvalidAuthToken" not in run.stderr, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, run.stderr[-3000:]
    return errors[0]


def test_a_driver_without_the_token_gets_one_line_saying_how_to_bring_it(head, toy_dir, tmp_path):
    (tmp_path / "home").mkdir()
    run = _compare(toy_dir, tmp_path / "out", _env(tmp_path / "home"), "ray", "--ray-address", head.address)
    assert _one_line_error(run) == (
        f"routing-gym compare: error: the Ray cluster at {head.address} requires its authentication token and this "
        "machine has none: copy the head's ~/.ray/auth_token to ~/.ray/auth_token here (or set RAY_AUTH_TOKEN_PATH "
        "to a copy) and export RAY_AUTH_MODE=token (docs/scaling.md, 'Starting a cluster')")


def test_a_driver_with_another_token_gets_one_line_naming_where_it_came_from(head, toy_dir, tmp_path):
    env = _env(head.home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="not-the-heads-token")
    run = _compare(toy_dir, tmp_path / "out", env, "ray", "--ray-address", head.address)
    assert _one_line_error(run) == (
        f"routing-gym compare: error: the Ray cluster at {head.address} refused the authentication token from "
        "RAY_AUTH_TOKEN: it is not the head's; `ray get-auth-token` on the head prints the right one "
        "(docs/scaling.md, 'Starting a cluster')")


def test_an_address_where_nothing_listens_is_one_line_at_once(toy_dir, tmp_path):
    port = _free_port()
    run = _compare(toy_dir, tmp_path / "out", _env(tmp_path), "ray", "--ray-address", f"127.0.0.1:{port}")
    assert _one_line_error(run) == (
        f"routing-gym compare: error: no Ray head answers at 127.0.0.1:{port} (Connection refused): start one there "
        f"with `ray start --head --port={port}`, or correct --ray-address / RAY_ADDRESS")
