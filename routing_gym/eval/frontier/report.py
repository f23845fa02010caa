"""``routing-gym frontier``'s outputs: frontier.json, points.csv, dominance.csv, table.md and
frontier.png (the curves and verdicts of ``eval/frontier/__init__.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from routing_gym.eval.core import familywise
from routing_gym.eval.core.jsonsafe import strict_json
from routing_gym.eval.core.robustness import markdown_lines
from routing_gym.eval.core.yardstick import WITHIN
from routing_gym.eval.frontier import FrontierResult
from routing_gym.fronts import hull as fixed_hull
from routing_gym.fronts import mo_fronts


def write_frontier_outputs(result: FrontierResult, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """frontier.json, points.csv (every candidate value), dominance.csv, table.md and frontier.png."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("frontier.json", "points.csv", "dominance.csv", "table.md")}
    rows = []
    for c in result.curves:
        for p in c.points:
            rows.append({"agent": c.agent, "knob": c.knob.parameter if c.knob else "", "value": p.value,
                         "selected": p.selected, "validation_accuracy": p.validation_accuracy,
                         "validation_energy_j": p.validation_energy_j, "test_accuracy": p.test_accuracy,
                         "test_energy_j": p.test_energy_j, **p.stats})
    pd.DataFrame(rows).to_csv(paths["points.csv"], index=False)
    verdicts = [{"agent": c.agent, "against": "fixed model", **d} for c in result.curves for d in c.dominance]
    verdicts += [{"agent": c.agent, "against": "per-benchmark route", "model": d["route"], **d}
                 for c in result.curves for d in c.route_dominance]
    pd.DataFrame(verdicts).drop(columns="route", errors="ignore").to_csv(paths["dominance.csv"], index=False)
    payload = {"settings": result.settings(), "hull": result.hull, "task_hull": result.task_hull,
               "fixed_models": result.fixed.to_dict(orient="records"), "curves": [c.to_dict() for c in result.curves],
               "mo_indicators": mo_fronts.frontier_indicators(result)}
    paths["frontier.json"].write_text(json.dumps(strict_json(payload), indent=1, allow_nan=False))
    paths["table.md"].write_text(markdown_report(result))
    if plots:
        paths["frontier.png"] = plot_frontier(result, out / "frontier.png")
    return paths


def _ci(value: float, low: float | None, high: float | None, fmt: str) -> str:
    if low is None or high is None or not math.isfinite(value):
        return format(value, fmt) if math.isfinite(value) else "—"
    return f"{format(value, fmt)} [{format(low, fmt)}, {format(high, fmt)}]"


