"""The text controller's routing policy (``controller.policy``): the controller's choice
probabilities nested in the benchmark label, alpha and decoding chosen on validation. No model:
probabilities are made up here."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym_agents.controller.policy import RoutePolicy, choose_policy, fit_overhead, keep_grpo, refit_label
from routing_gym_agents.controller.prompt import INVALID

# Two benchmarks, three models. Benchmark 0: models 0 and 1 tie on the label (1 is cheaper);
# benchmark 1: model 2 is best.
LABEL = np.array([[0.5, 0.5, 0.2], [0.1, 0.3, 0.8]])
JOULES = np.array([[30.0, 10.0, 50.0], [30.0, 10.0, 50.0]])


def _queries(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Benchmark codes, ``[n, K]`` rewards and a controller that knows, within benchmark 0,
    which of models 0 and 1 is right (the label cannot)."""
    codes = rng.integers(0, 2, n)
    right = rng.integers(0, 2, n)  # within benchmark 0: the model that answers
    rewards = np.where(codes[:, None] == 1, [0.1, 0.3, 0.8], np.eye(3)[right] * 1.0)
    probs = np.where(codes[:, None] == 1, [0.2, 0.2, 0.5], np.where(np.eye(3)[right] > 0, 0.6, 0.15))
    return codes, rewards, probs


def test_label_only_routes_as_per_benchmark_with_ties_to_the_cheaper_model():
    label_only = RoutePolicy(0.0, "greedy", 0, LABEL, JOULES, np.zeros_like(LABEL))
    probs = np.full((4, 3), 0.3)
    probs[:, 0] = 0.9  # the controller's opinion does not move alpha = 0
    np.testing.assert_array_equal(label_only.act(probs, np.array([0, 1, 0, 1]), ["a", "b", "c", "d"]), [1, 2, 1, 2])
    assert label_only.describe() == {"alpha": "label only", "decoding": "greedy"}
    assert fit_overhead(label_only) == {"route_alpha": 0.0, "route_sampling": 0.0}


def test_validation_chooses_the_text_where_it_helps_and_the_label_where_it_does_not():
    rng = np.random.default_rng(0)
    codes, rewards, probs = _queries(400, rng)
    args = (LABEL, JOULES, 2, (0.1, 1.0, 10.0), ("greedy", "sample"), True, -1.0, 0)
    chosen, values = choose_policy(probs, codes, rewards, *args)
    assert chosen.alpha and chosen.alpha > 0 and chosen.decoding == "greedy"
    assert values["label only"] == pytest.approx(0.5 * (rewards[codes == 0, 1].mean() + 0.8), abs=0.05)
    assert max(values.values()) == values[f"alpha={chosen.alpha:g}, greedy"] > values["label only"] + 0.2
    # Centred within the benchmark: a controller that prefers model 0 everywhere by the same
    # amount carries no information, and the label's route stands.
    flat = np.tile([0.7, 0.1, 0.1], (len(codes), 1))
    blind, blind_values = choose_policy(flat, codes, rewards, *args)
    assert blind.alpha == 0.0 and blind_values["label only"] == max(blind_values.values())
    # The chosen policy keeps its alpha and centre and takes the whole split's label table.
    refit = refit_label(chosen, LABEL + 1.0, JOULES)
    assert refit.alpha == chosen.alpha and np.array_equal(refit.centre, chosen.centre)
    np.testing.assert_array_equal(refit.label, LABEL + 1.0)


def test_a_collapsed_grpo_model_gives_way_to_the_sft_model_it_started_from():
    # GRPO that sent every query to model 2 reads nothing within benchmark 0; the SFT model that
    # knows which of models 0 and 1 answers is worth more on validation and routes instead.
    rng = np.random.default_rng(1)
    codes, rewards, sft_probs = _queries(400, rng)
    collapsed = np.tile([0.01, 0.01, 0.98], (len(codes), 1))
    args = (LABEL, JOULES, 2, (0.1, 1.0, 10.0), ("greedy", "sample"), True, -1.0, 0)
    _, grpo_values = choose_policy(collapsed, codes, rewards, *args)
    _, sft_values = choose_policy(sft_probs, codes, rewards, *args)
    assert max(grpo_values.values()) < grpo_values["label only"] + 0.02 < max(sft_values.values()) - 0.2
    assert not keep_grpo(grpo_values, sft_values)
    assert keep_grpo(sft_values, grpo_values)  # the better model routes, whichever stage it is
    assert keep_grpo(grpo_values, dict(grpo_values))  # ties: the GRPO model


def test_sampling_is_a_seeded_draw_per_question_that_follows_the_distribution():
    n = 20000
    codes = np.zeros(n, dtype=int)
    probs = np.tile([0.5, 0.3, 0.1], (n, 1))
    texts = [f"question {i}" for i in range(n)]
    nested = RoutePolicy(1.0, "sample", 3, LABEL, JOULES, np.zeros_like(LABEL))
    actions = nested.act(probs, codes, texts)
    pi = nested.distribution(probs[:1], codes[:1])[0]
    np.testing.assert_allclose(np.bincount(actions, minlength=3) / n, pi, atol=0.015)
    assert pi.sum() == pytest.approx(1.0)
    # A query's route depends on the seed and its text, not on the batch it came in.
    order = np.random.default_rng(0).permutation(n)[:50]
    np.testing.assert_array_equal(nested.act(probs[order], codes[order], [texts[i] for i in order]), actions[order])
    other_seed = RoutePolicy(1.0, "sample", 4, LABEL, JOULES, np.zeros_like(LABEL)).act(probs, codes, texts)
    assert (other_seed != actions).mean() > 0.3
    # The controller alone: the 10 % that is not "Choice: X" draws an invalid route.
    alone = RoutePolicy(None, "sample", 3).act(probs, codes, texts)
    assert (alone == INVALID).mean() == pytest.approx(0.1, abs=0.01)
    expected = RoutePolicy(None, "sample", 3).expected_reward(probs[:1], codes[:1], np.array([[1.0, 0.0, 0.0]]), -1.0)
    assert expected == pytest.approx(0.5 - 0.1)
    assert fit_overhead(RoutePolicy(None, "sample", 3))["route_sampling"] == 1.0


def test_policy_round_trips_through_json_and_refuses_bad_settings():
    import json

    policy = RoutePolicy(0.3, "sample", 7, LABEL, JOULES, np.ones_like(LABEL))
    again = RoutePolicy.from_dict(json.loads(json.dumps(policy.to_dict())))
    probs = np.tile([0.2, 0.5, 0.2], (3, 1))
    np.testing.assert_array_equal(again.act(probs, np.array([0, 1, 0]), ["x", "y", "z"]),
                                  policy.act(probs, np.array([0, 1, 0]), ["x", "y", "z"]))
    alone = RoutePolicy.from_dict(json.loads(json.dumps(RoutePolicy(None, "greedy", 0).to_dict())))
    assert alone.alpha is None and alone.label is None
    with pytest.raises(ValueError, match="decoding"):
        RoutePolicy(None, "beam", 0)
    with pytest.raises(ValueError, match="tables"):
        RoutePolicy(1.0, "greedy", 0)
