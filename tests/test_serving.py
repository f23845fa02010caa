"""The batch-curve table reader and the serving simulator's bookkeeping (issue 62)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from routing_gym.serving.curves import COLUMNS, BatchCurveError, read_batch_curves
from routing_gym.serving.physics import fit_physics
from routing_gym.serving.simulator import ServingSimulator


def curve_rows(model: str = "m", batches=(1, 8, 64)) -> pd.DataFrame:
    b = np.asarray(batches, float)
    return pd.DataFrame({"model_id": model, "gpu": "H100 80GB HBM3", "n_gpus": 1, "batch_size": b.astype(int),
                         "time_per_output_token_s": 0.01 + 0.001 * b, "power_w": 200 + b,
                         "energy_per_request_j": 100.0 / np.sqrt(b), "output_tokens_mean": 100.0,
                         "provenance": "measured", "source": "test"})


def test_reader_round_trips_csv_and_jsonl(tmp_path):
    rows = curve_rows()
    rows.to_csv(tmp_path / "c.csv", index=False)
    rows.to_json(tmp_path / "c.jsonl", orient="records", lines=True)
    for name in ("c.csv", "c.jsonl"):
        table = read_batch_curves(tmp_path / name)
        assert list(table.columns) == [*COLUMNS, "idle_power_w"] and table["idle_power_w"].isna().all()
        assert table["batch_size"].tolist() == [1, 8, 64]


@pytest.mark.parametrize("column, value, message", [
    ("batch_size", 0, "row 2, column batch_size"),
    ("time_per_output_token_s", -1.0, "row 2, column time_per_output_token_s"),
    ("provenance", "guessed", "row 2, column provenance"),
    ("power_w", "abc", "row 2, column power_w"),
])
def test_reader_names_file_row_and_column(tmp_path, column, value, message):
    rows = curve_rows().astype({column: object})
    rows.loc[1, column] = value
    rows.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(BatchCurveError, match=message) as err:
        read_batch_curves(tmp_path / "bad.csv")
    assert "bad.csv" in str(err.value)


def test_reader_names_a_missing_column(tmp_path):
    curve_rows().drop(columns=["power_w"]).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(BatchCurveError, match="c.csv: missing column.*power_w"):
        read_batch_curves(tmp_path / "c.csv")


def test_fit_is_monotone_between_points_and_passes_through_them():
    physics = fit_physics(curve_rows(), max_batch=128)
    assert physics.tpot_s[8] == pytest.approx(0.018) and physics.joules_per_token[64] == pytest.approx(1 / 8)
    assert np.all(np.diff(physics.tpot_s[1:65]) > 0) and np.all(np.diff(physics.joules_per_token[1:65]) < 0)
    assert physics.tpot_s[128] == physics.tpot_s[64]  # beyond the last point: its value
    assert physics.provenance == "measured" and physics.idle_power_w == 65.0


def test_energy_is_conserved_and_full_replicas_queue():
    physics = fit_physics(curve_rows(), max_batch=4)
    sim = ServingSimulator([physics, physics], replicas=[1, 2])
    rng = np.random.default_rng(0)
    done = []
    for i in range(300):
        done += sim.submit(i * 0.05, int(rng.integers(0, 2)), 0.0, float(rng.integers(20, 200)))[1]
        assert max(sim.batch) <= 4
    assert sum(len(q) for q in sim.queues) > 0 or sim.completed < 300
    done += sim.drain()
    assert sorted(c.request for c in done) == list(range(300))
    assert sum(c.energy_j for c in done) == pytest.approx(sim.active_energy_j, rel=1e-9)
    assert sim.idle_energy_j > 0 and all(c.latency_s > 0 for c in done)


def test_load_free_mode_returns_the_given_outcomes():
    physics = fit_physics(curve_rows())
    sim = ServingSimulator([physics], load_free=True)
    done = []
    for i in range(5):
        done += sim.submit(float(i), 0, 10.0, 10.0, latency_s=2.5, energy_j=7.0 + i)[1]
    done += sim.drain()
    assert [c.energy_j for c in done] == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert all(c.latency_s == 2.5 for c in done)
