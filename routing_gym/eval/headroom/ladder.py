"""The ladder's mechanics (``routing-gym headroom``, ``eval/headroom/__init__.py``): routing by price,
a rung's training hull and its matched budget, and the statistics every rung shares.

Statistics (``ladder_statistics``), all from one set of paired resamples of the held-out queries:

- each rung's accuracy, joules, routing and content gain, read against the yardsticks (chosen on
  train, ``eval/core/yardstick.py``) at the rung's **own** test joules, with the task-aware
  yardstick's **local slope** there (pp per J: how far a joule moves the yardstick, so how much a
  small joule mismatch is worth);
- at **common joules** (the budget and a grid fixed on train): each rung's test accuracy read
  along its own operating curve (the test points of its knob values, mixed between the two around
  J; test joules rise along the knob, query by query) and its content gain there, so steps
  between rungs are taken at the same J, not at each rung's own;
- family-wise verdicts (Romano-Wolf step-down, ``eval/core/familywise.py``) over the ladder's
  claims: every rung's content gain and every step at the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from routing_gym.errors import UsageError
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import train_yardsticks
from routing_gym.fronts import hull as fixed_hull
from routing_gym.tournament import Tournament
from routing_gym.tournament.duplicates import question_groups

# Price grid: mu = 0 (most likely right) up to a price at which every scorer picks its cheapest model.
MU_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 112)])
TIE_PRICE = 1e-9  # added to every mu so equal P go to the cheaper model
BUDGET_CANDIDATES = 48
COMMON_J_POINTS = 8  # the grid of common joules beside the budget
COMMON_J_RULE = (f"the budget and {COMMON_J_POINTS} joule values geometric from the cheapest to the costliest fixed "
                 "model's training mean (fixed on train); a rung's accuracy at J: the mix of its two consecutive knob "
                 "values whose test joules lie around J, its dearest point's beyond its curve (it spends less there, and "
                 "the yardstick is flat beyond its dearest policy too), none below its cheapest point")


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
    # ``[V, n]`` per-query test values at each vertex's knob (cheapest on train first): the test curve
    curve_correct: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    curve_energy: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    train_hull: fixed_hull.Hull | None = field(default=None, repr=False)
    stats: dict[str, Any] = field(default_factory=dict)


def grouped_folds(t: Tournament, rows: np.ndarray, n_folds: int, seed: int) -> list[np.ndarray]:
    """Cross-fitting folds of ``rows``: copies of one question in one fold, each benchmark
    spread over the folds (``StratifiedGroupKFold``, shuffled)."""
    from sklearn.model_selection import StratifiedGroupKFold

    groups = question_groups(t.prompts[rows])
    if len(np.unique(groups)) < n_folds:
        raise UsageError(f"{t.card.name}: {len(np.unique(groups))} distinct questions cannot fill {n_folds} folds")
    splitter = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [np.sort(rows[held]) for _, held in splitter.split(np.zeros(len(rows)), t.benchmark_codes[rows], groups)]


# ---------------------------------------------------------------------- cross-fitting
def out_of_fold(fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]], rows: np.ndarray,
                folds: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``[len(rows), K]`` P and E of ``rows``, each fold's rows predicted by a fit on the other folds."""
    k_p = [fit_predict(np.setdiff1d(rows, held), held) for held in folds]
    position = {row: i for i, row in enumerate(rows)}
    p_out, e_out = np.zeros((len(rows), k_p[0][0].shape[1])), np.zeros((len(rows), k_p[0][0].shape[1]))
    for held, (p, e) in zip(folds, k_p):
        at = np.array([position[r] for r in held])
        p_out[at], e_out[at] = p, e
    return p_out, e_out


def cross_fitted(fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                 train_rows: np.ndarray, folds: list[np.ndarray], test_rows: np.ndarray) -> Scorer:
    """A scorer from ``fit_predict(fit_rows, predict_rows) -> (P, E)``: out-of-fold on train, all of train on test.
    The fit on all of train runs first, so a router can fix for its folds what that fit chose."""
    test_p, test_e = fit_predict(train_rows, test_rows)
    return Scorer(*out_of_fold(fit_predict, train_rows, folds), test_p, test_e)


