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
   P_k(s) from training outcomes by a map of shared shape, ``logit P = a_bk + g_b(s)`` (one curve
   per benchmark, each model only shifting it: difficulty never re-orders models), its form
   chosen on train by cross-fitted log loss (``forms.py``; ``ceiling_over_forms`` reports the rung
   under every form beside it, the crossing forms as a labelled upper variant): knowing how hard
   a question is, not which model wins it. The share here includes the routed models' own
   outcomes, so the rung partly knows who was right: it is the *inclusive* upper bound.
   ``leak_free_ceiling`` reads difficulty only from models that are not routed: route among a
   random half of the pool, read the share from the other half, averaged over
   ``LEAK_FREE_PARTITIONS`` halvings, beside the inclusive rung on the same halves, both read on
   one grid of joules fixed on train (``simulation.py``: on pools whose ceiling is known it lands
   on it);
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

On test each rung's content gain (pp over the task-aware yardstick at its own mean joules, with
the yardstick's local slope there) and routing gain (over the fixed-model yardstick) come with
paired percentile bootstrap intervals: one ``BootstrapPlan`` resamples the held-out queries (copies
of a question together) for every rung and both yardsticks' policies at once
(``eval/core/yardstick.py``: chosen on train, the machinery of ``compare``). Every rung is also
read along its test curve at **common joules** (the budget and a grid fixed on train), and each
step up the ladder is the difference of two rungs at the budget, paired (``ladder.py``).

The content rung is also cross-fitted over the **whole tournament** (``whole.py``: every question
scored by a fit that never saw it, the router and its strength chosen inside each outer fold,
repeated over fold seeds, an interval that accounts for refitting), its pool the routers whose
predicted nested fitting fits ``whole_budget_s``.

Beside the ladder (``eval/headroom/routability.py``): within-benchmark and pairwise AUCs of every
scorer's test P, how much of the oracle's lead comes from questions only one or two models
answer, the noise floor, and on procedural pools the generator's true content signal
(``specialization_signal``). Mechanics: ``ladder.py`` (price rule, hulls, statistics); routers:
``routers.py``; outputs: ``report.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from routing_gym.errors import UsageError
from routing_gym.eval.core.stats import percentile_interval
from routing_gym.eval.headroom import routability
from routing_gym.eval.headroom.forms import (
    CROSSING_FORMS,
    FORM_RULE,
    SHARE_FORMS,
    SHARED_FORMS,
    choose_form,
    share_right,
    shared_difficulty_p,
)
from routing_gym.eval.headroom.ladder import (
    BUDGET_CANDIDATES,
    COMMON_J_POINTS,
    MU_GRID,
    TIE_PRICE,
    LadderStatistics,
    Rung,
    Scorer,
    bench_means,
    choose_budget,
    common_joules,
    cross_fitted,
    grouped_folds,
    ladder_statistics,
    match_budget,
    price_actions,
    train_curve,
)
from routing_gym.eval.headroom.routers import (
    DEFAULT_ROUTERS,
    resolve_routers,
    router_scorer,
)
from routing_gym.eval.headroom.whole import WHOLE_SEEDS, predicted_seconds, whole_tournament_rung
from routing_gym.tournament import Tournament

__all__ = ["BUDGET_CANDIDATES", "DEFAULT_ROUTERS", "MU_GRID", "RUNGS", "TIE_PRICE", "HeadroomConfig", "HeadroomResult",
           "Rung", "Scorer", "choose_budget", "leak_free_ceiling", "match_budget", "price_actions", "privileged_ladder",
           "run_headroom", "shared_difficulty_p", "train_curve"]

RUNGS = ("fixed_model_hull", "task_aware_hull", "content_router", "shared_difficulty", "oracle")
RUNG_LABELS = {"fixed_model_hull": "fixed-model hull", "task_aware_hull": "task-aware hull (benchmark label)",
               "content_router": "best content router", "shared_difficulty": "shared-difficulty ceiling (privileged)",
               "oracle": "oracle (privileged)"}
