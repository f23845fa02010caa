"""``routing-gym headroom``: why no router reads the question — the oracle's lead, decomposed.

``compare`` says every router sits at or below the task-aware yardstick while the oracle sits far
above it. Headroom asks what lies between, as a **ladder** of rungs evaluated at matched joules
on the held-out split. Every rung routes by one rule — for each query, the model maximising
``P_k(x) - mu x E_k(x) / J_ref`` (``J_ref``: the largest per-model mean training joules; ties go
to the cheaper model) — and differs only in what it knows as ``P`` and ``E``:

1. ``fixed_model_hull``: P = each model's training accuracy, E its mean training joules (one
   fixed model per mu; mixes of two of them are the fixed-model hull);
2. ``task_aware_hull``: P and E per (benchmark, model) from training (the per-benchmark routes);
3. ``content_router``: P from a fitted content router's ``predict_correct(batch)`` (the
   ``CorrectnessPredictor`` contract of ``routing_gym_agents.base``), E from its
   ``predict_energy(batch)`` where it has one, else per (benchmark, model) training joules; every
   router asked for is run and the one best on train is the rung (all are in ``routers``);
4. ``shared_difficulty`` (privileged): the question's share of models right, ``s(x)``, known;
   P_k(s) per (benchmark, model) from training outcomes by a map whose form is chosen on train by
   cross-fitted log loss (``forms.py``; ``ceiling_over_forms`` reports the rung under every form
   beside it): knowing how hard a question is, not which model wins it.
   The share here includes the routed models' own outcomes, so the rung partly knows who was
   right (its pairwise AUC is above 0.5): it is the *inclusive* upper bound. ``leak_free_ceiling``
   reads difficulty only from models that are not routed: route among a random half of the
   pool, read the share from the other half, averaged over ``LEAK_FREE_PARTITIONS`` halvings,
   beside the inclusive rung on the same halves;
5. ``oracle`` (privileged): P = the true outcome, E = the true joules.

**Matched joules, knobs on train.** The budget ``J*`` defaults to where knowing difficulty is
worth most on train (``choose_budget``: the joules at which the shared-difficulty rung's
cross-fitted training hull lies furthest above the task-aware rung's). For each rung,
every mu of ``MU_GRID`` routes the training split with *cross-fitted* P and E (folds grouped by
question copies, stratified by benchmark: a router never scores questions it was fitted on), the
upper hull of those training points is taken, and the two vertices around ``J*`` are mixed so
the rung spends ``J*`` on train (random mixing, as the hulls do; the per-query values are the
mix's expectation). The same two mu and weight, with P and E fitted on the whole training
split, route the test split. A rung that cannot spend ``J*`` uses its nearest end vertex.

On test each rung's content gain (pp over the task-aware yardstick at its own mean joules) and
routing gain (over the fixed-model yardstick) come with paired percentile bootstrap intervals: one
``BootstrapPlan`` resamples the held-out queries (copies of a question together) for every rung
and both yardsticks' policies at once (``eval/core/yardstick.py``: chosen on train, the machinery of
``compare``), and each step up the ladder (a rung's
content gain minus the previous rung's) has its own paired interval.

Beside the ladder (``eval/headroom/routability.py``): within-benchmark and pairwise AUCs of every
scorer's test P, how much of the oracle's lead comes from questions only one or two models
answer, the noise floor, and on procedural pools the generator's true content signal
(``specialization_signal``). Outputs: ``eval/headroom/report.py``. One file of ~600 lines: every rung
shares the price rule, the folds and the bootstrap plan defined here.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from routing_gym.envs import DEFAULT_COEFFICIENTS, ObservationBatch, Reward
from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import train_yardsticks
from routing_gym.eval.headroom import routability
from routing_gym.eval.headroom.forms import FORM_RULE, SHARE_FORMS, choose_form, share_right, shared_difficulty_p
from routing_gym.fronts import hull as fixed_hull
from routing_gym.tournament import Tournament
from routing_gym.tournament.duplicates import question_groups

RUNGS = ("fixed_model_hull", "task_aware_hull", "content_router", "shared_difficulty", "oracle")
RUNG_LABELS = {"fixed_model_hull": "fixed-model hull", "task_aware_hull": "task-aware hull (benchmark label)",
               "content_router": "best content router", "shared_difficulty": "shared-difficulty ceiling (privileged)",
               "oracle": "oracle (privileged)"}
PRIVILEGED_RUNGS = frozenset({"shared_difficulty", "oracle"})
DEFAULT_ROUTERS = ("cost-aware", "irt", "mf", "gbdt")  # those registered are run when none are named
# Price grid: mu = 0 (most likely right) up to a price at which every scorer picks its cheapest model.
MU_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 112)])
TIE_PRICE = 1e-9  # added to every mu so equal P go to the cheaper model
FIT_SPLIT, HELDOUT_SPLIT = "headroom:fit", "headroom:heldout"
BUDGET_CANDIDATES = 48
LEAK_FREE_PARTITIONS = 5
LEAK_FREE_RULE = (f"{LEAK_FREE_PARTITIONS} seeded random halvings of the pool: route among one half, read each "
                  "question's share of models right from the other half (never routed), at the half-pool's budget, "
                  "against its task-aware yardstick; mean over halvings (per resample for the interval). Inclusive: the "
                  "same rung reading the candidates' own outcomes (an upper bound)")
BUDGET_RULE = (f"of {BUDGET_CANDIDATES} joule values (geometric from the cheapest to the costliest fixed model's training "
               "mean), the one where the shared-difficulty rung's cross-fitted training hull lies furthest above the "
               "task-aware rung's: where knowing how hard a question is is worth most, chosen on train")


@dataclass
class HeadroomConfig:
    """Settings of one ``routing-gym headroom`` run."""

    tournament: Any = "default"
    routers: Sequence[str] | None = None  # content routers with predict_correct; None: DEFAULT_ROUTERS registered
    agent_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget_j: float | None = None  # matched joules; None: BUDGET_RULE
    folds: int = 3  # cross-fitting folds over the training split
    seed: int = 0  # agent seed and fold seed
    train_split: str = "train"
    test_split: str = "test"
    n_bootstrap: int = 1000
    confidence: float = 0.95
    bootstrap_seed: int = 0
    progress: bool = True  # one line per fitted router on stderr

    def check(self) -> None:
        if self.folds < 2:
            raise UsageError(f"folds (--folds) must be >= 2, got {self.folds}")
        if self.n_bootstrap < 10:
            raise UsageError(f"n_bootstrap (--bootstrap) must be >= 10, got {self.n_bootstrap}")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.budget_j is not None and not (np.isfinite(self.budget_j) and self.budget_j > 0):
            raise UsageError(f"budget (--budget-j) must be a number of joules > 0, got {self.budget_j}")
        if self.routers is not None and not list(self.routers):
            raise UsageError("no content routers given (--routers): the ladder needs at least one")
        unknown = set(self.agent_kwargs) - set(self.routers or DEFAULT_ROUTERS)
        if unknown:
            raise UsageError(f"--agent-kwargs names routers not in the run: {sorted(unknown)}")


@dataclass
class Scorer:
    """What one rung routes by: P(correct) and joules per model, ``[n, K]``, on the training
    split (cross-fitted) and on the test split (fitted on all of train)."""

    train_p: np.ndarray
    train_e: np.ndarray
    test_p: np.ndarray
    test_e: np.ndarray
    fit_info: dict[str, Any] = field(default_factory=dict)  # e.g. the strength a nested router chose on all of train


@dataclass
class Rung:
    """One rung at the matched budget: its two mixed knob values, test per-query values and curve."""

    name: str
    scorer: Scorer
    mus: tuple[float, float] = (0.0, 0.0)
    weight: float = 1.0  # share of queries routed with mus[0]
    train_accuracy: float = float("nan")
    train_energy_j: float = float("nan")
    test_correct: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    test_energy: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    curve: list[dict[str, float]] = field(default_factory=list)  # the train hull's vertices, on train and test
    train_hull: fixed_hull.Hull | None = field(default=None, repr=False)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class HeadroomResult:
    config: HeadroomConfig
    tournament: Tournament
    budget_j: float
    rungs: dict[str, Rung]
    routers: dict[str, dict[str, Any]]  # every content router: fit time, AUCs, its rung's statistics or error
    best_router: str | None
    steps: list[dict[str, Any]]  # each rung's content gain minus the previous rung's, paired
    hulls: dict[str, Any]
    fixed: dict[str, list[float]]  # the fixed models' test accuracy and mean joules
    scorer_auc: dict[str, dict[str, Any]]  # routability of every scorer's test P
    oracle_lead: dict[str, Any]
    noise_floor: dict[str, Any]
    generator: dict[str, Any] | None
    leak_free: dict[str, Any] | None = None  # ``leak_free_ceiling``: None for a pool of fewer than 4 models
    forms: dict[str, Any] | None = None  # ``ceiling_over_forms``: the chosen form, every form's log loss and ceiling
    elapsed_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def failures(self) -> list[str]:
        return [name for name, r in self.routers.items() if r.get("error")]


# ---------------------------------------------------------------------- routing by price
def price_actions(p: np.ndarray, e: np.ndarray, j_ref: float, mus: Sequence[float]) -> np.ndarray:
    """``[len(mus), n]``: per query the model maximising ``P - (mu + TIE_PRICE) x E / J_ref``."""
    price = np.asarray(e, dtype=np.float64) / j_ref
    return np.stack([(p - (mu + TIE_PRICE) * price).argmax(axis=1) for mu in mus])


def _gather(values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[M, n]`` values of ``[n, K]`` under ``[M, n]`` actions."""
    return np.take_along_axis(values, actions.T, axis=1).T


