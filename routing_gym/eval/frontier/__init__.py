"""Operating-point curves: sweep an agent's cost knob and compare the curve with both hulls.

One point of ``compare`` says where a router lands; its *curve* says whether it routes at every
budget. An agent joins by declaring a ``cost_knob`` (``CostKnob``): the one number that trades
accuracy for joules. ``run_frontier``:

1. carves a seeded validation part out of the **training** split, stratified by benchmark
   (``carve_validation``); the agents train on the rest, and the test split is never read
   while choosing;
2. for every candidate knob value, trains the agent (or reuses one fit, see ``CostKnob``) and
   routes the validation part and the test split;
3. keeps the values whose *validation* (joules, accuracy) points are Pareto-optimal among the
   candidates (identical points once): the curve's operating points;
4. reports those points on test: each point's routing gain, the **mean gain of the curve over
   the fixed-model yardstick** (``eval/core/yardstick.py``: a chain of policies chosen on train,
   evaluated on test) over the curve's joule range (the area between the curve, read as a
   chain, and the yardstick divided by the range's width: an AIQ-style number,
   ``Yardstick.mean_gain_over_range``; verdict lines family-wise, ``eval/core/familywise.py``), and for
   every fixed model whether some operating point strictly dominates it
   (``stats.dominance_from_resamples``). The curve is a chain fixed before test is read: the chosen
   points in knob order (cheapest knob value first), read by the yardstick's own rule (the mix of
   consecutive points at each joule value), never enveloped on test points and never re-chosen in a
   resample, against the yardstick read the same way (its chain in train order) (an envelope of test points keeps the lucky ones: on null tournaments it gave the curve
   made of the yardstick's own policies a positive gain whose interval excluded 0 every time,
   ``experiments/results/frontier-null``);
5. the same against the **task-aware yardstick** (``hull.task_routing``: per benchmark the model
   maximising accuracy - lambda x J on the whole training split, for every lambda, with the
   fixed models and their mixes): each point's content gain, the curve's **mean content gain**,
   and which per-benchmark routes some point strictly dominates. A curve that routes only by
   the benchmark label has no content gain.

Intervals are paired percentile bootstrap intervals: one ``BootstrapPlan`` over test queries
recomputes both hulls, the curve and every point per resample.

Dominance "by some point" takes the best of the curve's points, each tested at the stated
confidence; it is not corrected for the number of points (stated in every output). Each sweep is
audited whole (``audited_sweep``, ``eval/execution/audit_process.py``); a failed or unverified curve keeps
its numbers but gets no verdict.

One file: sweep, statistics, report and plot share the curve and point records, and each part is
short next to them.
"""

from __future__ import annotations

import copy
import math
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.envs.rewards import DEFAULT_INVALID_PENALTY
from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.eval.core import familywise
from routing_gym.eval.core.pareto import pareto_front
from routing_gym.eval.core.robustness import energy_under_laws, verdict_robustness
from routing_gym.eval.core.stats import BootstrapPlan, dominance_from_resamples, percentile_interval
from routing_gym.eval.core.yardstick import DEARER_THAN_CHAIN, WITHIN, YARDSTICK_RULE, Yardstick, train_yardsticks
from routing_gym.eval.execution import audit_process
from routing_gym.eval.execution.audit_process import close_audit_process
from routing_gym.fronts import hull as fixed_hull
from routing_gym.tournament import Tournament
from routing_gym.tournament.scoring import score_actions

KnobTarget = Literal["act", "fit", "reward"]
KNOB_TARGETS = ("act", "fit", "reward")
DEFAULT_FRONTIER_AGENTS = ("cost-aware", "irt", "mf", "gbdt", "knn", "uniroute", "linucb", "per-benchmark")
MIN_BOOTSTRAP = 10


