"""Ray for every part that runs on a cluster (the executors of ``eval`` and the collector's
shards): ``import ray`` quietly (``ray_module``) and connect to, or start, a Ray (``init_ray``:
token authentication, and one line instead of minutes of retries when a head is not there or
refuses the token). Below both users, so the collector does not import the evaluation package.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

from routing_gym.errors import RoutingGymError, UsageError

# Environment for a quiet, offline Ray start: no usage report, no dashboard download checks.
RAY_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
                 "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "RAY_DEDUP_LOGS": "0"}
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"  # token | disabled; Ray's name
RAY_CONNECT_TIMEOUT_S = 5.0  # a head that does not accept a TCP connection in this time is not there
SCALING_DOCS = "docs/scaling.md, 'Starting a cluster'"
TOKEN_COPY = "copy the head's ~/.ray/auth_token to ~/.ray/auth_token here (or set RAY_AUTH_TOKEN_PATH to a copy)"


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
