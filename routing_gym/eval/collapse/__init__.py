"""Routing-collapse diagnostics: is a router still routing, or always picking one model?

A ``CollapseTracker`` is fed one decision at a time and works for every agent family:

- bandits and any agent trained through ``FitContext``: append the tracker to
  ``FitContext.step_hooks`` (it is a ``StepHook``: ``tracker(step, action, reward, info)``);
- Stable-Baselines3: ``sb3_callback(tracker)`` returns a ``BaseCallback`` for ``model.learn``;
- anything that logs a sequence of choices (the GRPO controller's sampled routes):
  ``track_actions(actions, n_models)``.

Per tumbling window of ``window`` decisions it records the action histogram, each model's
selection share, the normalised selection entropy ``H / log K`` (1 = uniform over the K
models, 0 = one model), the top-1 share, the effective number of models ``exp(H)`` (H in
nats) and a ``collapsed`` flag (top-1 share >= ``threshold``).

The **collapse step** is found with a *sliding* window instead, so it does not depend on
where the tumbling windows happen to start: it is the first step at which, among the last
``window`` decisions, one model holds a share >= ``threshold``. ``collapsed_onto`` is that
model.

Invalid actions (outside ``[0, K)``) are decisions for no model: they count in ``n`` and in
``invalid_share`` and dilute every model's share, but the entropy describes only the mix
of valid choices.

Results are written as CSV (``write_csv``), as TensorBoard scalars when ``tensorboard`` is
installed (``tensorboard_dir=``), and as a plot of selection shares over training
(``plot_selection_shares``; matplotlib Agg, imported lazily).
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from routing_gym.eval.core.metrics import selection_entropy

if TYPE_CHECKING:  # heavy imports stay out of module import
    import pandas as pd

    from routing_gym.tournament import Tournament

DEFAULT_WINDOW = 200
DEFAULT_THRESHOLD = 0.9


@dataclass
class WindowStats:
    """Selection statistics of one tumbling window of decisions."""

    index: int
    start_step: int
    end_step: int
    n: int  # decisions in the window (the last window may be partial)
    counts: np.ndarray  # [K] decisions per model
    n_invalid: int
    reward_sum: float
    reward_n: int
    complete: bool
    threshold: float

    @property
    def shares(self) -> np.ndarray:
        """Share of the window's decisions that went to each model (invalid ones dilute)."""
        return self.counts / max(self.n, 1)

    @property
    def entropy(self) -> float:
        """Normalised selection entropy over valid choices, in [0, 1] (0 if none was valid)."""
        return normalised_entropy(self.counts)

    @property
    def effective_models(self) -> float:
        """exp(H) with H in nats: 1 for a collapsed router, K for a uniform one."""
        return effective_models(self.counts)

    @property
    def top1(self) -> int:
        return int(np.argmax(self.counts))

    @property
    def top1_share(self) -> float:
        return float(self.counts.max() / max(self.n, 1))

    @property
    def collapsed(self) -> bool:
        return self.n > 0 and self.top1_share >= self.threshold

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.reward_n if self.reward_n else float("nan")


def normalised_entropy(counts: np.ndarray) -> float:
    """Shannon entropy of a histogram divided by log K (K = number of bins), in [0, 1].

    The same number as ``routing_gym.eval.core.metrics.selection_entropy`` (so the collapse log
    and ``compare``'s table agree): 0 for K = 1 or an empty histogram.
    """
    return selection_entropy(np.asarray(counts, dtype=np.float64))


