"""The routing-collapse study (``routing-gym collapse``): when does a router stop routing?

Trains one agent — any registered or ``--import``ed one: bandit, baseline, SB3, text
controller — over a grid of reward settings and reports, per setting, whether its decisions
collapsed onto one model, onto which (the pool's cheapest, largest or most accurate?), how
fast, where the selection mix ended, its regret, and what its greedy policy does on held-out
queries next to the oracle of the same reward (an oracle that itself sends most queries to one
model means that concentration is warranted, not a failure).

The grid:

- the reward's **energy coefficient**: fractions of the value at which the reward's gate breaks
  (a correct route could score at or below a wrong one): zero, gated values and, by default,
  one **ungated** value beyond it (built with ``allow_ungated=True``, on purpose);
- the policy's **entropy coefficient**, for agents that take ``ent_coef`` (PPO, A2C);
- the **reward**: ``gated_rank`` by default, or every registered reward with an energy
  coefficient (``rewards=["all"]``).

Which decisions are tracked (a ``CollapseTracker`` plus the regret of each decision against
the best route of its query under the same reward, ``info["oracle_reward"]``):

- an agent with ``feedback = "bandit"`` (bandits, SB3, yours): its **online training
  decisions**, through ``FitContext.step_hooks``, so every such agent is tracked the same way;
- an agent with ``feedback = "full"`` (baselines, kNN, the text controller, ...) makes no
  online decisions while it trains: its **held-out routes**, in split order, are tracked instead
  (the table says which).

Outputs under ``out``: ``results.csv`` (one row per run), ``table.md`` (one row per setting,
seeds pooled, with an explanation of every column), ``summary.png`` (final top-1 share per
setting), ``curves.png`` (entropy, top-1 share and cumulative regret over decisions, one line
per setting, first seed), ``shares_<reward>.png`` (selection shares over decisions, one panel
per setting, first seed) and ``runs/*.csv`` (per-window diagnostics of every run).
"""

from __future__ import annotations

import inspect
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from routing_gym.envs import REWARDS, Reward, RoutingEnv, get_reward, oracle_targets
from routing_gym.envs.rewards import check_gate_on_data
from routing_gym.errors import UsageError
from routing_gym.eval.collapse import CollapseTracker, normalised_entropy, plot_selection_shares

if TYPE_CHECKING:  # heavy imports stay out of module import
    import pandas as pd

    from routing_gym.tournament import Tournament

# Names under which reward functions take their price of energy (first match wins).
ENERGY_COEFFICIENTS = ("lambda_e", "mu", "lambda_energy", "energy_coef")
# Energy coefficients as fractions of the gate boundary b: zero, three gated, one ungated.
GATE_FRACTIONS = (0.0, 1 / 6, 0.5, 0.97, 4 / 3)
NO_ENT = "-"  # the entropy-coefficient label of agents that take none


@dataclass
class CollapseConfig:
    """The sweep; the defaults (PPO, 5 x 3 settings) run in a few minutes on 2 cores."""

    tournament: str = "collapse-prone"
    agent: str = "ppo"
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    rewards: list[str] = field(default_factory=lambda: ["gated_rank"])  # or ["all"]
    gate_fractions: list[float] = field(default_factory=lambda: list(GATE_FRACTIONS))
    ent_coefs: list[float] = field(default_factory=lambda: [0.0, 0.01, 0.05])  # agents with ent_coef only
    timesteps: int = 5000  # online decisions per run, for agents that take total_timesteps
    seeds: list[int] = field(default_factory=lambda: [0])
    window: int = 250  # decisions per collapse window
    threshold: float = 0.9  # top-1 share that counts as collapse
    feature_dim: int = 32
    imports: list[str] = field(default_factory=list)  # modules that register agents or rewards

    def check(self) -> None:
        for name, value in (("timesteps", self.timesteps), ("window", self.window), ("feature_dim", self.feature_dim)):
            if value < 1:
                raise UsageError(f"{name} must be >= 1, got {value}")
        if not 0 < self.threshold <= 1:
            raise UsageError(f"threshold is a top-1 share in (0, 1], got {self.threshold}")
        if not self.seeds or not self.gate_fractions:
            raise UsageError("seeds and gate fractions need at least one value each")
        if any(not math.isfinite(f) or f < 0 for f in self.gate_fractions):
            raise UsageError(f"gate fractions must be finite and >= 0, got {self.gate_fractions}")


