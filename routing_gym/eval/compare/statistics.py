"""``compare``'s statistics: the finished cells aggregated into one ``CompareResult``.

Each number is the mean over seeds of the per-seed metric; 95 % intervals are percentile
bootstrap intervals over held-out queries of the seed-averaged per-query values (copies of a
question together, resampled within each benchmark);
``*_seed_sd`` is the spread over seeds. One set of resamples is drawn per run and every
resampled mean (each method's metrics, the fixed models' accuracy and joules) comes from one
matrix product, so the hull gains (``fronts/hull.py``: routing gain in pp and joules saved in %
over the fixed-model yardstick, content gain in pp over the task-aware one, both chosen on train
and read per resample, ``eval/core/yardstick.py``; rows whose resampled gain has an atom or two
modes flagged, ``<gain>_shape``) and the strict pairwise dominance tests cost no further passes
over the queries. Also here: the Pareto fronts and hypervolumes, and the online regret curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.envs import Reward
from routing_gym.errors import UnknownNameError
from routing_gym.eval.compare.cells import PER_QUERY, CompareConfig, RunRecord
from routing_gym.eval.core import familywise
from routing_gym.eval.core.pareto import hypervolume, pareto_front
from routing_gym.eval.core.robustness import robustness_of_runs
from routing_gym.eval.core.stats import (ATOM_SHARE, BootstrapPlan, dominance_from_resamples, percentile_interval, resample_shape,
                                        seed_spread)
from routing_gym.eval.execution import audit
from routing_gym.fronts import hull as fixed_hull
from routing_gym.fronts import mo_fronts
from routing_gym.eval.core.yardstick import (DEARER_THAN_CHAIN, MORE_ACCURATE_THAN_CHAIN, WITHIN, YARDSTICK_RULE, Yardsticks,
                                         train_yardsticks)
from routing_gym.tournament import Tournament
from routing_gym.tournament.duplicates import duplicate_counts, question_groups


# Hypervolume reference: accuracy 0 and 1.1 x the most expensive fixed model's mean joules,
# so that every fixed model encloses some area.
HV_REFERENCE_FACTOR = 1.1
_CI_METRICS = {"accuracy": "correct", "mean_energy_j": "energy_j", "mean_latency_s": "latency_s",
               "mean_power_w": "mean_power_w", "mean_reward": "rewards"}
HULL_RULE = (f"fixed-model yardstick, {YARDSTICK_RULE}; routing gain = accuracy - yardstick accuracy at the method's "
             "mean J (pp); joules saved = 1 - method J / yardstick J at the method's accuracy (%), none ('—') where the "
             "method is more accurate than every policy of the chain in more than the interval's tail of resamples, and "
             "no interval where its resamples have an atom or two modes (near a flat part of the yardstick the least "
             "joules reaching an accuracy jumps)")
SHAPE_RULE = (f"'(atom)': one value held by >= {ATOM_SHARE:.0%} of the resamples while the others differ (e.g. a "
              "policy of the yardstick, 0 wherever it is a vertex of the test hull); '(two modes)': a valley in the "
              "resamples' histogram inside the interval; the percentile interval of such a gain is a rough summary")
_SHAPED = ("routing_gain_pp", "joules_saved_pct", "content_gain_pp")


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
    def n_groups(self) -> int:
        """Independent units of the bootstrap: held-out questions, copies of one text counted once."""
        return int(len(set(question_groups(self.tournament.queries["prompt"].to_numpy()[self.test_rows]))))

    @property
    def failures(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status != "ok"]

    def row(self, method: str) -> dict[str, Any]:
        for r in self.rows:
            if r["method"] == method:
                return r
        raise UnknownNameError("method", method, [r["method"] for r in self.rows], known_as="in this comparison")

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
                       "invalid_penalty": self.reward.invalid_penalty,
                       "allow_ungated": self.reward.allow_ungated, "describe": self.reward.describe()},
            "seeds": c.seed_list,
            "agents": sorted({r.method for r in self.runs if r.kind == "agent"}),
            "agent_kwargs": c.agent_kwargs,
            "intervals": (f"{c.confidence:.0%} percentile bootstrap over {len(self.test_rows)} held-out queries "
                          f"(copies of a question resampled together: {self.n_groups} groups; within each benchmark, "
                          f"keeping its count) "
                          f"({c.n_bootstrap} resamples, seed {c.bootstrap_seed}) of seed-averaged per-query values"),
            "invalid_actions": "count as wrong, cost 0 J / 0 s / 0 W, earn the invalid penalty",
            "hypervolume_reference": self.pareto["reference"],
            "hull": HULL_RULE,
            "task_hull": fixed_hull.TASK_HULL_RULE,
            "shape": SHAPE_RULE,
            "warnings": self.warnings,
            "executor": c.executor,
            "elapsed_s": self.elapsed_s,
        }


def aggregate(config: CompareConfig, t: Tournament, reward: Reward, test_rows: np.ndarray, runs: list[RunRecord]) -> CompareResult:
    """Every finished run (fixed-model rows, then the cells in table order) as one ``CompareResult``."""
    methods = list(dict.fromkeys(r.method for r in runs))
    rows, per_benchmark, pooled = [], [], {}
    routes_of: dict[bytes, str] = {}  # every seed's actions -> the first row that took exactly those
    for method in methods:
        mine = [r for r in runs if r.method == method]
        ok = [r for r in mine if r.status == "ok"]
        row: dict[str, Any] = {
            "method": method, "kind": mine[0].kind, "feedback": mine[0].feedback,
            "deployable": mine[0].deployable, "seeds_ok": len(ok), "seeds_failed": len(mine) - len(ok),
            "reads_question": mine[0].kind != "fixed-model" and audit.reads_question(method),
        }
        if mine[0].kind == "agent":
            row.update(audit.row_fields(mine[0].deployable, [r.audit for r in ok], [r.training_feedback for r in ok]))
            if not ok:  # nothing ran to verify
                row.update(deployable_label="no" if not mine[0].deployable else "—", deployable=False)
        else:
            row.update(deployable_label="yes", training_feedback="")
        if ok:
            pooled[method] = {k: np.mean([r.per_query[k] for r in ok], axis=0) for k in PER_QUERY}
            row["same_routes_as"] = _same_routes(ok, routes_of)
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
    hulls = _hull_gains(config, t, test_rows, by_method, resampled)

    pareto = _pareto(rows, t, test_rows)
    pareto.update(hulls)
    # the same actions under every energy law the tournament records (derived tournaments only)
    robust = robustness_of_runs(t, test_rows, runs, resampled["plan"], config.confidence,
                                withheld={r["method"] for r in rows if audit.withheld(r["deployable_label"])},
                                train_rows=t.split_rows(config.train_split))
    if robust is not None:
        pareto["robustness"] = robust.to_dict()
        for r in rows:
            r["verdict_robust_across_energy_laws"] = robust.robust.get(r["method"])
    for r in rows:
        if r["seeds_ok"]:
            r["hypervolume"] = hypervolume([r["accuracy"]], [r["mean_energy_j"]], pareto["reference"]["energy_j"],
                                           pareto["reference"]["accuracy"], normalise=True)
    ok = {r["method"]: (r["accuracy"], r["mean_energy_j"]) for r in rows if r["seeds_ok"]}
    pareto["mo_indicators"] = mo_fronts.indicators(
        t, test_rows, pareto["reference"]["energy_j"], pareto["hull"], pareto["task_hull"], ok,
        {f"front of {g} methods": tuple(zip(*(ok[m] for m in pareto[f"front_{g}"]))) for g in ("deployable", "all")
         if pareto.get(f"front_{g}")})
    dominance = _dominance(config, t, test_rows, by_method, resampled["methods"])
    regret = _regret_curves(runs, t, reward, config.train_split)
    return CompareResult(config, t, reward, test_rows, runs, rows, per_benchmark, dominance, pareto, regret)


_ACC, _J = list(_CI_METRICS).index("accuracy"), list(_CI_METRICS).index("mean_energy_j")


def _resample(config: CompareConfig, t: Tournament, test_rows: np.ndarray,
              pooled: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Every resampled mean the run reports, from one pass over one set of resamples (copies of a
    question resampled together): per method ``[B, len(_CI_METRICS)]``, the fixed models'
    accuracy and joules ``[B, K]``, and those of the per-benchmark routes ``[B, P]``; with the
    yardsticks chosen on the training split (``eval/core/yardstick.py``)."""
    plan = test_plan(config, t, test_rows)
    k, width = t.n_models, len(_CI_METRICS)
    train = t.split_rows(config.train_split)
    sticks = train_yardsticks(t.correct[train], t.energy_j[train], t.benchmark_codes[train], len(t.benchmarks),
                              list(t.model_ids), t.benchmark_codes[test_rows])
    codes, p = t.benchmark_codes[test_rows], len(sticks.routes)
    route_values = [sticks.routes.per_query(t.correct[test_rows], codes), sticks.routes.per_query(t.energy_j[test_rows], codes)]
    blocks = [np.stack([pooled[m][_CI_METRICS[c]] for c in _CI_METRICS], axis=1) for m in pooled]
    blocks += [t.correct[test_rows], t.energy_j[test_rows], *route_values]
    boot = plan.means(np.concatenate(blocks, axis=1))
    fixed = boot[:, len(pooled) * width:]
    return {
        "plan": plan,
        "methods": {m: boot[:, i * width:(i + 1) * width] for i, m in enumerate(pooled)},
        "fixed_accuracy": fixed[:, :k],
        "fixed_energy_j": fixed[:, k:2 * k],
        "yardsticks": sticks,
        "route_accuracy": (route_values[0].mean(axis=0), fixed[:, 2 * k:2 * k + p]),  # (test, resampled)
        "route_energy_j": (route_values[1].mean(axis=0), fixed[:, 2 * k + p:]),
    }


