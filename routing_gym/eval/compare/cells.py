"""``compare``'s cells: one agent x seed, trained on the training split and scored on held-out.

For each agent x seed (``run_cell``): ``make_agent(name, **kwargs)``, ``fit`` on the training
split (bandit agents learn online through ``RoutingEnv``; the regret of every online decision
is logged through ``FitContext.step_hooks``), ``act_batch`` on the held-out split, and score
with ``RoutingEnv.evaluate`` under one common reward (``Scorer``, which also gives the
"always <model>" rows).

An agent whose fit ignores the seed (``Agent.seed_dependent = False``) runs one cell; its
other seeds get that cell's record (``shared_seed``; ``CompareJob``), audit included.

``run_cell`` is a top-level function, so an executor can run it in this process, a spawned
process pool or Ray tasks (``routing_gym.eval.execution.executors``). A finished cell is saved under
``cells/`` keyed by a fingerprint of what decides it (``cell_fingerprint``, ``save_cell``,
``load_cell``), so a rerun reuses it.

Robustness: an action outside ``[0, K)`` (or a non-integer one) is charged the invalid
penalty and counted; an agent that raises becomes a failed ``RunRecord`` with a traceback
summary and the other cells still run.

Router overhead hook: after ``act_batch``, the cell reads ``agent.overhead`` if the agent has
it: a dict, or a method returning one, mapping a name (e.g. ``"decode_s"``, ``"energy_j"``,
``"tokens"``) to a per-query array or a per-query mean for the held-out batch just routed.
``fit`` logs may carry the same under ``"overhead"`` (training-time overhead). Each name
becomes a column ``overhead_<name>`` (``fit_overhead_<name>``). The cell always measures
``act_ms_per_query`` (wall time of ``act_batch`` per query) and ``fit_s`` itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import traceback
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from routing_gym.envs import Reward, RoutingEnv
from routing_gym.envs.rewards import DEFAULT_COEFFICIENTS, DEFAULT_INVALID_PENALTY, gate_reported
from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.eval.collapse import CollapseTracker
from routing_gym.eval.core.jsonsafe import strict_json
from routing_gym.eval.core.metrics import BenchmarkMetrics, PolicyMetrics, policy_metrics
from routing_gym.eval.execution import audit, audit_process
from routing_gym.eval.execution.executors import DEFAULT_MAX_RETRIES
from routing_gym.eval.execution.fitting import fit_and_act
from routing_gym.plugins import import_user_module
from routing_gym.tournament import Tournament


# The default set: every Table 2 baseline that trains in seconds on 2 cores. Names not
# registered (yet) are skipped when the default is used; named explicitly, they are an error.
DEFAULT_AGENTS = (
    "fixed-smallest",
    "fixed-medium",
    "fixed-largest",
    "per-benchmark",
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
    "irt",
    "mf",
    "gbdt",
)
# Output-informed diagnostics join the default set only on tournaments that log answer texts.
DEFAULT_OUTPUT_INFORMED = ("smoothie",)
FIXED_PREFIX = "always "
PER_QUERY = ("correct", "energy_j", "latency_s", "mean_power_w", "rewards")
COLLAPSE_WINDOW = 200  # online decisions per collapse window (threshold: the tracker's default)
MIN_BOOTSTRAP = 10


@dataclass
class CompareConfig:
    """Settings of one comparison; every field has the default ``routing-gym compare`` uses."""

    tournament: Any = "default"  # Tournament, directory or preset name
    agents: Sequence[str] | None = None  # None: the registered names of DEFAULT_AGENTS
    seeds: int | Sequence[int] = 5  # a count (seeds 0..n-1) or explicit seeds
    reward: str = "gated_rank"
    coefficients: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_COEFFICIENTS))
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    allow_ungated: bool = False  # study coefficients that break the reward's gate (--allow-ungated)
    train_split: str = "train"
    test_split: str = "test"
    agent_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> constructor kwargs
    fixed_models: bool = True  # add an "always <model>" row for every model of the pool
    n_bootstrap: int = 2000
    confidence: float = 0.95
    bootstrap_seed: int = 0
    # None: a tqdm bar on a terminal, one line per finished run on stderr otherwise
    progress: bool | None = None
    # where cells run (``routing_gym.eval.execution.executors``); none of these changes any number
    executor: str = "local"  # local | process | ray
    workers: int | None = None  # process pool size / local Ray CPUs (None: every CPU)
    ray_address: str | None = None  # None: RAY_ADDRESS, else a local Ray
    max_retries: int = DEFAULT_MAX_RETRIES  # further attempts of a cell whose worker process died
    imports: Sequence[str] = ()  # modules every worker imports first (e.g. ones registering agents)
    audit: bool = True  # fit and run each deployable agent again on held-out outcomes replaced (eval/execution/audit.py)

    @property
    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, int):
            if self.seeds < 1:
                raise UsageError(f"seeds (--seeds) must be >= 1, got {self.seeds}")
            return list(range(self.seeds))
        seeds = [int(s) for s in self.seeds]
        if not seeds:
            raise UsageError("seeds is empty")
        return seeds

    def check(self) -> None:
        """Settings that need no tournament; raises ``RoutingGymError`` naming the option."""
        self.seed_list
        if self.n_bootstrap < MIN_BOOTSTRAP:
            raise UsageError(f"n_bootstrap (--bootstrap) must be >= {MIN_BOOTSTRAP}, got {self.n_bootstrap}")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"workers (--workers) must be >= 1, got {self.workers}")
        if self.max_retries < 0:
            raise UsageError(f"max_retries (--max-retries) must be >= 0, got {self.max_retries}")
        for name, kwargs in self.agent_kwargs.items():
            if not isinstance(kwargs, dict):
                raise UsageError(f"agent_kwargs (--agent-kwargs) for {name!r}: expected an object of keyword "
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


def resolve_agent_names(agents: Sequence[str] | None, has_output_text: bool = False) -> list[str]:
    """Explicit names must be registered (the error lists those that are); ``None`` means
    the registered subset of ``DEFAULT_AGENTS`` (plus ``DEFAULT_OUTPUT_INFORMED`` when the
    tournament logs answer texts)."""
    from routing_gym_agents import list_agents

    registered = list_agents()
    defaults = [a for a in DEFAULT_AGENTS + (DEFAULT_OUTPUT_INFORMED if has_output_text else ()) if a in registered]
    if agents is None:
        if not defaults:
            raise UsageError(f"none of the default agents is registered; registered: {', '.join(registered) or '(none)'}")
        return defaults
    # "default" inside a list expands to the default set, e.g. "default,ppo,dqn".
    expanded = [d for a in agents for d in (defaults if a.strip() == "default" else [a.strip()])]
    names = list(dict.fromkeys(a for a in expanded if a))
    unknown = [name for name in names if name not in registered]
    if unknown:
        from routing_gym_agents.registry import unknown_agent_error

        raise unknown_agent_error(unknown)  # every unknown name, the closest names and the --import hint
    if not names:
        raise UsageError("no agents given")
    return names


@dataclass(frozen=True)
class CellSettings:
    """Everything one cell needs besides the tournament (small: shipped with each task)."""

    reward: Reward
    train_split: str
    test_split: str
    agent_kwargs: dict[str, Any]  # this cell's agent only
    imports: tuple[str, ...] = ()  # modules to import first (e.g. ones that register agents)
    audit: bool = True
    # names and directories that gave the tournament in the driver: the audit's process reads them as the copy
    aliases: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def run_cell(t: Tournament, settings: CellSettings, name: str, seed: int) -> RunRecord:
    """One agent x seed, trained and scored: the unit an executor runs (top-level, picklable)."""
    from routing_gym_agents.registry import load_plugins

    load_plugins()  # a fresh worker process has registered nothing yet
    for module in settings.imports:
        import_user_module(module)
    reward = settings.reward
    with gate_reported():  # CompareJob checked the gate on the whole tournament and reported it once
        env = scoring_env(t, settings.test_split, reward)
        return _run_agent(name, seed, settings, t, Scorer(t, env, reward))


def scoring_env(t: Tournament, split: str, reward: Reward) -> RoutingEnv:
    return RoutingEnv(
        tournament=t, split=split, reward=reward.name, coefficients=reward.coefficients,
        invalid_penalty=reward.invalid_penalty, allow_ungated=reward.allow_ungated, invalid_action="penalize",
        order="sequential",
    )


def failed_record(name: str, seed: int, error: str) -> RunRecord:
    from routing_gym_agents.registry import AGENTS

    cls = AGENTS[name][0]
    return RunRecord(name, seed, "agent", "failed", feedback=str(getattr(cls, "feedback", "")),
                     deployable=not getattr(cls, "privileged", frozenset()), error=error)


def agent_seed_dependent(name: str) -> bool:
    """False when agent ``name`` declares that its fit ignores the seed (``Agent.seed_dependent``)."""
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    return bool(getattr(AGENTS[name][0], "seed_dependent", True))


def shared_seed(record: RunRecord, seed: int) -> RunRecord:
    """A seed-free agent's cell (fitted, run and audited once) as the record of ``seed``: the same
    actions, scores and audit; ``fit_s``, ``act_s`` and ``audit_s`` are those of the one run."""
    return replace(record, seed=seed, audit=dict(record.audit) if record.audit is not None else None)


def agent_resources(name: str) -> dict[str, float]:
    """What a cell of agent ``name`` asks an executor for: the class's ``ray_resources``
    (the text controller asks for a GPU), else one CPU."""
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    return dict(getattr(AGENTS[name][0], "ray_resources", None) or {"num_cpus": 1.0})


# ---------------------------------------------------------------------- saved cells
CELLS_DIR = "cells"
_CELL_FORMAT = 3  # 2: audit and training feedback; 3: the audit runs in its own process


def cell_fingerprint(t: Tournament, settings: CellSettings, name: str, seed: int) -> str:
    """What decides a cell's result: tournament content, which split each row is in (two folds
    or split seeds share ``t.fingerprint``), reward, split names, agent, kwargs, seed."""
    from routing_gym import __version__

    blob = json.dumps({
        "format": _CELL_FORMAT, "routing_gym": __version__, "tournament": t.fingerprint,
        "split_assignment": t.split_fingerprint,
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
        "training_feedback": record.training_feedback, "audit": record.audit,
        "fit_s": record.fit_s, "act_s": record.act_s, "overhead": record.overhead, "collapse": record.collapse,
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
        training_feedback=meta["training_feedback"], audit=meta["audit"],
        fit_s=meta["fit_s"], act_s=meta["act_s"], metrics=PolicyMetrics(**metrics),
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

    unknown = set(agent_kwargs) - set(names)
    if unknown:
        raise UsageError(f"agent_kwargs given for agents not in the run: {sorted(unknown)}")
    for name, kwargs in agent_kwargs.items():
        try:
            make_agent(name, **kwargs)
        except (TypeError, ValueError, RoutingGymError) as exc:  # an unknown keyword names what the agent accepts
            raise UsageError(f"agent_kwargs (--agent-kwargs) for {name!r}: {exc}") from None


class Scorer:
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


def _run_agent(name: str, seed: int, settings: CellSettings, t: Tournament, scorer: Scorer) -> RunRecord:
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

    fit_s = act_s = 0.0
    try:
        fitted = fit_and_act(name, settings.agent_kwargs, settings.reward, settings.train_split, seed, t,
                             scorer.env.rows, [log_regret, tracker])
        agent, ctx, logs, actions, fit_s, act_s = (fitted.agent, fitted.ctx, fitted.logs, fitted.actions,
                                                   fitted.fit_s, fitted.act_s)
        meta["deployable"] = agent.deployable
        curve = np.asarray(regret if regret else logs.get("regret", []), dtype=np.float64)
        record = scorer.record(
            name, seed, "agent", actions, fit_s=fit_s, act_s=act_s, training_feedback=ctx.training_feedback,
            regret=curve if curve.size else None, overhead=_read_overhead(agent, logs, len(actions)),
            collapse=strict_json(tracker.summary()) if tracker.n_steps else None, **meta,
        )
        # The audit: the same agent and seed again, on held-out outcomes replaced (eval/execution/audit.py).
        record.audit = _audit(name, agent, settings, t, actions, seed)
        return record
    except Exception as exc:  # one agent's bug must not sink the comparison
        frames = traceback.extract_tb(exc.__traceback__)[-4:]
        return RunRecord(
            name, seed, "agent", "failed", fit_s=fit_s, act_s=act_s, **meta,
            error=f"{type(exc).__name__}: {exc}",
            # Two path parts only: enough to find the line, and no machine-specific prefix.
            traceback=[f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno} in {f.name}: {f.line}" for f in frames],
        )


def _audit(name: str, agent: Any, settings: CellSettings, t: Tournament, actions: np.ndarray,
           seed: int) -> dict[str, Any] | None:
    """The cell's audit (``routing_gym.eval.execution.audit``), for rows that claim to be deployable: the
    same agent and seed fitted and run again in the audit's process (``audit_process``)."""
    if not agent.deployable:
        return None
    if not settings.audit:
        return audit.AuditResult(audit.OFF, reason="audit off").to_dict()
    kwargs = {"name": name, "kwargs": settings.agent_kwargs, "reward": settings.reward, "train_split": settings.train_split,
              "test_split": settings.test_split, "seed": seed}
    return audit_process.audit(type(agent), t, settings.test_split, settings.aliases, actions,
                               "routing_gym.eval.execution.fitting:held_out_actions", kwargs, settings.imports).to_dict()


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
