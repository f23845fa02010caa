"""The decode energy law of the derived tournaments: J per output token from GPU count and size.

ML.ENERGY v2 measured 14 chat models on H100s (vLLM, max batch size 128). Per output token a
batched server spends ``GPUs x board power x step time / batch``; at batch 128 the step time is
dominated by per-layer kernel latency and weight reads, so the GPUs a model is served on and its
size decide most of the cost. The law fitted to those 14 runs is

    log J/token = a + b log GPUs + c log N_eff      (least squares; the same form for TPOT)

with ``N_eff`` = total parameters (billions) x bytes per parameter / 2 (bf16 = 2 bytes), the
weight bytes read per step in bf16 units. Total parameters, not active ones: ML.ENERGY's two
mixture-of-experts models cost what their total size and GPU count predict (Mixtral-8x22B, 39 B
active of 141 B: 1.98 J/token, beside the dense 123 B Mistral-Large-2 at 2.02 on the same 8
GPUs); with active parameters instead the law's leave-one-out error grows (see
``experiments/energy_laws.py``).

:func:`leave_one_out` refits without each measured model and predicts it: the law's held-out
error, beside that of the previous method (a power law in the parameter count alone).

**Serving: precision and GPU count.** A model's GPU count is its serving's (a
``ModelSpec.n_gpus`` stated by its card or provider), else :func:`serving_gpus`: the smallest
power of two of 80 GB GPUs whose memory holds the weights at most :data:`WEIGHT_SHARE_OF_MEMORY`
full (the rest is KV cache), at most :data:`MAX_GPUS` (two 8-GPU nodes). That rule reproduces the
configuration of every ML.ENERGY H100 run (14 chat, 9 code models). Precision enters twice
(:data:`BYTES_PER_PARAM`): through the GPU count (fp8 halves the weight bytes: Meta quantised
Llama 3.1 405B to FP8 "allowing the model to run within a single server node", Meta AI, *Introducing
Llama 3.1*, 2024) and through ``N_eff``. A measured model served at another precision keeps its
measurement scaled by the law's ratio between the two servings. Prefill is compute-bound: FP8
tensor cores double the dense peak (1,979 vs 989 TFLOP/s, NVIDIA H100 Tensor Core GPU datasheet),
so fp8 halves prefill joules per input token; int4 is weight-only quantisation (AWQ/GPTQ kernels
compute in 16 bit), so its prefill stays that of bf16.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError

BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
# Dense tensor-core peak relative to bf16 for prefill (H100 datasheet: FP8 1,979 TFLOP/s vs BF16 989);
# int8/int4 here are weight-only quantisations that compute in 16 bit.
PREFILL_SPEEDUP = {"bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "int8": 1.0, "int4": 1.0}
GPU_MEMORY_GB = 80.0
WEIGHT_SHARE_OF_MEMORY = 0.55
MAX_GPUS = 16


def check_precision(precision: str, where: str) -> None:
    if precision not in BYTES_PER_PARAM:
        raise RoutingGymError(f"{where}: precision {precision!r} unknown; choose one of {', '.join(BYTES_PER_PARAM)}")


def serving_gpus(params_b: float, precision: str = "bf16") -> int:
    """GPUs of a server for ``params_b`` billion parameters at ``precision`` (the module's rule)."""
    weights_gb = params_b * BYTES_PER_PARAM[precision]
    gpus = 1
    while weights_gb > WEIGHT_SHARE_OF_MEMORY * GPU_MEMORY_GB * gpus and gpus < MAX_GPUS:
        gpus *= 2
    return gpus


def effective_params(params_b: float, precision: str = "bf16") -> float:
    """Weight bytes read per decode step, in billions of bf16 parameters."""
    return params_b * BYTES_PER_PARAM[precision] / 2.0


@dataclass(frozen=True)
class DecodeLaw:
    """``y = exp(a) x GPUs^b x N_eff^c`` for J per output token and for seconds per output token."""

    joules: tuple[float, float, float]
    seconds: tuple[float, float, float]
    n: int

    @staticmethod
    def _eval(coef: tuple[float, float, float], gpus: float, n_eff: float) -> float:
        return float(math.exp(coef[0] + coef[1] * math.log(gpus) + coef[2] * math.log(n_eff)))

    def joules_per_token(self, gpus: float, n_eff: float) -> float:
        return self._eval(self.joules, gpus, n_eff)

    def seconds_per_token(self, gpus: float, n_eff: float) -> float:
        return self._eval(self.seconds, gpus, n_eff)

    def describe(self) -> str:
        (a, b, c), (ta, tb, tc) = self.joules, self.seconds
        return (f"J/token = {math.exp(a):.4g} x GPUs^{b:.3f} x N_eff^{c:.3f}, s/token = {math.exp(ta):.4g} x "
                f"GPUs^{tb:.3f} x N_eff^{tc:.3f} (N_eff = billions of params x bytes/param / 2; least squares in "
                f"logs over {self.n} ML.ENERGY H100 chat models at batch {128})")


def _design(gpus: Sequence[float], n_eff: Sequence[float]) -> np.ndarray:
    return np.column_stack([np.ones(len(gpus)), np.log(np.asarray(gpus, float)), np.log(np.asarray(n_eff, float))])


def fit_decode_law(runs: pd.DataFrame) -> DecodeLaw:
    """Fit the law to measured runs (columns ``n_gpus``, ``params_b``, ``joules_per_token``, ``tpot_s``; bf16)."""
    if len(runs) < 4:
        raise RoutingGymError(f"the decode energy law needs at least 4 measured models, got {len(runs)}")
    x = _design(runs["n_gpus"], effective_params_of(runs))
    coefs = [tuple(float(v) for v in np.linalg.lstsq(x, np.log(runs[col].to_numpy(float)), rcond=None)[0])
             for col in ("joules_per_token", "tpot_s")]
    return DecodeLaw(coefs[0], coefs[1], len(runs))  # type: ignore[arg-type]


def effective_params_of(runs: pd.DataFrame) -> np.ndarray:
    precision = runs["precision"] if "precision" in runs else ["bf16"] * len(runs)
    return np.array([effective_params(p, q) for p, q in zip(runs["params_b"], precision)])


def leave_one_out(runs: pd.DataFrame) -> pd.DataFrame:
    """Each measured model predicted by fits without it: the previous method (power law in the
    parameter count) and the law (GPUs and size). Errors are prediction / measurement - 1."""
    rows = []
    for i in range(len(runs)):
        rest, held = runs.drop(index=runs.index[i]), runs.iloc[i]
        slope, intercept = np.polyfit(np.log(rest["params_b"].to_numpy(float)), np.log(rest["joules_per_token"].to_numpy(float)), 1)
        before = float(np.exp(intercept) * float(held["params_b"]) ** slope)
        law = fit_decode_law(rest)
        after = law.joules_per_token(float(held["n_gpus"]), effective_params(float(held["params_b"])))
        tpot = law.seconds_per_token(float(held["n_gpus"]), effective_params(float(held["params_b"])))
        measured = float(held["joules_per_token"])
        rows.append({"model": held["model"], "params_b": float(held["params_b"]), "n_gpus": int(held["n_gpus"]),
                     "rule_gpus": serving_gpus(float(held["params_b"])), "measured_j_per_token": measured,
                     "params_fit_j_per_token": before, "params_fit_error": before / measured - 1,
                     "law_j_per_token": after, "law_error": after / measured - 1,
                     "law_tpot_error": tpot / float(held["tpot_s"]) - 1})
    return pd.DataFrame(rows)
