"""The task-aware hull (benchmark-label-only routes and their mixes) and content gain."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import text_skill_tournament, two_skill_tournament
from test_bandits import COEF

from routing_gym.envs import Reward
from routing_gym.eval.core.stats import BootstrapPlan
from routing_gym.fronts import hull as H
from routing_gym_agents import FitContext, ObservationBatch, make_agent

# Two benchmarks of 10 queries each; per benchmark (accuracy, joules) of three models:
#   A: m0 (0.8, 10 J), m1 (0.3, 20 J), m2 (0.9, 100 J)
#   B: m0 (0.2, 10 J), m1 (0.7, 20 J), m2 (0.9, 100 J)
RATES = {0: (0.8, 0.3, 0.9), 1: (0.2, 0.7, 0.9)}
JOULES = np.array([10.0, 20.0, 100.0])


def content_gain(fixed_j, fixed_acc, task_j, task_acc, method_j, method_acc):
    """Gain over the hull of the given fixed-model and route points (the geometry the yardstick's chain is chosen with)."""
    return H.routing_gain(*H.task_aware_points(fixed_j, fixed_acc, task_j, task_acc), method_j, method_acc)


def two_benchmarks() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes = np.repeat([0, 1], 10)
    correct = np.zeros((20, 3))
    for b, rates in RATES.items():
        for m, rate in enumerate(rates):
            rows = np.flatnonzero(codes == b)[: round(10 * rate)]
            correct[rows, m] = 1.0
    return correct, np.tile(JOULES, (20, 1)), codes


def test_task_routes_and_vertices_of_a_hand_made_two_benchmark_tournament():
    correct, energy, codes = two_benchmarks()
    routes = H.task_routing(correct, energy, codes, 2)
    # lambda = 0: the most accurate per benchmark; then A leaves m2 (slope 0.1/90), B leaves m2
    # (0.2/80), B leaves m1 (0.5/10): four routes, the switches at those slopes.
    assert routes.choices.tolist() == [[2, 2], [0, 2], [0, 1], [0, 0]]
    assert np.allclose(routes.lambda_low, [0.0, 0.1 / 90, 0.2 / 80, 0.5 / 10])
    assert np.allclose(routes.lambda_high[:-1], routes.lambda_low[1:]) and routes.lambda_high[-1] == np.inf
    task_acc, task_j = routes.per_query(correct, codes).mean(axis=0), routes.per_query(energy, codes).mean(axis=0)
    assert np.allclose(task_acc, [0.9, 0.85, 0.75, 0.5]) and np.allclose(task_j, [100.0, 55.0, 15.0, 10.0])
    fixed_acc, fixed_j = correct.mean(axis=0), energy.mean(axis=0)  # (0.5, 10), (0.5, 20), (0.9, 100)
    points_j, points_acc = H.task_aware_points(fixed_j, fixed_acc, task_j, task_acc)
    hull = H.fixed_model_hull(points_j, points_acc)
    assert list(zip(hull.energy_j.tolist(), hull.accuracy.tolist())) == [(10.0, 0.5), (15.0, 0.75), (55.0, 0.85), (100.0, 0.9)]
    assert H.fixed_model_hull(fixed_j, fixed_acc).vertex_index.tolist() == [0, 2]
    # a method at 15 J and 70 %: 24.4 pp above mixing fixed models, 5 pp below benchmark routing
    assert H.routing_gain(fixed_j, fixed_acc, 15.0, 0.70) == pytest.approx(0.70 - (0.5 + 0.4 * 5 / 90))
    assert content_gain(fixed_j, fixed_acc, task_j, task_acc, 15.0, 0.70) == pytest.approx(-0.05)
    assert content_gain(fixed_j, fixed_acc, task_j, task_acc, 35.0, 0.85) == pytest.approx(0.85 - 0.80)


def test_equals_the_fixed_model_hull_on_one_benchmark():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(1, 8))
        train_c, test_c = (rng.uniform(size=(40, k)) < rng.uniform(0, 1, k)).astype(float), rng.uniform(size=(30, k))
        train_j, test_j = rng.gamma(2.0, rng.uniform(1, 50, k), (40, k)), rng.gamma(2.0, rng.uniform(1, 50, k), (30, k))
        routes = H.task_routing(train_c, train_j, np.zeros(40, int), 1)
        assert (routes.choices[:, :1] == routes.choices).all()  # one benchmark: every route is a fixed model
        task_acc = routes.per_query(test_c, np.zeros(30, int)).mean(axis=0)
        task_j = routes.per_query(test_j, np.zeros(30, int)).mean(axis=0)
        fixed_acc, fixed_j = test_c.mean(axis=0), test_j.mean(axis=0)
        grid = np.linspace(0, 120, 61)
        np.testing.assert_allclose(content_gain(fixed_j, fixed_acc, task_j, task_acc, grid, 0.5),
                                   H.routing_gain(fixed_j, fixed_acc, grid, 0.5), atol=1e-12)


