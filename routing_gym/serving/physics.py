"""Serving physics: time per output token and joules per token as functions of the batch.

A model server's replica decodes its running requests together: one *iteration* gives every
request in the batch one output token. :class:`ServerPhysics` holds, for batch sizes
``1..max_batch``, the iteration time ``tpot(b)`` (time per output token that every request
sees) and ``e(b)``, the joules per output token attributed to each of the ``b`` requests: an
iteration costs ``b x e(b)`` joules and lasts ``tpot(b)`` seconds.

**Fit (measured models).** From a batch-curve table (``curves.py``): ``tpot(b)`` from
``time_per_output_token_s`` and ``e(b) = energy_per_request_j / output_tokens_mean`` (the
quantity a simulation must reproduce per request; ML.ENERGY's board power times TPOT over the
batch is 50-99 % of it, lower at large batches, because its runs' throughput includes prefill
stalls and ramp-up), each interpolated by a monotone piecewise-cubic (``scipy``'s
``PchipInterpolator``) in log batch and log value. Below the smallest measured batch
(ML.ENERGY: 32-192) the project's batch-1 law anchors batch 1: ``energy_model.batch1_curves``
(TPOT and per-GPU power linear in the average batch, extrapolated to 1; J per token = GPUs x
power x TPOT). Above the largest measured batch the curves stay at their last value.

**Derived models.** A model without measurements uses the project's decode law
(``energy_law.py``: J and seconds per output token from GPUs and size, at batch 128) times the
median shape ``y(b) / y(128)`` of the measured H100 models' fitted curves; labelled
``derived``.

**Idle power** (a stated, configurable assumption): a replica with no request draws
:data:`IDLE_W_PER_GPU` watts per GPU — the idle baseline the reference paper subtracted
(~60-70 W per H100, NVML board power; ``energy_model.py``'s batch1 notes), 65 W taken here;
ML.ENERGY's figures are gross, so a busy replica's joules already include it.

**Prefill** (stated model): compute-bound, ``2 x active parameters`` FLOPs per input token at
50 % of the H100's dense bf16 peak across the replica's GPUs (``energy_model.py``'s prefill law):
seconds ``2 N / (0.5 x 989 TFLOP/s x GPUs)`` and joules ``2 N x 700 W / (0.5 x 989 TFLOP/s)`` per
input token. A request's prefill stalls its replica's decoding for that time (vLLM runs a
prefill as an iteration of its own) and its joules go to that request. ML.ENERGY's measured
joules per request already contain its ShareGPT prompts' prefill, so a simulated request pays
prefill once more; for the chat prompts of the pools (~100 tokens) that is a few percent.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.serving.curves import validate_batch_curves
from routing_gym.sources.energy_law import effective_params, fit_decode_law, serving_gpus
from routing_gym.sources.energy_model import (
    H100_PEAK_FLOPS,
    JOULES_PER_FLOP,
    MLENERGY_PARAMS_B,
    PREFILL_MFU,
    batch1_curves,
    measured_runs,
)

IDLE_W_PER_GPU = 65.0
IDLE_SOURCE = ("assumed 65 W per GPU: the idle baseline the reference paper subtracted (~60-70 W per H100, "
               "NVML board power)")
# vLLM's default max_num_seqs: the most requests one replica decodes together.
DEFAULT_MAX_BATCH = 256
SHAPE_REFERENCE_BATCH = 128  # the decode law's batch


@dataclass(frozen=True)
class ServerPhysics:
    """One replica's iteration time and per-request joules per token for batches ``1..max_batch``
    (``tpot_s[b]``, ``joules_per_token[b]``; index 0 unused), its idle draw and prefill costs."""

    model_id: str
    gpu: str
    n_gpus: int
    tpot_s: np.ndarray
    joules_per_token: np.ndarray
    idle_power_w: float
    prefill_s_per_token: float
    prefill_j_per_token: float
    provenance: str  # "measured" (fitted to measured points) or "derived" (the energy law)
    source: str

    @property
    def max_batch(self) -> int:
        return len(self.tpot_s) - 1

    def power_w(self, batch: int) -> float:
        """Power a busy replica draws by the fit: ``b x e(b) / tpot(b)`` (0 batch: idle)."""
        if batch == 0:
            return self.idle_power_w
        return float(batch * self.joules_per_token[batch] / self.tpot_s[batch])

    def with_max_batch(self, max_batch: int) -> ServerPhysics:
        """The same physics for another maximum batch (beyond the fit: its last value)."""
        if max_batch < 1:
            raise RoutingGymError(f"{self.model_id}: max_batch must be >= 1, got {max_batch}")
        idx = np.minimum(np.arange(max_batch + 1), self.max_batch)
        return _replace(self, tpot_s=self.tpot_s[idx], joules_per_token=self.joules_per_token[idx])


def _replace(physics: ServerPhysics, **changes: object) -> ServerPhysics:
    from dataclasses import replace

    return replace(physics, **changes)


def monotone_curve(batches: np.ndarray, values: np.ndarray, max_batch: int) -> np.ndarray:
    """Values at ``0..max_batch`` of a PCHIP in (log batch, log value) through the points;
    constant beyond both ends (index 0 repeats batch 1, never used)."""
    from scipy.interpolate import PchipInterpolator

    order = np.argsort(batches)
    x, y = np.log(np.asarray(batches, float)[order]), np.log(np.asarray(values, float)[order])
    grid = np.log(np.clip(np.arange(max_batch + 1), 1, None).astype(float))
    if len(x) == 1:
        return np.full(max_batch + 1, float(np.exp(y[0])))
    return np.exp(PchipInterpolator(x, y, extrapolate=False)(np.clip(grid, x[0], x[-1])))


def prefill_costs(active_params_b: float, n_gpus: int) -> tuple[float, float]:
    """Seconds and joules per input token of a compute-bound prefill (see the module docstring)."""
    flops = 2.0 * active_params_b * 1e9
    return flops / (PREFILL_MFU * H100_PEAK_FLOPS * n_gpus), flops * JOULES_PER_FLOP


def fit_physics(points: pd.DataFrame, anchor: tuple[float, float] | None = None, *, max_batch: int = DEFAULT_MAX_BATCH,
                params_b: float | None = None, idle_w_per_gpu: float = IDLE_W_PER_GPU,
                model_id: str | None = None) -> ServerPhysics:
    """Fit one (model, GPU, GPUs) configuration's rows of a batch-curve table.

    ``anchor`` = (TPOT, J per token) at batch 1, used when the table has no batch-1 row.
    ``params_b`` (billions) prices prefill; without it the prefill costs nothing.
    """
    points = validate_batch_curves(points, "fit_physics points")
    keys = points[["model_id", "gpu", "n_gpus"]].drop_duplicates()
    if len(keys) != 1:
        raise RoutingGymError(f"fit_physics takes one (model_id, gpu, n_gpus) configuration, got {len(keys)}")
    model, gpu, n_gpus = keys.iloc[0]
    batches = points["batch_size"].to_numpy(float)
    tpot = points["time_per_output_token_s"].to_numpy(float)
    jpt = (points["energy_per_request_j"] / points["output_tokens_mean"]).to_numpy(float)
    notes = [f"{len(points)} {points['provenance'].iloc[0]} points at batch {int(batches.min())}-{int(batches.max())}"]
    if anchor is not None and batches.min() > 1:
        batches, tpot, jpt = np.append(batches, 1.0), np.append(tpot, anchor[0]), np.append(jpt, anchor[1])
        notes.append(f"batch 1 anchored by the batch-1 law ({anchor[0] * 1e3:.1f} ms, {anchor[1]:.3f} J per token)")
    idle = points["idle_power_w"].dropna()
    idle_w = float(idle.iloc[0]) if len(idle) else idle_w_per_gpu * int(n_gpus)
    notes.append(f"idle {idle_w:.0f} W ({'measured' if len(idle) else IDLE_SOURCE})")
    prefill_s, prefill_j = prefill_costs(params_b, int(n_gpus)) if params_b else (0.0, 0.0)
    return ServerPhysics(
        model_id or str(model), str(gpu), int(n_gpus), monotone_curve(batches, tpot, max_batch),
        monotone_curve(batches, jpt, max_batch), idle_w, prefill_s, prefill_j,
        "measured" if (points["provenance"] == "measured").all() else "derived",
        f"{model} on {n_gpus} x {gpu}: " + "; ".join(notes))


def batch1_anchors(data_dir: str | os.PathLike | None) -> dict[str, tuple[float, float]]:
    """(TPOT, J per token) at batch 1 per ML.ENERGY H100 chat model: the project's batch-1 law."""
    curves = batch1_curves(data_dir)
    return {row.model: (float(row.tpot1_s), float(row.joules_per_token1)) for row in curves.itertuples()}


