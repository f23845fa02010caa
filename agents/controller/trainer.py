"""Training of the text controller: SFT (TRL ``SFTTrainer``) to oracle or reward-weighted
routes, then GRPO / KL-GRPO (TRL ``GRPOTrainer``) on rewards replayed from the tournament.

Pipeline (``train_controller``):

0. **Validation.** When routing is chosen on validation (``route``; ``holds_out_validation``),
   ``nested.validation_parts`` carves a validation part out of the training split; SFT and GRPO
   train on the rest and ``TrainedController.validation_rows`` go to ``controller.policy``.
1. **SFT.** Targets come from the reward GRPO trains on (``sft.energy_coef`` None, the default;
   the paper's SFT used ``gated_rank(lambda_e=0.5)``): per query the route with the best reward
   predicted by a cross-fitted, label-aware teacher (``controller.teacher``, the default), its
   best logged route (``oracle_targets``, the paper's) or one route drawn from
   ``softmax(reward / sft.target_temperature)``
   (``sampled_targets``; ``sft.targets``). When an earlier controller of this process ran the same SFT, its model
   is copied instead (``controller.sft_memo``). Completions are ``Choice: X`` or a templated
   sentence of logged facts followed by ``Choice: X`` (``controller.prompt.target_completion``). With LoRA the adapter
   is merged into the weights afterwards.
2. **GRPO.** Each dataset row carries the query's ``[K]`` outcome columns (``correct``,
   ``energy_j``, ``latency_s``, ``mean_power_w``); TRL passes them to ``RoutingReward``, which
   parses every sampled completion and returns the gated reward of the chosen model's logged
   outcome under the fit context's reward (``grpo.reward_from_context``, the default; compare's
   default is the paper's ``gated_rank(lambda_e=0.4)``), or the invalid
   penalty. Queries on which every model earns the same reward are left out
   (``grpo.skip_flat_queries``), and each step samples ``grpo.oversample`` x the prompts it
   trains on and keeps the first groups with reward spread (``SpreadGroupsMixin``).
   ``beta > 0`` is KL-GRPO: the reference is the SFT model (a fresh LoRA switched off
   over the merged SFT weights, or the SFT weights saved and reloaded by TRL); with
   ``grpo.beta_units="reward_range"`` TRL's coefficient is beta x the reward's mean range.
3. **Logs per GRPO step**: mean reward, valid-choice rate, selection mix (share per model),
   normalised selection entropy and top-1 share (``routing_gym.eval.collapse``), TRL's
   ``frac_reward_zero_std`` (groups whose samples all earned the same reward: no gradient),
   and ``kl`` for KL-GRPO. For the choice format, the *exact* expected reward of the policy on
   a fixed probe of training queries is computed before and after GRPO
   (``expected_choice_reward``), a noise-free check that GRPO raised the training reward,
   with both decodings' selection mix and top-1 share (sampling: the mean probabilities;
   greedy: ``choice_actions``) and the greedy policy's reward.

Model loading and saving live in ``controller.model``, decoding and the probe in
``controller.inference``, the SFT teacher in ``controller.teacher``, the routing policy in
``controller.policy``, the step logs and report files in ``controller.report``. The rest is one
file past 600 lines because SFT and GRPO share its trainer arguments, LoRA and memory switches
(checkpointing, LM-head tiles) and the pipeline that runs them in turn.
torch, transformers, TRL and peft are imported inside functions only.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from routing_gym.envs import Reward
from routing_gym.envs.rewards import oracle_targets, sampled_targets
from routing_gym.eval.collapse import normalised_entropy, track_actions
from routing_gym.tournament import Outcomes, Tournament
from routing_gym.tournament.scoring import score_actions
from routing_gym_agents.controller.config import ControllerConfig, GRPOSettings, LoraSettings
from routing_gym_agents.controller.inference import (
    choice_actions,
    choice_letter_ids,
    choice_probabilities,
    expected_choice_reward,
)
from routing_gym_agents.controller.model import checkpoint_model_dir, load_model, save_controller, uses_chat
from routing_gym_agents.controller.prompt import ModelLegend, PromptBuilder, parse_choices, target_completion
from routing_gym_agents.controller.report import grpo_step_logs
from routing_gym_agents.controller.sft_memo import SFT_MEMO, recall_sft, remember_sft, sft_memo_key
from routing_gym_agents.controller.teacher import cross_fitted_targets
from routing_gym_agents.nested import validation_parts

if TYPE_CHECKING:
    from routing_gym_agents.base import FitContext

OUTCOME_FIELDS = ("correct", "energy_j", "latency_s", "mean_power_w")


# ---------------------------------------------------------------------- LoRA and trainer arguments
def lora_config(lora: LoraSettings, model: Any) -> Any:
    """A peft ``LoraConfig`` (None when LoRA is off), restricted to the top layers if asked."""
    if not lora.enabled:
        return None
    from peft import LoraConfig

    n_layers = int(model.config.num_hidden_layers)
    top = None if lora.top_layers is None else min(lora.top_layers, n_layers)
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        layers_to_transform=None if top is None else list(range(n_layers - top, n_layers)),
        task_type="CAUSAL_LM",
    )


def backprop_layers(model: Any, config: ControllerConfig) -> list[Any]:
    """The decoder layers that back-propagation reaches: the LoRA'd top layers, or all of them
    (LoRA on every layer, or full fine-tuning)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ValueError(
            f"activation_checkpointing=True but {type(model).__name__} has no transformers "
            "GradientCheckpointingLayer decoder layers; pass activation_checkpointing=False"
        )
    top = config.lora.top_layers if config.lora.enabled else None
    return layers if top is None else layers[-min(top, len(layers)) :]


