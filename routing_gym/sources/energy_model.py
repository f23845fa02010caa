"""Energy models of the derived real-data tournaments: where per-token joules come from.

One file (past 600 lines) because every energy model shares its readers (ML.ENERGY runs),
:class:`ModelSpec`, :class:`EnergyProfile`, the prefill law and the card conventions, and the
builders import all of them from one place; the decode law itself is ``energy_law.py``.

A derived tournament (``zeroeval-math``, ``llmrouter``) prices every logged answer as
``output_tokens x J per output token + input_tokens x prefill J per input token`` with one
:class:`EnergyProfile` per model. The *energy model* says where
those coefficients come from; ``routing-gym data build ... --energy-model NAME`` picks it:

``batched`` (default)
    ML.ENERGY v2's H100 figures at max batch size 128 (:func:`batched_profiles`) of the same
    model or of one with an identical architecture (``ModelSpec.same_architecture_as``), scaled by
    the energy law's ratio when served at another precision or on other GPUs; every other model
    by the energy law (``energy_law.py``: GPUs and size, validated leave-one-out). A request's
    share of a busy vLLM server: a few watts per request.
``law``
    The energy law for every model, measured or not: one method for all.
``params``
    The method before the law: the same model's measurement, else a power law in the parameter
    count alone (kept so that ``eval/core/robustness.py`` shows which verdicts depended on it).
``batch1``
    One request at a time on the model's own GPUs, as the reference paper measured (Ollama,
    batch 1). From the same ML.ENERGY runs: for each model, time per output token (TPOT) and
    per-GPU board power (``J/token x tokens/s / GPUs``) are fitted linearly in the run's
    *average* batch (``Avg BS (reqs)``, runs up to :data:`BATCH1_FIT_MAX_BATCH`) and
    extrapolated to a batch of 1; J per output token = GPUs x power(1) x TPOT(1). Models ML.ENERGY
    did not measure use power laws in the parameter count fitted to those values. Honest
    limits: ML.ENERGY's smallest batch is 32-192, so this is an extrapolation over 1.5-2.5
    decades; its TPOT includes the stalls of other requests' prefills (continuous batching), so
    TPOT(1) lands 2-12x above the HBM-bandwidth floor (weights read once per token), which
    makes the batch-1 level an upper-side estimate; power is gross board power (the paper
    subtracts idle, ~60-70 W per H100). The ratio between models is the more robust part.
    Prefill stays the compute-bound law of ``batched`` (2 x active params FLOPs per token at 50 %
    of peak within 700 W): a prompt's prefill is compute-bound at any batch size.
``measured-arch:<table>``
    A calibration table written by ``experiments/measure_architectures.py``: random-init
    models of the pools' architectures, prefilling the real prompt length and decoding exactly
    the logged output length at batch 1, metered with the collector's meters.
    :func:`fit_energy_law` fits, per architecture, ``J = e_in x prompt + e_out x output`` and
    the same for seconds (non-negative least squares on the idle-subtracted joules); a model
    whose architecture was not measured uses power laws in the parameter count over the
    measured architectures. The energies of the tournament's outputs are still *derived*
    (a law from measurements of the architecture, not of those outputs), or *synthetic* when
    the table's meter was the replay meter.

Every energy model returns the profiles and an ``info`` dict whose ``card_notes``,
``hardware``, ``description`` and ``provenance`` the builders copy into the data card. The
ML.ENERGY readers, the H100 prefill law, :class:`ModelSpec` and :class:`EnergyProfile` live here
too, below the builders that import them (``zeroeval``, ``llmrouter``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.errors import RoutingGymError
from routing_gym.paths import data_dir as resolve_data_dir
from routing_gym.sources.energy_law import (
    PREFILL_SPEEDUP,
    check_precision,
    effective_params,
    fit_decode_law,
    leave_one_out,
    serving_gpus,
)

MLENERGY_SOURCE = "ml-energy/leaderboard-v2 @ 4e4fca8d, data/llm_text_generation/chat/H100 80GB HBM3 (Apache-2.0)"

GPU = "H100 80GB HBM3"
BATCH_SIZE = 128
# Prefill energy model: H100 SXM board power / (model FLOP utilisation * dense BF16 peak).
H100_POWER_W = 700.0
H100_PEAK_FLOPS = 989.4e12
PREFILL_MFU = 0.5
JOULES_PER_FLOP = H100_POWER_W / (PREFILL_MFU * H100_PEAK_FLOPS)
GPU_MEMORY_GB = 80.0


@dataclass(frozen=True)
class ModelSpec:
    """An open-weight model of a real-data pool (parameters from its Hugging Face card) and how
    its outputs were served: ``precision`` (``bf16`` | ``fp8`` | ``int4`` ...) and ``n_gpus`` where
    the card or provider states them (``serving_note`` says where), else bf16 and the GPU rule of
    :mod:`routing_gym.sources.energy_law`."""

    hf_id: str
    family: str
    params_b: float
    active_params_b: float | None = None  # mixture-of-experts: parameters used per token
    mlenergy_id: str | None = None  # the same model measured by ML.ENERGY v2, if any
    files: dict[str, str] = field(default_factory=dict)  # ZeroEval directory -> file stem, when not the model id
    same_architecture_as: str | None = None  # an ML.ENERGY model of identical shape (other weights, same cost per token)
    precision: str = "bf16"
    n_gpus: int | None = None
    serving_note: str = ""

    def __post_init__(self) -> None:
        check_precision(self.precision, f"ModelSpec {self.hf_id}")
        if not (self.params_b > 0 or math.isnan(self.params_b)):  # NaN: taken from the matched measurement
            raise RoutingGymError(f"ModelSpec {self.hf_id}: params_b must be > 0 billions, got {self.params_b}")
        if self.n_gpus is not None and self.n_gpus < 1:
            raise RoutingGymError(f"ModelSpec {self.hf_id}: n_gpus must be >= 1, got {self.n_gpus}")

    @property
    def active_b(self) -> float:
        return self.active_params_b or self.params_b

    @property
    def gpus(self) -> int:
        """GPUs it is priced on: the stated serving, else the rule fitted to ML.ENERGY's configurations."""
        return self.n_gpus or serving_gpus(self.params_b, self.precision)

    @property
    def measured_as(self) -> str | None:
        """The ML.ENERGY model whose measurement prices it: itself, else one of identical shape."""
        return self.mlenergy_id or self.same_architecture_as


