"""Fixed-model labels sit at their own markers and never cover another marker."""

from __future__ import annotations

import numpy as np

from routing_gym.eval.core.plots import _label_fixed_models, _pyplot


def test_labels_stay_at_their_markers_and_off_every_other_marker():
    plt = _pyplot()
    # the case: a long name at the costliest point of a log axis, another model ~1,000 J to its left
    fixed = [{"method": f"always {name}", "mean_energy_j": j, "accuracy": a} for name, j, a in [
        ("gemma-2-2b-it", 46.5, 0.358), ("Phi-3.5-mini-instruct", 46.4, 0.624), ("Qwen2-7B-Instruct", 46.8, 0.601),
        ("gemma-2-27b-it", 107.9, 0.676), ("Mistral-Large-2", 538.6, 0.789),
        ("Llama-3.1-405B-Inst@sambanova", 1865.6, 0.800), ("deepseek-v2.5-0908", 753.3, 0.754)]]
    agents = [(1865.6, 80.0), (300.0, 78.5), (700.0, 79.6)]  # e.g. fixed-largest on top of the 405B square
    points = [(f["mean_energy_j"], 100 * f["accuracy"]) for f in fixed] + agents
    fig, ax = plt.subplots(figsize=(9.5, 6.0))
    ax.scatter(*zip(*points))
    ax.set_xscale("log")
    _label_fixed_models(ax, fixed, points)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = {a.get_text(): a for a in ax.texts}
    assert len(labels) == len(fixed)
    marker_px = ax.transData.transform(np.array(points))
    for f in fixed:
        label = labels[f["method"].removeprefix("always ")]
        assert label.xy == (f["mean_energy_j"], 100 * f["accuracy"])  # anchored (and, if moved, led) to its own marker
        box = label.get_window_extent(renderer)
        own = ax.transData.transform((f["mean_energy_j"], 100 * f["accuracy"]))
        assert np.hypot(*(np.array([box.x0 + box.x1, box.y0 + box.y1]) / 2 - own)) < box.width / 2 + 80
        others = [p for p in marker_px if np.hypot(*(p - own)) > 1.0]
        assert not any(box.x0 <= px <= box.x1 and box.y0 <= py <= box.y1 for px, py in others), label.get_text()
        gap = lambda p: np.hypot(max(box.x0 - p[0], 0, p[0] - box.x1), max(box.y0 - p[1], 0, p[1] - box.y1))  # noqa: E731
        assert all(gap(own) < gap(p) for p in others), label.get_text()  # no other marker is nearer than its own
        assert label.get_zorder() > 4  # above every marker
    plt.close(fig)


def test_twenty_models_get_twenty_distinguishable_fills():
    from routing_gym.eval.core.plots import model_styles

    styles = model_styles(20)
    fills = [(tuple(s["color"]), s["hatch"]) for s in styles]
    assert len(set(fills)) == 20  # no two models look the same
    assert all(styles[i]["color"] != styles[i + 1]["color"] for i in range(19))  # neighbours differ in colour


def test_model_labels_keep_off_the_labels_drawn_before():
    """frontier.png draws the knob values first: a model's name must not land on one of them."""
    plt = _pyplot()
    fixed = [{"method": "always Meta-Llama-3-70B-Instruct", "mean_energy_j": 250.0, "accuracy": 0.696}]
    points = [(250.0, 69.6), (180.0, 66.0), (320.0, 72.0)]

    def label_box(avoid):
        fig, ax = plt.subplots(figsize=(9.5, 6.0))
        ax.scatter(*zip(*points))
        ax.set_xscale("log")
        _label_fixed_models(ax, fixed, points, avoid=avoid)
        fig.canvas.draw()
        box = tuple(ax.texts[0].get_window_extent(fig.canvas.get_renderer()).extents)
        plt.close(fig)
        return box

    first = label_box(())
    taken = (first[0] - 2, first[1] - 2, first[2] + 2, first[3] + 2)  # a knob value where the name went
    moved = label_box([taken])
    assert not (moved[0] < taken[2] and taken[0] < moved[2] and moved[1] < taken[3] and taken[1] < moved[3])
