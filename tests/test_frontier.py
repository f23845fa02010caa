"""Operating-point curves: validation carved from train only, the area over both hulls, dominance, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_tournament, text_skill_tournament, two_skill_tournament

from routing_gym.errors import RoutingGymError
from routing_gym.eval.core.yardstick import NULL_POLICY, Yardstick
from routing_gym.eval.frontier import CostKnob, FrontierConfig, carve_validation, run_frontier
from routing_gym.eval.frontier.report import write_frontier_outputs
from routing_gym.fronts import hull as H
from routing_gym.tournament import Tournament
from routing_gym_agents import Agent, ObservationBatch, register_agent

REPO = Path(__file__).resolve().parents[1]

SEEN: dict[str, list[set[str]]] = {"fit": [], "act": []}


@register_agent("test-recording-knob")
class RecordingAgent(Agent):
    """Records which queries it learns from and routes; its knob picks a fixed model."""

    feedback = "full"
    cost_knob = CostKnob("model", applies="fit", cheaper_when="lower", grid=(0.0, 1.0, 2.0, 3.0))

    def __init__(self, model: float = 0.0):
        self.model = int(model)

    def fit(self, ctx):
        SEEN["fit"].append(set(ctx.train_observations().query_ids))
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        SEEN["act"].append(set(batch.query_ids))
        return np.full(len(batch), self.model)


@register_agent("test-two-model-mix")
class TwoModelMix(Agent):
    """Sends each query to ``high`` with probability ``share`` (else ``low``), by a hash of its id:
    a random mix of two fixed models, so its curve lies on the segment between them."""

    feedback = "full"
    cost_knob = CostKnob("share", applies="act", cheaper_when="lower", grid=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0))

    def __init__(self, share: float = 0.5, low: int = 0, high: int = 1):
        self.share, self.low, self.high = share, low, high

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        u = np.array([zlib.crc32(q.encode()) / 2**32 for q in batch.query_ids])
        return np.where(u < self.share, self.high, self.low)


def _split_ids(t: Tournament, split: str) -> set[str]:
    return set(t.queries["query_id"].to_numpy()[t.split_rows(split)])


def test_validation_is_carved_from_train_only_and_stratified():
    t = make_tournament(n=300, k=3, seed=4)
    carved = carve_validation(t, share=0.25, seed=1)
    assert _split_ids(carved, "test") == _split_ids(t, "test")
    fit, val = _split_ids(carved, "train:fit"), _split_ids(carved, "train:validation")
    assert not fit & val and fit | val == _split_ids(t, "train")
    train = t.queries.iloc[t.split_rows("train")]
    val_rows = carved.queries[carved.queries["split"] == "train:validation"]
    for benchmark, n in train["benchmark"].value_counts().items():
        assert (val_rows["benchmark"] == benchmark).sum() == round(0.25 * n)
    assert _split_ids(carve_validation(t, share=0.25, seed=1), "train:validation") == val  # seeded
    assert _split_ids(carve_validation(t, share=0.25, seed=2), "train:validation") != val
    with pytest.raises(RoutingGymError, match="validation share"):
        carve_validation(t, share=1.0)


def test_agents_learn_from_the_fit_part_and_choose_without_test_outcomes():
    t = make_tournament(n=240, k=4, seed=2)
    SEEN["fit"].clear(), SEEN["act"].clear()
    config = FrontierConfig(tournament=t, agents=["test-recording-knob"], n_bootstrap=50, progress=False)
    result = run_frontier(config)
    carved = carve_validation(t)
    fit, val, test = (_split_ids(carved, s) for s in ("train:fit", "train:validation", "test"))
    assert SEEN["fit"] and all(ids == fit for ids in SEEN["fit"])
    assert all(ids in (val, test) for ids in SEEN["act"])
    chosen = [p.value for p in result.curves[0].selected]

    # Scramble the test outcomes: the values chosen on validation cannot change.
    test_rows = t.split_rows("test")
    rng = np.random.default_rng(0)
    correct = t.correct.copy()
    correct[test_rows] = rng.permutation(correct[test_rows].ravel()).reshape(len(test_rows), -1)
    scrambled = replace(t, correct=correct)
    again = run_frontier(replace(config, tournament=scrambled))
    assert [p.value for p in again.curves[0].selected] == chosen
    assert [p.validation_accuracy for p in again.curves[0].points] == [p.validation_accuracy for p in result.curves[0].points]


def test_a_curve_of_fixed_model_mixes_has_no_area_over_the_hull():
    t = make_tournament(n=1500, k=4, seed=5)
    test = t.split_rows("test")
    hull = H.fixed_model_hull(t.energy_j[test].mean(axis=0), t.correct[test].mean(axis=0))
    assert len(hull.vertex_index) >= 2
    low, high = (int(i) for i in hull.vertex_index[:2])  # two neighbouring hull vertices
    config = FrontierConfig(tournament=t, agents=["test-two-model-mix"], n_bootstrap=200, progress=False,
                            agent_kwargs={"test-two-model-mix": {"low": low, "high": high}})
    summary = run_frontier(config).curves[0].summary
    assert abs(summary["mean_gain_pp"]) < 1.5
    assert summary["mean_gain_pp_ci_low"] <= 0 <= summary["mean_gain_pp_ci_high"]
    # The exact mixes of two neighbouring chain policies have exactly no area over the yardstick.
    stick = Yardstick.chosen_on_train(hull.energy_j, hull.accuracy, [str(i) for i in hull.vertex_index])
    chain_j, chain_acc = stick.chain(hull.energy_j, hull.accuracy)  # the null point, then the chosen policies
    curve = (chain_j[-2:], chain_acc[-2:])
    assert stick.mean_gain_over_range(hull.energy_j, hull.accuracy, *curve) == pytest.approx(0.0, abs=1e-12)


def test_a_curve_is_read_as_a_chain_in_its_own_order_never_enveloped():
    # yardstick: one policy at (10 J, 50 %), flat at 50 % beyond it (a dearer, no better candidate sets the range)
    energy, accuracy = np.array([10.0, 40.0]), np.array([0.5, 0.5])
    stick = Yardstick.chosen_on_train(energy, accuracy, ["m", "dear"])
    # a curve whose middle point is lucky-low: the chain mixes through it, an envelope would skip it
    curve_j, curve_acc = np.array([10.0, 20.0, 30.0]), np.array([0.5, 0.3, 0.7])
    # chain: 0 at 10 J, -0.2 at 20 J, +0.2 at 30 J, linear between: area -1 + 0 over 20 J, mean -0.05
    assert stick.mean_gain_over_range(energy, accuracy, curve_j, curve_acc, n_grid=2001) == pytest.approx(-0.05, abs=1e-6)
    # the envelope (the rule before issue 58) skips the 20 J point: +0.1 on average
    envelope = H.hull_accuracy_at(curve_j, curve_acc, np.linspace(10, 30, 2001)) - 0.5
    assert ((envelope[1:] + envelope[:-1]) / 2).mean() == pytest.approx(0.1, abs=1e-6)
    # the order is the curve's own: a point listed after a dearer one is passed at once (running maximum)
    reordered = stick.mean_gain_over_range(energy, accuracy, np.array([10.0, 30.0, 20.0]), np.array([0.5, 0.7, 0.3]),
                                           n_grid=2001)
    assert reordered == pytest.approx(0.1, abs=1e-3)  # 10 J -> 30 J, the 20 J point is never read
    # one reading per resample: [B, Q] curves give [B] gains, each as on its own
    boot = stick.mean_gain_over_range(np.tile(energy, (2, 1)), np.tile(accuracy, (2, 1)), np.tile(curve_j, (2, 1)),
                                      np.stack([curve_acc, curve_acc + 0.1]), n_grid=2001)
    assert boot == pytest.approx([-0.05, 0.05], abs=1e-6)


def test_frontier_null_curves_cover_0_at_about_the_nominal_rate():
    """A small version of experiments/frontier_null.py: curves made of the yardstick's own policies
    (true mean gain 0) on null tournaments; the envelope it replaced excludes 0 most of the time."""
    sys.path.insert(0, str(REPO / "experiments"))
    import frontier_null  # experiments/frontier_null.py

    frame = pd.DataFrame([r for seed in range(30) for r in frontier_null.one_tournament(seed, 200, 1200)])
    summary = frontier_null.summarise(frame).set_index(["yardstick", "curve", "reading"])
    for tag in ("routing", "content"):
        mixes = summary.loc[(tag, "policies and mixes", "after")]
        assert mixes["tournaments"] == 30 and mixes["covered"] >= 26 and mixes["zero_width"] == 0
        own = frame[(frame["yardstick"] == tag) & (frame["curve"] == "policies") & (frame["reading"] == "after")]
        assert (own["estimate_pp"].abs() < 1e-9).all() and own["covers_0"].all()  # the curve is the yardstick


def test_a_clearly_beaten_fixed_model_is_reported_dominated(tmp_path):
    t = two_skill_tournament()
    config = FrontierConfig(tournament=t, agents=["cost-aware"], grids={"cost-aware": [0.0, 0.3, 5.0]},
                            n_bootstrap=300, progress=False)
    result = run_frontier(config)
    curve = result.curves[0]
    assert not curve.error
    verdict = {d["model"]: d for d in curve.dominance}
    assert verdict["big-generalist"]["dominated"] and verdict["big-generalist"]["prob_dominates"] >= 0.95
    assert verdict["mid-trivia"]["dominated"]
    assert not verdict["cheap-arith"]["dominated"]  # nothing is cheaper than always using it
    assert curve.summary["mean_gain_pp_ci_low"] > 0  # routing by benchmark is far above any mix

    paths = write_frontier_outputs(result, tmp_path)
    table = paths["table.md"].read_text()
    assert "big-generalist" in table and "**yes**" in table
    payload = json.loads(paths["frontier.json"].read_text())
    assert payload["curves"][0]["summary"]["mean_gain_pp"] == pytest.approx(curve.summary["mean_gain_pp"])
    assert paths["frontier.png"].stat().st_size > 10_000
    points = pd.read_csv(paths["points.csv"])
    assert len(points) == 3 and points["selected"].sum() == len(curve.selected)
    # the curve's hypervolume and expected utility, beside the hulls and the exact oracle front
    mo = payload["mo_indicators"]["fronts"]
    assert mo["cost-aware curve"]["points"] == len(curve.selected)
    assert mo["fixed-model hull"]["expected_utility"] < mo["cost-aware curve"]["expected_utility"] <= \
        mo["oracle (exact, per-query best route)"]["expected_utility"]
    assert "## Multi-objective indicators" in table


def test_content_gain_separates_reading_the_question_from_reading_its_benchmark(tmp_path):
    # The skill in the benchmark label: routing by benchmark is all there is to gain.
    grids = {"cost-aware": [0.0, 0.3, 5.0], "per-benchmark": [0.0, 0.3, 5.0]}
    result = run_frontier(FrontierConfig(tournament=two_skill_tournament(n_benchmarks=4), agents=["per-benchmark", "cost-aware"],
                                         grids=grids, n_bootstrap=300, progress=False))
    by_agent = {c.agent: c for c in result.curves}
    for curve in by_agent.values():
        assert not curve.error and curve.summary["mean_gain_pp_ci_low"] > 10  # far above mixing fixed models
        assert curve.summary["mean_content_gain_pp_ci_low"] < 0.5  # but nothing beyond the task label ...
        assert curve.summary["mean_content_gain_pp_fw"] != "above" and abs(curve.summary["mean_content_gain_pp"]) < 1.0
        assert not any(d["dominated"] for d in curve.route_dominance)
    assert result.task_hull["vertices"][:2] == [NULL_POLICY, "cheap-arith"]
    assert any(v.startswith(H.TASK_ROUTE_PREFIX) for v in result.task_hull["vertices"])
    paths = write_frontier_outputs(result, tmp_path / "label")
    table = paths["table.md"].read_text()
    assert "**per-benchmark** (cannot read the question: content by its marginal CI) task routing only" in table
    assert "**cost-aware** task routing only" in table
    # the label router's mean content gain is no hypothesis of the family (at most 0 by construction)
    assert by_agent["per-benchmark"].summary["mean_content_gain_pp_fw"] == ""
    assert by_agent["per-benchmark"].summary["mean_gain_pp_fw"] == "above"
    verdicts = pd.read_csv(paths["dominance.csv"])
    assert set(verdicts["against"]) == {"fixed model", "per-benchmark route"}
    assert json.loads(paths["frontier.json"].read_text())["task_hull"]["routes"][0]["models"]

    # The skill in the text: a router reading it gains beyond the label.
    result = run_frontier(FrontierConfig(tournament=text_skill_tournament(), agents=["cost-aware", "per-benchmark"],
                                         grids=grids, n_bootstrap=300, progress=False))
    reading, label_only = result.curves
    assert reading.summary["mean_content_gain_pp_ci_low"] > 10
    assert [d["route"] for d in reading.route_dominance] == [r["route"] for r in result.task_hull["routes"]]
    assert all(p.stats["content_gain_pp_ci_high"] < 1.0 for p in label_only.selected)  # blind to the text
    table = write_frontier_outputs(result, tmp_path / "text")["table.md"].read_text()
    assert "**cost-aware** routes beyond the task label" in table


def test_bad_settings_name_the_agent_or_option():
    t = make_tournament(n=90, k=3)
    with pytest.raises(RoutingGymError, match="'random' exposes no cost knob"):
        run_frontier(FrontierConfig(tournament=t, agents=["random"], progress=False))
    with pytest.raises(RoutingGymError, match="--grid for 'knn'"):
        run_frontier(FrontierConfig(tournament=t, agents=["knn"], grids={"knn": [0.1, "x"]}, progress=False))
    with pytest.raises(RoutingGymError, match="'linucb'.*lambda_e"):  # breaks gated_rank's gate
        run_frontier(FrontierConfig(tournament=t, agents=["linucb"], grids={"linucb": [0.0, 3.5]}, progress=False))
    with pytest.raises(RoutingGymError, match="mu"):
        run_frontier(FrontierConfig(tournament=t, agents=["cost-aware"], grids={"cost-aware": [-1.0]}, progress=False))


def test_cli_writes_the_curve_and_refuses_an_agent_without_a_knob(tmp_path):
    t = make_tournament(n=150, k=3, seed=1)
    t.save(tmp_path / "toy")
    run = lambda *args: subprocess.run([sys.executable, "-m", "routing_gym", "frontier", "--tournament",  # noqa: E731
                                        str(tmp_path / "toy"), "--bootstrap", "20", *args],
                                       capture_output=True, text=True, timeout=300)
    ok = run("--agents", "knn,linucb", "--grid", '{"knn": [0, 0.5, 2], "linucb": [0, 2]}', "--out", str(tmp_path / "out"))
    assert ok.returncode == 0, ok.stderr
    assert "Operating-point curves on" in ok.stdout and "linucb" in ok.stdout
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"table.md", "frontier.json", "points.csv", "dominance.csv", "frontier.png"}
    bad = run("--agents", "random", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "exposes no cost knob" in bad.stderr and "Traceback" not in bad.stderr


def test_every_chosen_point_and_fixed_model_is_judged_under_each_recorded_energy_law(tmp_path):
    from routing_gym.eval.core.robustness import energy_under_laws

    t = two_skill_tournament()
    k = t.n_models
    models = t.models.copy()  # per-token joules rising with the model index under "up", falling under "down"
    models["serving"] = [{"energy_alternatives": {
        "up": {"joules_per_output_token": 0.1 * (j + 1), "prefill_joules_per_input_token": 0.0},
        "down": {"joules_per_output_token": 0.1 * (k - j), "prefill_joules_per_input_token": 0.0}}} for j in range(k)]
    t = replace(t, models=models)
    config = FrontierConfig(tournament=t, agents=["cost-aware"], grids={"cost-aware": [0.0, 5.0]}, n_bootstrap=100,
                            progress=False)
    result = run_frontier(config)
    summary = result.hull["robustness"]
    assert summary["laws"] == ["down", "up"]  # no canonical law among them: sorted
    train = np.sort(np.concatenate([result.tournament.split_rows(f"train:{part}") for part in ("fit", "validation")]))
    for law, energy in energy_under_laws(result.tournament, train).items():
        stick = Yardstick.chosen_on_train(energy.mean(axis=0), result.tournament.correct[train].mean(axis=0), t.model_ids)
        assert summary["hull_models"][law] == stick.names
    methods = {row["method"]: row for row in summary["methods"]}
    chosen = {f"cost-aware mu={p.value:g}" for p in result.curves[0].selected}
    assert chosen and set(methods) == {f"always {m}" for m in t.model_ids} | chosen
    assert {row["verdict_up"] for m, row in methods.items() if m.startswith("always")} <= {
        "on the hull", "below", "indistinguishable", "routes"}
    assert "on the hull" in {row["verdict_up"] for row in methods.values()}
    assert "## Verdicts under other energy laws" in write_frontier_outputs(result, tmp_path, plots=False)["table.md"].read_text()