def train_curve(rung: Rung, train_correct: np.ndarray, train_energy: np.ndarray, j_ref: float) -> None:
    """The rung's training points for every mu of ``MU_GRID`` (its cross-fitted P and E) and
    their upper hull (``rung.train_hull``: what mixing two knob values reaches on train)."""
    s = rung.scorer
    actions = price_actions(s.train_p, s.train_e, j_ref, MU_GRID)
    acc, joules = _gather(train_correct, actions).mean(axis=1), _gather(train_energy, actions).mean(axis=1)
    rung.train_hull = fixed_hull.fixed_model_hull(joules, acc)


def match_budget(rung: Rung, test_correct: np.ndarray, test_energy: np.ndarray, j_ref: float, budget_j: float) -> None:
    """Mix the two vertices of the rung's training hull around the budget (module docstring)
    and route test with their mu and weight; the curve: every vertex on train and test."""
    hull = rung.train_hull
    vx, last = hull.energy_j, len(hull.energy_j) - 1
    if budget_j <= vx[0] or budget_j >= vx[last]:  # a rung that cannot spend the budget: its nearest end
        low = high = 0 if budget_j <= vx[0] else last
        weight = 1.0
    else:
        high = int(np.searchsorted(vx, budget_j))
        low = high - 1
        weight = float((vx[high] - budget_j) / (vx[high] - vx[low]))
    vertices = hull.vertex_index
    rung.mus = (float(MU_GRID[vertices[low]]), float(MU_GRID[vertices[high]]))
    rung.weight = weight
    rung.train_accuracy = float(weight * hull.accuracy[low] + (1 - weight) * hull.accuracy[high])
    rung.train_energy_j = float(weight * vx[low] + (1 - weight) * vx[high])
    curve_mus = MU_GRID[vertices]
    test_actions = price_actions(rung.scorer.test_p, rung.scorer.test_e, j_ref, curve_mus)
    test_c, test_j = _gather(test_correct, test_actions), _gather(test_energy, test_actions)
    rung.test_correct = weight * test_c[low] + (1 - weight) * test_c[high]
    rung.test_energy = weight * test_j[low] + (1 - weight) * test_j[high]
    rung.curve = [{"mu": float(mu), "train_accuracy": float(a), "train_energy_j": float(j),
                   "test_accuracy": float(c.mean()), "test_energy_j": float(e.mean())}
                  for mu, a, j, c, e in zip(curve_mus, hull.accuracy, vx, test_c, test_j)]