def effective_models(counts: np.ndarray) -> float:
    """exp(entropy in nats) of a histogram: the number of equally used models it is worth."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        return float("nan")
    return math.exp(_entropy_nats(counts / total))


def _entropy_nats(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@dataclass
class CollapseTracker:
    """Online collapse diagnostics over a stream of routing decisions.

    Args:
        n_models: K, the number of candidate models (actions ``0..K-1``).
        window: decisions per tumbling window and length of the sliding detection window.
        threshold: top-1 share at or above which a window counts as collapsed.
        model_ids: names for the CSV columns and reports (default ``m0..m{K-1}``).
        tensorboard_dir: also write each closed window as TensorBoard scalars there (needs the
            ``tensorboard`` package; without it a warning is issued once and only CSV is kept).
    """

    n_models: int
    window: int = DEFAULT_WINDOW
    threshold: float = DEFAULT_THRESHOLD
    model_ids: list[str] | None = None
    tensorboard_dir: str | Path | None = None
    windows: list[WindowStats] = field(default_factory=list, init=False)
    collapse_step: int | None = field(default=None, init=False)
    collapsed_onto: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.n_models < 1:
            raise ValueError(f"n_models must be >= 1, got {self.n_models}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 decision, got {self.window}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold is a top-1 share in (0, 1], got {self.threshold}")
        if self.model_ids is None:
            self.model_ids = [f"m{k}" for k in range(self.n_models)]
        self.model_ids = [str(m) for m in self.model_ids]
        if len(self.model_ids) != self.n_models:
            raise ValueError(f"{len(self.model_ids)} model_ids for n_models={self.n_models}")
        self.n_steps = 0
        self._current: WindowStats | None = None
        # Sliding detector: the last `window` actions (-1 = invalid) and their per-model counts.
        self._recent: deque[int] = deque()
        self._recent_counts = np.zeros(self.n_models, dtype=np.int64)
        self._writer: Any = None
        if self.tensorboard_dir is not None:
            self._writer = _tensorboard_writer(self.tensorboard_dir)

    @classmethod
    def for_tournament(cls, tournament: Tournament, **kwargs: Any) -> CollapseTracker:
        """A tracker whose columns are named after the tournament's models."""
        return cls(n_models=tournament.n_models, model_ids=list(tournament.model_ids), **kwargs)

    # ------------------------------------------------------------------ feeding
    def __call__(self, step: int, action: int, reward: float, info: dict[str, Any] | None = None) -> None:
        """``FitContext.step_hooks`` signature: record one decision."""
        self.update(action, reward=reward, step=step)

    def update(self, action: int, reward: float | None = None, step: int | None = None) -> WindowStats | None:
        """Record one decision; returns the window it closed, if any."""
        step = self.n_steps if step is None else int(step)
        a = int(action)
        valid = 0 <= a < self.n_models
        if self._current is None:
            self._current = WindowStats(
                index=len(self.windows),
                start_step=step,
                end_step=step,
                n=0,
                counts=np.zeros(self.n_models, dtype=np.int64),
                n_invalid=0,
                reward_sum=0.0,
                reward_n=0,
                complete=False,
                threshold=self.threshold,
            )
        w = self._current
        w.end_step = step
        w.n += 1
        if valid:
            w.counts[a] += 1
        else:
            w.n_invalid += 1
        if reward is not None and np.isfinite(reward):
            w.reward_sum += float(reward)
            w.reward_n += 1
        self.n_steps += 1
        self._slide(a if valid else -1, step)
        if w.n >= self.window:
            w.complete = True
            self.windows.append(w)
            self._current = None
            self._write_scalars(w)
            return w
        return None

    def update_many(self, actions: Iterable[int], rewards: Iterable[float] | None = None, start_step: int | None = None) -> None:
        """Record a sequence of decisions (steps ``start_step, start_step + 1, ...``)."""
        actions = np.asarray(list(actions) if not isinstance(actions, np.ndarray) else actions).reshape(-1)
        reward_list = None if rewards is None else np.asarray(list(rewards), dtype=np.float64).reshape(-1)
        if reward_list is not None and len(reward_list) != len(actions):
            raise ValueError(f"{len(actions)} actions but {len(reward_list)} rewards")
        first = self.n_steps if start_step is None else int(start_step)
        for i, a in enumerate(actions.tolist()):
            self.update(a, None if reward_list is None else reward_list[i], first + i)

    def _slide(self, a: int, step: int) -> None:
        self._recent.append(a)
        if a >= 0:
            self._recent_counts[a] += 1
        if len(self._recent) > self.window:
            old = self._recent.popleft()
            if old >= 0:
                self._recent_counts[old] -= 1
        if self.collapse_step is None and len(self._recent) == self.window:
            top = int(np.argmax(self._recent_counts))
            # Integer comparison avoids float round-off at share == threshold exactly.
            if self._recent_counts[top] >= math.ceil(self.threshold * self.window - 1e-9):
                self.collapse_step = step
                self.collapsed_onto = top

    # ------------------------------------------------------------------ results
    @property
    def all_windows(self) -> list[WindowStats]:
        """Closed windows plus the current partial one (``complete=False``), if any."""
        return self.windows + ([self._current] if self._current is not None and self._current.n else [])

    @property
    def collapsed(self) -> bool:
        """Whether collapse was ever detected (see ``collapse_step``)."""
        return self.collapse_step is not None

    def selection_counts(self) -> np.ndarray:
        """Decisions per model over the whole stream."""
        total = np.zeros(self.n_models, dtype=np.int64)
        for w in self.all_windows:
            total += w.counts
        return total

    def to_frame(self) -> pd.DataFrame:
        """One row per window: steps, n, counts and shares per model, entropy, top-1, flag."""
        import pandas as pd

        rows = []
        for w in self.all_windows:
            row: dict[str, Any] = {
                "window": w.index,
                "start_step": w.start_step,
                "end_step": w.end_step,
                "n": w.n,
                "complete": w.complete,
                "entropy": w.entropy,
                "effective_models": w.effective_models,
                "top1_model": self.model_ids[w.top1],
                "top1_share": w.top1_share,
                "collapsed": w.collapsed,
                "invalid_share": w.n_invalid / max(w.n, 1),
                "mean_reward": w.mean_reward,
            }
            for k, name in enumerate(self.model_ids):
                row[f"count_{name}"] = int(w.counts[k])
            for k, name in enumerate(self.model_ids):
                row[f"share_{name}"] = float(w.shares[k])
            rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        """Headline numbers: did it collapse, when, onto which model, and where it ended."""
        windows = self.all_windows
        # Judge the end of training on the last full window (a tiny partial one is noise).
        last = next((w for w in reversed(windows) if w.complete), windows[-1] if windows else None)
        overall = self.selection_counts()
        return {
            "n_steps": self.n_steps,
            "window": self.window,
            "threshold": self.threshold,
            "collapsed": self.collapsed,
            "collapse_step": self.collapse_step,
            "collapsed_onto": None if self.collapsed_onto is None else self.model_ids[self.collapsed_onto],
            "collapsed_windows": sum(w.collapsed for w in windows),
            "final_collapsed": bool(last.collapsed) if last else False,
            "final_top1_model": self.model_ids[last.top1] if last else None,
            "final_top1_share": last.top1_share if last else float("nan"),
            "final_entropy": last.entropy if last else float("nan"),
            "final_effective_models": last.effective_models if last else float("nan"),
            "overall_entropy": normalised_entropy(overall),
        }

    def write_csv(self, path: str | Path) -> Path:
        """Write the per-window table (``to_frame``) as CSV; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.to_frame().to_csv(path, index=False)
        return path

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Selection shares over training as a stacked area plot (see ``plot_selection_shares``)."""
        return plot_selection_shares({title or "selection shares": self}, path)

    def close(self) -> None:
        """Flush the partial window to TensorBoard and close the writer."""
        if self._writer is not None:
            if self._current is not None and self._current.n:
                self._write_scalars(self._current)
            self._writer.close()
            self._writer = None

    def _write_scalars(self, w: WindowStats) -> None:
        if self._writer is None:
            return
        for tag, value in window_scalars(w, self.model_ids).items():
            self._writer.add_scalar(tag, value, w.end_step)


