"""GPU energy meters for the collector.

Every meter measures a *call window*: ``start()`` just before the request is sent,
``stop()`` when the answer is back. ``stop()`` returns a :class:`Window` (gross joules,
seconds, sample count); :func:`energy_reading` turns it into the record fields with the idle
baseline subtracted. Kinds:

``nvml-counter``
    NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and
    newer): energy = counter difference. Exact up to the counter's ~100 ms update period, and
    catches short spikes that polling misses; preferred where supported.
``nvml-poll``
    The reference paper's method: board power polled every 200 ms in a background thread,
    integrated with the trapezoid rule over the call window. Uses the instantaneous power field
    (``NVML_FI_DEV_POWER_INSTANT``) where the driver has it, else ``nvmlDeviceGetPowerUsage``
    (a ~1 s moving average on Ampere and newer, which smears short calls).
``replay``
    A recorded power trace replayed against the clock (``routing_gym.collect.replay``), for
    tests and dry runs. Its energies are *synthetic*, not measurements of the call.
``none``
    No meter (no GPU, or disabled): energy is recorded as unmeasured (``null``), never zero.

The idle baseline is the median power over a window with the model resident and no request
in flight; the runner re-measures it after each model's warm-up and every
``energy.idle_every_s``. Net joules = gross − idle × latency, clipped at zero (and flagged).

The meter interface (``Meter``, ``Window``, ``NullMeter``, ``energy_reading``) is defined in
``meter_base.py`` and re-exported here. ``pynvml`` (package ``nvidia-ml-py``) is imported only when an NVML meter is made. Tests pass
``nvml=`` a stand-in with the same calls (``routing_gym.collect.replay.TraceNVML``).
"""

from __future__ import annotations

import sys
import threading
import time
from bisect import bisect_left, bisect_right
from typing import Any, Callable, Sequence

from routing_gym.collect.errors import MeterUnavailable
from routing_gym.collect.meter_base import (  # noqa: F401  (re-exported: the meter API lives here too)
    Clock,
    EnergyReading,
    Meter,
    NullMeter,
    Window,
    energy_reading,
    median_power,
    trapezoid,
)
from routing_gym.collect.replay import PowerTrace, ReplayMeter


# ---------------------------------------------------------------------- NVML
def import_pynvml() -> Any:
    try:
        import pynvml
    except ModuleNotFoundError as exc:
        raise MeterUnavailable(
            "NVML meters need the nvidia-ml-py package: pip install 'routing-gym[collect]'"
        ) from exc
    return pynvml