@dataclass(frozen=True)
class CostKnob:
    """An agent's cost knob: declare ``cost_knob = CostKnob(...)`` on the agent (class or instance).

    Args:
        parameter: the constructor keyword that holds the knob (``applies`` "act" or "fit"),
            or the coefficient of the training reward (``applies`` "reward", e.g. ``lambda_e``).
        applies: ``"act"``: routing reads it, training does not: the agent is fitted once and the
            value is set as an attribute on a copy of the fitted agent per value (cheap);
            ``"fit"``: training depends on it: one agent constructed with it and fitted per value;
            ``"reward"``: one agent fitted per value under the training reward with that
            coefficient.
        cheaper_when: ``"higher"`` when larger values route to cheaper models, else ``"lower"``.
        grid: the default candidate values (``routing-gym frontier --grid`` replaces them).
    """

    parameter: str
    applies: KnobTarget
    cheaper_when: Literal["higher", "lower"]
    grid: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.applies not in KNOB_TARGETS:
            raise ValueError(f"CostKnob.applies must be one of {KNOB_TARGETS}, got {self.applies!r}")
        if self.cheaper_when not in ("higher", "lower"):
            raise ValueError(f"CostKnob.cheaper_when must be 'higher' or 'lower', got {self.cheaper_when!r}")
        check_grid(self.grid, f"CostKnob({self.parameter!r}).grid")

    def describe(self) -> str:
        where = {"act": "routing only", "fit": "refit per value", "reward": "training reward coefficient, refit per value"}
        return f"{self.parameter} ({where[self.applies]}; {self.cheaper_when} = cheaper)"


def check_grid(values: Sequence[float], where: str) -> tuple[float, ...]:
    """Finite, distinct numbers, at least one; ``RoutingGymError`` names ``where`` otherwise."""
    try:
        grid = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: expected a list of numbers, got {values!r}") from None
    if not grid or not all(math.isfinite(v) for v in grid) or len(set(grid)) != len(grid):
        raise UsageError(f"{where}: expected distinct finite numbers (at least one), got {list(values)!r}")
    return grid


# ---------------------------------------------------------------------- the validation part of train
def carve_validation(t: Tournament, train_split: str = "train", share: float = 0.2, seed: int = 0) -> Tournament:
    """A copy of ``t`` whose ``train_split`` rows are cut into ``<train>:fit`` and
    ``<train>:validation`` (``share`` of each benchmark's training rows, seeded, rounded to
    the nearest row); every other row keeps its split, so test rows are never touched."""
    if not 0 < share < 1:
        raise UsageError(f"validation share (--validation-share) must be in (0, 1), got {share}")
    fit_name, validation_name = f"{train_split}:fit", f"{train_split}:validation"
    taken = {fit_name, validation_name} & set(t.splits)
    if taken:
        raise UsageError(f"{t.card.name}: split name(s) {sorted(taken)} already exist; cannot carve a validation part")
    train_rows = t.split_rows(train_split)
    split = t.queries["split"].to_numpy(dtype=object).copy()
    benchmarks = t.queries["benchmark"].to_numpy()
    rng = np.random.default_rng(seed)
    for benchmark in sorted(set(benchmarks[train_rows])):
        rows = train_rows[benchmarks[train_rows] == benchmark]
        rows = rows[rng.permutation(len(rows))]
        n_val = int(round(share * len(rows)))
        split[rows[:n_val]] = validation_name
        split[rows[n_val:]] = fit_name
    for name in (fit_name, validation_name):
        if not (split == name).any():
            raise UsageError(f"{t.card.name}: a validation share of {share} leaves split {name!r} empty "
                                  f"({len(train_rows)} training rows)")
    queries = t.queries.copy()
    queries["split"] = split.astype(str)
    card = replace(t.card, split={**t.card.split, "validation": {"of": train_split, "share": share, "seed": seed,
                                                                   "stratified_by": "benchmark"}})
    return replace(t, queries=queries, card=card)