def window_scalars(w: WindowStats, model_ids: Sequence[str]) -> dict[str, float]:
    """The TensorBoard / SB3-logger scalars of one window (``collapse/...`` tags)."""
    scalars = {
        "collapse/entropy": w.entropy,
        "collapse/top1_share": w.top1_share,
        "collapse/effective_models": w.effective_models,
        "collapse/collapsed": float(w.collapsed),
    }
    for k, name in enumerate(model_ids):
        scalars[f"collapse/share_{name}"] = float(w.shares[k])
    return scalars


def _tensorboard_writer(log_dir: str | Path) -> Any:
    import importlib.util

    # Check for the package before importing torch's writer (torch alone costs seconds).
    if importlib.util.find_spec("tensorboard") is None or importlib.util.find_spec("torch") is None:
        warnings.warn(
            f"tensorboard is not installed: collapse scalars for {log_dir} go to CSV only "
            "(pip install tensorboard to get them in TensorBoard)",
            stacklevel=3,
        )
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(log_dir))


def track_actions(
    actions: Sequence[int] | np.ndarray,
    n_models: int,
    rewards: Sequence[float] | np.ndarray | None = None,
    window: int = DEFAULT_WINDOW,
    threshold: float = DEFAULT_THRESHOLD,
    model_ids: list[str] | None = None,
    start_step: int = 0,
) -> CollapseTracker:
    """Collapse diagnostics of a finished sequence of decisions (e.g. GRPO's sampled routes)."""
    tracker = CollapseTracker(n_models=n_models, window=window, threshold=threshold, model_ids=model_ids)
    tracker.update_many(actions, rewards, start_step=start_step)
    return tracker