def test_plan(config: CompareConfig, t: Tournament, test_rows: np.ndarray) -> BootstrapPlan:
    """The run's one set of resamples over its held-out queries, copies of a question together,
    stratified by benchmark (the splits are: each resample keeps every benchmark's count)."""
    return BootstrapPlan.of_rows(t.queries["prompt"].to_numpy()[test_rows], config.n_bootstrap, config.bootstrap_seed,
                                 strata=t.benchmark_codes[test_rows])


def _hull_gains(config: CompareConfig, t: Tournament, test_rows: np.ndarray, by_method: dict[str, dict[str, Any]],
                resampled: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Both yardsticks (chosen on train, evaluated on test), each method's routing gain (pp),
    joules saved (%) and content gain (pp) with paired intervals (the yardsticks' policies and the
    method on the same resamples; every method in one call), and the family-wise verdicts."""
    sticks: Yardsticks = resampled["yardsticks"]
    fixed_acc, fixed_j = t.correct[test_rows].mean(axis=0), t.energy_j[test_rows].mean(axis=0)
    boot_acc, boot_j = resampled["fixed_accuracy"], resampled["fixed_energy_j"]
    (route_acc, boot_route_acc), (route_j, boot_route_j) = resampled["route_accuracy"], resampled["route_energy_j"]
    methods = list(resampled["methods"])
    acc = np.array([by_method[m]["accuracy"] for m in methods])
    joules = np.array([by_method[m]["mean_energy_j"] for m in methods])
    boot_m_acc = np.stack([resampled["methods"][m][:, _ACC] for m in methods], axis=1)  # [B, M]
    boot_m_j = np.stack([resampled["methods"][m][:, _J] for m in methods], axis=1)
    points = sticks.gains(fixed_j, fixed_acc, route_j, route_acc, joules, acc)
    boot = sticks.gains(boot_j, boot_acc, boot_route_j, boot_route_acc, boot_m_j, boot_m_acc)
    candidates_j, candidates_acc = fixed_hull.task_aware_points(fixed_j, fixed_acc, route_j, route_acc)
    fixed_record, task_record = (stick.record(candidates_j, candidates_acc) for stick in (sticks.fixed, sticks.task))
    dearest = {"routing_gain_pp": fixed_record["energy_j"][-1], "content_gain_pp": task_record["energy_j"][-1]}
    tail = (1 - config.confidence) / 2
    for i, method in enumerate(methods):
        row = by_method[method]
        for name in ("routing_gain_pp", "content_gain_pp"):
            low, high = percentile_interval(boot[name][:, i], config.confidence)
            row.update({name: _snap(points[name][i]), f"{name}_ci_low": _snap(low), f"{name}_ci_high": _snap(high),
                        f"{name}_vs": (WITHIN if joules[i] <= dearest[name] * (1 + 1e-9)
                                       else DEARER_THAN_CHAIN)})
        # joules saved: only where the method is no more accurate than the chain's top in all but the tail
        defined = np.isfinite(boot["joules_saved_pct"][:, i])
        saved = {"joules_saved_pct": _snap(points["joules_saved_pct"][i]) if np.isfinite(points["joules_saved_pct"][i]) else None,
                 "joules_saved_pct_ci_low": None, "joules_saved_pct_ci_high": None,
                 "joules_saved_pct_vs": WITHIN if defined.mean() >= 1 - tail else MORE_ACCURATE_THAN_CHAIN}
        if saved["joules_saved_pct_vs"] == WITHIN and saved["joules_saved_pct"] is not None:
            low, high = np.percentile(boot["joules_saved_pct"][defined, i], [100 * tail, 100 * (1 - tail)])
            saved.update(joules_saved_pct_ci_low=_snap(low), joules_saved_pct_ci_high=_snap(high))
        row.update(saved)
        # where a gain's resamples pile on one value or split in two, its percentile interval is flagged
        row.update({f"{name}_shape": resample_shape(_finite(boot[name][:, i]), config.confidence)
                    if row.get(f"{name}_ci_low") is not None else "" for name in _SHAPED})
        if row["joules_saved_pct_shape"]:  # a ratio read where the yardstick is flat jumps: no interval
            row.update(joules_saved_pct_ci_low=None, joules_saved_pct_ci_high=None)
        # a fixed model that is a vertex of the yardstick on test: its routing gain is 0 by construction
        row["on_yardstick"] = row["kind"] == "fixed-model" and row["top1_model"] in fixed_record["vertices"]
    _family_verdicts(config, methods, by_method, points, boot)
    return {
        "hull": {"models": fixed_record["vertices"], "energy_j": fixed_record["energy_j"],
                 "accuracy": fixed_record["accuracy"], "chain": fixed_record["chain"],
                 "chain_energy_j": fixed_record["chain_energy_j"], "chain_accuracy": fixed_record["chain_accuracy"],
                 "train_energy_j": fixed_record["train_energy_j"],
                 "train_accuracy": fixed_record["train_accuracy"], "max_fixed_energy_j": float(fixed_j.max()),
                 "rule": HULL_RULE},
        "task_hull": {**task_record, "max_energy_j": float(candidates_j.max()),
                      "routes": [{**r, "test_accuracy": float(a), "test_energy_j": float(j)} for r, a, j in
                                 zip(sticks.routes.describe(t.benchmarks, list(t.model_ids)), route_acc, route_j)],
                      "unseen_benchmarks": [t.benchmarks[c] for c in sticks.unseen["codes"]],
                      "unseen_share": sticks.unseen["share"], "rule": fixed_hull.TASK_HULL_RULE},
    }


def _family_verdicts(config: CompareConfig, methods: list[str], by_method: dict[str, dict[str, Any]],
                     points: dict[str, np.ndarray], boot: dict[str, np.ndarray]) -> None:
    """Romano-Wolf step-down over the deployable, verified agent rows' routing gains and the content
    gains of those that can read the question (``eval/core/familywise.py``; a fixed, label-only or
    random router's content gain is at most 0 by construction: never a hypothesis): each row gets
    ``<gain>_fw`` ("above", "below" or "") and the first step's simultaneous bounds; other rows are
    outside the family ("" and no bounds)."""
    family = [i for i, m in enumerate(methods) if by_method[m]["kind"] != "fixed-model" and by_method[m]["deployable"]
              and not audit.withheld(by_method[m]["deployable_label"])]
    members = {"routing_gain_pp": family,
               "content_gain_pp": [i for i in family if by_method[methods[i]]["reads_question"]]}
    names = tuple(members)
    for m in methods:
        by_method[m].update({f"{n}_fw": familywise.NONE for n in names})
    pairs = [(n, i) for n in names for i in members[n]]
    if not pairs:
        return
    estimate = np.array([points[n][i] for n, i in pairs])
    resampled = np.stack([boot[n][:, i] for n, i in pairs], axis=1)
    decision = familywise.stepdown(estimate, resampled, 1 - config.confidence)
    for j, (n, i) in enumerate(pairs):
        by_method[methods[i]].update({f"{n}_fw": decision.decisions[j], f"{n}_fw_low": _maybe(decision.low[j]),
                                      f"{n}_fw_high": _maybe(decision.high[j])})


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _maybe(value: float) -> float | None:
    return None if not np.isfinite(value) else _snap(value)


def _same_routes(ok: list[RunRecord], routes_of: dict[bytes, str]) -> str:
    """The earlier row whose every seed sent every held-out query where this row's seeds did ("" if
    none): a reader should not count two rows that route identically as two routers."""
    key = b"".join(sorted({np.asarray(r.per_query["actions"], dtype=np.int64).tobytes() for r in ok}))
    first = routes_of.setdefault(key, ok[0].method)
    return "" if first == ok[0].method else first


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
