"""Recorded power traces, replayed: a meter for tests and dry runs, and a stand-in for NVML.

A :class:`PowerTrace` is board power over time, piecewise linear between its points. It loads
from CSV (header ``t_s,power_w``) or JSON (``{"t_s": [...], "power_w": [...]}``).

- :class:`ReplayMeter` integrates the trace exactly over each call window (trace time =
  clock time since the meter was made, looping when the trace ends). Energies it gives are
  *synthetic*: they exercise the pipeline, they are not measurements of the call.
- :class:`TraceNVML` answers the NVML calls the meters use (``nvmlInit``, device handles,
  ``nvmlDeviceGetTotalEnergyConsumption``, ``nvmlDeviceGetPowerUsage``,
  ``nvmlDeviceGetFieldValues``) from a trace, raising the real ``pynvml`` error classes. The
  NVML meters run unchanged on it, so their counter and polling logic can be checked against
  a known integral without a GPU.
"""

from __future__ import annotations

import csv
import json
import math
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from routing_gym.collect.errors import ConfigError
from routing_gym.collect.meter_base import Clock, Meter, Window, median_power


@dataclass
class PowerTrace:
    """Power (W) at times (s), piecewise linear in between; constant outside its range."""

    t_s: np.ndarray
    power_w: np.ndarray
    name: str = "trace"

    def __post_init__(self) -> None:
        self.t_s = np.asarray(self.t_s, dtype=np.float64)
        self.power_w = np.asarray(self.power_w, dtype=np.float64)
        where = f"power trace {self.name}"
        if self.t_s.ndim != 1 or self.t_s.shape != self.power_w.shape or len(self.t_s) < 2:
            raise ConfigError(f"{where}: needs >= 2 points with one power value per time")
        if not (np.all(np.isfinite(self.t_s)) and np.all(np.isfinite(self.power_w))):
            raise ConfigError(f"{where}: times and powers must be finite")
        if np.any(np.diff(self.t_s) < 0):
            row = int(np.flatnonzero(np.diff(self.t_s) < 0)[0]) + 2
            raise ConfigError(f"{where}: point {row}: time goes backwards")
        if np.any(self.power_w < 0):
            raise ConfigError(f"{where}: point {int(np.flatnonzero(self.power_w < 0)[0]) + 1}: negative power")
        # cumulative energy at each point, for O(log n) integrals
        self._cum = np.concatenate([[0.0], np.cumsum(np.diff(self.t_s) * 0.5 * (self.power_w[1:] + self.power_w[:-1]))])

    @property
    def start(self) -> float:
        return float(self.t_s[0])

    @property
    def duration(self) -> float:
        return float(self.t_s[-1] - self.t_s[0])

    def at(self, t: float) -> float:
        return float(np.interp(t, self.t_s, self.power_w))

    def _energy_to(self, t: float) -> float:
        """Energy from the trace start to ``t`` (constant extension outside the range)."""
        if t <= self.t_s[0]:
            return (t - self.t_s[0]) * float(self.power_w[0])
        if t >= self.t_s[-1]:
            return float(self._cum[-1]) + (t - self.t_s[-1]) * float(self.power_w[-1])
        i = int(np.searchsorted(self.t_s, t, side="right")) - 1
        ta, pa = float(self.t_s[i]), float(self.power_w[i])
        return float(self._cum[i]) + (t - ta) * 0.5 * (pa + self.at(t))

    def integral(self, a: float, b: float) -> float:
        """Exact joules over [a, b]."""
        return self._energy_to(b) - self._energy_to(a)

    def points_in(self, a: float, b: float) -> np.ndarray:
        return self.power_w[bisect_left(self.t_s.tolist(), a) : bisect_right(self.t_s.tolist(), b)]

    @classmethod
    def load(cls, path: str | Path) -> PowerTrace:
        path = Path(path)
        try:
            if path.suffix.lower() == ".json":
                data = json.loads(path.read_text())
                if not isinstance(data, dict) or "t_s" not in data or "power_w" not in data:
                    raise ConfigError(f"{path}: a JSON power trace needs keys 't_s' and 'power_w'")
                return cls(np.asarray(data["t_s"], float), np.asarray(data["power_w"], float), name=str(path))
            ts, ps = [], []
            with open(path, newline="") as handle:
                reader = csv.DictReader(handle)
                if not reader.fieldnames or not {"t_s", "power_w"} <= set(reader.fieldnames):
                    raise ConfigError(f"{path}: a CSV power trace needs the header 't_s,power_w'")
                for row_no, row in enumerate(reader, start=2):
                    try:
                        ts.append(float(row["t_s"]))
                        ps.append(float(row["power_w"]))
                    except (TypeError, ValueError) as exc:
                        raise ConfigError(f"{path}: line {row_no}: not a number ({exc})") from exc
            return cls(np.array(ts), np.array(ps), name=str(path))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read power trace ({exc.strerror or exc})") from exc

    def save(self, path: str | Path) -> None:
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["t_s", "power_w"])
            writer.writerows(zip(self.t_s.tolist(), self.power_w.tolist()))

    @classmethod
    def synthetic(
        cls, idle_w: float = 70.0, busy_w: float = 280.0, period_s: float = 4.0, step_s: float = 0.1, seed: int = 0
    ) -> PowerTrace:
        """A made-up GPU load: idle, a prefill spike, a decode plateau with jitter, repeated.
        Labelled synthetic wherever it is used."""
        rng = np.random.default_rng(seed)
        t = np.arange(0.0, 10 * period_s + step_s / 2, step_s)
        phase = (t % period_s) / period_s
        p = np.where(phase < 0.25, idle_w, busy_w)
        p = np.where((phase >= 0.25) & (phase < 0.3), busy_w * 1.4, p)
        p = p + rng.normal(0.0, 0.02 * busy_w, len(t)) * (phase >= 0.25)
        return cls(t, np.clip(p, 0.0, None), name="synthetic")