# ---------------------------------------------------------------------- settings and results
@dataclass
class FrontierConfig:
    """Settings of one ``routing-gym frontier`` run."""

    tournament: Any = "default"
    agents: Sequence[str] = DEFAULT_FRONTIER_AGENTS
    grids: dict[str, Sequence[float]] = field(default_factory=dict)  # agent -> knob values (replace its grid)
    agent_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0
    validation_share: float = 0.2
    validation_seed: int = 0
    reward: str = "gated_rank"  # the training reward (a "reward" knob overrides its coefficient)
    coefficients: dict[str, float] = field(default_factory=lambda: {"lambda_e": 0.4})
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    train_split: str = "train"
    test_split: str = "test"
    n_bootstrap: int = 1000
    confidence: float = 0.95
    bootstrap_seed: int = 0
    progress: bool = True  # one line per fitted agent on stderr
    audit: bool = True  # sweep each agent again in the audit's process on held-out outcomes replaced (eval/execution/audit.py)

    def check(self) -> None:
        if self.n_bootstrap < MIN_BOOTSTRAP:
            raise UsageError(f"n_bootstrap (--bootstrap) must be >= {MIN_BOOTSTRAP}, got {self.n_bootstrap}")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence must be in (0, 1), got {self.confidence}")
        if not self.agents:
            raise UsageError("no agents given")
        unknown = (set(self.grids) | set(self.agent_kwargs)) - set(self.agents)
        if unknown:
            raise UsageError(f"--grid / --agent-kwargs name agents not in the run: {sorted(unknown)}")


@dataclass
class OperatingPoint:
    """One knob value: its validation point (every candidate) and, when selected, its test point."""

    value: float
    validation_accuracy: float
    validation_energy_j: float
    selected: bool = False
    test_accuracy: float = math.nan
    test_energy_j: float = math.nan
    stats: dict[str, Any] = field(default_factory=dict)  # intervals and gain, filled on test
    per_query: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # test correct / energy_j


@dataclass
class AgentCurve:
    agent: str
    knob: CostKnob | None
    points: list[OperatingPoint] = field(default_factory=list)
    fit_s: float = 0.0
    error: str = ""
    summary: dict[str, Any] = field(default_factory=dict)  # mean (content) gain over each hull, range, CI
    dominance: list[dict[str, Any]] = field(default_factory=list)  # one entry per fixed model
    route_dominance: list[dict[str, Any]] = field(default_factory=list)  # one entry per per-benchmark route
    audit: dict[str, Any] | None = None  # AuditResult.to_dict() of the whole sweep (every candidate's test actions)
    deployable_label: str = ""  # "yes" only when the audit passed; otherwise its curve gets no verdict
    test_actions: np.ndarray | None = field(default=None, repr=False)  # [candidates, n_test], for the audit

    @property
    def selected(self) -> list[OperatingPoint]:
        """The chosen points as the curve's chain: in knob order, the cheapest knob value first (no
        test value decides the order; ``Yardstick.mean_gain_over_range`` mixes consecutive ones)."""
        cheapest_first = -1.0 if self.knob is not None and self.knob.cheaper_when == "higher" else 1.0
        return sorted((p for p in self.points if p.selected), key=lambda p: cheapest_first * p.value)

    @property
    def withheld(self) -> bool:
        """No verdict for this curve (``audit.withheld``: its audit failed or it is unverified)."""
        from routing_gym.eval.execution.audit import withheld

        return withheld(self.deployable_label)

    @property
    def deployable(self) -> bool:
        """Declared deployable and verified by the audit: a member of the family-wise family."""
        return self.deployable_label == "yes"

    @property
    def reads_question(self) -> bool:
        """``Agent.reads_question`` of the agent: False for a label-only or fixed policy, whose mean
        content gain is at most 0 by construction (never a hypothesis, never beyond the label)."""
        from routing_gym.eval.execution.audit import reads_question

        return reads_question(self.agent)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "knob": None if self.knob is None else asdict(self.knob), "fit_s": self.fit_s,
            "error": self.error, "summary": self.summary, "dominance": self.dominance,
            "route_dominance": self.route_dominance, "audit": self.audit, "deployable_label": self.deployable_label,
            "points": [{k: v for k, v in asdict(p).items() if k != "per_query"} for p in self.points],
        }