# Parameters (billions) of the ML.ENERGY H100 chat models, from their model cards; its
# models.json rounds them to integers.
MLENERGY_PARAMS_B = {
    "google/gemma-2-2b-it": 2.61, "google/gemma-2-9b-it": 9.24, "google/gemma-2-27b-it": 27.2,
    "meta-llama/Meta-Llama-3.1-8B-Instruct": 8.03, "meta-llama/Meta-Llama-3.1-70B-Instruct": 70.6,
    "meta-llama/Meta-Llama-3.1-405B-Instruct": 405.9, "microsoft/Phi-3-mini-4k-instruct": 3.82,
    "microsoft/Phi-3-small-8k-instruct": 7.39, "microsoft/Phi-3-medium-4k-instruct": 14.0,
    "mistralai/Mistral-7B-Instruct-v0.3": 7.25, "mistralai/Mistral-Nemo-Instruct-2407": 12.2,
    "mistralai/Mistral-Large-Instruct-2407": 122.6, "mistralai/Mixtral-8x7B-Instruct-v0.1": 46.7,
    "mistralai/Mixtral-8x22B-Instruct-v0.1": 140.6,
}


def measured_model_ids(data_dir: str | os.PathLike | None, gpu: str = GPU) -> list[str]:
    """Every model ML.ENERGY v2 measured on ``gpu`` (chat and code tasks), as ``org/name`` from its folders."""
    root = data_root(data_dir) / "energy" / "mlenergy_v2" / "data" / "llm_text_generation"
    return sorted({f"{d.parent.name}/{d.name}" for d in root.glob(f"*/{gpu}/*/*") if d.is_dir()})


@dataclass(frozen=True)
class MeasurementMatch:
    """How a model was matched to an ML.ENERGY measurement: ``rule`` is ``stated`` (its spec names
    the measured model or one of identical architecture), ``id`` (its public id is a measured
    model's id), ``name`` (its name is the last part of exactly one measured model's id), or
    ``none`` (priced by the energy law); ``text`` is what the card says."""

    rule: str
    text: str


def match_measurement(model_id: str, spec: ModelSpec | None,
                      measured: Sequence[str]) -> tuple[ModelSpec | None, MeasurementMatch]:
    """The spec with ``mlenergy_id`` filled where the model's id or name finds its ML.ENERGY
    measurement, so that an imported model is priced as a built one; parameters the spec leaves
    out (NaN) come from :data:`MLENERGY_PARAMS_B`. Case-insensitive; a name that is the last part
    of several measured ids matches none of them (the card says which)."""
    if spec is not None and spec.measured_as:
        return spec, MeasurementMatch("stated", f"ML.ENERGY match: {spec.measured_as} (named by its spec)")
    by_id = {m.lower(): m for m in measured}
    hf_id = spec.hf_id if spec is not None else model_id
    names = {model_id.lower(), hf_id.rsplit("/", 1)[-1].lower()}
    if hf_id.lower() in by_id:
        found, match = by_id[hf_id.lower()], MeasurementMatch("id", "")
    else:
        hits = sorted({m for m in measured if m.rsplit("/", 1)[-1].lower() in names})
        if len(hits) != 1:
            why = f"its name matches several, {', '.join(hits)}: give id=" if hits else "no measured id or name matches"
            return spec, MeasurementMatch("none", f"ML.ENERGY match: none ({why})")
        found, match = hits[0], MeasurementMatch("name", "")
    text = f"ML.ENERGY match: {found} (by {match.rule}: {hf_id if match.rule == 'id' else model_id})"
    params = MLENERGY_PARAMS_B.get(found, math.nan)
    if spec is None:
        spec = ModelSpec(found, "", params)
    elif math.isnan(spec.params_b):
        spec = replace(spec, params_b=params)
    return replace(spec, mlenergy_id=found), MeasurementMatch(match.rule, text)


def resolve_specs(model_ids: Sequence[str], specs: Mapping[str, ModelSpec], data_dir: str | os.PathLike | None,
                  match: bool = True) -> tuple[dict[str, ModelSpec], dict[str, MeasurementMatch]]:
    """Every model's spec after :func:`match_measurement` (the one path of builders and imports);
    a model with neither a spec nor a match, or left without a parameter count, is an error.
    ``match=False``: no ML.ENERGY lookup (an energy model that does not use it needs no data directory)."""
    measured = measured_model_ids(data_dir) if match else []
    resolved, matches = {}, {}
    for mid in model_ids:
        spec, matches[mid] = match_measurement(mid, specs.get(mid), measured)
        if spec is not None and not math.isnan(spec.params_b):
            resolved[mid] = spec
    unknown = [m for m in model_ids if m not in resolved]
    if unknown:
        raise RoutingGymError(f"models {unknown} have no parameter count (none given, and no ML.ENERGY measurement with "
                              "a known one matches their id or name): their energy cannot be derived; give each a "
                              f"ModelSpec (--model-spec {unknown[0]}=PARAMS_B[,ACTIVE_B][,id=PUBLIC_ID])")
    return resolved, matches


def data_root(data_dir: str | os.PathLike | None) -> Path:
    """The data directory (``--data-dir`` or ``ROUTING_GYM_DATA_DIR``), required."""
    root = resolve_data_dir(data_dir)
    assert root is not None
    return root