@dataclass(frozen=True)
class Setting:
    reward: str
    coefficient: str  # the energy coefficient's name
    value: float
    gated: bool
    ent_coef: float | None  # None for agents without an entropy coefficient

    @property
    def ent_label(self) -> str:
        return NO_ENT if self.ent_coef is None else f"{self.ent_coef:g}"

    @property
    def label(self) -> str:
        gate = "" if self.gated else " (ungated)"
        ent = "" if self.ent_coef is None else f", ent={self.ent_coef:g}"
        return f"{self.coefficient}={self.value:.3g}{gate}{ent}"

    @property
    def tag(self) -> str:
        return f"{self.reward}__{self.coefficient}{self.value:.4g}__ent{self.ent_label}".replace(".", "p")


@dataclass
class CollapseStudy:
    """What ``run_collapse_study`` returns: per-run rows, per-setting table, notes, trackers."""

    config: CollapseConfig
    tournament: Tournament
    decisions: str  # "online training decisions" or "held-out routes"
    results: pd.DataFrame
    table: pd.DataFrame
    notes: list[str]
    trackers: dict[Setting, CollapseTracker]  # first seed
    regrets: dict[Setting, np.ndarray]  # first seed, per tracked decision
    elapsed_s: float


def agent_options(name: str) -> set[str]:
    """Keyword options the registered agent's constructor takes (following ``**kwargs`` up the classes)."""
    from routing_gym_agents.registry import AGENTS, load_plugins, unknown_agent_error

    load_plugins()
    if name not in AGENTS:
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


def energy_coefficient(reward: str) -> str | None:
    """The reward's energy coefficient: the first of ``ENERGY_COEFFICIENTS`` among its keyword
    arguments with a default (how a reward declares one)."""
    defaults = get_reward(reward).defaults
    return next((name for name in ENERGY_COEFFICIENTS if name in defaults), None)


def left_out_note(reward: str) -> str | None:
    """Why the study cannot sweep ``reward`` (None when it can); an unknown name raises."""
    if energy_coefficient(reward) is not None:
        return None
    return (f"{reward}: left out, no energy coefficient (looked for {', '.join(ENERGY_COEFFICIENTS)} among the "
            "reward function's keyword arguments with a default)")


def gate_boundary(reward: str, coefficient: str, tournament: Tournament, split: str = "train") -> float:
    """Smallest energy coefficient (others at 0) at which the gate breaks.

    Analytical when the reward registers a gate; otherwise found on the training data (some
    query's correct route no longer beats every wrong one). Bisection assumes the gate holds
    below the boundary and breaks above it, true for every energy price here.
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
        raise UsageError(f"reward {reward!r} breaks its gate even with {coefficient}=0")
    high = 1e-6
    while not broken(high):
        high *= 2
        if high > 1e9:
            raise UsageError(f"reward {reward!r}: no value of {coefficient} breaks the gate")
    low = high / 2 if high > 1e-6 else 0.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (low, mid) if broken(mid) else (mid, high)
    return high


def settings_for(config: CollapseConfig, tournament: Tournament) -> tuple[list[Setting], list[str]]:
    """The grid, plus a note per reward (its gate boundary, or why it was left out)."""
    names = sorted(REWARDS) if config.rewards == ["all"] else list(config.rewards)
    takes_ent = "ent_coef" in agent_options(config.agent)
    settings, notes = [], []
    for name in names:
        coefficient = energy_coefficient(name)
        if coefficient is None:
            notes.append(left_out_note(name))
            continue
        boundary = gate_boundary(name, coefficient, tournament)
        notes.append(f"{name}: the gate breaks at {coefficient} = {boundary:.4g}")
        for fraction in config.gate_fractions:
            value = float(f"{fraction * boundary:.4g}")
            for ent in config.ent_coefs if takes_ent else [None]:
                settings.append(Setting(name, coefficient, value, value < boundary, None if ent is None else float(ent)))
    if not settings:
        raise UsageError(f"no reward of {names} has an energy coefficient to sweep")
    return settings, notes


def model_roles(tournament: Tournament, split: str = "train") -> dict[str, str]:
    """Which model is the pool's cheapest (mean joules), largest and most accurate."""
    summary = tournament.model_summary(tournament.split_rows(split))
    roles: dict[str, list[str]] = {m: [] for m in tournament.model_ids}
    roles[summary.loc[summary["mean_energy_j"].idxmin(), "model_id"]].append("cheapest")
    if summary["params_b"].notna().any():
        roles[summary.loc[summary["params_b"].idxmax(), "model_id"]].append("largest")
    roles[summary.loc[summary["accuracy"].idxmax(), "model_id"]].append("most accurate")
    return {m: "/".join(r) for m, r in roles.items()}