@dataclass
class FrontierResult:
    config: FrontierConfig
    tournament: Tournament  # the carved copy (splits <train>:fit, <train>:validation, test)
    curves: list[AgentCurve]
    fixed: pd.DataFrame  # model, test accuracy, test mean joules
    hull: dict[str, Any]
    task_hull: dict[str, Any] = field(default_factory=dict)  # vertices, the per-benchmark routes on test
    elapsed_s: float = 0.0

    @property
    def failures(self) -> list[AgentCurve]:
        return [c for c in self.curves if c.error]

    def settings(self) -> dict[str, Any]:
        c, t = self.config, self.tournament
        train = c.train_split
        return {
            "tournament": {"name": t.card.name, "provenance": t.card.provenance, "models": t.model_ids,
                           "n_fit": int(len(t.split_rows(f"{train}:fit"))),
                           "n_validation": int(len(t.split_rows(f"{train}:validation"))),
                           "n_test": int(len(t.split_rows(c.test_split))), "test_split": c.test_split},
            "validation": {"of": train, "share": c.validation_share, "seed": c.validation_seed,
                           "stratified_by": "benchmark",
                           "selection": "knob values whose validation (J, accuracy) point is Pareto-optimal among the "
                                        "candidates (one value per identical point); the test split is never read "
                                        "while choosing"},
            "training_reward": Reward(c.reward, dict(c.coefficients), c.invalid_penalty).describe(),
            "seed": c.seed,
            "intervals": f"{c.confidence:.0%} paired percentile bootstrap over the test queries, copies of a question "
                         f"resampled together ({c.n_bootstrap} resamples, seed {c.bootstrap_seed}); the yardsticks' "
                         "policies fixed on train, their test values, the curve and its points resampled; verdict lines "
                         "family-wise (Romano-Wolf step-down over the deployable verified curves' two mean gains)",
            "mean_gain": "area between the curve and the fixed-model yardstick over the curve's joule range up to the "
                         "costliest candidate policy, divided by the range's width (pp); the curve is a chain fixed on "
                         "validation (its chosen points in knob order, cheapest first) read by the yardstick's rule (the "
                         "mix of consecutive points at each joule value), never enveloped on test or in a resample; area_pp_j "
                         "= mean gain x width (derived); mean content gain: the same against the task-aware yardstick",
            "dominance": f"strict paired test per (operating point, fixed model or per-benchmark route) at "
                         f"{c.confidence:.0%}; a fixed model or route counts as dominated when some point dominates it "
                         "(not corrected for the number of points)",
            "hull": YARDSTICK_RULE,
            "task_hull": fixed_hull.TASK_HULL_RULE + f"; routes chosen on the whole {train} split (fit and validation)",
            "audit": ("each agent's whole sweep run again, in a process where the original held-out outcomes were never "
                      "loaded, on a copy whose held-out outcomes are replaced; a curve with any changed test action, or "
                      "not verified, keeps its numbers and gets no verdict" if c.audit else "off (--no-audit): no curve "
                      "is verified, none gets a verdict"),
            "elapsed_s": self.elapsed_s,
        }


# ---------------------------------------------------------------------- running
def agent_knob(agent: Any) -> CostKnob:
    """The agent's ``cost_knob``; a clear error for an agent without one."""
    knob = getattr(agent, "cost_knob", None)
    if not isinstance(knob, CostKnob):
        raise UsageError(
            f"agent {agent.name!r} exposes no cost knob: declare `cost_knob = CostKnob(parameter, applies, cheaper_when, "
            "grid)` (routing_gym.eval.frontier) on the agent to draw its curve"
        )
    return knob


def _plan_agent(name: str, config: FrontierConfig) -> tuple[CostKnob, tuple[float, ...]]:
    """Knob and candidate values of one agent, every value checked (constructor or reward) before training."""
    from routing_gym_agents import make_agent

    kwargs = config.agent_kwargs.get(name, {})
    try:
        knob = agent_knob(make_agent(name, **kwargs))
        grid = check_grid(config.grids[name], f"--grid for {name!r}") if name in config.grids else knob.grid
        for value in grid:
            if knob.applies == "reward":
                Reward(config.reward, {**config.coefficients, knob.parameter: value}, config.invalid_penalty)
            else:
                make_agent(name, **{**kwargs, knob.parameter: value})
    except (TypeError, ValueError) as exc:
        raise UsageError(f"agent {name!r}: {exc}") from None
    return knob, grid