class _Nvml:
    """NVML opened for a set of devices; every NVML call of the meters goes through here."""

    def __init__(self, nvml: Any | None, devices: Sequence[int] | None) -> None:
        self.lib = nvml if nvml is not None else import_pynvml()
        try:
            self.lib.nvmlInit()
        except self.lib.NVMLError as exc:
            raise MeterUnavailable(_explain_init_error(self.lib, exc)) from exc
        self._open = True
        try:
            count = self.lib.nvmlDeviceGetCount()
            indices = list(range(count)) if devices is None else list(devices)
            if not indices:
                raise MeterUnavailable("NVML sees no GPU on this machine: energy cannot be measured")
            bad = [i for i in indices if not 0 <= i < count]
            if bad:
                raise MeterUnavailable(f"GPU index(es) {bad} requested but NVML sees {count} GPU(s)")
            self.indices = indices
            self.handles = [self.lib.nvmlDeviceGetHandleByIndex(i) for i in indices]
        except Exception:
            self.close()
            raise

    def names(self) -> list[str]:
        out = []
        for h in self.handles:
            name = self.lib.nvmlDeviceGetName(h)
            out.append(name.decode() if isinstance(name, bytes) else str(name))
        return out

    def driver(self) -> str:
        try:
            v = self.lib.nvmlSystemGetDriverVersion()
        except self.lib.NVMLError:
            return ""
        return v.decode() if isinstance(v, bytes) else str(v)

    def energy_mj(self) -> int:
        """Summed total-energy counters (mJ) of the devices."""
        return sum(int(self.lib.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles)

    def instant_supported(self) -> bool:
        try:
            self.instant_power_w()
        except (self.lib.NVMLError, _FieldUnsupported):
            return False
        return True

    def instant_power_w(self) -> float:
        field = self.lib.NVML_FI_DEV_POWER_INSTANT
        total = 0.0
        for h in self.handles:
            (value,) = self.lib.nvmlDeviceGetFieldValues(h, [field])
            if int(value.nvmlReturn) != 0:
                raise _FieldUnsupported(int(value.nvmlReturn))
            total += _field_number(self.lib, value) / 1000.0  # mW
        return total

    def average_power_w(self) -> float:
        return sum(self.lib.nvmlDeviceGetPowerUsage(h) for h in self.handles) / 1000.0

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self.lib.nvmlShutdown()
            except self.lib.NVMLError:
                pass


class _FieldUnsupported(Exception):
    pass


def _field_number(lib: Any, value: Any) -> float:
    kind = int(value.valueType)
    attr = {
        getattr(lib, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(lib, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(lib, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(lib, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(lib, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(lib, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
        getattr(lib, "NVML_VALUE_TYPE_UNSIGNED_SHORT", 6): "usVal",
    }.get(kind, "uiVal")
    return float(getattr(value.value, attr))


def _explain_init_error(lib: Any, exc: Exception) -> str:
    name = type(exc).__name__
    hint = {
        "NVMLError_LibraryNotFound": "no NVIDIA driver (libnvidia-ml.so) on this machine",
        "NVMLError_DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
        "NVMLError_NoPermission": "no permission to open the GPU (run as a user in the video group)",
    }.get(name, "NVML could not start")
    return f"GPU energy cannot be measured: {hint} ({name}: {exc})"


class NvmlCounterMeter(Meter):
    """Energy from NVML's total-energy counter (Volta and newer)."""

    kind = "nvml-counter"

    def __init__(
        self,
        devices: Sequence[int] | None = None,
        *,
        nvml: Any | None = None,
        idle_step_s: float = 1.0,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(clock, sleep)
        self.nvml = _Nvml(nvml, devices)
        self.idle_step_s = idle_step_s
        try:
            self._e0 = self.nvml.energy_mj()
        except self.nvml.lib.NVMLError as exc:
            self.nvml.close()
            raise MeterUnavailable(
                f"the GPU energy counter is not available ({type(exc).__name__}: {exc}); it needs a Volta "
                "or newer GPU: use energy.meter: nvml-poll"
            ) from exc

    def _read(self) -> int:
        try:
            return self.nvml.energy_mj()
        except self.nvml.lib.NVMLError as exc:  # e.g. GPU lost, driver reset mid-run
            raise MeterUnavailable(f"reading the GPU energy counter failed ({type(exc).__name__}: {exc})") from exc

    def _on_start(self, t0: float) -> None:
        self._e0 = self._read()

    def _on_stop(self, t0: float, t1: float) -> Window:
        e1 = self._read()
        delta = e1 - self._e0
        if delta < 0:  # counter reset (driver reload): this window cannot be trusted
            return Window(None, t1 - t0, 2, note=f"energy counter went backwards ({self._e0} -> {e1} mJ)")
        return Window(delta / 1000.0, t1 - t0, 2)

    def idle_power(self, window_s: float) -> tuple[float | None, int]:
        """Median of counter-derived power over steps of ``idle_step_s`` (>= 10 counter updates,
        so the ~100 ms update granularity stays under ~10 % per step and the median smooths it)."""
        steps = max(1, int(round(window_s / self.idle_step_s)))
        powers = []
        t_prev, e_prev = self.clock(), self._read()
        for _ in range(steps):
            self.sleep(self.idle_step_s)
            t, e = self.clock(), self._read()
            if t > t_prev and e >= e_prev:
                powers.append((e - e_prev) / 1000.0 / (t - t_prev))
            t_prev, e_prev = t, e
        if not powers:
            return None, 0
        return median_power(powers), len(powers)

    def hardware(self) -> dict[str, Any]:
        return {"meter": self.kind, "gpus": self.nvml.names(), "devices": self.nvml.indices, "driver": self.nvml.driver()}

    def close(self) -> None:
        self.nvml.close()


class PowerSampler:
    """Reads power every ``interval_s`` in a background thread and keeps (time, watts) samples.

    ``sample_once()`` takes one reading synchronously (used at window edges, and by tests that
    drive a virtual clock instead of the thread).
    """

    def __init__(self, read_w: Callable[[], float], interval_s: float, clock: Clock, max_samples: int = 50_000) -> None:
        self.read_w = read_w
        self.interval_s = interval_s
        self.clock = clock
        self.max_samples = max_samples
        self._t: list[float] = []
        self._p: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def sample_once(self) -> tuple[float, float]:
        p = float(self.read_w())
        t = self.clock()
        with self._lock:
            i = bisect_right(self._t, t)  # the thread and the caller may interleave
            self._t.insert(i, t)
            self._p.insert(i, p)
            if len(self._t) > self.max_samples:
                drop = len(self._t) - self.max_samples
                del self._t[:drop], self._p[:drop]
        return t, p

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="nvml-power-poller", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except BaseException as exc:  # surfaced by the meter on the next window
                self.error = exc
                return
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def window(self, t0: float, t1: float) -> tuple[list[float], list[float]]:
        with self._lock:
            lo, hi = bisect_left(self._t, t0), bisect_right(self._t, t1)
            # one sample either side so the edges interpolate between real readings
            lo, hi = max(lo - 1, 0), min(hi + 1, len(self._t))
            return self._t[lo:hi], self._p[lo:hi]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1)
            self._thread = None


class NvmlPollingMeter(Meter):
    """The paper's method: board power polled every ``interval_s``, trapezoid-integrated."""

    kind = "nvml-poll"

    def __init__(
        self,
        devices: Sequence[int] | None = None,
        *,
        interval_s: float = 0.2,
        nvml: Any | None = None,
        power_field: str = "auto",  # auto | instant | average
        background: bool = True,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(clock, sleep)
        self.nvml = _Nvml(nvml, devices)
        try:
            if power_field == "auto":
                power_field = "instant" if self.nvml.instant_supported() else "average"
            self.power_field = power_field
            read = self.nvml.instant_power_w if power_field == "instant" else self.nvml.average_power_w
            read()  # fail now, not in the thread
        except self.nvml.lib.NVMLError as exc:
            self.nvml.close()
            raise MeterUnavailable(f"NVML cannot read board power ({type(exc).__name__}: {exc})") from exc
        self.interval_s = interval_s
        self.sampler = PowerSampler(read, interval_s, clock)
        if background:
            self.sampler.start()

    def _check_thread(self) -> None:
        if self.sampler.error is not None:
            raise MeterUnavailable(f"the power polling thread stopped: {self.sampler.error!r}")

    def _sample(self) -> None:
        try:
            self.sampler.sample_once()
        except (self.nvml.lib.NVMLError, _FieldUnsupported) as exc:
            raise MeterUnavailable(f"reading GPU power failed ({type(exc).__name__}: {exc})") from exc

    def _on_start(self, t0: float) -> None:
        self._check_thread()
        self._sample()

    def _on_stop(self, t0: float, t1: float) -> Window:
        self._sample()
        self._check_thread()
        ts, ps = self.sampler.window(t0, t1)
        joules, n = trapezoid(ts, ps, t0, t1)
        return Window(joules, t1 - t0, n)

    def idle_power(self, window_s: float) -> tuple[float | None, int]:
        t0 = self.clock()
        self._sample()
        self.sleep(window_s)
        self._sample()
        t1 = self.clock()
        self._check_thread()
        ts, ps = self.sampler.window(t0, t1)
        inside = [p for t, p in zip(ts, ps) if t0 <= t <= t1]
        if not inside:
            return None, 0
        return median_power(inside), len(inside)

    def hardware(self) -> dict[str, Any]:
        return {
            "meter": self.kind,
            "gpus": self.nvml.names(),
            "devices": self.nvml.indices,
            "driver": self.nvml.driver(),
            "power_field": self.power_field,
            "interval_s": self.interval_s,
        }

    def close(self) -> None:
        self.sampler.stop()
        self.nvml.close()


def make_meter(
    kind: str = "auto",
    *,
    devices: Sequence[int] | None = None,
    interval_s: float = 0.2,
    trace: str = "",
    nvml: Any | None = None,
    warn: Callable[[str], None] | None = None,
) -> Meter:
    """The meter for a config's ``energy.meter``.

    ``auto`` tries the energy counter, then polling, and falls back to :class:`NullMeter` with a
    loud warning when NVML cannot start (no GPU). An explicitly requested NVML kind raises
    :class:`MeterUnavailable` instead of degrading silently.
    """
    warn = warn or (lambda msg: print(f"routing-gym: warning: {msg}", file=sys.stderr))
    if kind == "none":
        return NullMeter("energy measurement disabled (energy.meter: none)")
    if kind == "replay":
        return ReplayMeter(PowerTrace.load(trace) if trace else PowerTrace.synthetic())
    if kind == "nvml-counter":
        return NvmlCounterMeter(devices, nvml=nvml)
    if kind == "nvml-poll":
        return NvmlPollingMeter(devices, interval_s=interval_s, nvml=nvml)
    if kind != "auto":
        raise MeterUnavailable(f"unknown meter kind {kind!r}")
    try:
        return NvmlCounterMeter(devices, nvml=nvml)
    except MeterUnavailable as counter_exc:
        if "energy counter" not in str(counter_exc):  # NVML itself is missing: polling fails too
            reason = str(counter_exc)
            warn(reason + ". Energy will be recorded as unmeasured (null), never as zero.")
            return NullMeter(reason)
        try:
            return NvmlPollingMeter(devices, interval_s=interval_s, nvml=nvml)
        except MeterUnavailable as exc:
            warn(f"{exc}. Energy will be recorded as unmeasured (null), never as zero.")
            return NullMeter(str(exc))
