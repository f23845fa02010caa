"""Serving policies, the paired evaluation and ``routing-gym serve`` (issue 62)."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.eval.serving.evaluate import METRICS, run_episode, summarise
from routing_gym.eval.serving.policies import HeuristicPolicy, make_policy

pytestmark = pytest.mark.realdata
KW = {"split": "test", "episode_length": 80, "rate": 6.0}


@pytest.fixture(scope="module")
def env(data_dir):
    return gym.make("RoutingGym/Serving-v0", **KW)


def test_heuristics_read_the_server_state(env):
    obs, _ = env.reset(seed=0)
    jsq, consolidate = HeuristicPolicy("jsq", env, margin=1.0), HeuristicPolicy("consolidate", env, margin=1.0)
    k = env.action_space.n
    obs = {**obs, "wait_s": np.zeros(k, np.float32), "batch_fill": np.linspace(0.9, 0.1, k).astype(np.float32)}
    assert jsq.act(obs) == k - 1  # every model adequate (margin 1): the emptiest
    assert consolidate.act(obs) == 0  # the busiest with a free slot
    obs["batch_fill"][0] = 1.0
    assert consolidate.act(obs) == 1
    greedy = HeuristicPolicy("energy-greedy", env, margin=1.0)
    obs["batch_fill"][:] = 0.0
    b = int(obs["benchmark"])
    assert greedy.act(obs) == int(np.argmin(greedy.table.tokens[b] * greedy.jpt[:, 1]))


def test_policies_see_the_same_traffic_and_a_replay_agent_runs_state_blind(env):
    agent = make_policy("agent:per-benchmark", env)
    first = run_episode(env, agent, seed=3)
    arrivals = env.unwrapped.arrivals.copy()
    run_episode(env, make_policy("jsq", env), seed=3)
    assert np.array_equal(env.unwrapped.arrivals, arrivals)
    assert set(first) == set(METRICS) and 0 < first["accuracy"] <= 1
    assert first["total_j_per_request"] == pytest.approx(first["active_j_per_request"] + first["idle_j_per_request"])


def test_verdicts_find_a_real_difference_and_no_claim_for_noise():
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(12):
        base = {m: rng.normal(1.0, 0.05) for m in METRICS}
        rows.append({"policy": "ref", "seed": seed, **base})
        rows.append({"policy": "better", "seed": seed, **{**base, "accuracy": base["accuracy"] + 0.2 + rng.normal(0, 0.01)}})
        rows.append({"policy": "same", "seed": seed, **{m: v + rng.normal(0, 0.05) for m, v in base.items()}})
    result = summarise(pd.DataFrame(rows), "ref", n_resamples=500)
    verdict = result.verdicts.set_index(["policy", "metric"])["verdict"]
    assert verdict[("better", "accuracy")] == "above"
    assert verdict[("same", "accuracy")] == "no claim"


@pytest.mark.slow
def test_serve_command_writes_the_table(tmp_path, data_dir):
    out = tmp_path / "serve"
    cmd = [sys.executable, "-m", "routing_gym", "serve", "--episodes", "2", "--episode-length", "40", "--rate", "4",
           "--policies", "jsq", "po2", "agent:per-benchmark", "ppo", "--ppo-timesteps", "512", "--resamples", "50",
           "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    table = (out / "table.md").read_text()
    for name in ("jsq", "po2", "agent:per-benchmark", "ppo", "p95_latency_s"):
        assert f"| {name} |" in table
    episodes = pd.read_csv(out / "episodes.csv")
    assert len(episodes) == 8 and set(METRICS) <= set(episodes.columns)