def test_task_aware_hull_broadcasts_over_resamples_and_never_lies_below_the_fixed_hull():
    rng = np.random.default_rng(2)
    fixed_j, fixed_acc = rng.uniform(1, 100, (40, 4)), rng.uniform(0, 1, (40, 4))
    task_j, task_acc = rng.uniform(1, 100, (40, 6)), rng.uniform(0, 1, (40, 6))
    method_j, method_acc = rng.uniform(0, 110, 40), rng.uniform(0, 1, 40)
    batched = content_gain(fixed_j, fixed_acc, task_j, task_acc, method_j, method_acc)
    assert batched.shape == (40,)
    one_by_one = [content_gain(fixed_j[b], fixed_acc[b], task_j[b], task_acc[b], method_j[b], method_acc[b]) for b in range(40)]
    np.testing.assert_allclose(batched, one_by_one)
    # more points to mix: never lower, wherever a fixed mix exists (below the cheapest fixed
    # model both hulls compare with an end point instead, and those may differ)
    within = method_j >= fixed_j.min(axis=1)
    assert within.sum() > 30
    assert (batched <= H.routing_gain(fixed_j, fixed_acc, method_j, method_acc) + 1e-12)[within].all()


def test_benchmark_means_fall_back_to_every_row_for_an_unseen_benchmark():
    values = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    means = H.benchmark_means(values, np.array([0, 0, 2]), 4)
    np.testing.assert_allclose(means, [[0.5, 0.5], [2 / 3, 2 / 3], [1.0, 1.0], [2 / 3, 2 / 3]])
    with pytest.raises(ValueError, match="benchmark codes"):
        H.benchmark_means(values, np.array([0, 0, 5]), 4)
    # ties go to the cheaper model
    assert H.best_per_benchmark(np.array([[0.5, 0.5, 0.4]]), np.array([[30.0, 20.0, 10.0]])).tolist() == [1]


def _resampled_gains(t, actions: np.ndarray, n_bootstrap: int = 1000) -> tuple[float, float, float, float]:
    """Content gain and routing gain of test actions, with paired 95 % bootstrap intervals:
    the routes are chosen on train, every hull point recomputed per resample."""
    train, test = t.split_rows("train"), t.split_rows("test")
    routes = H.task_routing(t.correct[train], t.energy_j[train], t.benchmark_codes[train], len(t.benchmarks))
    codes = t.benchmark_codes[test]
    correct, energy = t.correct[test], t.energy_j[test]
    n, k, p = len(test), t.n_models, len(routes)
    picked_c, picked_j = correct[np.arange(n), actions], energy[np.arange(n), actions]
    block = np.column_stack([correct, energy, routes.per_query(correct, codes), routes.per_query(energy, codes), picked_c, picked_j])
    boot = BootstrapPlan(n, n_bootstrap, seed=0).means(block)
    fixed_acc, fixed_j = boot[:, :k], boot[:, k:2 * k]
    task_acc, task_j = boot[:, 2 * k:2 * k + p], boot[:, 2 * k + p:2 * k + 2 * p]
    content = content_gain(fixed_j, fixed_acc, task_j, task_acc, boot[:, -1], boot[:, -2])
    point = content_gain(energy.mean(0), correct.mean(0), routes.per_query(energy, codes).mean(0),
                           routes.per_query(correct, codes).mean(0), picked_j.mean(), picked_c.mean())
    routing = H.routing_gain(energy.mean(0), correct.mean(0), picked_j.mean(), picked_c.mean())
    low, high = np.percentile(content, [2.5, 97.5])
    return float(point), float(low), float(high), float(routing)


