"""Procedural tournaments: a controllable, calibrated offline default for RoutingEnv.

``generate(ProceduralConfig(...))`` draws a whole tournament from a seed, with no downloads:

1. **Latent structure.** Every question gets a benchmark and a latent difficulty
   ``d ~ N(0, 1)``; every model an ability per benchmark. Correctness follows a 2PL item
   response model, ``P(correct) = sigmoid(discrimination * (ability - d_ik))``, where
   ``d_ik = sqrt(1 - noise^2) * d_i + noise * e_ik`` mixes the shared difficulty with a
   model-specific part. ``noise`` = 0: all models agree which questions are hard (outcomes as
   correlated as IRT allows); 1: outcomes are independent across models. The mix keeps
   ``d_ik ~ N(0, 1)``, so ``noise`` never changes a model's marginal accuracy.
2. **Costs.** Output tokens = the benchmark's typical length x the model's ``verbosity``,
   growing with difficulty, lognormal, longer when the answer is wrong, and for reasoning
   models heavier-tailed (lognormal plus a Pareto "overthinking" tail), capped at the model's
   ``max_tokens``. Energy = J/token x output tokens + prefill J/token x input tokens; latency
   = request overhead + prefill time + s/token x output tokens; mean power = energy / latency.
3. **Text.** Questions are rendered from templates per benchmark family (word problems,
   multiple choice, sentence completion, competition math, code, logic puzzles). Their
   surface features (number of steps, vocabulary tier, number of objects, constraints) are a
   function of a *text cue* ``c = s * d + sqrt(1 - s^2) * eps`` with ``s = text_signal``: at
   0 the text says nothing about a question's difficulty beyond its benchmark, at 1 it
   reveals the difficulty (up to the templates' discreteness). Text is drawn from its own
   random stream, so for a fixed seed the outcomes are identical whatever ``text_signal``.
4. **Specialization** (``specialization_signal`` > 0, ``routing_gym.sources.specialization``):
   every question gets a topic, every model a skill per topic, and the question opens with a
   sentence in the topic's vocabulary, so which model wins *within* a benchmark shows in the
   text. At 0 (the default) nothing changes: today's pools, bit for bit.

Privileged: the ``difficulty`` column of the queries table is the generator's shared latent
``d`` (as a percentile). No deployed router knows it; an agent that reads it declares
``privileged = {"difficulty"}`` and ``compare`` labels it not deployable.

Everything is vectorized over the ``[N, K]`` outcome arrays; only rendering the question
texts loops in Python (100,000 x 9 takes a few seconds, see ``experiments/bench_synthetic.py``).

Calibration (the ``paper-pool`` default)
---------------------------------------
Constants are hard-coded here so that generation never needs the data directory; each says
where it came from.

- **Joules per output token** are ML.ENERGY leaderboard v2 measurements
  (``$ROUTING_GYM_DATA_DIR/energy/mlenergy_v2/data/llm_text_generation/chat/A100-SXM4-40GB/
  <org>/<model>/bs32+tp1+pp1.json``: ``Energy/req (J)`` / ``Avg Output Tokens``) at the
  smallest batch size measured (32), scaled by one batch-1 factor (``BATCH1_FACTOR``): the
  reference paper served one request at a time with Ollama, where a token costs several times
  more than in a batch of 32. The factor is fitted so that always-Qwen2.5-7B costs the
  paper's 281.6 J per query. Models absent from ML.ENERGY use a power law fitted to the five
  2B-9B A100 measurements (``J/token = 0.0849 * params_b ** 0.523`` at batch 32).
- **Accuracy targets** per model and benchmark (``PAPER_POOL_ACCURACY``) are set so that
  always-Qwen2.5-7B scores the paper's 64.0 %, accuracy rises with size within a family, and
  the two DeepSeek-R1 distills lead on math (as in their public model cards); the generator
  turns them into 2PL abilities with ``ability_for_accuracy``.
- **Output lengths** (``PAPER_BENCHMARKS``) are set so that MATH-500 (~13 % of questions)
  takes about half of the answer energy (the paper: 52-57 %), and so that the paper's GSM8K
  example comes out at its scale (Qwen2.5-0.5B correct at 82 J, DeepSeek-R1-8B at 2,864 J,
  Llama-3.1-8B wrong at 638 J).
- **Seconds per token** are assumptions, not measurements: batch-1 decode speeds typical of
  Ollama on one A100-80GB, chosen so that mean power above idle lies at 70-150 W.
- **Prefill** cost follows from FLOPs: 2 x params FLOPs per input token at 30 % of the
  A100's 312 TFLOP/s within its 400 W (assumption), i.e. 8.5e-3 J and 2.1e-5 s per input
  token per billion parameters.

Every number in a procedural tournament is ``synthetic``; the data card says so.

One file past 600 lines: the generator and the paper-pool calibration it is drawn with are read
together (every calibrated constant sits beside the step of the generator that uses it).
"""

from __future__ import annotations

import functools
import json
import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable

import numpy as np
import pandas as pd

from routing_gym.errors import UnknownNameError
from routing_gym.sources import register_tournament, specialization
from routing_gym.tournament import PAPER_SPLIT, DataCard, Tournament

TEMPLATE_FAMILIES = (
    "word_problem",
    "multiple_choice",
    "sentence_completion",
    "competition_math",
    "code",
    "logic_puzzle",
)

# ---------------------------------------------------------------------- calibration constants
# ML.ENERGY leaderboard v2 (ml-energy/leaderboard-v2 @ 4e4fca8d, Apache-2.0), chat task,
# A100-SXM4-40GB, batch 32, TP 1: Energy/req (J) / Avg Output Tokens, read from
# energy/mlenergy_v2/data/llm_text_generation/chat/A100-SXM4-40GB/<org>/<model>/bs32+tp1+pp1.json
MLENERGY_A100_BS32_J_PER_TOKEN = {
    "google/gemma-2-2b-it": 0.1477,  # 72.15 J / 488.4 tokens
    "microsoft/Phi-3-mini-4k-instruct": 0.1646,  # 77.95 J / 473.6 tokens
    "mistralai/Mistral-7B-Instruct-v0.3": 0.2326,  # 98.73 J / 424.5 tokens
    "meta-llama/Meta-Llama-3.1-8B-Instruct": 0.2113,  # 102.65 J / 485.7 tokens
    "google/gemma-2-9b-it": 0.3291,  # 125.14 J / 380.2 tokens
}
# The same leaderboard, .../A100-SXM4-40GB/meta-llama/Meta-Llama-3.1-70B-Instruct/bs32+tp8+pp1.json
# (eight GPUs, 1,226.25 J / 457.5 tokens); used only by the two-model preset's strong model.
MLENERGY_A100_BS32_J_PER_TOKEN_70B = 2.6804
# Least-squares fit of log J/token on log params over the five models above (params 2.61,
# 3.82, 7.25, 8.03, 9.24 B): J/token = 0.0849 * params_b ** 0.523 at batch 32.
MLENERGY_FIT_COEF, MLENERGY_FIT_EXP = 0.0849, 0.523
# Batch-1 factor: fitted so that always-Qwen2.5-7B in paper-pool costs the reference paper's
# 281.6 J per query (arXiv 2609.23085, held-out table). Batch 1 gives each token the whole
# GPU's static and memory power, hence several times the batch-32 figure.
BATCH1_FACTOR = 7.9
# Prefill from FLOPs (assumption): 2 * params FLOPs per input token at 30 % of an A100's
# 312 TFLOP/s bf16 peak within its 400 W board power.
PREFILL_J_PER_TOKEN_PER_B = 2e9 * 400.0 / (0.3 * 312e12)  # 8.5e-3 J per input token per 1B params
PREFILL_S_PER_TOKEN_PER_B = 2e9 / (0.3 * 312e12)  # 2.1e-5 s per input token per 1B params


def mlenergy_fit_j_per_token(params_b: float) -> float:
    """Batch-32 A100 joules per output token from the ML.ENERGY power-law fit."""
    return MLENERGY_FIT_COEF * params_b**MLENERGY_FIT_EXP


