"""PNG plots of a ``CompareResult`` (matplotlib with the Agg backend, imported lazily).

This module does not import ``compare`` (``compare.report`` imports it to write its outputs); it
reads a result through the ``ComparisonView`` protocol.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class ComparisonView(Protocol):
    """What the plots read from a ``routing_gym.eval.compare.statistics.CompareResult``."""

    rows: list[dict[str, Any]]
    pareto: dict[str, Any]
    regret: dict[str, dict[str, Any]]
    tournament: Any
    reward: Any
    config: Any

    def row(self, method: str) -> dict[str, Any]: ...

    def settings(self) -> dict[str, Any]: ...


# Filled markers, one per agent: 20 before any repeats (compare's 17 default agents each get their
# own; 12 made irt share fixed-largest's). The square "s" is the fixed models' own; (n, 1, angle) is an
# n-pointed star, (n, 0, angle) a regular polygon.
_MARKERS: tuple[Any, ...] = ("o", "^", "D", "v", "P", "*", "X", "h", "<", ">", "p", "d", "8", "H",
                             (4, 1, 0), (6, 1, 0), (8, 1, 0), (7, 0, 0), (4, 1, 45), (3, 1, 0))
DPI = 110


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def distinct_colours(n: int) -> list[tuple[float, float, float]]:
    """``n`` colours: tab10 then Dark2, 18 distinguishable ones before any repeats."""
    import matplotlib

    colours = list(matplotlib.colormaps["tab10"].colors) + list(matplotlib.colormaps["Dark2"].colors)
    return [colours[i % len(colours)] for i in range(n)]


_HATCHES = ("", "////", "....", "xxxx", "\\\\\\\\")


def model_styles(n: int) -> list[dict[str, Any]]:
    """Fill colour and hatch of ``n`` stacked models: tab10's qualitative colours, a new hatch each
    time they repeat, so neighbours never share a colour and 20 models stay distinguishable (a
    sequential colormap made neighbours indistinguishable past ~10)."""
    import matplotlib

    colours = matplotlib.colormaps["tab10"].colors
    return [{"color": colours[i % len(colours)], "hatch": _HATCHES[(i // len(colours)) % len(_HATCHES)]}
            for i in range(n)]


def _agent_styles(result: ComparisonView) -> dict[str, dict[str, Any]]:
    """One colour and marker per agent, the same in every plot (markers cycle past 20 agents)."""
    agents = [r["method"] for r in result.rows if r["kind"] != "fixed-model"]
    colours = distinct_colours(len(agents))
    return {m: {"color": colours[i], "marker": _MARKERS[i % len(_MARKERS)]} for i, m in enumerate(agents)}


def plot_pareto(result: ComparisonView, path: str | Path) -> Path:
    """Accuracy vs mean joules: every fixed model, every method with its 95 % intervals on
    both axes, and the Pareto front of deployable methods (fixed models included)."""
    plt = _pyplot()
    rows = [r for r in result.rows if r["seeds_ok"]]
    fixed = [r for r in rows if r["kind"] == "fixed-model"]
    agents = [r for r in rows if r["kind"] != "fixed-model"]
    fig, ax = plt.subplots(figsize=(9.5, 6.0))
    for r in fixed:
        ax.scatter(r["mean_energy_j"], 100 * r["accuracy"], marker="s", s=36, color="0.55", zorder=2)
    if fixed:
        ax.scatter([], [], marker="s", color="0.55", label="fixed models (always X)")
    styles = _agent_styles(result)
    for r in agents:
        style = styles[r["method"]]
        x, y = r["mean_energy_j"], 100 * r["accuracy"]
        xerr = [[x - r["mean_energy_j_ci_low"]], [r["mean_energy_j_ci_high"] - x]]
        yerr = [[y - 100 * r["accuracy_ci_low"]], [100 * r["accuracy_ci_high"] - y]]
        face = style["color"] if r["deployable"] else "white"  # deployable: verified (audit.withheld)
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=style["color"], elinewidth=1, capsize=2, zorder=3)
        label = r["method"] + ("" if r["deployable"] else " (not verified)" if r.get("deployable_label", "").startswith(
            "unverified") else " (not deployable)")
        ax.scatter(x, y, marker=style["marker"], s=70, facecolor=face, edgecolor=style["color"], linewidth=1.5,
                   zorder=4, label=label)
    hull = result.pareto.get("hull")
    if hull:  # vertices, then flat to the costliest fixed model (more joules buy nothing more)
        # A mix is linear in joules, so on the log axis each edge is a curve: sample it densely
        # (straight segments between vertices would overstate the hull between them).
        vertices_j, vertices_acc = np.asarray(hull["energy_j"]), np.asarray(hull["accuracy"])
        xs = _chain_xs(vertices_j, hull["max_fixed_energy_j"])
        ys = 100 * np.interp(xs, vertices_j, vertices_acc)  # flat beyond the last vertex
        ax.plot(xs, ys, color="tab:blue", alpha=0.45, linewidth=2.5, zorder=1,
                label="fixed-model yardstick (chain chosen on train, mixes)")
    draw_task_hull(ax, result.pareto.get("task_hull", {}))
    front = result.pareto.get("front_deployable", [])
    if front:
        points = sorted((result.row(m)["mean_energy_j"], 100 * result.row(m)["accuracy"]) for m in front)
        xs, ys = zip(*points)
        ax.step(xs, ys, where="post", color="black", linewidth=1, linestyle="--", zorder=1,
                label=f"Pareto front, deployable (HV {result.pareto['hypervolume_deployable']:.3f})")
    joules = [r["mean_energy_j"] for r in rows]
    if joules and min(joules) > 0 and max(joules) / min(joules) > 20:
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_xscale("log")  # fixed models span orders of magnitude in joules
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_xlim(min(joules) / 1.4, max(joules) * 1.4)  # room for the outermost labels
    s = result.settings()
    provenance = s["tournament"]["provenance"]
    ax.set_xlabel(f"mean answer energy per held-out query (J, {provenance})")
    ax.set_ylabel("accuracy on held-out queries (%)")
    ax.set_title(f"{s['tournament']['name']}: accuracy vs energy ({s['tournament']['n_test']} held-out queries, "
                 f"{_seeds(len(s['seeds']))}, {result.config.confidence:.0%} CIs)", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    # routers are named at their markers too, in their colour: crowded in one corner, colour and marker
    # alone left them to be told apart through the legend
    named = fixed + [{**r, "label_colour": styles[r["method"]]["color"]} for r in agents]
    _label_fixed_models(ax, named, [(r["mean_energy_j"], 100 * r["accuracy"]) for r in rows])  # needs final layout
    return _save(fig, path, plt)


def _chain_xs(vertices_j: np.ndarray, costliest_j: float) -> np.ndarray:
    """Joules at which to draw a yardstick's chain on a log axis: from half its first policy's
    joules (the chain starts at the null point, 0 J, which a log axis cannot show) to the costliest
    point, densely (a mix is linear in joules, so each edge is a curve there)."""
    positive = vertices_j[vertices_j > 0]
    return np.geomspace(positive[0] / 2, max(costliest_j, positive[-1]), 400)


def draw_task_hull(ax, task_hull: dict[str, Any]) -> None:
    """The task-aware yardstick (``eval/core/yardstick.py``) as a dotted line, flat beyond its most accurate
    vertex, and its per-benchmark routes as small crosses; nothing when the result has none."""
    if not task_hull:
        return
    vertices_j, vertices_acc = np.asarray(task_hull["energy_j"]), np.asarray(task_hull["accuracy"])
    xs = _chain_xs(vertices_j, task_hull["max_energy_j"])
    ax.plot(xs, 100 * np.interp(xs, vertices_j, vertices_acc), color="tab:red", alpha=0.6, linewidth=1.8,
            linestyle=":", zorder=1, label="task-aware yardstick (per-benchmark routes, chosen on train)")
    routes = task_hull.get("routes", [])
    if routes:
        ax.scatter([r["test_energy_j"] for r in routes], [100 * r["test_accuracy"] for r in routes], marker="x", s=18,
                   color="tab:red", alpha=0.5, linewidth=1, zorder=2, label="per-benchmark routes")


# Label placements tried around a marker: 8 directions at growing distances (points); a label
# moved off its marker's side gets a leader line back to it.
_DIRECTIONS = ((1, -1), (-1, 1), (1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))
_DISTANCES = (5, 14, 28, 44)


def _label_fixed_models(ax, fixed: list[dict[str, Any]], points: list[tuple[float, float]],
                        avoid: Sequence[tuple[float, float, float, float]] = ()) -> None:
    """Name each fixed model at its own square (and each row with a ``label_colour``, a router, in
    that colour at its marker): the nearest placement that covers no other
    marker or earlier label and lies clearly nearer its own marker than any other (a greedy search in
    display pixels; a long name may wrap onto two lines; a leader line once it is moved away),
    drawn above every marker on a light box so no marker can hide it."""
    from matplotlib.font_manager import FontProperties

    ax.autoscale_view()
    ax.figure.tight_layout()  # final axes geometry first: placements are measured in pixels
    frame = ax.get_window_extent()
    to_px = ax.transData.transform
    px_per_pt = ax.figure.dpi / 72
    markers = to_px(np.array(points)) if points else np.zeros((0, 2))
    renderer, font = ax.figure.canvas.get_renderer(), FontProperties(size=7)
    line_h = 7 * px_per_pt * 1.15

    def width(line: str) -> float:  # measured by the renderer that draws it, in pixels
        return renderer.get_text_width_height_descent(line, font, ismath=False)[0] + 2 * px_per_pt

    reach = 7 * px_per_pt  # a marker's half-width plus a margin
    placed: list[tuple[float, float, float, float]] = list(avoid)  # labels drawn before (pixel boxes)
    for r in sorted(fixed, key=lambda r: r["mean_energy_j"]):
        name = r["method"].removeprefix("always ")
        x, y = to_px((r["mean_energy_j"], 100 * r["accuracy"]))
        others = markers[np.hypot(markers[:, 0] - x, markers[:, 1] - y) > 1.0] if len(markers) else markers
        best = None
        for text in dict.fromkeys([name, _wrap(name)]):
            lines = text.split("\n")
            w, h = max(map(width, lines)), line_h * len(lines)
            for rank, (distance, (dx, dy)) in enumerate((d, v) for d in _DISTANCES for v in _DIRECTIONS):
                off = distance * px_per_pt
                x0 = x + off if dx > 0 else x - off - w if dx < 0 else x - w / 2
                y0 = y + off if dy > 0 else y - off - h if dy < 0 else y - h / 2
                box = (x0, y0, x0 + w, y0 + h)
                covered = sum(box[0] - reach <= mx <= box[2] + reach and box[1] - reach <= my <= box[3] + reach
                              for mx, my in others)
                clashes = sum(not (box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1]) for b in placed)
                outside = box[0] < frame.x0 or box[2] > frame.x1 or box[1] < frame.y0 or box[3] > frame.y1
                # another marker about as near as its own makes the label ambiguous
                nearer = any(_box_distance(box, p) < 1.5 * _box_distance(box, (x, y)) + reach for p in others)
                cost = (100 * covered + 50 * clashes + 1000 * outside + 30 * nearer  # off the axes: onto the legend
                        + rank + 5 * (len(lines) - 1))  # the nearest clean placement, one line if it can
                if best is None or cost < best[0]:
                    best = (cost, text, distance, dx, dy, box)
        _, text, distance, dx, dy, box = best
        placed.append(box)
        ax.annotate(text, (r["mean_energy_j"], 100 * r["accuracy"]), textcoords="offset points",
                    xytext=(distance * dx, distance * dy), ha={1: "left", -1: "right", 0: "center"}[dx],
                    va={1: "bottom", -1: "top", 0: "center"}[dy], fontsize=7, color=r.get("label_colour", "0.25"), zorder=6,
                    linespacing=1.0, multialignment={1: "left", -1: "right", 0: "center"}[dx],
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.75},
                    arrowprops=None if distance == _DISTANCES[0] else {"arrowstyle": "-", "color": "0.5", "lw": 0.6})


def _wrap(name: str) -> str:
    """A long model name on two lines, broken at the separator nearest its middle."""
    cuts = [i for i, c in enumerate(name) if c in "@-_/" and 0 < i < len(name) - 1]
    if len(name) < 16 or not cuts:
        return name
    cut = min(cuts, key=lambda i: abs(i - len(name) / 2))
    return name[:cut] + "\n" + name[cut:]


def _box_distance(box: tuple[float, float, float, float], point: tuple[float, float]) -> float:
    """Pixels from a point to the nearest point of a box (0 inside)."""
    return float(np.hypot(max(box[0] - point[0], 0.0, point[0] - box[2]), max(box[1] - point[1], 0.0, point[1] - box[3])))


def plot_selection(result: ComparisonView, path: str | Path) -> Path:
    """Stacked horizontal bars: each method's share of held-out queries per model (models
    from smallest to largest), invalid actions hatched."""
    plt = _pyplot()
    import matplotlib

    rows = [r for r in result.rows if r["seeds_ok"] and r["kind"] != "fixed-model"]
    t = result.tournament
    params = t.models["params_b"].fillna(0).to_numpy()
    order = np.argsort(params, kind="stable")
    models = [t.model_ids[i] for i in order]
    fig, ax = plt.subplots(figsize=(9.5, max(0.45 * max(len(rows), 2) + 1.6, 0.2 * len(models) + 1.0)))
    y = np.arange(len(rows))[::-1]
    left = np.zeros(len(rows))
    with matplotlib.rc_context({"hatch.color": "white", "hatch.linewidth": 0.8}):
        for style, model in zip(model_styles(len(models)), models):
            share = np.array([r["selection"].get(model, 0.0) for r in rows])
            ax.barh(y, share, left=left, color=style["color"], hatch=style["hatch"], edgecolor="white", linewidth=0.5,
                    label=model)
            left += share
    invalid = np.clip(1.0 - left, 0.0, None)
    if (invalid > 1e-9).any():
        ax.barh(y, invalid, left=left, color="white", edgecolor="crimson", hatch="//", label="invalid action")
    ax.set_yticks(y, [r["method"] for r in rows], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of held-out queries routed to each model (mean over seeds)")
    ax.set_title(f"{t.card.name}: selection mix (models from smallest to largest)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return _save(fig, path, plt)


def plot_regret(result: ComparisonView, path: str | Path) -> Path:
    """Online regret (oracle reward minus obtained reward) of the agents that learn online,
    against a uniformly random router: cumulative (mean over seeds, min-max band) and per
    decision over a trailing window (is the agent still improving?)."""
    plt = _pyplot()
    fig, (cum, step) = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = _agent_styles(result)
    longest = 0
    for method, curve in result.regret.items():
        style = styles[method]
        cum.plot(curve["steps"], curve["mean"], color=style["color"], linewidth=1.5,
                 label=f"{method} ({_seeds(curve['n_seeds'])})")
        cum.fill_between(curve["steps"], curve["min"], curve["max"], color=style["color"], alpha=0.12, linewidth=0)
        full = slice(curve["window"] - 1, None)  # from the first full window: earlier points are noise
        step.plot(curve["steps"][full], curve["smoothed_per_step"][full], color=style["color"], linewidth=1.5)
        longest = max(longest, len(curve["steps"]))
    if result.regret:
        first = next(iter(result.regret.values()))
        per_step = first["random_per_step"]
        cum.plot([0, longest], [0, per_step * longest], color="0.4", linestyle="--", label="uniform random (expected)")
        step.axhline(per_step, color="0.4", linestyle="--", label="uniform random (expected)")
        step.legend(fontsize=8, frameon=False)
        step.set_title(f"regret per decision, trailing mean over {first['window']} decisions", fontsize=10)
    cum.set_title(f"{result.tournament.card.name}: cumulative online regret on the training split", fontsize=10)
    cum.set_ylabel("cumulative regret")
    # Say what regret is measured against: the per-query oracle under the same reward.
    fig.suptitle(f"regret of a decision = reward of the query's best route (the oracle) - reward obtained, "
                 f"both under {result.reward.describe()}", fontsize=9)
    for ax in (cum, step):
        ax.set_xlabel("online training decision")
        ax.grid(True, alpha=0.3)
    step.set_ylim(bottom=0)
    cum.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return _save(fig, path, plt)


def _seeds(n: int) -> str:
    return f"{n} seed" + ("" if n == 1 else "s")


def _save(fig, path: str | Path, plt) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
