"""``routing-gym headroom``'s outputs: headroom.json, table.md and headroom.png (``eval/headroom/__init__.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from routing_gym.eval.core.jsonsafe import strict_json
from routing_gym.eval.headroom import (
    BUDGET_RULE,
    MU_GRID,
    PRIVILEGED_RUNGS,
    RUNG_LABELS,
    HeadroomResult,
)


def rung_label(result: HeadroomResult, name: str) -> str:
    """A rung's name in words (the content rung names its router)."""
    return f"{RUNG_LABELS[name]}: {result.best_router}" if name == "content_router" else RUNG_LABELS[name]


def headroom_payload(result: HeadroomResult) -> dict[str, Any]:
    """Everything headroom.json holds (JSON-ready, before ``strict_json``)."""
    c, t = result.config, result.tournament
    best = result.scorer_auc.get(result.best_router or "", {})
    return {
        "tournament": {"name": t.card.name, "provenance": t.card.provenance, "models": t.model_ids,
                       "benchmarks": t.benchmarks, "train_split": c.train_split, "test_split": c.test_split,
                       "n_train": int(len(t.split_rows(c.train_split))), "n_test": int(len(t.split_rows(c.test_split)))},
        "settings": {
            "budget_rule": BUDGET_RULE if c.budget_j is None else "given (--budget-j)",
            "routing_rule": "per query argmax_k P_k - mu x E_k / J_ref (J_ref: largest per-model mean training joules)",
            "knobs": f"mu from a grid of {len(MU_GRID)} values (0, then 1e-4 .. 1e3 geometric); on train, two vertices "
                     "of the upper hull of the cross-fitted training points mixed to spend the budget",
            "cross_fitting": f"{c.folds} folds of the training split, copies of one question in one fold, stratified by "
                             f"benchmark (seed {c.seed})",
            "intervals": f"{c.confidence:.0%} paired percentile bootstrap over the {len(result.rungs['oracle'].test_correct)} "
                         f"test queries, copies of a question resampled together ({c.n_bootstrap} resamples, seed "
                         f"{c.bootstrap_seed}); the yardsticks' policies are chosen on train (eval/core/yardstick.py), their "
                         "test values and the rungs resampled",
            "auc": "within-benchmark AUC: per (benchmark, model), pooled over (right, wrong) pairs; pairwise AUC: per "
                   "(benchmark, model pair), over questions exactly one of the two answers right, the AUC of P_i - P_j, "
                   "pooled over pairs (0.5 for any scorer that knows only difficulty's average or the label)",
            "confidence": c.confidence, "routers": list(result.routers), "agent_kwargs": c.agent_kwargs,
        },
        "budget_j": result.budget_j,
        "rungs": {name: {"label": rung_label(result, name), "privileged": name in PRIVILEGED_RUNGS,
                         **r.stats, "train_accuracy": r.train_accuracy, "train_mean_j": r.train_energy_j,
                         "knob": {"mu": list(r.mus), "weight_on_first": r.weight}, "curve": r.curve,
                         **({"router": result.best_router} if name == "content_router" else {})}
                  for name, r in result.rungs.items()},
        "steps": result.steps,
        "within_benchmark_auc": best.get("within_benchmark_auc"),
        "pairwise_auc": best.get("pairwise_auc"),
        "best_router": result.best_router,
        "routers": result.routers,
        "routability": result.scorer_auc,
        "oracle_lead": result.oracle_lead,
        "noise_floor": result.noise_floor,
        "generator": result.generator,
        "hulls": result.hulls,
        "leak_free": result.leak_free,
        "forms": result.forms,
        "common_joules": result.common,
        "whole_tournament": result.whole,
        "fixed_models": {"models": t.model_ids, **result.fixed},
        "elapsed_s": result.elapsed_s, "cpu_s": result.cpu_s,
    }