def run_frontier(config: FrontierConfig) -> FrontierResult:
    """Sweep every agent's knob, choose points on validation, report them on test."""
    from routing_gym.sources import resolve_tournament
    from routing_gym_agents.registry import list_agents, unknown_agent_error

    start = time.perf_counter()
    config.check()
    registered = list_agents()
    unknown = [name for name in config.agents if name not in registered]
    if unknown:
        raise unknown_agent_error(unknown)
    plans = {name: _plan_agent(name, config) for name in config.agents}
    original = resolve_tournament(config.tournament)
    t, rows = _carved(original, config)
    curves = []
    try:
        for name, (knob, grid) in plans.items():
            tic = time.perf_counter()
            curve = _sweep(name, knob, grid, config, t, rows)
            curve.fit_s = time.perf_counter() - tic
            if not curve.error:
                _audit_curve(curve, original, config)
            if config.progress:
                status = (f"FAILED ({curve.error[:120]})" if curve.error
                          else f"{len(curve.selected)} of {len(grid)} values chosen; deployable: {curve.deployable_label}")
                print(f"frontier: {name}: {status} in {curve.fit_s:.1f} s", file=sys.stderr, flush=True)
            curves.append(curve)
    finally:
        close_audit_process()
    fixed, hull, task_hull = _analyse(config, t, rows["test"], curves)
    return FrontierResult(config, t, curves, fixed, hull, task_hull, time.perf_counter() - start)


def _carved(original: Tournament, config: FrontierConfig) -> tuple[Tournament, dict[str, np.ndarray]]:
    """The tournament with its validation part carved out, and the rows routed (validation, test)."""
    t = carve_validation(original, config.train_split, config.validation_share, config.validation_seed)
    t.split_rows(config.test_split)
    return t, {"validation": t.split_rows(f"{config.train_split}:validation"), "test": t.split_rows(config.test_split)}


def _audit_curve(curve: AgentCurve, original: Tournament, config: FrontierConfig) -> None:
    """The audit of a curve: the whole sweep again in the audit's process on the replaced copy
    (``audited_sweep``); any changed test action of any candidate value fails it."""
    from routing_gym.eval.execution import audit
    from routing_gym.sources import aliases_of
    from routing_gym_agents.registry import AGENTS

    if not config.audit:
        result = audit.AuditResult(audit.OFF, reason="audit off")
    else:
        aliases = tuple(tuple(a) for a in aliases_of(original.fingerprint))
        result = audit_process.audit(AGENTS[curve.agent][0], original, config.test_split, aliases, curve.test_actions,
                                     "routing_gym.eval.frontier:audited_sweep", {"name": curve.agent, "config": config})
    curve.audit = result.to_dict()
    curve.deployable_label = audit.deployable_label(True, [result])


def audited_sweep(copy: Tournament, name: str, config: FrontierConfig) -> np.ndarray:
    """The audit's run of one curve (``eval/execution/audit_process.py``): the same sweep on the replaced
    copy, every candidate value's test actions ``[candidates, n_test]``."""
    t, rows = _carved(copy, config)
    knob, grid = _plan_agent(name, config)
    curve = _sweep(name, knob, grid, config, t, rows)
    if curve.error:
        raise RoutingGymError(curve.error)
    return curve.test_actions


