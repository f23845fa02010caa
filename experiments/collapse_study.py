"""Routing-collapse study: when does an RL router stop routing?

Trains any registered bandit-feedback agent (``--agent``; PPO by default) through RoutingEnv over a grid of

- the reward's **energy coefficient**: zero, three gated values (below the value at which a
  correct route could score at or below a wrong one) and one **ungated** value beyond it
  (``allow_ungated=True``);
- the **entropy coefficient** of the policy (agents that take ``ent_coef``: PPO, A2C);
- the **reward variant**: ``gated_rank`` by default, or every registered reward that has an
  energy coefficient (``--rewards all``; the research variants register on import);

and reports, per setting, whether training collapsed (a ``CollapseTracker`` on the training
env's step hooks, so every agent is tracked the same way; ``routing_gym.eval.collapse``: the
first decision at which one model held >= ``threshold`` of the last ``window`` decisions),
onto which model (and whether it is the pool's cheapest or largest), how fast, where the
selection mix ended, and what the greedy policy does on held-out queries next to the oracle
of the same reward (an oracle that itself sends most queries to one model means that
concentration is warranted, not a failure).

Outputs under ``--out`` (default ``experiments/results/collapse/<tournament>/``):
``results.csv`` (one row per run), ``table.md`` (one row per setting, seeds pooled),
``summary.png`` (final top-1 share per setting), ``shares_<reward>.png`` (selection shares
over training, first seed) and ``runs/*.csv`` (per-window diagnostics of every run).

    OMP_NUM_THREADS=1 python experiments/collapse_study.py                 # default, ~2-4 min
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --rewards all --seeds 0 1 2
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --tournament path/to/zeroeval_tournament
    OMP_NUM_THREADS=1 python experiments/collapse_study.py --agent linucb --agent-kwargs '{"alpha": 0.5}' 
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from routing_gym.envs import REWARDS, Reward, RoutingEnv, get_reward, oracle_targets
from routing_gym.envs.rewards import check_gate_on_data
from routing_gym.eval.collapse import CollapseTracker, normalised_entropy, plot_selection_shares
from routing_gym.sources import resolve_tournament
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, ObservationBatch, make_agent

RESULTS = Path(__file__).resolve().parent / "results" / "collapse"
# Names under which reward functions take their price of energy (first match wins).
ENERGY_COEFFICIENTS = ("lambda_e", "mu", "lambda_energy", "energy_coef")
# Energy coefficients as fractions of the gate boundary b: zero, three gated, one ungated.
GATE_FRACTIONS = (0.0, 1 / 6, 0.5, 0.97, 4 / 3)


@dataclass
class StudyConfig:
    """The sweep; defaults run in a few minutes on 2 cores."""

    tournaments: list[str] = field(default_factory=lambda: ["collapse-prone"])
    rewards: list[str] = field(default_factory=lambda: ["gated_rank"])  # or ["all"]
    ent_coefs: list[float] = field(default_factory=lambda: [0.0, 0.01, 0.05])
    gate_fractions: list[float] = field(default_factory=lambda: list(GATE_FRACTIONS))
    agent: str = "ppo"  # any registered agent with bandit feedback
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    timesteps: int = 5000  # online decisions per run, for agents that take total_timesteps
    seeds: list[int] = field(default_factory=lambda: [0])
    window: int = 250  # decisions per collapse window
    threshold: float = 0.9  # top-1 share that counts as collapse
    feature_dim: int = 32
    out: Path | None = None  # default RESULTS / <tournament name>


@dataclass(frozen=True)
class Setting:
    reward: str
    coefficient: str  # the energy coefficient's name
    value: float
    gated: bool
    ent_coef: float  # NaN for agents without an entropy coefficient

    @property
    def label(self) -> str:
        gate = "" if self.gated else " ungated"
        return f"{self.reward} {self.coefficient}={self.value:.3g}{gate}, ent={self.ent_coef:g}"

    @property
    def tag(self) -> str:
        return f"{self.reward}__{self.coefficient}{self.value:.4g}__ent{self.ent_coef:g}".replace(".", "p")


def agent_options(name: str) -> set[str]:
    """Keyword options the registered agent's constructor takes (following ``**kwargs`` up the classes)."""
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    if name not in AGENTS:
        from routing_gym_agents.registry import unknown_agent_error

        raise unknown_agent_error(name)
    options: set[str] = set()
    for cls in AGENTS[name][0].__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        options |= {p for p in params if p != "self" and params[p].kind is not inspect.Parameter.VAR_KEYWORD}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            break
    return options


