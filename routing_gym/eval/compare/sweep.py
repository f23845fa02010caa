"""A grid of comparisons: tournaments x reward settings, each one ``compare`` run, one executor.

A sweep config (YAML or TOML) names tournaments, agents (with constructor kwargs), seeds, a
reward grid and where cells run::

    tournaments: [paper-pool]
    agents: [default, {ppo: {total_timesteps: 5000}}]   # names, or {name: kwargs}
    seeds: 3                                            # a count (0..n-1) or a list
    rewards:                                            # each entry, or a grid of coefficients
      - {name: gated_rank, coefficients: {lambda_e: 0.1}}
      - {name: gated_rank, grid: {lambda_e: [0.2, 0.4]}}
    executor: ray          # local | process | ray
    workers: 2             # optional; also ray_address, max_retries, imports, bootstrap,
    out: sweep-results     #   train_split, test_split, fixed_models, plots, allow_ungated

Every tournament x reward setting gets its own folder under ``out``
(``<tournament>__<reward>__<coefficient=value,...>``) holding the usual compare
outputs and its ``cells/`` (so a rerun resumes each one), and ``combined.csv`` / ``combined.md``
put every method's headline numbers of every setting in one table. All cells of the grid run
in one executor, so a pool never idles at the end of one setting while another has work.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from routing_gym.configfile import read_config_file
from routing_gym.errors import UsageError
from routing_gym.eval.core.reward_use import REWARD_FREE_MARK, reward_free_methods, reward_free_note
from routing_gym.eval.execution.executors import DEFAULT_MAX_RETRIES, EXECUTORS

_KEYS = {"tournaments", "agents", "seeds", "rewards", "executor", "workers", "ray_address", "max_retries", "imports",
         "bootstrap", "train_split", "test_split", "fixed_models", "plots", "out", "allow_ungated"}
COMBINED_COLUMNS = ("accuracy", "mean_energy_j", "routing_gain_pp", "joules_saved_pct", "mean_reward", "top1_share",
                    "seeds_ok", "seeds_failed")


class SweepConfigError(UsageError):
    """A sweep config that cannot work; the message names the file and the field."""


@dataclass
class RewardSetting:
    name: str
    coefficients: dict[str, float]

    @property
    def coefficient_text(self) -> str:
        return ",".join(f"{k}={v:g}" for k, v in sorted(self.coefficients.items()))

    @property
    def label(self) -> str:
        return self.name + (f"__{self.coefficient_text}" if self.coefficients else "")


@dataclass
class SweepConfig:
    tournaments: list[str]
    agents: list[str] | None  # None: compare's default set
    agent_kwargs: dict[str, dict[str, Any]]
    seeds: int | list[int]
    rewards: list[RewardSetting]
    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    imports: list[str] = field(default_factory=list)
    bootstrap: int = 2000
    train_split: str = "train"
    test_split: str = "test"
    fixed_models: bool = True
    plots: bool = True
    out: str = "sweep-results"
    allow_ungated: bool = False  # study reward settings that break the gate (compare --allow-ungated)
    source: str = "<memory>"


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read a ``.yaml``/``.yml`` or ``.toml`` sweep config."""
    data = read_config_file(path, SweepConfigError, "sweep config", formats=(".yaml", ".yml", ".toml"))
    return sweep_config_from_dict(data, source=str(path))


