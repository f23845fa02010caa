"""``routing-gym headroom``: on procedural pools whose answer is known (topics in the text decide
the winner, or nothing does) the pairwise AUC tells them apart, the ladder is ordered, the
outputs hold their keys, and bad input fails with a clear message and the right exit status."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from routing_gym.errors import UsageError
from routing_gym.eval.headroom import routability
from routing_gym.eval.headroom import (
    RUNGS, HeadroomConfig, Rung, Scorer, leak_free_ceiling, match_budget, privileged_ladder, run_headroom, shared_difficulty_p,
    train_curve,
)
from routing_gym.eval.headroom.report import write_headroom_outputs
from routing_gym.sources.synthetic import generate, preset_config

from conftest import make_tournament

SMALL_ROUTER = {"cost-aware": {"dim": 16}}  # for the CLI run, where only the plumbing is checked


@pytest.fixture(scope="module")
def pools():
    """The same specialist pool with topics deciding the winner (1.0) and with them off (0.0)."""
    return {s: generate(preset_config("specialist-pool", n_queries=3000, seed=5, specialization_signal=s))
            for s in (1.0, 0.0)}


@pytest.fixture(scope="module")
def results(pools):
    return {s: run_headroom(HeadroomConfig(tournament=t, routers=["cost-aware", "mf"], n_bootstrap=300, whole_seeds=2,
                                           progress=False)) for s, t in pools.items()}


def test_pairwise_auc_is_high_where_topics_decide_the_winner_and_chance_where_nothing_does(results):
    on, off = results[1.0].scorer_auc["cost-aware"], results[0.0].scorer_auc["cost-aware"]
    assert on["pairwise_auc"] > 0.85, on["pairwise_auc"]
    assert abs(off["pairwise_auc"] - 0.5) < 0.06, off["pairwise_auc"]
    # the text still says how hard a question is in both (text_signal), so within-benchmark AUC is above chance
    assert on["within_benchmark_auc"] > 0.55 and off["within_benchmark_auc"] > 0.55
    # label-only scorers order nothing within a benchmark
    for name in ("fixed_model_hull", "task_aware_hull"):
        assert results[1.0].scorer_auc[name]["within_benchmark_auc"] == pytest.approx(0.5)
        assert results[1.0].scorer_auc[name]["pairwise_auc"] == pytest.approx(0.5)
    assert results[1.0].generator["specialization_signal"] == 1.0
    assert results[0.0].generator["specialization_signal"] == 0.0


def test_the_ladder_is_ordered_and_the_content_rung_climbs_only_where_the_text_carries_the_winner(results):
    for s, r in results.items():
        gain = {n: r.rungs[n].stats["content_gain_pp"] for n in RUNGS}
        assert list(r.rungs) == list(RUNGS)
        assert gain["oracle"] >= gain["shared_difficulty"] - 1e-9 and r.rungs["oracle"].stats["ci"][0] > 0
        # a mix of the yardstick's own policies is never above their best mix on test (0 where it is that mix;
        # below where another pair of chain policies mixes better on test: the yardstick's small optimism)
        assert r.rungs["task_aware_hull"].stats["ci"][1] <= 1e-9 and r.rungs["task_aware_hull"].stats["ci"][0] > -3
        assert r.rungs["fixed_model_hull"].stats["ci"][0] <= 0
        for name, rung in r.rungs.items():  # every rung spends the budget on train, or less when it saturates
            assert rung.train_energy_j <= r.budget_j * (1 + 1e-9), name
        low, high = r.rungs["oracle"].stats["accuracy_ci"]
        assert low <= r.rungs["oracle"].stats["accuracy"] <= high
    on, off = results[1.0].rungs["content_router"].stats, results[0.0].rungs["content_router"].stats
    assert on["ci"][0] > 2.0, on  # reads the topic
    assert off["content_gain_pp"] < on["content_gain_pp"] - 5 and off["ci"][0] < 1.0, off
    steps = {s["to"]: s for s in results[1.0].steps}
    assert steps["content_router"]["ci"][0] > 0
    assert sum(c["share"] for c in results[1.0].oracle_lead["by_models_right"]) == pytest.approx(1.0)


def test_outputs_hold_the_documented_keys(results, tmp_path):
    r = results[1.0]
    paths = write_headroom_outputs(r, tmp_path)
    payload = json.loads(paths["headroom.json"].read_text())
    for name in ("task_aware_hull", "content_router", "shared_difficulty", "oracle"):
        rung = payload["rungs"][name]
        assert isinstance(rung["content_gain_pp"], float) and len(rung["ci"]) == 2 and rung["mean_j"] > 0
        assert rung["ci"][0] <= rung["content_gain_pp"] <= rung["ci"][1] + 1e-9
    best = r.best_router
    assert payload["within_benchmark_auc"] == r.scorer_auc[best]["within_benchmark_auc"]
    assert payload["pairwise_auc"] == r.scorer_auc[best]["pairwise_auc"]
    assert payload["rungs"]["content_router"]["router"] == best
    assert payload["generator"]["specialization_signal"] == 1.0
    assert paths["headroom.png"].stat().st_size > 10_000
    table = paths["table.md"].read_text()
    assert "specialization_signal = 1" in table and f"best content router: {best}" in table
    assert payload["whole_tournament"]["seeds"] == [0, 1] and payload["leak_free"]["crossing"]["pairwise_auc"] > 0
    assert "/" + "tmp" not in paths["headroom.json"].read_text()  # no machine paths in what gets committed


def test_match_budget_mixes_two_vertices_to_spend_the_budget_on_train():
    rng = np.random.default_rng(0)
    n, k = 400, 3
    correct = (rng.random((n, k)) < [0.3, 0.6, 0.8]).astype(float)
    energy = np.tile([1.0, 5.0, 20.0], (n, 1)) * rng.uniform(0.8, 1.2, (n, k))
    p = np.tile(correct.mean(axis=0), (n, 1))
    rung = Rung("fixed", Scorer(p, energy, p, energy))
    train_curve(rung, correct, energy, j_ref=20.0)
    match_budget(rung, correct, energy, j_ref=20.0, budget_j=8.0)
    assert rung.train_energy_j == pytest.approx(8.0) and 0 < rung.weight < 1
    assert rung.test_energy.mean() == pytest.approx(8.0)  # test = train here
    # beyond the costliest vertex the rung spends less (free disposal), not more
    match_budget(rung, correct, energy, j_ref=20.0, budget_j=1e6)
    assert rung.weight == 1.0 and rung.train_energy_j == pytest.approx(energy[:, 2].mean())


def test_shared_difficulty_map_learns_which_model_wins_at_each_share_per_benchmark():
    rng = np.random.default_rng(3)
    n = 3000
    share = rng.choice([0.0, 0.5, 1.0], n)  # two models: both wrong, exactly one right, both right
    codes = rng.integers(0, 2, n)
    # on benchmark 0 model 0 is the one right when only one is; on benchmark 1 model 1 is
    winner = np.where(codes == 0, 0, 1)
    correct = np.zeros((n, 2))
    correct[share == 1.0] = 1.0
    half = share == 0.5
    correct[half, winner[half]] = 1.0
    p = shared_difficulty_p(correct, codes, correct, codes, 2)
    assert (p[half & (codes == 0), 0] > 0.9).all() and (p[half & (codes == 0), 1] < 0.1).all()
    assert (p[half & (codes == 1), 1] > 0.9).all() and (p[share == 0.0] < 0.1).all() and (p[share == 1.0] > 0.9).all()
    # a benchmark the fit rows lack is mapped by the fit over all benchmarks
    unseen = shared_difficulty_p(correct[codes == 0], codes[codes == 0], correct[:50], np.full(50, 1), 2)
    assert unseen.shape == (50, 2) and np.isfinite(unseen).all()


def test_the_form_is_chosen_by_cross_fitted_log_loss_and_a_shared_shape_loses_where_benchmarks_disagree():
    from routing_gym.eval.headroom.forms import CROSSING_FORMS, SHARE_FORMS, SHARED_FORMS, choose_form

    rng = np.random.default_rng(3)
    n = 900
    share = rng.choice([0.0, 0.5, 1.0], n)
    codes = rng.integers(0, 2, n)
    winner = np.where(codes == 0, 0, 1)  # the model right at mid share depends on the benchmark
    correct = np.zeros((n, 2))
    correct[share == 1.0] = 1.0
    correct[share == 0.5, winner[share == 0.5]] = 1.0
    rows = np.arange(n)
    out_of_fold = {form: np.zeros_like(correct) for form in SHARE_FORMS}
    for held in (rows[i::3] for i in range(3)):
        fit = np.setdiff1d(rows, held)
        for form in SHARE_FORMS:
            out_of_fold[form][held] = shared_difficulty_p(correct[fit], codes[fit], correct[held], codes[held], 2, form=form)
    chosen, losses = choose_form(out_of_fold, correct)
    assert set(losses) == set(SHARE_FORMS) and chosen == min(SHARED_FORMS, key=losses.get)
    assert choose_form(out_of_fold, correct, CROSSING_FORMS)[0] == min(CROSSING_FORMS, key=losses.get)
    assert losses["pooled-spline"] > losses["spline"]  # one shape per model, only shifted by benchmark, fits worse
    # here the winner at mid share is model-specific: only a crossing map can learn it
    assert losses["spline"] < min(losses[f] for f in SHARED_FORMS)


@pytest.mark.parametrize("form", ["shared-linear", "shared-spline"])
def test_a_shared_shape_map_never_re_orders_models_within_a_benchmark(form):
    """logit P = a_bk + g_b(d): whatever the difficulty, the models keep one order per benchmark,
    even where the data say the winner flips with difficulty (a crossing map follows that flip)."""
    rng = np.random.default_rng(4)
    n = 1200
    share, codes = rng.uniform(0, 1, n), rng.integers(0, 2, n)
    p_true = np.column_stack([share, 1 - share])  # model 0 wins hard-for-others questions, model 1 the rest
    correct = (rng.uniform(size=(n, 2)) < p_true).astype(float)
    grid = np.linspace(0, 1, 11)
    rows_codes = np.repeat([0, 1], len(grid))
    p = shared_difficulty_p(correct, codes, np.zeros((2 * len(grid), 2)), rows_codes, 2, share, np.tile(grid, 2), form=form)
    for b in (0, 1):
        order = np.sign(p[rows_codes == b, 0] - p[rows_codes == b, 1])
        assert len(set(order.tolist())) == 1, (b, p[rows_codes == b])
    crossing = shared_difficulty_p(correct, codes, np.zeros((2 * len(grid), 2)), rows_codes, 2, share, np.tile(grid, 2),
                                   form="spline")
    assert len(set(np.sign(crossing[:, 0] - crossing[:, 1]).tolist())) == 2  # the crossing map re-orders them


def test_the_ceiling_is_reported_under_every_form_beside_the_chosen_one(results):
    for result in results.values():
        forms = result.forms
        from routing_gym.eval.headroom.forms import CROSSING_FORMS, SHARED_FORMS
        from routing_gym.eval.headroom.ladder import COMMON_J_POINTS

        assert forms["chosen"] in SHARED_FORMS and forms["crossing_chosen"] in CROSSING_FORMS and len(forms["forms"]) == 4
        chosen = forms["forms"][forms["chosen"]]
        # the ceiling: the step over the label rung averaged over one grid of joules fixed on train
        assert len(chosen["at_joules_pp"]) == len(forms["joules"]) == COMMON_J_POINTS
        assert chosen["step_over_label_pp"] == pytest.approx(np.mean(chosen["at_joules_pp"]))
        assert chosen["ci"][0] <= chosen["step_over_label_pp"] <= chosen["ci"][1]
        assert forms["range_pp"][0] <= chosen["step_over_label_pp"] <= forms["range_pp"][1]
        loss = {f: forms["forms"][f]["cross_fitted_log_loss"] for f in forms["forms"]}
        assert forms["chosen"] == min(SHARED_FORMS, key=loss.get)
        assert forms["crossing_chosen"] == min(CROSSING_FORMS, key=loss.get)
        assert result.scorer_auc["shared_difficulty"]["pairwise_auc"] < 0.6


def test_stratified_auc_matches_scikit_learn_per_group_and_pairwise_ignores_main_effects():
    rng = np.random.default_rng(1)
    scores, labels, groups = rng.normal(size=600).round(1), rng.random(600) < 0.4, rng.integers(0, 4, 600)
    per = routability.stratified_auc(scores, labels, groups)
    for g in range(4):
        mask = groups == g
        assert per.loc[g, "auc"] == pytest.approx(roc_auc_score(labels[mask], scores[mask]))
    # model 0 is better on every question it disagrees on with model 1 only by the benchmark label:
    # a P with a per-model offset but no per-question signal scores 0.5 pairwise
    n = 500
    correct = np.column_stack([rng.random(n) < 0.8, rng.random(n) < 0.4]).astype(float)
    p = np.tile([0.8, 0.4], (n, 1)) + rng.normal(0, 1e-3, (n, 2))
    pairs = routability.pairwise_auc(p, correct, np.zeros(n, dtype=int))
    assert abs(routability.pooled_auc(pairs) - 0.5) < 0.1
    assert routability.pooled_auc(routability.pairwise_auc(correct, correct, np.zeros(n, dtype=int))) == 1.0


def test_noise_floor_reads_options_in_every_recorded_form_and_copies_within_a_split():
    assert routability.option_count({"options": 10}) == 10
    assert routability.option_count({"options": ["a", "b", "c"]}) == 3
    assert routability.option_count({"choices": "{'text': ['1', '2'], 'labels': ['A', 'B']}"}) == 2
    assert routability.option_count({"choices": None}) is None and routability.option_count(None) is None
    queries = pd.DataFrame({"prompt": ["Q one", "q  ONE", "Q two", "Q one", "Q three"],
                            "benchmark": ["b"] * 5, "split": ["train", "train", "train", "test", "test"],
                            "metadata": [{"options": 4}, {"options": 4}, {}, {"options": 10}, {}]})
    correct = np.array([[1, 0], [0, 0], [1, 1], [1, 1], [0, 1]], dtype=float)
    floor = routability.noise_floor(queries, correct, np.arange(5))
    assert floor["guessing"]["multiple_choice"] == 3
    assert floor["guessing"]["guessing_rate"] == pytest.approx((0.25 + 0.25 + 0.1) / 3)
    # one group of copies within train (rows 0, 1); the copy in test is another split's
    assert floor["copies"]["groups"] == 1 and floor["copies"]["cells"] == 2 and floor["copies"]["disagreeing_cells"] == 1


def test_privileged_ladder_needs_no_router_and_agrees_with_the_full_run(pools, results):
    ladder = privileged_ladder(pools[1.0], HeadroomConfig(n_bootstrap=300))
    full = results[1.0]
    for name in ("task_aware_hull", "shared_difficulty", "oracle"):
        assert ladder["rungs"][name]["content_gain_pp"] == pytest.approx(full.rungs[name].stats["content_gain_pp"])
    assert ladder["budget_j"] == full.budget_j


def test_compare_report_has_a_headroom_section(pools):
    from routing_gym.eval.compare import CompareConfig, run_compare
    from routing_gym.eval.compare.report import markdown_report

    result = run_compare(CompareConfig(tournament=pools[0.0], agents=["per-benchmark"], seeds=1, n_bootstrap=200,
                                       progress=False, audit=False))
    table = markdown_report(result)
    assert "## Headroom: what reading the question could add" in table
    assert "routing-gym headroom specialist-pool" in table


def test_bad_settings_fail_before_any_fitting(pools):
    t = pools[0.0]
    with pytest.raises(UsageError, match="folds"):
        run_headroom(HeadroomConfig(tournament=t, folds=1))
    with pytest.raises(UsageError, match="no predict_correct"):
        run_headroom(HeadroomConfig(tournament=t, routers=["random"]))
    with pytest.raises(UsageError, match="unknown agent"):
        run_headroom(HeadroomConfig(tournament=t, routers=["cost-awre"]))
    with pytest.raises(UsageError, match="share queries"):
        run_headroom(HeadroomConfig(tournament=t, routers=["cost-aware"], test_split="train"))
    with pytest.raises(UsageError, match="budget"):
        run_headroom(HeadroomConfig(tournament=t, budget_j=-1.0))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "routing_gym", "headroom", *args], capture_output=True, text=True,
                          timeout=600)


def test_cli_writes_outputs_and_exits_by_the_one_rule(pools, tmp_path):
    small = pools[1.0].subset(rows=np.arange(600))
    folder = tmp_path / "pool"
    small.save(folder)
    out = tmp_path / "out"
    done = run_cli(str(folder), "--out", str(out), "--routers", "cost-aware", "--agent-kwargs", json.dumps(SMALL_ROUTER),
                   "--bootstrap", "100")
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"headroom.json", "table.md", "headroom.png"}
    assert "Headroom on" in done.stdout and "CPU" in done.stdout
    bad = run_cli(str(folder), "--routers", "random", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "predict_correct" in bad.stderr and not (tmp_path / "x").exists()
    assert run_cli(str(folder), "--folds", "0").returncode == 2
    unsplit = tmp_path / "unsplit"
    small.subset(rows=np.arange(100)).save(unsplit)
    queries = pd.read_parquet(unsplit / "queries.parquet").assign(split="")
    queries.to_parquet(unsplit / "queries.parquet")
    done = run_cli(str(unsplit), "--out", str(tmp_path / "y"))
    assert done.returncode == 2 and "no splits" in done.stderr
    broken = tmp_path / "broken"
    small.subset(rows=np.arange(100)).save(broken)
    outcomes = pd.read_parquet(broken / "outcomes.parquet")
    outcomes.loc[3, "correct"] = 7.0
    outcomes.to_parquet(broken / "outcomes.parquet")
    done = run_cli(str(broken), "--out", str(tmp_path / "z"))
    assert done.returncode == 1 and "correct" in done.stderr


def test_the_leak_free_ceiling_reads_no_routed_models_outcome():
    # Two cheap (10 J, 50 %) and two dear (100 J, 70 %) models, outcomes independent across models:
    # the share of the routed models right says which questions every candidate answers or none
    # does (send those to the cheap model: joules for free), the share of the other half says nothing.
    rng = np.random.default_rng(0)
    t = make_tournament(n=4000, k=4, seed=1)
    correct = (rng.random((4000, 4)) < np.array([0.5, 0.7, 0.5, 0.7])).astype(float)
    energy = np.tile([10.0, 100.0, 10.0, 100.0], (4000, 1))
    t = dataclasses.replace(t, correct=correct, energy_j=energy, mean_power_w=energy / t.latency_s)
    # at a budget between the two prices (one chosen from the data can land on an end, where no map routes differently)
    out = leak_free_ceiling(HeadroomConfig(tournament=t, n_bootstrap=300, budget_j=55.0), t, partitions=3)
    assert len(out["partitions"]) == 3
    for half in out["partitions"]:
        assert not set(half["candidates"]) & set(half["reference"])
        assert sorted(half["candidates"] + half["reference"]) == sorted(t.model_ids)
    assert out["inclusive"]["ci"][0] > 0  # the inclusive share leaks the candidates' outcomes
    assert out["leak_free"]["ci"][0] <= 0 and abs(out["leak_free"]["step_over_label_pp"]) < 1.5
    assert out["inclusive"]["step_over_label_pp"] > out["leak_free"]["step_over_label_pp"] + 0.5
    for half in out["partitions"]:  # every map read on the same grid of joules fixed on train
        grid = half["joules"]
        assert grid == sorted(grid) and all(len(half[n]["at_joules_pp"]) == len(grid) for n in ("leak_free", "inclusive"))


@pytest.mark.parametrize("shared", [0.0, 3.0])
def test_on_a_pool_whose_ceiling_is_known_the_leak_free_ceiling_lands_on_it_and_the_inclusive_one_above(shared):
    """``simulation.planted_pool``: outcomes independent across models (truth 0) or sharing a
    planted difficulty (truth: routing by the exact P given the reference models' outcomes)."""
    from routing_gym.eval.headroom.simulation import planted_pool

    t, known = planted_pool(4000, 8, shared, seed=1)
    out = leak_free_ceiling(HeadroomConfig(tournament=t, n_bootstrap=300), t, partitions=5, known=known)
    free, inclusive = out["leak_free"], out["inclusive"]
    assert free["minus_known_ci"][0] <= 0 <= free["minus_known_ci"][1], free  # unbiased: the truth inside, paired
    assert abs(free["minus_known_pp"]) < 0.6
    assert inclusive["minus_known_ci"][0] > 0.2, inclusive  # the candidates' own outcomes leak
    assert abs(free["pairwise_auc"] - 0.5) < 0.03
    if shared == 0.0:
        assert free["ci"][0] <= 0 <= free["ci"][1]
    else:
        assert out["known"]["ci"][0] > 0 and free["ci"][0] > 0


def test_the_folds_reuse_the_strength_the_fit_on_all_of_train_chose(pools, monkeypatch):
    """A nested router chooses its strength once, on all of train; every fold is fitted with that
    choice fixed, and the choice is recorded (issue 48: folds and final fit disagreed)."""
    import routing_gym_agents

    from routing_gym.eval.headroom.ladder import grouped_folds
    from routing_gym.eval.headroom.routers import router_scorer

    made: list[dict] = []
    real = routing_gym_agents.make_agent

    def recording(name, **kwargs):
        made.append(dict(kwargs))
        return real(name, **kwargs)

    monkeypatch.setattr(routing_gym_agents, "make_agent", recording)
    t = pools[1.0]
    config = HeadroomConfig(tournament=t, routers=["mf"], agent_kwargs={"mf": {"dim": 16}}, progress=False)
    train_rows, test_rows = t.split_rows(config.train_split), t.split_rows(config.test_split)
    folds = grouped_folds(t, train_rows, 3, seed=0)
    scorer = router_scorer("mf", t, config.seed, config.agent_kwargs["mf"], train_rows, folds, test_rows)
    assert len(made) == 4 and "strength" not in made[0]  # the fit on all of train chooses
    chosen = made[1]["strength"]
    assert all(m["strength"] == chosen for m in made[1:])
    assert scorer.fit_info["strength"] == ("label only" if np.isinf(chosen) else chosen)


def test_a_curve_is_read_between_its_two_knob_values_around_the_joules():
    from routing_gym.eval.headroom.ladder import chain_slope_at, curve_accuracy_at

    curve_j, curve_acc = np.array([10.0, 20.0, 40.0]), np.array([0.5, 0.7, 0.8])
    read = curve_accuracy_at(curve_j, curve_acc, np.array([10.0, 15.0, 30.0, 40.0, 5.0, 50.0]))
    np.testing.assert_allclose(read, [0.5, 0.6, 0.75, 0.8, 0.5, 0.8])  # beyond an end: the end (reported as None)
    # per resample: [B, 1, V] curves against [1, J] joules give [B, J]
    boot = curve_accuracy_at(np.stack([curve_j, curve_j + 10])[:, None, :], np.stack([curve_acc, curve_acc])[:, None, :],
                             np.array([[15.0, 30.0]]))
    np.testing.assert_allclose(boot, [[0.6, 0.75], [0.5, 0.7]])
    chain_j, chain_acc = np.array([0.0, 10.0, 20.0]), np.array([0.0, 0.5, 0.6])
    np.testing.assert_allclose(chain_slope_at(chain_j, chain_acc, np.array([5.0, 15.0, 25.0])), [0.05, 0.01, 0.0])


def test_every_rung_is_read_at_common_joules_and_steps_are_taken_at_the_budget(results):
    r = results[1.0]
    common = r.common
    assert common["joules"][0] == pytest.approx(r.budget_j)
    assert list(common["rungs"]) == list(RUNGS)
    steps = {s["to"]: s for s in r.steps}
    at_budget = {n: pts[0]["content_gain_pp"] for n, pts in common["rungs"].items()}
    for a, b in zip(RUNGS, RUNGS[1:]):
        # a step is the difference of the two rungs' accuracy at the same joules (the yardstick cancels)
        assert steps[b]["at_j"] == pytest.approx(r.budget_j)
        assert steps[b]["content_gain_step_pp"] == pytest.approx(at_budget[b] - at_budget[a])
    for name, rung in r.rungs.items():
        assert rung.stats["yardstick_slope_pp_per_j"] >= 0, name
        reached = [p for p in common["rungs"][name] if p["content_gain_pp"] is not None]
        test_j = rung.curve_energy.mean(axis=1)
        for p in reached:  # read from the rung's cheapest test point up (its dearest beyond its curve)
            assert test_j.min() - 1e-9 <= p["joules"]
            assert p["ci"][0] <= p["content_gain_pp"] <= p["ci"][1]
        assert all(p["content_gain_pp"] is not None for p in common["rungs"][name] if p["joules"] >= test_j.min())


def test_on_one_benchmark_the_label_rung_is_the_fixed_model_rung_at_every_common_joule(pools):
    t = pools[1.0]
    one = t.subset(benchmarks=[t.benchmarks[0]])
    result = run_headroom(HeadroomConfig(tournament=one, routers=["cost-aware"], n_bootstrap=100, progress=False,
                                         whole_folds=0))
    fixed, task = result.common["rungs"]["fixed_model_hull"], result.common["rungs"]["task_aware_hull"]
    for f, k in zip(fixed, task):
        if f["content_gain_pp"] is not None and k["content_gain_pp"] is not None:
            assert k["content_gain_pp"] == pytest.approx(f["content_gain_pp"], abs=1e-9)
    assert result.whole == {"routers": ["cost-aware"], "skipped": "turned off (--whole-folds 0)"}


def test_the_whole_tournament_step_nests_the_choice_of_router_and_strength_and_widens_for_refitting(results, pools):
    from routing_gym.eval.headroom.whole import corrected_interval, familywise_over

    for s, r in results.items():
        whole = r.whole
        assert whole["n_queries"] == len(pools[s].split_rows("train")) + len(pools[s].split_rows("test"))
        assert whole["seeds"] == [0, 1] and len(whole["choices"]) == 2 * whole["folds"]
        assert sum(whole["chosen"].values()) == len(whole["choices"]) and set(whole["chosen"]) == {"cost-aware", "mf"}
        # the label rung is the yardstick's chain rule cross-fitted, a mix of two chain policies: on the yardstick's chain, so at most the optimism of reading that chain on the
        # scored rows as the best mix of its policies (eval/core/yardstick.py) below it
        assert -1.0 < whole["task_aware_hull"]["content_gain_pp"] <= 1e-9
        assert whole["ci"][0] <= whole["content_gain_pp"] <= whole["ci"][1]
        spread = whole["seed_spread"]
        assert spread["min"] <= whole["step_over_label_pp"] <= spread["max"]
        # the corrected interval is wider than the bootstrap that holds one seed's fits fixed
        fixed = whole["fixed_fit_ci"]["step_ci"]
        assert whole["step_ci"][1] - whole["step_ci"][0] > fixed[1] - fixed[0]
    assert results[1.0].whole["step_ci"][0] > 2.0  # the topic-reading router climbs over the label rung
    assert results[0.0].whole["step_ci"][0] < 1.0 < results[1.0].whole["step_ci"][0]
    # Nadeau & Bengio's correction: 10 values from 5 folds -> variance (1/10 + 1/4) x s^2
    values = np.arange(10.0)
    out = corrected_interval(values, 5, 0.95)
    assert out["se"] == pytest.approx(np.sqrt((0.1 + 0.25) * np.var(values, ddof=1))) and out["df"] == 9
    verdicts = familywise_over({f"pool {s}": r.whole for s, r in results.items()}, 0.95)
    assert verdicts["pool 1.0"] == "above" and verdicts["pool 0.0"] != "above"


def test_the_whole_tournament_cross_fit_is_skipped_when_predicted_over_its_time_budget(pools):
    t = pools[0.0]
    r = run_headroom(HeadroomConfig(tournament=t, routers=["cost-aware"], n_bootstrap=100, progress=False,
                                    whole_budget_s=0.0))
    assert r.whole["predicted_s"]["cost-aware"] > 0 and "over the 0 s budget" in r.whole["skipped"]
    from routing_gym.eval.headroom.report import AUC_NOTE, markdown_report

    table = markdown_report(r)
    head, rest = table.split("| Rung |", 1)
    said = "**The whole-tournament cross-fit was not run**: every router's nested fitting predicted over the 0 s budget"
    assert said in head and said in rest  # at the top, not only in its own section
    assert "from the held-out split only; to run it, raise --whole-budget-s (e.g. --whole-budget-s " in head
    # "step" is always qualified: over the previous rung (the ladder) or over the label (every other table)
    assert "| Step over previous rung at " in table and "gain / step over previous rung |" in table
    assert "| Step at " not in table and "step over the task-aware" not in table and "Step over the label" not in table
    assert AUC_NOTE in table and table.index(AUC_NOTE) > table.index("| Scorer | Within-benchmark AUC |")


def test_the_ladder_claims_carry_family_wise_verdicts(results):
    on, off = results[1.0], results[0.0]
    steps = {s["to"]: s for s in on.steps}
    assert steps["content_router"]["verdict"] == "above"  # the topic-reading router climbs over the label
    assert on.rungs["oracle"].stats["verdict"] == "above"
    assert on.rungs["fixed_model_hull"].stats["verdict"] in ("below", "")
    for r in (on, off):
        for name in RUNGS:
            stats = r.rungs[name].stats
            if stats["verdict"] == "above":  # a family-wise claim is never weaker than the marginal interval
                assert stats["ci"][0] > 0, name
            if stats["verdict"] == "below":
                assert stats["ci"][1] < 0, name
    assert off.rungs["content_router"].stats["verdict"] != "above"
    assert on.rungs["task_aware_hull"].stats["yardstick_slope_pp_per_j"] >= 0  # the forms' run left the ladder's statistics


def test_the_plot_draws_an_interval_that_misses_its_point(results, tmp_path):
    # a percentile interval can exclude its point estimate by float dust (zeroeval-math's label rung: 0.0 [1e-15, 1e-15])
    from routing_gym.eval.headroom.report import plot_headroom

    r = dataclasses.replace(results[1.0], rungs=dict(results[1.0].rungs))
    task = r.rungs["task_aware_hull"]
    r.rungs["task_aware_hull"] = dataclasses.replace(task, stats={**task.stats, "content_gain_pp": 0.0, "ci": [1e-15, 2e-15]})
    assert plot_headroom(r, tmp_path / "h.png").stat().st_size > 0
