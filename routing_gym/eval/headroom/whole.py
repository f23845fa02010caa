"""The content-router rung cross-fitted over the whole tournament, selection nested (``routing-gym headroom``).

The ladder reads every rung on the held-out split only. Here every question is used: ``K`` outer
folds over the training and held-out splits together (copies of a question in one fold, each
benchmark spread over the folds), repeated for ``S`` fold seeds. Inside each outer fold, using
only the other folds' rows (no winner's curse: nothing is chosen on the rows that are scored):

- **router and strength**: every content router is fitted on the other folds; each chooses its own
  strength on its validation part of them (``agents/nested.py``), and the router whose chosen
  strength has the highest validation value (its routes' accuracy minus price, the criterion
  the routers choose strengths by) routes the fold;
- **knob**: the router's predicted P and joules on the fold's questions trace its hull over
  ``MU_GRID`` (no outcome of the fold is read), the two vertices around the budget are mixed to
  spend it (the run's budget, fixed on train);
- **label rung**: the yardstick's own chain rule (``eval/core/yardstick.py``): the task-aware chain
  chosen on the other folds, its two policies around the budget mixed by their training joules.
  It therefore sits on the yardstick's chain: content gain 0, or below it by at most the optimism of
  reading the chain on the fold as the best mix of its policies; the router's step over it is what
  reading the text adds;
- **yardstick**: the task-aware chain chosen on the other folds, evaluated on the fold.

Interval (``WHOLE_INTERVAL_RULE``): the corrected repeated cross-validation t interval of Nadeau &
Bengio (2003, "Inference for the generalization error"; Bouckaert & Frank 2004) over the ``S x K``
fold-level steps: variance ``(1 / (S K) + n_test / n_train) x`` their sample variance, ``t`` with
``S K - 1`` degrees of freedom. The ``n_test / n_train`` term is what refitting on overlapping
training sets adds to the spread; a bootstrap of the questions that holds the fitted models fixed
leaves it out (``fixed_fit_ci``, the first seed's, kept for comparison). Chosen over the nested
cross-validation of Bates, Hastie & Tibshirani (2023), which refits every router ``K (K - 1)``
times per repeat, and over a bootstrap over refits (one refit per resample): either is tens of
times the fits the CPU budget of a run allows (``routing-gym headroom`` <= 5 minutes CPU per real
tournament). Family-wise verdicts over several tournaments' steps: ``familywise_over``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from scipy import stats as scipy_stats

from routing_gym.eval.core import familywise
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardsticks, train_yardsticks
from routing_gym.eval.headroom.ladder import Rung, Scorer, grouped_folds, match_budget, train_curve
from routing_gym.eval.headroom.routers import router_fit_predict
from routing_gym.tournament import Tournament

WHOLE_SEEDS = 5
WHOLE_RULE = ("{k} folds over the training and held-out splits together (copies of a question in one fold, stratified "
              "by benchmark), repeated for fold seeds {seeds}; in each fold, from the other folds only: every router "
              "fitted, each choosing its strength on its own validation part, the router with the highest validation "
              "value routing the fold (nested selection); its knob mixed to spend the run's budget by its own predicted P "
              "and joules on the fold's questions (no outcome read); the label rung the task-aware yardstick's chain "
              "(chosen on the other folds) mixed at the budget; gains read against that yardstick on the fold, pooled by "
              "fold size, averaged over seeds")
WHOLE_INTERVAL_RULE = ("corrected repeated cross-validation t interval (Nadeau & Bengio 2003): over the S x K fold-level "
                       "values, variance (1/(S K) + 1/(K - 1)) x their sample variance, t with S K - 1 degrees of freedom "
                       "(accounts for refitting on overlapping training sets)")


def predicted_seconds(fit_s: float, split_fits: int, split_rows: int, whole_rows: int, k: int, n_seeds: int = 1) -> float:
    """The nested whole-tournament cross-fit's predicted fitting time for one router from its fits
    on the split (``split_fits`` fits took ``fit_s`` on about ``split_rows`` rows each): ``k`` fits
    per seed on ``(k - 1) / k`` of ``whole_rows``, time taken as proportional to rows."""
    return n_seeds * k * (fit_s / split_fits) * ((k - 1) / k * whole_rows) / max(split_rows, 1)


def _chain_rung(sticks: Yardsticks, correct: np.ndarray, energy: np.ndarray, codes: np.ndarray, budget_j: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per-query correctness and joules of the label rung on the yardstick's chain rule: the two
    chain policies (null point first) around ``budget_j`` by their *training* joules, mixed to spend it."""
    chain_j = np.concatenate([[0.0], sticks.task.train_energy_j])
    candidates = [np.concatenate([v, sticks.routes.per_query(v, codes)], axis=1) for v in (correct, energy)]
    policy = [np.zeros((len(codes), 1))] * 2  # the null policy: answers nothing, spends nothing
    values = [np.concatenate([z, c[:, sticks.task.index]], axis=1) for z, c in zip(policy, candidates)]
    if budget_j >= chain_j[-1]:
        return values[0][:, -1].astype(np.float64), values[1][:, -1].astype(np.float64)
    high = int(np.searchsorted(chain_j, budget_j, side="right"))
    w = float((chain_j[high] - budget_j) / (chain_j[high] - chain_j[high - 1]))
    return tuple(w * v[:, high - 1] + (1 - w) * v[:, high] for v in values)  # type: ignore[return-value]