@contextmanager
def checkpointed_layers(model: Any, config: ControllerConfig) -> Iterator[int]:
    """Activation checkpointing (non-reentrant) on ``backprop_layers`` while training; yields
    how many layers. transformers' per-layer switch does the work (it drops the KV cache of a
    recomputed layer), but it is on only during a forward of ``model`` in training mode with
    gradients: outside one the model reads as not checkpointing, so TRL's generation step,
    which re-enables checkpointing on *every* layer when it finds it on, leaves it alone; and
    the model-wide switch stays off, so nothing makes the inputs require grad."""
    if not config.activation_checkpointing:
        yield 0
        return
    from functools import partial

    import torch
    from torch.utils.checkpoint import checkpoint

    layers = backprop_layers(model, config)
    for layer in layers:
        layer._gradient_checkpointing_func = partial(checkpoint, use_reentrant=False)

    def switch(on: bool) -> None:
        for layer in layers:
            layer.gradient_checkpointing = on

    hooks = [
        model.register_forward_pre_hook(lambda module, args: switch(module.training and torch.is_grad_enabled())),
        model.register_forward_hook(lambda module, args, output: switch(False)),
    ]
    try:
        yield len(layers)
    finally:
        for hook in hooks:
            hook.remove()
        switch(False)


@contextmanager
def lm_head_token_chunk(tokens: int | None) -> Iterator[None]:
    """TRL's chunked LM-head kernels score ``tokens`` positions per tile while training (their
    module constant, restored afterwards); None leaves TRL's."""
    if tokens is None:
        yield
        return
    from trl.kernels import chunked_divergence, chunked_logprob

    modules = (chunked_logprob, chunked_divergence)
    if not all(hasattr(m, "TOKEN_CHUNK_SIZE") for m in modules):
        raise ValueError("this TRL has no trl.kernels TOKEN_CHUNK_SIZE: pass lm_head_token_chunk=None")
    saved = [m.TOKEN_CHUNK_SIZE for m in modules]
    for m in modules:
        m.TOKEN_CHUNK_SIZE = tokens
    try:
        yield
    finally:
        for m, value in zip(modules, saved):
            m.TOKEN_CHUNK_SIZE = value