@dataclass(frozen=True)
class EnergyProfile:
    """Per-token energy and time of one model on one H100 node (see the module docstring)."""

    joules_per_output_token: float
    seconds_per_output_token: float
    prefill_joules_per_input_token: float
    prefill_seconds_per_input_token: float
    n_gpus: int
    method: str  # "measured-same-model" or "power-law-fit"
    source: str  # human-readable provenance, stored as the model's energy_source

    def energy_j(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        return output_tokens * self.joules_per_output_token + input_tokens * self.prefill_joules_per_input_token

    def latency_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        return output_tokens * self.seconds_per_output_token + input_tokens * self.prefill_seconds_per_input_token


MLENERGY_FIELDS = ("Energy/req (J)", "Avg Output Tokens", "Avg TPOT (s)", "Avg BS (reqs)", "Token tput (tok/s)")


def load_mlenergy(data_dir: str | os.PathLike | None = None, task: str = "chat", gpu: str = GPU) -> pd.DataFrame:
    """Every ML.ENERGY v2 run of ``task`` on ``gpu``: one row per model x configuration."""
    root = data_root(data_dir) / "energy" / "mlenergy_v2" / "data" / "llm_text_generation" / task / gpu
    if not root.is_dir():
        raise RoutingGymError(f"{root}: missing (expected ML.ENERGY v2 measurements in the data directory)")
    rows = []
    for path in sorted(root.glob("*/*/bs*+tp*+pp*.json")):
        m = re.fullmatch(r"bs(\d+)\+tp(\d+)\+pp(\d+)\.json", path.name)
        if not m:
            continue
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            energy, tokens, tpot, avg_batch, throughput = (float(rec[k]) for k in MLENERGY_FIELDS)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RoutingGymError(f"{path}: not an ML.ENERGY result with {', '.join(MLENERGY_FIELDS)} "
                                  f"({type(exc).__name__}: {exc})") from None
        if not (energy > 0 and tokens > 0 and tpot > 0):
            raise RoutingGymError(f"{path}: non-positive energy, token count or TPOT")
        model = f"{path.parent.parent.name}/{path.parent.name}"
        bs, tp, pp = (int(g) for g in m.groups())
        rows.append({"model": model, "batch_size": bs, "tp": tp, "pp": pp, "n_gpus": tp * pp,
                     "joules_per_token": energy / tokens, "tpot_s": tpot, "avg_batch": avg_batch,
                     "tokens_per_s": throughput, "energy_j": energy, "output_tokens": tokens, "file": str(path.relative_to(data_root(data_dir)))})
    if not rows:
        raise RoutingGymError(f"{root}: no bs*+tp*+pp*.json measurement files")
    return pd.DataFrame(rows)


def select_batch_size(runs: pd.DataFrame, batch_size: int = BATCH_SIZE) -> pd.DataFrame:
    """One run per model: max batch size ``batch_size``, else the next larger one measured."""
    chosen = []
    for model, group in runs.groupby("model"):
        at_least = group[group["batch_size"] >= batch_size]
        pick = at_least.nsmallest(1, "batch_size") if len(at_least) else group.nlargest(1, "batch_size")
        chosen.append(pick)
    return pd.concat(chosen, ignore_index=True)


@dataclass(frozen=True)
class PowerLawFit:
    """``y = a * N^b`` fitted by least squares on ``log y = log a + b log N``."""

    a: float
    b: float
    r2: float
    n: int

    def __call__(self, params_b: float) -> float:
        return self.a * params_b**self.b

    def describe(self, unit: str) -> str:
        return f"{self.a:.4g} * N^{self.b:.3f} {unit} (N = params in billions; R^2 = {self.r2:.3f} over {self.n} models)"


def fit_power_law(params_b: Sequence[float], values: Sequence[float]) -> PowerLawFit:
    from scipy.stats import linregress

    res = linregress(np.log(np.asarray(params_b, float)), np.log(np.asarray(values, float)))
    return PowerLawFit(a=float(np.exp(res.intercept)), b=float(res.slope), r2=float(res.rvalue**2), n=len(params_b))


def gpus_for(params_b: float) -> int:
    # the smallest power of two of 80 GB GPUs that holds the BF16 weights with 25 % headroom
    need = 2.0 * params_b * 1.25 / GPU_MEMORY_GB
    return int(2 ** max(0, math.ceil(math.log2(max(need, 1.0)))))


def measured_runs(data_dir: str | os.PathLike | None) -> pd.DataFrame:
    """ML.ENERGY's H100 chat runs at the batch-size rule, one per model, with parameter counts."""
    runs = select_batch_size(load_mlenergy(data_dir))
    runs["params_b"] = [MLENERGY_PARAMS_B.get(m, np.nan) for m in runs["model"]]
    if runs["params_b"].isna().any():
        unknown = runs.loc[runs["params_b"].isna(), "model"].tolist()
        raise RoutingGymError(f"ML.ENERGY models without a parameter count in MLENERGY_PARAMS_B: {unknown}")
    return runs


# How a batched energy model prices each model (``--energy-model``): 'batched' the measurement
# of the same model or shape, else the law; 'law' the law for every model; 'params' the method
# before the law (same model measured, else a power law in the parameter count), kept to show
# which results depended on it.
BATCHED_KINDS = ("batched", "law", "params")


def batched_profiles(model_ids: Sequence[str], data_dir: str | os.PathLike | None,
                     specs: dict[str, ModelSpec], kind: str = "batched") -> tuple[dict[str, EnergyProfile], dict[str, Any]]:
    """A batched energy model (:data:`BATCHED_KINDS`): every model's profile, and the fits and runs used (for the card)."""
    runs = measured_runs(data_dir)
    law = fit_decode_law(runs)
    # the fits use the chat runs only; a model measured only on the code task (codegemma) is
    # looked up there, same GPU and batch-size rule
    j_fit = fit_power_law(runs["params_b"], runs["joules_per_token"])
    t_fit = fit_power_law(runs["params_b"], runs["tpot_s"])
    wanted = {specs[m].measured_as for m in model_ids if m in specs and specs[m].measured_as}
    by_model = runs.set_index("model")
    if wanted - set(by_model.index):
        code = select_batch_size(load_mlenergy(data_dir, task="code")).set_index("model")
        by_model = pd.concat([by_model, code.loc[sorted((wanted - set(by_model.index)) & set(code.index))]])
    profiles = {}
    for mid in model_ids:
        if mid not in specs:
            raise RoutingGymError(f"model {mid!r} is not an open-weight model with a known parameter count "
                                  f"(routing_gym.sources.zeroeval.OPEN_MODELS); its energy cannot be derived")
        spec = specs[mid]
        if kind == "params":
            profiles[mid] = _params_profile(spec, by_model, j_fit, t_fit)
            continue
        measured = spec.measured_as if kind == "batched" and spec.measured_as in by_model.index else None
        if measured:
            run = by_model.loc[measured]
            run_gpus = int(run["n_gpus"])
            gpus = spec.n_gpus or (run_gpus if spec.precision in ("bf16", "fp16") else spec.gpus)
            # the measurement, scaled by the law's ratio when served on other GPUs or at another precision
            n_eff = effective_params(spec.params_b, spec.precision)
            j_scale = law.joules_per_token(gpus, n_eff) / law.joules_per_token(run_gpus, spec.params_b)
            t_scale = law.seconds_per_token(gpus, n_eff) / law.seconds_per_token(run_gpus, spec.params_b)
            j, t = float(run["joules_per_token"]) * j_scale, float(run["tpot_s"]) * t_scale
            how = "measured-same-model" if measured == spec.mlenergy_id else "measured-same-architecture"
            method = how if math.isclose(j_scale, 1.0) else f"{how}-scaled"
            source = (f"derived from ML.ENERGY v2 measurement of {measured} on {run_gpus} x {GPU} "
                      f"({Path(run['file']).parts[-5]}, {Path(run['file']).name}): {run['joules_per_token']:.4f} J and "
                      f"{run['tpot_s'] * 1e3:.1f} ms per output token"
                      + ("" if measured == spec.mlenergy_id else f" (identical architecture to {spec.hf_id})")
                      + ("" if math.isclose(j_scale, 1.0) else
                         f"; x {j_scale:.3f} for {spec.precision} on {gpus} GPUs (ratio of the energy law)"))
        else:
            gpus = spec.gpus
            n_eff = effective_params(spec.params_b, spec.precision)
            j, t = law.joules_per_token(gpus, n_eff), law.seconds_per_token(gpus, n_eff)
            method = "energy-law"
            source = (f"derived: energy law at {gpus} GPUs, N_eff = {n_eff:g} B ({spec.params_b:g} B params, "
                      f"{spec.precision}): {j:.4f} J and {t * 1e3:.1f} ms per output token")
        prefill_j, prefill_s = _prefill(spec, gpus)
        profiles[mid] = EnergyProfile(j, t, prefill_j, prefill_s, gpus, method,
                                      source + f"; prefill 2*N_active FLOPs at {JOULES_PER_FLOP / PREFILL_SPEEDUP[spec.precision]:.3g} J/FLOP")
    loo = leave_one_out(runs)
    info = {
        "gpu": GPU, "batch_size_rule": f"max batch size {BATCH_SIZE} (next larger when not measured)",
        "energy_law": law.describe(), "joules_per_token_fit": j_fit.describe("J/token"), "tpot_fit": t_fit.describe("s/token"),
        "law_loo_abs_error": {"median": float(loo["law_error"].abs().median()), "max": float(loo["law_error"].abs().max())},
        "params_fit_loo_abs_error": {"median": float(loo["params_fit_error"].abs().median()),
                                     "max": float(loo["params_fit_error"].abs().max())},
        "prefill": f"2 * active params FLOPs per input token at {JOULES_PER_FLOP:.4g} J/FLOP "
                   f"({H100_POWER_W:g} W / ({PREFILL_MFU:g} * {H100_PEAK_FLOPS / 1e12:g} TFLOP/s)) in bf16, half that in fp8",
        "methods": {m: p.method for m, p in profiles.items()},
        "runs": runs[["model", "batch_size", "n_gpus", "joules_per_token", "tpot_s", "params_b", "file"]].to_dict("records"),
    }
    return profiles, info


def _prefill(spec: ModelSpec, gpus: int) -> tuple[float, float]:
    """Prefill J and seconds per input token: compute-bound, 2 x active params FLOPs (module docstring)."""
    flops = 2 * spec.active_b * 1e9 / PREFILL_SPEEDUP[spec.precision]
    return flops * JOULES_PER_FLOP, flops / (PREFILL_MFU * H100_PEAK_FLOPS * gpus)


def _params_profile(spec: ModelSpec, by_model: pd.DataFrame, j_fit: PowerLawFit, t_fit: PowerLawFit) -> EnergyProfile:
    """The method before the energy law: the same model's measurement, else power laws in N (serving ignored)."""
    bf16 = ModelSpec(spec.hf_id, spec.family, spec.params_b, spec.active_params_b)
    if spec.mlenergy_id and spec.mlenergy_id in by_model.index:
        run = by_model.loc[spec.mlenergy_id]
        gpus = int(run["n_gpus"])
        return EnergyProfile(float(run["joules_per_token"]), float(run["tpot_s"]), *_prefill(bf16, gpus), gpus,
                             "measured-same-model", f"derived from ML.ENERGY v2 measurement of {spec.mlenergy_id}")
    gpus = gpus_for(spec.params_b)
    return EnergyProfile(j_fit(spec.params_b), t_fit(spec.params_b), *_prefill(bf16, gpus), gpus, "power-law-fit",
                         f"derived: power-law fit in parameter count at N = {spec.params_b:g} B")


ENERGY_MODELS = ("batched", "law", "params", "batch1", "measured-arch:<table>")
DEFAULT_ENERGY_MODEL = "batched"
# Runs up to this average batch enter the batch-1 fit: TPOT grows about linearly with the batch
# there; beyond it some runs saturate (gemma-2-2b's TPOT stays ~285 ms from 1,000 to 1,500).
BATCH1_FIT_MAX_BATCH = 512.0
H100_HBM_BYTES_PER_S = 3.35e12  # H100 SXM HBM3 bandwidth, for the memory floor shown beside TPOT(1)
CALIBRATION_COLUMNS = ("architecture", "params_b", "prompt_tokens", "output_tokens", "seconds", "joules", "meter")
MEASURED_METERS = ("nvml-counter", "nvml-poll")

# Architectures of the pools (hand-written configs in experiments/measure_architectures.py),
# keyed by the Hugging Face ids of the models that share them. Same shape = same architecture:
# Qwen2-7B is Qwen2.5-7B's shape, Phi-3.5-mini Phi-3-mini's, Llama-3(.1)-8B and ChatQA-8B one shape.
ARCHITECTURE_OF: dict[str, str] = {
    "Qwen/Qwen2.5-0.5B-Instruct": "qwen2.5-0.5b", "Qwen/Qwen2.5-1.5B-Instruct": "qwen2.5-1.5b",
    "Qwen/Qwen2.5-3B-Instruct": "qwen2.5-3b", "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
    "Qwen/Qwen2-7B-Instruct": "qwen2.5-7b",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3.1-8b", "nvidia/Llama3-ChatQA-1.5-8B": "llama-3.1-8b",
    "google/gemma-2-2b-it": "gemma-2-2b", "google/gemma-2-9b-it": "gemma-2-9b", "google/gemma-2-27b-it": "gemma-2-27b",
    "microsoft/Phi-3-mini-4k-instruct": "phi-3-mini", "microsoft/Phi-3.5-mini-instruct": "phi-3-mini",
}


@dataclass(frozen=True)
class EnergyModelChoice:
    """A parsed ``--energy-model`` value."""

    kind: str  # batched | law | params | batch1 | measured-arch
    table: Path | None = None

    @property
    def suffix(self) -> str:
        """What the tournament name gets, so builds under different energy models never share a name."""
        return "" if self.kind == "batched" else f"-{self.kind}"


def parse_energy_model(text: str) -> EnergyModelChoice:
    """``batched`` | ``law`` | ``params`` | ``batch1`` | ``measured-arch:<calibration table>``; errors name the option."""
    if text in (*BATCHED_KINDS, "batch1"):
        return EnergyModelChoice(text)
    if text.startswith("measured-arch:"):
        table = Path(text.removeprefix("measured-arch:")).expanduser()
        if not str(table) or not table.is_file():
            raise RoutingGymError(f"--energy-model {text}: calibration table {str(table)!r} is not a file "
                                  "(write one with experiments/measure_architectures.py)")
        return EnergyModelChoice("measured-arch", table)
    raise RoutingGymError(f"--energy-model {text!r}: unknown; choose one of {', '.join(ENERGY_MODELS)}")


def tournament_name(base: str, energy_model: str) -> str:
    """``zeroeval-math`` under ``batched``, ``zeroeval-math-batch1`` under ``batch1``, ..."""
    return base + parse_energy_model(energy_model).suffix


def derive_energy_profiles(
    energy_model: str,
    model_ids: Sequence[str],
    data_dir: str | os.PathLike | None = None,
    *,
    specs: dict[str, ModelSpec],
) -> tuple[dict[str, EnergyProfile], dict[str, Any]]:
    """Every model's energy profile under ``energy_model``, and what the data card says about it.

    ``specs``: the pool's open-weight models (``zeroeval.OPEN_MODELS``, ``llmrouter.LLMROUTER_MODELS``).
    """
    choice = parse_energy_model(energy_model)
    specs, matches = resolve_specs(model_ids, specs, data_dir, match=choice.kind != "measured-arch")
    if choice.kind in BATCHED_KINDS:
        profiles, info = batched_profiles(model_ids, data_dir, specs, choice.kind)
        info = {**info, **_batched_card(info, choice.kind)}
    elif choice.kind == "batch1":
        profiles, info = batch1_profiles(model_ids, data_dir, specs)
    else:
        assert choice.table is not None
        profiles, info = measured_arch_profiles(choice.table, model_ids, specs)
    info["alternatives"] = energy_alternatives(model_ids, data_dir, specs) if choice.kind != "measured-arch" else {}
    if choice.kind != "measured-arch":  # the calibration table prices by architecture, not by ML.ENERGY
        info["matches"] = {m: match.text for m, match in matches.items()}
        profiles = {m: replace(p, source=f"{p.source}; {matches[m].text}") for m, p in profiles.items()}
    info["specs"] = specs
    return profiles, info


def serving_fields(model_id: str, spec: ModelSpec, profile: EnergyProfile, info: dict[str, Any]) -> dict[str, Any]:
    """The ``serving`` entries every derived builder writes for a model: how it is priced, and its
    per-token coefficients under each alternative energy model (for eval/core/robustness.py)."""
    return {
        "hf_id": spec.hf_id, "active_params_b": spec.active_b, "gpu": info["gpu"], "n_gpus": profile.n_gpus,
        "precision": spec.precision, "serving_note": spec.serving_note, "energy_method": profile.method,
        "energy_match": info.get("matches", {}).get(model_id, ""),
        "joules_per_output_token": profile.joules_per_output_token,
        "seconds_per_output_token": profile.seconds_per_output_token,
        "prefill_joules_per_input_token": profile.prefill_joules_per_input_token,
        "energy_alternatives": info.get("alternatives", {}).get(model_id, {}),
    }


# Bumped whenever a change here changes derived joules: a cached build of another version is re-priced.
ENERGY_LAW_VERSION = 2


def card_energy_fit(info: dict[str, Any]) -> dict[str, Any]:
    """What of an energy model's info goes into the card's ``extra.energy_fit`` (not the bulky per-run tables)."""
    return {**{k: v for k, v in info.items() if k not in ("runs", "curves", "card_notes", "alternatives", "specs")},
            "energy_law_version": ENERGY_LAW_VERSION}


# Card notes that energy models write (every kind's card_notes starts with one of these).
ENERGY_NOTE_PREFIXES = ("energy model", "energy law", "method per model", "prefill:", "latency", "unmeasured models",
                        "TPOT(1)", "power is gross", "joules are idle-subtracted", "the calibration")


def reprice_tournament(t: Any, base_name: str, energy_model: str, specs: dict[str, ModelSpec],
                       data_dir: str | os.PathLike | None = None) -> Any:
    """The same derived tournament (outcomes, tokens, splits) with energy, latency and power
    re-derived from its token counts under ``energy_model``: no regrading. ``base_name`` is the
    build's name without an energy suffix (``zeroeval-math``)."""
    from dataclasses import replace

    profiles, info = derive_energy_profiles(energy_model, t.model_ids, data_dir, specs=specs)
    cols = [(profiles[m].energy_j(t.input_tokens[:, k], t.output_tokens[:, k]),
             profiles[m].latency_s(t.input_tokens[:, k], t.output_tokens[:, k])) for k, m in enumerate(t.model_ids)]
    energy, latency = np.column_stack([c[0] for c in cols]), np.column_stack([c[1] for c in cols])
    models = t.models.copy()
    models["serving"] = [{**serving, **serving_fields(m, info["specs"][m], profiles[m], info)}
                         for m, serving in zip(t.model_ids, models["serving"])]
    models["energy_source"] = [profiles[m].source for m in t.model_ids]
    models["energy_provenance"] = info["provenance"]
    card = replace(t.card, name=tournament_name(base_name, energy_model), provenance=info["provenance"],
                   notes=[n for n in t.card.notes if not n.startswith(ENERGY_NOTE_PREFIXES)] + info["card_notes"],
                   extra={**t.card.extra, "energy_model": energy_model, "energy_fit": card_energy_fit(info)})
    return replace(t, models=models, energy_j=energy, latency_s=latency, mean_power_w=energy / latency, card=card,
                   source=card.name)


# The energy models every derived build also records per model (``serving["energy_alternatives"]``),
# so that ``compare`` and ``frontier`` can re-price the same actions under each (eval/core/robustness.py).
ALTERNATIVE_ENERGY_MODELS = ("batched", "law", "params", "batch1")


def energy_alternatives(model_ids: Sequence[str], data_dir: str | os.PathLike | None,
                        specs: dict[str, ModelSpec]) -> dict[str, dict[str, dict[str, float]]]:
    """Per model, its per-token coefficients under every :data:`ALTERNATIVE_ENERGY_MODELS` entry."""
    out: dict[str, dict[str, dict[str, float]]] = {m: {} for m in model_ids}
    for kind in ALTERNATIVE_ENERGY_MODELS:
        if kind == "batch1":
            try:
                profiles = batch1_profiles(model_ids, data_dir, specs)[0]
            except RoutingGymError:
                # a data directory with the batch-128 runs only (what `data build --download` fetches) has
                # no batch-size curve to extrapolate: the robustness check then covers the other laws
                continue
        else:
            profiles = batched_profiles(model_ids, data_dir, specs, kind)[0]
        for m, p in profiles.items():
            out[m][kind] = {"joules_per_output_token": p.joules_per_output_token,
                            "prefill_joules_per_input_token": p.prefill_joules_per_input_token, "method": p.method}
    return out


def _batched_card(info: dict[str, Any], kind: str) -> dict[str, Any]:
    loo, before = info["law_loo_abs_error"], info["params_fit_loo_abs_error"]
    counts = pd.Series(info["methods"]).value_counts()
    rule = {
        "batched": f"the ML.ENERGY run of the same model or of one with an identical architecture at "
                   f"{info['batch_size_rule']} (scaled by the law's ratio for another precision or GPU count), "
                   "otherwise the energy law",
        "law": "the energy law for every model, measured or not, so that all are priced the same way",
        "params": "the method before the energy law: the ML.ENERGY run of the same model, otherwise power-law fits "
                  f"in the parameter count alone {info['joules_per_token_fit']} and {info['tpot_fit']}",
    }[kind]
    return {
        "energy_model": kind, "provenance": "derived",
        "description": f"DERIVED from ML.ENERGY v2 {GPU} per-token measurements at batch size {BATCH_SIZE} "
                       f"(energy model '{kind}')",
        "hardware": f"derived for NVIDIA {GPU} (ML.ENERGY v2, vLLM, batched)",
        "card_notes": [
            f"energy model '{kind}': decode J and seconds per output token from {rule}",
            f"energy law (routing_gym/sources/energy_law.py): {info['energy_law']}; leave-one-out error over the "
            f"measured models median {100 * loo['median']:.1f} %, max {100 * loo['max']:.1f} % (a power law in the "
            f"parameter count alone: median {100 * before['median']:.1f} %, max {100 * before['max']:.1f} %)",
            "method per model: " + ", ".join(f"{n} {m}" for m, n in counts.items())
            + " (each model's serving.energy_method and energy_source)",
            f"prefill: {info['prefill']}",
            "latency and mean power are a request's share of a batched server (energy / latency), not one request alone",
        ],
    }


# ============================================================================ batch1
def _linear_at_one(x: np.ndarray, y: np.ndarray) -> float:
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept + slope)