def _self_matched(p: np.ndarray, e: np.ndarray, correct: np.ndarray, energy: np.ndarray, j_ref: float, budget_j: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per-query correctness and joules of a router routing by its own predictions, its knob
    mixed to spend ``budget_j`` on its *predicted* hull of the same questions (no outcome read)."""
    rung = Rung("router", Scorer(p, e, p, e))
    train_curve(rung, p, e, j_ref)
    match_budget(rung, correct, energy, j_ref, budget_j)
    return rung.test_correct, rung.test_energy


def _fold_values(t: Tournament, sticks: Yardsticks, held: np.ndarray, method_c: list[np.ndarray],
                 method_e: list[np.ndarray]) -> list[np.ndarray]:
    """The fold's per-query values in ``_pooled``'s layout (``sticks``: chosen on the other folds)."""
    codes = t.benchmark_codes[held]
    return [t.energy_j[held], t.correct[held], sticks.routes.per_query(t.energy_j[held], codes),
                    sticks.routes.per_query(t.correct[held], codes), np.stack(method_e, axis=1), np.stack(method_c, axis=1)]


def whole_tournament_rung(t: Tournament, routers: Sequence[str], agent_kwargs: dict[str, dict[str, Any]], rows: np.ndarray,
                          k: int, seeds: Sequence[int], budget_j: float, j_ref: float, n_bootstrap: int, confidence: float,
                          bootstrap_seed: int, progress: Any = None) -> dict[str, Any]:
    """The nested content rung over ``rows`` (module docstring): per seed and overall the router's
    content gain, the label rung's and the step between them (the text-reading value), with the
    corrected repeated-CV interval, the seeds' spread, which router each fold chose, and the first
    seed's fixed-fit bootstrap interval for comparison."""
    tic, cpu_tic = time.perf_counter(), time.process_time()
    fold_steps, fold_gains, fold_labels = [], [], []
    per_seed, choices = [], []
    fixed_fit: dict[str, Any] = {}
    for s_index, seed in enumerate(seeds):
        folds = grouped_folds(t, rows, k, seed)
        blocks, layout, sizes = [], [], []
        for held in folds:
            fit = np.setdiff1d(rows, held)
            fitted: dict[str, tuple[np.ndarray, np.ndarray, dict[str, Any]]] = {}
            for name in routers:
                info: dict[str, Any] = {}
                p, e = router_fit_predict(name, t, seed, dict(agent_kwargs.get(name, {})), info)(fit, held)
                fitted[name] = (p, e, info)
            # the first router wins ties (and where no router validated: strengths given by hand)
            chosen = max(routers, key=lambda n: fitted[n][2].get("validation_value", -np.inf))
            choices.append({"seed": int(seed), "router": chosen, "strength": fitted[chosen][2].get("strength")})
            p, e, _ = fitted[chosen]
            rc, re_ = _self_matched(p, e, t.correct[held], t.energy_j[held], j_ref, budget_j)
            sticks = train_yardsticks(t.correct[fit], t.energy_j[fit], t.benchmark_codes[fit], len(t.benchmarks),
                                      list(t.model_ids))
            lc, le = _chain_rung(sticks, t.correct[held], t.energy_j[held], t.benchmark_codes[held], budget_j)
            values = _fold_values(t, sticks, held, [lc, rc], [le, re_])
            g = _pooled(np.concatenate([np.ones(1), *(v.mean(axis=0) for v in values)])[None, :],
                        [(sticks, np.cumsum([1] + [v.shape[1] for v in values]))])["gain"][0]
            fold_labels.append(float(g[0]))
            fold_gains.append(float(g[1]))
            fold_steps.append(float(g[1] - g[0]))
            sizes.append(len(held))
            if s_index == 0:  # the first seed's blocks: the fixed-fit bootstrap, for comparison
                block = np.zeros((len(rows), 1 + sum(v.shape[1] for v in values)))
                at = np.searchsorted(rows, held)
                block[at] = np.concatenate([np.ones((len(held), 1)), *values], axis=1)
                blocks.append(block)
                layout.append((sticks, np.cumsum([1] + [v.shape[1] for v in values])))
            if progress is not None:
                progress.update(1)
        w = np.asarray(sizes, dtype=np.float64) / np.sum(sizes)
        last = slice(len(fold_steps) - k, len(fold_steps))
        per_seed.append({"seed": int(seed), "label_pp": float(w @ np.asarray(fold_labels[last])),
                         "content_gain_pp": float(w @ np.asarray(fold_gains[last])),
                         "step_over_label_pp": float(w @ np.asarray(fold_steps[last]))})
        if s_index == 0:
            plan = BootstrapPlan.of_rows(t.prompts[rows], n_bootstrap, bootstrap_seed)
            boot = _pooled(plan.means(np.concatenate(blocks, axis=1)), layout)["gain"]
            fixed_fit = {"seed": int(seed), "step_ci": [float(v) for v in percentile_interval(boot[:, 1] - boot[:, 0], confidence)]}
    estimate = {key: float(np.mean([s[key] for s in per_seed])) for key in ("label_pp", "content_gain_pp", "step_over_label_pp")}
    intervals = {key: corrected_interval(np.asarray(v), k, confidence)
                 for key, v in (("label_pp", fold_labels), ("content_gain_pp", fold_gains), ("step_over_label_pp", fold_steps))}
    steps = [s["step_over_label_pp"] for s in per_seed]
    chosen_names = [c["router"] for c in choices]
    return {"routers": list(routers), "chosen": {n: chosen_names.count(n) for n in routers}, "choices": choices,
            "router": max(routers, key=chosen_names.count), "folds": k, "seeds": [int(s) for s in seeds],
            "n_queries": len(rows), "content_gain_pp": estimate["content_gain_pp"], "ci": intervals["content_gain_pp"]["ci"],
            "task_aware_hull": {"content_gain_pp": estimate["label_pp"], "ci": intervals["label_pp"]["ci"]},
            "step_over_label_pp": estimate["step_over_label_pp"], "step_ci": intervals["step_over_label_pp"]["ci"],
            "step_se": intervals["step_over_label_pp"]["se"], "step_df": intervals["step_over_label_pp"]["df"],
            "seed_spread": {"min": float(min(steps)), "max": float(max(steps)), "sd": float(np.std(steps, ddof=1))
                            if len(steps) > 1 else 0.0},
            "per_seed": per_seed, "fixed_fit_ci": fixed_fit, "fit_s": time.perf_counter() - tic,
            "fit_cpu_s": time.process_time() - cpu_tic,
            "rule": WHOLE_RULE.format(k=k, seeds=", ".join(str(s) for s in seeds)), "interval_rule": WHOLE_INTERVAL_RULE}


def corrected_interval(values: np.ndarray, k: int, confidence: float) -> dict[str, Any]:
    """``WHOLE_INTERVAL_RULE`` over ``S x K`` fold-level values: the mean, its corrected standard
    error and t interval (degrees of freedom ``S K - 1``)."""
    n = len(values)
    mean = float(np.mean(values))
    var = float(np.var(values, ddof=1)) if n > 1 else 0.0
    se = float(np.sqrt((1.0 / n + 1.0 / (k - 1)) * var))
    q = float(scipy_stats.t.ppf(0.5 + confidence / 2, max(n - 1, 1)))
    return {"mean": mean, "se": se, "df": n - 1, "ci": [mean - q * se, mean + q * se]}


def familywise_over(wholes: dict[str, dict[str, Any]], confidence: float, seed: int = 0, draws: int = 10000
                    ) -> dict[str, str]:
    """Family-wise verdicts ("above", "below", "") on several tournaments' whole-tournament steps
    (Romano-Wolf step-down, ``eval/core/familywise.py``) from draws of each step's corrected t
    distribution (estimate + se x t_df), drawn independently per tournament (tournaments that
    share questions are positively dependent, for which independent draws are conservative)."""
    names = [n for n, w in wholes.items() if "step_se" in w]
    if not names:
        return {}
    rng = np.random.default_rng(seed)
    estimate = np.array([wholes[n]["step_over_label_pp"] for n in names])
    resampled = np.column_stack([estimate[i] + wholes[n]["step_se"] * rng.standard_t(max(wholes[n]["step_df"], 1), draws)
                                 for i, n in enumerate(names)])
    decision = familywise.stepdown(estimate, resampled, 1 - confidence)
    return dict(zip(names, decision.decisions))


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