def sweep_config_from_dict(data: Any, source: str = "<memory>") -> SweepConfig:
    def fail(key: str, why: str) -> SweepConfigError:
        return SweepConfigError(f"{source}: {key}: {why}")

    if not isinstance(data, dict):
        raise SweepConfigError(f"{source}: the sweep config must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise SweepConfigError(f"{source}: unknown key(s) {unknown}; known: {sorted(_KEYS)}")
    tournaments = data.get("tournaments")
    if isinstance(tournaments, str):
        tournaments = [tournaments]
    if not isinstance(tournaments, list) or not tournaments or not all(isinstance(t, str) and t for t in tournaments):
        raise fail("tournaments", f"expected a non-empty list of tournament directories or preset names, got {tournaments!r}")

    agents, agent_kwargs = _agents(data.get("agents", ["default"]), fail)
    seeds = data.get("seeds", 5)
    if isinstance(seeds, bool) or not (isinstance(seeds, int) and seeds >= 1 or isinstance(seeds, list) and seeds
                                       and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise fail("seeds", f"expected a count >= 1 or a non-empty list of integers, got {seeds!r}")
    rewards = [r for i, entry in enumerate(data.get("rewards", [{"name": "gated_rank"}])) for r in _rewards(entry, i, fail)]
    if not rewards:
        raise fail("rewards", "the reward grid is empty")
    labels = [r.label for r in rewards]
    if len(set(labels)) != len(labels):
        raise fail("rewards", f"the same reward setting appears twice: {sorted({x for x in labels if labels.count(x) > 1})}")

    config = SweepConfig(tournaments, agents, agent_kwargs, seeds, rewards, source=source)
    for key, kind in (("executor", str), ("workers", int), ("ray_address", str), ("max_retries", int),
                      ("bootstrap", int), ("train_split", str), ("test_split", str), ("fixed_models", bool),
                      ("plots", bool), ("out", str), ("allow_ungated", bool)):
        if key in data:
            value = data[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise fail(key, f"expected {kind.__name__}, got {value!r}")
            setattr(config, key, value)
    if config.executor not in EXECUTORS:
        raise fail("executor", f"must be one of {', '.join(EXECUTORS)}, got {config.executor!r}")
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(m, str) for m in imports):
        raise fail("imports", f"expected a list of module names, got {imports!r}")
    config.imports = imports
    return config


def _agents(value: Any, fail) -> tuple[list[str] | None, dict[str, dict[str, Any]]]:
    if not isinstance(value, list) or not value:
        raise fail("agents", f"expected a non-empty list of names or {{name: kwargs}} entries, got {value!r}")
    names, kwargs = [], {}
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, dict) and len(entry) == 1:
            (name, params), = entry.items()
            if not isinstance(params, dict):
                raise fail(f"agents[{i}].{name}", f"expected a mapping of constructor kwargs, got {params!r}")
            names.append(name)
            kwargs[name] = dict(params)
        else:
            raise fail(f"agents[{i}]", f"expected a name or a one-key mapping {{name: kwargs}}, got {entry!r}")
    return (None if names == ["default"] else names), kwargs


def _rewards(entry: Any, i: int, fail) -> list[RewardSetting]:
    where = f"rewards[{i}]"
    if isinstance(entry, str):
        return [RewardSetting(entry, {})]
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise fail(where, f"expected {{name: ..., coefficients: {{...}}}} or {{name: ..., grid: {{...}}}}, got {entry!r}")
    extra = sorted(set(entry) - {"name", "coefficients", "grid"})
    if extra:
        raise fail(where, f"unknown key(s) {extra}; known: name, coefficients, grid")
    fixed = entry.get("coefficients", {})
    grid = entry.get("grid", {})
    for key, value in (("coefficients", fixed), ("grid", grid)):
        if not isinstance(value, dict):
            raise fail(f"{where}.{key}", f"expected a mapping, got {value!r}")
    for name, value in fixed.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(f"{where}.coefficients.{name}", f"expected a number, got {value!r}")
    for name, values in grid.items():
        if not isinstance(values, list) or not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            raise fail(f"{where}.grid.{name}", f"expected a non-empty list of numbers, got {values!r}")
    names = list(grid)
    return [RewardSetting(entry["name"], {**{k: float(v) for k, v in fixed.items()}, **dict(zip(names, map(float, combo)))})
            for combo in itertools.product(*(grid[n] for n in names))]


def _folder_name(tournament: str, reward: RewardSetting) -> str:
    base = Path(tournament).name or tournament
    return re.sub(r"[^A-Za-z0-9_.=,-]", "_", f"{base}__{reward.label}")


def run_sweep(config: SweepConfig, out: str | Path | None = None, progress: bool | None = None) -> dict[str, Any]:
    """Run the grid (resuming saved cells) and write every folder plus the combined table.
    Returns ``{"folders": {name: path}, "combined": DataFrame, "failures": [...]}``."""
    from routing_gym.eval.compare import CompareConfig, CompareJob, run_jobs, write_outputs

    out_dir = Path(out or config.out)
    jobs: dict[str, CompareJob] = {}
    for tournament in config.tournaments:
        for reward in config.rewards:
            name = _folder_name(tournament, reward)
            if name in jobs:
                raise SweepConfigError(f"{config.source}: tournaments: two entries share the folder name {name!r}")
            compare = CompareConfig(
                tournament=tournament, agents=config.agents, seeds=config.seeds, reward=reward.name,
                coefficients=reward.coefficients, train_split=config.train_split, test_split=config.test_split,
                agent_kwargs=config.agent_kwargs, fixed_models=config.fixed_models, n_bootstrap=config.bootstrap,
                progress=progress, executor=config.executor, workers=config.workers, ray_address=config.ray_address,
                max_retries=config.max_retries, imports=config.imports, allow_ungated=config.allow_ungated,
            )
            jobs[name] = CompareJob(compare, out_dir / name, label=f"{name}: ")
    run_jobs(list(jobs.values()), config.executor, workers=config.workers, max_retries=config.max_retries,
             ray_address=config.ray_address, progress=progress)
    rows, failures, folders = [], [], {}
    for name, job in jobs.items():
        result = job.result()
        write_outputs(result, out_dir / name, plots=config.plots)
        folders[name] = out_dir / name
        failures += [f"{name}: {f.method} seed {f.seed}: {f.error}" for f in result.failures]
        for row in result.rows:
            rows.append({"setting": name, "tournament": result.tournament.card.name, "reward": result.reward.name,
                         "coefficients": RewardSetting(result.reward.name, result.reward.coefficients).coefficient_text,
                         "method": row["method"], "kind": row["kind"],
                         **{c: row.get(c, float("nan")) for c in COMBINED_COLUMNS}})
    combined = pd.DataFrame(rows)
    combined.to_csv(out_dir / "combined.csv", index=False)
    (out_dir / "combined.md").write_text(_combined_markdown(combined))
    return {"folders": folders, "combined": combined, "failures": failures}


def _combined_markdown(frame: pd.DataFrame) -> str:
    lines = ["# Sweep: every setting's methods", "",
             "Point estimates (means over seeds); intervals and the full tables are in each setting's table.md.", "",
             "| Setting | Method | Accuracy % | Mean J | Routing gain pp | Joules saved % | Mean reward | Seeds ok/failed |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    reward_free = reward_free_methods(frame["method"]) if len(frame) else set()
    for r in frame.itertuples():
        method = r.method + (REWARD_FREE_MARK if r.method in reward_free else "")
        if not r.seeds_ok and r.kind != "fixed-model":
            lines.append(f"| {r.setting} | {method} | failed | | | | | 0/{r.seeds_failed} |")
            continue
        lines.append(f"| {r.setting} | {method} | {100 * r.accuracy:.1f} | {r.mean_energy_j:,.1f} | "
                     f"{r.routing_gain_pp:+.1f} | {r.joules_saved_pct:+.1f} | {r.mean_reward:.3f} | "
                     f"{r.seeds_ok}/{r.seeds_failed} |")
    note = reward_free_note(reward_free)
    return "\n".join(lines + (["", note] if note else [])) + "\n"