def _top1(actions: np.ndarray, model_ids: list[str]) -> tuple[str, float, float]:
    counts = np.bincount(actions[(actions >= 0) & (actions < len(model_ids))], minlength=len(model_ids))
    return model_ids[int(counts.argmax())], float(counts.max() / len(actions)), normalised_entropy(counts)


def _make_agent(config: CollapseConfig, setting: Setting) -> Any:
    from routing_gym_agents import make_agent

    options = agent_options(config.agent)
    wanted: dict[str, Any] = {"total_timesteps": config.timesteps, "collapse_window": config.window,
                              "collapse_threshold": config.threshold}
    if setting.ent_coef is not None:
        wanted["ent_coef"] = setting.ent_coef
    # SB3 agents take their feature options as a dict; the bandits and text routers a text dim.
    wanted.update({"features": {"dim": config.feature_dim}} if "total_timesteps" in options else {"dim": config.feature_dim})
    kwargs = {k: v for k, v in wanted.items() if k in options}
    try:
        return make_agent(config.agent, **{**kwargs, **config.agent_kwargs})
    except (TypeError, ValueError) as exc:  # bad --agent-kwargs: name the agent
        raise UsageError(f"agent {config.agent!r}: {exc}") from None


def run_one(tournament: Tournament, setting: Setting, seed: int, config: CollapseConfig
            ) -> tuple[dict[str, Any], CollapseTracker, np.ndarray]:
    """Train one agent under one setting and seed; its row, tracker and per-decision regret."""
    from routing_gym_agents import FitContext, ObservationBatch

    reward = Reward(setting.reward, {setting.coefficient: setting.value}, allow_ungated=not setting.gated)
    agent = _make_agent(config, setting)
    tracker = CollapseTracker.for_tournament(tournament, window=config.window, threshold=config.threshold)
    regret: list[float] = []

    def log_regret(step: int, action: int, value: float, info: dict[str, Any]) -> None:
        regret.append(float(info.get("oracle_reward", math.nan)) - float(value))

    online = agent.feedback == "bandit"
    tic = time.perf_counter()
    agent.fit(FitContext(tournament, reward, seed=seed, step_hooks=[tracker, log_regret] if online else [],
                         progress=False, grants=agent.privileged))
    train_seconds = time.perf_counter() - tic

    test_rows = tournament.split_rows("test")
    env = RoutingEnv(tournament=tournament, split="test", reward=setting.reward, coefficients=reward.coefficients,
                     allow_ungated=reward.allow_ungated, invalid_action="penalize")
    actions = np.asarray(agent.act_batch(ObservationBatch.from_tournament(tournament, test_rows)))
    scored = env.evaluate(actions)
    if not online:  # no online decisions while training: track the held-out routes in split order
        oracle_reward = env.reward_matrix.max(axis=1)
        tracker.update_many(np.where(scored.valid, actions, -1), scored.rewards)
        regret = list(oracle_reward - scored.rewards)
    summary = tracker.summary()
    metrics = scored.metrics()
    oracle = oracle_targets(tournament, reward, rows=test_rows)
    ids = tournament.model_ids
    test_model, test_share, test_entropy = _top1(np.where(scored.valid, actions, -1), ids)
    oracle_model, oracle_share, _ = _top1(oracle, ids)
    steps = tracker.n_steps
    last = np.asarray(regret[-config.window:], dtype=np.float64)
    row = {
        "reward": setting.reward, "coefficient": setting.coefficient, "value": setting.value, "gated": setting.gated,
        "ent_coef": setting.ent_label, "seed": seed, "decisions": steps,
        "collapsed": summary["collapsed"], "collapse_step": summary["collapse_step"],
        "collapse_fraction": None if summary["collapse_step"] is None else (summary["collapse_step"] + 1) / steps,
        "collapsed_onto": summary["collapsed_onto"],
        "final_top1_model": summary["final_top1_model"], "final_top1_share": summary["final_top1_share"],
        "final_entropy": summary["final_entropy"], "final_effective_models": summary["final_effective_models"],
        "cumulative_regret": float(np.nansum(regret)), "final_mean_regret": float(np.nanmean(last)) if last.size else math.nan,
        "test_top1_model": test_model, "test_top1_share": test_share, "test_entropy": test_entropy,
        "test_accuracy": metrics["accuracy"], "test_mean_energy_j": metrics["mean_energy_j"],
        "test_reward": metrics["mean_reward"], "random_reward": float(env.reward_matrix.mean()),
        "oracle_reward": float(env.reward_matrix.max(axis=1).mean()),
        "oracle_top1_model": oracle_model, "oracle_top1_share": oracle_share, "train_seconds": train_seconds,
    }
    return row, tracker, np.asarray(regret, dtype=np.float64)