def write_headroom_outputs(result: HeadroomResult, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """headroom.json, table.md and (with ``plots``) headroom.png in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"headroom.json": out / "headroom.json", "table.md": out / "table.md"}
    paths["headroom.json"].write_text(json.dumps(strict_json(headroom_payload(result)), indent=1, allow_nan=False))
    paths["table.md"].write_text(markdown_report(result))
    if plots:
        paths["headroom.png"] = plot_headroom(result, out / "headroom.png")
    return paths


def _ci(value: float | None, interval: list[float] | None, fmt: str) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    text = format(value, fmt)
    return text + (f" [{format(interval[0], fmt)}, {format(interval[1], fmt)}]" if interval else "")


def _auc(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3f}"


def markdown_report(result: HeadroomResult) -> str:
    """The ladder, the routability table, the oracle's lead by question and the noise floor."""
    p = headroom_payload(result)
    tour, conf = p["tournament"], f"{result.config.confidence:.0%}"
    lines = [f"# Headroom on {tour['name']}: does a router read the question?", "",
             f"{tour['n_test']} held-out queries ({tour['test_split']}), knobs chosen on {tour['n_train']} "
             f"({tour['train_split']}) with cross-fitted predictions; matched budget {p['budget_j']:,.1f} J "
             f"({p['settings']['budget_rule']}).", "",
             *whole_status(p["whole_tournament"]),
             f"| Rung | Accuracy % [{conf} CI] | Mean J [{conf} CI] | Content gain pp [{conf} CI] | Yardstick slope pp/J | "
             f"Step over previous rung at {p['budget_j']:,.1f} J pp [{conf} CI] | Family-wise: gain / step over previous rung | "
             f"Routing gain pp [{conf} CI] |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    steps = {s["to"]: s for s in p["steps"]}
    for name, r in p["rungs"].items():
        step = steps.get(name)
        lines.append(f"| {r['label']} | {_ci(100 * r['accuracy'], [100 * v for v in r['accuracy_ci']], '.1f')} | "
                     f"{_ci(r['mean_j'], r['mean_j_ci'], ',.1f')} | {_ci(r['content_gain_pp'], r['ci'], '+.1f')} | "
                     f"{r['yardstick_slope_pp_per_j']:.3f} | "
                     f"{_ci(step['content_gain_step_pp'], step['ci'], '+.1f') if step else '—'} | "
                     f"{r.get('verdict') or '—'} / {(step.get('verdict') or '—') if step else '—'} | "
                     f"{_ci(r['routing_gain_pp'], r['routing_gain_ci'], '+.1f')} |")
    lines += ["", "Content gain: accuracy minus the task-aware yardstick's (chosen on train) at the rung's mean joules on test; "
              "yardstick slope: how many pp the yardstick rises per joule there (a rung 1 J off the budget moves its gain by "
              "about that much); step over previous rung: the rung's accuracy minus the rung above it in this table, both "
              "read along their test curves at the budget (paired; — where the budget lies below a rung's cheapest test "
              "point). Below, 'step over label' is a rung's accuracy minus the task-aware (label) rung's, read the same "
              "way. Family-wise: above or below 0 by the Romano-Wolf "
              "step-down over every rung's gain and every step (eval/core/familywise.py), — where not distinguishable. Privileged rungs read held-out outcomes and are "
              "not deployable: the shared-difficulty ceiling knows each question's share of models right (P per model "
              "mapped from it per benchmark on train), the oracle knows every outcome.", ""]
    lines += _common_lines(p["common_joules"], result, conf)
    lines += _whole_lines(p["whole_tournament"], p["rungs"].get("content_router"), tour["n_test"], conf)
    lines += _forms_lines(p["forms"], conf)
    lines += _leak_free_lines(p["leak_free"], conf)
    lines += ["## Routability: does the text say which model wins?", "",
              "| Scorer | Within-benchmark AUC | Pairwise AUC (disagreeing pairs) | Fit s |", "|---|---:|---:|---:|"]
    for name, auc in p["routability"].items():
        fit = p["routers"].get(name, {}).get("fit_s")
        lines.append(f"| {name} | {_auc(auc['within_benchmark_auc'])} | {_auc(auc['pairwise_auc'])} | "
                     f"{'—' if fit is None else f'{fit:.1f}'} |")
    lines += ["", AUC_NOTE]
    lines += [*[f"- {n} failed: `{r['error']}`" for n, r in p["routers"].items() if r.get("error")], "",
              f"Per benchmark ({result.best_router or 'no router'}):", "",
              "| Benchmark | Within-benchmark AUC | Pairwise AUC | Decisive pairs |", "|---|---:|---:|---:|"]
    for row in p["routability"].get(result.best_router or "", {}).get("per_benchmark", []):
        lines.append(f"| {row['benchmark']} | {_auc(row['within_benchmark_auc'])} | {_auc(row['pairwise_auc'])} | "
                     f"{row['decisive_pairs']} |")
    lead = p["oracle_lead"]
    lines += ["", "## Where the oracle's lead comes from", "",
              f"Oracle minus the task-aware rung, both at the matched budget: {lead['lead_pp']:+.1f} pp; questions that "
              f"only one or two models answer right ({lead['rare_questions']}) carry {_share(lead['rare_share'])} of it.", "",
              "| Models right | Questions | Lead pp | Share |", "|---:|---:|---:|---:|"]
    lines += [f"| {c['models_right']} | {c['questions']} | {c['lead_pp']:+.1f} | {_share(c['share'])} |"
              for c in lead["by_models_right"] if c["questions"]]
    noise = p["noise_floor"]
    guess, copies = noise["guessing"], noise["copies"]
    lines += ["", "## Noise floor", "",
              f"- Guessing: {guess['multiple_choice']} of {guess['questions']} questions record their options; "
              + (f"mean guessing rate {guess['guessing_rate']:.3f} ({guess['rule']})." if guess["guessing_rate"] is not None
                 else "none is multiple choice as far as the data records."),
              f"- Copies of one question within a split: {copies['groups']} groups ({copies['queries']} queries); "
              + (f"{copies['disagreeing_cells']} of {copies['cells']} (group, model) cells disagree "
                 f"({_share(copies['disagreement_rate'])}): outcomes no reader of the text can predict."
                 if copies["cells"] else "none."), ""]
    if p["generator"]:
        g = p["generator"]
        lines += [f"Procedural pool: the generator's true content signal is specialization_signal = "
                  f"{g['specialization_signal']:g} (text_signal {g['text_signal']}, noise {g['noise']}); {g['meaning']}.", ""]
    lines += [f"CPU {p['cpu_s']:.1f} s, wall {p['elapsed_s']:.1f} s (machine-dependent).", ""]
    return "\n".join(lines)


def _common_lines(common: dict[str, Any] | None, result: HeadroomResult, conf: str) -> list[str]:
    """Every rung's content gain at each common J: the ladder as curves over joules, in numbers."""
    if not common:
        return []
    names = list(common["rungs"])
    lines = ["## The ladder at common joules", "",
             f"Content gain pp [{conf} CI] of each rung read along its test curve at the same joules ({common['rule']}); the "
             "first row is the budget. — : the joules lie below the rung's cheapest test point.", "",
             "| J | " + " | ".join(rung_label(result, n) for n in names) + " |", "|---:|" + "---:|" * len(names)]
    for i, j in enumerate(common["joules"]):
        cells = [_ci(common["rungs"][n][i]["content_gain_pp"], common["rungs"][n][i]["ci"], "+.1f") for n in names]
        lines.append(f"| {j:,.1f} | " + " | ".join(cells) + " |")
    return lines + [""]


AUC_NOTE = ("— in an AUC cell: undefined, there is no (right, wrong) pair to order: on test every answer of the "
            "benchmark is right or every one wrong (within-benchmark), or no two models disagree on any of its questions "
            "(pairwise); a failed router has none either. — in Fit s: the scorer is not fitted (privileged difficulty).")


def whole_status(whole: dict[str, Any] | None) -> list[str]:
    """Lines that say plainly when the whole-tournament cross-fit of the best content router did
    not run (its section and the table's head both carry them), and how to run it."""
    if not whole or "skipped" not in whole:
        return []
    if "predicted_s" in whole:
        enough = 10 * math.ceil(min(whole["predicted_s"].values()) / 10 + 1)
        how = (f"raise --whole-budget-s (e.g. --whole-budget-s {enough:g}) or name a cheaper router or features "
               "(--routers, --agent-kwargs)")
    else:
        how = "give --whole-folds 3"
    return [f"**The whole-tournament cross-fit was not run**: {whole['skipped']}. The content router's numbers here "
            f"are from the held-out split only; to run it, {how}.", ""]


def _whole_lines(whole: dict[str, Any] | None, split_rung: dict[str, Any] | None, n_test: int, conf: str) -> list[str]:
    """The content rung cross-fitted over the whole tournament (selection nested), beside its held-out one."""
    if not whole:
        return []
    lines = ["## The content router over the whole tournament (selection nested)", ""]
    if "skipped" in whole:
        return lines + [*whole_status(whole)]
    label, spread, fixed = whole["task_aware_hull"], whole["seed_spread"], whole["fixed_fit_ci"]["step_ci"]
    chosen = ", ".join(f"{n} {c}" for n, c in whole["chosen"].items())
    lines += [f"{whole['rule']}. Interval: {whole['interval_rule']}.", "",
              f"Routers in the nested pool: {', '.join(whole['routers'])}; folds won ({len(whole['choices'])} in all): {chosen}."]
    lines += [f"Left out of the pool: {n} ({why})." for n, why in whole.get("left_out", {}).items()]
    lines += ["", f"| Rung | Queries | Content gain pp [{conf} CI] | CI width pp |", "|---|---:|---:|---:|"]
    if split_rung:
        low, high = split_rung["ci"]
        lines.append(f"| best router, held-out split only (the ladder's rung) | {n_test} | "
                     f"{_ci(split_rung['content_gain_pp'], split_rung['ci'], '+.2f')} | {high - low:.2f} |")
    for title, r in ((f"nested content rung, whole tournament ({whole['folds']} folds x {len(whole['seeds'])} seeds)", whole),
                     ("task-aware (label) rung on the yardstick's chain rule, cross-fitted the same way", label)):
        low, high = r["ci"]
        lines.append(f"| {title} | {whole['n_queries']} | {_ci(r['content_gain_pp'], r['ci'], '+.2f')} | {high - low:.2f} |")
    return lines + ["", f"The step over label (what reading the text adds, paired): "
                        f"{_ci(whole['step_over_label_pp'], whole['step_ci'], '+.2f')} pp; over the {len(whole['seeds'])} fold "
                        f"seeds from {spread['min']:+.2f} to {spread['max']:+.2f} (sd {spread['sd']:.2f}); the first seed's "
                        f"bootstrap holding its fits fixed would say [{fixed[0]:+.2f}, {fixed[1]:+.2f}]. "
                        f"Fitting took {whole['fit_s']:.1f} s wall, {whole['fit_cpu_s']:.1f} s CPU (predicted {whole['predicted_s']:.0f} s "
                        "CPU).", ""]


def _forms_lines(forms: dict[str, Any] | None, conf: str) -> list[str]:
    """The shared-difficulty ceiling under every form of its map, the chosen ones marked."""
    if not forms:
        return []
    low, high = forms["range_pp"]
    lines = ["## The difficulty ceiling over the map's forms", "",
             f"Form used above: **{forms['chosen']}** ({forms['rule']}). The ceiling under every form, as the step over "
             f"label averaged over the common joules fixed on train (both read along their test curves "
             f"there): {low:+.1f} to {high:+.1f} pp over the shared-shape forms. The crossing forms let each model its own "
             "curve over difficulty, so they can re-order models: an upper variant, not the ceiling.", "",
             f"| Form | Shape | Cross-fitted log loss (train) | Step over label, mean over the grid pp [{conf} CI] |",
             "|---|---|---:|---:|"]
    for form, f in forms["forms"].items():
        mark = " (chosen)" if form in (forms["chosen"], forms.get("crossing_chosen")) else ""
        lines.append(f"| {form}{mark} | {f['shape']} | {f['cross_fitted_log_loss']:.4f} | "
                     f"{_ci(f['step_over_label_pp'], f['ci'], '+.1f')} |")
    return lines + [""]


def _leak_free_lines(leak_free: dict[str, Any] | None, conf: str) -> list[str]:
    """The difficulty ceiling that reads no routed model's outcome, beside the inclusive one and the crossing variant."""
    if not leak_free:
        return []
    rows = (("the other half of the pool, shared-shape map (leak-free)", "leak_free"),
            ("the routed half itself, shared-shape map (inclusive, upper bound)", "inclusive"),
            ("the other half, crossing map (upper variant: can learn who wins)", "crossing"))
    lines = ["## The difficulty ceiling without the candidates' outcomes", "",
             f"The shared-difficulty rung above reads each question's share of models right *including the routed "
             f"models' own outcomes*, so it partly knows who was right: an upper bound. Leak-free: {leak_free['rule']}.", "",
             f"| Difficulty read from | Step over label, mean over the grid, pp [{conf} CI] (mean over halvings) | "
             "Pairwise AUC |", "|---|---:|---:|"]
    lines += [f"| {title} | {_ci(leak_free[key]['step_over_label_pp'], leak_free[key]['ci'], '+.1f')} | "
              f"{_auc(leak_free[key]['pairwise_auc'])} |" for title, key in rows if key in leak_free]
    lines += ["", "Halvings (candidates | reference: leak-free / inclusive / crossing step pp, mean over the grid):", ""]
    lines += [f"- {', '.join(h['candidates'])} | {', '.join(h['reference'])}: {h['leak_free']['step_over_label_pp']:+.1f} / "
              f"{h['inclusive']['step_over_label_pp']:+.1f} / {h['crossing']['step_over_label_pp']:+.1f}"
              for h in leak_free["partitions"]]
    return lines + [""]


def _share(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:.0f} %"


_COLOURS = {"fixed_model_hull": "#7f7f7f", "task_aware_hull": "#222222", "content_router": "#1f77b4",
            "shared_difficulty": "#ff7f0e", "oracle": "#2ca02c"}


def plot_headroom(result: HeadroomResult, path: str | Path) -> Path:
    """Left: each rung's content gain at the matched budget with its interval (the ladder).
    Middle: the ladder as curves over joules (each rung's content gain at the common joules, with
    its interval as a band). Right: each rung's operating curve on test over joules, the two hulls
    and the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = headroom_payload(result)
    names = list(p["rungs"])
    fig, (bars, over_j, curves) = plt.subplots(1, 3, figsize=(19, 5), gridspec_kw={"width_ratios": [1, 1.1, 1.25]})
    for y, name in enumerate(names):
        r = p["rungs"][name]
        low, high = r["ci"]
        bars.barh(y, r["content_gain_pp"], color=_COLOURS[name], alpha=0.85, hatch="//" if r["privileged"] else None,
                  edgecolor="white")
        # a percentile interval need not contain the point estimate (float dust at a yardstick policy): clip at 0
        bars.errorbar(r["content_gain_pp"], y, xerr=[[max(r["content_gain_pp"] - low, 0.0)], [max(high - r["content_gain_pp"], 0.0)]],
                      color="black", capsize=3, lw=1)
        bars.text(max(high, 0) + 0.5, y, f"{r['content_gain_pp']:+.1f} pp", va="center", fontsize=9)
    bars.set_yticks(range(len(names)), [p["rungs"][n]["label"] for n in names], fontsize=9)
    bars.invert_yaxis()
    bars.axvline(0, color="black", lw=0.8)
    bars.set_xlabel("content gain over the task-aware yardstick at matched joules (pp)")
    bars.set_title(f"{p['tournament']['name']}: the ladder at {p['budget_j']:,.0f} J (hatched: privileged)", fontsize=10)
    _plot_common(over_j, p)
    hull, task = p["hulls"]["fixed_model"], p["hulls"]["task_aware"]
    curves.scatter(p["fixed_models"]["mean_j"], [100 * a for a in p["fixed_models"]["accuracy"]], s=14, color="#7f7f7f",
                   label="fixed models", zorder=3)
    # the yardsticks' chains past their null point (0 J, which a log axis cannot show)
    curves.plot(hull["energy_j"][1:], [100 * a for a in hull["accuracy"][1:]], color="#7f7f7f", lw=1, ls=":")
    curves.plot(task["energy_j"][1:], [100 * a for a in task["accuracy"][1:]], color="#222222", lw=1.5,
                label="task-aware yardstick (chosen on train)")
    for name in names[2:]:
        r = p["rungs"][name]
        curves.plot([c["test_energy_j"] for c in r["curve"]], [100 * c["test_accuracy"] for c in r["curve"]],
                    color=_COLOURS[name], lw=1.2, marker=".", ms=3, label=r["label"])
    for name in names:
        r = p["rungs"][name]
        curves.scatter([r["mean_j"]], [100 * r["accuracy"]], marker="*", s=140, color=_COLOURS[name], edgecolor="black",
                       zorder=4)
    curves.axvline(p["budget_j"], color="black", lw=0.8, ls="--", label="matched budget (train)")
    curves.set_xscale("log")
    curves.set_xlabel("mean joules per query on test (log)")
    curves.set_ylabel("accuracy on test (%)")
    curves.set_title("operating curves (knobs on train); stars: the rungs at the budget", fontsize=10)
    curves.legend(fontsize=8, loc="lower right")
    curves.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return Path(path)


def _plot_common(ax: Any, p: dict[str, Any]) -> None:
    """Each rung's content gain at the common joules (the ladder over joules), bands: intervals."""
    common = p["common_joules"]
    if not common:
        ax.set_visible(False)
        return
    order = sorted(range(len(common["joules"])), key=lambda i: common["joules"][i])
    for name, points in common["rungs"].items():
        reached = [points[i] for i in order if points[i]["content_gain_pp"] is not None]
        if not reached:
            continue
        js = [q["joules"] for q in reached]
        ax.plot(js, [q["content_gain_pp"] for q in reached], color=_COLOURS[name], marker="o", ms=3, lw=1.3,
                ls="--" if p["rungs"][name]["privileged"] else "-", label=p["rungs"][name]["label"])
        ax.fill_between(js, [q["ci"][0] for q in reached], [q["ci"][1] for q in reached], color=_COLOURS[name], alpha=0.15)
    ax.axhline(0, color="black", lw=0.8)
    ax.axvline(p["budget_j"], color="black", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("mean joules per query on test (log; common to every rung)")
    ax.set_ylabel("content gain over the task-aware yardstick (pp)")
    ax.set_title(f"the ladder over joules (dashed: privileged; bands: {p['settings']['confidence']:.0%} CI)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
