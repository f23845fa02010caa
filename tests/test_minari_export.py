"""A Minari round trip on a small tournament, and OPE on the exported dataset = OPE on the tournament."""

from __future__ import annotations

import subprocess
import sys

import minari
import numpy as np
import pandas as pd
import pytest

from conftest import make_tournament
from routing_gym.envs import DEFAULT_COEFFICIENTS, Reward
from routing_gym.eval.offline.dataset import OPE_METRICS, export_minari, logged_data, logging_probabilities
from routing_gym.eval.offline.ope import ope_trials, simulate_log
from routing_gym.tournament import save_tournament

REWARD = Reward("gated_rank", dict(DEFAULT_COEFFICIENTS))


@pytest.fixture
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path / "minari"


def test_round_trip_keeps_episodes_actions_rewards_and_infos(minari_dir):
    t = make_tournament(120, 4, seed=2)
    rows = t.split_rows("test")
    dataset = export_minari(t, "toy/uniform-v0", "uniform", seed=5)
    back = minari.load_dataset("toy/uniform-v0")
    assert back.total_episodes == len(rows) and back.total_steps == len(rows)
    probs = logging_probabilities(t, rows, "uniform", REWARD, 0.2, 5)
    matrix = REWARD.matrix(t, rows)
    expected = simulate_log(np.stack([matrix, t.correct[rows], t.energy_j[rows]], axis=-1), probs, np.random.default_rng(5))
    for i, ep in enumerate(back.iterate_episodes()):
        a = int(expected.actions[i])
        assert ep.actions.tolist() == [a]
        assert ep.rewards.tolist() == [pytest.approx(matrix[i, a])]
        assert ep.terminations.tolist() == [True] and ep.truncations.tolist() == [False]
        assert ep.observations["text"] == [t.prompts[rows[i]]] * 2
        assert ep.observations["benchmark"].tolist() == [int(t.benchmark_codes[rows[i]])] * 2
        info = {k: v[-1] for k, v in ep.infos.items()}
        assert int(info["row"]) == rows[i] and info["propensity"] == pytest.approx(0.25)
        for key in ("correct", "energy_j", "latency_s", "mean_power_w"):
            assert np.array_equal(info[key], getattr(t, key)[rows[i]]), key
        assert np.allclose(info["reward"], matrix[i])
    assert back.storage.metadata["routing_gym"]["fingerprint"] == t.fingerprint
    assert dataset.spec.observation_space == back.spec.observation_space


def test_ope_on_the_exported_dataset_equals_ope_on_the_tournament(minari_dir):
    t = make_tournament(160, 4, seed=4)
    rows = t.split_rows("test")
    seed = 3
    export_minari(t, "toy/eps-v0", "per-benchmark", seed=seed, epsilon=0.3)
    offline = logged_data(minari.load_dataset("toy/eps-v0"))
    assert np.array_equal(offline.rows, rows)
    probs = logging_probabilities(t, rows, "per-benchmark", REWARD, 0.3, seed)
    assert offline.log.propensities.min() == pytest.approx(0.3 / 4)  # epsilon-greedy: every model has support
    values = {m: v for m, v in offline.values.items()}
    assert list(values) == list(OPE_METRICS)
    features = np.column_stack([np.eye(len(t.benchmarks))[t.benchmark_codes[rows]], np.ones(len(rows))])
    targets = {"always m1": np.full(len(rows), 1), "per-benchmark probs": probs}
    on_tournament = ope_trials({"reward": REWARD.matrix(t, rows), "correct": t.correct[rows], "energy_j": t.energy_j[rows]},
                               features, targets, probs, seeds=[seed])
    on_dataset = ope_trials(values, features, targets, probs, seeds=[seed], logged={seed: offline.log})
    pd.testing.assert_frame_equal(on_tournament, on_dataset)
    assert (on_dataset["error"].abs() > 0).any()  # estimates, not the exact values copied


def test_cli_writes_a_dataset_minari_reads(minari_dir, tmp_path):
    t = make_tournament(80, 3, seed=1)
    save_tournament(t, tmp_path / "toy")
    env = {"MINARI_DATASETS_PATH": str(minari_dir), "OMP_NUM_THREADS": "1", "PATH": ""}
    result = subprocess.run([sys.executable, "-m", "routing_gym", "data", "export", str(tmp_path / "toy"), "--format",
                             "minari", "--out", "toy/cli-v0", "--observation", "features"],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    back = minari.load_dataset("toy/cli-v0")
    assert back.total_episodes == len(t.split_rows("test"))
    assert back[0].observations.shape[0] == 2 and back[0].observations.ndim == 2  # the Box features, T + 1 rows
    assert back.recover_environment().unwrapped.tournament.fingerprint == t.fingerprint
    again = subprocess.run([sys.executable, "-m", "routing_gym", "data", "export", str(tmp_path / "toy"), "--format",
                            "minari", "--out", "toy/cli-v0", "--policy", "no-such-agent"], capture_output=True, text=True,
                           env=env, timeout=600)
    # an existing dataset is an output that cannot be written: a usage error before any work
    assert again.returncode == 2 and "already exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("dataset_id", ["afile", "toy/no-version", "bad id-v0"])
def test_cli_refuses_a_malformed_id_before_writing_anything(dataset_id, minari_dir, tmp_path):
    save_tournament(make_tournament(40, 3, seed=1), tmp_path / "toy")
    env = {"MINARI_DATASETS_PATH": str(minari_dir), "OMP_NUM_THREADS": "1", "PATH": ""}
    result = subprocess.run([sys.executable, "-m", "routing_gym", "data", "export", str(tmp_path / "toy"), "--format",
                             "minari", "--out", dataset_id], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and f"Minari dataset id {dataset_id!r}: expected (namespace/)name-vN" in result.stderr
    assert not minari_dir.exists() or not any(minari_dir.iterdir())


def test_a_failed_export_leaves_nothing_behind(minari_dir, monkeypatch):
    from minari.dataset.minari_storage import MinariStorage

    def fail(*args, **kwargs):  # after Minari made the dataset and namespace folders
        raise OSError("disk full")

    monkeypatch.setattr(MinariStorage, "new", fail)
    with pytest.raises(OSError, match="disk full"):
        export_minari(make_tournament(40, 3, seed=1), "fresh-space/toy-v0")
    assert not any(minari_dir.iterdir())  # neither the dataset nor the namespace it created