PRIVILEGED_RUNGS = frozenset({"shared_difficulty", "oracle"})
LEAK_FREE_PARTITIONS = 5
LEAK_FREE_RULE = (f"{LEAK_FREE_PARTITIONS} seeded random halvings of the pool: route among one half, read each "
                  "question's share of models right from the other half (never routed), through the shared-shape map "
                  "(difficulty never re-orders models); the rung's test accuracy minus the half-pool's task-aware rung's, "
                  "both read along their test curves at every joule value of one grid fixed on train (the half-pool's "
                  f"{COMMON_J_POINTS} common joules), averaged over the grid (paired), then over halvings (per resample for "
                  "the interval). Inclusive: the same map reading the candidates' own outcomes (an upper bound). Crossing: "
                  "the leak-free share through a map that lets each model its own curve (a labelled upper variant: it can "
                  "learn who wins)")
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
    # The content rung cross-fitted over the whole tournament, router and strength chosen inside
    # the outer folds (eval/headroom/whole.py): whole_folds folds (0: off) x whole_seeds fold seeds,
    # its pool the routers whose predicted nested fitting fits whole_budget_s together.
    whole_folds: int = 3
    whole_seeds: int = WHOLE_SEEDS
    whole_budget_s: float = 150.0

    def check(self) -> None:
        if self.folds < 2:
            raise UsageError(f"folds (--folds) must be >= 2, got {self.folds}")
        if self.whole_folds != 0 and self.whole_folds < 2:
            raise UsageError(f"whole_folds (--whole-folds) must be 0 (off) or >= 2, got {self.whole_folds}")
        if self.whole_seeds < 2:
            raise UsageError(f"whole_seeds (--whole-seeds) must be >= 2 (the spread over fold seeds), got {self.whole_seeds}")
        if not self.whole_budget_s >= 0:
            raise UsageError(f"whole_budget_s (--whole-budget-s) must be >= 0 seconds, got {self.whole_budget_s}")
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
    common: dict[str, Any] | None = None  # every rung's content gain at common joules (``ladder.COMMON_J_RULE``)
    whole: dict[str, Any] | None = None  # the content rung over the whole tournament (``whole.py``), or why not run
    elapsed_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def failures(self) -> list[str]:
        return [name for name, r in self.routers.items() if r.get("error")]


