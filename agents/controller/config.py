"""Configuration of the text controller (TRL style: one dataclass per trainer, next to it).

``ControllerConfig`` groups the model, LoRA, prompt, SFT, GRPO and evaluation settings.
Agents take it whole (``config=``) or as flat keyword overrides (``sft_max_steps=20``,
``grpo_beta=0.04``, ``lora_r=8``, ``model="Qwen/Qwen2.5-1.5B-Instruct"``), which is how
``routing-gym compare --agent-kwargs`` and the registry variants pass them.

The defaults are sized for the offline CPU run (SmolLM2-135M-Instruct on 2 cores): a compact
prompt (the benchmark name and the question's opening, no legend), SFT for a stated step budget
toward a cross-fitted, label-aware teacher, GRPO for 12 steps of 8 prompts with reward spread x
4 samples, and routing from one forward pass nested in the benchmark label (``route``)
(``experiments/profile_text_controller.py`` measures where a step's time goes). For the
paper's setting on a GPU use ``preset="paper"`` (``PRESETS``) with ``model=<local directory>``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from routing_gym_agents.controller.prompt import FORMATS, ModelLegend, OutputFormat, PromptBuilder

OFFLINE_PREFIX = "offline:"
DEFAULT_MODEL = OFFLINE_PREFIX + "smollm2-135m-instruct"  # routing_gym.offline_llm, from PyPI
CHOICE_MAX_NEW_TOKENS = 8  # "Choice: C" is 4 tokens plus end of turn
RATIONALE_MAX_NEW_TOKENS = 40  # the templated sentence is 15-30 tokens


@dataclass
class ModelSettings:
    """Which causal LM writes the choice, and where it runs."""

    # "offline:<name>" loads a model of routing_gym.offline_llm (no Hub access needed);
    # anything else is a Hugging Face model id or a local model directory.
    name_or_path: str = DEFAULT_MODEL
    dtype: Literal["float32", "bfloat16"] = "float32"  # bfloat16 (weights and training) only on a GPU
    device: str = "auto"  # "auto": cuda when available, else cpu
    chat_template: bool | None = None  # None: use the tokenizer's chat template when it has one


@dataclass
class LoraSettings:
    """Optional LoRA adapters (peft). With LoRA, SFT's adapter is merged before GRPO, so the
    KL-GRPO reference (the adapter switched off) is the SFT model."""

    enabled: bool = True
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    # Adapt only the top N decoder layers: back-propagation then stops there, which makes a
    # training step about twice as cheap on CPU. None adapts every layer.
    top_layers: int | None = 8


@dataclass
class PromptSettings:
    output_format: OutputFormat = "choice"  # "choice" or "rationale"
    include_difficulty: bool = False  # show the query's difficulty field (tournaments that have one)
    # Questions are cut here: every prompt token is training and routing cost, and the
    # opening holds what tells questions apart (specialist-pool names the topic first).
    max_question_chars: int = 120
    # The letter -> model legend in the system prompt. Off by default: SFT teaches what each
    # letter means, and the legend was most of each training prompt's tokens (the prefix cache
    # shares it at routing time, but training recomputes it for every prompt).
    show_legend: bool = False
    # The query's benchmark name, as the paper's router context holds "any metadata provided":
    # without it the controller competes with per-benchmark routing on less information.
    include_benchmark: bool = True

    def builder(self, legend: ModelLegend) -> PromptBuilder:
        return PromptBuilder(legend, self.output_format, self.include_difficulty, self.max_question_chars,
                             self.show_legend, self.include_benchmark)


@dataclass
class SFTSettings:
    """Supervised fine-tuning (TRL ``SFTTrainer``) toward predicted-best routes
    (``controller.teacher``), each query's logged best (``oracle_targets``) or reward-weighted
    draws (``sampled_targets``)."""

    # lambda_e of gated_rank for the targets; None (default): the reward GRPO trains on (the
    # context's, compare's), so SFT and GRPO pull toward one objective. The paper's SFT used 0.5.
    energy_coef: float | None = None
    # "predicted" (default): each query's route with the best reward predicted by the label-aware
    # teacher (controller.teacher: the benchmark's mean reward plus a ridge regression on TF-IDF
    # features of the prompt's text), cross-fitted over ``target_folds`` folds of the SFT rows:
    # the best route for questions that read alike. "oracle": each
    # query's best route in its one logged draw (the paper's targets; the cheapest correct
    # model, so 31 % of specialist-pool's targets are its smallest model, which is right on 34 %
    # of questions). "sampled": a route drawn from softmax(reward / target_temperature).
    # On specialist-pool (experiments/bench_text_controller.py, seed 0) predicted targets gave an
    # SFT policy whose greedy route earned 1.50 on the GRPO probe (top-1 share 0.31), and GRPO
    # then raised the sampling policy's expected reward 1.13 -> 1.27 without collapsing; from
    # oracle targets GRPO moved 87 % of held-out routes onto the most accurate model, from
    # sampled targets all of them (text_controller/compare-specialist-pool-sampled-targets).
    targets: Literal["oracle", "sampled", "predicted"] = "predicted"
    target_temperature: float = 1.0  # "sampled" only
    target_ridge_alpha: float = 3.0  # "predicted" only
    # "predicted" only: each fold's targets from a teacher fitted on the other folds (1: fitted
    # and read on the same rows, which recalls each question's own noisy draw).
    target_folds: int = 5
    tie_break: str = "auto"  # oracle_targets tie rule
    # The step budget: 192 x 8 = 1,536 queries of a seeded shuffle of the whole training split
    # (the budget, not the split, is what the CPU allows). None: ``epochs`` full passes. On
    # specialist-pool (diagnostic grpo fits, seed 0, 512 validation queries carved from train) the
    # SFT model's best label-nested route was worth 1.356 on validation after 64 steps and 1.502
    # after 192 (label only: 1.013), for 154 -> 454 s of SFT on one thread.
    max_steps: int | None = 192
    epochs: float = 1.0  # used when max_steps is None
    batch_size: int = 8
    learning_rate: float = 1e-3  # LoRA on a 135M model: the format is learnt in ~10 steps
    warmup_steps: int = 3
    max_train_queries: int | None = None  # seeded subsample of the training split; None: all
    max_length: int = 512  # tokens per prompt + completion (TRL truncates beyond)
    # Start from a saved controller (an agent directory from ``save``) or a model directory
    # and skip SFT: e.g. run grpo and kl-grpo from one SFT checkpoint.
    checkpoint: str | None = None
    save_to: str | None = None  # also save the SFT model there (a directory usable as checkpoint)


@dataclass
class GRPOSettings:
    """GRPO on replayed rewards (TRL ``GRPOTrainer``); ``beta > 0`` is KL-GRPO."""

    # The RL objective is the context's reward (compare's evaluation reward, by default
    # gated_rank with the paper's lambda_e = 0.4); False trains on gated_rank(energy_coef).
    reward_from_context: bool = True
    energy_coef: float = 0.4  # lambda_e of gated_rank when reward_from_context is False
    # The step budget: a step (16 sampled routes, their forward and backward) cost ~13 CPU s on
    # an AMX machine, ~22 on an AVX2-only one, and compare fits grpo and kl-grpo twice (the
    # audit). At 40 steps compare's specialist-pool run took 60 CPU minutes on the AMX machine;
    # at 30 the controllers' content gain and top-1 share stayed where they were
    # (experiments/results/text_controller/compare-specialist-pool). Since the LM head scores
    # only labelled positions (lm_head_labelled_only) a grpo step there takes ~8 s wall on 2
    # AVX2 cores, and that whole compare run 2,728 s. With 4 prompts a step, 30 steps saw 2 % of
    # llmrouter's training split and ~35 % of groups had no reward spread (no gradient): now 8
    # prompts with spread a step (oversample, skip_flat_queries). A step so samples 64 routes and
    # trains on 32: on specialist-pool it took ~61 s wall on one thread of a loaded 2-core machine
    # (6 steps moved the probe's expected reward 0.76 -> 1.05), so 12 steps, not more.
    max_steps: int = 12
    num_generations: int = 4  # group size: completions sampled per prompt
    prompts_per_step: int = 8  # prompts per optimizer step (x num_generations completions)
    # Prompts sampled per step = oversample x prompts_per_step; the first prompts_per_step groups
    # whose rewards differ train, the others are dropped before the loss (a group of equal rewards
    # has zero advantage: no policy gradient, only cost). A choice completion is a few tokens, so
    # sampling is cheap beside the backward pass. 1: TRL's GRPO as it is, every group trains.
    oversample: int = 2
    # Leave out training queries on which every model earns the same reward: no route there can
    # beat another, so their groups never have spread.
    skip_flat_queries: bool = True
    # On specialist-pool after 64 SFT steps (the same diagnostic fits) 5e-4 moved the probe's greedy
    # top-1 share 0.30 -> 0.86 (the collapse detector fired), yet the label-nested route, which reads
    # log-probabilities centred within the benchmark, was worth 1.383 on validation; 1e-4 kept the
    # probe's top-1 at 0.30 -> 0.38 but was worth 1.347, below the SFT model it started from (1.356).
    # After 192 SFT steps 5e-4 did not collapse (top-1 0.39 -> 0.31) and was worth 1.513 against the
    # SFT model's 1.502. Chosen on validation: 5e-4.
    learning_rate: float = 5e-4
    # When routing is chosen on validation (route; holds_out_validation), also value the SFT model
    # (before GRPO) there and route by it when its best validation value is higher than the GRPO
    # model's: GRPO is kept only where it helped on queries it did not train on. The fit logs both
    # values (route.validation_value_sft / _grpo) and compare's row fit_overhead_route_grpo_kept.
    keep_sft_if_better: bool = True
    beta: float = 0.0  # KL coefficient to the SFT model; > 0 makes KL-GRPO
    # "reward_range": TRL's coefficient is beta x the mean per-query range of the training reward
    # (max - min over the K models), so the penalty is in the reward's units: the KL-regularised
    # optimum is pi_ref x exp(r / (beta x range)). "nats": beta as given (TRL's meaning). At
    # beta = 0.04 nats against reward differences of 1-3 the penalty was ~0.005: inert.
    beta_units: Literal["reward_range", "nats"] = "reward_range"
    temperature: float = 1.0
    # "none": advantages are raw reward differences within a group, the policy gradient of the
    # mean reward. TRL's default "group" divides by the group's spread, so a group whose routes
    # were all correct (rewards 1.6-2.0, differing only by energy rank) pushes as hard as one
    # that separates right from wrong (on paper-pool the probe's expected reward did not move
    # under "group" where "none" raised it; rerun: experiments/bench_text_controller.py
    # --set '{"grpo_scale_rewards": "group"}').
    scale_rewards: Literal["group", "batch", "none"] = "none"
    loss_type: str = "dapo"
    # Subtract each query's mean reward over the K models (the reward of a uniform random
    # route), so a reward reads as "better than random routing". GRPO's group baseline
    # removes per-query offsets anyway; centering matters with scale_rewards="batch".
    reward_centering: bool = False
    max_completion_length: int | None = None  # None: 8 tokens (choice) / 40 (rationale)
    max_train_queries: int | None = None  # seeded subsample of the training split; None: all
    # Choice format: exact expected reward of the policy on this many GRPO training queries,
    # before and after GRPO (one forward pass each); 0 turns it off.
    probe_queries: int = 64


@dataclass
class RouteSettings:
    """How held-out queries are routed from the choice format's probabilities p_k(x).

    ``label_nested``: by ``S[b(x), k] + alpha x (log p_k(x) - m[b(x), k])``, ``S`` the
    per-benchmark mean training reward of each model (``per-benchmark``'s score: alpha = 0 is its
    route exactly) and ``m`` the controller's mean log-probability per benchmark (so the text moves
    the route only within a benchmark); else by ``p`` alone. ``decoding``: "greedy" (argmax) or
    "sample" (a draw from ``softmax(score / alpha)``, or from ``p`` when not nested, seeded by the
    fit seed and the question's text); "auto" chooses on validation. alpha and decoding are chosen
    by the expected reward on a validation part of train (``nested.validation_parts``), which the
    controller then does not train on (``controller.policy``). The rationale format always decodes
    greedily, unnested."""

    label_nested: bool = True
    alphas: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)  # candidates beside 0 (label only)
    decoding: Literal["auto", "greedy", "sample"] = "auto"
    # Validation queries the controller reads (one forward pass each): a seeded subsample of the
    # validation part, which also gives the per-benchmark means m.
    max_validation_queries: int = 512


@dataclass
class EvalSettings:
    batch_size: int = 16  # greedy decoding batch on held-out queries
    prefix_cache: bool = True  # compute the shared instructions + legend once, reuse their KV cache
    # Choice format: route by the most probable "Choice: X" from one forward pass per query
    # (controller.inference.route_by_choice, then controller.policy: unnested and greedy, the
    # letter greedy decoding writes) instead of
    # decoding it token by token. The rationale format always decodes.
    choice_forward: bool = True
    # The dtype of choice_forward routing on CPU: "auto" (default: bfloat16 where the CPU has
    # native bf16 matrix units, AMX or AVX512-BF16, else float32), "bfloat16", or "float32"
    # (exactly the letter greedy decoding writes). Routing is compute-bound: on specialist-pool
    # a bf16 copy read the choice in 46 ms per query against 152 ms in float32, the same
    # letter on 127 of 128 queries of the untrained model (near-ties), so a compare of three
    # controllers with its audit routes 6 x 1,849 queries in ~9 min instead of ~28
    # (controller.model.routing_model; text_controller/profile).
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    max_new_tokens: int | None = None  # None: as max_completion_length
    # Controller joules: a routing_gym.collect.meters kind ("auto": NVML when the controller
    # runs on a GPU, nothing on CPU; "none"; "replay" for synthetic test energies).
    meter: str = "auto"


@dataclass
class ControllerConfig:
    model: ModelSettings = field(default_factory=ModelSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    prompt: PromptSettings = field(default_factory=PromptSettings)
    sft: SFTSettings = field(default_factory=SFTSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    route: RouteSettings = field(default_factory=RouteSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    seed: int | None = None  # None: FitContext.seed
    output_dir: str | None = None  # trainer scratch space; None: a temporary directory
    # Write each fit's training report to <report_dir>/seed-<seed>/ (write_training_report:
    # GRPO step log and plots, summary.json), e.g. for controllers trained by ``compare``.
    report_dir: str | None = None
    progress: bool | None = None  # tqdm/trainer progress bars; None: FitContext.progress
    # SFT and GRPO recompute the activations of the layers that back-propagation reaches
    # (the LoRA'd lora.top_layers; every layer without them) during backward instead of keeping
    # them: torch.utils.checkpoint, non-reentrant, on those decoder layers only, so backward
    # still stops at the top layers (TRL's own activation_checkpointing would make the inputs
    # require grad and back-propagate through all layers). Same gradients, for one extra
    # forward of those layers; alone it took ~0.6 GB off a GRPO step's peak RSS on paper-pool
    # (8 completions of ~260 tokens; experiments/bench_controller_memory.py measures it).
    activation_checkpointing: bool = True
    # Tokens per tile of TRL's chunked log-probability LM head (trl.kernels TOKEN_CHUNK_SIZE,
    # 4096 in TRL). Off CUDA, TRL scores every position of the batch, not only the completion's
    # (8 x ~260 tokens in a GRPO step), and each of its fp32 temporaries is tokens x 32768
    # vocabulary columns: ~0.27 GB each at 2088 tokens, ~0.03 GB at 256. Tokens are scored
    # independently, so the tile height leaves the results as they are. None keeps TRL's.
    lm_head_token_chunk: int | None = 256
    # Score only the positions with a label (the completion's tokens) in TRL's fused LM head, as
    # TRL already does on CUDA; off CUDA it scores every position (one tile shape for compilers
    # like Neuron's), though on CPU its tiles run eagerly in torch. A specialist-pool prompt is
    # ~80 tokens and its completion ~5, so the LM head did ~16x the needed work: its backward
    # alone was a third of an SFT step. Positions are scored independently: same numbers.
    lm_head_labelled_only: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.prompt.output_format not in FORMATS:
            raise ValueError(f"prompt.output_format must be one of {FORMATS}, got {self.prompt.output_format!r}")
        g = self.grpo
        if g.num_generations < 2:
            raise ValueError(f"grpo.num_generations (group size) must be >= 2, got {g.num_generations}")
        if g.prompts_per_step < 1:
            raise ValueError(f"grpo.prompts_per_step must be >= 1, got {g.prompts_per_step}")
        if g.beta < 0:
            raise ValueError(f"grpo.beta (KL coefficient) must be >= 0, got {g.beta}")
        if g.beta_units not in ("reward_range", "nats"):
            raise ValueError(f"grpo.beta_units must be 'reward_range' or 'nats', got {g.beta_units!r}")
        if g.oversample < 1:
            raise ValueError(f"grpo.oversample must be >= 1, got {g.oversample}")
        r = self.route
        if r.decoding not in ("auto", "greedy", "sample"):
            raise ValueError(f"route.decoding must be 'auto', 'greedy' or 'sample', got {r.decoding!r}")
        if any(not (a > 0 and math.isfinite(a)) for a in r.alphas):
            raise ValueError(f"route.alphas must be finite numbers > 0 (0, label only, is always a candidate), got {r.alphas}")
        if r.max_validation_queries < 1:
            raise ValueError(f"route.max_validation_queries must be >= 1, got {r.max_validation_queries}")
        if self.sft.target_folds < 1:
            raise ValueError(f"sft.target_folds must be >= 1, got {self.sft.target_folds}")
        if g.scale_rewards not in ("group", "batch", "none"):
            raise ValueError(f"grpo.scale_rewards must be 'group', 'batch' or 'none', got {g.scale_rewards!r}")
        if self.sft.targets not in ("oracle", "sampled", "predicted"):
            raise ValueError(f"sft.targets must be 'oracle', 'sampled' or 'predicted', got {self.sft.targets!r}")
        if not self.sft.target_ridge_alpha > 0:
            raise ValueError(f"sft.target_ridge_alpha must be > 0, got {self.sft.target_ridge_alpha}")
        if not self.sft.target_temperature > 0:
            raise ValueError(f"sft.target_temperature must be > 0, got {self.sft.target_temperature}")
        if self.sft.max_steps is None and not self.sft.epochs > 0:
            raise ValueError(f"sft.epochs must be > 0 when sft.max_steps is None, got {self.sft.epochs}")
        for name, section in (("sft", self.sft), ("grpo", self.grpo)):
            if section.max_steps is not None and section.max_steps < 0:
                raise ValueError(f"{name}.max_steps must be >= 0, got {section.max_steps}")
            if section.max_train_queries is not None and section.max_train_queries < 1:
                raise ValueError(f"{name}.max_train_queries must be >= 1 or None, got {section.max_train_queries}")
        if self.eval.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"eval.dtype must be 'auto', 'float32' or 'bfloat16', got {self.eval.dtype!r}")
        if self.model.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"model.dtype must be 'float32' or 'bfloat16', got {self.model.dtype!r}")
        if self.sft.batch_size < 1 or self.eval.batch_size < 1:
            raise ValueError("batch sizes must be >= 1")
        if self.lm_head_token_chunk is not None and self.lm_head_token_chunk < 1:
            raise ValueError(f"lm_head_token_chunk must be >= 1 or None, got {self.lm_head_token_chunk}")
        if self.lora.top_layers is not None and self.lora.top_layers < 1:
            raise ValueError(f"lora.top_layers must be >= 1 or None, got {self.lora.top_layers}")

    @property
    def max_completion_length(self) -> int:
        if self.grpo.max_completion_length is not None:
            return self.grpo.max_completion_length
        return CHOICE_MAX_NEW_TOKENS if self.prompt.output_format == "choice" else RATIONALE_MAX_NEW_TOKENS

    @property
    def eval_max_new_tokens(self) -> int:
        return self.eval.max_new_tokens or self.max_completion_length

    @property
    def holds_out_validation(self) -> bool:
        """Whether routing is chosen on a validation part of train that training leaves out."""
        r = self.route
        choice = self.prompt.output_format == "choice" and self.eval.choice_forward
        return choice and (r.label_nested or r.decoding == "auto")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ControllerConfig:
        """Inverse of ``to_dict`` (e.g. a saved controller's ``controller.json``)."""
        sections = {name: section(**data[name]) for name, section in _SECTION_TYPES.items() if name in data}
        if "lora" in sections:
            sections["lora"].target_modules = tuple(sections["lora"].target_modules)
        if "route" in sections:
            sections["route"].alphas = tuple(sections["route"].alphas)
        top = {k: v for k, v in data.items() if k not in _SECTION_TYPES}
        return cls(**sections, **top)

    @classmethod
    def from_kwargs(
        cls, base: ControllerConfig | None = None, preset: str | None = None, **overrides: Any
    ) -> ControllerConfig:
        """A config from flat overrides: ``<section>_<field>`` (``sft_max_steps``), a
        top-level field (``seed``), or an alias (``model``, ``format``, ``beta``, ``lora``).
        ``preset`` (a name of ``PRESETS``) applies first, the overrides on top of it."""
        if preset is not None:
            if preset not in PRESETS:
                raise ValueError(f"unknown text-controller preset {preset!r}; presets: {', '.join(sorted(PRESETS))}")
            overrides = {**PRESETS[preset], **overrides}
        config = cls() if base is None else copy.deepcopy(base)  # never mutate the caller's config
        for key, value in overrides.items():
            section, name = _resolve_key(key)
            target = config if section is None else getattr(config, section)
            if name in ("target_modules", "alphas") and isinstance(value, list):
                value = tuple(value)
            setattr(target, name, value)
        config.validate()
        if preset == "paper":
            _check_local_model_dir(config.model.name_or_path)
        return config


_ALIASES = {
    "model": ("model", "name_or_path"),
    "format": ("prompt", "output_format"),
    "output_format": ("prompt", "output_format"),
    "include_difficulty": ("prompt", "include_difficulty"),
    "beta": ("grpo", "beta"),
    "lora": ("lora", "enabled"),
    "dtype": ("model", "dtype"),
    "device": ("model", "device"),
}
_SECTIONS = ("model", "lora", "prompt", "sft", "grpo", "route", "eval")


def _resolve_key(key: str) -> tuple[str | None, str]:
    if key in _ALIASES:
        return _ALIASES[key]
    top = {f.name for f in fields(ControllerConfig)} - set(_SECTIONS)
    if key in top:
        return None, key
    for section in _SECTIONS:
        prefix = section + "_"
        if key.startswith(prefix):
            name = key[len(prefix) :]
            known = {f.name for f in fields(_SECTION_TYPES[section])}
            if name in known:
                return section, name
    valid = sorted(_ALIASES) + sorted(top) + [f"{s}_{f.name}" for s in _SECTIONS for f in fields(_SECTION_TYPES[s])]
    raise TypeError(f"unknown text-controller option {key!r}; valid options: {', '.join(valid)}")


_SECTION_TYPES: dict[str, type] = {
    "model": ModelSettings,
    "lora": LoraSettings,
    "prompt": PromptSettings,
    "sft": SFTSettings,
    "grpo": GRPOSettings,
    "route": RouteSettings,
    "eval": EvalSettings,
}


# The reference paper's scale: Qwen2.5-1.5B-Instruct (bf16, on a GPU) from a local model
# directory, LoRA on every layer, the legend shown (a 1.5B model can read model names), SFT to
# the oracle route (the paper's targets) in one pass over the whole training split, GRPO for
# 1,500 steps of 4 prompts x 8 samples. It needs ``model=<directory>`` (nothing is downloaded); ``experiments/run_paper_controller.sh``
# is the command that runs it end to end. Nothing else in the project uses it. What the CPU
# default changed since stays the paper's here: SFT at lambda_e = 0.5, GRPO as TRL runs it (every
# sampled group, every query, KL-GRPO's beta in nats) and greedy routing by the controller alone
# (the benchmark name is in its prompt: the paper's router context is the question plus any
# metadata provided).
PAPER_MODEL = "Qwen2.5-1.5B-Instruct"
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "model": "",  # must be given: a local Qwen2.5-1.5B-Instruct directory
        "dtype": "bfloat16",
        "lora_top_layers": None,
        "lora_r": 16,
        "prompt_show_legend": True,
        "prompt_max_question_chars": 1000,
        "sft_max_train_queries": None,
        "sft_targets": "oracle",  # the paper's targets
        "sft_energy_coef": 0.5,  # the paper's SFT value
        "sft_max_steps": None,  # one epoch (sft.epochs) over the whole training split
        "sft_batch_size": 16,
        "sft_learning_rate": 1e-4,
        "sft_max_length": 1024,
        "grpo_max_steps": 1500,
        "grpo_prompts_per_step": 4,
        "grpo_num_generations": 8,
        "grpo_learning_rate": 1e-5,
        "grpo_probe_queries": 256,
        "grpo_oversample": 1,
        "grpo_skip_flat_queries": False,
        "grpo_beta_units": "nats",
        "grpo_keep_sft_if_better": False,  # the paper deploys its GRPO model
        "route_label_nested": False,
        "route_decoding": "greedy",
        "eval_batch_size": 64,
        "lm_head_token_chunk": None,
    }
}


def _check_local_model_dir(path: str) -> None:
    from pathlib import Path

    if not path or not (Path(path) / "config.json").is_file():
        raise ValueError(
            f"preset 'paper' runs {PAPER_MODEL} from a local model directory: pass model=<directory holding "
            f"config.json and the weights>; got model={path!r}, which is not one"
        )