def load_reward_variants() -> None:
    """Register the research variants when that module exists in this checkout."""
    try:
        importlib.import_module("routing_gym.envs.reward_variants")
    except ModuleNotFoundError as exc:
        if exc.name != "routing_gym.envs.reward_variants":
            raise


def energy_coefficient(reward: str) -> str | None:
    defaults = get_reward(reward).defaults
    return next((name for name in ENERGY_COEFFICIENTS if name in defaults), None)


def gate_boundary(reward: str, coefficient: str, tournament: Tournament, split: str = "train") -> float:
    """Smallest energy coefficient (others at 0) at which the gate breaks.

    Analytical when the reward registers a gate; otherwise found on the training data
    (some query's correct route no longer beats every wrong one). Bisection assumes the gate
    holds below the boundary and breaks above it, true for every energy price here.
    """
    entry = get_reward(reward)
    rows = tournament.split_rows(split)
    others = {k: 0.0 for k in entry.defaults if k.startswith("lambda_") and k != coefficient}

    def broken(value: float) -> bool:
        coefficients = {**others, coefficient: value}
        if entry.gate is not None:
            return entry.gate(**coefficients) is not None
        matrix = Reward(reward, coefficients, allow_ungated=True).matrix(tournament, rows)
        return len(check_gate_on_data(matrix, tournament.correct[rows])) > 0

    if broken(0.0):
        raise ValueError(f"reward {reward!r} breaks its gate even with {coefficient}=0")
    high = 1e-6
    while not broken(high):
        high *= 2
        if high > 1e9:
            raise ValueError(f"reward {reward!r}: no value of {coefficient} breaks the gate; give values by hand")
    low = high / 2 if high > 1e-6 else 0.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (low, mid) if broken(mid) else (mid, high)
    return high


def settings_for(config: StudyConfig, tournament: Tournament) -> tuple[list[Setting], list[str]]:
    """The grid, plus a note for every reward left out (no energy coefficient)."""
    load_reward_variants()
    names = sorted(REWARDS) if config.rewards == ["all"] else config.rewards
    settings, notes = [], []
    for name in names:
        coefficient = energy_coefficient(name)
        if coefficient is None:
            notes.append(f"{name}: skipped, no energy coefficient (looked for {', '.join(ENERGY_COEFFICIENTS)})")
            continue
        boundary = gate_boundary(name, coefficient, tournament)
        notes.append(f"{name}: gate breaks at {coefficient} = {boundary:.4g}")
        for fraction in config.gate_fractions:
            value = float(f"{fraction * boundary:.4g}")
            for ent in config.ent_coefs if "ent_coef" in agent_options(config.agent) else [math.nan]:
                settings.append(Setting(name, coefficient, value, value < boundary, float(ent)))
    return settings, notes


def model_roles(tournament: Tournament, split: str = "train") -> dict[str, str]:
    """Which model is the pool's cheapest (mean joules), largest and most accurate."""
    summary = tournament.model_summary(tournament.split_rows(split))
    roles: dict[str, list[str]] = {m: [] for m in tournament.model_ids}
    roles[summary.loc[summary["mean_energy_j"].idxmin(), "model_id"]].append("cheapest")
    roles[summary.loc[summary["params_b"].idxmax(), "model_id"]].append("largest")
    roles[summary.loc[summary["accuracy"].idxmax(), "model_id"]].append("most accurate")
    return {m: "/".join(r) for m, r in roles.items()}


def short_name(model_id: str) -> str:
    """A model id short enough for a heatmap cell."""
    name = model_id.split("@")[0]
    for suffix in ("-Instruct", "-instruct", "-Chat", "-it"):
        name = name.removesuffix(suffix)
    return name if len(name) <= 14 else name[:13] + "~"


def top1(actions: np.ndarray, model_ids: list[str]) -> tuple[str, float, float]:
    counts = np.bincount(actions[(actions >= 0) & (actions < len(model_ids))], minlength=len(model_ids))
    return model_ids[int(counts.argmax())], float(counts.max() / len(actions)), normalised_entropy(counts)


