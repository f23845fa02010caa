"""Benchmark: where the text controller's memory goes (peak RSS per phase; not a test).

Fits the controller several times in one process, as ``routing-gym compare`` does for each
agent x seed, with tiny budgets (a few SFT and GRPO steps, a short probe) but the default
batch sizes, then routes held-out queries. A background thread samples this process's RSS
every 20 ms; each fit is cut into phases from its own timing logs (load, SFT, GRPO with the
probe) and the peak RSS of each phase is printed. After each run the agent is dropped and the
RSS read twice: after ``gc.collect()``, then after glibc's ``malloc_trim(0)`` hands freed heap
back to the OS (what is still there is live memory; what trimming removes was only kept by the
allocator).

Ratios against references measured in the same run: each run's peak over the first run's
peak (> 1: memory piles up from one fit to the next), and the live RSS left after each run
over the RSS before the first fit (> 1: something outlives the agent).

``--against '{"activation_checkpointing": false}'`` measures a memory option: the benchmark
runs twice in fresh child processes, first with those overrides added (the reference), then
as given, and prints the peak RSS and fit time of each over the reference's, and whether the
training logs (SFT loss and gradient norm per step, GRPO reward and gradient norm per step,
the probe's expected reward after GRPO) are identical.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_controller_memory.py
    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_controller_memory.py --runs 3 --held-out 64
    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_controller_memory.py --runs 1 \
        --against '{"activation_checkpointing": false}'
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

MIB = 2**20
# A few steps at the default batch sizes: the memory of a step is that of a long run's step.
TINY = dict(
    sft_max_steps=4,
    sft_max_train_queries=16,
    grpo_max_steps=2,
    grpo_max_train_queries=4,
    grpo_probe_queries=16,
)


class RssSampler:
    """This process's RSS, sampled every ``interval`` seconds in a daemon thread."""

    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self.process = psutil.Process()
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self.process.memory_info().rss))
            self._stop.wait(self.interval)

    def now(self) -> int:
        return self.process.memory_info().rss

    def peak(self, start: float, end: float) -> int:
        inside = [rss for t, rss in self.samples if start <= t <= end]
        return max(inside, default=self.now())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def mib(n_bytes: float) -> float:
    return round(n_bytes / MIB, 1)


def release_freed_heap() -> bool:
    """glibc's ``malloc_trim(0)``: return freed heap pages to the OS; False where unavailable."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        return False
    trim(0)
    return True


def training_fingerprint(logs: dict[str, Any]) -> dict[str, list[float]]:
    """The numbers a fit's training produced: equal fingerprints mean equal training."""
    steps = logs.get("grpo", {}).get("steps", [])
    return {
        "sft_loss": logs["sft"]["loss"],
        "sft_grad_norm": logs["sft"]["grad_norm"],
        "grpo_reward": [s["mean_reward"] for s in steps],
        "grpo_grad_norm": [s["grad_norm"] for s in steps],
        "expected_reward_after": [logs.get("grpo", {}).get("expected_reward_after", math.nan)],
    }


def max_abs_difference(a: dict[str, list[float]], b: dict[str, list[float]]) -> dict[str, float]:
    """Per fingerprint entry, the largest absolute difference (inf when the lengths differ)."""
    out = {}
    for key in a:
        x, y = a[key], b[key]
        if len(x) != len(y):
            out[key] = math.inf
            continue
        diffs = [0.0 if (math.isnan(u) and math.isnan(v)) else abs(u - v) for u, v in zip(x, y)]
        out[key] = max(diffs, default=0.0)
    return out


