"""The text controller is audited like every agent (issue 31): at a CI-sized budget its second
fit and act, in the audit's process, gives the same held-out actions (0 changed: the fit is
deterministic for a seed), so its row says "yes"."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
pytest.importorskip("torch")
pytest.importorskip("trl")

from routing_gym.eval.compare import CompareConfig, run_compare  # noqa: E402
from routing_gym.sources import resolve_tournament  # noqa: E402

MODELS = ["qwen2.5-0.5b", "qwen2.5-3b", "qwen2.5-7b", "deepseek-r1-distill-32b"]
# The tiny budget of tests/test_text_controller.py: LoRA learns the choice format in ~10 steps.
TINY = dict(prompt_max_question_chars=80, sft_batch_size=2, sft_learning_rate=2e-3, eval_batch_size=6,
            sft_max_steps=6, sft_max_train_queries=12)


def test_the_text_controller_passes_the_audit_at_a_tiny_budget():
    pool = resolve_tournament("paper-pool").subset(models=MODELS)
    tiny = pool.subset(rows=np.concatenate([pool.split_rows("train")[:24], pool.split_rows("test")[:12]]))
    result = run_compare(CompareConfig(tournament=tiny, agents=["sft"], seeds=1, n_bootstrap=50, progress=False,
                                       fixed_models=False, agent_kwargs={"sft": TINY}))
    assert not result.failures
    row = result.row("sft")
    assert row["audit"]["status"] == "passed" and row["audit"]["changed"] == 0 and row["audit"]["n"] == 12
    assert row["deployable_label"] == "yes"
    # What it costs: one more fit and act, plus the audit process's start (torch, the model).
    assert row["audit"]["seconds"] > 0.5 * row["fit_s"]