def _sweep(name: str, knob: CostKnob, grid: tuple[float, ...], config: FrontierConfig, t: Tournament,
           rows: dict[str, np.ndarray]) -> AgentCurve:
    """Every candidate value on validation and test (test kept only for the chosen ones)."""
    from routing_gym_agents import FitContext, make_agent

    kwargs = config.agent_kwargs.get(name, {})
    batches = {part: ObservationBatch.from_tournament(t, r) for part, r in rows.items()}

    def context(coefficients: dict[str, float]) -> Any:
        reward = Reward(config.reward, coefficients, config.invalid_penalty)
        return FitContext(tournament=t, reward=reward, train_split=f"{config.train_split}:fit", seed=config.seed)

    curve = AgentCurve(name, knob)
    test_runs = []
    try:
        shared = None
        if knob.applies == "act":
            shared = make_agent(name, **kwargs)
            shared.fit(context(dict(config.coefficients)))
        for value in grid:
            if shared is not None:
                agent = copy.copy(shared)
                setattr(agent, knob.parameter, value)
            else:
                agent = make_agent(name, **(kwargs if knob.applies == "reward" else {**kwargs, knob.parameter: value}))
                coefficients = dict(config.coefficients)
                if knob.applies == "reward":
                    coefficients[knob.parameter] = value
                agent.fit(context(coefficients))
            routed = {part: _route(agent, batch, t, r, config) for (part, batch), r in zip(batches.items(), rows.values())}
            curve.points.append(OperatingPoint(value, float(routed["validation"]["correct"].mean()),
                                               float(routed["validation"]["energy_j"].mean())))
            test_runs.append(routed["test"])
    except Exception as exc:  # one agent's bug must not sink the others' curves
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        curve.error = f"{type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"
        return curve
    curve.test_actions = np.stack([run["actions"] for run in test_runs])
    acc = np.array([p.validation_accuracy for p in curve.points])
    joules = np.array([p.validation_energy_j for p in curve.points])
    for i in pareto_front(acc, joules):
        point = curve.points[i]
        point.selected = True
        point.per_query = test_runs[i]
        point.test_accuracy = float(test_runs[i]["correct"].mean())
        point.test_energy_j = float(test_runs[i]["energy_j"].mean())
    return curve


def _route(agent: Any, batch: ObservationBatch, t: Tournament, rows: np.ndarray, config: FrontierConfig) -> dict[str, np.ndarray]:
    actions = np.asarray(agent.act_batch(batch))
    if actions.shape != (len(batch),):
        raise RoutingGymError(f"act_batch returned shape {actions.shape} for {len(batch)} queries")
    # The one scorer: invalid actions count as wrong and cost 0 J, as everywhere else.
    zeros = np.zeros((len(rows), t.n_models))
    scored = score_actions(zeros, t.outcomes(rows), actions, config.invalid_penalty)
    return {"correct": scored.correct.astype(np.float64), "energy_j": scored.energy_j.astype(np.float64),
            "actions": scored.actions}