class ReplayMeter(Meter):
    """Integrates a power trace over each call window: trace time = clock time since creation
    (plus virtual idle windows), looping over the trace."""

    kind = "replay"

    def __init__(self, trace: PowerTrace, *, clock: Clock = time.monotonic, loop: bool = True) -> None:
        super().__init__(clock)
        self.trace = trace
        self.loop = loop
        self._origin = clock()
        self._shift = 0.0  # virtual time consumed by idle windows (which do not sleep)

    def trace_time(self, t: float) -> float:
        return t - self._origin + self._shift + self.trace.start

    def _integral(self, a: float, b: float) -> float:
        if not self.loop or self.trace.duration <= 0:
            return self.trace.integral(a, b)
        period, start = self.trace.duration, self.trace.start
        full = self.trace.integral(start, start + period)
        # split [a, b] at period boundaries
        ka, kb = math.floor((a - start) / period), math.floor((b - start) / period)
        ra, rb = a - ka * period, b - kb * period
        if ka == kb:
            return self.trace.integral(ra, rb)
        return (self.trace.integral(ra, start + period) + (kb - ka - 1) * full + self.trace.integral(start, rb))

    def _wrap(self, t: float) -> float:
        if not self.loop or self.trace.duration <= 0:
            return t
        return self.trace.start + (t - self.trace.start) % self.trace.duration

    def _on_start(self, t0: float) -> None:
        pass

    def _on_stop(self, t0: float, t1: float) -> Window:
        a, b = self.trace_time(t0), self.trace_time(t1)
        joules = self._integral(a, b)
        wa, wb = self._wrap(a), self._wrap(b)
        n = len(self.trace.points_in(wa, wb)) if wa <= wb else len(self.trace.points_in(wa, math.inf)) + len(self.trace.points_in(-math.inf, wb))
        return Window(joules, t1 - t0, n + 2)

    def idle_power(self, window_s: float) -> tuple[float | None, int]:
        """Median of the trace points in the next ``window_s`` of trace time (consumed without
        sleeping: replay has no real idle to wait for)."""
        a = self._wrap(self.trace_time(self.clock()))
        b = a + window_s
        points = list(self.trace.points_in(a, min(b, self.trace.t_s[-1])))
        if b > self.trace.t_s[-1] and self.loop:
            points += list(self.trace.points_in(self.trace.start, self.trace.start + (b - self.trace.t_s[-1])))
        if not points:
            points = [self.trace.at(a), self.trace.at(b)]
        self._shift += window_s
        return median_power(points), len(points)

    def hardware(self) -> dict[str, Any]:
        return {"meter": self.kind, "gpus": [], "trace": self.trace.name, "note": "replayed power trace; energies are synthetic"}