# ---------------------------------------------------------------------- specs
@dataclass
class BenchmarkSpec:
    """One question set of a procedural tournament.

    ``tokens`` / ``reasoning_tokens``: median output tokens of a model with verbosity 1 on a
    question of median difficulty, for instruct and reasoning models. ``discrimination`` is
    the 2PL slope (higher: correctness depends more sharply on ability - difficulty).
    """

    name: str
    family: str  # one of TEMPLATE_FAMILIES: how its question texts look
    weight: float  # share of the questions (normalised over benchmarks)
    tokens: float
    reasoning_tokens: float
    discrimination: float = 1.7


@dataclass
class ModelSpec:
    """One candidate model: who it is, how able it is per benchmark, what a token costs."""

    id: str
    family: str
    params_b: float
    reasoning: bool
    ability: dict[str, float]  # 2PL ability (logit scale) per benchmark name
    verbosity: float = 1.0  # multiplies the benchmark's typical output length
    j_per_token: float = 1.0  # decode energy per output token, J
    s_per_token: float = 0.01  # decode time per output token, s
    prefill_j_per_token: float = 0.0  # energy per input token, J
    prefill_s_per_token: float = 0.0  # time per input token, s
    max_tokens: int = 0  # output cap; 0: the config's default for (non-)reasoning models
    source: str = ""  # where the cost figures come from (the models table's energy_source)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"model spec {data.get('id', '?')!r}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