def setting_table(results: pd.DataFrame, roles: dict[str, str], threshold: float) -> pd.DataFrame:
    """One row per setting, seeds pooled: collapse rate, model, median speed, end state."""
    import pandas as pd

    keys = ["reward", "coefficient", "value", "gated", "ent_coef"]
    rows = []
    for key, group in results.groupby(keys, sort=False, dropna=False):
        collapsed = group[group["collapsed"].astype(bool)]
        onto = collapsed["collapsed_onto"].mode()
        onto_model = onto.iloc[0] if len(onto) else ""
        rows.append({
            **dict(zip(keys, key)),
            "seeds": len(group),
            "collapsed": f"{len(collapsed)}/{len(group)}",
            "onto": f"{onto_model} ({roles[onto_model]})" if roles.get(onto_model) else onto_model or "-",
            "collapse_step": int(collapsed["collapse_step"].median()) if len(collapsed) else None,
            "final_top1": f"{group['final_top1_model'].mode().iloc[0]} {group['final_top1_share'].mean():.2f}",
            "final_eff_models": group["final_effective_models"].mean(),
            "final_mean_regret": group["final_mean_regret"].mean(),
            "greedy_collapsed": f"{int((group['test_top1_share'] >= threshold).sum())}/{len(group)}",
            "test_top1": f"{group['test_top1_model'].mode().iloc[0]} {group['test_top1_share'].mean():.2f}",
            "test_reward": group["test_reward"].mean(),
            "random_reward": group["random_reward"].mean(),
            "oracle_reward": group["oracle_reward"].mean(),
            "test_accuracy": group["test_accuracy"].mean(),
            "test_mean_energy_j": group["test_mean_energy_j"].mean(),
            "oracle_top1": f"{group['oracle_top1_model'].iloc[0]} {group['oracle_top1_share'].iloc[0]:.2f}",
        })
    return pd.DataFrame(rows)


def run_collapse_study(config: CollapseConfig, progress: bool | None = None) -> CollapseStudy:
    """Run the grid (every setting x seed) and pool the seeds; bad settings raise
    ``UsageError`` before any agent trains."""
    import pandas as pd
    from tqdm import tqdm

    from routing_gym.plugins import import_user_module
    from routing_gym.sources import resolve_tournament

    start = time.perf_counter()
    config.check()
    for module in config.imports:
        import_user_module(module)
    tournament = resolve_tournament(config.tournament)
    settings, notes = settings_for(config, tournament)
    _make_agent(config, settings[0])  # bad agent kwargs fail here, before any training
    roles = model_roles(tournament)
    from routing_gym_agents.registry import AGENTS

    decisions = "online training decisions" if AGENTS[config.agent][0].feedback == "bandit" else "held-out routes"
    config, window_note = _fit_window(config, tournament, decisions)
    notes = [*notes, *window_note]
    rows, trackers, regrets = [], {}, {}
    jobs = [(s, seed) for s in settings for seed in config.seeds]
    bar_off = None if progress is None else not progress  # tqdm: None = only on a terminal
    for setting, seed in tqdm(jobs, desc=f"collapse study on {tournament.card.name}", disable=bar_off):
        row, tracker, regret = run_one(tournament, setting, seed, config)
        rows.append(row)
        if seed == config.seeds[0]:
            trackers[setting], regrets[setting] = tracker, regret
    results = pd.DataFrame(rows)
    table = setting_table(results, roles, config.threshold)
    return CollapseStudy(config, tournament, decisions, results, table, notes, trackers, regrets,
                         time.perf_counter() - start)


