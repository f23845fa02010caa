"""Training reports of the text controller: one row per GRPO step (``grpo_step_logs``: TRL's
reward statistics merged with the routing statistics) and the files ``write_training_report``
writes from a fit's logs (``grpo_steps.csv``, the reward and selection plots, ``summary.json``).

matplotlib and pandas are imported inside functions only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def grpo_step_logs(log_history: list[dict[str, Any]], model_ids: Sequence[str]) -> list[dict[str, Any]]:
    """One row per GRPO step: TRL's reward statistics merged with the routing statistics."""
    rows = []
    for entry in log_history:
        if "reward" not in entry or "step" not in entry:
            continue
        row = {
            "step": int(entry["step"]),
            "mean_reward": float(entry["reward"]),
            "reward_std": float(entry.get("reward_std", math.nan)),
            "frac_reward_zero_std": float(entry.get("frac_reward_zero_std", math.nan)),  # of the groups sampled
            # groups with spread trained / grpo.prompts_per_step (grpo.oversample >= 2 only)
            "groups_with_spread": float(entry.get("groups_with_spread", math.nan)),
            "reward_vs_random": float(entry.get("route/reward_vs_random", math.nan)),
            "valid_rate": float(entry.get("route/valid_rate", math.nan)),
            "entropy": float(entry.get("route/entropy", math.nan)),
            "top1_share": float(entry.get("route/top1_share", math.nan)),
            "kl": float(entry.get("kl", math.nan)),
            "grad_norm": float(entry.get("grad_norm", math.nan)),  # of the step's loss: a precise run fingerprint
            "completion_length": float(entry.get("completions/mean_length", math.nan)),
        }
        for model_id in model_ids:
            row[f"share_{model_id}"] = float(entry.get(f"route/share/{model_id}", math.nan))
        rows.append(row)
    return rows


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

    from routing_gym.eval.core.plots import distinct_colours

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
        for key in ("valid_rate", "entropy", "top1_share", "frac_reward_zero_std", "groups_with_spread"):
            if steps[key].notna().any():
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
