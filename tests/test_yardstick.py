"""The yardstick fixed on train and resampling copies of a question together (the family-wise rule: test_familywise.py)."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.eval.core.stats import BootstrapPlan
from routing_gym.eval.core.yardstick import NULL_POLICY, Yardstick, train_yardsticks


def test_the_chain_is_chosen_on_train_and_starts_at_the_null_policy():
    # a (10 J, 20 %) lies below the line from (0, 0) to b (20 J, 50 %): not a policy of the chain
    stick = Yardstick.chosen_on_train(np.array([10.0, 20.0, 40.0, 15.0]), np.array([0.2, 0.5, 0.6, 0.25]), list("abcd"))
    assert stick.names == ["b", "c"] and stick.index.tolist() == [1, 2]
    test_j, test_acc = np.array([11.0, 19.0, 42.0, 15.0]), np.array([0.9, 0.45, 0.62, 0.9])
    # d and a are far better on test: the yardstick does not move to them (no re-enveloping on test)
    chain_j, chain_acc = stick.chain(test_j, test_acc)
    assert chain_j.tolist() == [0.0, 19.0, 42.0] and chain_acc.tolist() == [0.0, 0.45, 0.62]
    at = stick.accuracy_at(test_j, test_acc, np.array([0.0, 9.5, 19.0, 30.5, 42.0, 1e6]))
    np.testing.assert_allclose(at, [0.0, 0.225, 0.45, 0.535, 0.62, 0.62])  # a line from 0, mixes, flat beyond
    assert stick.gain(test_j, test_acc, 15.0, 0.9) == pytest.approx(0.9 - 0.45 * 15 / 19)
    np.testing.assert_allclose(stick.joules_at(test_j, test_acc, np.array([0.0, 0.225, 0.535, 0.62])), [0.0, 9.5, 30.5, 42.0])
    assert np.isnan(stick.joules_at(test_j, test_acc, 0.7))  # more accurate than every policy: no joules saved
    assert stick.record(test_j, test_acc)["vertices"] == [NULL_POLICY, "b", "c"]


def test_two_chain_policies_swapping_order_on_test_do_not_make_the_yardstick_jump():
    # x and y chosen on train; on test y's joules pass x's by 2e-3 J: a chain read in train order (a
    # running maximum of joules) jumped by 5 pp at x's joules; the best mix of the chain moves by ~1e-4
    stick = Yardstick.chosen_on_train(np.array([10.0, 20.0, 40.0]), np.array([0.4, 0.6, 0.7]), list("xyz"))
    at = np.array([9.0, 10.0, 12.0, 30.0])
    before, after = (stick.accuracy_at(np.array([10.0, 10.0 + d, 40.0]), np.array([0.40, 0.45, 0.70]), at) for d in (1e-3, -1e-3))
    np.testing.assert_allclose(before, after, atol=1e-4)
    assert np.isclose(before[1], 0.45, atol=1e-4)  # y, as cheap as x and more accurate, is the better mix
    saved = [stick.joules_at(np.array([10.0, 10.0 + d, 40.0]), np.array([0.40, 0.45, 0.70]), 0.55) for d in (1e-3, -1e-3)]
    assert saved[0] == pytest.approx(saved[1], abs=1e-2)  # ~22 J either way


def test_a_chain_policy_below_the_test_hull_has_a_negative_gain_and_only_chain_policies_mix():
    stick = Yardstick.chosen_on_train(np.array([10.0, 20.0, 40.0, 25.0]), np.array([0.4, 0.6, 0.7, 0.5]), list("xyzw"))
    assert stick.names == ["x", "y", "z"]
    test_j, test_acc = np.array([10.0, 20.0, 40.0, 25.0]), np.array([0.4, 0.5, 0.7, 0.95])
    # y fell below the line from x to z on test: it is not a vertex, its own gain is below 0; w never enters
    chain_j, chain_acc = stick.chain(test_j, test_acc)
    assert chain_j.tolist() == [0.0, 10.0, 40.0] and chain_acc.tolist() == [0.0, 0.4, 0.7]
    assert stick.gain(test_j, test_acc, 20.0, 0.5) == pytest.approx(0.5 - (0.4 + 0.3 / 3))
    record = stick.record(test_j, test_acc)
    assert record["vertices"] == [NULL_POLICY, "x", "z"] and record["chain"] == [NULL_POLICY, "x", "y", "z"]
    assert stick.joules_at(test_j, test_acc, 0.55) == pytest.approx(25.0)
    assert np.isnan(stick.joules_at(test_j, test_acc, 0.71))
    with pytest.raises(ValueError, match="one set"):
        stick.chain(test_j[None], test_acc[None])


def test_every_resample_reads_the_same_policies():
    stick = Yardstick.chosen_on_train(np.array([10.0, 20.0, 40.0]), np.array([0.3, 0.5, 0.6]), list("abc"))
    boot_j = np.array([[10.0, 20.0, 40.0], [12.0, 18.0, 44.0]])
    boot_acc = np.array([[0.3, 0.5, 0.6], [0.7, 0.48, 0.61]])  # resample 2: a looks lucky; still no re-enveloping
    gains = stick.gain(boot_j, boot_acc, np.array([10.0, 12.0]), np.array([0.3, 0.7]))
    assert gains[0] == pytest.approx(0.0, abs=1e-12) and gains[1] == pytest.approx(0.0, abs=1e-12)


def test_the_label_router_on_the_chain_has_content_gain_exactly_zero():
    rng = np.random.default_rng(0)
    n, k = 2000, 3
    codes = rng.integers(0, 2, n)
    skill = np.array([[0.9, 0.3, 0.6], [0.2, 0.8, 0.6]])  # benchmark 0 -> model 0, benchmark 1 -> model 1
    correct = (rng.random((n, k)) < skill[codes]).astype(float)
    energy = np.tile([10.0, 10.0, 30.0], (n, 1))
    train, test = np.arange(1000), np.arange(1000, n)
    sticks = train_yardsticks(correct[train], energy[train], codes[train], 2, ["m0", "m1", "m2"])
    label = np.where(codes[test] == 0, 0, 1)
    route_c, route_e = (sticks.routes.per_query(v[test], codes[test]) for v in (correct, energy))
    method_acc, method_j = correct[test][np.arange(1000), label].mean(), 10.0
    gains = sticks.gains(energy[test].mean(0), correct[test].mean(0), route_e.mean(0), route_c.mean(0),
                         np.array([method_j]), np.array([method_acc]))
    assert gains["content_gain_pp"][0] == pytest.approx(0.0, abs=1e-9)
    assert gains["routing_gain_pp"][0] > 20  # far above mixing fixed models


def test_copies_of_a_question_are_resampled_together():
    values = np.arange(6, dtype=float)
    plan = BootstrapPlan.of_rows(["q a", "Q  A", "b", "c", "c", "d"], n_resamples=500, seed=3)
    assert plan.n_groups == 4
    counts = np.concatenate(list(plan._counts()))
    np.testing.assert_array_equal(counts[:, 0], counts[:, 1])  # the two copies always drawn together
    np.testing.assert_array_equal(counts[:, 3], counts[:, 4])
    assert (counts.sum(axis=1) != 6).any()  # a resample holds as many rows as its groups have
    means = plan.means(values)
    np.testing.assert_allclose(means, counts @ values / counts.sum(axis=1))
    # without copies the plan is the plain row bootstrap, draw for draw
    plain = BootstrapPlan(6, 500, seed=3).means(values)
    np.testing.assert_array_equal(BootstrapPlan.of_rows(list("abcdef"), 500, seed=3).means(values), plain)


def _label_skilled(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three benchmarks, each with its own best model: the label is worth a lot where it is seen."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, n)
    skill = np.array([[0.9, 0.3, 0.5, 0.7], [0.2, 0.85, 0.5, 0.7], [0.4, 0.4, 0.8, 0.75]])
    correct = (rng.random((n, 4)) < skill[codes]).astype(float)
    energy = np.tile([10.0, 12.0, 15.0, 60.0], (n, 1)) * rng.uniform(0.8, 1.2, (n, 4))
    return codes, correct, energy


def test_with_only_unseen_benchmarks_in_test_the_task_chain_is_the_fixed_chain():
    codes, correct, energy = _label_skilled()
    train, test = np.flatnonzero(codes != 2), np.flatnonzero(codes == 2)  # benchmark 2 never trains
    models = ["m0", "m1", "m2", "m3"]
    seen_only = train_yardsticks(correct[train], energy[train], codes[train], 3, models)
    sticks = train_yardsticks(correct[train], energy[train], codes[train], 3, models, codes[test])
    assert sticks.unseen == {"codes": [2], "share": 1.0}
    assert list(sticks.task.index) == list(sticks.fixed.index)
    assert list(seen_only.task.index) != list(seen_only.fixed.index)  # without test codes the routes lead it
    route_c, route_e = (sticks.routes.per_query(v[test], codes[test]) for v in (correct, energy))
    plan = BootstrapPlan.of_rows(np.arange(len(test)).astype(str), 200, 0)
    boot = plan.means(np.concatenate([correct[test], energy[test], route_c, route_e], axis=1))
    p = route_c.shape[1]
    method = boot[:, [0]] * 0.5 + boot[:, [3]] * 0.5, boot[:, [4]] * 0.5 + boot[:, [7]] * 0.5
    gains = sticks.gains(boot[:, 4:8], boot[:, :4], boot[:, 8 + p:], boot[:, 8:8 + p], method[1], method[0])
    np.testing.assert_array_equal(gains["content_gain_pp"], gains["routing_gain_pp"])  # every resample
    # every route sends an unseen query where the fixed-model choice at its lambda (all training rows) would
    for choice, low in zip(sticks.routes.choices, sticks.routes.lambda_low):
        score = correct[train].mean(0) - (low + 1e-9) * energy[train].mean(0)
        assert choice[2] == int(np.argmax(score))


def test_a_partly_unseen_test_weights_the_routes_training_points_by_the_unseen_share():
    codes, correct, energy = _label_skilled(seed=1)
    train = np.flatnonzero(codes != 2)
    test_codes = np.array([0] * 30 + [2] * 10)
    sticks = train_yardsticks(correct[train], energy[train], codes[train], 3, ["m0", "m1", "m2", "m3"], test_codes)
    assert sticks.unseen == {"codes": [2], "share": 0.25}
    # the chain still holds a route (the seen 75 % carry the label) and is chosen without a test outcome
    assert any(i >= 4 for i in sticks.task.index)
    route = sticks.task.index[sticks.task.index >= 4][0] - 4
    seen = sticks.routes.per_query(correct[train], codes[train]).mean(0)[route]
    pooled = correct[train].mean(0)[sticks.routes.choices[route, 2]]
    assert sticks.task.train_accuracy[list(sticks.task.index).index(route + 4)] == pytest.approx(0.75 * seen + 0.25 * pooled)