def batch1_curves(data_dir: str | os.PathLike | None = None, task: str = "chat") -> pd.DataFrame:
    """Per ML.ENERGY model: TPOT and per-GPU power extrapolated linearly in the average batch to 1.

    Uses the GPU configuration of the batched rule's run (same TP x PP) and its runs with an
    average batch up to :data:`BATCH1_FIT_MAX_BATCH`; a model with fewer than two such runs
    is left out (the parameter-count fit covers it).
    """
    runs = load_mlenergy(data_dir, task=task)
    runs["power_w_per_gpu"] = runs["joules_per_token"] * runs["tokens_per_s"] / runs["n_gpus"]
    config = select_batch_size(runs)[["model", "tp", "pp"]]
    rows = []
    for model, group in runs.merge(config, on=["model", "tp", "pp"]).groupby("model"):
        fit = group[group["avg_batch"] <= BATCH1_FIT_MAX_BATCH]
        if len(fit) < 2:
            continue
        tpot1 = _linear_at_one(fit["avg_batch"].to_numpy(), fit["tpot_s"].to_numpy())
        power1 = _linear_at_one(fit["avg_batch"].to_numpy(), fit["power_w_per_gpu"].to_numpy())
        if not (tpot1 > 0 and power1 > 0):
            raise RoutingGymError(f"ML.ENERGY {task} runs of {model} ({', '.join(fit['file'])}): extrapolating to batch 1 "
                                  f"gives TPOT {tpot1:.4g} s and power {power1:.4g} W; both must be positive")
        n_gpus = int(fit["n_gpus"].iloc[0])
        params_b = MLENERGY_PARAMS_B.get(model, math.nan)
        rows.append({
            "model": model, "task": task, "n_gpus": n_gpus, "params_b": params_b, "runs": len(fit),
            "min_avg_batch": float(fit["avg_batch"].min()), "max_avg_batch": float(fit["avg_batch"].max()),
            "tpot1_s": tpot1, "power1_w_per_gpu": power1, "joules_per_token1": n_gpus * power1 * tpot1,
            "tpot_at_min_batch_s": float(fit.loc[fit["avg_batch"].idxmin(), "tpot_s"]),
            "hbm_floor_tpot_s": 2 * params_b * 1e9 / (n_gpus * H100_HBM_BYTES_PER_S),
        })
    if not rows:
        raise RoutingGymError(f"ML.ENERGY {task} runs on {GPU}: no model has two runs to extrapolate to batch 1")
    return pd.DataFrame(rows)