def _fit_window(config: CollapseConfig, tournament: Tournament, decisions: str) -> tuple[CollapseConfig, list[str]]:
    """A window no longer than the decisions a run tracks: a longer one never closes, so nothing could
    collapse and the window panels stay empty. It then becomes a quarter of them (four windows)."""
    if decisions == "held-out routes":
        n, what = len(tournament.split_rows("test")), "held-out routes"
    elif "total_timesteps" in agent_options(config.agent):
        n, what = config.timesteps, "online decisions (--timesteps)"
    else:  # one pass over the training split
        n, what = len(tournament.split_rows("train")), "online decisions (one pass over the training split)"
    if config.window <= n:
        return config, []
    window = max(1, n // 4)
    return replace(config, window=window), [
        f"**window adapted**: {config.window} decisions per window is longer than the {n} {what} a run tracks, so "
        f"no window would close; windows of {window} decisions are used instead (set --window to choose)"]


def _trains_on_reward(agent: str) -> bool:
    from routing_gym_agents.registry import AGENTS

    return bool(getattr(AGENTS[agent][0], "trains_on_reward", True))


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def study_markdown(study: CollapseStudy) -> str:
    """``table.md``: what was run, how to read each column, one row per setting."""
    c, t = study.config, study.tournament
    budget = (f"{c.timesteps} online decisions" if "total_timesteps" in agent_options(c.agent)
              else "one pass over the training split" if study.decisions.startswith("online") else "full-information fit")
    header = ["reward", "energy coef", "gated", "ent coef", "collapsed", "onto", "collapse step",
              "final top-1", "eff. models", "final regret", "greedy collapsed", "held-out top-1",
              "held-out reward", "random / oracle reward", "held-out acc", "held-out J", "oracle top-1"]
    lines = [
        f"# Collapse study: {c.agent} on {t.card.name}",
        "",
        f"Agent `{c.agent}` ({budget} per run), seeds {c.seeds}. Tracked decisions: **{study.decisions}**"
        + (" (this agent learns from the full training table, so it makes no online decisions while training)"
           if study.decisions == "held-out routes" else "") + ".",
        "",
        "How to read it:",
        f"- *collapsed*: runs in which one model held >= {c.threshold:g} of the last {c.window} tracked decisions; "
        "*onto*: that model and its role in the pool; *collapse step*: the first such decision (median over "
        "collapsed seeds).",
        "- *final top-1*, *eff. models* (exp of the selection entropy: 1 = one model, K = uniform) and *final "
        "regret* (mean of the best route's reward minus the reward obtained, per decision): the last "
        f"{c.window} tracked decisions.",
        f"- *held-out*: the greedy policy on the test split ({len(t.split_rows('test'))} queries); *greedy "
        f"collapsed*: its top-1 share >= {c.threshold:g}. *Oracle top-1*: where the best route per query "
        "concentrates under the same reward (concentration the data warrants).",
        "- Rewards are under each row's own reward and coefficients: compare them within a row, not across rows. "
        "Ungated rows use coefficients beyond the gate on purpose.",
        f"- Wall time {study.elapsed_s / 60:.1f} min.",
        *([f"- **`{c.agent}` does not train on the reward** (`Agent.trains_on_reward = False`): its routes are the "
           "same in every row; only the reward they are scored under changes."] if not _trains_on_reward(c.agent) else []),
        "",
        *[f"- {note}" for note in study.notes],
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for _, r in study.table.iterrows():
        cells = [
            r["reward"], f"{r['coefficient']}={_fmt(r['value'])}", _fmt(bool(r["gated"])), r["ent_coef"], r["collapsed"],
            r["onto"], _fmt(r["collapse_step"]), r["final_top1"], _fmt(r["final_eff_models"]),
            _fmt(r["final_mean_regret"]), r["greedy_collapsed"], r["test_top1"], _fmt(r["test_reward"]),
            f"{_fmt(r['random_reward'])} / {_fmt(r['oracle_reward'])}", _fmt(r["test_accuracy"]),
            _fmt(r["test_mean_energy_j"]), r["oracle_top1"],
        ]
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return "\n".join(lines) + "\n"


def short_name(model_id: str) -> str:
    """A model id short enough for a heatmap cell."""
    name = model_id.split("@")[0]
    for suffix in ("-Instruct", "-instruct", "-Chat", "-it"):
        name = name.removesuffix(suffix)
    return name if len(name) <= 14 else name[:13] + "~"


def plot_summary(results: pd.DataFrame, path: Path) -> Path:
    """Heatmap per reward: final top-1 share (seed mean) over energy coefficient x entropy
    coefficient, annotated with the collapse model and median collapse step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rewards = list(dict.fromkeys(results["reward"]))
    ncols = min(len(rewards), 2)
    nrows = math.ceil(len(rewards) / ncols)
    n_values = results.groupby("reward")["value"].nunique().max()
    n_ents = results["ent_coef"].nunique()
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(5.5, 1.5 * n_values + 2.5) * ncols, (0.9 * n_ents + 2.2) * nrows),
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
                collapsed = cell[cell["collapsed"].astype(bool)]
                text = f"{grid[i, j]:.2f}"
                if len(collapsed):
                    model = short_name(collapsed["collapsed_onto"].mode().iloc[0])
                    text += f"\n{model}\n@{int(collapsed['collapse_step'].median())} ({len(collapsed)}/{len(cell)})"
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] >= 0.75 else "black")
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="magma_r", aspect="auto")
        gated = dict(zip(sub["value"], sub["gated"]))
        ax.set_xticks(range(len(values)), [f"{v:.3g}" + ("" if gated[v] else "\nungated") for v in values], fontsize=8)
        ax.set_xlabel(sub["coefficient"].iloc[0], fontsize=9)
        if ents == [NO_ENT]:
            ax.set_yticks([])
            ax.set_ylabel("(no entropy coefficient)", fontsize=9)
        else:
            ax.set_yticks(range(len(ents)), ents, fontsize=8)
            ax.set_ylabel("entropy coefficient", fontsize=9)
        ax.set_title(f"{reward}: final top-1 share", fontsize=10)
    for ax in axes.flat[len(rewards):]:
        ax.axis("off")
    fig.suptitle("Final top-1 share of the tracked decisions (seed mean)\n"
                 "collapsed runs: model, median collapse step, collapsed seeds", fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="top-1 share")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_curves(study: CollapseStudy, path: Path) -> Path:
    """Entropy, top-1 share (per window) and cumulative regret over tracked decisions, one
    line per setting (first seed); the legend sits below the panels, inside the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained")
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(study.trackers), 1)))
    for colour, (setting, tracker) in zip(colours, study.trackers.items()):
        frame = tracker.to_frame()
        x = (frame["start_step"] + frame["end_step"]).to_numpy() / 2 + 1
        label = f"{setting.reward} {setting.label}" if len(set(s.reward for s in study.trackers)) > 1 else setting.label
        style = "-" if setting.gated else "--"
        axes[0].plot(x, frame["entropy"], style, color=colour, label=label)
        axes[1].plot(x, frame["top1_share"], style, color=colour)
        regret = study.regrets[setting]
        axes[2].plot(np.arange(1, len(regret) + 1), np.nancumsum(regret), style, color=colour)
    axes[1].axhline(study.config.threshold, color="black", linestyle=":", linewidth=1)
    titles = ("selection entropy (1 = uniform, 0 = one model)", f"top-1 share (dotted: collapse at {study.config.threshold:g})",
              "cumulative regret vs the best route per query")
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(study.decisions, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(0, 1.02)
    axes[1].set_ylim(0, 1.02)
    fig.suptitle(f"{study.config.agent} on {study.tournament.card.name}: windows of {study.config.window} decisions "
                 "(dashed: ungated)", fontsize=11)
    fig.legend(loc="outside lower center", ncol=min(len(study.trackers), 5), fontsize=8, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_study(study: CollapseStudy, out: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write every output under ``out``; returns their paths by name."""
    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    paths = {"results.csv": out / "results.csv", "table.md": out / "table.md"}
    study.results.to_csv(paths["results.csv"], index=False)
    paths["table.md"].write_text(study_markdown(study))
    for setting, tracker in study.trackers.items():
        tracker.write_csv(out / "runs" / f"{setting.tag}__seed{study.config.seeds[0]}.csv")
    if plots:
        paths["summary.png"] = plot_summary(study.results, out / "summary.png")
        paths["curves.png"] = plot_curves(study, out / "curves.png")
        takes_ent = any(s.ent_coef is not None for s in study.trackers)
        for reward in dict.fromkeys(s.reward for s in study.trackers):
            panels = {s.label: t for s, t in study.trackers.items() if s.reward == reward}
            name = f"shares_{reward}.png"
            paths[name] = plot_selection_shares(panels, out / name, ncols=len(study.config.ent_coefs) if takes_ent else 3)
    print(f"{study.tournament.card.name}: {len(study.results)} runs in {study.elapsed_s / 60:.1f} min -> {out}",
          file=sys.stderr)
    return paths
