"""``routing-gym compare``: train every agent on the training split, score it on held-out.

The public entry: ``run_compare`` (and ``CompareJob`` / ``run_jobs`` for a grid of them,
``routing_gym.eval.compare.sweep``) runs the cells of a comparison on an executor, resumes from saved
cells, and aggregates; ``write_outputs`` writes the tables and plots. The stages, in pipeline
order (each imports only the stages before it; callers import from this package):

- ``cells``: settings (``CompareConfig``), one agent x seed cell (``run_cell``: train,
  act on held-out, score under one common reward; every fixed model of the pool becomes an
  "always <model>" row), saved cells and their fingerprints, the router overhead hook;
- ``statistics``: aggregation into ``CompareResult`` (seed means, bootstrap intervals over
  held-out queries, hull gains, paired Pareto dominance, Pareto fronts, regret curves);
- ``report``: results.json, the CSVs, table.md and the plots.

Cells and executors: the unit of work is one cell (agent x seed), run in this process, a
spawned process pool or Ray tasks (``routing_gym.eval.execution.executors``; ``CompareConfig.executor``).
With an output folder each finished cell is saved under ``cells/`` as it arrives, keyed by a
fingerprint of what decides it, and a rerun reuses the saved cells and runs only the missing
ones; the table is built from the cells in a fixed order, so every executor gives the same
table. ``docs/scaling.md``.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from routing_gym.envs import Reward
from routing_gym.envs.rewards import GateWarning, data_gate_note, gate_reported
from routing_gym.errors import RoutingGymError
from routing_gym.eval.execution.audit_process import close_audit_process
from routing_gym.eval.compare.cells import (
    CELLS_DIR,
    DEFAULT_AGENTS,
    FIXED_PREFIX,
    CellSettings,
    CompareConfig,
    RunRecord,
    Scorer,
    agent_resources,
    agent_seed_dependent,
    cell_fingerprint,
    check_agent_kwargs,
    failed_record,
    load_cell,
    resolve_agent_names,
    run_cell,
    save_cell,
    scoring_env,
    shared_seed,
)
from routing_gym.eval.compare.report import markdown_report, write_outputs
from routing_gym.eval.compare.statistics import CompareResult, aggregate
from routing_gym.eval.execution.executors import DEFAULT_MAX_RETRIES, Lost, Task, check_executor, run_tasks
from routing_gym.plugins import import_user_module

# What the CLI, sweep, experiments and tests import from here (defined in the parts above).
__all__ = [
    "DEFAULT_AGENTS",
    "FIXED_PREFIX",
    "CompareConfig",
    "CompareJob",
    "CompareResult",
    "agent_resources",
    "aggregate",
    "markdown_report",
    "resolve_agent_names",
    "run_compare",
    "run_jobs",
    "write_outputs",
]


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


class CompareJob:
    """One comparison, prepared: settings checked, fixed-model rows computed, saved cells
    loaded; ``tasks()`` are the cells left to run, ``accept`` takes each finished one (and
    saves it), ``result()`` aggregates."""

    def __init__(self, config: CompareConfig, out_dir: str | Path | None = None, label: str = ""):
        from routing_gym.sources import aliases_of, resolve_tournament

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
        self.reward = reward = Reward(config.reward, dict(config.coefficients), config.invalid_penalty,
                                      allow_ungated=config.allow_ungated)
        t.split_rows(config.train_split)  # fail early, naming the splits, before any agent trains
        self.notes = []
        if config.train_split == config.test_split:
            self.notes.append(f"trained and tested on the same split {config.test_split!r}: every number is in-sample")
            warnings.warn(self.notes[-1], stacklevel=3)
        gate = data_gate_note(reward, t)  # once per (reward, tournament); the cells stay quiet
        if gate:
            self.notes.append(gate)
            warnings.warn(gate, GateWarning, stacklevel=3)
        self.tournament = t
        with gate_reported():
            env = scoring_env(t, config.test_split, reward)
            self.test_rows = env.rows
            self.fixed_runs: list[RunRecord] = []
            if config.fixed_models:
                scorer = Scorer(t, env, reward)
                for k, model_id in enumerate(t.model_ids):
                    self.fixed_runs.append(scorer.record(f"{FIXED_PREFIX}{model_id}", None, "fixed-model",
                                                         np.full(len(env.rows), k), fit_s=math.nan, act_s=math.nan))
        self.cells = [(name, seed) for name in names for seed in seeds]
        aliases = tuple(tuple(a) for a in aliases_of(t.fingerprint))
        self.settings = {name: CellSettings(reward, config.train_split, config.test_split,
                                            dict(config.agent_kwargs.get(name, {})), tuple(config.imports), config.audit,
                                            aliases)
                         for name in names}
        self.fingerprints = {cell: cell_fingerprint(t, self.settings[cell[0]], *cell) for cell in self.cells}
        self.cells_dir = Path(out_dir) / CELLS_DIR if out_dir is not None else None
        self.records: dict[tuple[str, int], RunRecord] = {}
        if self.cells_dir is not None:
            for cell in self.cells:
                record = load_cell(self.cells_dir, *cell, self.fingerprints[cell])
                if record is not None:
                    self.records[cell] = record
        # Agents whose fit ignores the seed (Agent.seed_dependent False) run one cell, fit and audit
        # once; every other seed gets that cell's record (shared_seeds).
        self.seed_free = {name for name in names if not agent_seed_dependent(name)}
        for name in self.seed_free:
            done = next((self.records[(name, s)] for s in seeds if (name, s) in self.records), None)
            if done is not None:
                self._share(done)

    @property
    def group(self) -> str:
        """The payload key: cells of every job on one tournament (and one split of it: folds share
        a content fingerprint) share one shipped copy."""
        return f"{self.tournament.fingerprint}-{self.tournament.split_fingerprint}"

    def tasks(self) -> list[Task]:
        todo = [(name, seed) for name, seed in self.cells if (name, seed) not in self.records]
        first = {name: seed for name, seed in reversed(todo)}  # a seed-free agent runs its first missing seed only
        return [Task(f"{self.label}{name}-{seed}", self.group, (self.settings[name], name, seed), agent_resources(name))
                for name, seed in todo if name not in self.seed_free or first[name] == seed]

    def _share(self, record: RunRecord) -> list[RunRecord]:
        """A seed-free agent's finished cell given to its seeds that have none (and saved)."""
        shared = []
        for seed in self.config.seed_list:
            cell = (record.method, seed)
            if cell not in self.records:
                self.records[cell] = copy = shared_seed(record, seed)
                if self.cells_dir is not None and copy.status == "ok":
                    save_cell(self.cells_dir, copy, self.fingerprints[cell])
                shared.append(copy)
        return shared

    def accept(self, task: Task, value: RunRecord | Lost) -> RunRecord:
        _, name, seed = task.args
        if isinstance(value, Lost):
            value = failed_record(name, seed, value.error)
        self.records[(name, seed)] = value
        if self.cells_dir is not None and value.status == "ok":  # a failed cell is run again by a rerun
            save_cell(self.cells_dir, value, self.fingerprints[(name, seed)])
        if name in self.seed_free:  # a failure too: every seed would fail alike
            self._share(value)
        return value

    def result(self) -> CompareResult:
        missing = [cell for cell in self.cells if cell not in self.records]
        if missing:
            raise RoutingGymError(f"{len(missing)} cell(s) have no result yet, e.g. {missing[0]}")
        runs = self.fixed_runs + [self.records[cell] for cell in self.cells]  # table order, whatever ran first
        with gate_reported():
            result = aggregate(self.config, self.tournament, self.reward, self.test_rows, runs)
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
    saved = sum(len(job.records) for job in jobs)
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
        close_audit_process()  # the local executor's (workers close theirs when they exit)


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