def bench_means(t: Tournament, values: np.ndarray, fit: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``[len(rows), K]`` each row's (benchmark, model) mean of ``values`` over the ``fit`` rows."""
    codes = t.benchmark_codes
    return fixed_hull.benchmark_means(values[fit], codes[fit], len(t.benchmarks))[codes[rows]]


# ---------------------------------------------------------------------- routing by price
def price_actions(p: np.ndarray, e: np.ndarray, j_ref: float, mus: Sequence[float]) -> np.ndarray:
    """``[len(mus), n]``: per query the model maximising ``P - (mu + TIE_PRICE) x E / J_ref``."""
    price = np.asarray(e, dtype=np.float64) / j_ref
    return np.stack([(p - (mu + TIE_PRICE) * price).argmax(axis=1) for mu in mus])


def gather(values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[M, n]`` values of ``[n, K]`` under ``[M, n]`` actions."""
    return np.take_along_axis(values, actions.T, axis=1).T


def train_curve(rung: Rung, train_correct: np.ndarray, train_energy: np.ndarray, j_ref: float) -> None:
    """The rung's training points for every mu of ``MU_GRID`` (its cross-fitted P and E) and
    their upper hull (``rung.train_hull``: what mixing two knob values reaches on train)."""
    s = rung.scorer
    actions = price_actions(s.train_p, s.train_e, j_ref, MU_GRID)
    acc, joules = gather(train_correct, actions).mean(axis=1), gather(train_energy, actions).mean(axis=1)
    rung.train_hull = fixed_hull.fixed_model_hull(joules, acc)


def match_budget(rung: Rung, test_correct: np.ndarray, test_energy: np.ndarray, j_ref: float, budget_j: float) -> None:
    """Mix the two vertices of the rung's training hull around the budget (the package
    docstring) and route test with their mu and weight; the curve: every vertex on train and test."""
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
    test_c, test_j = gather(test_correct, test_actions), gather(test_energy, test_actions)
    rung.curve_correct, rung.curve_energy = test_c.astype(np.float64), test_j.astype(np.float64)
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


def common_joules(budget_j: float, fixed_train_j: np.ndarray, n: int = COMMON_J_POINTS) -> np.ndarray:
    """The joules every rung is read at (``COMMON_J_RULE``): the budget first, then the grid."""
    return np.concatenate([[budget_j], np.geomspace(float(np.min(fixed_train_j)), float(np.max(fixed_train_j)), n)])


# ---------------------------------------------------------------------- reading curves
def curve_accuracy_at(curve_j: np.ndarray, curve_acc: np.ndarray, at: np.ndarray) -> np.ndarray:
    """A test curve's accuracy at mean joules ``at`` (``[...]``; curve points ``[..., V]`` in knob
    order, cheapest first): the mix of the two consecutive points around ``at``, the end point's
    value beyond either end (callers mark those None from the point estimate)."""
    cj = np.maximum.accumulate(np.asarray(curve_j, dtype=np.float64), axis=-1)  # rounding-level dips only
    acc = np.asarray(curve_acc, dtype=np.float64)
    x = np.asarray(at, dtype=np.float64)
    shape = np.broadcast_shapes(cj.shape[:-1], x.shape)
    cj, acc = (np.broadcast_to(v, shape + v.shape[-1:]) for v in (cj, acc))
    last = cj.shape[-1] - 1
    above = (cj < x[..., None]).sum(axis=-1)
    high, low = np.clip(above, 0, last)[..., None], np.clip(above - 1, 0, last)[..., None]
    j0, j1 = np.take_along_axis(cj, low, -1)[..., 0], np.take_along_axis(cj, high, -1)[..., 0]
    a0, a1 = np.take_along_axis(acc, low, -1)[..., 0], np.take_along_axis(acc, high, -1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(j1 > j0, (x - j0) / (j1 - j0), 0.0)
    return a0 + np.clip(share, 0.0, 1.0) * (a1 - a0)


def chain_slope_at(chain_j: np.ndarray, chain_acc: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Slope (accuracy per joule) of a yardstick chain ``[V]`` at ``at`` (``[M]``): its segment's
    rise over run; 0 beyond the dearest policy, where the yardstick is flat."""
    x = np.asarray(at, dtype=np.float64)
    segment = np.searchsorted(chain_j, x, side="right")  # chain_j[segment - 1] <= x < chain_j[segment]
    inside = segment < len(chain_j)
    s = np.clip(segment, 1, len(chain_j) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (chain_acc[s] - chain_acc[s - 1]) / (chain_j[s] - chain_j[s - 1])
    return np.where(inside & np.isfinite(slope), slope, 0.0)


# ---------------------------------------------------------------------- statistics
@dataclass
class LadderStatistics:
    hulls: dict[str, Any]
    fixed: dict[str, list[float]]  # the fixed models' test accuracy and mean joules
    steps: list[dict[str, Any]]  # consecutive rungs' difference at the budget (common J), paired; [] without common J
    resampled_content: dict[str, np.ndarray]  # ``[B]`` content gains by rung (the same resamples for every pool of the same queries)
    common: dict[str, Any] | None  # every rung's content gain at each common J
    # ``[J]`` and ``[B, J]`` content gains at the common J by rung, read at the nearest end beyond a curve
    common_point: dict[str, np.ndarray] = field(default_factory=dict)
    common_boot: dict[str, np.ndarray] = field(default_factory=dict)

    def step_over_label(self, name: str, confidence: float) -> dict[str, Any]:
        """Rung ``name``'s accuracy minus the task-aware rung's, pp, at every common J given (a grid
        fixed on train: no rung's own budget decides where it is read) and averaged over them, with
        the average's interval and ``[B]`` resamples (``resampled``)."""
        at_j = self.common_point[name] - self.common_point["task_aware_hull"]
        boot = (self.common_boot[name] - self.common_boot["task_aware_hull"]).mean(axis=1)
        return {"step_over_label_pp": float(at_j.mean()), "ci": [float(v) for v in percentile_interval(boot, confidence)],
                "at_joules_pp": [float(v) for v in at_j], "resampled": boot}


def ladder_statistics(t: Tournament, train_rows: np.ndarray, test_rows: np.ndarray, rungs: dict[str, Rung],
                      router_rungs: dict[str, Rung], n_bootstrap: int, confidence: float, bootstrap_seed: int,
                      joules: np.ndarray | None = None) -> LadderStatistics:
    """Every rung's (and router's) accuracy, joules, routing and content gain and the yardstick's
    slope there, with paired intervals from one set of resamples; the hulls; with ``joules``
    (``common_joules``; its first value the budget) each rung's content gain at those J and the
    ladder's steps at the budget."""
    correct, energy = t.correct[test_rows], t.energy_j[test_rows]
    codes = t.benchmark_codes[test_rows]
    sticks = train_yardsticks(t.correct[train_rows], t.energy_j[train_rows], t.benchmark_codes[train_rows],
                              len(t.benchmarks), list(t.model_ids), codes)
    route_c, route_e = sticks.routes.per_query(correct, codes), sticks.routes.per_query(energy, codes)
    methods = {**rungs, **{f"router:{n}": r for n, r in router_rungs.items()}}
    m_c = np.stack([r.test_correct for r in methods.values()], axis=1)
    m_e = np.stack([r.test_energy for r in methods.values()], axis=1)
    curve_names = list(rungs) if joules is not None else []
    curve_c = [rungs[n].curve_correct.T for n in curve_names]
    curve_e = [rungs[n].curve_energy.T for n in curve_names]
    blocks = [m_c, m_e, correct, energy, route_c, route_e, *curve_c, *curve_e]
    widths = np.cumsum([0] + [b.shape[1] for b in blocks])
    plan = BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test_rows], n_bootstrap, bootstrap_seed)
    stacked = np.concatenate(blocks, axis=1)
    boot, full = plan.means(stacked), stacked.mean(axis=0)
    part = lambda v, i: v[..., widths[i]:widths[i + 1]]  # noqa: E731
    candidates_full, candidates_boot = ([part(v, i) for i in (3, 2, 5, 4)] for v in (full, boot))
    point = sticks.gains(*candidates_full, part(full, 1), part(full, 0))
    resampled = sticks.gains(*candidates_boot, part(boot, 1), part(boot, 0))
    interval = lambda values: [float(v) for v in percentile_interval(values, confidence)]  # noqa: E731
    task_candidates = fixed_hull.task_aware_points(*candidates_full)
    chain_j, chain_acc = sticks.task.chain(*task_candidates)
    slopes = 100 * chain_slope_at(chain_j, chain_acc, part(full, 1))
    for i, r in enumerate(methods.values()):
        r.stats = {
            "accuracy": float(part(full, 0)[i]), "accuracy_ci": interval(part(boot, 0)[:, i]),
            "mean_j": float(part(full, 1)[i]), "mean_j_ci": interval(part(boot, 1)[:, i]),
            "routing_gain_pp": float(point["routing_gain_pp"][i]), "routing_gain_ci": interval(resampled["routing_gain_pp"][:, i]),
            "content_gain_pp": float(point["content_gain_pp"][i]), "ci": interval(resampled["content_gain_pp"][:, i]),
            "yardstick_slope_pp_per_j": float(slopes[i]),
        }
    names = list(rungs)
    steps, common, common_point, common_boot = [], None, {}, {}
    if joules is not None:  # steps are taken at the budget: without common joules there are none
        energy_at = 6 + len(curve_names)  # the curves' joules follow their correctness
        curves = {n: (part(full, energy_at + k), part(full, 6 + k), part(boot, energy_at + k), part(boot, 6 + k))
                  for k, n in enumerate(curve_names)}
        common, step_boot, common_point, common_boot = _at_common_joules(
            np.asarray(joules, dtype=np.float64), curves, sticks.task, candidates_full, candidates_boot, interval)
        steps = [{"from": a, "to": b, "at_j": float(joules[0]), **common["steps_at_budget"][k]}
                 for k, (a, b) in enumerate(zip(names, names[1:]))]
        _family_verdicts([rungs[n].stats for n in names], resampled["content_gain_pp"][:, :len(names)], steps, step_boot,
                         confidence)
    fixed_acc, fixed_j = correct.mean(axis=0), energy.mean(axis=0)
    fixed_record, task_record = (stick.record(*task_candidates) for stick in (sticks.fixed, sticks.task))
    hulls = {"fixed_model": {"models": fixed_record["vertices"], "energy_j": fixed_record["energy_j"],
                             "accuracy": fixed_record["accuracy"], "rule": fixed_record["rule"]},
             "task_aware": {**task_record, "max_energy_j": float(task_candidates[0].max())}}
    boot_content = {name: resampled["content_gain_pp"][:, i] for i, name in enumerate(methods)}
    return LadderStatistics(hulls, {"accuracy": fixed_acc.tolist(), "mean_j": fixed_j.tolist()}, steps, boot_content,
                            common, common_point, common_boot)


