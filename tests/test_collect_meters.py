"""Replay meter and energy arithmetic against traces with known integrals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from routing_gym.collect.errors import ConfigError
from routing_gym.collect.meters import Window, energy_reading, trapezoid
from routing_gym.collect.replay import PowerTrace, ReplayMeter, virtual_clock


def measure(meter: ReplayMeter, sleep, start_s: float, seconds: float):
    """Open a window at trace time ``start_s`` (clock starts at 0) lasting ``seconds``."""
    sleep(start_s - meter.trace_time(meter.clock()) + meter.trace.start)
    meter.start()
    sleep(seconds)
    return meter.stop()


def make(trace: PowerTrace, loop: bool = False):
    clock, sleep = virtual_clock()
    return ReplayMeter(trace, clock=clock, loop=loop), sleep


CONSTANT = PowerTrace([0.0, 10.0], [100.0, 100.0], name="constant")
RAMP = PowerTrace([0.0, 4.0], [0.0, 200.0], name="ramp")  # P(t) = 50 t
SPIKE = PowerTrace([0.0, 1.9, 2.0, 2.1, 4.0], [50.0, 50.0, 550.0, 50.0, 50.0], name="spike")


@pytest.mark.parametrize(
    "trace, start, seconds, exact",
    [
        (CONSTANT, 1.0, 2.0, 200.0),
        (RAMP, 1.0, 2.0, 25.0 * (3.0**2 - 1.0**2)),
        (SPIKE, 1.0, 2.0, 100.0 + 0.5 * 0.2 * 500.0),
        (SPIKE, 1.95, 0.1, 2 * 0.5 * 0.05 * (300 + 550)),  # window inside the spike: 300 -> 550 -> 300 W
    ],
    ids=["constant", "ramp", "spike", "inside-spike"],
)
def test_replay_meter_matches_known_integrals(trace, start, seconds, exact):
    meter, sleep = make(trace)
    window = measure(meter, sleep, start, seconds)
    assert window.latency_s == pytest.approx(seconds)
    assert abs(window.gross_j - exact) / exact < 0.01
    assert window.gross_j == pytest.approx(exact, rel=1e-9)  # piecewise linear: exact, not just < 1 %


def test_idle_only_trace_gives_zero_net_and_never_negative():
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 60.0, 0.1)
    idle = PowerTrace(t, 60.0 + rng.normal(0.0, 1.5, len(t)), name="idle")
    meter, sleep = make(idle, loop=True)
    idle_w, n = meter.idle_power(10.0)
    assert idle_w == pytest.approx(60.0, abs=0.5) and n in (100, 101)  # points at 0.1 s spacing
    readings = []
    for _ in range(200):
        sleep(float(rng.uniform(0.0, 0.5)))
        meter.start()
        sleep(float(rng.uniform(0.05, 1.0)))
        readings.append(energy_reading("replay", meter.stop(), idle_w))
    nets = np.array([r.net_j for r in readings])
    gross = np.array([r.gross_j for r in readings])
    assert np.all(nets >= 0.0)
    assert any(r.clipped for r in readings)  # noise dips below the baseline: clipped, flagged
    assert nets.sum() / gross.sum() < 0.02  # net is ~0 on an idle-only trace


def test_baseline_subtraction_and_mean_incremental_power():
    r = energy_reading("nvml-counter", Window(gross_j=300.0, latency_s=2.0, n_samples=2), idle_w=60.0)
    assert (r.net_j, r.mean_power_w, r.clipped, r.measured) == (180.0, 90.0, False, True)
    low = energy_reading("nvml-counter", Window(gross_j=50.0, latency_s=2.0, n_samples=2), idle_w=60.0)
    assert low.net_j == 0.0 and low.clipped and low.mean_power_w == 0.0
    none = energy_reading("none", Window(gross_j=None, latency_s=1.5, n_samples=0, note="no GPU"), idle_w=None)
    assert none.measured is False and none.net_j is None and none.gross_j is None and none.mean_power_w is None
    assert none.latency_s == 1.5 and none.note == "no GPU"
    nobase = energy_reading("nvml-poll", Window(gross_j=10.0, latency_s=1.0, n_samples=6), idle_w=None)
    assert nobase.net_j == 10.0 and "no idle baseline" in nobase.note


def test_trapezoid_interpolates_at_window_edges():
    ts, ps = [0.0, 1.0, 2.0, 3.0], [0.0, 100.0, 100.0, 0.0]
    joules, n = trapezoid(ts, ps, 0.5, 2.5)
    # 0.5..1: 50->100 (37.5), 1..2: 100, 2..2.5: 100->50 (37.5)
    assert joules == pytest.approx(175.0) and n == 2
    joules, n = trapezoid(ts, ps, 1.2, 1.4)  # between two samples
    assert joules == pytest.approx(20.0) and n == 0
    with pytest.raises(ValueError):
        trapezoid(ts, ps, 2.0, 1.0)


def test_replay_loops_over_the_trace_end():
    meter, sleep = make(RAMP, loop=True)
    window = measure(meter, sleep, 3.0, 2.0)  # 3..4 then wraps to 0..1
    assert window.gross_j == pytest.approx(25.0 * (16 - 9) + 25.0 * 1.0)
    meter2, sleep2 = make(CONSTANT, loop=True)
    window = measure(meter2, sleep2, 5.0, 23.0)  # more than two full periods
    assert window.gross_j == pytest.approx(2300.0)


def test_synthetic_trace_and_random_windows_match_numeric_integral():
    trace = PowerTrace.synthetic()
    meter, sleep = make(trace, loop=False)
    rng = np.random.default_rng(1)
    fine = np.linspace(trace.start, trace.t_s[-1], 400_001)
    power = np.interp(fine, trace.t_s, trace.power_w)
    for _ in range(20):
        a = float(rng.uniform(0, 30))
        b = a + float(rng.uniform(0.1, 8))
        sel = (fine >= a) & (fine <= b)
        numeric = np.trapezoid(power[sel], fine[sel])
        assert trace.integral(a, b) == pytest.approx(numeric, rel=5e-3)
    assert meter.hardware()["note"].startswith("replayed power trace")


def test_trace_files_load_and_bad_ones_name_the_line(tmp_path):
    csv_path = tmp_path / "trace.csv"
    SPIKE.save(csv_path)
    loaded = PowerTrace.load(csv_path)
    assert loaded.integral(1.0, 3.0) == pytest.approx(150.0)
    json_path = tmp_path / "trace.json"
    json_path.write_text(json.dumps({"t_s": [0, 1, 2], "power_w": [10, 20, 10]}))
    assert PowerTrace.load(json_path).integral(0, 2) == pytest.approx(30.0)
    bad = tmp_path / "bad.csv"
    bad.write_text("t_s,power_w\n0,10\n1,ten\n")
    with pytest.raises(ConfigError, match="bad.csv: line 3: not a number"):
        PowerTrace.load(bad)
    back = tmp_path / "back.csv"
    back.write_text("t_s,power_w\n0,10\n2,10\n1,10\n")
    with pytest.raises(ConfigError, match="point 3: time goes backwards"):
        PowerTrace.load(back)
    with pytest.raises(ConfigError, match="header 't_s,power_w'"):
        (tmp_path / "nohead.csv").write_text("a,b\n1,2\n")
        PowerTrace.load(tmp_path / "nohead.csv")
    with pytest.raises(ConfigError, match="negative power"):
        PowerTrace([0, 1], [5, -1])