def main_configuration(table: pd.DataFrame, model: str) -> pd.DataFrame:
    """A model's rows in its most-measured configuration (ties: fewest GPUs)."""
    rows = table[table["model_id"] == model]
    if rows.empty:
        raise RoutingGymError(f"batch-curve table has no rows for model {model!r}")
    counts = rows.groupby(["gpu", "n_gpus"]).size().reset_index(name="k").sort_values(["k", "n_gpus"], ascending=[False, True])
    gpu, n_gpus = counts.iloc[0][["gpu", "n_gpus"]]
    return rows[(rows["gpu"] == gpu) & (rows["n_gpus"] == n_gpus)]


@dataclass(frozen=True)
class DerivedLaw:
    """The decode law at batch 128 times the measured models' median curve shape."""

    tpot_shape: np.ndarray
    jpt_shape: np.ndarray
    law: object  # energy_law.DecodeLaw

    def physics(self, model_id: str, params_b: float, active_params_b: float | None = None, *,
                max_batch: int = DEFAULT_MAX_BATCH, idle_w_per_gpu: float = IDLE_W_PER_GPU) -> ServerPhysics:
        gpus = serving_gpus(params_b)
        n_eff = effective_params(params_b)
        tpot128 = self.law.seconds_per_token(gpus, n_eff)  # type: ignore[attr-defined]
        jpt128 = self.law.joules_per_token(gpus, n_eff)  # type: ignore[attr-defined]
        idx = np.minimum(np.arange(max_batch + 1), len(self.tpot_shape) - 1)
        prefill_s, prefill_j = prefill_costs(active_params_b or params_b, gpus)
        return ServerPhysics(
            model_id, "H100 80GB HBM3", gpus, tpot128 * self.tpot_shape[idx], jpt128 * self.jpt_shape[idx],
            idle_w_per_gpu * gpus, prefill_s, prefill_j, "derived",
            f"derived: the energy law at {params_b:g} B on {gpus} GPU(s) ({jpt128:.3f} J, {tpot128 * 1e3:.1f} ms per token "
            f"at batch {SHAPE_REFERENCE_BATCH}) x the median measured curve shape; idle {IDLE_SOURCE}")