def batch1_profiles(model_ids: Sequence[str], data_dir: str | os.PathLike | None,
                    specs: dict[str, ModelSpec]) -> tuple[dict[str, EnergyProfile], dict[str, Any]]:
    curves = batch1_curves(data_dir)
    j_fit = fit_power_law(curves["params_b"], curves["joules_per_token1"])
    t_fit = fit_power_law(curves["params_b"], curves["tpot1_s"])
    wanted = {specs[m].measured_as for m in model_ids if specs[m].measured_as} - set(curves["model"])
    if wanted:  # e.g. codegemma, measured on the code task only (as in the batched model)
        code = batch1_curves(data_dir, task="code")
        curves = pd.concat([curves, code[code["model"].isin(wanted)]], ignore_index=True)
    by_model = curves.set_index("model")
    profiles = {}
    for mid in model_ids:
        spec = specs[mid]
        if spec.measured_as in by_model.index:
            c = by_model.loc[spec.measured_as]
            n_gpus, jpt, tpot = int(c["n_gpus"]), float(c["joules_per_token1"]), float(c["tpot1_s"])
            method = "batch1-extrapolated-same-" + ("model" if spec.measured_as == spec.mlenergy_id else "architecture")
            source = (f"derived (batch 1): ML.ENERGY v2 {c['task']} runs of {spec.measured_as} on {n_gpus} x {GPU}, TPOT and "
                      f"per-GPU power linear in the average batch ({c['runs']:.0f} runs, batch {c['min_avg_batch']:.0f}-"
                      f"{c['max_avg_batch']:.0f}) extrapolated to 1: {tpot * 1e3:.1f} ms x {c['power1_w_per_gpu']:.0f} W "
                      f"per GPU = {jpt:.3f} J per output token")
        else:
            n_gpus, jpt, tpot = spec.gpus, j_fit(spec.params_b), t_fit(spec.params_b)
            method = "batch1-power-law-fit"
            source = (f"derived (batch 1): not measured by ML.ENERGY; power-law fits in parameter count over "
                      f"{j_fit.n} batch-1 extrapolations at N = {spec.params_b:g} B: {jpt:.3f} J and "
                      f"{tpot * 1e3:.1f} ms per output token")
        profiles[mid] = EnergyProfile(
            jpt, tpot, 2 * spec.active_b * 1e9 * JOULES_PER_FLOP,
            2 * spec.active_b * 1e9 / (PREFILL_MFU * H100_PEAK_FLOPS * n_gpus), n_gpus, method,
            source + f"; prefill 2*N FLOPs at {JOULES_PER_FLOP:.3g} J/FLOP")
    ratio = curves["tpot1_s"] / curves["hbm_floor_tpot_s"]
    prefill = (f"2 * active params FLOPs per input token at {JOULES_PER_FLOP:.4g} J/FLOP "
               f"({H100_POWER_W:g} W / ({PREFILL_MFU:g} * {H100_PEAK_FLOPS / 1e12:g} TFLOP/s)), as in 'batched'")
    info = {
        "energy_model": "batch1", "provenance": "derived", "gpu": GPU,
        "joules_per_token_fit": j_fit.describe("J/token"), "tpot_fit": t_fit.describe("s/token"), "prefill": prefill,
        "tpot1_over_hbm_floor": {"min": float(ratio.min()), "median": float(ratio.median()), "max": float(ratio.max())},
        "curves": curves.to_dict("records"),
        "description": f"DERIVED for one request at a time (energy model 'batch1'): ML.ENERGY v2 {GPU} time per output "
                       "token and board power extrapolated to batch 1",
        "hardware": f"derived for NVIDIA {GPU}, one request at a time on the model's GPUs (extrapolated from ML.ENERGY v2 "
                    "batched vLLM runs)",
        "card_notes": [
            "energy model 'batch1': J per output token = GPUs x power(1) x TPOT(1); TPOT and per-GPU board power fitted "
            f"linearly in ML.ENERGY's average batch (runs up to {BATCH1_FIT_MAX_BATCH:g}, the batched rule's GPU "
            "configuration) and extrapolated to a batch of 1 from its smallest runs (batch 32-192)",
            f"unmeasured models: power-law fits {j_fit.describe('J/token')} and {t_fit.describe('s/token')}",
            f"TPOT(1) is {ratio.min():.1f}-{ratio.max():.1f}x (median {ratio.median():.1f}x) the HBM-bandwidth floor "
            "(bf16 weights read once per token): ML.ENERGY's TPOT includes other requests' prefill stalls, so the "
            "batch-1 level is an upper-side estimate; the ratio between models is the more robust part",
            "power is gross board power (ML.ENERGY does not subtract idle; the reference paper does, ~60-70 W per H100)",
            f"prefill: {prefill}",
            "latency is one request alone on its GPUs; mean power = energy / latency is the whole node's draw",
        ],
    }
    return profiles, info


