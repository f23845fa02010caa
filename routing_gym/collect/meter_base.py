"""The meter interface shared by every meter kind: call windows, readings, the null meter.

``meters.py`` (NVML meters and ``make_meter``) and ``replay.py`` (trace replay) both build on
this module; it imports neither of them.
"""

from __future__ import annotations

import math
import statistics
import time
from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

Clock = Callable[[], float]


@dataclass
class Window:
    """What a meter saw over one call window."""

    gross_j: float | None  # None when unmeasured
    latency_s: float
    n_samples: int
    note: str = ""


@dataclass
class EnergyReading:
    """The energy fields of one call record."""

    meter: str
    measured: bool
    gross_j: float | None
    net_j: float | None  # gross - idle_w * latency, never negative
    idle_w: float | None
    latency_s: float
    mean_power_w: float | None  # mean incremental power: net_j / latency_s
    n_samples: int
    clipped: bool = False  # gross was below the idle baseline; net clipped to 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def energy_reading(meter: str, window: Window, idle_w: float | None) -> EnergyReading:
    """Subtract the idle baseline from a window; unmeasured stays unmeasured (None)."""
    if window.gross_j is None or not math.isfinite(window.gross_j):
        return EnergyReading(meter, False, None, None, idle_w, window.latency_s, None, window.n_samples, note=window.note)
    gross = float(window.gross_j)
    baseline = 0.0 if idle_w is None else float(idle_w) * window.latency_s
    net = gross - baseline
    clipped = net < 0
    net = max(net, 0.0)
    power = net / window.latency_s if window.latency_s > 0 else 0.0
    note = window.note
    if idle_w is None:
        note = (note + "; " if note else "") + "no idle baseline: net equals gross"
    return EnergyReading(meter, True, gross, net, idle_w, window.latency_s, power, window.n_samples, bool(clipped), note)


def trapezoid(ts: Sequence[float], ps: Sequence[float], t0: float, t1: float) -> tuple[float, int]:
    """Integral of the piecewise-linear power curve through samples (ts, ps) over [t0, t1].

    Samples must be sorted by time. The curve is interpolated at the window edges (and held
    constant beyond the first/last sample), so a window between two samples still gets its
    share. Returns (joules, samples inside the window).
    """
    if t1 < t0:
        raise ValueError(f"window ends before it starts ({t0} > {t1})")
    if not ts:
        raise ValueError("no power samples")
    lo, hi = bisect_left(ts, t0), bisect_right(ts, t1)

    def at(t: float) -> float:
        i = bisect_left(ts, t)
        if i <= 0:
            return ps[0]
        if i >= len(ts):
            return ps[-1]
        ta, tb = ts[i - 1], ts[i]
        if tb == ta:
            return ps[i]
        return ps[i - 1] + (ps[i] - ps[i - 1]) * (t - ta) / (tb - ta)

    points_t = [t0, *ts[lo:hi], t1]
    points_p = [at(t0), *ps[lo:hi], at(t1)]
    total = 0.0
    for i in range(1, len(points_t)):
        total += 0.5 * (points_p[i] + points_p[i - 1]) * (points_t[i] - points_t[i - 1])
    return total, hi - lo


def median_power(powers: Sequence[float]) -> float:
    if not powers:
        raise ValueError("no power samples in the idle window")
    return float(statistics.median(powers))


class Meter(ABC):
    """A GPU energy meter (see the module docstring for the kinds)."""

    kind: str = ""
    measured: bool = True

    def __init__(self, clock: Clock = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.clock = clock
        self.sleep = sleep
        self._t0: float | None = None

    def start(self) -> None:
        """Mark the start of a call window."""
        self._t0 = self.clock()
        self._on_start(self._t0)

    def stop(self) -> Window:
        """Close the call window and return what was measured over it."""
        if self._t0 is None:
            raise RuntimeError("stop() without start()")
        t1 = self.clock()
        t0, self._t0 = self._t0, None
        return self._on_stop(t0, t1)

    @abstractmethod
    def _on_start(self, t0: float) -> None: ...

    @abstractmethod
    def _on_stop(self, t0: float, t1: float) -> Window: ...

    @abstractmethod
    def idle_power(self, window_s: float) -> tuple[float | None, int]:
        """Median power (W) over the next ``window_s`` seconds with nothing running, and the
        number of samples it is based on; (None, 0) when unmeasured."""

    def hardware(self) -> dict[str, Any]:
        return {"meter": self.kind}

    def close(self) -> None:
        pass

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullMeter(Meter):
    """No energy measurement: latency only, energy recorded as unmeasured (never zero)."""

    kind = "none"
    measured = False

    def __init__(self, reason: str, clock: Clock = time.monotonic) -> None:
        super().__init__(clock)
        self.reason = reason

    def _on_start(self, t0: float) -> None:
        pass

    def _on_stop(self, t0: float, t1: float) -> Window:
        return Window(None, t1 - t0, 0, note=self.reason)

    def idle_power(self, window_s: float) -> tuple[float | None, int]:
        return None, 0

    def hardware(self) -> dict[str, Any]:
        return {"meter": self.kind, "gpus": [], "reason": self.reason}