# ---------------------------------------------------------------------- test-split statistics
def _analyse(config: FrontierConfig, t: Tournament, test_rows: np.ndarray,
             curves: list[AgentCurve]) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """Fills every curve's summary, points' intervals and dominance; returns the fixed models,
    the fixed-model yardstick and the task-aware yardstick (chosen on train)."""
    k = t.n_models
    correct, energy = t.correct[test_rows], t.energy_j[test_rows]
    fixed_acc, fixed_j = correct.mean(axis=0), energy.mean(axis=0)
    fixed = pd.DataFrame({"model": t.model_ids, "accuracy": fixed_acc, "mean_energy_j": fixed_j})
    train_rows = np.sort(np.concatenate([t.split_rows(f"{config.train_split}:{part}") for part in ("fit", "validation")]))
    sticks = train_yardsticks(t.correct[train_rows], t.energy_j[train_rows], t.benchmark_codes[train_rows],
                              len(t.benchmarks), list(t.model_ids), t.benchmark_codes[test_rows])
    routes = sticks.routes
    codes, n_routes = t.benchmark_codes[test_rows], len(routes)
    route_correct, route_energy = routes.per_query(correct, codes), routes.per_query(energy, codes)
    route_acc, route_j = route_correct.mean(axis=0), route_energy.mean(axis=0)
    ok = [c for c in curves if not c.error and c.selected]
    blocks = [correct, energy, route_correct, route_energy] + [np.stack([p.per_query["correct"], p.per_query["energy_j"]], axis=1)
                                                      for c in ok for p in c.selected]
    plan = BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test_rows], config.n_bootstrap, config.bootstrap_seed)
    boot = plan.means(np.concatenate(blocks, axis=1))
    boot_acc, boot_j = boot[:, :k], boot[:, k:2 * k]
    boot_route_acc, boot_route_j = boot[:, 2 * k:2 * k + n_routes], boot[:, 2 * k + n_routes:2 * (k + n_routes)]
    # Each yardstick (chosen on train) with the candidate points it reads, on test and per resample [B, K + P].
    candidates = fixed_hull.task_aware_points(fixed_j, fixed_acc, route_j, route_acc)
    boot_candidates = fixed_hull.task_aware_points(boot_j, boot_acc, boot_route_j, boot_route_acc)
    yardsticks = {"": sticks.fixed, "content_": sticks.task}
    chain_end = {tag: stick.chain(*candidates)[0][-1] for tag, stick in yardsticks.items()}
    scale = (float(np.abs(correct).max()), float(np.abs(energy).max()))
    column = 2 * (k + n_routes)
    family: dict[tuple[int, str], np.ndarray] = {}  # (curve, tag) -> resampled mean gain, for the family-wise rule
    for c_index, curve in enumerate(ok):
        points = curve.selected
        boot_points = boot[:, column:column + 2 * len(points)].reshape(len(boot), len(points), 2)  # [B, C, (acc, J)]
        column += 2 * len(points)
        for i, p in enumerate(points):
            p.stats = {}
            resampled = {"accuracy": boot_points[:, i, 0], "energy_j": boot_points[:, i, 1]}
            for tag, stick in yardsticks.items():
                name = "routing_gain" if not tag else "content_gain"
                p.stats[f"{name}_pp"] = float(100 * stick.gain(*candidates, p.test_energy_j, p.test_accuracy))
                p.stats[f"{name}_vs"] = (WITHIN if p.test_energy_j <= chain_end[tag] * (1 + 1e-9)
                                         else DEARER_THAN_CHAIN)
                resampled[f"{name}_pp"] = 100 * stick.gain(*boot_candidates, boot_points[:, i, 1], boot_points[:, i, 0])
            for metric, values in resampled.items():
                low, high = percentile_interval(values, config.confidence)
                p.stats.update({f"{metric}_ci_low": float(low), f"{metric}_ci_high": float(high)})
        curve.summary = {"n_points": len(points)}
        for tag, stick in yardsticks.items():
            summary, boot_mean = _mean_gain(tag, stick, candidates, boot_candidates, points, boot_points, config.confidence)
            curve.summary.update(summary)
            if boot_mean is not None and curve.deployable and (not tag or curve.reads_question):
                family[(c_index, tag)] = boot_mean  # a curve that cannot read the question: no content hypothesis
        boot_fixed = np.stack([boot_acc, boot_j], axis=-1)
        curve.dominance = _dominated(config, "model", t.model_ids, np.column_stack([fixed_acc, fixed_j]), boot_fixed,
                                     points, boot_points, scale)
        boot_routes = np.stack([boot_route_acc, boot_route_j], axis=-1)
        curve.route_dominance = _dominated(config, "route", routes.labels(), np.column_stack([route_acc, route_j]),
                                           boot_routes, points, boot_points, scale)
    _family_verdicts(ok, family, 1 - config.confidence)
    fixed_record, task_record = (stick.record(*candidates) for stick in (sticks.fixed, sticks.task))
    task_record = {**task_record, "max_energy_j": float(candidates[0].max()),
                   "routes": [{**r, "test_accuracy": float(a), "test_energy_j": float(j)} for r, a, j in
                              zip(routes.describe(t.benchmarks, list(t.model_ids)), route_acc, route_j)]}
    hull_info = {"models": fixed_record["vertices"], "energy_j": fixed_record["energy_j"],
                 "accuracy": fixed_record["accuracy"], "max_fixed_energy_j": float(fixed_j.max()), "rule": fixed_record["rule"]}
    # every chosen point and fixed model re-priced under the tournament's other energy laws (eval/core/robustness.py)
    energies = energy_under_laws(t, test_rows)
    if len(energies) > 1:
        actions = {f"always {m}": np.full(len(test_rows), k) for k, m in enumerate(t.model_ids)}
        actions.update({f"{c.agent} {c.knob.parameter}={p.value:g}": p.per_query["actions"] for c in ok for p in c.selected})
        hull_info["robustness"] = verdict_robustness(
            correct, energies, actions, t.model_ids, plan, config.confidence,
            fixed={f"always {m}": k for k, m in enumerate(t.model_ids)},
            withheld={f"{c.agent} {c.knob.parameter}={p.value:g}" for c in ok if c.withheld for p in c.selected},
            train=(t.correct[train_rows], energy_under_laws(t, train_rows))).to_dict()
    return fixed, hull_info, task_record