def markdown_report(result: FrontierResult) -> str:
    s = result.settings()
    tour, val = s["tournament"], s["validation"]
    conf = f"{result.config.confidence:.0%}"
    vertices = " → ".join(f"{m} ({j:,.1f} J, {100 * a:.1f} %)" for m, j, a in
                          zip(result.hull["models"], result.hull["energy_j"], result.hull["accuracy"]))
    task = result.task_hull
    task_vertices = " → ".join(f"{m} ({j:,.1f} J, {100 * a:.1f} %)" for m, j, a in
                               zip(task["vertices"], task["energy_j"], task["accuracy"]))
    lines = [
        f"# Operating-point curves on {tour['name']}", "",
        f"Agents trained on {tour['n_fit']} queries ({val['of']} minus a validation part); knob values chosen on "
        f"{tour['n_validation']} validation queries ({val['share']:.0%} of each benchmark's {val['of']} rows, seed "
        f"{val['seed']}); reported on {tour['n_test']} {tour['test_split']} queries. Energy provenance: "
        f"{tour['provenance']}. Training reward (unless the knob is its coefficient): {s['training_reward']}; seed "
        f"{s['seed']}.", "",
        f"Fixed-model hull (random mixes of fixed models) on {tour['test_split']}: {vertices}.", "",
        f"Task-aware hull (fixed models and per-benchmark routes chosen on {val['of']}, and their mixes) on "
        f"{tour['test_split']}: {task_vertices}.", "",
        f"| Agent | Knob | Points chosen / candidates | Common joule range | Mean gain over the hull pp [{conf} CI] "
        f"| Mean content gain pp [{conf} CI] | Fixed models dominated at {conf} | Per-benchmark routes dominated |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for c in result.curves:
        if c.error:
            lines.append(f"| {c.agent} | {c.knob.describe() if c.knob else '—'} | failed: {c.error[:100]} | | | | | |")
            continue
        summary = c.summary
        low_j, high_j = summary["joule_range"]
        joule_range = f"{low_j:,.1f}–{high_j:,.1f} J" if high_j > low_j else "none"
        dominated = [f"{d['model']} (by {c.knob.parameter}={d['by_value']:g})" for d in c.dominance if d["dominated"]]
        routes = [d["route"].removeprefix(fixed_hull.TASK_ROUTE_PREFIX) for d in c.route_dominance if d["dominated"]]
        if c.withheld:  # audit.withheld: numbers kept, no dominance verdict
            lines.append(f"| {c.agent} ({c.deployable_label}) | {c.knob.describe()} | {summary['n_points']} / {len(c.points)} "
                         f"| {joule_range} | {summary['mean_gain_pp']:+.2f} | {summary['mean_content_gain_pp']:+.2f} "
                         "| no verdict | no verdict |")
            continue
        lines.append(f"| {c.agent} | {c.knob.describe()} | {summary['n_points']} / {len(c.points)} | {joule_range} | "
                     f"{_ci(summary['mean_gain_pp'], summary.get('mean_gain_pp_ci_low'), summary.get('mean_gain_pp_ci_high'), '+.2f')} "
                     f"| {_ci(summary['mean_content_gain_pp'], summary.get('mean_content_gain_pp_ci_low'), summary.get('mean_content_gain_pp_ci_high'), '+.2f')} "
                     f"| {', '.join(dominated) or 'none'} | {len(routes)} of {len(c.route_dominance)}"
                     + (f" (#{', #'.join(routes)})" if routes else "") + " |")
    lines += ["", f"Mean gain: {s['mean_gain']}. Task-aware hull: {s['task_hull']}. Dominance: {s['dominance']}. "
              f"Intervals: {s['intervals']}. Audit: {s['audit']}.", ""]
    lines += _markdown_content_verdicts(result)
    lines += [
              f"## Operating points chosen on validation, reported on {tour['test_split']}", "",
              f"| Agent | Value | Validation acc % / J | Test accuracy % [{conf} CI] | Test mean J [{conf} CI] | "
              f"Routing gain pp [{conf} CI] | Content gain pp [{conf} CI] |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for c in result.curves:
        for p in c.selected:
            st = p.stats
            marks = {name: "" if st.get(f"{name}_vs", WITHIN) == WITHIN else " (flat: beyond the chain)"
                     for name in ("routing_gain", "content_gain")}
            lines.append(
                f"| {c.agent} | {c.knob.parameter}={p.value:g} | {100 * p.validation_accuracy:.1f} / {p.validation_energy_j:,.1f} | "
                f"{_ci(100 * p.test_accuracy, 100 * st['accuracy_ci_low'], 100 * st['accuracy_ci_high'], '.1f')} | "
                f"{_ci(p.test_energy_j, st['energy_j_ci_low'], st['energy_j_ci_high'], ',.1f')} | "
                f"{_ci(st['routing_gain_pp'], st['routing_gain_pp_ci_low'], st['routing_gain_pp_ci_high'], '+.1f')}{marks['routing_gain']} | "
                f"{_ci(st['content_gain_pp'], st['content_gain_pp_ci_low'], st['content_gain_pp_ci_high'], '+.1f')}{marks['content_gain']} |")
    judged = [c for c in result.curves if c.dominance and not c.withheld]
    lines += ["", f"## Fixed models: does some operating point dominate them at {conf}?", "",
              "| Fixed model | Test accuracy % | Test mean J | " + " | ".join(c.agent for c in judged) + " |",
              "|---|---:|---:|" + "---|" * len(judged)]
    tie = {"": "", "accuracy": ", tied on accuracy", "energy_j": ", tied on joules"}
    for m, row in result.fixed.iterrows():
        cells = []
        for c in judged:
            d = c.dominance[m]
            verdict = "**yes**" if d["dominated"] else "no"
            cells.append(f"{verdict} ({c.knob.parameter}={d['by_value']:g}: p {d['prob_dominates']:.3f}{tie[d['tied_axis']]})")
        lines.append(f"| {row['model']} | {100 * row['accuracy']:.1f} | {row['mean_energy_j']:,.1f} | " + " | ".join(cells) + " |")
    lines += ["", f"## Per-benchmark routes (chosen on {val['of']}, reported on {tour['test_split']})", "",
              "Route #p sends each benchmark to the model maximising training accuracy - lambda x J for lambda in its "
              "interval (accuracy per joule); **bold**: a policy of the task-aware yardstick's chain.", "",
              "| Route | lambda per J | Test accuracy % | Test mean J | Model per benchmark |", "|---|---:|---:|---:|---|"]
    for r in task["routes"]:
        name = f"**{r['route']}**" if r["route"] in task["vertices"] else r["route"]
        models = ", ".join(f"{b} → {m}" for b, m in r["models"].items())
        lines.append(f"| {name} | {r['lambda_low']:.3g}–{r['lambda_high']:.3g} | {100 * r['test_accuracy']:.1f} | "
                     f"{r['test_energy_j']:,.1f} | {models} |")
    lines.append("")
    if "robustness" in result.hull:
        lines += markdown_lines(result.hull["robustness"])
    lines += mo_fronts.markdown_lines(mo_fronts.frontier_indicators(result))
    return "\n".join(lines)


# Where a knob value's label may sit around its point (points): the first free one is used.
_KNOB_LABEL_OFFSETS = ((4, 3), (4, -10), (-4, 3), (-4, -10), (4, 12), (-4, 12), (4, -19), (-4, -19))


def label_knob_values(ax: Any, labels: Sequence[tuple[float, float, str, Any]],
                      points: Sequence[tuple[float, float]] = ()) -> list[Any]:
    """Write each ``(x, y, text, colour)`` knob value beside its point at the first offset whose
    text box overlaps no label placed before and no marker of ``points``; a label with no free
    offset is left out (crowded points near one joule value overlapped; every value is in
    ``points.csv`` and ``table.md``). Call after the axes' scale is set. Returns the labels drawn."""
    ax.autoscale_view()
    renderer = ax.figure.canvas.get_renderer()
    pad = 3.0 * ax.figure.dpi / 72  # a marker's half-size, in pixels
    taken = []
    for x, y in [*points, *((lx, ly) for lx, ly, _, _ in labels)]:
        px, py = ax.transData.transform((x, y))
        taken.append((px - pad, py - pad, px + pad, py + pad))
    drawn = []
    for x, y, text, colour in labels:
        for dx, dy in _KNOB_LABEL_OFFSETS:
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=7, color=colour,
                               ha="left" if dx >= 0 else "right", va="bottom")
            box = note.get_window_extent(renderer)
            corners = (box.x0, box.y0, box.x1, box.y1)
            if not any(_boxes_overlap(corners, other) for other in taken):
                taken.append(corners)
                drawn.append(note)
                break
            note.remove()
    return drawn


def _boxes_overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _markdown_content_verdicts(result: FrontierResult) -> list[str]:
    """In words: which curves route beyond the benchmark label, which only by it."""
    conf = f"{result.config.confidence:.0%}"
    lines = []
    for c in result.curves:
        summary = c.summary
        if c.error or "mean_content_gain_pp_ci_low" not in summary:
            continue
        if c.withheld:
            lines.append(f"- **{c.agent}** no verdict: {c.deployable_label}.")
            continue
        content = _ci(summary["mean_content_gain_pp"], summary["mean_content_gain_pp_ci_low"],
                      summary["mean_content_gain_pp_ci_high"], "+.2f")
        if not c.deployable:  # outside the family: its marginal interval, tagged
            decided = {"routing_above": summary.get("mean_gain_pp_ci_low", math.nan) > 0,
                       "content_above": summary["mean_content_gain_pp_ci_low"] > 0,
                       "content_below": summary["mean_content_gain_pp_ci_high"] < 0}
        else:
            decided = {"routing_above": summary.get("mean_gain_pp_fw") == familywise.ABOVE,
                       "content_above": summary.get("mean_content_gain_pp_fw") == familywise.ABOVE,
                       "content_below": summary.get("mean_content_gain_pp_fw") == familywise.BELOW}
        if not c.reads_question:  # no content hypothesis: never beyond the label, below it by its marginal CI
            decided.update(content_above=False, content_below=summary["mean_content_gain_pp_ci_high"] < 0)
        verdict = fixed_hull.content_verdict(**decided)
        if verdict == fixed_hull.BEYOND_TASK_LABEL:
            verdict += f": mean content gain {content} pp (above 0, family-wise {conf})"
        elif verdict == fixed_hull.TASK_ROUTING_ONLY:
            verdict += (f": its mean gain over the fixed-model hull is explained by the benchmark label (mean content gain "
                        f"{content} pp)")
        else:
            verdict += f": mean content gain {content} pp"
        tags = ("" if c.deployable else " (not deployable: marginal CI)") + (
            "" if c.reads_question else " (cannot read the question: content by its marginal CI)")
        lines.append(f"- **{c.agent}**{tags} {verdict}.")
    return (lines + [""]) if lines else []


def plot_frontier(result: FrontierResult, path: str | Path) -> Path:
    """Accuracy vs mean joules on test: fixed models, their hull, and every agent's chosen points
    joined in joule order (validation never drawn)."""
    from routing_gym.eval.core.plots import _label_fixed_models, _pyplot, _save, distinct_colours, draw_task_hull

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 6.0))
    fixed = [{"method": f"always {r['model']}", "mean_energy_j": r["mean_energy_j"], "accuracy": r["accuracy"]}
             for _, r in result.fixed.iterrows()]
    ax.scatter([f["mean_energy_j"] for f in fixed], [100 * f["accuracy"] for f in fixed], marker="s", s=36,
               color="0.55", zorder=2, label="fixed models (always X)")
    # Sampled densely: a mix is linear in joules, which bows on the log axis used for wide ranges.
    fixed_j, fixed_acc = result.fixed["mean_energy_j"].to_numpy(), result.fixed["accuracy"].to_numpy()
    xs = np.geomspace(fixed_j.min(), fixed_j.max(), 400)
    ax.plot(xs, 100 * fixed_hull.hull_accuracy_at(fixed_j, fixed_acc, xs), color="tab:blue", alpha=0.45, linewidth=2.5,
            zorder=1, label="fixed-model hull (random mixes)")
    draw_task_hull(ax, result.task_hull)
    drawn = [c for c in result.curves if not c.error and c.selected]
    points = [(f["mean_energy_j"], 100 * f["accuracy"]) for f in fixed]
    knob_labels: list[tuple[float, float, str, Any]] = []
    points += [(r["test_energy_j"], 100 * r["test_accuracy"]) for r in result.task_hull["routes"]]
    for colour, c in zip(distinct_colours(len(drawn)), drawn):
        sel = c.selected
        x, y = [p.test_energy_j for p in sel], [100 * p.test_accuracy for p in sel]
        gain = c.summary.get("mean_gain_pp", math.nan)
        label = f"{c.agent} ({c.knob.parameter}; mean gain {gain:+.2f} pp)" if math.isfinite(gain) else f"{c.agent} ({c.knob.parameter})"
        if c.withheld:  # audit.withheld: drawn, never labelled as a gain
            label = f"{c.agent} ({c.knob.parameter}; {c.deployable_label})"
        ax.plot(x, y, marker="o", color=colour, linewidth=1.5, markersize=5, zorder=3, label=label)
        knob_labels += [(xi, yi, f"{p.value:g}", colour) for p, xi, yi in zip(sel, x, y)]
        points += list(zip(x, y))
    joules = [p[0] for p in points]
    if min(joules) > 0 and max(joules) / min(joules) > 20:
        ax.set_xscale("log")  # fixed models span orders of magnitude in joules
        ax.set_xlim(min(joules) / 1.4, max(joules) * 1.4)  # room for the outermost labels
    s = result.settings()
    ax.set_xlabel(f"mean answer energy per test query (J, {s['tournament']['provenance']})")
    ax.set_ylabel("accuracy on test queries (%)")
    ax.set_title(f"{s['tournament']['name']}: knob values chosen on validation, "
                 f"shown on {s['tournament']['n_test']} test queries", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    # the final axes geometry first: labels are placed apart in pixels, and the legend's tight_layout
    # afterwards shrank the axes, pulling labels placed apart back onto each other
    ax.autoscale_view()
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    knob_boxes = [tuple(n.get_window_extent(renderer).extents) for n in label_knob_values(ax, knob_labels, points)]
    _label_fixed_models(ax, fixed, points, avoid=knob_boxes)  # the models' names keep off the knob values
    return _save(fig, path, plt)