# ============================================================================ measured-arch
@dataclass(frozen=True)
class ArchitectureLaw:
    """Batch-1 cost of one architecture: ``J = e_in x prompt + e_out x output`` (and seconds)."""

    architecture: str
    params_b: float
    joules_per_input_token: float
    joules_per_output_token: float
    seconds_per_input_token: float
    seconds_per_output_token: float
    joules_r2: float
    seconds_r2: float
    n_calls: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_calibration(path: str | os.PathLike) -> pd.DataFrame:
    """Read a calibration table (CSV); errors name the file, row and column."""
    path = Path(path)
    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise RoutingGymError(f"{path}: cannot read the calibration table ({exc})") from None
    missing = [c for c in CALIBRATION_COLUMNS if c not in table.columns]
    if missing:
        raise RoutingGymError(f"{path}: missing column(s) {missing}; expected {list(CALIBRATION_COLUMNS)}")
    if table.empty:
        raise RoutingGymError(f"{path}: no rows")
    for column in ("params_b", "prompt_tokens", "output_tokens", "seconds", "joules"):
        values = pd.to_numeric(table[column], errors="coerce")
        bad = np.flatnonzero(~np.isfinite(values.to_numpy(float)) | (values.to_numpy(float) < 0))
        if len(bad):
            raise RoutingGymError(f"{path}, line {int(bad[0]) + 2}, column {column!r}: {str(table[column].iloc[bad[0]])!r} "
                                  "is not a non-negative number")
        table[column] = values.astype(float)
    return table