def choose_budget(task: Rung, shared: Rung, low_j: float, high_j: float, n: int = BUDGET_CANDIDATES) -> float:
    """The budget (``n`` joule values, geometric over ``[low_j, high_j]``) at which the
    shared-difficulty rung's training hull lies furthest above the task-aware rung's: where
    knowing how hard a question is is worth the most, chosen on train (cross-fitted)."""
    budgets = np.geomspace(low_j, high_j, n)
    gain = (fixed_hull.hull_accuracy_at(shared.train_hull.energy_j, shared.train_hull.accuracy, budgets)
            - fixed_hull.hull_accuracy_at(task.train_hull.energy_j, task.train_hull.accuracy, budgets))
    return float(budgets[int(np.argmax(gain))])


# ---------------------------------------------------------------------- scorers
def _cross_fitted(fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                  train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray) -> Scorer:
    """A scorer from ``fit_predict(fit_rows, predict_rows) -> (P, E)``: out-of-fold on train, all of train on test.
    The fit on all of train runs first, so a router can fix for its folds what that fit chose."""
    test_p, test_e = fit_predict(train_rows, test_rows)
    k_p = [fit_predict(np.setdiff1d(train_rows, held), held) for held in folds]
    position = {row: i for i, row in enumerate(train_rows)}
    train_p, train_e = np.zeros((len(train_rows), k_p[0][0].shape[1])), np.zeros((len(train_rows), k_p[0][0].shape[1]))
    for held, (p, e) in zip(folds, k_p):
        at = np.array([position[r] for r in held])
        train_p[at], train_e[at] = p, e
    return Scorer(train_p, train_e, test_p, test_e)