def run_one(tournament: Tournament, setting: Setting, seed: int, config: StudyConfig) -> tuple[dict[str, Any], CollapseTracker]:
    reward = Reward(setting.reward, {setting.coefficient: setting.value}, allow_ungated=not setting.gated)
    options = agent_options(config.agent)
    wanted: dict[str, Any] = {"total_timesteps": config.timesteps, "ent_coef": setting.ent_coef,
                              "collapse_window": config.window, "collapse_threshold": config.threshold}
    # SB3 agents take their feature options as a dict; the bandits take a text dim.
    wanted.update({"features": {"dim": config.feature_dim}} if "total_timesteps" in options else {"dim": config.feature_dim})
    kwargs = {k: v for k, v in wanted.items() if k in options and not (k == "ent_coef" and math.isnan(v))}
    agent = make_agent(config.agent, **{**kwargs, **config.agent_kwargs})
    if agent.feedback != "bandit":
        raise SystemExit(f"collapse_study: agent {config.agent!r} learns from the full table, not online; pick a bandit-feedback agent")
    # The tracker rides on the training env's step hooks: any agent is tracked the same way.
    tracker = CollapseTracker.for_tournament(tournament, window=config.window, threshold=config.threshold)
    tic = time.perf_counter()
    agent.fit(FitContext(tournament, reward, seed=seed, step_hooks=[tracker]))
    train_seconds = time.perf_counter() - tic
    summary = tracker.summary()

    test_rows = tournament.split_rows("test")
    env = RoutingEnv(tournament=tournament, split="test", reward=setting.reward, coefficients=reward.coefficients,
                     allow_ungated=reward.allow_ungated)
    actions = agent.act_batch(ObservationBatch.from_tournament(tournament, test_rows))
    metrics = env.evaluate(actions).metrics()
    oracle = oracle_targets(tournament, reward, rows=test_rows)
    ids = tournament.model_ids
    test_model, test_share, test_entropy = top1(actions, ids)
    oracle_model, oracle_share, _ = top1(oracle, ids)
    steps = tracker.n_steps
    row = {
        "reward": setting.reward,
        "coefficient": setting.coefficient,
        "value": setting.value,
        "gated": setting.gated,
        "ent_coef": setting.ent_coef,
        "seed": seed,
        "steps": steps,
        "collapsed": summary["collapsed"],
        "collapse_step": summary["collapse_step"],
        "collapse_fraction": None if summary["collapse_step"] is None else (summary["collapse_step"] + 1) / steps,
        "collapsed_onto": summary["collapsed_onto"],
        "final_top1_model": summary["final_top1_model"],
        "final_top1_share": summary["final_top1_share"],
        "final_entropy": summary["final_entropy"],
        "final_effective_models": summary["final_effective_models"],
        "test_top1_model": test_model,
        "test_top1_share": test_share,
        "test_entropy": test_entropy,
        "test_accuracy": metrics["accuracy"],
        "test_mean_energy_j": metrics["mean_energy_j"],
        "test_reward": metrics["mean_reward"],
        "random_reward": float(env.reward_matrix.mean()),
        "oracle_reward": float(env.reward_matrix.max(axis=1).mean()),
        "oracle_top1_model": oracle_model,
        "oracle_top1_share": oracle_share,
        "train_seconds": train_seconds,
    }
    return row, tracker