@dataclass
class ProceduralConfig:
    """Every knob of a procedural tournament. The defaults are the ``paper-pool`` preset.

    Structure: ``n_queries``, ``models`` (``ModelSpec``), ``benchmarks`` (``BenchmarkSpec``,
    whose ``weight`` is the benchmark mix), ``noise`` (model-specific share of each item's
    difficulty, 0..1), ``text_signal`` (how much the question text reveals its difficulty,
    0..1), ``specialization_signal`` (how strongly per-model topic skills shape outcomes, the
    topic being written into the question; 0..1, 0: off), ``seed``. Costs: the output-length and cost-noise knobs below. Splits:
    ``splits`` (proportions for ``Tournament.with_splits``; ``None`` for no split) and
    ``split_seed`` (default: ``seed``).
    """

    name: str = "procedural"
    n_queries: int = 2963  # the paper's 2,050 train + 913 held-out
    models: list[ModelSpec] = field(default_factory=lambda: paper_pool_models())
    benchmarks: list[BenchmarkSpec] = field(default_factory=lambda: paper_benchmarks())
    noise: float = 0.35
    text_signal: float = 0.5
    specialization_signal: float = 0.0
    seed: int = 0
    # output lengths
    length_growth: float = 0.35  # log-tokens per unit of difficulty (harder: longer)
    length_sigma: float = 0.35  # lognormal sigma of instruct models' lengths
    reasoning_length_sigma: float = 0.6  # ... of reasoning models' lengths
    overthink_prob: float = 0.15  # chance a reasoning answer gets a Pareto-tailed extension
    overthink_alpha: float = 1.5  # Pareto tail index of that extension (lower: heavier)
    wrong_length_factor: float = 1.15  # wrong instruct answers are this much longer
    reasoning_wrong_length_factor: float = 1.8  # wrong reasoning answers (long, still wrong)
    max_tokens: int = 2048  # default output cap of instruct models
    reasoning_max_tokens: int = 16384  # default output cap of reasoning models
    # costs
    cost_noise: float = 0.05  # lognormal sigma of per-answer energy and time (power draw varies)
    request_overhead_s: float = 0.05  # fixed time per request (scheduling, first-token latency)
    chat_template_tokens: int = 24  # input tokens added by the chat template
    chars_per_token: float = 4.0  # prompt characters per input token
    # splits
    splits: dict[str, float] | None = field(default_factory=lambda: dict(PAPER_SPLIT))
    split_seed: int | None = None

    def __post_init__(self) -> None:
        self.models = [m if isinstance(m, ModelSpec) else ModelSpec.from_dict(m) for m in self.models]
        self.benchmarks = [b if isinstance(b, BenchmarkSpec) else BenchmarkSpec(**b) for b in self.benchmarks]
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field of the first bad knob."""

        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"ProceduralConfig {self.name!r}: {name} {why}")

        if not isinstance(self.n_queries, (int, np.integer)) or self.n_queries < 1:
            raise bad("n_queries", f"must be a positive integer, got {self.n_queries!r}")
        for knob in ("noise", "text_signal", "specialization_signal"):
            value = getattr(self, knob)
            if not 0.0 <= value <= 1.0:
                raise bad(knob, f"must be in [0, 1], got {value!r}")
        if not self.models:
            raise bad("models", "is empty")
        if not self.benchmarks:
            raise bad("benchmarks", "is empty")
        for label, ids in (("models", [m.id for m in self.models]), ("benchmarks", [b.name for b in self.benchmarks])):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            if dup:
                raise bad(label, f"has duplicate names {dup}")
        names = {b.name for b in self.benchmarks}
        for b in self.benchmarks:
            if b.family not in TEMPLATE_FAMILIES:
                raise bad(f"benchmarks[{b.name!r}].family", f"{b.family!r} is not one of {', '.join(TEMPLATE_FAMILIES)}")
            if b.weight < 0 or b.tokens <= 0 or b.reasoning_tokens <= 0 or b.discrimination <= 0:
                raise bad(f"benchmarks[{b.name!r}]", "needs weight >= 0 and positive tokens, reasoning_tokens, discrimination")
        if sum(b.weight for b in self.benchmarks) <= 0:
            raise bad("benchmarks", "weights sum to zero")
        for m in self.models:
            missing = names - set(m.ability)
            if missing:
                raise bad(f"models[{m.id!r}].ability", f"has no value for benchmark(s) {sorted(missing)}")
            for knob in ("verbosity", "j_per_token", "s_per_token"):
                if not getattr(m, knob) > 0:
                    raise bad(f"models[{m.id!r}].{knob}", f"must be > 0, got {getattr(m, knob)!r}")
            for knob in ("prefill_j_per_token", "prefill_s_per_token", "max_tokens"):
                if getattr(m, knob) < 0:
                    raise bad(f"models[{m.id!r}].{knob}", f"must be >= 0, got {getattr(m, knob)!r}")
        positive = ("length_sigma", "reasoning_length_sigma", "overthink_alpha", "wrong_length_factor",
                    "reasoning_wrong_length_factor", "max_tokens", "reasoning_max_tokens", "chars_per_token")
        for knob in positive:
            if not getattr(self, knob) > 0:
                raise bad(knob, f"must be > 0, got {getattr(self, knob)!r}")
        for knob in ("length_growth", "cost_noise", "request_overhead_s", "chat_template_tokens"):
            if getattr(self, knob) < 0:
                raise bad(knob, f"must be >= 0, got {getattr(self, knob)!r}")
        if not 0.0 <= self.overthink_prob <= 1.0:
            raise bad("overthink_prob", f"must be in [0, 1], got {self.overthink_prob!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``ProceduralConfig.from_dict`` inverts it (stored in data cards).

        ``specialization_signal`` is left out at 0 (off), so the cards of pools generated before
        it existed, and their regenerations, stay identical."""
        data = json.loads(json.dumps(asdict(self)))
        if not data["specialization_signal"]:
            del data["specialization_signal"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProceduralConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"ProceduralConfig: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)

    def fingerprint(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


# ---------------------------------------------------------------------- 2PL calibration
@functools.cache
def _normal_quadrature() -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and weights for expectations over N(0, 1) (computed on first use)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(48)
    return nodes, weights / weights.sum()


def expected_accuracy(ability: np.ndarray | float, discrimination: float = 1.7) -> np.ndarray:
    """Mean of ``sigmoid(discrimination * (ability - d))`` over ``d ~ N(0, 1)``."""
    nodes, weights = _normal_quadrature()
    theta = np.asarray(ability, dtype=float)[..., None]
    return (_sigmoid(discrimination * (theta - nodes)) * weights).sum(axis=-1)


def ability_for_accuracy(accuracy: np.ndarray | float, discrimination: float = 1.7) -> np.ndarray:
    """The 2PL ability whose expected accuracy over ``d ~ N(0, 1)`` is ``accuracy`` (bisection)."""
    target = np.asarray(accuracy, dtype=float)
    if np.any((target <= 0) | (target >= 1)):
        raise ValueError(f"accuracy targets must lie strictly between 0 and 1, got {target}")
    lo, hi = np.full(target.shape, -12.0), np.full(target.shape, 12.0)
    for _ in range(60):  # expected_accuracy is increasing in ability
        mid = (lo + hi) / 2
        below = expected_accuracy(mid, discrimination) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _accuracy_preserving_offset(ability: np.ndarray, slope: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``c[m, b]`` with the mean over topics of ``expected_accuracy(ability + c + delta)`` equal to
    ``expected_accuracy(ability)``: topic skills (``delta [K, B, T]``) reshuffle a model's correct
    answers, not their number (bisection)."""
    s = slope[None, :, None, None]  # broadcasts against [K, B, T] abilities and the quadrature axis
    target = expected_accuracy(ability[:, :, None], s)[..., 0]  # [K, B]
    lo, hi = np.full(ability.shape, -6.0), np.full(ability.shape, 6.0)
    for _ in range(50):  # the mean accuracy increases with c
        mid = (lo + hi) / 2
        below = expected_accuracy(ability[:, :, None] + mid[:, :, None] + delta, s).mean(axis=2) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


# ---------------------------------------------------------------------- the paper pool
# The reference paper's seven benchmarks (arXiv 2609.23085). Mix: MATH-500 ~13 % and
# HumanEval's 164 items ~5 % of ~3,000 questions as in the paper; the rest split roughly
# evenly. Lengths (median output tokens at median difficulty; assumptions) are short for
# letter-answer tasks, long for math and code; reasoning lengths are an order of magnitude
# longer. Together with the tails they give MATH-500 about half of the answer energy.
PAPER_BENCHMARK_TABLE = (
    # name, family, weight (questions out of 2,963), tokens, reasoning_tokens, discrimination
    ("mmlu", "multiple_choice", 652, 33, 280, 1.5),
    ("gsm8k", "word_problem", 475, 133, 900, 1.8),
    ("bbh", "logic_puzzle", 445, 91, 500, 1.6),
    ("arc_challenge", "multiple_choice", 444, 29, 240, 1.5),
    ("hellaswag", "sentence_completion", 415, 17, 220, 1.3),
    ("math500", "competition_math", 385, 515, 4000, 2.0),
    ("humaneval", "code", 147, 158, 1100, 1.8),
)

# Target accuracy (%) per model and benchmark, in PAPER_BENCHMARK_TABLE order. Qwen2.5-7B's
# mix-weighted mean is the paper's 64.0 %; the rest are set to public model-card orders
# (accuracy grows with size; the R1 distills lead on math and lag on HellaSwag).
PAPER_POOL_ACCURACY = {
    #                           mmlu gsm8k bbh  arc  hella math humaneval
    "qwen2.5-0.5b":            (45, 40, 25, 35, 30, 18, 25),
    "qwen2.5-1.5b":            (55, 60, 33, 52, 40, 28, 38),
    "gemma2-2b":               (55, 55, 38, 62, 52, 20, 35),
    "qwen2.5-3b":              (62, 70, 40, 66, 50, 38, 50),
    "phi3-mini-3.8b":          (65, 75, 42, 75, 55, 30, 50),
    "qwen2.5-7b":              (71, 82, 45, 78, 57, 45, 65),
    "llama3.1-8b":             (66, 78, 48, 78, 60, 35, 58),
    "deepseek-r1-distill-8b":  (58, 86, 60, 72, 50, 78, 60),
    "deepseek-r1-distill-32b": (78, 92, 75, 86, 64, 88, 80),
}

# id, family, params_b, reasoning, verbosity, batch-32 J/token and where it comes from,
# batch-1 decode tokens per second (assumption: Ollama on one A100-80GB).
PAPER_POOL_TABLE = (
    ("qwen2.5-0.5b", "qwen2.5", 0.49, False, 1.2, mlenergy_fit_j_per_token(0.49), "ML.ENERGY 2B-9B power-law fit at 0.49B", 180),
    ("qwen2.5-1.5b", "qwen2.5", 1.54, False, 1.0, mlenergy_fit_j_per_token(1.54), "ML.ENERGY 2B-9B power-law fit at 1.54B", 150),
    ("gemma2-2b", "gemma2", 2.61, False, 0.9, MLENERGY_A100_BS32_J_PER_TOKEN["google/gemma-2-2b-it"], "ML.ENERGY google/gemma-2-2b-it", 110),
    ("qwen2.5-3b", "qwen2.5", 3.09, False, 1.0, mlenergy_fit_j_per_token(3.09), "ML.ENERGY 2B-9B power-law fit at 3.09B", 115),
    ("phi3-mini-3.8b", "phi3", 3.82, False, 1.1, MLENERGY_A100_BS32_J_PER_TOKEN["microsoft/Phi-3-mini-4k-instruct"], "ML.ENERGY microsoft/Phi-3-mini-4k-instruct", 100),
    ("qwen2.5-7b", "qwen2.5", 7.62, False, 1.0, MLENERGY_A100_BS32_J_PER_TOKEN["mistralai/Mistral-7B-Instruct-v0.3"], "ML.ENERGY mistralai/Mistral-7B-Instruct-v0.3 (same-size stand-in)", 80),
    ("llama3.1-8b", "llama3.1", 8.03, False, 1.3, MLENERGY_A100_BS32_J_PER_TOKEN["meta-llama/Meta-Llama-3.1-8B-Instruct"], "ML.ENERGY meta-llama/Meta-Llama-3.1-8B-Instruct", 75),
    ("deepseek-r1-distill-8b", "deepseek-r1", 8.03, True, 1.3, MLENERGY_A100_BS32_J_PER_TOKEN["meta-llama/Meta-Llama-3.1-8B-Instruct"], "ML.ENERGY meta-llama/Meta-Llama-3.1-8B-Instruct (same architecture)", 75),
    ("deepseek-r1-distill-32b", "deepseek-r1", 32.8, True, 0.85, mlenergy_fit_j_per_token(32.8), "ML.ENERGY 2B-9B power-law fit at 32.8B (extrapolated)", 30),
)


def paper_benchmarks() -> list[BenchmarkSpec]:
    return [BenchmarkSpec(*row) for row in PAPER_BENCHMARK_TABLE]


def make_model(
    id: str,
    family: str,
    params_b: float,
    reasoning: bool,
    accuracy: dict[str, float],
    benchmarks: list[BenchmarkSpec],
    verbosity: float = 1.0,
    bs32_j_per_token: float | None = None,
    tokens_per_s: float = 80.0,
    source: str = "",
) -> ModelSpec:
    """A ``ModelSpec`` from target accuracies (fractions per benchmark) and batch-32 J/token.

    Abilities come from ``ability_for_accuracy`` with each benchmark's discrimination; costs
    apply ``BATCH1_FACTOR`` and the FLOP-based prefill constants.
    """
    slope = {b.name: b.discrimination for b in benchmarks}
    missing = set(slope) - set(accuracy)
    if missing:
        raise ValueError(f"model {id!r}: no target accuracy for benchmark(s) {sorted(missing)}")
    ability = {name: round(float(ability_for_accuracy(accuracy[name], slope[name])), 6) for name in slope}
    j_bs32 = mlenergy_fit_j_per_token(params_b) if bs32_j_per_token is None else bs32_j_per_token
    return ModelSpec(
        id=id,
        family=family,
        params_b=params_b,
        reasoning=reasoning,
        ability=ability,
        verbosity=verbosity,
        j_per_token=round(j_bs32 * BATCH1_FACTOR, 6),
        s_per_token=round(1.0 / tokens_per_s, 6),
        prefill_j_per_token=round(PREFILL_J_PER_TOKEN_PER_B * params_b, 6),
        prefill_s_per_token=round(PREFILL_S_PER_TOKEN_PER_B * params_b, 9),
        source=f"{source or 'ML.ENERGY power-law fit'}, batch-32 A100 J/token x batch-1 factor {BATCH1_FACTOR:g} (synthetic)",
    )


def paper_pool_models(benchmarks: list[BenchmarkSpec] | None = None) -> list[ModelSpec]:
    """The reference paper's nine models with calibrated abilities and costs."""
    benchmarks = benchmarks or paper_benchmarks()
    names = [row[0] for row in PAPER_BENCHMARK_TABLE]
    return [
        make_model(
            id, family, params, reasoning,
            {b: a / 100 for b, a in zip(names, PAPER_POOL_ACCURACY[id])},
            benchmarks, verbosity, j_bs32, tps, source,
        )
        for id, family, params, reasoning, verbosity, j_bs32, source, tps in PAPER_POOL_TABLE
    ]


# ---------------------------------------------------------------------- generation
def generate(config: ProceduralConfig | None = None, progress: bool | None = None) -> Tournament:
    """Draw a tournament from ``config`` (default: the paper pool); deterministic in its seed."""
    config = config or ProceduralConfig()
    config.validate()
    n, k = config.n_queries, len(config.models)
    streams = np.random.SeedSequence(config.seed).spawn(7)  # the seventh: specialization only
    rng_bench, rng_diff, rng_correct, rng_tokens, rng_cost, rng_text = (np.random.default_rng(s) for s in streams[:6])

    # Benchmarks: exact counts from the mix (largest remainder), in shuffled order.
    weights = np.array([b.weight for b in config.benchmarks], dtype=float)
    counts = _largest_remainder(weights / weights.sum() * n)
    bench = rng_bench.permutation(np.repeat(np.arange(len(config.benchmarks)), counts))

    # Latent difficulty: shared part plus a model-specific part, each item still N(0, 1).
    d = rng_diff.standard_normal(n)
    d_model = math.sqrt(1.0 - config.noise**2) * d[:, None] + config.noise * rng_diff.standard_normal((n, k))
    ability = np.array([[m.ability[b.name] for b in config.benchmarks] for m in config.models])  # [K, B]
    slope = np.array([b.discrimination for b in config.benchmarks])[bench][:, None]
    spec = None
    if config.specialization_signal > 0:
        benchmark_slope = np.array([b.discrimination for b in config.benchmarks])
        spec = specialization.draw(config, bench, streams, lambda delta: _accuracy_preserving_offset(ability, benchmark_slope, delta))
    query_ability = ability[:, bench].T if spec is None else ability[:, bench].T + spec.ability_shift
    p_correct = _sigmoid(slope * (query_ability - d_model))
    correct = (rng_correct.random((n, k)) < p_correct).astype(np.float64)

    # Output tokens: typical length x verbosity, longer for harder and for wrong answers.
    reasoning = np.array([m.reasoning for m in config.models])
    base = np.where(
        reasoning[None, :],
        np.array([b.reasoning_tokens for b in config.benchmarks])[bench][:, None],
        np.array([b.tokens for b in config.benchmarks])[bench][:, None],
    ) * np.array([m.verbosity for m in config.models])[None, :]
    sigma = np.where(reasoning, config.reasoning_length_sigma, config.length_sigma)[None, :]
    log_tokens = np.log(base) + config.length_growth * d_model + sigma * rng_tokens.standard_normal((n, k))
    wrong = np.where(reasoning, config.reasoning_wrong_length_factor, config.wrong_length_factor)[None, :]
    tokens = np.exp(log_tokens) * np.where(correct > 0, 1.0, wrong)
    tail = (rng_tokens.random((n, k)) < config.overthink_prob) & reasoning[None, :]
    tokens *= np.where(tail, 1.0 + rng_tokens.pareto(config.overthink_alpha, (n, k)), 1.0)
    cap = np.array([m.max_tokens or (config.reasoning_max_tokens if m.reasoning else config.max_tokens) for m in config.models])
    output_tokens = np.clip(np.rint(tokens), 1, cap[None, :])

    # Question texts (own stream: text_signal never changes the outcomes).
    cue_noise = rng_text.standard_normal(n)
    s = config.text_signal
    cue = s * d + math.sqrt(max(0.0, 1.0 - s * s)) * cue_noise
    quantile = _sigmoid(1.702 * cue)  # ~ normal CDF: the cue as a uniform in (0, 1)
    prompts, references, subjects = _render_all(config, bench, quantile, rng_text, progress)
    if spec is not None:
        prompts = spec.annotate(prompts)
    prompt_chars = np.fromiter((len(p) for p in prompts), dtype=np.float64, count=n)
    input_tokens = np.broadcast_to(
        np.rint(prompt_chars / config.chars_per_token)[:, None] + config.chat_template_tokens, (n, k)
    ).copy()

    # Costs; rounded to 0.01 J / 0.1 ms so stored files are small and platform-stable.
    row = lambda attr: np.array([getattr(m, attr) for m in config.models], dtype=float)[None, :]  # noqa: E731
    noise_e = np.exp(config.cost_noise * rng_cost.standard_normal((n, k)))
    noise_t = np.exp(config.cost_noise * rng_cost.standard_normal((n, k)))
    energy = np.round((row("j_per_token") * output_tokens + row("prefill_j_per_token") * input_tokens) * noise_e, 2)
    latency = np.round(
        config.request_overhead_s + (row("s_per_token") * output_tokens + row("prefill_s_per_token") * input_tokens) * noise_t, 4
    )
    energy = np.maximum(energy, 0.01)
    power = energy / latency

    names = np.array([b.name for b in config.benchmarks], dtype=object)
    families = np.array([b.family for b in config.benchmarks], dtype=object)
    width = max(6, len(str(n - 1)))
    queries = pd.DataFrame(
        {
            "query_id": [f"{b}-{i:0{width}d}" for i, b in enumerate(names[bench])],
            "benchmark": names[bench],
            "prompt": prompts,
            "reference": references,
            "split": "",
            "difficulty": np.round(_sigmoid(1.702 * d), 6),  # the shared latent, as a normal-CDF-like percentile
            "metadata": [{"template": f, "subject": s_} for f, s_ in zip(families[bench], subjects)]
            if spec is None else
            [{"template": f, "subject": s_, "topic": tp} for f, s_, tp in zip(families[bench], subjects, spec.topic_name)],
        }
    )
    models = pd.DataFrame(
        {
            "model_id": [m.id for m in config.models],
            "family": [m.family for m in config.models],
            "params_b": [float(m.params_b) for m in config.models],
            "reasoning": [bool(m.reasoning) for m in config.models],
            "serving": [
                {
                    "backend": "simulated (procedural)",
                    "j_per_token": m.j_per_token,
                    "s_per_token": m.s_per_token,
                    "prefill_j_per_token": m.prefill_j_per_token,
                    "prefill_s_per_token": m.prefill_s_per_token,
                    "verbosity": m.verbosity,
                    "max_tokens": int(cap[j]),
                }
                for j, m in enumerate(config.models)
            ],
            "energy_provenance": "synthetic",
            "energy_source": [m.source or "procedural generator (synthetic)" for m in config.models],
        }
    )
    t = Tournament(
        queries=queries,
        models=models,
        correct=correct,
        energy_j=energy,
        latency_s=latency,
        mean_power_w=power,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        card=_card(config),
        source=f"procedural:{config.name}",
    )
    if config.splits:
        # Sorted names: the split must not depend on dict order (card.json stores keys sorted).
        proportions = dict(sorted(config.splits.items()))
        t = t.with_splits(seed=config.seed if config.split_seed is None else config.split_seed, proportions=proportions)
    return t


def _largest_remainder(quotas: np.ndarray) -> np.ndarray:
    counts = np.floor(quotas).astype(int)
    counts[np.argsort(-(quotas - counts), kind="stable")[: int(round(quotas.sum())) - counts.sum()]] += 1
    return counts


CALIBRATION_NOTES = (
    "Every outcome is synthetic: drawn from a 2PL item-response model with latent question "
    "difficulty; nothing here was measured.",
    "J/output token: ML.ENERGY leaderboard v2 (ml-energy/leaderboard-v2 @ 4e4fca8d, Apache-2.0) "
    "A100-SXM4-40GB batch-32 chat measurements (energy/mlenergy_v2/.../bs32+tp1+pp1.json: "
    "gemma-2-2b-it 0.148, Phi-3-mini 0.165, Mistral-7B-v0.3 0.233, Llama-3.1-8B 0.211, "
    "gemma-2-9b-it 0.329 J/token; power-law fit 0.0849 * params_b^0.523 for other sizes), "
    f"times a batch-1 factor of {BATCH1_FACTOR:g} fitted so always-Qwen2.5-7B costs ~281.6 J.",
    "Reference paper (arXiv 2609.23085): nine-model pool on one A100-80GB with Ollama; "
    "always-Qwen2.5-7B 64.0 % at 281.6 J per held-out query; MATH-500 ~13 % of questions "
    "but 52-57 % of answer energy; a GSM8K item: Qwen2.5-0.5B correct at 82 J, "
    "DeepSeek-R1-8B correct at 2,864 J, Llama-3.1-8B wrong at 638 J.",
    "Seconds per token are assumed batch-1 decode speeds (not measured); prefill energy and "
    "time follow from 2 x params FLOPs per token at 30 % of an A100's 312 TFLOP/s and 400 W.",
    "Question texts are template renderings, not real benchmark items; their surface "
    "features reveal difficulty as much as text_signal allows.",
    "Privileged: the queries' difficulty column is the generator's latent shared difficulty (as a "
    "percentile), which no deployed router knows; an agent that reads it (include_difficulty) declares "
    "privileged = {'difficulty'} and compare labels it not deployable.",
)


def _card(config: ProceduralConfig) -> DataCard:
    return DataCard(
        name=config.name,
        provenance="synthetic",
        description=(
            f"Procedural tournament {config.name!r}: {config.n_queries} template questions from "
            f"{len(config.benchmarks)} benchmark families x {len(config.models)} simulated models, "
            f"seed {config.seed}, text_signal {config.text_signal:g}, noise {config.noise:g}"
            + (f", specialization_signal {config.specialization_signal:g}" if config.specialization_signal else "")
            + ". Generated by routing_gym.sources.synthetic.generate; regenerate from extra.config."
        ),
        licence="Apache-2.0 (generated by routing-gym)",
        sources=[
            "ML.ENERGY leaderboard v2, ml-energy/leaderboard-v2 @ 4e4fca8d (Apache-2.0): A100 J/token at batch 32",
            "Reference paper arXiv 2609.23085: pool, benchmarks, split and the calibration figures in the notes",
        ],
        hardware="simulated: one NVIDIA A100-80GB, batch 1 (Ollama-like), idle-subtracted energy",
        notes=list(CALIBRATION_NOTES),
        extra={"generator": "routing_gym.sources.synthetic.generate", "config": config.to_dict()},
    )


# ---------------------------------------------------------------------- text templates
# Each renderer gets the rows' cue quantiles q in (0, 1) (higher: the text looks harder) and
# returns (prompts, references, subjects). Everything not driven by q is drawn at random
# from the text stream, so at text_signal=0 nothing in the text tracks difficulty.
def _render_all(
    config: ProceduralConfig, bench: np.ndarray, quantile: np.ndarray, rng: np.random.Generator, progress: bool | None
) -> tuple[list[str], list[str], list[str]]:
    from tqdm import tqdm

    n = len(bench)
    prompts: list[str] = [""] * n
    references: list[str] = [""] * n
    subjects: list[str] = [""] * n
    for code, spec in enumerate(tqdm(config.benchmarks, desc="rendering questions", disable=None if progress is None else not progress, leave=False)):
        rows = np.flatnonzero(bench == code)
        if len(rows) == 0:
            continue
        p, r, s = _RENDERERS[spec.family](quantile[rows], rng, spec.name)
        for i, row in enumerate(rows.tolist()):
            prompts[row], references[row], subjects[row] = p[i], r[i], s[i]
    return prompts, references, subjects


def _tier(q: np.ndarray, levels: int) -> np.ndarray:
    return np.minimum((q * levels).astype(int), levels - 1)


def _pick(rng: np.random.Generator, options: tuple | list, size: int | tuple) -> np.ndarray:
    return rng.integers(0, len(options), size)


NAMES = ("Maria", "James", "Aisha", "Tom", "Li", "Priya", "Carlos", "Emma", "Noah", "Fatima", "Kenji", "Olga",
         "Ravi", "Sofia", "Mateo", "Hana", "Omar", "Grace", "Ivan", "Zoe")
ITEMS = ("apples", "stickers", "marbles", "cookies", "books", "pencils", "cupcakes", "seashells", "trading cards",
         "eggs", "postcards", "beads", "tomatoes", "comic books", "candles")
# Word-problem steps by tier; higher tiers use multi-step operations (rates, percents, ratios).
STEP_TIERS = (
    ("{name} buys {a} more {item}.", "{name} gives {a} {item} to a friend.", "{name} finds {a} {item} in the garden.",
     "A neighbour brings {a} {item}."),
    ("{name} then buys {b} packs with {a} {item} in each pack.", "{name} shares the {item} equally among {b} friends and keeps one share.",
     "Later, {name} doubles the number of {item}.", "Each of the {b} shelves holds {a} {item}, and {name} fills all of them."),
    ("{name} sells {p}% of the {item} at ${c} each.", "A discount of {p}% is applied to the remaining cost.",
     "The ratio of red {item} to blue {item} is {b}:{a}, and {name} keeps only the blue ones.",
     "The price rises by {p}% every week for {b} weeks, compounding weekly.",
     "{name} works {b} hours at ${c} per hour and spends {p}% of the earnings on {item}."),
)
QUESTIONS = (
    "How many {item} does {name} have now?",
    "How many {item} does {name} have left at the end?",
    "How much money, in dollars, does {name} end up with?",
    "What is the final number of {item}, rounded to the nearest whole number?",
)


def _render_word_problem(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    tier = _tier(q, 3)
    steps = 1 + _tier(q, 6)  # 1..6 steps
    magnitude = np.array([20, 200, 2000])[tier]
    name, item = _pick(rng, NAMES, n), _pick(rng, ITEMS, n)
    start = rng.integers(2, 1 << 30, n)
    nums = rng.integers(2, 1 << 30, (n, 6, 4))
    op_tier = rng.integers(0, 1 << 30, (n, 6))
    op_idx = rng.integers(0, 1 << 30, (n, 6))
    qidx = rng.integers(0, len(QUESTIONS), n)
    answers = rng.integers(1, 5000, n)
    prompts = []
    for i in range(n):
        t, m = int(tier[i]), int(magnitude[i])
        nm, it = NAMES[name[i]], ITEMS[item[i]]
        parts = [f"{nm} has {start[i] % m + 3} {it}."]
        for j in range(int(steps[i])):
            ops = STEP_TIERS[op_tier[i, j] % (t + 1)]
            a, b, c, p = nums[i, j]
            parts.append(ops[op_idx[i, j] % len(ops)].format(
                name=nm, item=it, a=a % m + 2, b=b % 9 + 2, c=c % 40 + 1, p=(p % 9 + 1) * 5))
        parts.append(QUESTIONS[min(int(qidx[i]), t + 1)].format(name=nm, item=it))
        prompts.append(" ".join(parts))
    return prompts, [str(a) for a in answers], [f"{s}-step" for s in steps.tolist()]


MC_BANKS = {
    "mmlu": (
        (("high school geography", "marketing", "nutrition", "sociology", "management", "human aging"),
         ("supply and demand", "a balanced diet", "urban migration", "brand loyalty", "population growth",
          "the water table", "team motivation", "retirement savings")),
        (("high school biology", "philosophy", "high school chemistry", "computer security", "astronomy", "world religions"),
         ("cellular respiration", "utilitarian ethics", "covalent bonding", "public-key encryption", "stellar parallax",
          "the Eightfold Path", "enzyme kinetics", "buffer overflows")),
        (("abstract algebra", "college physics", "professional law", "formal logic", "college mathematics", "econometrics"),
         ("a normal subgroup of a finite group", "the Lorentz transformation", "the rule against perpetuities",
          "a tautology in predicate logic", "the spectral radius of a matrix", "heteroskedasticity-robust standard errors",
          "the Sylow theorems", "hearsay exceptions under the Federal Rules")),
    ),
    "arc_challenge": (
        (("plants", "weather", "magnets", "animals"),
         ("the water cycle", "a plant's roots", "a bar magnet", "animal habitats", "the seasons", "melting ice")),
        (("earth science", "physical science", "life science", "ecology"),
         ("erosion by glaciers", "the boiling point of water", "inherited traits", "food webs", "the phases of the Moon",
          "friction on a ramp")),
        (("chemistry", "physics", "genetics", "astronomy"),
         ("the conservation of momentum", "genetic recombination", "chemical equilibrium", "the Coriolis effect",
          "the density of a mixed solution", "energy transfer in a closed system")),
    ),
}
MC_STEMS = (
    ("Which of the following best describes {concept}?", "Which statement about {concept} is true?",
     "What is the main purpose of {concept}?"),
    ("In the context of {subject}, which statement about {concept} is correct?",
     "A student studies {concept}. Which observation best supports the standard explanation?",
     "Which of the following is an example of {concept}?"),
    ("Suppose {concept} is examined under the usual assumptions of {subject}. Which of the following statements is NOT true?",
     "Consider {concept}. If the initial condition is reversed and all other factors are held constant, which consequence follows necessarily?",
     "Which of the following conclusions about {concept} follows only if both the premise and its converse hold?"),
)
MC_OPTIONS = (
    ("it increases", "it decreases", "it stays the same", "it cannot be determined", "it depends on the season",
     "it is caused by heat", "it is caused by gravity", "it helps living things grow"),
    ("the reaction releases energy", "the quantity is conserved", "the effect reverses at equilibrium",
     "the rate depends on concentration", "the process requires a catalyst", "the structure is symmetric"),
    ("the mapping is a homomorphism but not injective", "the estimator is consistent but biased",
     "the clause is void ab initio", "the invariant holds only in the limit", "the converse fails for infinite sets",
     "the statement is independent of the axioms", "the interval has measure zero"),
)


def _render_multiple_choice(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    tier = _tier(q, 3)
    bank = MC_BANKS.get(bench, MC_BANKS["mmlu"])
    subj, concept = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    stem, opts = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    answers = rng.integers(0, 4, n)
    prompts, subjects = [], []
    for i in range(n):
        t = int(tier[i])
        subjects_t, concepts_t = bank[t]
        subject, con = subjects_t[subj[i] % len(subjects_t)], concepts_t[concept[i] % len(concepts_t)]
        stems = MC_STEMS[t]
        options = MC_OPTIONS[t]
        choices = "\n".join(f"{'ABCD'[j]}. {options[(opts[i] + j) % len(options)]}" for j in range(4))
        prompts.append(
            f"The following is a multiple choice question about {subject}.\n\n"
            f"{stems[stem[i] % len(stems)].format(concept=con, subject=subject)}\n{choices}\nAnswer:"
        )
        subjects.append(subject)
    return prompts, ["ABCD"[a] for a in answers], subjects


ACTIVITIES = (
    ("A man is mowing the lawn.", "A girl is brushing her teeth.", "A dog runs after a ball.", "A woman is washing dishes."),
    ("A chef slices vegetables on a wooden board while a pot simmers.", "Two kids assemble a kite in the park, checking the string.",
     "A mechanic lifts the car and loosens the bolts on the front wheel."),
    ("A gymnast mounts the uneven bars, swings into a handstand, and the judges lean forward as she releases",
     "The rower adjusts the oarlock, glances at the cox, and, as the starting signal sounds across the regatta course,",
     "A violinist retunes mid-performance, nods to the accompanist, and then, after an unexpectedly long fermata,"),
)
ENDINGS = (
    ("then he puts the mower away.", "then she rinses her mouth.", "then it brings the ball back.", "then she dries the plates."),
    ("then stirs the pot and adds the vegetables.", "then runs across the grass holding the kite up.",
     "then removes the wheel and checks the brake pads.", "then wipes the board and reaches for a towel.",
     "then ties the string to a stick and waits for wind."),
    ("transitions into a pirouette that ends in a straddle-back to the low bar.", "the crew catches the water in unison and surges ahead.",
     "resolves the cadence with a harmonic that the audience barely hears.", "pauses as if the previous motion had never been completed.",
     "shifts the weight backwards so that the momentum carries through the next phrase."),
)


def _render_sentence_completion(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    tier = _tier(q, 3)
    ctx, ends = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    answers = rng.integers(0, 4, n)
    prompts = []
    for i in range(n):
        t = int(tier[i])
        context = ACTIVITIES[t][ctx[i] % len(ACTIVITIES[t])]
        choices = "\n".join(f"{'ABCD'[j]}. {ENDINGS[t][(ends[i] + j) % len(ENDINGS[t])]}" for j in range(4))
        prompts.append(f"Choose the most plausible continuation.\n\n{context} ...\n{choices}\nAnswer:")
    return prompts, ["ABCD"[a] for a in answers], ["activity"] * n


MATH_SUBJECTS = (("Prealgebra", "Algebra"), ("Number Theory", "Counting & Probability", "Geometry"),
                 ("Intermediate Algebra", "Precalculus"))
MATH_TEMPLATES = {
    "Prealgebra": ("What is ${a} + {b} \\times {c}$?", "Simplify $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{b}}}$."),
    "Algebra": ("Solve for $x$: ${a}x + {b} = {c}$.", "What is the slope of the line through $({a}, {b})$ and $({c}, {a})$?"),
    "Number Theory": ("What is the remainder when ${a}^{{{b}}}$ is divided by ${c}$?",
                      "How many positive divisors does ${a}{b}$ have?"),
    "Counting & Probability": ("In how many ways can {b} books be arranged on a shelf if {c} of them must stay together?",
                               "Two dice are rolled. What is the probability that the sum is at least {c}?"),
    "Geometry": ("A triangle has sides {a}, {b} and {c}. What is its area?",
                 "A circle of radius {b} is inscribed in a square. What is the area between them?"),
    "Intermediate Algebra": ("Find the number of ordered pairs $(x, y)$ of real numbers such that $x^{{{b}}} + y^2 = {a}$ and $xy = {c}$.",
                             "Let $p(x)$ be a monic polynomial of degree {b} with $p(k) = k$ for $k = 1, 2, \\dots, {b}$. Find $p({a})$."),
    "Precalculus": ("Compute $\\sum_{{k=1}}^{{{a}}} \\sin^2\\left(\\frac{{k\\pi}}{{{c}}}\\right)$.",
                    "Find the determinant of the ${b} \\times {b}$ matrix whose $(i, j)$ entry is $\\cos(i + j)$ scaled by {a}."),
}
MATH_CONSTRAINTS = (
    "Express your answer as a common fraction.", "Express your answer in simplest radical form.",
    "where all variables are positive integers.", "Assume the answer is an integer between 0 and 999.",
    "Give your answer in terms of $\\pi$.",
)


def _render_competition_math(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    level = 1 + _tier(q, 5)  # MATH levels 1..5
    group = _tier(q, 3)
    subj, tmpl = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    nums = rng.integers(2, 1 << 30, (n, 3))
    cons = rng.integers(0, 1 << 30, (n, 3))
    answers = rng.integers(1, 1000, n)
    prompts, subjects = [], []
    for i in range(n):
        subjects_g = MATH_SUBJECTS[group[i]]
        subject = subjects_g[subj[i] % len(subjects_g)]
        templates = MATH_TEMPLATES[subject]
        scale = 10 ** int(level[i] // 2 + 1)
        a, b, c = nums[i]
        text = templates[tmpl[i] % len(templates)].format(a=a % scale + 2, b=b % (level[i] + 3) + 2, c=c % scale + 3)
        extra = [MATH_CONSTRAINTS[(cons[i, j] + j) % len(MATH_CONSTRAINTS)] for j in range(int(level[i]) // 2)]
        prompts.append(" ".join([text, *extra]))
        subjects.append(subject)
    return prompts, [str(a) for a in answers], subjects


CODE_TASKS = (
    ("Return the sum of the numbers in the list.", "Return True if the string is a palindrome.",
     "Return the largest element of the list.", "Return the string with its characters reversed."),
    ("Return the prime factors of n in increasing order.", "Return the words of the sentence sorted by length, keeping ties in order.",
     "Return the running maximum of the list.", "Return the number of vowels in each word."),
    ("Return the length of the longest strictly increasing subsequence whose digit sum is even.",
     "Return all balanced bracket groups in the string, ignoring spaces, with nested groups flattened.",
     "Return the minimum number of swaps needed to sort the list so that adjacent elements differ by at most k.",
     "Return the encoded string where each run is replaced by its length and character, decoding nested runs first."),
)
CODE_CONSTRAINTS = (
    "Return -1 if the input is empty.", "Do not use any built-in sorting function.", "The input may contain negative numbers.",
    "Runs in O(n log n) time.", "Handle nested lists recursively.", "Treat upper- and lower-case letters as equal.",
)
FUNC_NAMES = ("solve", "process", "transform", "count_items", "find_value", "check", "encode", "compute")
ARG_TYPES = (("xs: list[int]",), ("s: str",), ("xs: list[int]", "k: int"), ("s: str", "n: int"), ("grid: list[list[int]]", "k: int"))


def _example_arg(kind: str, values: np.ndarray) -> str:
    if kind == "str":
        return repr("".join("abcdefghijklmnopqrstuvwxyz"[v % 26] for v in values.tolist() * 2))
    if kind == "list[list[int]]":
        return repr([values.tolist(), values[::-1].tolist()])
    return repr(values.tolist())


def _render_code(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    tier = _tier(q, 3)
    n_cons = _tier(q, 4)  # 0..3 constraints
    fname, args, task = rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n), rng.integers(0, 1 << 30, n)
    cons = rng.integers(0, 1 << 30, (n, 3))
    ex = rng.integers(0, 100, (n, 3, 3))
    prompts = []
    for i in range(n):
        t = int(tier[i])
        signature = ", ".join(ARG_TYPES[args[i] % len(ARG_TYPES)] if t else ARG_TYPES[args[i] % 2])
        tasks = CODE_TASKS[t]
        doc = [tasks[task[i] % len(tasks)]]
        doc += [CODE_CONSTRAINTS[(cons[i, j] + j) % len(CODE_CONSTRAINTS)] for j in range(int(n_cons[i]))]
        first = signature.split(":")[1].split(",")[0].strip()
        examples = "\n".join(
            f"    >>> {FUNC_NAMES[fname[i] % len(FUNC_NAMES)]}({_example_arg(first, ex[i, j, : t + 1])})" for j in range(t + 1)
        )
        prompts.append(
            f"def {FUNC_NAMES[fname[i] % len(FUNC_NAMES)]}({signature}):\n    \"\"\"" + " ".join(doc) + f"\n{examples}\n    \"\"\"\n"
        )
    return prompts, [""] * n, ["python"] * n


OBJECTS = ("a red book", "a blue vase", "a green apple", "a yellow kite", "a white mug", "a black hat", "an orange ball",
           "a purple pen", "a grey clock")
PEOPLE = ("Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gwen")


def _render_logic_puzzle(q: np.ndarray, rng: np.random.Generator, bench: str):
    n = len(q)
    task = rng.integers(0, 3, n)
    size3 = 3 + 2 * _tier(q, 3)  # 3, 5 or 7 objects, as in BBH's logical_deduction
    swaps = 1 + _tier(q, 6)
    depth = 1 + _tier(q, 4)
    perm = np.argsort(rng.random((n, len(OBJECTS))), axis=1)
    pairs = rng.integers(0, 1 << 30, (n, 6, 2))
    bools = rng.integers(0, 2, (n, 16))
    answers = rng.integers(0, 3, n)
    prompts, subjects = [], []
    for i in range(n):
        if task[i] == 0:
            m = int(size3[i])
            objs = [OBJECTS[j] for j in perm[i, :m]]
            clues = [f"{objs[j].capitalize()} is to the left of {objs[j + 1]}." for j in range(m - 1)]
            prompts.append(
                f"The following paragraphs each describe a set of {m} objects arranged in a fixed order on a shelf: "
                + ", ".join(objs) + ". " + " ".join(clues) + " Which object is second from the right?"
            )
            subjects.append("logical_deduction")
        elif task[i] == 1:
            m = min(3 + int(swaps[i]) // 2, len(PEOPLE))
            people = PEOPLE[:m]
            steps = [f"{people[a % m]} and {people[(a + 1 + b % (m - 1)) % m]} swap balls" for a, b in pairs[i, : int(swaps[i])]]
            prompts.append(
                f"{', '.join(people)} are playing a game. At the start, each holds a ball of a different colour. "
                "As the game progresses, pairs of players trade balls. First, " + ". Then, ".join(steps)
                + ". At the end of the game, which ball does " + people[0] + " hold?"
            )
            subjects.append("tracking_shuffled_objects")
        else:
            values = ["True" if v else "False" for v in bools[i]]
            expr = values[0]
            for j in range(int(depth[i])):
                op = "and" if pairs[i, j, 0] % 2 else "or"
                neg = "not " if pairs[i, j, 1] % 3 == 0 else ""
                expr = f"( {expr} {op} {neg}{values[j + 1]} )" if j else f"{expr} {op} {neg}{values[j + 1]}"
            prompts.append(f"Evaluate the boolean expression: {expr} is")
            subjects.append("boolean_expressions")
    return prompts, [("A", "B", "True")[a] for a in answers], subjects


_RENDERERS: dict[str, Callable[[np.ndarray, np.random.Generator, str], tuple[list[str], list[str], list[str]]]] = {
    "word_problem": _render_word_problem,
    "multiple_choice": _render_multiple_choice,
    "sentence_completion": _render_sentence_completion,
    "competition_math": _render_competition_math,
    "code": _render_code,
    "logic_puzzle": _render_logic_puzzle,
}


# ---------------------------------------------------------------------- presets
def _paper_pool() -> ProceduralConfig:
    """The reference paper's nine models and seven benchmarks, 2,963 questions split 2,050:913."""
    return ProceduralConfig(name="paper-pool", seed=0)


def _two_model() -> ProceduralConfig:
    """A strong and a weak model, as in RouteLLM: Llama-3.1-70B-like vs Llama-3.1-8B-like."""
    benchmarks = paper_benchmarks()
    names = [b.name for b in benchmarks]
    weak = dict(zip(names, (a / 100 for a in PAPER_POOL_ACCURACY["llama3.1-8b"])))
    # Llama-3.1-70B-Instruct model-card figures, rounded (MMLU 83, GSM8K 95, MATH 68, HumanEval 80).
    strong = dict(zip(names, (0.83, 0.94, 0.75, 0.92, 0.80, 0.66, 0.80)))
    return ProceduralConfig(
        name="two-model",
        n_queries=2000,
        benchmarks=benchmarks,
        models=[
            make_model("weak-llama3.1-8b", "llama3.1", 8.03, False, weak, benchmarks, 1.3,
                       MLENERGY_A100_BS32_J_PER_TOKEN["meta-llama/Meta-Llama-3.1-8B-Instruct"], 75,
                       "ML.ENERGY meta-llama/Meta-Llama-3.1-8B-Instruct"),
            make_model("strong-llama3.1-70b", "llama3.1", 70.6, False, strong, benchmarks, 1.2,
                       MLENERGY_A100_BS32_J_PER_TOKEN_70B, 20,
                       "ML.ENERGY meta-llama/Meta-Llama-3.1-70B-Instruct (bs32, tp8)"),
        ],
    )


def _collapse_prone() -> ProceduralConfig:
    """One model (Qwen2.5-7B-like) is cheap and almost as good as every larger one.

    A cost-aware policy is pulled towards always routing to it and can collapse there, while
    the model-specific part of difficulty (``noise``) still leaves real routing headroom.
    """
    benchmarks = paper_benchmarks()
    names = [b.name for b in benchmarks]
    base = np.array(PAPER_POOL_ACCURACY["qwen2.5-7b"]) / 100
    rows = (  # id, params_b, accuracy points over the 7B on every benchmark, tokens/s
        ("qwen2.5-7b", 7.62, 0.0, 80),
        ("qwen2.5-14b", 14.8, 0.03, 45),
        ("qwen2.5-32b", 32.8, 0.05, 30),
        ("qwen2.5-72b", 72.7, 0.06, 15),
    )
    models = [make_model("qwen2.5-0.5b", "qwen2.5", 0.49, False,
                         dict(zip(names, np.array(PAPER_POOL_ACCURACY["qwen2.5-0.5b"]) / 100)), benchmarks, 1.2, None, 180)]
    models += [
        make_model(id, "qwen2.5", params, False, dict(zip(names, np.minimum(base + delta, 0.97))), benchmarks, 1.0, None, tps)
        for id, params, delta, tps in rows
    ]
    return ProceduralConfig(name="collapse-prone", n_queries=3000, benchmarks=benchmarks, models=models)


# Families of the many-models preset: accuracy offset (logits) per benchmark and verbosity.
MANY_FAMILIES = {
    #             mmlu  gsm8k bbh   arc   hella math  humaneval   verbosity
    "qwen2.5":   ((0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), 1.0),
    "llama3":    ((-0.2, -0.1, 0.1, 0.0, 0.2, -0.4, -0.2), 1.3),
    "gemma2":    ((-0.1, -0.3, 0.0, 0.2, 0.3, -0.6, -0.4), 0.9),
    "phi3":      ((0.2, 0.1, -0.1, 0.4, 0.0, -0.5, -0.3), 1.1),
    "mistral":   ((-0.3, -0.5, -0.2, -0.1, 0.2, -0.8, -0.5), 1.0),
    "qwen2.5-coder": ((-0.3, -0.2, -0.2, -0.3, -0.3, -0.1, 0.8), 1.0),
    "deepseek-r1": ((-0.3, 0.8, 0.8, -0.1, -0.4, 1.8, 0.3), 1.0),
}
MANY_MODELS = (  # family, ((name, params_b), ...)
    ("qwen2.5", (("0.5b", 0.49), ("1.5b", 1.54), ("3b", 3.09), ("7b", 7.62), ("14b", 14.8), ("32b", 32.8), ("72b", 72.7))),
    ("llama3", (("1b", 1.24), ("3b", 3.21), ("8b", 8.03), ("70b", 70.6))),
    ("gemma2", (("2b", 2.61), ("9b", 9.24), ("27b", 27.2))),
    ("phi3", (("mini-3.8b", 3.82), ("small-7b", 7.39), ("medium-14b", 14.0))),
    ("mistral", (("7b", 7.25), ("nemo-12b", 12.2))),
    ("qwen2.5-coder", (("1.5b", 1.54), ("7b", 7.62), ("32b", 32.8))),
    ("deepseek-r1", (("distill-1.5b", 1.78), ("distill-7b", 7.62), ("distill-8b", 8.03), ("distill-14b", 14.8),
                     ("distill-32b", 32.8), ("distill-70b", 70.6))),
)


def _many_models() -> ProceduralConfig:
    """28 models from 0.5B to 73B in seven families, with family strengths per benchmark.

    Accuracy follows a per-benchmark logit-linear law in log2(params) through the paper
    pool's Qwen2.5 0.5B and 7B targets, plus the family's offsets.
    """
    benchmarks = paper_benchmarks()
    names = [b.name for b in benchmarks]
    lo = _logit(np.array(PAPER_POOL_ACCURACY["qwen2.5-0.5b"]) / 100)
    hi = _logit(np.array(PAPER_POOL_ACCURACY["qwen2.5-7b"]) / 100)
    slope = (hi - lo) / math.log2(7.62 / 0.49)
    models = []
    for family, sizes in MANY_MODELS:
        offsets, verbosity = MANY_FAMILIES[family]
        for label, params in sizes:
            logits = lo + slope * math.log2(params / 0.49) + np.array(offsets)
            accuracy = np.clip(_sigmoid(logits), 0.03, 0.97)
            models.append(make_model(
                f"{family}-{label}", family, params, family == "deepseek-r1", dict(zip(names, accuracy)),
                benchmarks, verbosity, None, 1.0 / (0.0045 + 0.0006 * params),
            ))
    return ProceduralConfig(name="many-models", n_queries=5000, benchmarks=benchmarks, models=models)


# Knobs of the specialist presets, chosen with specialization.calibration_statistics so that with
# topics on (specialization_signal 1) correctness is about as shared across models, within a
# benchmark, as in the real tournaments (experiments/results/routing_gain/calibration.md): sharper
# items (discrimination x 2.5), little hidden per-model noise, length telling about as much as
# real question length does.
SPECIALIST_CALIBRATION = {"discrimination_scale": 2.5, "noise": 0.15, "text_signal": 0.3}


def _specialist_pool(n_queries: int = 6000, name: str = "specialist-pool") -> ProceduralConfig:
    """The paper pool's nine models and seven benchmarks with topics on (``specialization_signal``
    1; routing_gym.sources.specialization), calibrated to the real tournaments' cross-model
    agreement; 6,000 questions split 4,151 : 1,849 (the paper's ratio)."""
    scale = SPECIALIST_CALIBRATION["discrimination_scale"]
    benchmarks = [replace(b, discrimination=b.discrimination * scale) for b in paper_benchmarks()]
    return ProceduralConfig(
        name=name, n_queries=n_queries, benchmarks=benchmarks, models=paper_pool_models(benchmarks),
        noise=SPECIALIST_CALIBRATION["noise"], text_signal=SPECIALIST_CALIBRATION["text_signal"], specialization_signal=1.0,
    )


def _specialist_pool_large() -> ProceduralConfig:
    """``specialist-pool`` with 24,000 questions (16,605 train / 7,395 test): +-1 pp resolvable."""
    return _specialist_pool(24_000, "specialist-pool-large")


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


PRESETS: dict[str, Callable[[], ProceduralConfig]] = {
    "paper-pool": _paper_pool,
    "two-model": _two_model,
    "collapse-prone": _collapse_prone,
    "many-models": _many_models,
    # Topics that favour some models, shown in the text (routing_gym.sources.specialization).
    "specialist-pool": _specialist_pool,
    "specialist-pool-large": _specialist_pool_large,
}


def preset_config(name: str, /, **overrides: Any) -> ProceduralConfig:
    """The config of preset ``name`` with some knobs replaced (``seed=3, text_signal=1.0``; ``name=``
    too: the preset is positional-only, so a config named differently can be derived)."""
    if name not in PRESETS:
        raise UnknownNameError("procedural preset", name, list(PRESETS))
    config = PRESETS[name]()
    known = {f.name for f in fields(ProceduralConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError(f"preset {name!r}: unknown ProceduralConfig field(s) {sorted(unknown)}; fields: {sorted(known)}")
    return replace(config, **overrides) if overrides else config


_CACHE: OrderedDict[str, Tournament] = OrderedDict()
_CACHE_SIZE = 8


def generate_cached(config: ProceduralConfig) -> Tournament:
    """``generate`` memoised on the config (the last few), so repeated env construction is free.

    The cached tournament is shared: treat it as read-only (its methods return copies).
    """
    key = config.fingerprint()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    tournament = generate(config)
    _CACHE[key] = tournament
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return tournament


def _register_preset(name: str) -> None:
    register_tournament(name)(lambda: generate_cached(preset_config(name)))


for _name in PRESETS:
    _register_preset(_name)