class TraceNVML:
    """Answers the NVML calls of the meters from power traces (one per device).

    - ``nvmlDeviceGetTotalEnergyConsumption``: the exact trace integral since ``nvmlInit``
      in mJ, updated every ``counter_period_s`` (like the real counter, ~100 ms);
      ``counter=False`` makes it raise ``NVMLError_NotSupported`` (pre-Volta GPU).
    - ``nvmlDeviceGetPowerUsage``: mean power over the last ``average_window_s`` in mW (the
      ~1 s moving average of Ampere and newer).
    - ``nvmlDeviceGetFieldValues([NVML_FI_DEV_POWER_INSTANT])``: instantaneous power in mW;
      ``instant=False`` reports the field as not supported in the value's ``nvmlReturn``.
    ``fail`` maps a call name to an exception class raised on every call (error paths).
    """

    def __init__(
        self,
        traces: PowerTrace | Sequence[PowerTrace],
        *,
        clock: Clock = time.monotonic,
        counter: bool = True,
        instant: bool = True,
        counter_period_s: float = 0.1,
        average_window_s: float = 1.0,
        name: str = "Replayed GPU",
        fail: dict[str, type[BaseException]] | None = None,
    ) -> None:
        import pynvml  # the real error classes and constants

        self._pynvml = pynvml
        self.NVMLError = pynvml.NVMLError
        self.NVML_FI_DEV_POWER_INSTANT = pynvml.NVML_FI_DEV_POWER_INSTANT
        self.NVML_VALUE_TYPE_UNSIGNED_INT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        self.traces = [traces] if isinstance(traces, PowerTrace) else list(traces)
        self.clock = clock
        self.counter = counter
        self.instant = instant
        self.counter_period_s = counter_period_s
        self.average_window_s = average_window_s
        self.name = name
        self.fail = dict(fail or {})
        self.calls: dict[str, int] = {}
        self._t0: float | None = None

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.fail:
            raise self.fail[name]()
        if name not in ("nvmlInit", "nvmlShutdown") and self._t0 is None:
            raise self._pynvml.NVMLError_Uninitialized()

    def _now(self, handle: int) -> float:
        assert self._t0 is not None
        return self.clock() - self._t0 + self.traces[handle].start

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        self._t0 = self.clock()

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self._t0 = None

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.traces)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.traces):
            raise self._pynvml.NVMLError_InvalidArgument()
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        self._call("nvmlDeviceGetName")
        return self.name

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call("nvmlSystemGetDriverVersion")
        return "trace"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        self._call("nvmlDeviceGetTotalEnergyConsumption")
        if not self.counter:
            raise self._pynvml.NVMLError_NotSupported()
        trace = self.traces[handle]
        now = self._now(handle)
        updated = trace.start + math.floor((now - trace.start) / self.counter_period_s + 1e-9) * self.counter_period_s
        return int(round(trace.integral(trace.start, updated) * 1000.0))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._call("nvmlDeviceGetPowerUsage")
        trace = self.traces[handle]
        now = self._now(handle)
        w = self.average_window_s
        return int(round(trace.integral(now - w, now) / w * 1000.0))

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> list[Any]:
        self._call("nvmlDeviceGetFieldValues")
        out = []
        for field_id in field_ids:
            ok = self.instant and field_id == self.NVML_FI_DEV_POWER_INSTANT
            value = SimpleNamespace(uiVal=int(round(self.traces[handle].at(self._now(handle)) * 1000.0)) if ok else 0)
            out.append(
                SimpleNamespace(
                    fieldId=field_id,
                    nvmlReturn=0 if ok else self._pynvml.NVML_ERROR_NOT_SUPPORTED,
                    valueType=self.NVML_VALUE_TYPE_UNSIGNED_INT,
                    value=value,
                )
            )
        return out


def virtual_clock(start: float = 0.0) -> tuple[Callable[[], float], Callable[[float], None]]:
    """A (clock, sleep) pair over virtual time: ``sleep(s)`` advances the clock instantly."""
    now = [start]

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    return clock, sleep