def setting_table(results: pd.DataFrame, roles: dict[str, str], config: StudyConfig) -> pd.DataFrame:
    """One row per setting, seeds pooled: collapse rate, model, median speed, end state."""
    keys = ["reward", "coefficient", "value", "gated", "ent_coef"]
    rows = []
    for key, group in results.groupby(keys, sort=False):
        collapsed = group[group["collapsed"]]
        onto = collapsed["collapsed_onto"].mode()
        onto_model = onto.iloc[0] if len(onto) else ""
        rows.append(
            {
                **dict(zip(keys, key)),
                "seeds": len(group),
                "collapsed": f"{len(collapsed)}/{len(group)}",
                "greedy_collapsed": f"{int((group['test_top1_share'] >= config.threshold).sum())}/{len(group)}",
                "onto": f"{onto_model} ({roles[onto_model]})" if onto_model and roles.get(onto_model) else onto_model or "-",
                "collapse_step": int(collapsed["collapse_step"].median()) if len(collapsed) else None,
                "final_top1": f"{group['final_top1_model'].mode().iloc[0]} {group['final_top1_share'].mean():.2f}",
                "final_eff_models": group["final_effective_models"].mean(),
                "test_top1": f"{group['test_top1_model'].mode().iloc[0]} {group['test_top1_share'].mean():.2f}",
                "test_reward": group["test_reward"].mean(),
                "test_accuracy": group["test_accuracy"].mean(),
                "test_mean_energy_j": group["test_mean_energy_j"].mean(),
                "random_reward": group["random_reward"].mean(),
                "oracle_reward": group["oracle_reward"].mean(),
                "oracle_top1": f"{group['oracle_top1_model'].iloc[0]} {group['oracle_top1_share'].iloc[0]:.2f}",
            }
        )
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, tournament: Tournament, config: StudyConfig, notes: list[str], seconds: float) -> str:
    def fmt(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
        return str(value)

    header = [
        "reward", "energy coef", "gated", "ent coef", "collapsed (training)", "onto", "collapse step",
        "final top-1 (train)", "eff. models", "greedy collapsed", "held-out top-1", "held-out reward",
        "random / oracle reward", "held-out acc", "held-out J",
        "oracle top-1",
    ]
    lines = [
        f"# Collapse study: {tournament.card.name}",
        "",
        f"{config.agent}, {config.timesteps if 'total_timesteps' in agent_options(config.agent) else 'one pass of'} online decisions per run, seeds {config.seeds}; collapse = one "
        f"model holds >= {config.threshold:g} of the last {config.window} decisions (collapse step = first such "
        f"decision, median over collapsed seeds), judged on the sampled training decisions. Final top-1 / effective "
        f"models: last full window of training. Held-out: greedy policy on the test split "
        f"({len(tournament.split_rows('test'))} queries); greedy collapsed = its top-1 share >= {config.threshold:g}. Oracle top-1: "
        f"what the best route per query would concentrate on under the same reward. Rewards are under each "
        f"row's own reward and coefficients (not comparable across rows). Wall time {seconds / 60:.1f} min.",
        "",
        *[f"- {note}" for note in notes],
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for _, r in table.iterrows():
        cells = [
            r["reward"], f"{r['coefficient']}={fmt(r['value'])}", fmt(r["gated"]), fmt(r["ent_coef"]), r["collapsed"],
            r["onto"], fmt(r["collapse_step"]), r["final_top1"], fmt(r["final_eff_models"]), r["greedy_collapsed"], r["test_top1"],
            fmt(r["test_reward"]), f"{fmt(r['random_reward'])} / {fmt(r['oracle_reward'])}", fmt(r["test_accuracy"]),
            fmt(r["test_mean_energy_j"]), r["oracle_top1"],
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def plot_summary(results: pd.DataFrame, path: Path, threshold: float) -> Path:
    """Heatmap per reward: final top-1 share (seed mean) over energy coefficient x entropy
    coefficient, annotated with the collapse model and median collapse step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rewards = list(dict.fromkeys(results["reward"]))
    ncols = min(len(rewards), 3)
    nrows = math.ceil(len(rewards) / ncols)
    n_values = results.groupby("reward")["value"].nunique().max()
    n_ents = results["ent_coef"].nunique()
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.25 * n_values * ncols + 1.5, (0.75 * n_ents + 1.4) * nrows),
                             squeeze=False, layout="constrained")
    image = None
    for ax, reward in zip(axes.flat, rewards):
        sub = results[results["reward"] == reward]
        values = list(dict.fromkeys(sub["value"]))
        ents = list(dict.fromkeys(sub["ent_coef"]))
        grid = np.full((len(ents), len(values)), np.nan)
        for i, ent in enumerate(ents):
            for j, value in enumerate(values):
                cell = sub[(sub["ent_coef"] == ent) & (sub["value"] == value)]
                grid[i, j] = cell["final_top1_share"].mean()
                collapsed = cell[cell["collapsed"]]
                text = f"{grid[i, j]:.2f}"
                if len(collapsed):
                    model = short_name(collapsed["collapsed_onto"].mode().iloc[0])
                    text += f"\n{model}\n@{int(collapsed['collapse_step'].median())} ({len(collapsed)}/{len(cell)})"
                ax.text(j, i, text, ha="center", va="center", fontsize=6,
                        color="white" if grid[i, j] >= 0.75 else "black")
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="magma_r", aspect="auto")
        coefficient = sub["coefficient"].iloc[0]
        gated = dict(zip(sub["value"], sub["gated"]))
        ax.set_xticks(range(len(values)), [f"{v:.3g}" + ("" if gated[v] else "\nungated") for v in values], fontsize=7)
        ax.set_yticks(range(len(ents)), [f"{e:g}" for e in ents], fontsize=7)
        ax.set_xlabel(coefficient, fontsize=8)
        ax.set_ylabel("entropy coefficient", fontsize=8)
        ax.set_title(f"{reward}: final top-1 share", fontsize=8)
    for ax in axes.flat[len(rewards):]:
        ax.axis("off")
    fig.suptitle("Final training top-1 share (seed mean); collapsed runs: model, median collapse step, "
                 "collapsed seeds", fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="top-1 share")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def run_study(config: StudyConfig, progress: bool | None = None) -> dict[str, Path]:
    from tqdm import tqdm

    outputs: dict[str, Path] = {}
    for spec in config.tournaments:
        start = time.perf_counter()
        tournament = resolve_tournament(spec)
        out = config.out or RESULTS / tournament.card.name
        (out / "runs").mkdir(parents=True, exist_ok=True)
        settings, notes = settings_for(config, tournament)
        roles = model_roles(tournament)
        rows, trackers = [], {}
        jobs = [(s, seed) for s in settings for seed in config.seeds]
        for setting, seed in tqdm(jobs, desc=f"collapse study on {tournament.card.name}", disable=progress):
            row, tracker = run_one(tournament, setting, seed, config)
            rows.append(row)
            tracker.write_csv(out / "runs" / f"{setting.tag}__seed{seed}.csv")
            if seed == config.seeds[0]:
                trackers[setting] = tracker
        results = pd.DataFrame(rows)
        results.to_csv(out / "results.csv", index=False)
        table = setting_table(results, roles, config)
        seconds = time.perf_counter() - start
        (out / "table.md").write_text(markdown(table, tournament, config, notes, seconds))
        plot_summary(results, out / "summary.png", config.threshold)
        for reward in dict.fromkeys(s.reward for s in settings):
            panels = {s.label.split(" ", 1)[1]: t for s, t in trackers.items() if s.reward == reward}
            plot_selection_shares(panels, out / f"shares_{reward}.png", ncols=len(config.ent_coefs))
        outputs[tournament.card.name] = out
        print(f"{tournament.card.name}: {len(rows)} runs in {seconds / 60:.1f} min -> {out}", file=sys.stderr)
    return outputs


def parse_args(argv: list[str] | None = None) -> StudyConfig:
    d = StudyConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tournament", nargs="+", default=d.tournaments, help="presets or tournament directories")
    p.add_argument("--rewards", nargs="+", default=d.rewards, help="registered reward names, or 'all'")
    p.add_argument("--ent-coefs", nargs="+", type=float, default=d.ent_coefs)
    p.add_argument("--gate-fractions", nargs="+", type=float, default=d.gate_fractions,
                   help="energy coefficients as fractions of the gate boundary (>= 1 means ungated)")
    p.add_argument("--agent", default=d.agent, help="any registered bandit-feedback agent (ppo, a2c, dqn, linucb, ...)")
    p.add_argument("--agent-kwargs", type=json.loads, default={}, help="JSON constructor options of the agent")
    p.add_argument("--timesteps", type=int, default=d.timesteps)
    p.add_argument("--seeds", nargs="+", type=int, default=d.seeds)
    p.add_argument("--window", type=int, default=d.window)
    p.add_argument("--threshold", type=float, default=d.threshold)
    p.add_argument("--feature-dim", type=int, default=d.feature_dim)
    p.add_argument("--out", type=Path, default=None, help="output folder (one tournament only)")
    a = p.parse_args(argv)
    if a.out is not None and len(a.tournament) > 1:
        p.error("--out takes one tournament; leave it out to write under experiments/results/collapse/<name>/")
    return StudyConfig(
        tournaments=a.tournament, rewards=a.rewards, ent_coefs=a.ent_coefs, gate_fractions=a.gate_fractions,
        agent=a.agent, agent_kwargs=a.agent_kwargs, timesteps=a.timesteps, seeds=a.seeds, window=a.window, threshold=a.threshold,
        feature_dim=a.feature_dim, out=a.out,
    )


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    run_study(parse_args())
