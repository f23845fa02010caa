"""Routing-collapse diagnostics: windows, the collapse step, hooks, SB3 callback, CSV, plot."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
from test_sb3_agents import signal_tournament

from routing_gym.envs import Reward, RewardBreakdown, register_reward
from routing_gym.eval.collapse import (
    CollapseTracker,
    effective_models,
    normalised_entropy,
    plot_selection_shares,
    sb3_callback,
    track_actions,
)
from routing_gym.eval.core.metrics import selection_entropy, selection_frequencies
from routing_gym_agents import FitContext, ObservationBatch, make_agent

DOMINANT = 1  # the model the forced-collapse reward favours


@register_reward("test-one-model-dominant")
def one_model_dominant(outcomes):
    """+1 for routing to model DOMINANT, -1 for anything else, whatever the outcome."""
    k = outcomes.correct.shape[1]
    total = np.where(np.arange(k)[None, :] == DOMINANT, 1.0, -1.0) * np.ones_like(outcomes.correct)
    return RewardBreakdown(total)


def first_collapse_step(actions: np.ndarray, n_models: int, window: int, threshold: float) -> int | None:
    """Brute force reference: first step whose trailing `window` decisions give one model a
    share >= threshold."""
    for t in range(window - 1, len(actions)):
        counts = np.bincount(actions[t - window + 1 : t + 1], minlength=n_models)
        if counts.max() >= threshold * window - 1e-9:
            return t
    return None


def test_scripted_collapse_is_flagged_at_the_hand_computed_step():
    # 400 decisions cycling over 4 models, then only model 2. With window 100 and threshold
    # 0.9 the trailing window first holds 90 twos at step 485: 86 from the tail (400..485)
    # plus 4 from the cycle's last 14 decisions (386, 390, 394, 398).
    actions = np.r_[np.arange(400) % 4, np.full(300, 2)]
    tracker = track_actions(actions, n_models=4, window=100, threshold=0.9)
    assert tracker.collapse_step == 485 == first_collapse_step(actions, 4, 100, 0.9)
    assert tracker.summary()["collapsed_onto"] == "m2"
    frame = tracker.to_frame()
    assert frame["collapsed"].tolist() == [False] * 4 + [True] * 3
    np.testing.assert_allclose(frame["entropy"][:4], 1.0)
    np.testing.assert_allclose(frame["effective_models"][:4], 4.0)
    np.testing.assert_allclose(frame["top1_share"], [0.25] * 4 + [1.0] * 3)
    assert frame["entropy"][4] == 0.0 and frame["effective_models"][4] == 1.0
    assert list(frame["start_step"]) == [0, 100, 200, 300, 400, 500, 600]


def test_threshold_is_inclusive_and_steps_follow_the_caller():
    tracker = CollapseTracker(n_models=3, window=10, threshold=0.9)
    for i, a in enumerate([0] + [1] * 9):
        tracker(1000 + i, a, 0.0, {})
    assert tracker.collapse_step == 1009  # 9 of 10 = 0.9 counts as collapsed
    tracker = CollapseTracker(n_models=3, window=10, threshold=0.91)
    tracker.update_many([0] + [1] * 9)
    assert tracker.collapse_step is None


def test_balanced_random_routing_is_not_flagged():
    actions = np.random.default_rng(0).integers(0, 4, 5000)
    tracker = track_actions(actions, n_models=4, window=200, threshold=0.9)
    summary = tracker.summary()
    assert not summary["collapsed"] and summary["collapse_step"] is None
    assert summary["collapsed_windows"] == 0
    frame = tracker.to_frame()
    assert (frame["entropy"] > 0.95).all() and (frame["effective_models"] > 3.7).all()
    assert (frame["top1_share"] < 0.35).all()


def test_statistics_agree_with_compare_metrics():
    rng = np.random.default_rng(1)
    actions = np.r_[rng.integers(-1, 5, 300), rng.choice([0, 0, 0, 3], 300)]  # some invalid (-1, 4)
    tracker = track_actions(actions, n_models=4, window=150)
    for w in tracker.windows:
        chunk = actions[w.start_step : w.end_step + 1]
        freqs = selection_frequencies(chunk, 4)
        np.testing.assert_allclose(w.shares, freqs)
        assert w.entropy == pytest.approx(selection_entropy(freqs))
        assert w.top1_share == pytest.approx(freqs.max())
        assert w.n_invalid == int(((chunk < 0) | (chunk >= 4)).sum())
        p = freqs[freqs > 0] / freqs.sum()
        assert w.effective_models == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert normalised_entropy(np.array([5])) == 0.0 and effective_models(np.array([0, 7])) == 1.0


def test_invalid_actions_dilute_shares():
    tracker = track_actions([0, -1, 5, 0], n_models=2, window=4, threshold=0.75)
    w = tracker.windows[0]
    assert list(w.counts) == [2, 0] and w.n_invalid == 2
    assert w.top1_share == 0.5 and not w.collapsed
    assert tracker.to_frame()["invalid_share"][0] == 0.5


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="window must be >= 1"):
        CollapseTracker(n_models=3, window=0)
    with pytest.raises(ValueError, match="threshold is a top-1 share"):
        CollapseTracker(n_models=3, threshold=1.5)
    with pytest.raises(ValueError, match="2 model_ids for n_models=3"):
        CollapseTracker(n_models=3, model_ids=["a", "b"])
    with pytest.raises(ValueError, match="3 actions but 2 rewards"):
        track_actions([0, 1, 2], 3, rewards=[1.0, 2.0])


def test_csv_plot_and_partial_window(tmp_path):
    tracker = track_actions(np.r_[np.zeros(250, int), np.ones(30, int)], n_models=3, window=100,
                            rewards=np.linspace(0, 1, 280), model_ids=["small", "mid", "large"])
    csv = tracker.write_csv(tmp_path / "collapse.csv")
    frame = pd.read_csv(csv)
    assert len(frame) == 3 and frame["complete"].tolist() == [True, True, False]
    assert frame["n"].tolist() == [100, 100, 80]
    counts = frame[["count_small", "count_mid", "count_large"]].to_numpy()
    assert (counts.sum(axis=1) == frame["n"]).all()
    assert frame["mean_reward"][0] == pytest.approx(np.linspace(0, 1, 280)[:100].mean())
    assert tracker.summary()["final_top1_model"] == "small"  # judged on the last full window
    png = plot_selection_shares({"run a": tracker, "run b": tracker.to_frame()}, tmp_path / "shares.png")
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"


def test_tensorboard_scalars_when_available(tmp_path):
    if importlib.util.find_spec("tensorboard") is None:
        with pytest.warns(UserWarning, match="tensorboard is not installed"):
            tracker = CollapseTracker(n_models=2, window=5, tensorboard_dir=tmp_path / "tb")
        tracker.update_many([0, 1] * 10)
        tracker.close()
        assert len(tracker.windows) == 4  # CSV side unaffected
    else:
        tracker = CollapseTracker(n_models=2, window=5, tensorboard_dir=tmp_path / "tb")
        tracker.update_many([0, 1] * 10)
        tracker.close()
        assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_forced_collapse_flagged_at_the_right_step_through_hooks_and_callback():
    """A reward that makes one model dominant: PPO collapses onto it and both feeding paths
    (FitContext.step_hooks and the SB3 callback inside the agent) flag the same step, the
    step a brute-force scan of the logged actions finds."""
    t = signal_tournament(n=300, seed=2)
    hook_tracker = CollapseTracker.for_tournament(t, window=100, threshold=0.9)
    actions: list[int] = []
    ctx = FitContext(t, Reward("test-one-model-dominant"), seed=0,
                     step_hooks=[hook_tracker, lambda s, a, r, info: actions.append(a)])
    agent = make_agent("ppo", total_timesteps=1000, learning_rate=3e-3, features={"dim": 8},
                       collapse_window=100, collapse_threshold=0.9)
    logs = agent.fit(ctx)

    expected = first_collapse_step(np.asarray(actions), t.n_models, 100, 0.9)
    assert expected is not None and 100 <= expected < len(actions)  # it had to learn it first
    assert hook_tracker.collapse_step == expected == agent.collapse.collapse_step
    assert logs["collapse"]["collapse_step"] == expected
    assert logs["collapse"]["collapsed_onto"] == t.model_ids[DOMINANT]
    frame = hook_tracker.to_frame()
    assert not frame["collapsed"].iloc[0]  # the untrained policy was still spread out
    assert frame["collapsed"].iloc[-1] and frame["top1_model"].iloc[-1] == t.model_ids[DOMINANT]
    assert frame["entropy"].iloc[-1] < frame["entropy"].iloc[0]
    routed = agent.act_batch(ObservationBatch.from_tournament(t, t.split_rows("test")))
    assert (routed == DOMINANT).all()


def test_sb3_callback_adapter_feeds_tracker_and_sb3_logger(tmp_path):
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.logger import configure

    from routing_gym.envs.wrappers import BoxObservation

    torch.set_num_threads(1)
    t = signal_tournament(n=300, seed=3)
    env = BoxObservation(FitContext(t, Reward()).make_env(), dim=8)
    model = A2C("MlpPolicy", env, n_steps=50, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    tracker = CollapseTracker.for_tournament(t, window=100)
    seen: list[int] = []
    model.learn(400, callback=sb3_callback(tracker, hooks=[lambda s, a, r, info: seen.append(s)]), log_interval=1)
    model.logger.close()
    assert tracker.n_steps == 400 and seen == list(range(400)) and len(tracker.windows) == 4
    assert tracker.selection_counts().sum() == 400
    logged = pd.read_csv(tmp_path / "progress.csv")
    assert {"collapse/top1_share", "collapse/entropy", "collapse/share_m0"} <= set(logged.columns)
    assert logged["collapse/top1_share"].dropna().between(1 / 3, 1).all()
