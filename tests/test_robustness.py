"""Verdict robustness: the same actions re-priced under other energy laws."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from routing_gym.eval.core.robustness import (
    BELOW,
    INDISTINGUISHABLE,
    ON_HULL,
    ROUTES,
    energy_under_laws,
    verdict_robustness,
)
from routing_gym.eval.core.stats import BootstrapPlan

from conftest import make_tournament

N = 4000
MODELS = ["small", "mid", "large"]
ACCURACY = (0.50, 0.658, 0.80)  # mid sits 2.5 pp above the small-large chord at 50 J ...
JOULES_PER_TOKEN = (0.10, 0.50, 1.00)  # ... and 2.5 pp below it at 65 J (30 % more per token)
TOKENS = 100.0


def hand_made_pool() -> tuple[np.ndarray, np.ndarray]:
    """Nested correctness (a query a smaller model answers, every larger one answers too), so
    accuracy differences between models carry little resampling noise."""
    u = np.random.default_rng(0).permutation(N) / N
    correct = np.column_stack([(u < a).astype(float) for a in ACCURACY])
    energy = np.tile(np.array(JOULES_PER_TOKEN) * TOKENS, (N, 1))
    return correct, energy


def test_a_30_percent_error_on_one_model_flips_a_vertex_and_only_the_verdicts_that_depend_on_it():
    correct, energy = hand_made_pool()
    wrong = energy.copy()
    wrong[:, 1] *= 1.3  # the mid model's per-token joules 30 % higher under the other law
    oracle = np.where(correct[:, 0] > 0, 0, 2)  # small where it is right, else large: routes under both laws
    actions = {
        "always small": np.zeros(N, int), "always mid": np.ones(N, int), "always large": np.full(N, 2),
        "router": np.stack([oracle, oracle]),  # two seeds
        "mid-agent": np.ones((2, N), int),  # an agent that learned to send everything to mid
        "small-agent": np.zeros((1, N), int),
    }
    fixed = {"always small": 0, "always mid": 1, "always large": 2}
    laws = {"measured": energy, "law": wrong}
    result = verdict_robustness(correct, laws, actions, MODELS, BootstrapPlan(N, 200, seed=1), fixed=fixed,
                                train=(correct, laws))
    assert result.per_law["measured"].hull_models == ["small", "mid", "large"]
    assert result.per_law["law"].hull_models == ["small", "large"]
    assert result.per_law["measured"].verdicts["always mid"] == ON_HULL
    assert result.per_law["law"].verdicts["always mid"] == BELOW  # off the law's chain, and below it
    assert result.per_law["measured"].verdicts["mid-agent"] == INDISTINGUISHABLE
    assert result.per_law["law"].verdicts["mid-agent"] == BELOW
    point, low, high = result.per_law["law"].gain_pp["mid-agent"]
    assert point == pytest.approx(100 * (0.658 - (0.5 + 0.3 * (65 - 10) / 90)), abs=0.05)
    assert high < 0
    assert {m: result.per_law[law].verdicts[m] for law in ("measured", "law") for m in ("router",)} == {"router": ROUTES}
    assert result.fragile == ["always mid", "mid-agent"]  # exactly the verdicts that depend on mid's joules
    table = "\n".join(result.markdown_lines())
    assert "| mid-agent | indistinguishable (+0.0) | below (-2.5) | **no** |" in table
    assert "hull under law: small → large" in table
    assert result.to_dict()["methods"][3] == {
        "method": "router", "robust": True, "verdict_measured": ROUTES, "verdict_law": ROUTES,
        "gain_pp_measured": pytest.approx(result.per_law["measured"].gain_pp["router"][0]),
        "gain_pp_law": pytest.approx(result.per_law["law"].gain_pp["router"][0])}


def test_identical_laws_make_every_verdict_robust_and_invalid_actions_cost_nothing():
    correct, energy = hand_made_pool()
    invalid = np.full(N, -1)
    laws = {"a": energy, "b": energy.copy()}
    result = verdict_robustness(correct, laws, {"broken": invalid, "mid": np.ones(N, int)}, MODELS, BootstrapPlan(N, 50),
                                train=(correct, laws))
    assert all(result.robust.values())
    # an invalid action is wrong and costs 0 J: the yardstick's null policy itself, a gain of exactly 0
    assert result.per_law["a"].gain_pp["broken"] == (0.0, 0.0, 0.0)


def test_energy_under_laws_reprices_from_tokens_and_needs_every_model():
    t = make_tournament(n=30, k=3)
    assert energy_under_laws(t, np.arange(t.n_queries)) == {}  # no alternatives recorded
    serving = [{"energy_alternatives": {"x": {"joules_per_output_token": 0.1 * (k + 1), "prefill_joules_per_input_token": 0.01},
                                        "y": {"joules_per_output_token": 1.0, "prefill_joules_per_input_token": 0.0}}}
               for k in range(3)]
    models = t.models.copy()
    models["serving"] = serving
    t2 = replace(t, models=models)
    rows = np.arange(5, 15)
    laws = energy_under_laws(t2, rows)
    assert sorted(laws) == ["x", "y"]
    np.testing.assert_allclose(laws["x"][:, 2], t.output_tokens[rows, 2] * 0.3 + t.input_tokens[rows, 2] * 0.01)
    np.testing.assert_allclose(laws["y"], t.output_tokens[rows])
    serving[1] = {"energy_alternatives": {"x": serving[0]["energy_alternatives"]["x"]}}  # model 1 lacks law y
    models["serving"] = serving
    assert sorted(energy_under_laws(replace(t, models=models), rows)) == ["x"]


def test_compare_reports_each_verdict_under_every_recorded_law(tmp_path):
    from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs

    t = make_tournament(n=400, k=3, seed=2)
    models = t.models.copy()  # per-token joules rising with the model index under "up", falling under "down"
    models["serving"] = [{"energy_alternatives": {
        "up": {"joules_per_output_token": 0.1 * (j + 1), "prefill_joules_per_input_token": 0.0},
        "down": {"joules_per_output_token": 0.1 * (3 - j), "prefill_joules_per_input_token": 0.0}}} for j in range(3)]
    t = replace(t, models=models)
    result = run_compare(CompareConfig(tournament=t, agents=["random", "fixed-smallest"], seeds=2, n_bootstrap=100,
                                       progress=False))
    summary = result.pareto["robustness"]
    assert summary["laws"] == ["down", "up"]
    rows = result.test_rows
    train = t.split_rows("train")
    expected = verdict_robustness(t.correct[rows], energy_under_laws(t, rows),
                                  {r.method: r.per_query["actions"] for r in result.runs if r.seed in (None, 0)},
                                  t.model_ids, BootstrapPlan(len(rows), 100),
                                  train=(t.correct[train], energy_under_laws(t, train)))
    # under "down" the largest model is the cheapest: the chain starts there, under "up" it never reaches it first
    assert summary["hull_models"] == {law: expected.per_law[law].hull_models for law in ("down", "up")}
    assert summary["hull_models"]["down"][0] == "m2" and summary["hull_models"]["up"][0] != "m2"
    by_method = {row["method"]: row for row in summary["methods"]}
    first_up = summary["hull_models"]["up"][0]
    assert by_method[f"always {first_up}"]["verdict_up"] == ON_HULL
    assert by_method[f"always {first_up}"]["verdict_down"] != ON_HULL
    assert result.row(f"always {first_up}")["verdict_robust_across_energy_laws"] is False
    out = write_outputs(result, tmp_path, plots=False)
    assert "## Verdicts under other energy laws" in out["table.md"].read_text()
    assert "verdict_robust_across_energy_laws" in pd.read_csv(out["summary.csv"]).columns