def compare_against(args: argparse.Namespace) -> int:
    """Run the benchmark with the ``--against`` overrides added (the reference), then as
    given, each in a fresh process; print the candidate's peak RSS and fit time over the
    reference's and how far their training logs differ."""
    given = json.loads(args.set)
    sets = {"reference": {**given, **json.loads(args.against)}, "candidate": given}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, overrides in sets.items():
            path = os.path.join(tmp, f"{label}.json")
            cmd = [sys.executable, __file__, "--tournament", args.tournament, "--agent", args.agent]
            cmd += ["--runs", str(args.runs), "--held-out", str(args.held_out), "--set", json.dumps(overrides)]
            print(f"--- {label}: --set '{json.dumps(overrides)}'", flush=True)
            subprocess.run([*cmd, "--json", path], check=True)
            with open(path) as f:
                results[label] = json.load(f)
    ref, cand = results["reference"], results["candidate"]
    print("--- candidate over reference (derived ratios, same machine, back to back)")
    print("process peak RSS:", round(cand["max_rss_mib"] / ref["max_rss_mib"], 3),
          f"({cand['max_rss_mib']} / {ref['max_rss_mib']} MiB)")
    for i, (r, c) in enumerate(zip(ref["runs"], cand["runs"])):
        print(
            f"run {i}: peak {round(c['peak_mib'] / r['peak_mib'], 3)}, "
            f"grpo+probe peak {c['phase_peak_mib']['grpo+probe']} / {r['phase_peak_mib']['grpo+probe']} MiB, "
            f"fit time {round(c['fit_s'] / r['fit_s'], 3)} ({c['fit_s']} / {r['fit_s']} s)"
        )
        diff = max_abs_difference(r["fingerprint"], c["fingerprint"])
        same = "identical" if all(v == 0 for v in diff.values()) else "DIFFERENT"
        print(f"run {i}: training logs {same}; max |difference| {diff}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="paper-pool", help="preset name or tournament directory")
    parser.add_argument("--agent", default="grpo", choices=["sft", "grpo", "kl-grpo"])
    parser.add_argument("--runs", type=int, default=2, help="fits in one process (compare: agents x seeds)")
    parser.add_argument("--held-out", type=int, default=32, help="test-split queries routed after each fit")
    parser.add_argument("--set", default="{}", help="JSON of ControllerConfig overrides on top of the tiny budgets")
    parser.add_argument("--json", default=None, help="also write the measurements here")
    parser.add_argument(
        "--against", default=None, help="JSON of overrides for a reference run in its own process (see above)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.held_out < 1:
        parser.error("--runs and --held-out must be >= 1")
    if args.against is not None:
        return compare_against(args)

    sampler = RssSampler()
    import torch

    torch.set_num_threads(1)
    from routing_gym.envs import Reward
    from routing_gym.sources import resolve_tournament
    from routing_gym_agents import FitContext, ObservationBatch, make_agent

    # The libraries a fit imports, loaded up front: the RSS before the first fit includes them,
    # so the live RSS after a run over it shows only what outlives the agent.
    import peft  # noqa: F401
    import trl  # noqa: F401

    t = resolve_tournament(args.tournament)
    batch = ObservationBatch.from_tournament(t, t.split_rows("test")[: args.held_out])
    overrides = {**TINY, "progress": False, **json.loads(args.set)}
    gc.collect()
    start_rss = sampler.now()
    print(f"{t.card.name}: {t.n_models} models; {args.runs} x {args.agent} fit + {len(batch)} routed queries")
    print(f"RSS before the first fit (imports, tournament): {mib(start_rss)} MiB")
    runs: list[dict[str, Any]] = []
    for run in range(args.runs):
        agent = make_agent(args.agent, **overrides)
        ctx = FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=run)
        t0 = time.perf_counter()
        logs = agent.fit(ctx)
        t1 = time.perf_counter()
        agent.act_batch(batch)
        t2 = time.perf_counter()
        fingerprint = training_fingerprint(logs)
        # Phase boundaries from the fit's own timing logs (load, then SFT, then GRPO).
        t_load = t0 + logs["load_s"]
        t_sft = t_load + logs["sft_s"]
        phases = {
            "load": sampler.peak(t0, t_load),
            "sft": sampler.peak(t_load, t_sft),
            "grpo+probe": sampler.peak(t_sft, t1) if "grpo" in logs else None,
            "act": sampler.peak(t1, t2),
        }
        del agent, logs
        gc.collect()
        rss_after = sampler.now()
        trimmed = release_freed_heap()
        runs.append(
            {
                "peak_mib": mib(sampler.peak(t0, t2)),
                "phase_peak_mib": {k: None if v is None else mib(v) for k, v in phases.items()},
                "rss_after_mib": mib(rss_after),
                "live_after_mib": mib(sampler.now()) if trimmed else None,
                "fit_s": round(t1 - t0, 1),
                "act_s": round(t2 - t1, 1),
                "fingerprint": fingerprint,
            }
        )
        r = runs[-1]
        print(
            f"run {run}: peak {r['peak_mib']} MiB (phases {r['phase_peak_mib']}); "
            f"after dropping the agent {r['rss_after_mib']} MiB, after malloc_trim {r['live_after_mib']} MiB; "
            f"fit {r['fit_s']} s, act {r['act_s']} s",
            flush=True,
        )
    sampler.close()
    first_peak = runs[0]["peak_mib"]
    print("peak over run 0's peak:", [round(r["peak_mib"] / first_peak, 3) for r in runs])
    if runs[0]["live_after_mib"] is not None:
        print(
            "live RSS after each run over RSS before the first fit:",
            [round(r["live_after_mib"] / mib(start_rss), 3) for r in runs],
        )
    import resource

    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"process peak RSS (getrusage): {max_rss:.0f} MiB")
    if args.json:
        report = {
            "tournament": t.card.name,
            "agent": args.agent,
            "overrides": overrides,
            "start_rss_mib": mib(start_rss),
            "runs": runs,
            "max_rss_mib": round(max_rss, 1),
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