@contextmanager
def lm_head_labelled_only(on: bool) -> Iterator[None]:
    """TRL's fused LM head scores only the labelled positions while training, as it does on
    CUDA. In ``trl.trainer.utils`` the name ``_use_triton`` decides only that; the kernels keep
    their own copy, so on CPU they still run as torch tiles. ``on=False`` leaves TRL's choice."""
    if not on:
        yield
        return
    from trl.trainer import utils

    if not hasattr(utils, "_use_triton"):
        raise ValueError("this TRL has no trl.trainer.utils._use_triton: pass lm_head_labelled_only=False")
    saved = utils._use_triton
    utils._use_triton = lambda device: True
    try:
        yield
    finally:
        utils._use_triton = saved


def _common_args(config: ControllerConfig, output_dir: Path, seed: int, progress: bool, device: str) -> dict[str, Any]:
    """TrainingArguments shared by SFT and GRPO, with the CPU pitfalls handled."""
    bf16 = config.model.dtype == "bfloat16" and device != "cpu"
    return dict(
        output_dir=str(output_dir),
        bf16=bf16,  # TRL's default (True) fails on CPU
        fp16=False,
        activation_checkpointing=False,  # TRL turns it on by default; pointless for small models
        use_cpu=device == "cpu",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=seed,
        data_seed=seed,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
    )


def _quiet(trainer: Any, progress: bool) -> None:
    """Without a progress bar Trainer prints every log dict; the logs are kept in
    ``trainer.state.log_history`` instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    if not progress:
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)


def _merge_lora(model: Any) -> Any:
    from peft import PeftModel

    return model.merge_and_unload() if isinstance(model, PeftModel) else model


def _train(trainer: Any, config: ControllerConfig, progress: bool) -> tuple[Any, list[dict[str, Any]]]:
    """Run a TRL trainer; returns its (LoRA-merged, eval-mode) model and log history."""
    _quiet(trainer, progress)
    with (
        checkpointed_layers(trainer.model, config),
        lm_head_token_chunk(config.lm_head_token_chunk),
        lm_head_labelled_only(config.lm_head_labelled_only),
    ):
        trainer.train()
    model = _merge_lora(trainer.model)
    # TRL's fused LM head (trl.trainer.utils.add_fused_lm_head) sets model.forward to a closure
    # over the model's own bound forward: a copy of the model would run the original's weights.
    # Training is over, so the class's forward comes back.
    vars(model).pop("forward", None)
    model.eval()
    return model, list(trainer.state.log_history)


# ---------------------------------------------------------------------- SFT
def _prompt_fields(builder: PromptBuilder, tournament: Tournament, rows: np.ndarray) -> tuple[Any, Any, Any]:
    """Questions, difficulties (None unless shown) and benchmark names of ``rows``."""
    q = tournament.queries
    difficulty = q["difficulty"].to_numpy(dtype=float)[rows] if builder.include_difficulty else None
    return q["prompt"].to_numpy(dtype=object)[rows], difficulty, q["benchmark"].astype(str).to_numpy(dtype=object)[rows]


def prompts_for_rows(builder: PromptBuilder, tournament: Tournament, rows: np.ndarray, chat: bool) -> list[Any]:
    questions, difficulty, benchmarks = _prompt_fields(builder, tournament, rows)
    return builder.prompts(questions, difficulty, chat, benchmarks)


def user_texts(builder: PromptBuilder, tournament: Tournament, rows: np.ndarray) -> list[str]:
    """The query part of each row's prompt (what the SFT teacher reads, as the controller does)."""
    questions, difficulty, benchmarks = _prompt_fields(builder, tournament, rows)
    d = [None] * len(rows) if difficulty is None else difficulty
    return [builder.user(q, x, b) for q, x, b in zip(questions, d, benchmarks)]