# ---------------------------------------------------------------------- scorers
def _shared_scorers(t: Tournament, train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray,
                    share: np.ndarray | None = None, forms: tuple[str, ...] = SHARE_FORMS) -> dict[str, Scorer]:
    """The shared-difficulty scorer under every form of ``forms.SHARE_FORMS``, cross-fitted: its
    share from ``share``, ``[N]`` per query, when given (reference models' outcomes), else the
    routed models' own. Their out-of-fold training P is what ``forms.choose_form`` reads."""
    codes, nb = t.benchmark_codes, len(t.benchmarks)

    def shared(form: str) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        def fit_predict(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            shares = (None, None) if share is None else (share[fit], share[rows])
            p = shared_difficulty_p(t.correct[fit], codes[fit], t.correct[rows], codes[rows], nb, *shares, form=form)
            return p, bench_means(t, t.energy_j, fit, rows)
        return fit_predict

    return {form: cross_fitted(shared(form), train_rows, folds, test_rows) for form in forms}


def _label_scorers(t: Tournament, train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray,
                   shared: Scorer) -> dict[str, Scorer]:
    """The scorers that read no text: fixed models, per-benchmark, shared difficulty (``shared``:
    one form's scorer of ``_shared_scorers``), oracle."""

    def fixed(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.broadcast_to(t.correct[fit].mean(axis=0), (len(rows), t.n_models)),
                np.broadcast_to(t.energy_j[fit].mean(axis=0), (len(rows), t.n_models)))

    def task(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return bench_means(t, t.correct, fit, rows), bench_means(t, t.energy_j, fit, rows)

    scorers = {name: cross_fitted(fn, train_rows, folds, test_rows) for name, fn in (("fixed_model_hull", fixed),
                                                                                      ("task_aware_hull", task))}
    scorers["shared_difficulty"] = shared
    scorers["oracle"] = Scorer(t.correct[train_rows], t.energy_j[train_rows], t.correct[test_rows], t.energy_j[test_rows])
    return scorers


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
    form: str = "shared-spline"  # the shared-difficulty map's form, chosen on train (forms.FORM_RULE)
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
    run = _Prepared(t, train_rows, test_rows, grouped_folds(t, train_rows, config.folds, config.seed),
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


def leak_free_ceiling(config: HeadroomConfig, t: Tournament, partitions: int = LEAK_FREE_PARTITIONS,
                      known: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> dict[str, Any]:
    """The shared-difficulty ceiling without reading the routed models' outcomes (module docstring).

    For each of ``partitions`` seeded random halvings of the pool, the label-only rungs run on one
    half (the candidates): ``leak_free`` reads each question's difficulty from the *other* half
    (the reference models, never routed) through the shared-shape map (``forms.SHARED_FORMS``:
    difficulty never re-orders models); ``inclusive`` reads it from the candidates themselves
    (an upper bound: it partly knows who was right); ``crossing`` is the leak-free share through a
    map that gives each model its own curve (``forms.CROSSING_FORMS``: a labelled upper variant, it
    can learn who wins). Each is measured as its step over the half-pool's task-aware rung, both
    read along their test curves at every joule value of one grid fixed on train (``COMMON_J_RULE``
    without a budget: no rung's own budget decides where another is read), averaged over the grid,
    then over partitions, per resample too (every half-pool has the same queries, so the same
    resamples), for the interval. Returns the means, intervals, every partition's models and steps,
    and the pairwise AUC of each map's test P (near 0.5 for a map that cannot re-order models).
    ``known(candidates, reference) -> [N, len(candidates)]``, where the truth is known
    (``simulation.py``): the true P given the reference models' outcomes, read as one more rung
    (``known``) on the same grid, halvings and resamples."""
    k = t.n_models
    if k < 4:
        raise UsageError(f"{t.card.name}: the leak-free ceiling splits the pool in two halves of >= 2 models; it has {k}")
    rng = np.random.default_rng(config.seed)
    names = ("leak_free", "inclusive", "crossing") + (("known",) if known is not None else ())
    gains: dict[str, list[float]] = {n: [] for n in names}
    boots: dict[str, list[np.ndarray]] = {n: [] for n in names}
    aucs: dict[str, list[float]] = {n: [] for n in names}
    records = []
    for _ in range(partitions):
        order = rng.permutation(k)
        candidates, reference = np.sort(order[:k // 2]), np.sort(order[k // 2:])
        half = t.subset(models=[t.model_ids[i] for i in candidates])
        train_rows, test_rows = half.split_rows(config.train_split), half.split_rows(config.test_split)
        fixed_j = half.energy_j[train_rows].mean(axis=0)
        run = _Prepared(half, train_rows, test_rows, grouped_folds(half, train_rows, config.folds, config.seed),
                        max(float(fixed_j.max()), 1e-12))
        grid = common_joules(float(fixed_j.min()), fixed_j)[1:]  # fixed on train, read by every rung alike
        run.budget = float(np.sqrt(grid[0] * grid[-1]))  # only matches each rung's own point; steps are read on the grid
        reference_share = share_right(t.correct[:, reference])
        free = _shared_scorers(half, train_rows, run.folds, test_rows, reference_share)
        own = _shared_scorers(half, train_rows, run.folds, test_rows, None, SHARED_FORMS)
        chosen = {"leak_free": choose_form({f: free[f].train_p for f in SHARED_FORMS}, half.correct[train_rows])[0],
                  "inclusive": choose_form({f: s.train_p for f, s in own.items()}, half.correct[train_rows])[0],
                  "crossing": choose_form({f: free[f].train_p for f in CROSSING_FORMS}, half.correct[train_rows],
                                          CROSSING_FORMS)[0]}
        scorers = {"leak_free": free[chosen["leak_free"]], "inclusive": own[chosen["inclusive"]],
                   "crossing": free[chosen["crossing"]]}
        if known is not None:
            truth = known(candidates, reference)
            scorers["known"] = Scorer(truth[train_rows], free["shared-linear"].train_e, truth[test_rows],
                                      free["shared-linear"].test_e)
        task = _label_scorers(half, train_rows, run.folds, test_rows, scorers["leak_free"])["task_aware_hull"]
        rungs = {"task_aware_hull": run.rung("task_aware_hull", task), **{n: run.rung(n, s) for n, s in scorers.items()}}
        ladder = _statistics(config, half, train_rows, test_rows, rungs, {}, grid)
        record: dict[str, Any] = {"candidates": [t.model_ids[i] for i in candidates],
                                  "reference": [t.model_ids[i] for i in reference], "joules": grid.tolist(), "form": chosen}
        for name in names:
            step = ladder.step_over_label(name, config.confidence)
            gains[name].append(step["step_over_label_pp"])
            boots[name].append(step.pop("resampled"))
            auc = routability.routability(rungs[name].scorer.test_p, half.correct[test_rows],
                                          half.benchmark_codes[test_rows], half.benchmarks, half.model_ids)
            aucs[name].append(auc["pairwise_auc"])
            record[name] = {**step, "pairwise_auc": auc["pairwise_auc"]}
        records.append(record)
    out: dict[str, Any] = {"partitions": records, "rule": LEAK_FREE_RULE}
    for name in names:
        mean_boot = np.mean(boots[name], axis=0)
        out[name] = {"step_over_label_pp": float(np.mean(gains[name])),
                     "ci": [float(v) for v in percentile_interval(mean_boot, config.confidence)],
                     "pairwise_auc": float(np.nanmean(aucs[name]))}
        if known is not None:  # estimate minus the truth, paired
            diff = mean_boot - np.mean(boots["known"], axis=0)
            out[name]["minus_known_pp"] = float(np.mean(gains[name]) - np.mean(gains["known"]))
            out[name]["minus_known_ci"] = [float(v) for v in percentile_interval(diff, config.confidence)]
    return out


def ceiling_over_forms(config: HeadroomConfig, run: _Prepared, task: Rung) -> dict[str, Any]:
    """The shared-difficulty rung under every form of ``forms.SHARE_FORMS`` (shared-shape and
    crossing), each as its step over the task-aware rung averaged over the grid of common joules
    fixed on train (both read along their test curves there), beside the one chosen on train:
    paired intervals from one set of resamples."""
    t = run.t
    rungs = {"task_aware_hull": dataclasses.replace(task, stats={})}  # a copy: the ladder's keeps its statistics
    for form in SHARE_FORMS:
        rungs[form] = run.rung(form, run.form_scorers[form])
    grid = common_joules(run.budget, t.energy_j[run.train_rows].mean(axis=0))[1:]
    ladder = _statistics(config, t, run.train_rows, run.test_rows, rungs, {}, grid)
    ceilings = {}
    for form in SHARE_FORMS:
        step = ladder.step_over_label(form, config.confidence)
        del step["resampled"]
        ceilings[form] = {**step, "cross_fitted_log_loss": run.form_log_loss[form],
                          "shape": "shared" if form in SHARED_FORMS else "crossing (upper variant)"}
    steps = [c["step_over_label_pp"] for f, c in ceilings.items() if f in SHARED_FORMS]
    crossing = choose_form({f: run.form_scorers[f].train_p for f in CROSSING_FORMS}, t.correct[run.train_rows],
                           CROSSING_FORMS)[0]
    return {"chosen": run.form, "crossing_chosen": crossing, "rule": FORM_RULE, "joules": grid.tolist(),
            "forms": ceilings, "range_pp": [float(min(steps)), float(max(steps))]}


def _oracle_lead(t: Tournament, rungs: dict[str, Rung], test_rows: np.ndarray) -> dict[str, Any]:
    """The oracle's lead over the task-aware rung (both at the budget) by how many models answer each question."""
    return routability.lead_by_models_right(rungs["oracle"].test_correct, rungs["task_aware_hull"].test_correct,
                                            t.correct[test_rows])


def run_headroom(config: HeadroomConfig) -> HeadroomResult:
    """The ladder, routability and noise floor of one tournament (module docstring)."""
    from routing_gym.sources import resolve_tournament

    start, cpu_start = time.perf_counter(), time.process_time()
    config.check()
    router_names = resolve_routers(config.routers, config.agent_kwargs)
    if not router_names:
        raise UsageError(f"none of the default content routers {DEFAULT_ROUTERS} is registered; name some with --routers")
    t = resolve_tournament(config.tournament)
    run, rungs = _prepare(config, t)
    routers: dict[str, dict[str, Any]] = {}
    router_rungs: dict[str, Rung] = {}
    for name in router_names:
        tic, cpu_tic = time.perf_counter(), time.process_time()
        try:
            scorer = router_scorer(name, t, config.seed, config.agent_kwargs.get(name, {}), run.train_rows, run.folds,
                                   run.test_rows)
            router_rungs[name] = run.rung(name, scorer)
            routers[name] = {"fit_s": time.perf_counter() - tic, "fit_cpu_s": time.process_time() - cpu_tic,
                             **router_rungs[name].scorer.fit_info}
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
    common_j = common_joules(run.budget, t.energy_j[run.train_rows].mean(axis=0))
    ladder = _statistics(config, t, run.train_rows, run.test_rows, ordered, router_rungs, common_j)
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
    whole = None if best is None else _whole(config, run, routers)
    return HeadroomResult(
        config=config, tournament=t, budget_j=run.budget, rungs=ordered, routers=routers, best_router=best,
        steps=ladder.steps, hulls=ladder.hulls, fixed=ladder.fixed, scorer_auc=scorer_auc, oracle_lead=lead,
        noise_floor=routability.noise_floor(t.queries, t.correct, np.concatenate([run.train_rows, run.test_rows])),
        generator=generator_signal(t), leak_free=leak_free, forms=forms, common=ladder.common, whole=whole,
        elapsed_s=time.perf_counter() - start, cpu_s=time.process_time() - cpu_start,
    )


def _whole(config: HeadroomConfig, run: _Prepared, routers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The content rung cross-fitted over the whole tournament with router and strength chosen
    inside the outer folds (``whole.py``), when asked for (``whole_folds``): its pool is every
    router that fitted on the split, the costliest left out until the predicted fitting CPU time of
    ``whole_seeds x whole_folds`` nested fits fits ``whole_budget_s``; else why not."""
    rows = np.union1d(run.train_rows, run.test_rows)
    fitted = [n for n, r in routers.items() if "error" not in r]
    if config.whole_folds == 0:
        return {"routers": fitted, "skipped": "turned off (--whole-folds 0)"}
    # from CPU seconds, not wall: on a loaded machine wall time would change which routers are in the pool
    predicted = {n: predicted_seconds(routers[n]["fit_cpu_s"], config.folds + 1, len(run.train_rows), len(rows),
                                      config.whole_folds, config.whole_seeds) for n in fitted}
    pool = sorted(fitted, key=predicted.__getitem__)
    while pool and sum(predicted[n] for n in pool) > config.whole_budget_s:
        pool.pop()
    left_out = {n: predicted[n] for n in fitted if n not in pool}
    if not pool:
        return {"routers": fitted, "predicted_s": predicted,
                "skipped": f"every router's nested fitting predicted over the {config.whole_budget_s:g} s budget "
                           f"(--whole-budget-s): {', '.join(f'{n} {v:.0f} s' for n, v in predicted.items())}"}
    pool = [n for n in fitted if n in pool]  # the ladder's order: ties go to the first
    seeds = [config.seed + i for i in range(config.whole_seeds)]
    bar = tqdm(total=len(seeds) * config.whole_folds, desc=f"headroom: nested whole ({', '.join(pool)})",
               disable=not config.progress, file=sys.stderr)
    with bar:
        out = whole_tournament_rung(run.t, pool, config.agent_kwargs, rows, config.whole_folds, seeds, run.budget,
                                    run.j_ref, config.n_bootstrap, config.confidence, config.bootstrap_seed, bar)
    return {**out, "predicted_s": sum(predicted[n] for n in pool),
            "left_out": {n: f"predicted {v:.0f} s of nested fitting, over the {config.whole_budget_s:g} s budget"
                         for n, v in left_out.items()}}


def _statistics(config: HeadroomConfig, t: Tournament, train_rows: np.ndarray, test_rows: np.ndarray,
                rungs: dict[str, Rung], router_rungs: dict[str, Rung], joules: np.ndarray | None = None) -> LadderStatistics:
    """``ladder.ladder_statistics`` with the run's bootstrap settings."""
    return ladder_statistics(t, train_rows, test_rows, rungs, router_rungs, config.n_bootstrap, config.confidence,
                             config.bootstrap_seed, joules)


def generator_signal(t: Tournament) -> dict[str, Any] | None:
    """A procedural pool's true content signal from its card (None for real or imported data)."""
    config = t.card.extra.get("config") if isinstance(t.card.extra, dict) else None
    if not isinstance(config, dict) or "generator" not in t.card.extra:
        return None
    return {"generator": t.card.extra["generator"], "specialization_signal": float(config.get("specialization_signal", 0.0)),
            "text_signal": config.get("text_signal"), "noise": config.get("noise"),
            "meaning": "specialization_signal: how strongly per-model topic skills, named in the question text, decide "
                       "which model is right (0: off, correctness shared across models up to noise)"}
