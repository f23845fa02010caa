"""``routing-gym compare``: train every agent on the training split, score it on held-out.

For each agent x seed: ``make_agent(name, **kwargs)``, ``fit`` on the training split (bandit
agents learn online through ``RoutingEnv``; the regret of every online decision is logged
through ``FitContext.step_hooks``), ``act_batch`` on the held-out split, and score with
``RoutingEnv.evaluate`` under one common reward. Every fixed model of the pool is added as a
row ("always <model>"), computed directly from the table.

Cells and executors: the unit of work is one cell (agent x seed), ``run_cell``, a top-level
function an executor runs in this process, a spawned process pool or Ray tasks
(``routing_gym.eval.executors``; ``CompareConfig.executor``). With an output folder each
finished cell is saved under ``cells/`` as it arrives, keyed by a fingerprint of what decides
it, and a rerun reuses the saved cells and runs only the missing ones; the table is built from
the cells in a fixed order, so every executor gives the same table. ``docs/scaling.md``.

Robustness: an action outside ``[0, K)`` (or a non-integer one) is charged the invalid
penalty and counted; an agent that raises is reported with a traceback summary and the
others still finish.

Statistics: each number is the mean over seeds of the per-seed metric; 95 % intervals are
percentile bootstrap intervals over held-out queries of the seed-averaged per-query values;
``*_seed_sd`` is the spread over seeds. One set of resamples is drawn per run and every
resampled mean (each method's metrics, the fixed models' accuracy and joules) comes from one
matrix product, so the hull gains (``eval/hull.py``: routing gain in pp and joules saved in %
over the fixed-model hull, hull recomputed per resample) and the strict pairwise dominance
tests cost no further passes over the queries.

Router overhead hook: after ``act_batch``, compare reads ``agent.overhead`` if the agent has
it: a dict, or a method returning one, mapping a name (e.g. ``"decode_s"``, ``"energy_j"``,
``"tokens"``) to a per-query array or a per-query mean for the held-out batch just routed.
``fit`` logs may carry the same under ``"overhead"`` (training-time overhead). Each name
becomes a column ``overhead_<name>`` (``fit_overhead_<name>``). compare always measures
``act_ms_per_query`` (wall time of ``act_batch`` per query) and ``fit_s`` itself.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import sys
import time
import traceback
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from routing_gym.envs import ObservationBatch, Reward, RoutingEnv
from routing_gym.envs.rewards import DEFAULT_COEFFICIENTS, DEFAULT_INVALID_PENALTY
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.eval.jsonsafe import strict_json
from routing_gym.eval import audit
from routing_gym.eval import hull as fixed_hull
from routing_gym.eval.collapse import CollapseTracker
from routing_gym.eval.executors import DEFAULT_MAX_RETRIES, Lost, Task, check_executor, run_tasks
from routing_gym.eval.metrics import BenchmarkMetrics, PolicyMetrics, policy_metrics
from routing_gym.eval.pareto import hypervolume, pareto_front
from routing_gym.eval.stats import BootstrapPlan, dominance_from_resamples, percentile_interval, seed_spread
from routing_gym.plugins import import_user_module
from routing_gym.tournament import Tournament
from routing_gym.tournament.duplicates import duplicate_counts

# The default set: every Table 2 baseline that trains in seconds on 2 cores. Names not
# registered (yet) are skipped when the default is used; named explicitly, they are an error.
DEFAULT_AGENTS = (
    "fixed-smallest",
    "fixed-medium",
    "fixed-largest",
    "random",
    "oracle",
    "linucb",
    "epsilon-greedy",
    "thompson",
    "knn",
    "uniroute",
    "routellm",
    "greenserv",
    "cost-aware",
)
# Output-informed diagnostics join the default set only on tournaments that log answer texts.
DEFAULT_OUTPUT_INFORMED = ("smoothie",)
FIXED_PREFIX = "always "
# Hypervolume reference: accuracy 0 and 1.1 x the most expensive fixed model's mean joules,
# so that every fixed model encloses some area.
HV_REFERENCE_FACTOR = 1.1
PER_QUERY = ("correct", "energy_j", "latency_s", "mean_power_w", "rewards")
_CI_METRICS = {"accuracy": "correct", "mean_energy_j": "energy_j", "mean_latency_s": "latency_s",
               "mean_power_w": "mean_power_w", "mean_reward": "rewards"}
_CURVE_POINTS = 200  # regret curves are stored in results.json downsampled to this many points
COLLAPSE_WINDOW = 200  # online decisions per collapse window (threshold: the tracker's default)
MIN_BOOTSTRAP = 10
HULL_RULE = ("upper, non-decreasing concave hull of the fixed models' (mean J, accuracy) on the test split: what "
             "randomly mixing fixed models reaches; routing gain = accuracy - hull accuracy at the method's mean J (pp), "
             "joules saved = (hull J at the method's accuracy - method J) / hull J (%); outside the hull's range the "
             "nearest end point is used and the row says so; intervals recompute hull and method per resample")


@dataclass
class CompareConfig:
    """Settings of one comparison; every field has the default ``routing-gym compare`` uses."""

    tournament: Any = "default"  # Tournament, directory or preset name
    agents: Sequence[str] | None = None  # None: the registered names of DEFAULT_AGENTS
    seeds: int | Sequence[int] = 5  # a count (seeds 0..n-1) or explicit seeds
    reward: str = "gated_rank"
    coefficients: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_COEFFICIENTS))
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    train_split: str = "train"
    test_split: str = "test"
    agent_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> constructor kwargs
    fixed_models: bool = True  # add an "always <model>" row for every model of the pool
    n_bootstrap: int = 2000
    confidence: float = 0.95
    bootstrap_seed: int = 0
    # None: a tqdm bar on a terminal, one line per finished run on stderr otherwise
    progress: bool | None = None
    # where cells run (``routing_gym.eval.executors``); none of these changes any number
    executor: str = "local"  # local | process | ray
    workers: int | None = None  # process pool size / local Ray CPUs (None: every CPU)
    ray_address: str | None = None  # None: RAY_ADDRESS, else a local Ray
    max_retries: int = DEFAULT_MAX_RETRIES  # further attempts of a cell whose worker process died
    imports: Sequence[str] = ()  # modules every worker imports first (e.g. ones registering agents)
    audit: bool = True  # fit and run each deployable agent again on held-out outcomes replaced (eval/audit.py)

    @property
    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, int):
            if self.seeds < 1:
                raise RoutingGymError(f"seeds (--seeds) must be >= 1, got {self.seeds}")
            return list(range(self.seeds))
        seeds = [int(s) for s in self.seeds]
        if not seeds:
            raise RoutingGymError("seeds is empty")
        return seeds

    def check(self) -> None:
        """Settings that need no tournament; raises ``RoutingGymError`` naming the option."""
        self.seed_list
        if self.n_bootstrap < MIN_BOOTSTRAP:
            raise RoutingGymError(f"n_bootstrap (--bootstrap) must be >= {MIN_BOOTSTRAP}, got {self.n_bootstrap}")
        if not 0 < self.confidence < 1:
            raise RoutingGymError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.workers is not None and self.workers < 1:
            raise RoutingGymError(f"workers (--workers) must be >= 1, got {self.workers}")
        if self.max_retries < 0:
            raise RoutingGymError(f"max_retries (--max-retries) must be >= 0, got {self.max_retries}")
        for name, kwargs in self.agent_kwargs.items():
            if not isinstance(kwargs, dict):
                raise RoutingGymError(f"agent_kwargs (--agent-kwargs) for {name!r}: expected an object of keyword "
                                      f"arguments, got {kwargs!r}")


@dataclass
class RunRecord:
    """One method x seed: its metrics, or why it failed."""

    method: str
    seed: int | None  # None for the deterministic fixed-model rows
    kind: str  # "agent" | "fixed-model"
    status: str  # "ok" | "failed"
    feedback: str = ""
    deployable: bool = True
    training_feedback: str = ""  # FitContext.training_feedback: bandit | full information | none
    audit: dict[str, Any] | None = None  # AuditResult.to_dict(); None for fixed models and failed runs
    fit_s: float = 0.0
    act_s: float = 0.0
    metrics: PolicyMetrics | None = None
    per_query: dict[str, np.ndarray] = field(default_factory=dict)
    regret: np.ndarray | None = None  # instantaneous regret of each online training decision
    collapse: dict[str, Any] | None = None  # CollapseTracker.summary() of the online decisions
    overhead: dict[str, float] = field(default_factory=dict)
    error: str = ""
    traceback: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "method": self.method, "seed": self.seed, "kind": self.kind, "status": self.status,
            "feedback": self.feedback, "deployable": self.deployable, "training_feedback": self.training_feedback,
            "audit": self.audit, "fit_s": self.fit_s,
            "act_ms_per_query": self.act_ms_per_query, "overhead": self.overhead,
        }
        if self.metrics is not None:  # per-benchmark numbers are reported aggregated over seeds only
            data["metrics"] = {k: v for k, v in self.metrics.to_dict().items() if k != "per_benchmark"}
        if self.regret is not None:
            data["online_steps"] = int(len(self.regret))
            data["final_cumulative_regret"] = float(self.regret.sum())
        if self.collapse is not None:
            data["collapse"] = self.collapse
        if self.status != "ok":
            data.update(error=self.error, traceback=self.traceback)
        return data

    @property
    def act_ms_per_query(self) -> float:
        n = self.metrics.n if self.metrics else 0
        return 1000.0 * self.act_s / n if n else float("nan")


@dataclass
class CompareResult:
    config: CompareConfig
    tournament: Tournament
    reward: Reward
    test_rows: np.ndarray
    runs: list[RunRecord]
    rows: list[dict[str, Any]]  # one summary per method, table order
    per_benchmark: list[dict[str, Any]]
    dominance: list[dict[str, Any]]  # every ordered pair of methods
    pareto: dict[str, Any]
    regret: dict[str, dict[str, Any]]  # method -> curves (bandit-feedback agents)
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)  # e.g. training and testing on one split

    @property
    def failures(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status != "ok"]

    def row(self, method: str) -> dict[str, Any]:
        for r in self.rows:
            if r["method"] == method:
                return r
        raise UnknownNameError("method", method, [r["method"] for r in self.rows])

    def settings(self) -> dict[str, Any]:
        c = self.config
        t = self.tournament
        return {
            "tournament": {
                "name": t.card.name, "provenance": t.card.provenance, "n_queries": t.n_queries,
                "n_models": t.n_models, "models": t.model_ids,
                "params_b": [None if pd.isna(p) else float(p) for p in t.models["params_b"]],
                "train_split": c.train_split, "test_split": c.test_split,
                "n_train": int(len(t.split_rows(c.train_split))), "n_test": int(len(self.test_rows)),
                "duplicates": duplicate_counts(t.queries["prompt"], t.queries["split"]),
            },
            "audit": (audit.__doc__.split("\n\n")[1].replace("\n", " ") if c.audit else "off (--no-audit): no row is verified"),
            "reward": {"name": self.reward.name, "coefficients": self.reward.coefficients,
                       "invalid_penalty": self.reward.invalid_penalty, "describe": self.reward.describe()},
            "seeds": c.seed_list,
            "agents": sorted({r.method for r in self.runs if r.kind == "agent"}),
            "agent_kwargs": c.agent_kwargs,
            "intervals": (f"{c.confidence:.0%} percentile bootstrap over {len(self.test_rows)} held-out queries "
                          f"({c.n_bootstrap} resamples, seed {c.bootstrap_seed}) of seed-averaged per-query values"),
            "invalid_actions": "count as wrong, cost 0 J / 0 s / 0 W, earn the invalid penalty",
            "hypervolume_reference": self.pareto["reference"],
            "hull": HULL_RULE,
            "warnings": self.warnings,
            "executor": c.executor,
            "elapsed_s": self.elapsed_s,
        }


# ---------------------------------------------------------------------- running
def resolve_agent_names(agents: Sequence[str] | None, has_output_text: bool = False) -> list[str]:
    """Explicit names must be registered (the error lists those that are); ``None`` means
    the registered subset of ``DEFAULT_AGENTS`` (plus ``DEFAULT_OUTPUT_INFORMED`` when the
    tournament logs answer texts)."""
    from routing_gym_agents import list_agents

    registered = list_agents()
    defaults = [a for a in DEFAULT_AGENTS + (DEFAULT_OUTPUT_INFORMED if has_output_text else ()) if a in registered]
    if agents is None:
        if not defaults:
            raise RoutingGymError(f"none of the default agents is registered; registered: {', '.join(registered) or '(none)'}")
        return defaults
    # "default" inside a list expands to the default set, e.g. "default,ppo,dqn".
    expanded = [d for a in agents for d in (defaults if a.strip() == "default" else [a.strip()])]
    names = list(dict.fromkeys(a for a in expanded if a))
    for name in names:
        if name not in registered:
            raise UnknownNameError("agent", name, registered)
    if not names:
        raise RoutingGymError("no agents given")
    return names


def run_compare(config: CompareConfig, out_dir: str | Path | None = None) -> CompareResult:
    """Run every method x seed and aggregate; never raises for a failing agent.

    Cells (agent x seed) run on ``config.executor``. With ``out_dir`` each finished cell is
    saved to ``<out_dir>/cells/`` as it arrives, and a rerun loads the saved cells whose
    fingerprint matches and runs only the others.

    Bad settings (seeds, bootstrap count, agent names, agent kwargs, splits, reward) raise
    ``RoutingGymError`` before any agent trains."""
    job = CompareJob(config, out_dir)
    run_jobs([job], config.executor, workers=config.workers, max_retries=config.max_retries,
             ray_address=config.ray_address, progress=config.progress)
    return job.result()


@dataclass(frozen=True)
class CellSettings:
    """Everything one cell needs besides the tournament (small: shipped with each task)."""

    reward: Reward
    train_split: str
    test_split: str
    agent_kwargs: dict[str, Any]  # this cell's agent only
    imports: tuple[str, ...] = ()  # modules to import first (e.g. ones that register agents)
    audit: bool = True


def run_cell(t: Tournament, settings: CellSettings, name: str, seed: int) -> RunRecord:
    """One agent x seed, trained and scored: the unit an executor runs (top-level, picklable)."""
    from routing_gym_agents.registry import load_plugins

    load_plugins()  # a fresh worker process has registered nothing yet
    for module in settings.imports:
        import_user_module(module)
    reward = settings.reward
    env = _scoring_env(t, settings.test_split, reward)
    return _run_agent(name, seed, settings, t, _Scorer(t, env, reward))


def _scoring_env(t: Tournament, split: str, reward: Reward) -> RoutingEnv:
    return RoutingEnv(
        tournament=t, split=split, reward=reward.name, coefficients=reward.coefficients,
        invalid_penalty=reward.invalid_penalty, invalid_action="penalize", order="sequential",
    )


class CompareJob:
    """One comparison, prepared: settings checked, fixed-model rows computed, saved cells
    loaded; ``tasks()`` are the cells left to run, ``accept`` takes each finished one (and
    saves it), ``result()`` aggregates."""

    def __init__(self, config: CompareConfig, out_dir: str | Path | None = None, label: str = ""):
        from routing_gym.sources import resolve_tournament

        self.start = time.perf_counter()
        self.config, self.label = config, label
        config.check()
        check_executor(config.executor)
        for module in config.imports:  # agents registered by these modules are checked below
            import_user_module(module)
        seeds = config.seed_list
        t = resolve_tournament(config.tournament)
        names = resolve_agent_names(config.agents, has_output_text=t.output_text is not None)
        check_agent_kwargs(config.agent_kwargs, names)
        self.reward = reward = Reward(config.reward, dict(config.coefficients), config.invalid_penalty)
        t.split_rows(config.train_split)  # fail early, naming the splits, before any agent trains
        self.notes = []
        if config.train_split == config.test_split:
            self.notes.append(f"trained and tested on the same split {config.test_split!r}: every number is in-sample")
            warnings.warn(self.notes[-1], stacklevel=3)
        self.tournament = t
        env = _scoring_env(t, config.test_split, reward)
        self.test_rows = env.rows
        self.fixed_runs: list[RunRecord] = []
        if config.fixed_models:
            scorer = _Scorer(t, env, reward)
            for k, model_id in enumerate(t.model_ids):
                self.fixed_runs.append(scorer.record(f"{FIXED_PREFIX}{model_id}", None, "fixed-model",
                                                     np.full(len(env.rows), k), fit_s=math.nan, act_s=math.nan))
        self.cells = [(name, seed) for name in names for seed in seeds]
        self.settings = {name: CellSettings(reward, config.train_split, config.test_split,
                                            dict(config.agent_kwargs.get(name, {})), tuple(config.imports), config.audit)
                         for name in names}
        self.fingerprints = {cell: cell_fingerprint(t, self.settings[cell[0]], *cell) for cell in self.cells}
        self.cells_dir = Path(out_dir) / CELLS_DIR if out_dir is not None else None
        self.records: dict[tuple[str, int], RunRecord] = {}
        if self.cells_dir is not None:
            for cell in self.cells:
                record = load_cell(self.cells_dir, *cell, self.fingerprints[cell])
                if record is not None:
                    self.records[cell] = record

    @property
    def group(self) -> str:
        """The payload key: cells of every job on one tournament share one shipped copy."""
        return self.tournament.fingerprint

    def tasks(self) -> list[Task]:
        return [Task(f"{self.label}{name}-{seed}", self.group, (self.settings[name], name, seed), agent_resources(name))
                for name, seed in self.cells if (name, seed) not in self.records]

    def accept(self, task: Task, value: RunRecord | Lost) -> RunRecord:
        _, name, seed = task.args
        if isinstance(value, Lost):
            value = _failed_record(name, seed, value.error)
        self.records[(name, seed)] = value
        if self.cells_dir is not None and value.status == "ok":  # a failed cell is run again by a rerun
            save_cell(self.cells_dir, value, self.fingerprints[(name, seed)])
        return value

    def result(self) -> CompareResult:
        missing = [cell for cell in self.cells if cell not in self.records]
        if missing:
            raise RoutingGymError(f"{len(missing)} cell(s) have no result yet, e.g. {missing[0]}")
        runs = self.fixed_runs + [self.records[cell] for cell in self.cells]  # table order, whatever ran first
        result = _aggregate(self.config, self.tournament, self.reward, self.test_rows, runs)
        result.warnings = list(self.notes)
        result.elapsed_s = time.perf_counter() - self.start
        return result


def run_jobs(jobs: Sequence[CompareJob], executor: str = "local", *, workers: int | None = None,
             max_retries: int = DEFAULT_MAX_RETRIES, ray_address: str | None = None,
             progress: bool | None = None) -> None:
    """Run the missing cells of every job on one executor (one pool for the whole grid),
    handing each finished cell to its job as it arrives."""
    owner = {}
    tasks: list[Task] = []
    for job in jobs:
        for task in job.tasks():
            owner[task.key] = job
            tasks.append(task)
    total = sum(len(job.cells) for job in jobs)
    saved = total - len(tasks)
    bar = _Progress(len(tasks), progress)
    if saved and bar.enabled:
        print(f"compare: {saved} of {total} cells already saved (resumed); running the other {len(tasks)}",
              file=sys.stderr, flush=True)
    payloads = {job.group: job.tournament for job in jobs}
    try:
        for task, value in run_tasks(run_cell, payloads, tasks, executor, workers=workers,
                                     max_retries=max_retries, ray_address=ray_address):
            job = owner[task.key]
            bar.done(job.accept(task, value), job.label)
    finally:
        bar.close()


def _failed_record(name: str, seed: int, error: str) -> RunRecord:
    from routing_gym_agents.registry import AGENTS

    cls = AGENTS[name][0]
    return RunRecord(name, seed, "agent", "failed", feedback=str(getattr(cls, "feedback", "")),
                     deployable=not getattr(cls, "privileged", frozenset()), error=error)


def agent_resources(name: str) -> dict[str, float]:
    """What a cell of agent ``name`` asks an executor for: the class's ``ray_resources``
    (the text controller asks for a GPU), else one CPU."""
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    return dict(getattr(AGENTS[name][0], "ray_resources", None) or {"num_cpus": 1.0})


# ---------------------------------------------------------------------- saved cells
CELLS_DIR = "cells"
_CELL_FORMAT = 2  # 2: audit and training feedback


def cell_fingerprint(t: Tournament, settings: CellSettings, name: str, seed: int) -> str:
    """What decides a cell's result: tournament content, reward, splits, agent, kwargs, seed."""
    from routing_gym import __version__

    blob = json.dumps({
        "format": _CELL_FORMAT, "routing_gym": __version__, "tournament": t.fingerprint,
        "reward": [settings.reward.name, settings.reward.coefficients, settings.reward.invalid_penalty],
        "splits": [settings.train_split, settings.test_split], "agent": name, "kwargs": settings.agent_kwargs,
        "imports": list(settings.imports), "seed": seed, "audit": settings.audit,
    }, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _cell_stem(name: str, seed: int) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + f"-{seed}"


def save_cell(cells_dir: Path, record: RunRecord, fingerprint: str) -> Path:
    """``<stem>.npz`` (per-query arrays, regret) then ``<stem>.json`` (everything else); both
    written to a temporary name and renamed, the JSON last, so a JSON file means a whole cell."""
    cells_dir.mkdir(parents=True, exist_ok=True)
    stem = _cell_stem(record.method, int(record.seed))
    arrays = {f"per_query__{k}": v for k, v in record.per_query.items()}
    arrays["fingerprint"] = np.array(fingerprint)  # pairs the arrays with their JSON (a crash may split them)
    if record.regret is not None:
        arrays["regret"] = record.regret
    _write_atomic(cells_dir / f"{stem}.npz", lambda handle: np.savez(handle, **arrays))
    meta = {
        "fingerprint": fingerprint, "method": record.method, "seed": record.seed, "kind": record.kind,
        "status": record.status, "feedback": record.feedback, "deployable": record.deployable,
        "training_feedback": record.training_feedback, "audit": record.audit, "fit_s": record.fit_s, "act_s": record.act_s, "overhead": record.overhead, "collapse": record.collapse,
        "metrics": record.metrics.to_dict() if record.metrics is not None else None,
    }
    text = json.dumps(meta, indent=1, default=lambda v: v.item() if isinstance(v, np.generic) else repr(v))
    return _write_atomic(cells_dir / f"{stem}.json", lambda handle: handle.write(text.encode()))


def load_cell(cells_dir: Path, name: str, seed: int, fingerprint: str) -> RunRecord | None:
    """The saved cell, or None when it is missing, partial, or from other settings."""
    stem = _cell_stem(name, seed)
    try:
        meta = json.loads((cells_dir / f"{stem}.json").read_text())
        with np.load(cells_dir / f"{stem}.npz") as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    if (meta.get("fingerprint") != fingerprint or str(arrays.get("fingerprint")) != fingerprint
            or meta.get("method") != name or meta.get("seed") != seed or meta.get("status") != "ok"):
        return None
    metrics = dict(meta["metrics"])
    metrics.pop("invalid_rate", None)
    metrics["per_benchmark"] = [BenchmarkMetrics(**b) for b in metrics["per_benchmark"]]
    return RunRecord(
        name, seed, meta["kind"], meta["status"], feedback=meta["feedback"], deployable=meta["deployable"],
        training_feedback=meta["training_feedback"], audit=meta["audit"], fit_s=meta["fit_s"], act_s=meta["act_s"], metrics=PolicyMetrics(**metrics),
        per_query={k.removeprefix("per_query__"): v for k, v in arrays.items() if k.startswith("per_query__")},
        regret=arrays.get("regret"), overhead=meta["overhead"], collapse=meta.get("collapse"),
    )


def _write_atomic(path: Path, write: Any) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def check_agent_kwargs(agent_kwargs: dict[str, dict[str, Any]], names: Sequence[str]) -> None:
    """Every agent_kwargs entry names an agent of the run and constructs it (agents' own
    constructors validate their values; construction is cheap, models load in ``fit``), so a
    typo fails before any training."""
    from routing_gym_agents import make_agent
    from routing_gym_agents.registry import AGENTS

    unknown = set(agent_kwargs) - set(names)
    if unknown:
        raise RoutingGymError(f"agent_kwargs given for agents not in the run: {sorted(unknown)}")
    for name, kwargs in agent_kwargs.items():
        try:
            make_agent(name, **kwargs)
        except (TypeError, ValueError, RoutingGymError) as exc:
            cls = AGENTS[name][0]
            raise RoutingGymError(f"agent_kwargs (--agent-kwargs) for {name!r}: {exc}; {cls.__name__} accepts: "
                                  f"{', '.join(_constructor_keywords(cls)) or '(no arguments)'}") from None


def _constructor_keywords(cls: type) -> list[str]:
    """Named constructor parameters, following ``**kwargs`` up the class hierarchy."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        forwards = False
        for p in list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]:
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                forwards = True
            elif p.kind != inspect.Parameter.VAR_POSITIONAL and p.name not in names:
                names.append(p.name)
        if not forwards:
            break
    return names


class _Progress:
    """A tqdm bar on a terminal; otherwise one line per finished cell on stderr (in the order
    cells finish), so a log file or a pipe shows how far a long comparison is.
    ``enabled=False`` prints nothing."""

    def __init__(self, total: int, enabled: bool | None):
        self.total, self.count, self.tic = total, 0, time.perf_counter()
        self.enabled = enabled is not False
        self.bar = None
        if self.enabled and (enabled or sys.stderr.isatty()):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="compare", unit="run")

    def done(self, record: RunRecord, label: str = "") -> None:
        self.count += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{label}{record.method} seed {record.seed}")
            self.bar.update()
        elif self.enabled:
            status = "ok" if record.status == "ok" else f"FAILED ({record.error[:120]})"
            # the cell's own fit + act time (cells may run side by side), then the run's wall time
            print(f"compare: [{self.count}/{self.total}] {label}{record.method} seed {record.seed}: {status} in "
                  f"{record.fit_s + record.act_s:.1f} s ({time.perf_counter() - self.tic:.0f} s since start)",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Scorer:
    """Scores actions on the held-out split and turns them into a RunRecord."""

    def __init__(self, t: Tournament, env: RoutingEnv, reward: Reward):
        self.t, self.env, self.reward = t, env, reward
        self.codes = t.benchmark_codes[env.rows]

    def record(self, method: str, seed: int | None, kind: str, actions: np.ndarray, **extra: Any) -> RunRecord:
        result = self.env.evaluate(actions)
        metrics = policy_metrics(result, self.t.model_ids, self.codes, self.t.benchmarks, self.reward.describe())
        per_query = {name: np.asarray(getattr(result, name), dtype=np.float64) for name in PER_QUERY}
        per_query["actions"] = result.actions
        return RunRecord(method, seed, kind, "ok", metrics=metrics, per_query=per_query, **extra)


def _run_agent(name: str, seed: int, settings: CellSettings, t: Tournament, scorer: _Scorer) -> RunRecord:
    from routing_gym_agents import FitContext, make_agent
    from routing_gym_agents.registry import AGENTS

    cls = AGENTS[name][0]
    meta = dict(feedback=str(getattr(cls, "feedback", "")), deployable=not getattr(cls, "privileged", frozenset()))
    regret: list[float] = []
    # Both ride on the training env's step hooks (FitContext.make_env): every bandit-feedback
    # agent, a user's own too, gets a regret curve and collapse tracking with no code of its own.
    tracker = CollapseTracker(n_models=t.n_models, model_ids=list(t.model_ids), window=COLLAPSE_WINDOW)

    def log_regret(step: int, action: int, value: float, info: dict[str, Any]) -> None:
        regret.append(float(info.get("oracle_reward", math.nan)) - float(value))

    def fit_and_act(tournament: Tournament, hooks: list[Any]) -> tuple[Any, Any, dict[str, Any], np.ndarray, float, float]:
        agent = make_agent(name, **settings.agent_kwargs)
        # Privileges are granted exactly as declared, and the row is labelled by them.
        ctx = FitContext(tournament=tournament, reward=settings.reward, train_split=settings.train_split, seed=seed,
                         step_hooks=hooks, progress=False, grants=agent.privileged, feedback=agent.feedback)
        tic = time.perf_counter()
        logs = agent.fit(ctx) or {}
        fit_s = time.perf_counter() - tic
        batch = ObservationBatch.from_tournament(tournament, scorer.env.rows, include_difficulty="difficulty" in agent.privileged)
        tic = time.perf_counter()
        actions = np.asarray(agent.act_batch(batch))
        act_s = time.perf_counter() - tic
        if actions.shape != (len(batch),):
            raise RoutingGymError(f"act_batch returned shape {actions.shape} for {len(batch)} queries; expected ({len(batch)},)")
        return agent, ctx, logs, actions, fit_s, act_s

    fit_s = act_s = 0.0
    try:
        agent, ctx, logs, actions, fit_s, act_s = fit_and_act(t, [log_regret, tracker])
        meta["deployable"] = agent.deployable
        curve = np.asarray(regret if regret else logs.get("regret", []), dtype=np.float64)
        record = scorer.record(
            name, seed, "agent", actions, fit_s=fit_s, act_s=act_s, training_feedback=ctx.training_feedback,
            regret=curve if curve.size else None, overhead=_read_overhead(agent, logs, len(actions)),
            collapse=strict_json(tracker.summary()) if tracker.n_steps else None, **meta,
        )
        record.audit = _audit(agent, settings, t, actions, seed, lambda copy: fit_and_act(copy, [])[3])
        return record
    except Exception as exc:  # one agent's bug must not sink the comparison
        frames = traceback.extract_tb(exc.__traceback__)[-4:]
        return RunRecord(
            name, seed, "agent", "failed", fit_s=fit_s, act_s=act_s, **meta,
            error=f"{type(exc).__name__}: {exc}",
            # Two path parts only: enough to find the line, and no machine-specific prefix.
            traceback=[f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno} in {f.name}: {f.line}" for f in frames],
        )


def _audit(agent: Any, settings: CellSettings, t: Tournament, actions: np.ndarray, seed: int,
           rerun: Any) -> dict[str, Any] | None:
    """The cell's audit (``routing_gym.eval.audit``), for rows that claim to be deployable."""
    if not agent.deployable:
        return None
    if not settings.audit:
        return audit.AuditResult(audit.OFF, reason="audit off").to_dict()
    if agent.audit_skip_reason:
        return audit.AuditResult(audit.SKIPPED, reason=agent.audit_skip_reason).to_dict()
    return audit.audit_actions(rerun, t, actions, settings.test_split, seed).to_dict()


def _read_overhead(agent: Any, logs: dict[str, Any], n: int) -> dict[str, float]:
    """The documented overhead hook (module docstring): per-query means by name."""
    out: dict[str, float] = {}
    sources = [("fit_overhead_", logs.get("overhead")), ("overhead_", getattr(agent, "overhead", None))]
    for prefix, source in sources:
        if callable(source):
            source = source()
        if not isinstance(source, dict):
            continue
        for key, value in source.items():
            arr = np.asarray(value, dtype=np.float64).reshape(-1)
            if arr.size not in (1, n) and prefix == "overhead_":
                raise RoutingGymError(f"agent overhead {key!r} has {arr.size} values for {n} routed queries")
            out[f"{prefix}{key}"] = float(arr.mean()) if arr.size else math.nan
    return out


# ---------------------------------------------------------------------- aggregation
def _aggregate(config: CompareConfig, t: Tournament, reward: Reward, test_rows: np.ndarray, runs: list[RunRecord]) -> CompareResult:
    methods = list(dict.fromkeys(r.method for r in runs))
    rows, per_benchmark, pooled = [], [], {}
    for method in methods:
        mine = [r for r in runs if r.method == method]
        ok = [r for r in mine if r.status == "ok"]
        row: dict[str, Any] = {
            "method": method, "kind": mine[0].kind, "feedback": mine[0].feedback,
            "deployable": mine[0].deployable, "seeds_ok": len(ok), "seeds_failed": len(mine) - len(ok),
        }
        if mine[0].kind == "agent":
            row.update(audit.row_fields(mine[0].deployable, [r.audit for r in ok], [r.training_feedback for r in ok]))
            if not ok:  # nothing ran to verify
                row["deployable_label"] = "no" if not mine[0].deployable else "—"
        else:
            row.update(deployable_label="yes", training_feedback="")
        if ok:
            pooled[method] = {k: np.mean([r.per_query[k] for r in ok], axis=0) for k in PER_QUERY}
            for metric in _CI_METRICS:
                spread = seed_spread([r.metrics.scalars()[metric] for r in ok])
                row.update({metric: spread["mean"], f"{metric}_seed_sd": spread["sd"]})
            for metric in ("selection_entropy", "top1_share", "invalid_count"):
                row[metric] = float(np.mean([r.metrics.scalars()[metric] for r in ok]))
            selection = pd.DataFrame([r.metrics.selection for r in ok]).mean(axis=0)
            row["top1_model"] = str(selection.idxmax())
            row["selection"] = {m: float(v) for m, v in selection.items()}
            row["fit_s"] = float(np.mean([r.fit_s for r in ok]))
            row["act_ms_per_query"] = float(np.mean([r.act_ms_per_query for r in ok]))
            overhead = pd.DataFrame([r.overhead for r in ok])
            row.update({k: float(v) for k, v in overhead.mean(axis=0).items()})
            bench = pd.DataFrame([{**b.to_dict(), "seed": r.seed} for r in ok for b in r.metrics.per_benchmark])
            for b, group in bench.groupby("benchmark", sort=True):
                entry = {"method": method, "benchmark": b, "n": int(group["n"].iloc[0])}
                entry.update({c: float(group[c].mean()) for c in ("accuracy", "mean_energy_j", "energy_share", "mean_latency_s", "mean_reward")})
                per_benchmark.append(entry)
        else:
            row["error"] = mine[0].error
        rows.append(row)

    by_method = {r["method"]: r for r in rows}
    resampled = _resample(config, t, test_rows, pooled)
    for method, boot in resampled["methods"].items():
        low, high = percentile_interval(boot, config.confidence)
        for j, metric in enumerate(_CI_METRICS):
            by_method[method].update({f"{metric}_ci_low": float(low[j]), f"{metric}_ci_high": float(high[j])})
    hull = _hull_gains(config, t, test_rows, by_method, resampled)

    pareto = _pareto(rows, t, test_rows)
    pareto["hull"] = hull
    for r in rows:
        if r["seeds_ok"]:
            r["hypervolume"] = hypervolume([r["accuracy"]], [r["mean_energy_j"]], pareto["reference"]["energy_j"],
                                           pareto["reference"]["accuracy"], normalise=True)
    dominance = _dominance(config, t, test_rows, by_method, resampled["methods"])
    regret = _regret_curves(runs, t, reward, config.train_split)
    return CompareResult(config, t, reward, test_rows, runs, rows, per_benchmark, dominance, pareto, regret)


_ACC, _J = list(_CI_METRICS).index("accuracy"), list(_CI_METRICS).index("mean_energy_j")


def _resample(config: CompareConfig, t: Tournament, test_rows: np.ndarray,
              pooled: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Every resampled mean the run reports, from one pass over one set of resamples: per
    method ``[B, len(_CI_METRICS)]``, and the fixed models' accuracy and joules ``[B, K]``."""
    plan = BootstrapPlan(len(test_rows), config.n_bootstrap, config.bootstrap_seed)
    k, width = t.n_models, len(_CI_METRICS)
    blocks = [np.stack([pooled[m][_CI_METRICS[c]] for c in _CI_METRICS], axis=1) for m in pooled]
    blocks += [t.correct[test_rows], t.energy_j[test_rows]]
    boot = plan.means(np.concatenate(blocks, axis=1))
    return {
        "methods": {m: boot[:, i * width:(i + 1) * width] for i, m in enumerate(pooled)},
        "fixed_accuracy": boot[:, -2 * k:-k],
        "fixed_energy_j": boot[:, -k:],
    }


def _hull_gains(config: CompareConfig, t: Tournament, test_rows: np.ndarray, by_method: dict[str, dict[str, Any]],
                resampled: dict[str, Any]) -> dict[str, Any]:
    """The fixed-model hull on the test split, and each method's routing gain (pp) and joules
    saved (%) with paired intervals (hull and method recomputed on the same resamples)."""
    fixed_acc, fixed_j = t.correct[test_rows].mean(axis=0), t.energy_j[test_rows].mean(axis=0)
    hull = fixed_hull.fixed_model_hull(fixed_j, fixed_acc)
    boot_acc, boot_j = resampled["fixed_accuracy"], resampled["fixed_energy_j"]
    for method, boot in resampled["methods"].items():
        row = by_method[method]
        acc, joules = row["accuracy"], row["mean_energy_j"]
        values = {
            "routing_gain_pp": (100 * fixed_hull.routing_gain(fixed_j, fixed_acc, joules, acc),
                                100 * fixed_hull.routing_gain(boot_j, boot_acc, boot[:, _J], boot[:, _ACC]),
                                hull.gain_position(joules)),
            "joules_saved_pct": (100 * fixed_hull.joules_saved(fixed_j, fixed_acc, joules, acc),
                                 100 * fixed_hull.joules_saved(boot_j, boot_acc, boot[:, _J], boot[:, _ACC]),
                                 hull.saving_position(acc)),
        }
        for name, (point, boot_values, position) in values.items():
            low, high = percentile_interval(boot_values, config.confidence)
            row.update({name: _snap(point), f"{name}_ci_low": _snap(low), f"{name}_ci_high": _snap(high),
                        f"{name}_vs": position})
    return {
        "models": [t.model_ids[i] for i in hull.vertex_index],
        "energy_j": hull.energy_j.tolist(),
        "accuracy": hull.accuracy.tolist(),
        "max_fixed_energy_j": float(fixed_j.max()),
        "rule": HULL_RULE,
    }


def _snap(value: float) -> float:
    """0.0 for float dust (a hull vertex's own gain is 0 up to rounding; no '-0.0' in tables)."""
    return 0.0 if abs(value) < 1e-9 else float(value)


def _dominance(config: CompareConfig, t: Tournament, test_rows: np.ndarray, by_method: dict[str, dict[str, Any]],
               resampled: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The strict paired dominance test for every ordered pair of methods, on the shared resamples."""
    # Float-dust tolerance per axis: about the largest per-query value of the split.
    scale = (float(np.abs(t.correct[test_rows]).max()), float(np.abs(t.energy_j[test_rows]).max()))
    out = []
    for a, boot_a in resampled.items():
        for b, boot_b in resampled.items():
            if a != b:
                point = lambda m: (by_method[m]["accuracy"], by_method[m]["mean_energy_j"])  # noqa: E731
                test = dominance_from_resamples(boot_a[:, [_ACC, _J]], boot_b[:, [_ACC, _J]], point(a), point(b),
                                                config.confidence, scale=scale)
                out.append({"a": a, "b": b, **test.to_dict()})
    return out


def _pareto(rows: list[dict[str, Any]], t: Tournament, test_rows: np.ndarray) -> dict[str, Any]:
    ok = [r for r in rows if r["seeds_ok"]]
    # The reference is tied to the pool, not to the methods run, so hypervolumes of runs
    # with different agent sets stay comparable.
    max_fixed_j = float(t.energy_j[test_rows].mean(axis=0).max())
    reference = {"accuracy": 0.0, "energy_j": HV_REFERENCE_FACTOR * max_fixed_j,
                 "rule": f"accuracy 0, {HV_REFERENCE_FACTOR} x the largest fixed-model mean joules on the split"}
    out: dict[str, Any] = {"reference": reference}
    groups = {
        "fixed_models": [r for r in ok if r["kind"] == "fixed-model"],
        "deployable": [r for r in ok if r["deployable"]],
        "all": ok,
    }
    for label, members in groups.items():
        if not members:
            continue
        acc = np.array([r["accuracy"] for r in members])
        joules = np.array([r["mean_energy_j"] for r in members])
        front = pareto_front(acc, joules)
        out[f"front_{label}"] = [members[i]["method"] for i in front]
        out[f"hypervolume_{label}"] = hypervolume(acc, joules, reference["energy_j"], reference["accuracy"], normalise=True)
    return out


def _regret_curves(runs: list[RunRecord], t: Tournament, reward: Reward, train_split: str) -> dict[str, dict[str, Any]]:
    """Cumulative online regret per method (mean, min, max over seeds), the per-decision
    regret smoothed over a trailing window (mean over seeds), and the expected regret of a
    uniformly random router on the same training queries as a reference."""
    matrix = reward.matrix(t, t.split_rows(train_split))
    random_step = float((matrix.max(axis=1) - matrix.mean(axis=1)).mean())
    curves: dict[str, dict[str, Any]] = {}
    for method in dict.fromkeys(r.method for r in runs):
        regrets = [r.regret for r in runs if r.method == method and r.status == "ok" and r.regret is not None]
        if not regrets:
            continue
        length = min(len(r) for r in regrets)
        cumulative = np.stack([np.cumsum(r[:length]) for r in regrets])
        mean = cumulative.mean(axis=0)
        window = max(1, length // 20)
        lagged = np.concatenate([np.zeros(window), mean[:-window]]) if length > window else np.zeros(length)
        curves[method] = {
            "steps": np.arange(1, length + 1),
            "mean": mean,
            "min": cumulative.min(axis=0),
            "max": cumulative.max(axis=0),
            # per-decision regret averaged over the last `window` decisions (fewer at the start)
            "smoothed_per_step": (mean - lagged) / np.minimum(np.arange(1, length + 1), window),
            "window": window,
            "random_per_step": random_step,
            "final_mean": float(cumulative[:, -1].mean()) if length else math.nan,
            "n_seeds": len(regrets),
        }
    return curves


# ---------------------------------------------------------------------- outputs
def write_outputs(result: CompareResult, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write results.json, summary.csv, per_seed.csv, per_benchmark.csv, dominance.csv,
    table.md and (with ``plots``) pareto.png, selection.png, regret.png; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("results.json", "summary.csv", "per_seed.csv", "per_benchmark.csv", "dominance.csv", "table.md")}

    summary = pd.DataFrame([{k: v for k, v in r.items() if k != "selection"} for r in result.rows])
    summary.to_csv(paths["summary.csv"], index=False)
    per_seed = []
    for r in result.runs:
        entry = {"method": r.method, "seed": r.seed, "kind": r.kind, "status": r.status, "fit_s": r.fit_s,
                 "act_ms_per_query": r.act_ms_per_query, "error": r.error}
        if r.metrics is not None:
            entry.update(r.metrics.scalars())
            entry.update({f"share_{m}": v for m, v in r.metrics.selection.items()})
        entry.update(r.overhead)
        if r.collapse is not None:  # online agents: did training collapse onto one model, and when
            entry.update({f"collapse_{k}": r.collapse[k] for k in ("collapsed", "collapse_step", "collapsed_onto", "final_top1_share")})
        per_seed.append(entry)
    pd.DataFrame(per_seed).to_csv(paths["per_seed.csv"], index=False)
    pd.DataFrame(result.per_benchmark).to_csv(paths["per_benchmark.csv"], index=False)
    pd.DataFrame(result.dominance).to_csv(paths["dominance.csv"], index=False)

    payload = {
        "settings": result.settings(),
        "rows": result.rows,
        "per_benchmark": result.per_benchmark,
        "pareto": result.pareto,
        "significant_dominance": [d for d in result.dominance if d["dominates"]],
        "regret": {m: _downsample(c) for m, c in result.regret.items()},
        "runs": [r.to_dict() for r in result.runs],
        "failures": [r.to_dict() for r in result.failures],
    }
    paths["results.json"].write_text(json.dumps(strict_json(payload), indent=1, allow_nan=False))
    paths["table.md"].write_text(markdown_report(result))
    if plots:
        from routing_gym.eval.plots import plot_pareto, plot_regret, plot_selection

        paths["pareto.png"] = plot_pareto(result, out / "pareto.png")
        paths["selection.png"] = plot_selection(result, out / "selection.png")
        if result.regret:
            paths["regret.png"] = plot_regret(result, out / "regret.png")
    return paths


def _downsample(curve: dict[str, Any]) -> dict[str, Any]:
    length = len(curve["steps"])
    idx = np.unique(np.linspace(0, length - 1, min(length, _CURVE_POINTS)).round().astype(int)) if length else np.array([], int)
    return {k: (np.round(v[idx], 4).tolist() if isinstance(v, np.ndarray) else v) for k, v in curve.items()}


# ---------------------------------------------------------------------- Markdown
def _ci(row: dict[str, Any], metric: str, fmt: str, scale: float = 1.0) -> str:
    if metric not in row:
        return "—"
    value, low, high = (row[metric] * scale, row[f"{metric}_ci_low"] * scale, row[f"{metric}_ci_high"] * scale)
    return format(value, fmt) + f" [{format(low, fmt)}, {format(high, fmt)}]"


def markdown_report(result: CompareResult) -> str:
    """The paper's Table 2 shape plus notes, per-benchmark energy shares, Pareto and failures."""
    s = result.settings()
    reward = result.reward.describe()
    overhead_cols = sorted({k for r in result.rows for k in r if k.startswith(("overhead_", "fit_overhead_"))})
    header = ["Method", "Deployable", "Training feedback", "Accuracy % [95% CI]", "Mean J [95% CI]", "Routing gain pp [95% CI]",
              "Joules saved % [95% CI]", "Latency s", "Power W",
              "Top-1 share", f"Reward {reward} [95% CI]", "Invalid"] + [c.replace("overhead_", "overhead ").replace("fit_", "fit ") for c in overhead_cols]
    lines = [
        f"# Held-out comparison on {s['tournament']['name']}",
        "",
        f"{s['tournament']['n_test']} held-out queries ({s['tournament']['test_split']}), trained on "
        f"{s['tournament']['n_train']} ({s['tournament']['train_split']}); energy provenance: "
        f"{s['tournament']['provenance']}; {len(s['seeds'])} seed(s) per agent; {_duplicates_note(s)}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for r in result.rows:
        name = r["method"] + ("" if r["kind"] == "fixed-model" or r["seeds_failed"] == 0 else f" ({r['seeds_ok']}/{r['seeds_ok'] + r['seeds_failed']} seeds)")
        deployable = r.get("deployable_label", "yes" if r["deployable"] else "no")
        feedback = r.get("training_feedback") or "—"
        if not r["seeds_ok"]:
            lines.append(f"| {name} | {deployable} | {feedback} | failed: {r.get('error', '')[:80]} |" + " |" * (len(header) - 4))
            continue
        cells = [
            name, deployable, feedback,
            _ci(r, "accuracy", ".1f", 100.0), _ci(r, "mean_energy_j", ",.1f"),
            _ci(r, "routing_gain_pp", "+.1f") + _outside_hull(r, "routing_gain_pp"),
            _ci(r, "joules_saved_pct", "+.1f") + _outside_hull(r, "joules_saved_pct"),
            f"{r['mean_latency_s']:.2f}", f"{r['mean_power_w']:.0f}",
            f"{r['top1_share']:.2f} ({r['top1_model']})", _ci(r, "mean_reward", ".3f"),
            f"{r['invalid_count']:g}",
        ] + [f"{r[c]:.4g}" if c in r and not math.isnan(r[c]) else "—" for c in overhead_cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Notes. Reward: mean {reward} per held-out query, the same coefficients for every row (rewards under "
        f"other coefficients are different metrics). Intervals: {s['intervals']}. Agent rows are means over "
        f"seeds (per-seed spread in summary.csv, `*_seed_sd`); 'always <model>' rows are the fixed models "
        f"computed directly from the table. Routing gain and joules saved: against the fixed-model hull "
        f"({s['hull']}); {_OUTSIDE_MARKS}. "
        f"Invalid: invalid actions per evaluation pass ({s['invalid_actions']}). "
        f"Top-1 share: share of queries sent to the most used model (collapse indicator). Deployable: 'no' for "
        f"methods that declare held-out information (oracle, output-informed diagnostics); {_audit_note(result)}. "
        f"Training feedback: 'bandit' (only the chosen route's outcome, through the training env), 'full "
        f"information' (every model's outcome on the training queries: legitimate training data, declared or read).",
        "",
    ]
    lines += [f"**Warning: {w}.**" for w in result.warnings] + ([""] if result.warnings else [])
    lines += _markdown_hull(result)
    lines += _markdown_benchmarks(result)
    lines += _markdown_pareto(result)
    if result.failures:
        lines += ["## Failures", ""]
        grouped: dict[tuple[str, str], list[RunRecord]] = {}
        for f in result.failures:
            grouped.setdefault((f.method, f.error), []).append(f)
        for (method, error), records in grouped.items():
            lines.append(f"- **{method}** seed(s) {', '.join(str(r.seed) for r in records)}: `{error}`")
            lines += [f"  - `{frame}`" for frame in records[0].traceback[-2:]]
        lines.append("")
    return "\n".join(lines)


_OUTSIDE_MARK = {fixed_hull.CHEAPER_THAN_HULL: " (vs cheapest)", fixed_hull.COSTLIER_THAN_HULL: " (vs most accurate)",
                 fixed_hull.LESS_ACCURATE_THAN_HULL: " (vs cheapest)", fixed_hull.MORE_ACCURATE_THAN_HULL: " (vs most accurate)"}
_OUTSIDE_MARKS = ("'(vs cheapest)' / '(vs most accurate)': the method lies outside the hull's range and is compared "
                  "with that end point of the hull")


def _outside_hull(row: dict[str, Any], metric: str) -> str:
    return _OUTSIDE_MARK.get(row.get(f"{metric}_vs", fixed_hull.WITHIN), "")


def _markdown_hull(result: CompareResult) -> list[str]:
    """The hull's vertices and which methods sit above or below it beyond query noise."""
    hull = result.pareto.get("hull")
    if not hull:
        return []
    conf = f"{result.config.confidence:.0%}"
    vertices = " → ".join(f"{m} ({j:,.1f} J, {100 * a:.1f} %)" for m, j, a in zip(hull["models"], hull["energy_j"], hull["accuracy"]))
    agents = [r for r in result.rows if r["seeds_ok"] and r["kind"] != "fixed-model"]
    above = [r for r in agents if r["routing_gain_pp_ci_low"] > 0]
    below = [r["method"] for r in agents if r["routing_gain_pp_ci_high"] < 0]
    verified = [r["method"] for r in above if r.get("deployable_label") == "yes"]
    unverified = [r["method"] for r in above if r["deployable"] and r.get("deployable_label") != "yes"]
    excluded = [f"{r['method']} ({r.get('deployable_label', 'no')})" for r in above if not r["deployable"]]
    return [
        "## Routing gain over the fixed-model hull", "",
        f"Hull (random mixes of fixed models; flat beyond the most accurate one): {vertices}.", "",
        f"- routes (gain {conf} CI above 0, deployable and verified by the audit): {', '.join(verified) or 'none'}",
        *([f"- routes, not verified (audit off or skipped): {', '.join(unverified)}"] if unverified else []),
        *([f"- above the hull but not deployable: {', '.join(excluded)}"] if excluded else []),
        f"- below the hull (gain {conf} CI below 0): {', '.join(below) or 'none'}",
        f"- not distinguishable from mixing fixed models: "
        f"{', '.join(r['method'] for r in agents if r not in above and r['method'] not in below) or 'none'}",
        "",
    ]


def _duplicates_note(settings: dict[str, Any]) -> str:
    d = settings["tournament"]["duplicates"]
    return (f"cross-split duplicate questions: {d['cross_split_texts']} (normalised texts in more than one split; "
            f"{sum(d['within'].values())} extra copies within splits)")


def _audit_note(result: CompareResult) -> str:
    """What the audit did and what it cost (the second fit + act of every audited cell)."""
    if not result.config.audit:
        return "the audit was off (--no-audit): no row is verified, so none says 'yes'"
    runs = [r for r in result.runs if r.audit and r.audit["status"] in (audit.PASSED, audit.FAILED)]
    seconds = sum(r.audit["seconds"] for r in runs)
    first = sum(r.fit_s + r.act_s for r in runs)
    return (f"'yes' only after the audit: each agent fit and run again on a copy whose held-out outcomes are "
            f"replaced (permuted across held-out queries, shifted one model along), any changed action gives "
            f"'{audit.FAILED_LABEL}'; it cost {seconds:.1f} s over {len(runs)} cells "
            f"(the first fit + act: {first:.1f} s)")


def _markdown_benchmarks(result: CompareResult) -> list[str]:
    if not result.per_benchmark:
        return []
    frame = pd.DataFrame(result.per_benchmark)
    benchmarks = sorted(frame["benchmark"].unique())
    counts = frame.groupby("benchmark")["n"].first()
    n_total = counts.sum()
    lines = ["## Per benchmark: accuracy % / share of the method's total joules %", "",
             "| Method | " + " | ".join(f"{b} (n={counts[b]}, {counts[b] / n_total:.0%} of queries)" for b in benchmarks) + " |",
             "|---|" + "---:|" * len(benchmarks)]
    for method, group in frame.groupby("method", sort=False):
        by = group.set_index("benchmark")
        cells = [f"{100 * by.loc[b, 'accuracy']:.1f} / {100 * by.loc[b, 'energy_share']:.1f}" if b in by.index else "—" for b in benchmarks]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines + [""]


def _markdown_pareto(result: CompareResult) -> list[str]:
    p = result.pareto
    ref = p["reference"]
    lines = ["## Pareto analysis (accuracy up, mean joules down)", "",
             f"Hypervolume reference point: {ref['rule']} = ({ref['accuracy']:g}, {ref['energy_j']:,.1f} J); "
             "hypervolumes are normalised by the box [0, reference J] x [reference accuracy, 1].", ""]
    for label, title in (("fixed_models", "fixed models only"), ("deployable", "deployable methods (incl. fixed models)"), ("all", "all methods")):
        if f"front_{label}" in p:
            lines.append(f"- {title}: hypervolume {p[f'hypervolume_{label}']:.4f}; front: {', '.join(p[f'front_{label}'])}")
    conf = f"{result.config.confidence:.0%}"
    lines += ["", f"Paired bootstrap Pareto dominance: A dominates B when, in >= {conf} of query resamples, A is "
              "better on one axis and not worse on the other; 'tied on' names the other axis when A is not also "
              f"better on it at {conf} (every pair with its deltas and probabilities in dominance.csv):", ""]
    beaten: dict[tuple[str, str], list[str]] = {}
    for d in result.dominance:
        if d["dominates"]:
            beaten.setdefault((d["a"], d["tied_axis"]), []).append(d["b"])
    tie_text = {"": "dominates on both axes", "accuracy": "dominates, tied on accuracy",
                "energy_j": "dominates, tied on joules"}
    for (method, tied), losers in beaten.items():
        lines.append(f"- {method} {tie_text[tied]}: {', '.join(losers)}")
    if not beaten:
        lines.append("- no method significantly dominates another")
    return lines + [""]