def derived_law(data_dir: str | os.PathLike | None, measured: Mapping[str, ServerPhysics]) -> DerivedLaw:
    """The law fitted to ML.ENERGY's H100 chat runs and the median shape of ``measured`` curves."""
    fits = [p for p in measured.values() if p.max_batch >= SHAPE_REFERENCE_BATCH]
    if not fits:
        raise RoutingGymError("no measured curve reaches batch 128: the derived curve shape needs one")
    width = min(p.max_batch for p in fits) + 1
    tpot = np.median([p.tpot_s[:width] / p.tpot_s[SHAPE_REFERENCE_BATCH] for p in fits], axis=0)
    jpt = np.median([p.joules_per_token[:width] / p.joules_per_token[SHAPE_REFERENCE_BATCH] for p in fits], axis=0)
    return DerivedLaw(tpot, jpt, fit_decode_law(measured_runs(data_dir)))


# "ML.ENERGY org/name" in a model's energy_source, unless it is only a stand-in of the same size
_MATCH_IN_SERVING = re.compile(r"ML\.ENERGY match: ([\w.-]+/[\w.-]+)")
_MEASURED_IN_SOURCE = re.compile(r"ML\.ENERGY ([\w.-]+/[\w.-]+)(?!\s*\(same-size stand-in\))")


def measured_as(model_row: Mapping[str, object], measured_ids: list[str]) -> str | None:
    """The ML.ENERGY model a tournament model *is*: its serving ``hf_id`` or model id among the
    measured ids (case-insensitive), else the one its ``energy_source`` names (not a stand-in)."""
    by_lower = {m.lower(): m for m in measured_ids}
    serving = model_row.get("serving") or {}
    serving = serving if isinstance(serving, Mapping) else {}
    stated = _MATCH_IN_SERVING.search(str(serving.get("energy_match") or ""))  # a real-data build's own match
    if stated and stated.group(1) in measured_ids:
        return stated.group(1)
    for name in (serving.get("hf_id"), model_row.get("model_id")):
        if isinstance(name, str) and name.lower() in by_lower:
            return by_lower[name.lower()]
    found = _MEASURED_IN_SOURCE.search(str(model_row.get("energy_source") or ""))
    return found.group(1) if found and found.group(1) in measured_ids else None


def physics_for_tournament(models: pd.DataFrame, table: pd.DataFrame, data_dir: str | os.PathLike | None, *,
                           max_batch: int = DEFAULT_MAX_BATCH, idle_w_per_gpu: float = IDLE_W_PER_GPU,
                           anchors: Mapping[str, tuple[float, float]] | None = None) -> list[ServerPhysics]:
    """One :class:`ServerPhysics` per tournament model (rows of ``models``, in order): fitted to its
    measured curve (``table``, a batch-curve table) or derived from the energy law."""
    anchors = batch1_anchors(data_dir) if anchors is None else anchors
    measured_ids = sorted(set(table["model_id"]))
    fitted: dict[str, ServerPhysics] = {}
    for mid in measured_ids:
        params = MLENERGY_PARAMS_B.get(mid)
        fitted[mid] = fit_physics(main_configuration(table, mid), anchors.get(mid), max_batch=max_batch,
                                  params_b=params, idle_w_per_gpu=idle_w_per_gpu)
    law = derived_law(data_dir, fitted)
    out = []
    for row in models.to_dict("records"):
        match = measured_as(row, measured_ids)
        if match is not None:
            physics = _replace(fitted[match], model_id=str(row["model_id"]))
        else:
            params = float(row["params_b"])
            if not params > 0 or math.isnan(params):
                raise RoutingGymError(f"model {row['model_id']!r}: no measured curve and no params_b to derive one from")
            serving = row.get("serving") or {}
            active = serving.get("active_params_b") if isinstance(serving, Mapping) else None
            physics = law.physics(str(row["model_id"]), params, active, max_batch=max_batch, idle_w_per_gpu=idle_w_per_gpu)
        out.append(physics)
    return out
