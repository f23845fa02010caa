"""``chain-mix``: a seeded mix of two adjacent policies of compare's train-chosen yardstick chain,
whose population gain over that chain is 0 by construction (the calibration's true-zero rows)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.eval.core.yardstick import train_yardsticks
from routing_gym.sources.synthetic import generate, preset_config
from routing_gym_agents import FitContext, make_agent


@pytest.fixture(scope="module")
def pool():
    """A paper-pool draw whose text says nothing about who is right, large enough that a fresh
    query set stands in for the population."""
    config = preset_config("paper-pool", text_signal=0.0)
    return generate(replace(config, n_queries=12_000, seed=7, splits={"train": 2050, "test": 9950}), progress=False)


def fitted(t, **kwargs):
    agent = make_agent("chain-mix", **kwargs)
    logs = agent.fit(FitContext(t, Reward(), seed=3, feedback=agent.feedback))
    return agent, logs


@pytest.mark.parametrize("chain, segment", [("fixed", -1), ("task", -3), ("task", 0)])
def test_its_gain_over_the_chain_it_mixes_is_zero_while_its_routes_vary(pool, chain, segment):
    agent, logs = fitted(pool, chain=chain, segment=segment, weight=0.4)
    train = pool.split_rows("train")
    sticks = train_yardsticks(pool.correct[train], pool.energy_j[train], pool.benchmark_codes[train],
                              len(pool.benchmarks), list(pool.model_ids))
    stick = sticks.fixed if chain == "fixed" else sticks.task
    first = segment % (len(stick.index) - 1)
    assert logs["policies"] == stick.names[first:first + 2]

    test = pool.split_rows("test")
    actions = agent.act_batch(ObservationBatch.from_tournament(pool, test))
    picked = np.arange(len(test)), actions
    accuracy, joules = pool.correct[test][picked].mean(), pool.energy_j[test][picked].mean()
    codes = pool.benchmark_codes[test]
    points_j = np.concatenate([pool.energy_j[test].mean(axis=0), sticks.routes.per_query(pool.energy_j[test], codes).mean(axis=0)])
    points_a = np.concatenate([pool.correct[test].mean(axis=0), sticks.routes.per_query(pool.correct[test], codes).mean(axis=0)])
    gain = stick.gain(points_j, points_a, joules, accuracy)
    # The coin is independent of the outcomes: on ~10k fresh queries the gain is 0 up to sampling noise
    # (about 0.5 pp for a mix of two policies), while a policy of the chain would be exactly 0.
    assert abs(gain) < 0.015
    differ = agent.routes[0][codes] != agent.routes[1][codes]
    assert differ.any()
    assert 0.35 < (actions[differ] == agent.routes[1][codes][differ]).mean() < 0.45  # the dearer one at the weight


def test_the_mix_share_follows_the_weight_and_copies_share_a_route(pool):
    agent, _ = fitted(pool, chain="fixed", segment=0, weight=0.25)
    test = pool.split_rows("test")
    batch = ObservationBatch.from_tournament(pool, test)
    actions = agent.act_batch(batch)
    cheaper, dearer = agent.routes[:, 0]  # a fixed-chain policy is one model for every benchmark
    assert set(np.unique(actions)) == {cheaper, dearer}
    assert abs((actions == dearer).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(agent.act_batch(batch), actions)  # a function of (seed, text)
    texts = np.asarray(batch.texts, dtype=object)
    first = {}
    for text, action in zip(texts, actions):
        assert first.setdefault(text, action) == action


@pytest.mark.parametrize("kwargs, message", [({"chain": "hull"}, "chain must be"), ({"weight": 1.0}, "weight"),
                                             ({"segment": 99}, "segment 99 outside")])
def test_bad_settings_name_the_setting(pool, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fitted(pool, **kwargs)