def _at_common_joules(joules: np.ndarray, curves: dict[str, tuple[np.ndarray, ...]], task_stick: Any,
                      candidates_full: list[np.ndarray], candidates_boot: list[np.ndarray], interval: Any
                      ) -> tuple[dict[str, Any], list[np.ndarray | None], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each rung's content gain at every common J (None where J lies below its test curve) and
    the steps between consecutive rungs at the budget (``joules[0]``), paired over resamples; and
    each step's ``[B]`` resamples (None where the budget lies below a rung's cheapest test point); and
    every rung's ``[J]`` and ``[B, J]`` gains read at its nearest end where J lies beyond its curve."""
    points = [fixed_hull.task_aware_points(*c) for c in (candidates_full, candidates_boot)]
    stick_full = task_stick.accuracy_at(*points[0], joules)  # [J]
    stick_boot = task_stick.accuracy_at(points[1][0][:, None, :], points[1][1][:, None, :], joules[None, :])  # [B, J]
    gains, boot_gains, reach = {}, {}, {}
    for name, (cj, ca, bj, ba) in curves.items():
        reach[name] = joules >= cj.min() - 1e-9  # beyond its dearest point a rung spends less: read there, as the yardstick is
        gains[name] = 100 * (curve_accuracy_at(cj, ca, joules) - stick_full)
        boot_gains[name] = 100 * (curve_accuracy_at(bj[:, None, :], ba[:, None, :], joules[None, :]) - stick_boot)
    rungs = {name: [{"joules": float(j), "content_gain_pp": float(gains[name][i]) if reach[name][i] else None,
                     "ci": interval(boot_gains[name][:, i]) if reach[name][i] else None}
                    for i, j in enumerate(joules)] for name in curves}
    names = list(curves)
    steps, step_boot = [], []
    for a, b in zip(names, names[1:]):
        both = bool(reach[a][0] and reach[b][0])
        steps.append({"content_gain_step_pp": float(gains[b][0] - gains[a][0]) if both else None,
                      "ci": interval(boot_gains[b][:, 0] - boot_gains[a][:, 0]) if both else None})
        step_boot.append(boot_gains[b][:, 0] - boot_gains[a][:, 0] if both else None)
    return ({"rule": COMMON_J_RULE, "joules": joules.tolist(), "rungs": rungs, "steps_at_budget": steps}, step_boot, gains,
            boot_gains)


def _family_verdicts(rung_stats: list[dict[str, Any]], rung_boot: np.ndarray, steps: list[dict[str, Any]],
                     step_boot: list[np.ndarray | None], confidence: float) -> None:
    """Family-wise verdicts (``eval/core/familywise.py``, Romano-Wolf step-down at 1 - confidence)
    over the ladder's claims: every rung's content gain and every step at the budget, written as
    ``verdict`` ("above", "below" or "" for not distinguishable from 0) into each record."""
    from routing_gym.eval.core import familywise

    defined = [k for k, b in enumerate(step_boot) if b is not None]
    estimate = np.array([r["content_gain_pp"] for r in rung_stats] + [steps[k]["content_gain_step_pp"] for k in defined])
    boot = np.column_stack([rung_boot] + [step_boot[k] for k in defined]) if defined else rung_boot
    decision = familywise.stepdown(estimate, boot, 1 - confidence)
    for r, verdict in zip(rung_stats, decision.decisions):
        r["verdict"] = verdict
    for step in steps:
        step["verdict"] = ""
    for k, verdict in zip(defined, decision.decisions[len(rung_stats):]):
        steps[k]["verdict"] = verdict