def sft_records(
    builder: PromptBuilder,
    tournament: Tournament,
    rows: np.ndarray,
    targets: np.ndarray,
    chat: bool,
) -> list[dict[str, Any]]:
    """TRL prompt-completion rows (conversational when ``chat``): loss on the completion only."""
    prompts = prompts_for_rows(builder, tournament, rows, chat)
    records = []
    for prompt, row, target in zip(prompts, rows, targets):
        text = target_completion(builder, int(target), tournament.correct[row], tournament.energy_j[row])
        completion: Any = [{"role": "assistant", "content": text}] if chat else text
        records.append({"prompt": prompt, "completion": completion})
    return records


def run_sft(
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    config: ControllerConfig,
    output_dir: Path,
    seed: int,
    progress: bool,
) -> tuple[Any, list[dict[str, Any]]]:
    """Fine-tune on ``records``; returns the (LoRA-merged) model and TRL's log history."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    s = config.sft
    device = str(model.device.type)
    args = SFTConfig(
        **_common_args(config, output_dir, seed, progress, device),
        max_steps=-1 if s.max_steps is None else s.max_steps,  # -1: TRL runs num_train_epochs
        num_train_epochs=s.epochs,
        per_device_train_batch_size=s.batch_size,
        learning_rate=s.learning_rate,
        warmup_steps=s.warmup_steps,
        lr_scheduler_type="constant_with_warmup",  # short runs: no decay to zero at the end
        max_length=s.max_length,
        completion_only_loss=True,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        peft_config=lora_config(config.lora, model),
    )
    return _train(trainer, config, progress)


# ---------------------------------------------------------------------- GRPO
@dataclass
class RoutingReward:
    """TRL reward function: parse each completion, return the gated reward of the chosen
    model's logged outcome (read from the row's outcome columns) or the invalid penalty.

    ``history`` keeps every call (training step, actions, rewards) for the selection logs.
    """

    reward: Reward
    model_ids: list[str]
    centering: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    __name__: str = "routing_reward"  # TRL names the reward's log columns after it

    @property
    def k(self) -> int:
        return len(self.model_ids)

    def score(self, completions: Sequence[Any], outcomes: Outcomes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(actions, rewards, valid)`` of completions against their rows' outcomes."""
        matrix = self.reward(outcomes).total
        invalid = np.full(len(completions), self.reward.invalid_penalty)
        if self.centering:
            # Shift every reward of a row, the invalid penalty included, so invalid stays worst.
            mean = matrix.mean(axis=1)
            matrix = matrix - mean[:, None]
            invalid = invalid - mean
        actions = parse_choices(completions, self.k)
        scored = score_actions(matrix, outcomes, actions, self.reward.invalid_penalty)
        valid = scored.valid
        rewards = np.where(valid, scored.rewards, invalid)
        return actions, rewards, valid

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        correct: Sequence[Sequence[float]],
        energy_j: Sequence[Sequence[float]],
        latency_s: Sequence[Sequence[float]],
        mean_power_w: Sequence[Sequence[float]],
        trainer_state: Any = None,
        log_metric: Any = None,
        **_: Any,
    ) -> list[float]:
        arrays = [np.asarray(x, dtype=np.float64) for x in (correct, energy_j, latency_s, mean_power_w)]
        for name, a in zip(OUTCOME_FIELDS, arrays):
            if a.shape != (len(completions), self.k):
                raise ValueError(f"reward column {name!r} has shape {a.shape}, expected ({len(completions)}, {self.k})")
        outcomes = Outcomes(*arrays)
        actions, rewards, valid = self.score(completions, outcomes)
        step = int(getattr(trainer_state, "global_step", len(self.history)))
        counts = np.bincount(actions[valid], minlength=self.k)
        # The reward minus the row's mean over the K models (a uniform random route) varies
        # far less from step to step than the raw reward, which mostly tracks how hard the
        # step's few questions were: the readable training curve.
        # Centred rewards already are that difference.
        vs_random = rewards if self.centering else rewards - self.reward(outcomes).total.mean(axis=1)
        stats = {
            "reward_vs_random": float(vs_random.mean()),
            "valid_rate": float(valid.mean()),
            "entropy": normalised_entropy(counts),
            "top1_share": float(counts.max() / len(actions)) if len(actions) else math.nan,
        }
        self.history.append({"step": step, "actions": actions, "rewards": rewards, "valid": valid, **stats})
        if log_metric is not None:
            for name, value in stats.items():
                log_metric(f"route/{name}", value)
            for k, model_id in enumerate(self.model_ids):
                log_metric(f"route/share/{model_id}", float(counts[k] / len(actions)))
        return rewards.tolist()


