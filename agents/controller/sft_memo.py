"""One SFT per process for the text controllers that share it.

compare's ``sft``, ``grpo`` and ``kl-grpo`` cells of one seed fine-tune the same model on the
same rows; the first to train remembers its SFT model here and the others start from a copy
(``train_controller``). The audit's process keeps its own memo, filled by its own fit on its
copy of the training split, so nothing passes from a comparison's run to its audit.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from routing_gym_agents.base import FitContext
    from routing_gym_agents.controller.config import ControllerConfig

# The last SFT of this process only: a model is ~0.5 GB.
SFT_MEMO: dict[str, tuple[Any, Any, list[dict[str, Any]], dict[str, Any]]] = {}


def sft_memo_key(config: ControllerConfig, ctx: FitContext, seed: int, target_reward: str) -> str:
    """Everything the SFT model depends on: the training split's content, the reward its targets
    maximise (``target_reward``, described) and its invalid penalty, the seed and every setting but
    GRPO's and evaluation's (``route`` decides which rows train)."""
    settings = {k: v for k, v in config.to_dict().items() if k not in ("grpo", "eval", "report_dir", "progress")}
    return json.dumps([ctx.train_tournament.fingerprint, target_reward, ctx.reward.invalid_penalty, seed, settings],
                      default=str)


def remember_sft(
    key: str, model: Any, tokenizer: Any, sft_log: list[dict[str, Any]], rng: np.random.Generator
) -> None:
    # The tokenizer too: TRL's trainers set fields of it (its padding side, for one).
    SFT_MEMO.clear()
    SFT_MEMO[key] = (copy.deepcopy(model), copy.deepcopy(tokenizer), sft_log, rng.bit_generator.state)


def recall_sft(key: str, rng: np.random.Generator) -> tuple[Any, Any, list[dict[str, Any]]]:
    """Copies of the remembered SFT model (GRPO trains it in place) and tokenizer, its log, and
    ``rng`` where the remembered run left it, so what follows draws as it would after training."""
    model, tokenizer, sft_log, state = SFT_MEMO[key]
    rng.bit_generator.state = state
    return copy.deepcopy(model), copy.deepcopy(tokenizer), sft_log