def _route(name: str, t, **kwargs):
    agent = make_agent(name, **kwargs)
    agent.fit(FitContext(t, Reward("gated_rank", COEF), seed=0))
    return agent.act_batch(ObservationBatch.from_tournament(t, t.split_rows("test")))


def test_a_per_benchmark_router_routes_but_has_no_content_gain():
    t = two_skill_tournament(n=1200, n_benchmarks=4)
    routing = {}
    for mu in (None, 0.0, 0.3, 5.0):
        point, low, high, routing[mu] = _resampled_gains(t, _route("per-benchmark", t, mu=mu))
        assert low <= 0 <= high + 1e-12 and abs(point) < 0.01, (mu, point, low, high)
    assert routing[None] > 0.3  # the default beats mixing fixed models by far: all of it is task routing


def test_a_router_reading_a_feature_that_predicts_correctness_within_a_benchmark_has_content_gain():
    # Within each benchmark, half the questions say "arith" and half "trivia": the skill that
    # decides which model is right is in the text, not in the benchmark label.
    t = text_skill_tournament()
    kw_actions = np.where(["arith" in text for text in t.queries["prompt"].to_numpy()[t.split_rows("test")]], 0, 1)
    point, low, high, routing = _resampled_gains(t, kw_actions)
    assert low > 0.2 and point > 0.3 and routing >= point - 1e-12
    # a real learned router finds the word: knn on TF-IDF features
    point, low, high, _ = _resampled_gains(t, _route("knn", t))
    assert low > 0.1
    # and the per-benchmark router, which cannot see it, gains nothing on this tournament
    point, low, high, _ = _resampled_gains(t, _route("per-benchmark", t))
    assert low <= 0 <= high + 1e-12


def test_compare_reports_content_gain_and_says_when_the_benchmark_label_explains_a_gain(tmp_path):
    from routing_gym.eval.compare import CompareConfig, resolve_agent_names, run_compare, write_outputs

    assert "per-benchmark" in resolve_agent_names(None)
    config = CompareConfig(tournament=two_skill_tournament(n=900, n_benchmarks=4), agents=["per-benchmark", "knn"], seeds=1,
                           n_bootstrap=300, progress=False)
    result = run_compare(config)
    row = result.row("per-benchmark")
    assert row["routing_gain_pp_ci_low"] > 10  # far above mixing fixed models ...
    assert row["content_gain_pp_ci_low"] <= 0 <= row["content_gain_pp_ci_high"] and abs(row["content_gain_pp"]) < 1  # ... by the label alone
    fixed = [r for r in result.rows if r["kind"] == "fixed-model"]
    assert all(r["content_gain_pp"] <= r["routing_gain_pp"] + 1e-9 for r in fixed)
    task_hull = result.pareto["task_hull"]
    assert any(v.startswith(H.TASK_ROUTE_PREFIX) for v in task_hull["vertices"]) and task_hull["routes"]
    paths = write_outputs(result, tmp_path / "label")
    table = paths["table.md"].read_text()
    assert "Content gain pp [95% CI]" in table
    assert "- task routing only" in table and "per-benchmark's routing gain" in table and "explained by the benchmark label" in table
    assert "content_gain_pp_ci_low" in paths["summary.csv"].read_text().splitlines()[0]
    assert "task_hull" in paths["results.json"].read_text()

    result = run_compare(CompareConfig(tournament=text_skill_tournament(n=900), agents=["per-benchmark", "knn"], seeds=1,
                                       n_bootstrap=300, progress=False))
    assert result.row("knn")["content_gain_pp_ci_low"] > 10
    table = write_outputs(result, tmp_path / "text", plots=False)["table.md"].read_text()
    assert "- routes beyond the task label (content gain above 0): knn" in table
    assert result.row("knn")["content_gain_pp_fw"] == "above"  # the family-wise rule decides the line
