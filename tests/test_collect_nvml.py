"""NVML meters: error paths with the real pynvml module (no GPU here), and the counter and
polling logic against ``TraceNVML``, a stand-in that answers the NVML calls from a trace."""

from __future__ import annotations

import time

import numpy as np
import pytest

pynvml = pytest.importorskip("pynvml")

from routing_gym.collect.errors import MeterUnavailable  # noqa: E402
from routing_gym.collect.meters import (  # noqa: E402
    NullMeter,
    NvmlCounterMeter,
    NvmlPollingMeter,
    energy_reading,
    make_meter,
)
from routing_gym.collect.replay import PowerTrace, TraceNVML, virtual_clock  # noqa: E402


def _gpu_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


no_gpu = pytest.mark.skipif(_gpu_present(), reason="a GPU is present: the no-driver error paths cannot be seen")


def llm_trace(seed: int = 0, seconds: float = 120.0) -> PowerTrace:
    """A GPU serving requests: idle ~70 W, prefill spikes, decode plateaus ~260 W with jitter,
    sampled every 10 ms."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.01)
    phase = t % 6.0
    p = np.where(phase < 1.5, 70.0, 260.0 + 25.0 * np.sin(2 * np.pi * t / 0.9))
    p = np.where((phase >= 1.5) & (phase < 1.7), 380.0, p)
    return PowerTrace(t, np.clip(p + rng.normal(0, 4.0, len(t)), 0, None), name="llm")


# ---------------------------------------------------------------------- real pynvml, no GPU
@no_gpu
def test_real_pynvml_without_a_driver_raises_library_not_found():
    with pytest.raises(pynvml.NVMLError_LibraryNotFound) as exc:
        pynvml.nvmlInit()
    assert isinstance(exc.value, pynvml.NVMLError) and exc.value.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND


@no_gpu
@pytest.mark.parametrize("kind", ["nvml-counter", "nvml-poll"])
def test_explicit_nvml_meter_without_a_gpu_fails_with_a_clear_message(kind):
    with pytest.raises(MeterUnavailable) as exc:
        make_meter(kind)
    message = str(exc.value)
    assert "GPU energy cannot be measured" in message and "no NVIDIA driver" in message
    assert "NVMLError_LibraryNotFound" in message


@no_gpu
def test_auto_meter_without_a_gpu_says_so_and_records_unmeasured():
    warnings: list[str] = []
    meter = make_meter("auto", warn=warnings.append)
    assert isinstance(meter, NullMeter) and not meter.measured
    assert len(warnings) == 1 and "NVML Shared Library Not Found" in warnings[0] and "never as zero" in warnings[0]
    meter.start()
    time.sleep(0.01)
    reading = energy_reading(meter.kind, meter.stop(), *meter.idle_power(1.0)[:1])
    assert reading.measured is False and reading.gross_j is None and reading.net_j is None
    assert reading.latency_s >= 0.01
    assert meter.hardware() == {"meter": "none", "gpus": [], "reason": meter.reason}


# ---------------------------------------------------------------------- counter logic
def test_counter_meter_matches_the_trace_integral():
    trace = llm_trace()
    clock, sleep = virtual_clock()
    fake = TraceNVML(trace, clock=clock)
    meter = NvmlCounterMeter(nvml=fake, clock=clock, sleep=sleep)
    rng = np.random.default_rng(2)
    errors = []
    for _ in range(30):
        sleep(float(rng.uniform(0.0, 2.0)))
        start = clock()
        meter.start()
        sleep(float(rng.uniform(10.0, 20.0)))
        window = meter.stop()
        exact = trace.integral(start, clock())
        errors.append(abs(window.gross_j - exact) / exact)
    assert max(errors) < 0.01  # the ~100 ms counter period is < 1 % of a >= 10 s call
    assert meter.hardware()["gpus"] == ["Replayed GPU"] and meter.hardware()["meter"] == "nvml-counter"


def test_counter_error_on_short_calls_is_bounded_by_one_update_period():
    trace = llm_trace()
    clock, sleep = virtual_clock(0.013)
    meter = NvmlCounterMeter(nvml=TraceNVML(trace, clock=clock), clock=clock, sleep=sleep)
    for length in (0.3, 0.7, 1.3):
        sleep(1.7)
        start = clock()
        meter.start()
        sleep(length)
        window = meter.stop()
        assert abs(window.gross_j - trace.integral(start, clock())) <= 0.1 * trace.power_w.max() * 2


def test_counter_catches_a_short_spike_that_200ms_polling_misses():
    # 30 ms at 600 W on a 100 W floor: 15 J of extra energy between two 200 ms polls
    spike = PowerTrace([0, 1.0, 1.001, 1.031, 1.032, 4], [100, 100, 600, 600, 100, 100], name="spike")
    exact = spike.integral(0.5, 2.5)
    clock, sleep = virtual_clock()
    counter = NvmlCounterMeter(nvml=TraceNVML(spike, clock=clock), clock=clock, sleep=sleep)
    sleep(0.5)
    counter.start()
    sleep(2.0)
    assert abs(counter.stop().gross_j - exact) / exact < 0.01

    clock, sleep = virtual_clock()
    poll = NvmlPollingMeter(nvml=TraceNVML(spike, clock=clock), clock=clock, sleep=sleep, background=False)
    sleep(0.5)
    poll.start()
    for _ in range(10):
        sleep(0.2)
        poll.sampler.sample_once()
    window = poll.stop()
    assert window.n_samples == 12  # window start, 10 polls, window end
    assert window.gross_j == pytest.approx(200.0, rel=1e-6)  # the spike fell between samples
    assert (exact - window.gross_j) / exact > 0.05


def test_counter_idle_baseline_is_the_median_power():
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 100.0, 0.05)
    p = 72.0 + rng.normal(0, 2.0, len(t))
    p[200:210] = 300.0  # a stray burst inside the idle window: the median ignores it
    clock, sleep = virtual_clock()
    meter = NvmlCounterMeter(nvml=TraceNVML(PowerTrace(t, p), clock=clock), clock=clock, sleep=sleep)
    idle_w, n = meter.idle_power(20.0)
    assert n == 20 and idle_w == pytest.approx(72.0, abs=1.0)


def test_counter_going_backwards_marks_the_window_unmeasured():
    clock, sleep = virtual_clock()
    fake = TraceNVML(PowerTrace([0, 100], [100, 100]), clock=clock)
    meter = NvmlCounterMeter(nvml=fake, clock=clock, sleep=sleep)
    sleep(5)
    meter.start()
    fake.nvmlInit()  # the driver restarted: the counter is back near zero
    sleep(1)
    window = meter.stop()
    assert window.gross_j is None and "went backwards" in window.note
    assert energy_reading("nvml-counter", window, 50.0).measured is False


def test_pre_volta_gpu_falls_back_to_polling():
    clock, _ = virtual_clock()
    fake = TraceNVML(PowerTrace([0, 10], [80, 80]), clock=clock, counter=False)
    with pytest.raises(MeterUnavailable, match="needs a Volta"):
        make_meter("nvml-counter", nvml=fake)
    meter = make_meter("auto", nvml=fake)
    try:
        assert isinstance(meter, NvmlPollingMeter) and meter.power_field == "instant"
    finally:
        meter.close()


def test_nvml_errors_are_caught_as_nvml_errors():
    fake = TraceNVML(PowerTrace([0, 10], [80, 80]), fail={"nvmlInit": pynvml.NVMLError_DriverNotLoaded})
    with pytest.raises(MeterUnavailable, match="kernel driver is not loaded"):
        make_meter("nvml-counter", nvml=fake)
    fake = TraceNVML(PowerTrace([0, 10], [80, 80]), fail={"nvmlInit": pynvml.NVMLError_NoPermission})
    warnings: list[str] = []
    assert isinstance(make_meter("auto", nvml=fake, warn=warnings.append), NullMeter)
    assert "no permission" in warnings[0]
    fake = TraceNVML(PowerTrace([0, 10], [80, 80]), counter=False, fail={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}, instant=False)
    with pytest.raises(MeterUnavailable, match="cannot read board power"):
        make_meter("nvml-poll", nvml=fake)
    assert fake.calls["nvmlShutdown"] == 1  # NVML is closed again on every failure
    with pytest.raises(MeterUnavailable, match=r"GPU index\(es\) \[3\]"):
        NvmlCounterMeter(devices=[3], nvml=TraceNVML(PowerTrace([0, 10], [80, 80])))


# ---------------------------------------------------------------------- polling logic
def polling_errors(trace: PowerTrace, seed: int, n: int = 30) -> np.ndarray:
    """Relative errors of 200 ms polling over random 5-12 s calls (virtual time)."""
    clock, sleep = virtual_clock()
    meter = NvmlPollingMeter(nvml=TraceNVML(trace, clock=clock), clock=clock, sleep=sleep, background=False)
    assert meter.power_field == "instant"
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(n):
        sleep(float(rng.uniform(0, 1)))
        start = clock()
        meter.start()
        for _ in range(int(rng.integers(25, 60))):  # one poll per 200 ms
            sleep(0.2)
            meter.sampler.sample_once()
        sleep(float(rng.uniform(0, 0.2)))
        window = meter.stop()
        exact = trace.integral(start, clock())
        errors.append(abs(window.gross_j - exact) / exact)
    return np.array(errors)


def test_polling_200ms_trapezoid_is_within_one_percent_on_a_smooth_load():
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 200.0, 0.01)
    smooth = PowerTrace(t, 260 + 25 * np.sin(2 * np.pi * t / 0.9) + 40 * np.sin(2 * np.pi * t / 13) + rng.normal(0, 4, len(t)))
    errors = polling_errors(smooth, seed=1)
    assert errors.max() < 0.01, errors.max()  # seen: mean 0.08 %, max 0.47 %


def test_polling_error_on_sharp_power_steps_stays_small_on_average():
    # idle <-> busy steps inside a window are smeared over one 200 ms interval each
    errors = polling_errors(llm_trace(seed=4), seed=5)
    assert errors.mean() < 0.01 and errors.max() < 0.03, (errors.mean(), errors.max())  # seen: 0.5 %, 2.3 %


def test_polling_falls_back_to_the_averaged_power_reading():
    step = PowerTrace([0, 5, 5.001, 20], [50, 50, 250, 250], name="step")
    clock, sleep = virtual_clock()
    meter = NvmlPollingMeter(nvml=TraceNVML(step, clock=clock, instant=False), clock=clock, sleep=sleep, background=False)
    assert meter.power_field == "average" and meter.hardware()["power_field"] == "average"
    sleep(5.0)
    meter.start()
    for _ in range(10):
        sleep(0.2)
        meter.sampler.sample_once()
    window = meter.stop()
    # the 1 s moving average lags the step: a 2 s call right after it reads ~100 J short
    exact = step.integral(5.0, 7.0)
    assert exact == pytest.approx(500.0, abs=0.5)
    assert window.gross_j == pytest.approx(exact - 100.0, abs=5.0)


def test_polling_sums_devices():
    clock, sleep = virtual_clock()
    traces = [PowerTrace([0, 10], [100, 100]), PowerTrace([0, 10], [40, 240])]
    meter = NvmlPollingMeter(nvml=TraceNVML(traces, clock=clock), clock=clock, sleep=sleep, background=False)
    meter.start()
    for _ in range(5):
        sleep(0.2)
        meter.sampler.sample_once()
    window = meter.stop()
    assert window.gross_j == pytest.approx(100.0 + (40 + 60) / 2 * 1.0)  # device 1 ramps 20 W/s
    assert meter.hardware()["gpus"] == ["Replayed GPU", "Replayed GPU"]


def test_polling_thread_in_real_time():
    trace = PowerTrace([0, 3600], [150, 150], name="constant")
    meter = NvmlPollingMeter(nvml=TraceNVML(trace), interval_s=0.05)
    try:
        idle_w, n_idle = meter.idle_power(0.3)
        assert idle_w == pytest.approx(150.0, abs=0.5) and n_idle >= 4
        meter.start()
        time.sleep(0.6)
        window = meter.stop()
        assert abs(window.gross_j - 150.0 * window.latency_s) / (150.0 * window.latency_s) < 0.01
        assert 6 <= window.n_samples <= 16  # ~12 polls at 50 ms plus the window edges
    finally:
        meter.close()
    assert meter.sampler._thread is None


def test_a_failing_poller_thread_surfaces_on_the_next_window():
    fake = TraceNVML(PowerTrace([0, 3600], [150, 150]))
    meter = NvmlPollingMeter(nvml=fake, interval_s=0.02)
    try:
        fake.fail["nvmlDeviceGetFieldValues"] = pynvml.NVMLError_GpuIsLost
        deadline = time.monotonic() + 5
        while meter.sampler.error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(MeterUnavailable, match="polling thread stopped.*GpuIsLost"):
            meter.start()
    finally:
        meter.close()