def grpo_records(builder: PromptBuilder, tournament: Tournament, rows: np.ndarray, chat: bool) -> list[dict[str, Any]]:
    """GRPO rows: the prompt plus the query's ``[K]`` outcome columns for the reward."""
    prompts = prompts_for_rows(builder, tournament, rows, chat)
    outcomes = tournament.outcomes(rows)
    return [
        {
            "prompt": prompt,
            "row": int(row),
            **{name: getattr(outcomes, name)[i].tolist() for name in OUTCOME_FIELDS},
        }
        for i, (prompt, row) in enumerate(zip(prompts, rows))
    ]


def keep_spread_groups(batch: dict[str, Any], group_size: int, keep: int) -> dict[str, Any]:
    """TRL's scored generation batch cut to its first ``keep`` groups whose advantages are not
    all zero (all groups of zero spread: the first ``keep`` groups, so a step still runs), with
    ``num_items_in_batch`` recounted and ``groups_trained`` added."""
    import torch

    advantages = batch["advantages"]
    n = advantages.shape[0]
    spread = advantages.reshape(n // group_size, -1).abs().amax(dim=1) > 1e-8
    groups = torch.nonzero(spread).flatten()[:keep]
    if len(groups) == 0:
        groups = torch.arange(min(keep, n // group_size))
    rows = (groups[:, None] * group_size + torch.arange(group_size)).flatten().to(advantages.device)
    out = {k: v[rows] if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == n else v for k, v in batch.items()}
    mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = mask.sum().to(batch["num_items_in_batch"].dtype)
    out["groups_trained"] = int(spread[groups].sum())
    return out


class SpreadGroupsMixin:
    """Put before ``GRPOTrainer``: after TRL samples and scores a step's groups, only the first
    ``keep_groups`` with reward spread reach the loss (``keep_spread_groups``); the share of
    groups with spread trained is logged as ``groups_with_spread``."""

    keep_groups: int

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        batch = keep_spread_groups(super()._generate_and_score_completions(inputs), self.num_generations, self.keep_groups)
        self._metrics["train"]["groups_with_spread"].append(batch.pop("groups_trained") / self.keep_groups)
        return batch


def kl_coefficient(g: GRPOSettings, reward_matrix: np.ndarray) -> float:
    """TRL's beta: ``g.beta`` in nats, or times the mean per-query range of the reward."""
    if g.beta_units == "nats":
        return g.beta
    return g.beta * float(np.ptp(reward_matrix, axis=1).mean())


def run_grpo(
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    reward_fn: RoutingReward,
    config: ControllerConfig,
    output_dir: Path,
    seed: int,
    progress: bool,
    beta: float,
) -> tuple[Any, list[dict[str, Any]]]:
    """GRPO from ``model`` (the SFT checkpoint) with TRL's KL coefficient ``beta``; returns the
    (merged) model and TRL's logs.

    KL-GRPO without LoRA: TRL rebuilds the reference from ``config._name_or_path``, so the
    SFT weights are saved first and the policy's config points at them.
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    g = config.grpo
    device = str(model.device.type)
    peft_config = lora_config(config.lora, model)
    if beta > 0 and peft_config is None:
        sft_dir = output_dir / "sft-reference"
        model.save_pretrained(sft_dir)
        tokenizer.save_pretrained(sft_dir)
        model.config._name_or_path = str(sft_dir)
    completions_per_step = g.oversample * g.prompts_per_step * g.num_generations
    sampled = g.oversample * g.prompts_per_step
    if len(records) < sampled:  # TRL would find no full batch and silently train nothing
        records = (records * math.ceil(sampled / len(records)))[:sampled]
    args = GRPOConfig(
        **_common_args(config, output_dir, seed, progress, device),
        max_steps=g.max_steps,
        per_device_train_batch_size=completions_per_step,
        gradient_accumulation_steps=1,  # one generation round per optimizer step
        num_generations=g.num_generations,
        learning_rate=g.learning_rate,
        lr_scheduler_type="constant",
        beta=beta,
        temperature=g.temperature,
        scale_rewards=g.scale_rewards,
        loss_type=g.loss_type,
        max_completion_length=config.max_completion_length,
        log_completions=False,
    )
    trainer_class = GRPOTrainer
    if g.oversample > 1:
        trainer_class = type("SpreadGroupsGRPOTrainer", (SpreadGroupsMixin, GRPOTrainer), {"keep_groups": g.prompts_per_step})
    trainer = trainer_class(
        model=model,
        reward_funcs=[reward_fn],
        args=args,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    return _train(trainer, config, progress)


# ---------------------------------------------------------------------- the pipeline
@dataclass
class TrainedController:
    model: Any
    tokenizer: Any
    builder: PromptBuilder
    chat: bool
    logs: dict[str, Any]
    validation_rows: np.ndarray  # training-split rows neither SFT nor GRPO read (empty: none carved)
    # The SFT model before GRPO, kept when it may replace the GRPO model (grpo.keep_sft_if_better
    # with validation rows): the agent values both on validation and routes by the better one.
    sft_model: Any = None


def _subsample(rows: np.ndarray, n: int | None, rng: np.random.Generator) -> np.ndarray:
    if n is None or n >= len(rows):
        return rng.permutation(rows)
    return rng.choice(rows, size=n, replace=False)


def sft_targets(
    config: ControllerConfig,
    builder: PromptBuilder,
    tournament: Tournament,
    reward: Reward,
    rows: np.ndarray,
    rng: np.random.Generator,
    codes: np.ndarray,
    n_benchmarks: int,
    seed: int,
) -> np.ndarray:
    """The SFT route of every row in ``rows`` under ``config.sft.targets`` (``codes``: the
    benchmark code of every row of ``tournament``)."""
    s = config.sft
    if s.targets == "sampled":
        return sampled_targets(tournament, reward, s.target_temperature, rng, rows=rows)
    if s.targets == "predicted":
        # The teacher reads what the controller reads: the query as its prompt shows it.
        return cross_fitted_targets(user_texts(builder, tournament, rows), reward.matrix(tournament, rows), codes[rows],
                                    n_benchmarks, s.target_ridge_alpha, s.target_folds, seed)
    return oracle_targets(tournament, reward, tie_break=s.tie_break, rows=rows)


def sft_reward(config: ControllerConfig, ctx: FitContext) -> Reward:
    """The reward SFT's targets maximise: GRPO's, unless ``sft.energy_coef`` names another lambda_e."""
    if config.sft.energy_coef is None:
        return rl_reward(config, ctx)
    return Reward("gated_rank", {"lambda_e": config.sft.energy_coef}, invalid_penalty=ctx.reward.invalid_penalty)


def rl_reward(config: ControllerConfig, ctx: FitContext) -> Reward:
    if config.grpo.reward_from_context:
        return ctx.reward
    return Reward("gated_rank", {"lambda_e": config.grpo.energy_coef}, invalid_penalty=ctx.reward.invalid_penalty)


def train_controller(config: ControllerConfig, ctx: FitContext, stage: str) -> TrainedController:
    """SFT, then (``stage="grpo"``) GRPO on the training split of ``ctx``."""
    import transformers

    if stage not in ("sft", "grpo"):
        raise ValueError(f"stage must be 'sft' or 'grpo', got {stage!r}")
    seed = ctx.seed if config.seed is None else config.seed
    progress = ctx.progress if config.progress is None else config.progress
    transformers.set_seed(seed)
    t = ctx.train_tournament  # rows 0..n_train-1 are the training split
    legend = ModelLegend.from_tournament(t)
    p = config.prompt
    if p.include_difficulty and not t.has_difficulty:
        raise ValueError(f"prompt.include_difficulty=True but tournament {t.card.name!r} has no difficulty column")
    builder = p.builder(legend)
    rng = np.random.default_rng(seed)
    logs: dict[str, Any] = {"config": config.to_dict(), "stage": stage, "seed": seed}
    codes = np.asarray(ctx.train_observations().benchmarks, dtype=np.int64)
    train_rows, validation_rows = np.arange(ctx.n_train), np.zeros(0, dtype=np.int64)
    parts = validation_parts(ctx) if config.holds_out_validation else None
    if parts is not None:  # None: too few rows to carve, so routing is chosen without validation
        train_rows, validation_rows = parts
    logs["validation_queries"] = int(len(validation_rows))

    tic = time.perf_counter()
    checkpoint = config.sft.checkpoint
    model, tokenizer = load_model(
        config.model, path=None if checkpoint is None else checkpoint_model_dir(checkpoint, legend)
    )
    chat = uses_chat(config.model, tokenizer)
    logs["load_s"] = time.perf_counter() - tic

    with tempfile.TemporaryDirectory(prefix="routing-gym-controller-", dir=config.output_dir) as scratch:
        scratch_dir = Path(scratch)
        # --- SFT
        sft_rows = _subsample(train_rows, config.sft.max_train_queries, rng)
        target_reward = sft_reward(config, ctx)
        targets = sft_targets(config, builder, t, target_reward, sft_rows, rng, codes, len(ctx.benchmarks), seed)
        tic = time.perf_counter()
        memo_key = sft_memo_key(config, ctx, seed, target_reward.describe())
        if checkpoint is not None:
            sft_log = []
            logs["sft_checkpoint"] = str(checkpoint)
        elif memo_key in SFT_MEMO:
            model, tokenizer, sft_log = recall_sft(memo_key, rng)
            logs["sft_shared"] = True
        elif config.sft.max_steps is None or config.sft.max_steps > 0:
            records = sft_records(builder, t, sft_rows, targets, chat)
            model, sft_log = run_sft(model, tokenizer, records, config, scratch_dir / "sft", seed, progress)
            remember_sft(memo_key, model, tokenizer, sft_log, rng)
        else:
            sft_log = []
        logs["sft_s"] = time.perf_counter() - tic
        if config.sft.save_to and checkpoint is None:
            save_controller(config.sft.save_to, model, tokenizer, "sft", config, chat, legend)
        logs["sft"] = {
            "n_queries": int(len(sft_rows)),
            "target_reward": target_reward.describe(),
            "target_mix": {
                m: float(s) for m, s in zip(legend.model_ids, np.bincount(targets, minlength=legend.k) / len(targets))
            },
            "loss": [float(e["loss"]) for e in sft_log if "loss" in e],
            "grad_norm": [float(e["grad_norm"]) for e in sft_log if "grad_norm" in e],
        }
        sft_model = None
        if stage == "grpo" and config.grpo.max_steps > 0:
            if config.grpo.keep_sft_if_better and len(validation_rows):
                sft_model = copy.deepcopy(model)  # GRPO trains (and merges LoRA into) model in place
            logs["grpo"] = _grpo_stage(model, tokenizer, builder, chat, config, ctx, train_rows, rng, seed, progress,
                                       scratch_dir)
            model = logs["grpo"].pop("model")
        logs["train_s"] = logs["sft_s"] + logs.get("grpo", {}).get("grpo_s", 0.0)
    return TrainedController(model, tokenizer, builder, chat, logs, validation_rows, sft_model)


def _probe(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    prompts: list[Any],
    chat: bool,
    config: ControllerConfig,
    matrix: np.ndarray,
    reward: Reward,
    when: str,
) -> dict[str, Any]:
    """The probe's exact numbers from one forward pass per query, for both decodings of the
    controller alone: the sampling policy's expected reward, selection mix (its mean choice
    probabilities) and top-1 share, and the greedy policy's (the letter ``choice_actions`` picks)."""
    probs = choice_probabilities(model, tokenizer, builder, prompts, chat, config.eval.batch_size, config.eval.prefix_cache)
    greedy = choice_actions(probs)
    valid = greedy[greedy >= 0]
    counts = np.bincount(valid, minlength=builder.legend.k)
    sampled_mix = probs.mean(axis=0)
    return {
        f"expected_reward_{when}": float(expected_choice_reward(probs, matrix, reward.invalid_penalty).mean()),
        f"choice_probs_{when}": sampled_mix.tolist(),
        f"sampled_top1_share_{when}": float(sampled_mix.max()),
        f"greedy_mix_{when}": {m: float(c / len(greedy)) for m, c in zip(builder.legend.model_ids, counts)},
        f"greedy_top1_share_{when}": float(counts.max() / len(greedy)),
        f"greedy_reward_{when}": float(
            np.where(greedy >= 0, matrix[np.arange(len(greedy)), np.maximum(greedy, 0)], reward.invalid_penalty).mean()
        ),
    }


def _grpo_stage(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    chat: bool,
    config: ControllerConfig,
    ctx: FitContext,
    train_rows: np.ndarray,
    rng: np.random.Generator,
    seed: int,
    progress: bool,
    scratch_dir: Path,
) -> dict[str, Any]:
    t = ctx.train_tournament
    g = config.grpo
    reward = rl_reward(config, ctx)
    rows = _subsample(train_rows, g.max_train_queries, rng)
    out: dict[str, Any] = {"reward": reward.describe()}
    if g.skip_flat_queries:
        spread = np.ptp(reward.matrix(t, rows), axis=1) > 0
        out["flat_queries_skipped"] = int((~spread).sum())
        rows = rows[spread] if spread.any() else rows
    out["n_queries"] = int(len(rows))
    beta = kl_coefficient(g, reward.matrix(t, rows))
    out["beta"] = beta  # TRL's coefficient
    probe = rows[: g.probe_queries] if builder.output_format == "choice" and g.probe_queries else None
    if probe is not None:
        try:
            choice_letter_ids(tokenizer, builder)
        except ValueError as exc:  # some tokenizers merge "Choice: X" differently: no exact probe
            out["probe_skipped"] = str(exc)
            probe = None
    if probe is not None:
        probe_prompts = prompts_for_rows(builder, t, probe, chat)
        matrix = reward.matrix(t, probe)
        out["probe_rows"] = probe.tolist()
        out["probe_random_route_reward"] = float(matrix.mean())  # uniform over the K models
        out["probe_oracle_reward"] = float(matrix.max(axis=1).mean())
        out.update(_probe(model, tokenizer, builder, probe_prompts, chat, config, matrix, reward, "before"))
    reward_fn = RoutingReward(reward, list(t.model_ids), centering=g.reward_centering)
    tic = time.perf_counter()
    model, history = run_grpo(
        model, tokenizer, grpo_records(builder, t, rows, chat), reward_fn, config, scratch_dir / "grpo", seed, progress,
        beta,
    )
    out["grpo_s"] = time.perf_counter() - tic
    out["steps"] = grpo_step_logs(history, reward_fn.model_ids)
    sampled = np.concatenate([h["actions"] for h in reward_fn.history]) if reward_fn.history else np.zeros(0, int)
    raw = np.concatenate([h["rewards"] for h in reward_fn.history]) if reward_fn.history else np.zeros(0)
    per_step = g.oversample * g.prompts_per_step * g.num_generations  # sampled, trained or not
    tracker = track_actions(sampled, t.n_models, raw, window=per_step, model_ids=list(t.model_ids))
    out["collapse"] = tracker.summary()
    if probe is not None:
        out.update(_probe(model, tokenizer, builder, probe_prompts, chat, config, matrix, reward, "after"))
    out["model"] = model
    return out