def sb3_callback(tracker: CollapseTracker, hooks: Sequence[Any] = (), log_to_sb3: bool = True) -> Any:
    """A Stable-Baselines3 callback feeding every env step to ``tracker`` (and extra ``hooks``).

    With several envs, the ``n_envs`` decisions of one vectorised step get consecutive step
    numbers. With ``log_to_sb3`` each closed window is also recorded in the model's logger
    (so it reaches TensorBoard when the model has ``tensorboard_log`` set).
    """
    return make_step_hook_callback([tracker, *hooks], tracker=tracker if log_to_sb3 else None)


def make_step_hook_callback(hooks: Sequence[Any], tracker: CollapseTracker | None = None) -> Any:
    """An SB3 ``BaseCallback`` that calls each ``StepHook`` ``(step, action, reward, info)``."""
    from stable_baselines3.common.callbacks import BaseCallback  # lazy: SB3 pulls in torch

    class StepHookCallback(BaseCallback):
        def __init__(self) -> None:
            super().__init__(verbose=0)
            self.hooks = list(hooks)
            self._seen = 0

        def _on_step(self) -> bool:
            # PPO/A2C step the env with `clipped_actions`; DQN with `actions`.
            actions = self.locals.get("clipped_actions", self.locals.get("actions"))
            rewards = self.locals["rewards"]
            infos = self.locals["infos"]
            closed_before = len(tracker.windows) if tracker is not None else 0
            for a, r, info in zip(np.asarray(actions).reshape(len(infos), -1)[:, 0], np.asarray(rewards), infos):
                for hook in self.hooks:
                    hook(self._seen, int(a), float(r), info)
                self._seen += 1
            if tracker is not None:
                for w in tracker.windows[closed_before:]:
                    for tag, value in window_scalars(w, tracker.model_ids).items():
                        self.logger.record_mean(tag, value)
            return True

    return StepHookCallback()


def plot_selection_shares(
    runs: dict[str, CollapseTracker | pd.DataFrame],
    path: str | Path,
    ncols: int = 3,
    threshold: float | None = None,
) -> Path:
    """One stacked-area panel per run: each model's selection share per window over steps.

    ``runs`` maps a panel title to a tracker or its ``to_frame()`` table. A dashed line marks
    the collapse threshold and a dotted vertical line the collapse step (trackers only).
    """
    import matplotlib

    matplotlib.use("Agg")  # headless: never open a window
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("plot_selection_shares needs at least one run")
    n = len(runs)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    # At least ~6.4 x 3.8 in per panel at 110 dpi (a single tracker's plot is 700 x 420 px, not a thumbnail);
    # constrained layout keeps titles, labels and the legend strip inside the figure without overlap.
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.4, 4.6 * ncols), 3.4 * nrows + 0.8), squeeze=False,
                             sharey=True, layout="constrained")
    model_order: list[str] = []
    for ax, (title, run) in zip(axes.flat, runs.items()):
        frame = run.to_frame() if isinstance(run, CollapseTracker) else run
        share_cols = [c for c in frame.columns if c.startswith("share_")]
        names = [c[len("share_"):] for c in share_cols]
        for name in names:
            if name not in model_order:
                model_order.append(name)
        if len(frame):
            # Each window is drawn at its middle decision.
            x = (frame["start_step"].to_numpy() + frame["end_step"].to_numpy()) / 2 + 1
            colours = [plt.cm.tab20(model_order.index(m) % 20) for m in names]
            ax.stackplot(x, frame[share_cols].to_numpy().T, labels=names, colors=colours)
            ax.set_xlim(0, frame["end_step"].max() + 1)
        th = threshold if threshold is not None else (run.threshold if isinstance(run, CollapseTracker) else None)
        if th is not None:
            ax.axhline(th, color="black", linestyle="--", linewidth=0.8)
        if isinstance(run, CollapseTracker) and run.collapse_step is not None:
            ax.axvline(run.collapse_step + 1, color="black", linestyle=":", linewidth=1.2)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=8)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("selection share", fontsize=9)
    for ax in axes[-1, :]:
        ax.set_xlabel("decisions", fontsize=9)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in axes.flat[1:n]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    # "outside lower center": constrained layout reserves a strip for it, so nothing is clipped.
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=min(len(seen), 5), fontsize=8,
               frameon=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
