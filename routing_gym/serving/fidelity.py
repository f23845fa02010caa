"""Fidelity checks of the serving simulator against ML.ENERGY's measurements and queueing laws.

Used by ``tests/test_serving_fidelity.py`` (thresholds) and ``experiments/serving_fidelity.py``
(the results README):

- :func:`held_out_batches`: for each measured model and each interior measured batch size b,
  fit the physics without that point, hold b requests in flight (a closed loop: a completed
  request is replaced at once by one of the measurement's mean output length, no prompt) and
  compare the simulated J per request and time per output token with the measured ones;
- :func:`littles_law`: the time-average number in the system (sampled at Poisson arrivals,
  which see time averages) against arrival rate x mean time in system;
- :func:`vanishing_load`: requests so far apart that each is served alone, against the batch-1
  law's J per request computed from ``energy_model.batch1_curves`` directly.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from routing_gym.serving.physics import ServerPhysics, fit_physics
from routing_gym.serving.simulator import ServingSimulator


def steady_batch(physics: ServerPhysics, batch: int, output_tokens: float, rounds: int = 4) -> tuple[float, float]:
    """Mean J per request and seconds per output token with ``batch`` requests always in flight."""
    sim = ServingSimulator([physics], max_batch=batch)
    for _ in range(batch):
        sim.submit(0.0, 0, 0.0, output_tokens)
    done = []
    while len(done) < rounds * batch:
        due = sim._events[0][0]
        finished = sim.advance(due)
        for _ in finished:
            sim.submit(due, 0, 0.0, output_tokens)
        done += finished
    energy = float(np.mean([c.energy_j for c in done]))
    tpot = float(np.mean([c.latency_s for c in done])) / output_tokens
    return energy, tpot


def held_out_batches(table: pd.DataFrame, anchors: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """One row per (configuration, held-out interior batch): measured and simulated values and errors."""
    rows = []
    for (model, gpu, n_gpus), points in table.groupby(["model_id", "gpu", "n_gpus"]):
        points = points.sort_values("batch_size")
        anchor = anchors.get(model) if gpu == "H100 80GB HBM3" else None
        # interior points only: the largest measured batch would be an extrapolation
        lowest = 0 if anchor is not None else 1
        for i in range(lowest, len(points) - 1):
            held = points.iloc[i]
            physics = fit_physics(points.drop(index=held.name), anchor, max_batch=int(points["batch_size"].max()))
            energy, tpot = steady_batch(physics, int(held["batch_size"]), float(held["output_tokens_mean"]))
            rows.append({"model": model, "gpu": gpu, "n_gpus": int(n_gpus), "batch": int(held["batch_size"]),
                         "measured_j_per_request": float(held["energy_per_request_j"]), "simulated_j_per_request": energy,
                         "j_error": energy / float(held["energy_per_request_j"]) - 1,
                         "measured_tpot_s": float(held["time_per_output_token_s"]), "simulated_tpot_s": tpot,
                         "tpot_error": tpot / float(held["time_per_output_token_s"]) - 1})
    return pd.DataFrame(rows)


def littles_law(physics: list[ServerPhysics], rate: float, n: int, tokens: np.ndarray, seed: int = 0,
                replicas: int = 1) -> dict[str, float]:
    """Poisson arrivals at ``rate`` routed uniformly; L sampled at arrivals against lambda x W."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    models = rng.integers(0, len(physics), n)
    rows = rng.integers(0, len(tokens), n)
    sim = ServingSimulator(physics, replicas=replicas)
    in_system = np.empty(n)
    done = []
    for i in range(n):
        done += sim.advance(float(arrivals[i]))
        in_system[i] = sim.in_system
        sim.submit(float(arrivals[i]), int(models[i]), float(tokens[rows[i], 0]), float(tokens[rows[i], 1]))[1]
    done += sim.drain()
    warm = n // 10  # leave out the first tenth: the system starts empty
    sojourn = np.array([c.latency_s for c in sorted(done, key=lambda c: c.request)])
    lam = (n - warm) / (arrivals[-1] - arrivals[warm])
    return {"L_sampled": float(in_system[warm:].mean()), "lambda_W": float(lam * sojourn[warm:].mean()),
            "mean_batch": float(in_system[warm:].mean()), "arrivals": n}


def vanishing_load(physics: ServerPhysics, output_tokens: np.ndarray, input_tokens: np.ndarray,
                   gap_s: float = 1e4) -> float:
    """Mean simulated J per request when requests arrive ``gap_s`` apart (always served alone)."""
    sim = ServingSimulator([physics])
    done = []
    for i, (inp, out) in enumerate(zip(input_tokens, output_tokens)):
        done += sim.submit(i * gap_s, 0, float(inp), float(out))[1]
    done += sim.drain()
    return float(np.mean([c.energy_j for c in done]))
