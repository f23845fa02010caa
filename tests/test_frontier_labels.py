"""Frontier knob-value labels: crowded points (issue 25: the values near 20 J overlapped) get
labels whose boxes overlap neither each other nor any marker."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from routing_gym.eval.frontier.report import _boxes_overlap, label_knob_values  # noqa: E402


def test_crowded_knob_labels_do_not_overlap():
    fig, ax = plt.subplots(figsize=(9.5, 6.0))
    # two curves whose low-cost points sit within a joule of each other, as on llmrouter
    a = [(19.5, 55.0, "2"), (20.1, 55.4, "1"), (20.6, 55.4, "0.75"), (20.9, 55.8, "0.5"), (28.0, 55.8, "0.2")]
    b = [(19.8, 54.0, "2"), (20.3, 54.8, "1"), (20.8, 55.7, "0.5"), (24.0, 56.2, "0.2"), (67.0, 58.2, "0")]
    labels = [(x, y, t, "tab:orange") for x, y, t in a] + [(x, y, t, "tab:blue") for x, y, t in b]
    for curve in (a, b):
        ax.plot([p[0] for p in curve], [p[1] for p in curve], marker="o")
    drawn = label_knob_values(ax, labels)
    renderer = fig.canvas.get_renderer()
    boxes = [(b.x0, b.y0, b.x1, b.y1) for b in (note.get_window_extent(renderer) for note in drawn)]
    assert len(drawn) >= 7  # most values still get a label
    assert not any(_boxes_overlap(p, q) for p, q in itertools.combinations(boxes, 2))
    pad = 3.0 * fig.dpi / 72
    markers = [ax.transData.transform((x, y)) for x, y, _, _ in labels]
    assert not any(_boxes_overlap(box, (mx - pad, my - pad, mx + pad, my + pad)) for box in boxes for mx, my in markers)
    plt.close(fig)
