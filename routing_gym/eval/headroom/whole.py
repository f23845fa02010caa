"""The content-router rung cross-fitted over the whole tournament (``routing-gym headroom``).

The ladder reads every rung on the held-out split only. The content router's rung can use every
question instead: K folds over the training and held-out splits together (copies of a question in
one fold, each benchmark spread over the folds), each fold routed by a router fitted on the other
folds, so every question is scored by a fit that never saw it. Per fold, as on the split:

- the router's strength is the one its fit on the training split chose (no choice is made again);
- the knob: the router's out-of-fold points on the *other* folds, their upper hull over
  ``MU_GRID``, the two vertices around the budget mixed to spend it (the budget of the run, fixed
  on train);
- the yardstick: the task-aware chain chosen on the other folds, evaluated on the fold.

The task-aware (label) rung is cross-fitted the same way beside it: the yardstick's chain is chosen
in-sample on the other folds, so an honestly cross-fitted label rung can sit off it by a few tenths
of a point, and the router's text-reading value is its **step over the label rung** (paired).
Content gains are fold-size-weighted means of the folds' gains; intervals resample every question
(copies together) once, each fold's means and weight read from the same resample.
About sqrt(K) times narrower than the held-out split's interval where the split holds 1/K of the data.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import train_yardsticks
from routing_gym.eval.headroom.ladder import (
    Rung,
    Scorer,
    bench_means,
    grouped_folds,
    match_budget,
    out_of_fold,
    train_curve,
)
from routing_gym.eval.headroom.routers import router_fit_predict
from routing_gym.tournament import Tournament

WHOLE_RULE = ("{k} folds over the training and held-out splits together (copies of a question in one fold, stratified "
              "by benchmark, seed {seed}); each fold routed by the router fitted on the other folds with the strength "
              "its fit on train chose, the knob mixed to spend the run's budget on the other folds' out-of-fold points, "
              "the content gain read against the task-aware yardstick chosen on the other folds; pooled by fold size, "
              "one bootstrap over every question (copies together)")


def predicted_seconds(fit_s: float, split_fits: int, split_rows: int, whole_rows: int, k: int) -> float:
    """The whole-tournament cross-fit's predicted fitting time from the router's fits on the
    split (``split_fits`` fits took ``fit_s`` on about ``split_rows`` rows each): ``k`` fits on
    ``(k - 1) / k`` of ``whole_rows``, time taken as proportional to rows."""
    return k * (fit_s / split_fits) * ((k - 1) / k * whole_rows) / max(split_rows, 1)


def whole_tournament_rung(t: Tournament, name: str, kwargs: dict[str, Any], rows: np.ndarray, k: int, seed: int,
                          budget_j: float, j_ref: float, n_bootstrap: int, confidence: float,
                          bootstrap_seed: int) -> dict[str, Any]:
    """The content router ``name``'s rung over ``rows`` (the training and held-out splits) by
    ``k``-fold cross-fitting (module docstring), beside the task-aware rung cross-fitted the same
    way: each one's content gain, accuracy and joules, and the router's step over the label rung
    (paired), each with its interval. The step is the router's text-reading value: the label rung
    itself can sit off the yardstick, whose chain was chosen in-sample on the other folds."""
    tic = time.perf_counter()
    folds = grouped_folds(t, rows, k, seed)
    fit_predicts = {"task_aware_hull": lambda fit, held: (bench_means(t, t.correct, fit, held),
                                                          bench_means(t, t.energy_j, fit, held)),
                    name: router_fit_predict(name, t, seed, dict(kwargs), {})}
    predicted = {rung: out_of_fold(fp, rows, folds) for rung, fp in fit_predicts.items()}
    fit_s = time.perf_counter() - tic
    position = np.searchsorted(rows, np.concatenate(folds))
    fold_of = np.empty(len(rows), dtype=np.int64)
    fold_of[position] = np.repeat(np.arange(k), [len(f) for f in folds])
    nb, models = len(t.benchmarks), list(t.model_ids)
    blocks, layout = [], []
    for f in range(k):
        held, other = fold_of == f, fold_of != f
        o, h = rows[other], rows[held]
        method_c, method_e = [], []
        for rung_name, (p, e) in predicted.items():
            rung = Rung(rung_name, Scorer(p[other], e[other], p[held], e[held]))
            train_curve(rung, t.correct[o], t.energy_j[o], j_ref)
            match_budget(rung, t.correct[h], t.energy_j[h], j_ref, budget_j)
            method_c.append(rung.test_correct)
            method_e.append(rung.test_energy)
        sticks = train_yardsticks(t.correct[o], t.energy_j[o], t.benchmark_codes[o], nb, models, t.benchmark_codes[h])
        codes = t.benchmark_codes[h]
        values = [t.energy_j[h], t.correct[h], sticks.routes.per_query(t.energy_j[h], codes),
                  sticks.routes.per_query(t.correct[h], codes), np.stack(method_e, axis=1), np.stack(method_c, axis=1)]
        block = np.zeros((len(rows), 1 + sum(v.shape[1] for v in values)))
        block[held] = np.concatenate([np.ones((int(held.sum()), 1)), *values], axis=1)  # indicator, then the fold's values
        blocks.append(block)
        layout.append((sticks, np.cumsum([1] + [v.shape[1] for v in values])))
    stacked = np.concatenate(blocks, axis=1)
    plan = BootstrapPlan.of_rows(t.prompts[rows], n_bootstrap, bootstrap_seed)
    point, boot = _pooled(stacked.mean(axis=0)[None, :], layout), _pooled(plan.means(stacked), layout)
    interval = lambda values: [float(v) for v in percentile_interval(values, confidence)]  # noqa: E731
    rungs = {rung: {"content_gain_pp": float(point["gain"][0, i]), "ci": interval(boot["gain"][:, i]),
                    "accuracy": float(point["accuracy"][0, i]), "mean_j": float(point["mean_j"][0, i])}
             for i, rung in enumerate(predicted)}
    step = point["gain"][0, 1] - point["gain"][0, 0]
    return {"router": name, "folds": k, "n_queries": len(rows), **rungs[name], "task_aware_hull": rungs["task_aware_hull"],
            "step_over_label_pp": float(step), "step_ci": interval(boot["gain"][:, 1] - boot["gain"][:, 0]),
            "fit_s": fit_s, "kwargs": kwargs, "rule": WHOLE_RULE.format(k=k, seed=seed)}


def _pooled(means: np.ndarray, layout: list[tuple[Any, np.ndarray]]) -> dict[str, np.ndarray]:
    """Fold-size-weighted content gains (pp), accuracy and joules ``[B, M]`` per row of ``means``
    ``[B, C]`` (each fold's block: its share of queries, then its values' means over *all* queries)."""
    gain = accuracy = joules = total = 0.0
    start = 0
    for sticks, edges in layout:
        block = means[:, start:start + edges[-1]]
        start += edges[-1]
        share = block[:, :1]
        fixed_j, fixed_c, route_j, route_c, method_j, method_c = (block[:, a:b] / share
                                                                  for a, b in zip(edges[:-1], edges[1:]))
        g = sticks.gains(fixed_j, fixed_c, route_j, route_c, method_j, method_c)["content_gain_pp"]
        gain, total = gain + share * g, total + share
        accuracy, joules = accuracy + share * method_c, joules + share * method_j
    return {"gain": gain / total, "accuracy": accuracy / total, "mean_j": joules / total}
