"""The text controller as registered agents: a small LM reads the question and writes its
routing choice (the reference paper's router).

- ``sft``: supervised fine-tuning toward a cross-fitted, label-aware teacher's routes under the
  context's reward (``controller.teacher``), oracle routes or reward-weighted ones (``sft.targets``);
- ``grpo``: SFT, then GRPO on rewards replayed from the tournament under the context's reward;
- ``kl-grpo``: the same with a KL penalty toward the SFT model (``KL_GRPO_BETA``: 0.25 x the
  reward's mean range, or the paper's 0.04 nats under ``grpo.beta_units="nats"``).

Every option of ``ControllerConfig`` is a keyword (``make_agent("grpo", grpo_max_steps=50,
format="rationale", model="Qwen/Qwen2.5-1.5B-Instruct", dtype="bfloat16")``), and
``preset="paper"`` selects the paper's scale (``controller.config.PRESETS``). Held-out routing of
the choice format reads the letters' probabilities from one forward pass per query
(``eval.choice_forward``) and routes by ``controller.policy``: nested in the benchmark label, with
alpha and greedy or sampled decoding chosen on a validation part of train (``route``; the fit
logs and compare's ``fit_overhead_route_alpha`` / ``fit_overhead_route_sampling`` columns name
the choice); the rationale format is decoded greedily. Each ``act_batch`` records the
controller's own cost per query in
``overhead_`` (prompt and generated tokens, decode seconds, and joules when an energy meter
is available), which ``routing-gym compare`` reads through ``overhead``.

torch, transformers and TRL are imported only when an agent is fitted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym_agents.base import Agent, FitContext
from routing_gym_agents.controller.config import ControllerConfig
from routing_gym_agents.controller.policy import RoutePolicy, fit_overhead
from routing_gym_agents.controller.prompt import ModelLegend, PromptBuilder, parse_choices
from routing_gym_agents.registry import register_agent

# kl-grpo's coefficient by grpo.beta_units: a quarter of the reward's range makes the KL-regularised
# optimum pi_ref x exp(4 r / range), a real pull toward SFT; 0.04 nats is the paper's.
KL_GRPO_BETA = {"reward_range": 0.25, "nats": 0.04}


@register_agent("sft", stage="sft")
@register_agent("grpo", stage="grpo")
@register_agent("kl-grpo", stage="grpo", kl=True)
class TextControllerAgent(Agent):
    """SFT -> GRPO / KL-GRPO text controller (TRL). See ``controller.trainer`` for the recipe."""

    name = "text-controller"
    feedback = "full"  # SFT targets and replayed GRPO rewards read the whole training table
    ray_resources = {"num_gpus": 1.0}  # what compare's executors ask for per cell (trains a language model)
    # Audited like every agent (seeded: transformers.set_seed and TRL's seed/data_seed): the audit
    # repeats the cell's fit and act, doubling its cost (experiments/results/audit-cost).

    def __init__(self, stage: str = "sft", config: ControllerConfig | None = None, kl: bool = False,
                 **overrides: Any) -> None:
        """``kl``: KL-GRPO, at ``KL_GRPO_BETA`` of the config's ``grpo.beta_units`` unless a beta is given."""
        if stage not in ("sft", "grpo"):
            raise ValueError(f"stage must be 'sft' or 'grpo', got {stage!r}")
        self.stage = stage
        self.config = ControllerConfig.from_kwargs(config, **overrides)
        if kl and self.config.grpo.beta == 0.0:
            self.config.grpo.beta = KL_GRPO_BETA[self.config.grpo.beta_units]
        # The prompt may show the generator's latent difficulty: privileged, so declared.
        self.privileged = frozenset({"difficulty"}) if self.config.prompt.include_difficulty else frozenset()
        self.model_: Any = None
        self.tokenizer_: Any = None
        self.builder_: PromptBuilder | None = None
        self.chat_: bool = True
        self.logs_: dict[str, Any] = {}
        self.overhead_: dict[str, Any] = {}
        self.completions_: list[str] = []
        self.benchmarks_: list[str] = []  # the names behind the observations' benchmark codes
        self.policy_: RoutePolicy | None = None
        self._router: Any = None  # routing_model(model_), made on first use

    # ------------------------------------------------------------------ training
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        from routing_gym_agents.controller.trainer import train_controller

        trained = train_controller(self.config, ctx, self.stage)
        self.model_, self.tokenizer_ = trained.model, trained.tokenizer
        self._router = None
        self.builder_, self.chat_ = trained.builder, trained.chat
        self.benchmarks_ = list(ctx.benchmarks)
        self.logs_ = trained.logs
        self.logs_["route"] = self._fit_policy(ctx, trained.validation_rows, trained.sft_model)
        if self.config.report_dir:
            from routing_gym_agents.controller.report import write_training_report

            seed = trained.logs["seed"]  # one folder per seed: compare fits each seed anew
            write_training_report(trained.logs, Path(self.config.report_dir) / f"seed-{seed}", title=self.name)
        logs = dict(trained.logs)
        # Training-time cost (compare reports these as fit_overhead_<name>).
        logs["overhead"] = {k: logs[k] for k in ("load_s", "sft_s", "train_s") if k in logs}
        if "grpo" in logs:
            logs["overhead"]["grpo_s"] = logs["grpo"]["grpo_s"]
        logs["overhead"].update(fit_overhead(self.policy_))  # the chosen alpha and decoding, in the row
        if "grpo_kept" in self.logs_["route"]:  # 1: routes by the GRPO model, 0: by the SFT model
            logs["overhead"]["route_grpo_kept"] = float(self.logs_["route"]["grpo_kept"])
        return logs

    def _fit_policy(self, ctx: FitContext, validation_rows: np.ndarray, sft_model: Any = None) -> dict[str, Any]:
        """``policy_`` from the controller's probabilities on (up to ``route.max_validation_queries``
        of) ``validation_rows``, the training rows it did not train on (``controller.policy``).
        With ``sft_model`` (the model before GRPO; ``grpo.keep_sft_if_better``) both models are
        valued there and the one whose best policy is worth more routes (ties: the GRPO model)."""
        from routing_gym.fronts.hull import benchmark_means
        from routing_gym_agents.controller.inference import choice_probabilities
        from routing_gym_agents.controller.policy import choose_policy, keep_grpo, refit_label
        from routing_gym_agents.controller.trainer import prompts_for_rows

        r, seed = self.config.route, ctx.seed if self.config.seed is None else self.config.seed
        decodings = ("greedy", "sample") if r.decoding == "auto" else (r.decoding,)
        if not self._routes_by_choice_forward():
            self.policy_ = RoutePolicy(None, "greedy", seed)
            return {**self.policy_.describe(), "reason": "the rationale format (or no choice forward) decodes greedily"}
        codes = np.asarray(ctx.train_observations().benchmarks, dtype=np.int64)
        n_b = len(ctx.benchmarks)
        outcomes, rewards = ctx.train_outcomes(), ctx.train_reward_matrix()
        label, joules = benchmark_means(rewards, codes, n_b), benchmark_means(outcomes.energy_j, codes, n_b)
        if len(validation_rows) == 0:  # nothing to choose on: the label alone, as nested routers do
            self.policy_ = RoutePolicy(0.0, "greedy", seed, label, joules, np.zeros_like(label)) if r.label_nested \
                else RoutePolicy(None, decodings[0], seed)
            return {**self.policy_.describe(), "validation_queries": 0}
        rng = np.random.default_rng(seed)
        val = np.sort(rng.permutation(validation_rows)[: r.max_validation_queries])
        fit = np.setdiff1d(np.arange(ctx.n_train), validation_rows)
        tic = time.perf_counter()
        prompts = prompts_for_rows(self.builder_, ctx.train_tournament, val, self.chat_)
        fit_label = benchmark_means(rewards[fit], codes[fit], n_b)
        fit_joules = benchmark_means(outcomes.energy_j[fit], codes[fit], n_b)

        def choose(router: Any) -> tuple[RoutePolicy, dict[str, float]]:
            probs = choice_probabilities(router, self.tokenizer_, self.builder_, prompts, self.chat_,
                                         self.config.eval.batch_size, self.config.eval.prefix_cache)
            return choose_policy(probs, codes[val], rewards[val], fit_label, fit_joules, n_b, r.alphas, decodings,
                                 r.label_nested, ctx.reward.invalid_penalty, seed)

        chosen, values = choose(self._routing_model())
        out: dict[str, Any] = {}
        if sft_model is not None:
            from routing_gym_agents.controller.model import routing_model

            sft_router = routing_model(sft_model, self.config.eval.dtype)
            sft_chosen, sft_values = choose(sft_router)
            kept = keep_grpo(values, sft_values)
            out = {"validation_value_grpo": values, "validation_value_sft": sft_values, "grpo_kept": kept}
            if not kept:  # GRPO did worse on validation than the model it started from
                chosen, values = sft_chosen, sft_values
                self.model_, self._router = sft_model, sft_router
        self.policy_ = refit_label(chosen, label, joules)
        return {**self.policy_.describe(), "validation_value": values, "validation_queries": int(len(val)), **out,
                "validation_s": time.perf_counter() - tic}

    # ------------------------------------------------------------------ routing
    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self._routes_by_choice_forward():
            from routing_gym_agents.controller.inference import route_by_choice

            probs, self.overhead_ = route_by_choice(
                self._routing_model(),
                self.tokenizer_,
                self.builder_,
                self._prompts(batch),
                self.chat_,
                batch_size=self.config.eval.batch_size,
                meter=self.config.eval.meter,
                prefix_cache=self.config.eval.prefix_cache,
            )
            return self.policy_.act(probs, self._codes(batch), batch.texts)
        completions = self.complete(batch)
        return parse_choices(completions, self.builder_.legend.k)

    def _routes_by_choice_forward(self) -> bool:
        """Choice format with ``eval.choice_forward``, and a tokenizer that writes each
        ``Choice: X`` as a shared prefix plus one letter token (else: greedy decoding)."""
        from routing_gym_agents.controller.inference import choice_letter_ids

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
        from routing_gym_agents.controller.model import routing_model

        if self._router is None:
            self._router = routing_model(self.model_, self.config.eval.dtype)
        return self._router

    def _codes(self, batch: ObservationBatch) -> np.ndarray:
        codes = np.asarray(batch.benchmarks, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= len(self.benchmarks_)):
            raise ValueError(f"{self.name}: benchmark codes {codes.min()}..{codes.max()} outside the "
                             f"{len(self.benchmarks_)} benchmark names of its tournament")
        return codes

    def _prompts(self, batch: ObservationBatch) -> list[Any]:
        if self.model_ is None or self.builder_ is None:
            raise RuntimeError(f"{self.name}: call fit() (or load()) before routing")
        difficulty = batch.get("difficulty")
        # Every code names a benchmark of the tournament, trained on or not (unseen ones included).
        names = [self.benchmarks_[c] for c in self._codes(batch)]
        return self.builder_.prompts(list(batch.texts), None if difficulty is None else difficulty.reshape(-1),
                                     self.chat_, names)

    def complete(self, batch: ObservationBatch) -> list[str]:
        """Greedy completions for ``batch``; also sets ``overhead_`` and ``completions_``."""
        from routing_gym_agents.controller.inference import generate_greedy

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
        from routing_gym_agents.controller.model import save_controller

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
            routing={"benchmarks": self.benchmarks_, "policy": self.policy_.to_dict()},
        )

    @classmethod
    def load(cls, path: str | Path) -> TextControllerAgent:
        from routing_gym_agents.controller.model import load_model

        path = Path(path)
        meta_file = path / "controller.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{path} is not a saved text controller (no controller.json)")
        meta = json.loads(meta_file.read_text())
        if meta.get("routing") is None:
            raise ValueError(f"{path} holds a model before routing was fitted (sft.save_to): pass it as sft_checkpoint")
        config = ControllerConfig.from_dict(meta["config"])
        agent = cls(stage=meta["stage"], config=config)
        agent.name = meta.get("name", agent.name)
        agent.model_, agent.tokenizer_ = load_model(config.model, path=str(path / "model"))
        agent.model_.eval()
        agent.chat_ = bool(meta["chat"])
        legend = ModelLegend(tuple(meta["legend"]["model_ids"]), tuple(float(p) for p in meta["legend"]["params_b"]))
        agent.builder_ = config.prompt.builder(legend)
        agent.benchmarks_ = list(meta["routing"]["benchmarks"])
        agent.policy_ = RoutePolicy.from_dict(meta["routing"]["policy"])
        return agent