def fit_energy_law(table: pd.DataFrame) -> dict[str, ArchitectureLaw]:
    """Per architecture: non-negative least squares of joules and of seconds on (prompt, output) tokens."""
    from scipy.optimize import nnls

    laws = {}
    for arch, group in table.groupby("architecture", sort=True):
        x = group[["prompt_tokens", "output_tokens"]].to_numpy(float)
        if len(group) < 2 or np.linalg.matrix_rank(x) < 2:
            raise RoutingGymError(f"calibration table, architecture {arch!r}: needs calls with at least two different "
                                  "prompt/output length ratios to separate prefill from decode")
        coef = {}
        for target in ("joules", "seconds"):
            y = group[target].to_numpy(float)
            c, _ = nnls(x, y)
            ss_tot = float(((y - y.mean()) ** 2).sum())
            coef[target] = (c, 1 - float(((y - x @ c) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0)
        params = group["params_b"].unique()
        if len(params) != 1:
            raise RoutingGymError(f"calibration table, architecture {arch!r}: rows disagree on params_b ({list(params)})")
        laws[str(arch)] = ArchitectureLaw(
            str(arch), float(params[0]), float(coef["joules"][0][0]), float(coef["joules"][0][1]),
            float(coef["seconds"][0][0]), float(coef["seconds"][0][1]), coef["joules"][1], coef["seconds"][1], len(group))
    return laws


def measured_arch_profiles(table_path: Path, model_ids: Sequence[str],
                           specs: dict[str, ModelSpec]) -> tuple[dict[str, EnergyProfile], dict[str, Any]]:
    table = load_calibration(table_path)
    laws = fit_energy_law(table)
    meters = sorted(table["meter"].astype(str).unique())
    tiny = "config" in table.columns and bool((table["config"].astype(str) != "full").any())
    synthetic = tiny or any(m not in MEASURED_METERS for m in meters)
    devices = sorted(table["device"].astype(str).unique()) if "device" in table.columns else ["unknown device"]
    fits: dict[str, PowerLawFit] = {}
    profiles = {}
    for mid in model_ids:
        spec = specs[mid]
        arch = ARCHITECTURE_OF.get(spec.hf_id)
        if arch in laws:
            law = laws[arch]
            coefs = (law.joules_per_output_token, law.seconds_per_output_token,
                     law.joules_per_input_token, law.seconds_per_input_token)
            method, source = "measured-architecture", (
                f"measured-architecture: batch-1 law of the {arch} architecture ({law.n_calls} calls in {table_path.name}, "
                f"meter {'/'.join(meters)}): {law.joules_per_output_token:.4g} J per output token, "
                f"{law.joules_per_input_token:.4g} J per input token")
        else:
            if len(laws) < 2:
                raise RoutingGymError(f"{table_path}: model {mid!r} ({spec.hf_id}) has no measured architecture "
                                      f"(measured: {sorted(laws)}) and a parameter-count fit needs at least two")
            if not fits:
                params = [law.params_b for law in laws.values()]
                for key in ("joules_per_output_token", "seconds_per_output_token", "joules_per_input_token",
                            "seconds_per_input_token"):
                    fits[key] = fit_power_law(params, [max(getattr(law, key), 1e-12) for law in laws.values()])
            coefs = tuple(fits[k](spec.params_b) for k in ("joules_per_output_token", "seconds_per_output_token",
                                                            "joules_per_input_token", "seconds_per_input_token"))
            method, source = "measured-architecture-power-law-fit", (
                f"measured-architecture: architecture not measured; power law in parameter count over {len(laws)} measured "
                f"architectures at N = {spec.params_b:g} B: {coefs[0]:.4g} J per output token")
        profiles[mid] = EnergyProfile(*coefs, 1, method, source)
    provenance = "synthetic" if synthetic else "derived"
    info = {
        "energy_model": "measured-arch", "provenance": provenance, "gpu": ", ".join(devices), "table": str(table_path),
        "meters": meters,
        "devices": devices, "laws": {a: law.to_dict() for a, law in laws.items()},
        "parameter_fits": {k: f.describe(k) for k, f in fits.items()},
        "description": (f"{provenance.upper()} from a batch-1 law per architecture measured on {', '.join(devices)} "
                        f"(energy model 'measured-arch', meter {'/'.join(meters)})"),
        "hardware": f"batch-1 law measured on {', '.join(devices)} with random-init models of each architecture",
        "card_notes": [
            f"energy model 'measured-arch' ({table_path.name}): per architecture, J = e_in x prompt tokens + e_out x output "
            "tokens and the same for seconds, non-negative least squares over calls of random-init models that prefilled "
            "the real prompt length and decoded exactly the logged output length (bf16, batch 1, one request at a time)",
            "joules are idle-subtracted (the collector's idle baseline), as in the reference paper",
            *([f"unmeasured architectures: {'; '.join(f.describe(k) for k, f in fits.items())}"] if fits else []),
            *(["the calibration meter was a replayed power trace: these energies are SYNTHETIC (pipeline check only)"]
              if synthetic else []),
            *(["the calibration ran TINY stand-ins of the architectures (pipeline check), not their real sizes"]
              if tiny else []),
            "latency is one request alone; mean power = energy / latency",
        ],
    }
    return profiles, info
