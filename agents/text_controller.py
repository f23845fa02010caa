"""The text controller as registered agents: a small LM reads the question and writes its
routing choice (the reference paper's router).

- ``sft``: supervised fine-tuning toward the oracle route (``gated_rank``, lambda_e = 0.5) or
  reward-weighted routes (``sft.targets``);
- ``grpo``: SFT, then GRPO on rewards replayed from the tournament under the context's reward;
- ``kl-grpo``: the same with a KL penalty (``beta = 0.04``) toward the SFT model.

Every option of ``ControllerConfig`` is a keyword (``make_agent("grpo", grpo_max_steps=50,
format="rationale", model="Qwen/Qwen2.5-1.5B-Instruct", dtype="bfloat16")``), and
``preset="paper"`` selects the paper's scale (``controller_config.PRESETS``). Held-out routing
is greedy: for the choice format the most probable letter from one forward pass per query
(``eval.choice_forward``), else decoded; each ``act_batch`` records the controller's own cost per query in
``overhead_`` (prompt and generated tokens, decode seconds, and joules when an energy meter
is available), which ``routing-gym compare`` reads through ``overhead``.

torch, transformers and TRL are imported only when an agent is fitted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym_agents.base import Agent, FitContext
from routing_gym_agents.controller_config import ControllerConfig
from routing_gym_agents.controller_prompt import ModelLegend, PromptBuilder, parse_choices
from routing_gym_agents.registry import register_agent

KL_GRPO_BETA = 0.04


@register_agent("sft", stage="sft")
@register_agent("grpo", stage="grpo")
@register_agent("kl-grpo", stage="grpo", grpo_beta=KL_GRPO_BETA)
class TextControllerAgent(Agent):
    """SFT -> GRPO / KL-GRPO text controller (TRL). See ``controller_trainer`` for the recipe."""

    name = "text-controller"
    feedback = "full"  # SFT targets and replayed GRPO rewards read the whole training table
    ray_resources = {"num_gpus": 1.0}  # what compare's executors ask for per cell (trains a language model)
    # Audited like every agent (seeded: transformers.set_seed and TRL's seed/data_seed): the audit
    # repeats the cell's fit and act, doubling its cost (experiments/results/audit-cost).

    def __init__(self, stage: str = "sft", config: ControllerConfig | None = None, **overrides: Any) -> None:
        if stage not in ("sft", "grpo"):
            raise ValueError(f"stage must be 'sft' or 'grpo', got {stage!r}")
        self.stage = stage
        self.config = ControllerConfig.from_kwargs(config, **overrides)
        # The prompt may show the generator's latent difficulty: privileged, so declared.
        self.privileged = frozenset({"difficulty"}) if self.config.prompt.include_difficulty else frozenset()
        self.model_: Any = None
        self.tokenizer_: Any = None
        self.builder_: PromptBuilder | None = None
        self.chat_: bool = True
        self.logs_: dict[str, Any] = {}
        self.overhead_: dict[str, Any] = {}
        self.completions_: list[str] = []
        self._router: Any = None  # routing_model(model_), made on first use

    # ------------------------------------------------------------------ training
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        from routing_gym_agents.controller_trainer import train_controller

        trained = train_controller(self.config, ctx, self.stage)
        self.model_, self.tokenizer_ = trained.model, trained.tokenizer
        self._router = None
        self.builder_, self.chat_ = trained.builder, trained.chat
        self.logs_ = trained.logs
        if self.config.report_dir:
            from routing_gym_agents.controller_report import write_training_report

            seed = trained.logs["seed"]  # one folder per seed: compare fits each seed anew
            write_training_report(trained.logs, Path(self.config.report_dir) / f"seed-{seed}", title=self.name)
        logs = dict(trained.logs)
        # Training-time cost (compare reports these as fit_overhead_<name>).
        logs["overhead"] = {k: logs[k] for k in ("load_s", "sft_s", "train_s") if k in logs}
        if "grpo" in logs:
            logs["overhead"]["grpo_s"] = logs["grpo"]["grpo_s"]
        return logs

    # ------------------------------------------------------------------ routing
    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self._routes_by_choice_forward():
            from routing_gym_agents.controller_inference import route_by_choice

            actions, self.overhead_ = route_by_choice(
                self._routing_model(),
                self.tokenizer_,
                self.builder_,
                self._prompts(batch),
                self.chat_,
                batch_size=self.config.eval.batch_size,
                meter=self.config.eval.meter,
                prefix_cache=self.config.eval.prefix_cache,
            )
            return actions
        completions = self.complete(batch)
        return parse_choices(completions, self.builder_.legend.k)

    def _routes_by_choice_forward(self) -> bool:
        """Choice format with ``eval.choice_forward``, and a tokenizer that writes each
        ``Choice: X`` as a shared prefix plus one letter token (else: greedy decoding)."""
        from routing_gym_agents.controller_inference import choice_letter_ids

        if self.config.prompt.output_format != "choice" or not self.config.eval.choice_forward:
            return False
        if self.builder_ is None:
            raise RuntimeError(f"{self.name}: call fit() (or load()) before routing")
        try:
            choice_letter_ids(self.tokenizer_, self.builder_)
        except ValueError:
            return False
        return True

    def _routing_model(self) -> Any:
        from routing_gym_agents.controller_model import routing_model

        if self._router is None:
            self._router = routing_model(self.model_, self.config.eval.dtype)
        return self._router

    def _prompts(self, batch: ObservationBatch) -> list[Any]:
        if self.model_ is None or self.builder_ is None:
            raise RuntimeError(f"{self.name}: call fit() (or load()) before routing")
        difficulty = batch.get("difficulty")
        return self.builder_.prompts(list(batch.texts), None if difficulty is None else difficulty.reshape(-1), self.chat_)

    def complete(self, batch: ObservationBatch) -> list[str]:
        """Greedy completions for ``batch``; also sets ``overhead_`` and ``completions_``."""
        from routing_gym_agents.controller_inference import generate_greedy

        prompts = self._prompts(batch)
        texts, overhead = generate_greedy(
            self.model_,
            self.tokenizer_,
            prompts,
            self.chat_,
            max_new_tokens=self.config.eval_max_new_tokens,
            batch_size=self.config.eval.batch_size,
            meter=self.config.eval.meter,
            prefix_cache=self.config.eval.prefix_cache,
            progress=bool(self.config.progress),
        )
        self.completions_ = texts
        self.overhead_ = overhead
        return texts

    @property
    def overhead(self) -> dict[str, Any]:
        """Per-query controller cost of the last ``act_batch`` (read by ``routing-gym compare``)."""
        return self.overhead_

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """A directory: the Hugging Face model and tokenizer plus ``controller.json``."""
        from routing_gym_agents.controller_model import save_controller

        if self.model_ is None or self.builder_ is None:
            raise RuntimeError(f"{self.name}: nothing to save before fit()")
        save_controller(
            path,
            self.model_,
            self.tokenizer_,
            self.stage,
            self.config,
            self.chat_,
            self.builder_.legend,
            name=self.name,
        )

    @classmethod
    def load(cls, path: str | Path) -> TextControllerAgent:
        from routing_gym_agents.controller_model import load_model

        path = Path(path)
        meta_file = path / "controller.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{path} is not a saved text controller (no controller.json)")
        meta = json.loads(meta_file.read_text())
        config = ControllerConfig.from_dict(meta["config"])
        agent = cls(stage=meta["stage"], config=config)
        agent.name = meta.get("name", agent.name)
        agent.model_, agent.tokenizer_ = load_model(config.model, path=str(path / "model"))
        agent.model_.eval()
        agent.chat_ = bool(meta["chat"])
        legend = ModelLegend(tuple(meta["legend"]["model_ids"]), tuple(float(p) for p in meta["legend"]["params_b"]))
        agent.builder_ = config.prompt.builder(legend)
        return agent
