"""Unseen models (issue 50, item 4): hold models out of training, describe them by their outcomes
on a stated number of calibration questions, and route to them with the agents that can."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.envs import ObservationBatch, Reward, RoutingEnv
from routing_gym.errors import EmptySplitError, UnknownNameError, UnseenModelsError, UsageError
from routing_gym.eval.generalisation.unseen_models import hold_out_models
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, make_agent
from routing_gym_agents import registry
from routing_gym_agents.nested import CALIBRATION_PRIOR, LABEL_ONLY

DESCRIBERS = ("cost-aware", "gbdt", "irt", "mf", "uniroute")
# A text strength, not the one chosen on validation (often "label only" on these toys), so that
# fit_new_models runs; the label-only path is tested on its own below.
WITH_TEXT = {"cost-aware": {"strength": 1e-2}, "irt": {"strength": 1e-2}, "mf": {"strength": 1e-2},
             "gbdt": {"strength": 0.5, "max_iter": 10}}


def with_star_and_dud(seed: int = 0) -> Tournament:
    """Five models: m0..m2 the toy pool, m3 ("star") right on every question at the lowest joules,
    m4 ("dud") wrong on every question at the highest."""
    t = make_tournament(n=300, k=5, seed=seed)
    correct, energy = t.correct.copy(), t.energy_j.copy()
    correct[:, 3], energy[:, 3] = 1.0, 0.5 * t.energy_j.min()
    correct[:, 4], energy[:, 4] = 0.0, 2.0 * t.energy_j.max()
    return replace(t, correct=correct, energy_j=energy, mean_power_w=energy / t.latency_s)


def test_hold_out_models_splits_the_pool_and_draws_calibration_from_train():
    t = with_star_and_dud()
    unseen = hold_out_models(t, ["m3", "m4"], n_calibration=40, seed=1)
    assert unseen.seen.model_ids == ["m0", "m1", "m2"] and unseen.pool.model_ids == ["m0", "m1", "m2", "m3", "m4"]
    assert unseen.seen.queries["split"].tolist() == t.queries["split"].tolist()
    rows = unseen.calibration_rows
    assert len(rows) == len(set(rows)) == 40 and set(rows) <= set(t.split_rows("train"))
    np.testing.assert_array_equal(rows, hold_out_models(t, ["m3", "m4"], 40, seed=1).calibration_rows)
    assert not np.array_equal(rows, hold_out_models(t, ["m3", "m4"], 40, seed=2).calibration_rows)
    d = unseen.description()
    assert d.model_ids == ["m3", "m4"] and d.n_calibration == 40
    np.testing.assert_array_equal(d.outcomes.correct, t.correct[rows][:, 3:])
    np.testing.assert_array_equal(d.seen_outcomes.energy_j, t.energy_j[rows][:, :3])
    np.testing.assert_array_equal(d.observations.texts, t.queries["prompt"].to_numpy()[rows])


def test_hold_out_models_errors_are_clear():
    t = with_star_and_dud()
    with pytest.raises(UnknownNameError, match="unknown model 'm9'"):
        hold_out_models(t, ["m9"], 10)
    with pytest.raises(UsageError, match="keep at least one"):
        hold_out_models(t, t.model_ids, 10)
    n_train = len(t.split_rows("train"))
    for n in (0, n_train + 1):
        with pytest.raises(EmptySplitError, match=f"n_calibration must be between 1 and the {n_train} 'train' questions"):
            hold_out_models(t, ["m3"], n)


def test_agents_that_cannot_use_a_description_say_so():
    registry.load_plugins()
    able = {n for n, (cls, _) in registry.AGENTS.items() if cls.describes_new_models}
    assert able == set(DESCRIBERS)
    description = hold_out_models(with_star_and_dud(), ["m3"], 10).description()
    for name in ("per-benchmark", "knn", "linucb", "ppo", "sft", "random"):
        with pytest.raises(UnseenModelsError, match=f"{name} cannot route to models it did not train on.*uniroute"):
            make_agent(name).add_models(description)


@pytest.mark.parametrize("name", DESCRIBERS)
def test_a_describing_agent_routes_to_a_good_new_model_and_not_to_a_bad_one(name):
    t = with_star_and_dud()
    unseen = hold_out_models(t, ["m3", "m4"], n_calibration=40)
    agent = make_agent(name, **WITH_TEXT.get(name, {}))
    logs = agent.fit(FitContext(unseen.seen, Reward(), seed=0, feedback=agent.feedback))
    assert name == "uniroute" or logs["strength"] != "label only"
    test_rows = t.split_rows("test")
    batch = ObservationBatch.from_tournament(unseen.pool, test_rows)
    before = agent.act_batch(batch)
    assert before.max() < 3
    agent.add_models(unseen.description())
    after = agent.act_batch(batch)
    assert (after == 3).mean() > 0.9 and not (after == 4).any()
    result = RoutingEnv(tournament=unseen.pool, split="test").evaluate(after)
    assert result.valid.all() and result.metrics()["accuracy"] > t.correct[test_rows][:, :3].mean(axis=0).max()


def test_a_new_models_label_part_is_its_shrunk_calibration_rate():
    t = with_star_and_dud()
    unseen = hold_out_models(t, ["m4", "m1"], n_calibration=30)  # new models in the order held out: m4, then m1
    agent = make_agent("cost-aware", strength=LABEL_ONLY)
    agent.fit(FitContext(unseen.seen, Reward(), seed=0, feedback="full"))
    agent.add_models(unseen.description())
    rows, codes = unseen.calibration_rows, t.benchmark_codes[unseen.calibration_rows]
    batch = ObservationBatch.from_tournament(unseen.pool, t.split_rows("test"))
    p = agent.predict_correct(batch)
    assert p.shape == (len(batch), 5)
    c = t.correct[rows, 1]
    for b in range(len(t.benchmarks)):
        expected = (c[codes == b].sum() + CALIBRATION_PRIOR * c.mean()) / ((codes == b).sum() + CALIBRATION_PRIOR)
        np.testing.assert_allclose(p[batch.benchmarks == b, 4], np.clip(expected, 1e-3, 1 - 1e-3))
    np.testing.assert_allclose(p[:, 3], 1e-3)  # m4 is never right: the clipped rate


def test_a_new_models_text_part_is_fitted_on_its_calibration_questions():
    """The new model is right exactly on the questions that say "joules", a signal no benchmark
    label carries: its per-model text weights, fitted on 150 calibration questions, find it."""
    t = make_tournament(n=600, k=4)
    says_joules = t.queries["prompt"].str.contains("joules").to_numpy()
    correct = t.correct.copy()
    correct[:, 3] = says_joules
    t = replace(t, correct=correct)
    unseen = hold_out_models(t, ["m3"], n_calibration=150)
    agent = make_agent("cost-aware", strength=1e-3)
    agent.fit(FitContext(unseen.seen, Reward(), seed=0, feedback="full"))
    agent.add_models(unseen.description())
    test_rows = t.split_rows("test")
    p = agent.predict_correct(ObservationBatch.from_tournament(unseen.pool, test_rows))[:, 3]
    assert p[says_joules[test_rows]].mean() - p[~says_joules[test_rows]].mean() > 0.3


def test_unseen_model_gains_rows_for_every_size_and_cannot_for_the_others():
    from routing_gym.eval.generalisation.unseen_model_gains import unseen_model_gains

    t = with_star_and_dud()
    rows = unseen_model_gains(t, ["uniroute", "per-benchmark"], ["m3", "m4"], [0, 40], Reward(), n_bootstrap=200)
    by = {(r["agent"], r["n_calibration"]): r for r in rows}
    assert set(by) == {("uniroute", 0), ("uniroute", 40), ("per-benchmark", 0), ("per-benchmark", 40)}
    assert by[("per-benchmark", 40)]["status"] == "cannot" and "cannot route" in by[("per-benchmark", 40)]["note"]
    assert by[("uniroute", 0)]["new_model_share"] == 0 == by[("per-benchmark", 0)]["new_model_share"]
    star = by[("uniroute", 40)]
    # the star (right everywhere, cheapest) is on the full pool's chain: routing to it is no gain over
    # "always star", but described, uniroute sends almost everything there and gains over routing blind
    assert star["new_model_share"] > 0.9 and star["accuracy"] > by[("uniroute", 0)]["accuracy"]
    assert star["routing_gain_pp"] > by[("uniroute", 0)]["routing_gain_pp"]
    for r in rows:
        if r["status"] == "ok":
            assert r["routing_gain_pp_ci_low"] <= r["routing_gain_pp"] <= r["routing_gain_pp_ci_high"]
            assert r["verdict"] in ("above", "below", "")


def test_compare_unseen_models_command_writes_and_prints_its_table_with_an_answer(tmp_path, capsys):
    """`routing-gym compare --unseen-models` runs unseen_model_gains and prints a short table, not raw arrays."""
    import pandas as pd

    from routing_gym.cli import main
    from routing_gym.eval.generalisation.unseen_model_gains import TABLE_HEADER, describing_agents

    with_star_and_dud().save(tmp_path / "t")
    argv = ["compare", "--tournament", str(tmp_path / "t"), "--unseen-models", "m3,m4", "--agents", "uniroute,knn",
            "--calibration", "0,40", "--bootstrap", "200", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    text = (tmp_path / "o" / "unseen-models.md").read_text()
    assert text in out and text.splitlines()[2].startswith("**Answer:** with 40 calibration questions per new model, ")
    assert "Cannot use a description: knn (knn cannot route to models it did not train on" in text
    assert TABLE_HEADER[0] in text and "| uniroute | 0 | " in text and "| uniroute | 40 | " in text
    assert len(out.splitlines()) < 30  # a summary, not a batch result
    rows = pd.read_csv(tmp_path / "o" / "unseen-models.csv")
    star = rows[(rows["agent"] == "uniroute") & (rows["n_calibration"] == 40)].iloc[0]
    assert star["new_model_share"] > 0.9
    assert set(DESCRIBERS) <= set(describing_agents()) and "knn" not in describing_agents()
    assert main([*argv[:-2], "--unseen-models", "m33", "--out", str(tmp_path / "bad")]) == 2
    assert "did you mean 'm3'" in capsys.readouterr().err