def _bench_means(t: Tournament, values: np.ndarray, fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``[len(rows), K]`` each row's (benchmark, model) mean of ``values`` over the ``fit`` rows."""
    codes = t.benchmark_codes
    return fixed_hull.benchmark_means(values[fit], codes[fit], len(t.benchmarks))[codes[rows]]


def _shared_scorers(t: Tournament, train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray,
                    share: np.ndarray | None = None) -> dict[str, Scorer]:
    """The shared-difficulty scorer under every form of ``forms.SHARE_FORMS``, cross-fitted: its
    share from ``share``, ``[N]`` per query, when given (reference models' outcomes), else the
    routed models' own. Their out-of-fold training P is what ``forms.choose_form`` reads."""
    codes, nb = t.benchmark_codes, len(t.benchmarks)

    def shared(form: str) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        def fit_predict(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            shares = (None, None) if share is None else (share[fit], share[rows])
            p = shared_difficulty_p(t.correct[fit], codes[fit], t.correct[rows], codes[rows], nb, *shares, form=form)
            return p, _bench_means(t, t.energy_j, fit, rows)
        return fit_predict

    return {form: _cross_fitted(shared(form), train_rows, folds, test_rows) for form in SHARE_FORMS}


def _label_scorers(t: Tournament, train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray,
                   shared: Scorer) -> dict[str, Scorer]:
    """The scorers that read no text: fixed models, per-benchmark, shared difficulty (``shared``:
    one form's scorer of ``_shared_scorers``), oracle."""

    def fixed(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.broadcast_to(t.correct[fit].mean(axis=0), (len(rows), t.n_models)),
                np.broadcast_to(t.energy_j[fit].mean(axis=0), (len(rows), t.n_models)))

    def task(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _bench_means(t, t.correct, fit, rows), _bench_means(t, t.energy_j, fit, rows)

    scorers = {name: _cross_fitted(fn, train_rows, folds, test_rows) for name, fn in (("fixed_model_hull", fixed),
                                                                                      ("task_aware_hull", task))}
    scorers["shared_difficulty"] = shared
    scorers["oracle"] = Scorer(t.correct[train_rows], t.energy_j[train_rows], t.correct[test_rows], t.energy_j[test_rows])
    return scorers


def train_folds(t: Tournament, train_rows: np.ndarray, n_folds: int, seed: int) -> list[np.ndarray]:
    """Cross-fitting folds of the training rows: copies of one question in one fold, each
    benchmark spread over the folds (``StratifiedGroupKFold``, shuffled)."""
    from sklearn.model_selection import StratifiedGroupKFold

    groups = question_groups(t.prompts[train_rows])
    if len(np.unique(groups)) < n_folds:
        raise UsageError(f"{t.card.name}: {len(np.unique(groups))} distinct training questions cannot fill {n_folds} folds")
    splitter = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [np.sort(train_rows[held]) for _, held in
            splitter.split(np.zeros(len(train_rows)), t.benchmark_codes[train_rows], groups)]


def _relabelled(t: Tournament, fit_rows: np.ndarray, heldout_rows: np.ndarray) -> Tournament:
    """A copy whose ``fit_rows`` form the split FIT_SPLIT and ``heldout_rows`` HELDOUT_SPLIT (the
    rest keep theirs): a router's FitContext then sees the fit rows only."""
    split = t.queries["split"].to_numpy(dtype=object).copy()
    split[fit_rows], split[heldout_rows] = FIT_SPLIT, HELDOUT_SPLIT
    queries = t.queries.copy()
    queries["split"] = split.astype(str)
    return dataclasses.replace(t, queries=queries)


def _router_scorer(name: str, config: HeadroomConfig, t: Tournament, train_rows: np.ndarray, folds: list[np.ndarray],
                   test_rows: np.ndarray) -> Scorer:
    """A content router fitted on all of train, then once per fold, asked for P (and E). A router
    that chooses a strength on validation (``chosen_strength``, agents/nested.py) chooses it in the
    fit on all of train; the folds reuse it, so the cross-fitted train points that fix mu belong
    to the same predictor as the test one."""
    from routing_gym_agents import FitContext, make_agent
    from routing_gym_agents.base import EnergyPredictor

    reward = Reward("gated_rank", dict(DEFAULT_COEFFICIENTS))  # recorded in fit logs; predictors train on outcomes
    kwargs = dict(config.agent_kwargs.get(name, {}))
    info: dict[str, Any] = {}

    def fit_predict(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        copy = _relabelled(t, fit, rows)
        agent = make_agent(name, **kwargs)
        agent.fit(FitContext(tournament=copy, reward=reward, train_split=FIT_SPLIT, seed=config.seed, feedback="full"))
        chosen = getattr(agent, "chosen_strength", None)
        if chosen is not None and "strength" not in kwargs:  # the first fit (all of train) chose: the folds keep it
            kwargs["strength"] = float(chosen)
            info["strength"] = "label only" if math.isinf(chosen) else float(chosen)
        batch = ObservationBatch.from_tournament(copy, rows)
        p = np.asarray(agent.predict_correct(batch), dtype=np.float64)
        if p.shape != (len(rows), t.n_models) or not np.isfinite(p).all() or p.min() < 0 or p.max() > 1:
            raise RoutingGymError(f"router {name!r}: predict_correct returned shape {p.shape} (want {(len(rows), t.n_models)}) "
                                  "or values outside [0, 1]")
        if isinstance(agent, EnergyPredictor):
            e = np.asarray(agent.predict_energy(batch), dtype=np.float64)
            if e.shape != p.shape or not np.isfinite(e).all():
                raise RoutingGymError(f"router {name!r}: predict_energy returned shape {e.shape} or non-finite joules")
        else:
            e = _bench_means(t, t.energy_j, fit, rows)
        return p, e

    scorer = _cross_fitted(fit_predict, train_rows, folds, test_rows)
    scorer.fit_info.update(info)
    return scorer


def resolve_routers(config: HeadroomConfig) -> list[str]:
    """The content routers of the run, each checked to be registered and to expose
    ``predict_correct`` before anything is fitted."""
    from routing_gym_agents import make_agent
    from routing_gym_agents.base import CorrectnessPredictor
    from routing_gym_agents.registry import list_agents, unknown_agent_error

    registered = list_agents()
    names = [r for r in DEFAULT_ROUTERS if r in registered] if config.routers is None else list(config.routers)
    for name in names:
        if name not in registered:
            raise unknown_agent_error(name)
        try:
            agent = make_agent(name, **config.agent_kwargs.get(name, {}))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"router {name!r}: {exc}") from None
        if not isinstance(agent, CorrectnessPredictor):
            raise UsageError(f"router {name!r} exposes no predict_correct(batch) -> [n, K] P(correct) (the "
                             "CorrectnessPredictor contract of routing_gym_agents.base): it cannot be a content rung")
        if getattr(agent, "feedback", "full") != "full":
            raise UsageError(f"router {name!r} learns from bandit feedback; headroom's content rung needs a "
                             "full-information correctness predictor")
    return names


# ---------------------------------------------------------------------- the run
@dataclass
class _Prepared:
    """What every rung of one run shares: the rows, the folds and the price scale."""

    t: Tournament
    train_rows: np.ndarray
    test_rows: np.ndarray
    folds: list[np.ndarray]
    j_ref: float
    budget: float = float("nan")
    form: str = "spline"  # the shared-difficulty map's form, chosen on train (forms.FORM_RULE)
    form_log_loss: dict[str, float] = field(default_factory=dict)
    form_scorers: dict[str, Scorer] = field(default_factory=dict)  # the shared-difficulty scorer under every form

    def curve(self, name: str, scorer: Scorer) -> Rung:
        r = Rung(name, scorer)
        train_curve(r, self.t.correct[self.train_rows], self.t.energy_j[self.train_rows], self.j_ref)
        return r

    def rung(self, name: str, scorer: Scorer) -> Rung:
        r = self.curve(name, scorer)
        self.match(r)
        return r

    def match(self, r: Rung) -> None:
        match_budget(r, self.t.correct[self.test_rows], self.t.energy_j[self.test_rows], self.j_ref, self.budget)


def _prepare(config: HeadroomConfig, t: Tournament, share: np.ndarray | None = None) -> tuple[_Prepared, dict[str, Rung]]:
    """The shared settings and the rungs that read no text, matched at the budget (the
    shared-difficulty rung's share from ``share`` when given, see ``_label_scorers``)."""
    train_rows, test_rows = t.split_rows(config.train_split), t.split_rows(config.test_split)
    if np.intersect1d(train_rows, test_rows).size:
        raise UsageError(f"train split {config.train_split!r} and test split {config.test_split!r} share queries")
    fixed_j = t.energy_j[train_rows].mean(axis=0)
    run = _Prepared(t, train_rows, test_rows, train_folds(t, train_rows, config.folds, config.seed),
                    max(float(fixed_j.max()), 1e-12))
    run.form_scorers = _shared_scorers(t, train_rows, run.folds, test_rows, share)
    run.form, run.form_log_loss = choose_form({f: s.train_p for f, s in run.form_scorers.items()}, t.correct[train_rows])
    scorers = _label_scorers(t, train_rows, run.folds, test_rows, run.form_scorers[run.form])
    rungs = {name: run.curve(name, s) for name, s in scorers.items()}
    run.budget = (config.budget_j if config.budget_j is not None else
                  choose_budget(rungs["task_aware_hull"], rungs["shared_difficulty"], float(fixed_j.min()), float(fixed_j.max())))
    for r in rungs.values():
        run.match(r)
    return run, rungs


def privileged_ladder(t: Tournament, config: HeadroomConfig) -> dict[str, Any]:
    """The ladder without content routers (no fitting: what ``compare``'s report shows): the
    budget, each label-only and privileged rung's statistics, and the oracle's lead by question."""
    run, rungs = _prepare(config, t)
    _statistics(config, t, run.train_rows, run.test_rows, rungs, {})
    return {"budget_j": run.budget, "form": run.form, "rungs": {n: r.stats for n, r in rungs.items()},
            "oracle_lead": _oracle_lead(t, rungs, run.test_rows)}


def leak_free_ceiling(config: HeadroomConfig, t: Tournament, partitions: int = LEAK_FREE_PARTITIONS) -> dict[str, Any]:
    """The shared-difficulty ceiling without reading the routed models' outcomes (module docstring).

    For each of ``partitions`` seeded random halvings of the pool, the ladder's label-only rungs
    run on one half (the candidates) with each question's difficulty read from the *other* half
    (the reference models, never routed), beside the same rung with the difficulty read from the
    candidates themselves (inclusive: an upper bound, it partly knows who was right). Both at the
    half-pool's own budget (``BUDGET_RULE`` with the leak-free rung, or ``config.budget_j``),
    against the half-pool's task-aware yardstick. The content gains are averaged over partitions,
    per resample too (every half-pool has the same queries, so the same resamples), for the
    interval. Returns the means, intervals, every partition's models and gains, and the pairwise
    AUC of each scorer's test P (0.5 for any scorer that knows difficulty or the label only)."""
    k = t.n_models
    if k < 4:
        raise UsageError(f"{t.card.name}: the leak-free ceiling splits the pool in two halves of >= 2 models; it has {k}")
    rng = np.random.default_rng(config.seed)
    gains: dict[str, list[float]] = {"leak_free": [], "inclusive": []}
    boots: dict[str, list[np.ndarray]] = {"leak_free": [], "inclusive": []}
    aucs: dict[str, list[float]] = {"leak_free": [], "inclusive": []}
    records = []
    for _ in range(partitions):
        order = rng.permutation(k)
        candidates, reference = np.sort(order[:k // 2]), np.sort(order[k // 2:])
        half = t.subset(models=[t.model_ids[i] for i in candidates])
        reference_share = share_right(t.correct[:, reference])
        run, rungs = _prepare(config, half, share=reference_share)
        rungs = {"task_aware_hull": rungs["task_aware_hull"], "leak_free": rungs["shared_difficulty"]}
        inclusive_scorers = _shared_scorers(half, run.train_rows, run.folds, run.test_rows)
        inclusive_form, _ = choose_form({f: s.train_p for f, s in inclusive_scorers.items()}, half.correct[run.train_rows])
        inclusive_scorer = inclusive_scorers[inclusive_form]
        rungs["inclusive"] = run.rung("inclusive", inclusive_scorer)
        _, _, _, boot = _statistics(config, half, run.train_rows, run.test_rows, rungs, {})
        record: dict[str, Any] = {"candidates": [t.model_ids[i] for i in candidates],
                                  "reference": [t.model_ids[i] for i in reference], "budget_j": run.budget,
                                  "form": {"leak_free": run.form, "inclusive": inclusive_form}}
        for name in gains:
            gains[name].append(rungs[name].stats["content_gain_pp"])
            boots[name].append(boot[name])
            auc = routability.routability(rungs[name].scorer.test_p, half.correct[run.test_rows],
                                          half.benchmark_codes[run.test_rows], half.benchmarks, half.model_ids)
            aucs[name].append(auc["pairwise_auc"])
            record[name] = {"content_gain_pp": rungs[name].stats["content_gain_pp"], "ci": rungs[name].stats["ci"],
                            "mean_j": rungs[name].stats["mean_j"], "pairwise_auc": auc["pairwise_auc"]}
        records.append(record)
    out: dict[str, Any] = {"partitions": records, "rule": LEAK_FREE_RULE}
    for name in gains:
        mean_boot = np.mean(boots[name], axis=0)
        out[name] = {"content_gain_pp": float(np.mean(gains[name])),
                     "ci": [float(v) for v in percentile_interval(mean_boot, config.confidence)],
                     "pairwise_auc": float(np.nanmean(aucs[name]))}
    return out


def ceiling_over_forms(config: HeadroomConfig, run: _Prepared, task: Rung) -> dict[str, Any]:
    """The shared-difficulty rung under every form of ``forms.SHARE_FORMS`` at the run's budget,
    beside the one chosen on train: content gains with paired intervals from one set of resamples."""
    t = run.t
    rungs = {"task_aware_hull": task}
    for form in SHARE_FORMS:
        rungs[form] = run.rung(form, run.form_scorers[form])
    _statistics(config, t, run.train_rows, run.test_rows, rungs, {})
    ceilings = {form: {"content_gain_pp": rungs[form].stats["content_gain_pp"], "ci": rungs[form].stats["ci"],
                       "mean_j": rungs[form].stats["mean_j"], "cross_fitted_log_loss": run.form_log_loss[form]}
                for form in SHARE_FORMS}
    gains = [c["content_gain_pp"] for c in ceilings.values()]
    return {"chosen": run.form, "rule": FORM_RULE, "forms": ceilings, "range_pp": [float(min(gains)), float(max(gains))]}


def _oracle_lead(t: Tournament, rungs: dict[str, Rung], test_rows: np.ndarray) -> dict[str, Any]:
    """The oracle's lead over the task-aware rung (both at the budget) by how many models answer each question."""
    return routability.lead_by_models_right(rungs["oracle"].test_correct, rungs["task_aware_hull"].test_correct,
                                            t.correct[test_rows])


def run_headroom(config: HeadroomConfig) -> HeadroomResult:
    """The ladder, routability and noise floor of one tournament (module docstring)."""
    from routing_gym.sources import resolve_tournament

    start, cpu_start = time.perf_counter(), time.process_time()
    config.check()
    router_names = resolve_routers(config)
    if not router_names:
        raise UsageError(f"none of the default content routers {DEFAULT_ROUTERS} is registered; name some with --routers")
    t = resolve_tournament(config.tournament)
    run, rungs = _prepare(config, t)
    routers: dict[str, dict[str, Any]] = {}
    router_rungs: dict[str, Rung] = {}
    for name in router_names:
        tic = time.perf_counter()
        try:
            router_rungs[name] = run.rung(name, _router_scorer(name, config, t, run.train_rows, run.folds, run.test_rows))
            routers[name] = {"fit_s": time.perf_counter() - tic, **router_rungs[name].scorer.fit_info}
        except Exception as exc:  # one router's failure must not sink the ladder
            routers[name] = {"fit_s": time.perf_counter() - tic, "error": f"{type(exc).__name__}: {exc}"}
        if config.progress:
            status = f"FAILED ({routers[name]['error'][:120]})" if "error" in routers[name] else "fitted"
            print(f"headroom: {name}: {status} in {routers[name]['fit_s']:.1f} s ({config.folds} folds + all of train)",
                  file=sys.stderr, flush=True)
    # the content rung: the router whose cross-fitted training point at the budget is the most accurate
    best = max(router_rungs, key=lambda n: router_rungs[n].train_accuracy, default=None)
    ordered = {n: rungs[n] for n in RUNGS[:2]}
    if best is not None:
        ordered["content_router"] = router_rungs[best]
    ordered.update({n: rungs[n] for n in RUNGS[3:]})
    hulls, fixed, steps, _ = _statistics(config, t, run.train_rows, run.test_rows, ordered, router_rungs)
    test_correct, codes_test = t.correct[run.test_rows], t.benchmark_codes[run.test_rows]
    # every scorer's test P but the oracle's (the outcomes themselves): the label-only ones are the 0.5 reference
    scored = {**{n: ordered[n] for n in ("fixed_model_hull", "task_aware_hull", "shared_difficulty")}, **router_rungs}
    scorer_auc = {n: routability.routability(r.scorer.test_p, test_correct, codes_test, t.benchmarks, t.model_ids)
                  for n, r in scored.items()}
    for name, r in router_rungs.items():
        auc = scorer_auc[name]
        routers[name].update(within_benchmark_auc=auc["within_benchmark_auc"], pairwise_auc=auc["pairwise_auc"],
                             train_accuracy_at_budget=r.train_accuracy, rung=r.stats, mus=list(r.mus), weight=r.weight)
    lead = _oracle_lead(t, ordered, run.test_rows)
    leak_free = leak_free_ceiling(config, t) if t.n_models >= 4 else None
    forms = ceiling_over_forms(config, run, rungs["task_aware_hull"])
    return HeadroomResult(
        config=config, tournament=t, budget_j=run.budget, rungs=ordered, routers=routers, best_router=best, steps=steps,
        hulls=hulls, fixed=fixed, scorer_auc=scorer_auc, oracle_lead=lead,
        noise_floor=routability.noise_floor(t.queries, t.correct, np.concatenate([run.train_rows, run.test_rows])),
        generator=generator_signal(t), leak_free=leak_free, forms=forms, elapsed_s=time.perf_counter() - start,
        cpu_s=time.process_time() - cpu_start,
    )


def _statistics(config: HeadroomConfig, t: Tournament, train_rows: np.ndarray, test_rows: np.ndarray,
                rungs: dict[str, Rung], router_rungs: dict[str, Rung]
                ) -> tuple[dict[str, Any], dict[str, list[float]], list[dict[str, Any]], dict[str, np.ndarray]]:
    """Every rung's (and router's) accuracy, joules, routing and content gain with paired
    intervals from one set of resamples; the hulls; the ladder's steps; each rung's resampled
    content gains (``[B]`` by rung name, the same resamples for every pool of the same queries)."""
    correct, energy = t.correct[test_rows], t.energy_j[test_rows]
    codes = t.benchmark_codes[test_rows]
    sticks = train_yardsticks(t.correct[train_rows], t.energy_j[train_rows], t.benchmark_codes[train_rows],
                              len(t.benchmarks), list(t.model_ids))
    route_c, route_e = sticks.routes.per_query(correct, codes), sticks.routes.per_query(energy, codes)
    methods = {**rungs, **{f"router:{n}": r for n, r in router_rungs.items()}}
    m_c = np.stack([r.test_correct for r in methods.values()], axis=1)
    m_e = np.stack([r.test_energy for r in methods.values()], axis=1)
    blocks = [m_c, m_e, correct, energy, route_c, route_e]
    widths = np.cumsum([0] + [b.shape[1] for b in blocks])
    plan = BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test_rows], config.n_bootstrap, config.bootstrap_seed)
    boot = plan.means(np.concatenate(blocks, axis=1))
    full = np.concatenate(blocks, axis=1).mean(axis=0)
    part = lambda v, i: v[..., widths[i]:widths[i + 1]]  # noqa: E731
    point = sticks.gains(*(part(full, i) for i in (3, 2, 5, 4, 1, 0)))
    resampled = sticks.gains(*(part(boot, i) for i in (3, 2, 5, 4, 1, 0)))
    interval = lambda values: [float(v) for v in percentile_interval(values, config.confidence)]  # noqa: E731
    for i, r in enumerate(methods.values()):
        r.stats = {
            "accuracy": float(part(full, 0)[i]), "accuracy_ci": interval(part(boot, 0)[:, i]),
            "mean_j": float(part(full, 1)[i]), "mean_j_ci": interval(part(boot, 1)[:, i]),
            "routing_gain_pp": float(point["routing_gain_pp"][i]), "routing_gain_ci": interval(resampled["routing_gain_pp"][:, i]),
            "content_gain_pp": float(point["content_gain_pp"][i]), "ci": interval(resampled["content_gain_pp"][:, i]),
        }
    names = list(rungs)
    steps = [{"from": a, "to": b, "content_gain_step_pp": float(point["content_gain_pp"][j] - point["content_gain_pp"][j - 1]),
              "ci": interval(resampled["content_gain_pp"][:, j] - resampled["content_gain_pp"][:, j - 1])}
             for j, (a, b) in enumerate(zip(names, names[1:]), start=1)]
    fixed_acc, fixed_j = correct.mean(axis=0), energy.mean(axis=0)
    candidates = fixed_hull.task_aware_points(fixed_j, fixed_acc, route_e.mean(axis=0), route_c.mean(axis=0))
    fixed_record, task_record = (stick.record(*candidates) for stick in (sticks.fixed, sticks.task))
    hulls = {"fixed_model": {"models": fixed_record["vertices"], "energy_j": fixed_record["energy_j"],
                             "accuracy": fixed_record["accuracy"], "rule": fixed_record["rule"]},
             "task_aware": {**task_record, "max_energy_j": float(candidates[0].max())}}
    boot_content = {name: resampled["content_gain_pp"][:, i] for i, name in enumerate(methods)}
    return hulls, {"accuracy": fixed_acc.tolist(), "mean_j": fixed_j.tolist()}, steps, boot_content


def generator_signal(t: Tournament) -> dict[str, Any] | None:
    """A procedural pool's true content signal from its card (None for real or imported data)."""
    config = t.card.extra.get("config") if isinstance(t.card.extra, dict) else None
    if not isinstance(config, dict) or "generator" not in t.card.extra:
        return None
    return {"generator": t.card.extra["generator"], "specialization_signal": float(config.get("specialization_signal", 0.0)),
            "text_signal": config.get("text_signal"), "noise": config.get("noise"),
            "meaning": "specialization_signal: how strongly per-model topic skills, named in the question text, decide "
                       "which model is right (0: off, correctness shared across models up to noise)"}