def _mean_gain(tag: str, stick: Yardstick, candidates: tuple[np.ndarray, np.ndarray],
               boot_candidates: tuple[np.ndarray, np.ndarray], curve: list[OperatingPoint], boot_curve: np.ndarray,
               confidence: float) -> tuple[dict[str, Any], np.ndarray | None]:
    """A curve's mean gain over one yardstick (``tag`` "" for the fixed-model one, "content_" for
    the task-aware one) over the curve's joule range up to the chain's dearest policy, with its
    interval; and its resamples (None where some resample has no range: outside the family)."""
    curve_j = np.array([p.test_energy_j for p in curve])
    curve_acc = np.array([p.test_accuracy for p in curve])
    mean_gain = float(stick.mean_gain_over_range(*candidates, curve_j, curve_acc))
    # the range the chain is read over: from its first point to its dearest (mean_gain_over_range)
    low_j, high_j = float(curve_j[0]), min(float(curve_j.max()), float(candidates[0].max()))
    out: dict[str, Any] = {f"{tag}joule_range": [float(low_j), float(high_j)], f"mean_{tag}gain_pp": 100 * mean_gain,
                           f"{tag}area_pp_j": 100 * mean_gain * (high_j - low_j)}
    if not math.isfinite(mean_gain):
        out[f"{tag}note"] = ("the curve has no joule range up to the costliest candidate policy (a single point, or every "
                             "point beyond it): no area")
        return out, None
    boot_mean = 100 * stick.mean_gain_over_range(*boot_candidates, boot_curve[:, :, 1], boot_curve[:, :, 0])
    finite = boot_mean[np.isfinite(boot_mean)]  # a resample where the ranges stop overlapping has no area
    low, high = percentile_interval(finite, confidence) if len(finite) else (math.nan, math.nan)
    out.update({f"mean_{tag}gain_pp_ci_low": float(low), f"mean_{tag}gain_pp_ci_high": float(high),
                f"{tag}resamples_without_overlap": int(len(boot_mean) - len(finite))})
    return out, (boot_mean if len(finite) == len(boot_mean) else None)


def _family_verdicts(curves: list[AgentCurve], family: dict[tuple[int, str], np.ndarray], alpha: float) -> None:
    """Romano-Wolf step-down (``eval/core/familywise.py``) over the deployable, verified curves' mean
    routing and content gains: ``mean_<tag>gain_pp_fw`` is "above", "below" or "" (not in the family)."""
    for curve in curves:
        curve.summary.update({"mean_gain_pp_fw": familywise.NONE, "mean_content_gain_pp_fw": familywise.NONE})
    if not family:
        return
    keys = list(family)
    estimate = np.array([curves[c].summary[f"mean_{tag}gain_pp"] for c, tag in keys])
    decision = familywise.stepdown(estimate, np.stack([family[key] for key in keys], axis=1), alpha)
    for (c, tag), verdict in zip(keys, decision.decisions):
        curves[c].summary[f"mean_{tag}gain_pp_fw"] = verdict


def _dominated(config: FrontierConfig, key: str, names: list[str], targets: np.ndarray, boot_targets: np.ndarray,
               points: list[OperatingPoint], boot_points: np.ndarray, scale: tuple[float, float]) -> list[dict[str, Any]]:
    """Per target (a fixed model or a per-benchmark route; ``targets`` ``[T, (acc, J)]``,
    ``boot_targets`` ``[B, T, 2]``): the operating point most likely to dominate it, and whether it does."""
    out = []
    for m, name in enumerate(names):
        tests = [dominance_from_resamples(boot_points[:, i], boot_targets[:, m], (p.test_accuracy, p.test_energy_j),
                                          tuple(targets[m]), config.confidence, scale=scale) for i, p in enumerate(points)]
        best = max(range(len(tests)), key=lambda i: (tests[i].dominates, tests[i].prob_dominates))
        out.append({key: name, "dominated": bool(tests[best].dominates), "by_value": points[best].value,
                    "prob_dominates": tests[best].prob_dominates, "tied_axis": tests[best].tied_axis,
                    "delta_accuracy_pp": 100 * tests[best].delta_accuracy, "delta_energy_j": tests[best].delta_energy_j})
    return out
