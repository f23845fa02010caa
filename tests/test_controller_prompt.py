"""Text controller prompt, parser, SFT targets and config (no model, no torch)."""

from __future__ import annotations

import numpy as np
import pytest

from routing_gym.envs import Reward, oracle_targets
from routing_gym_agents.controller.config import ControllerConfig
from routing_gym_agents.controller.prompt import (
    INVALID,
    ModelLegend,
    PromptBuilder,
    completion_text,
    named_model,
    parse_choice,
    parse_choices,
    rationale_sentence,
    target_completion,
)

LEGEND = ModelLegend(
    ("qwen2.5-0.5b", "qwen2.5-7b", "deepseek-r1-distill-32b", "mystery"), (0.49, 7.62, 32.8, float("nan"))
)


@pytest.mark.parametrize("fmt", ["choice", "rationale"])
def test_parser_round_trips_every_letter_in_both_formats(toy, fmt):
    builder = PromptBuilder(ModelLegend.from_tournament(toy), fmt)
    for row in range(8):
        for k in range(toy.n_models):
            text = target_completion(builder, k, toy.correct[row], toy.energy_j[row])
            assert parse_choice(text, toy.n_models) == k
            # The same text as TRL hands a conversational completion to a reward function.
            assert parse_choice([{"role": "assistant", "content": text}], toy.n_models) == k


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Choice: B", 1),
        ("choice:C", 2),
        ("choice: c", INVALID),
        ("CHOICE :  (D)", 3),
        ("Choice: [A].", 0),
        ("The small model is enough.\nChoice: A", 0),
        ("Choice: A\nChoice: A", 0),  # repeated but consistent
        ("Choice: A or Choice: B", INVALID),  # a hedge is credited to no model
        ("Choice: E", INVALID),  # beyond the 4 letters of the legend
        ("Choice: Z", INVALID),
        ("Choice: a small model", INVALID),  # lower case is prose, not the letter A
        ("Choice: Apple", INVALID),
        ("Choice: B2", INVALID),
        ("B", INVALID),
        ("The answer is A.", INVALID),
        ("", INVALID),
        ("Choice:", INVALID),
    ],
)
def test_parser_valid_and_invalid(text, expected):
    assert parse_choice(text, 4) == expected


def test_named_model_reads_the_rationale_not_the_choice():
    legend = ModelLegend(("Meta-Llama-3-8B", "Meta-Llama-3.1-8B", "phi-3.5"), (8.0, 8.0, 3.8))
    said = "Reason: Meta-Llama-3.1-8B answered correctly with the fewest joules.\nChoice: C"
    assert named_model(said, legend) == 1
    assert parse_choice(said, 3) == 2  # the reason names B, the choice says C: they disagree
    assert named_model("Reason: phi-3.5 beats meta-llama-3-8b.\nChoice: A", legend) == 2  # first named wins
    assert named_model("Reason: no model answered correctly.\nChoice: A", legend) == INVALID
    assert named_model("Choice: A. Reason: phi-3.5", legend) == INVALID  # only text before the choice counts


def test_parse_choices_and_bad_inputs():
    np.testing.assert_array_equal(parse_choices(["Choice: A", "nope", "Choice: D"], 4), [0, -1, 3])
    with pytest.raises(ValueError, match="k must be"):
        parse_choice("Choice: A", 0)
    with pytest.raises(ValueError, match="k must be"):
        parse_choice("Choice: A", 27)
    with pytest.raises(TypeError, match="int"):
        completion_text(3)
    # Only the assistant's words count in a message list.
    assert (
        parse_choice([{"role": "user", "content": "Choice: B"}, {"role": "assistant", "content": "Choice: C"}], 4) == 2
    )


def test_prompt_holds_question_legend_and_optional_difficulty():
    builder = PromptBuilder(LEGEND, "choice", include_difficulty=True, max_question_chars=30)
    system, user = (
        m["content"] for m in builder.messages("What   is 2+2?\nThink hard, then answer in detail please.", 0.25)
    )
    assert "A: qwen2.5-0.5b (0.49B)" in system
    assert "B: qwen2.5-7b (7.6B)" in system
    assert "C: deepseek-r1-distill-32b (33B)" in system
    assert "D: mystery (size unknown)" in system
    assert "A-D" in system
    assert user.startswith("Question: What is 2+2? Think hard, then")
    assert user.splitlines()[0].endswith(" ...")  # cut at max_question_chars
    assert user.endswith("Difficulty: 0.25")
    assert "Difficulty" not in PromptBuilder(LEGEND).user("q")
    plain = builder.plain("q?", 0.5)
    assert plain.startswith(builder.system()) and plain.endswith("Answer:\n")
    rationale = PromptBuilder(LEGEND, "rationale").system()
    assert "Reason: " in rationale and "Choice: X" in rationale
    with pytest.raises(ValueError, match="difficulty"):
        builder.user("q", None)
    with pytest.raises(ValueError, match="no difficulty column"):
        builder.prompts(["q"], None, chat=True)
    with pytest.raises(ValueError, match="output format"):
        PromptBuilder(LEGEND, "json")  # type: ignore[arg-type]


def test_legend_limits():
    with pytest.raises(ValueError, match="at most 26"):
        ModelLegend(tuple(f"m{i}" for i in range(27)), tuple(1.0 for _ in range(27)))
    with pytest.raises(ValueError, match="at least one"):
        ModelLegend((), ())
    with pytest.raises(ValueError, match="sizes"):
        ModelLegend(("a", "b"), (1.0,))
    with pytest.raises(IndexError):
        LEGEND.letter(4)


def test_rationale_states_only_logged_facts():
    energy = np.array([10.0, 50.0, 300.0, 20.0])
    # Lowest-energy fully correct model.
    s = rationale_sentence(LEGEND, 1, np.array([0.0, 1.0, 1.0, 0.0]), energy)
    assert s == "qwen2.5-7b answered correctly with the fewest joules."
    # Nobody correct: the cheapest model is the target.
    s = rationale_sentence(LEGEND, 0, np.zeros(4), energy)
    assert s == "no model answered correctly, and qwen2.5-0.5b uses the fewest joules."
    assert rationale_sentence(LEGEND, 2, np.zeros(4), energy) == "no model answered correctly."
    # A fractional target: its logged pass rate and joules, nothing else.
    s = rationale_sentence(LEGEND, 2, np.array([0.0, 0.0, 0.75, 0.0]), energy)
    assert s == "deepseek-r1-distill-32b was 75% correct at 300 J."
    # A correct target that is not the cheapest correct one never gets the "fewest joules" claim.
    s = rationale_sentence(LEGEND, 2, np.array([0.0, 1.0, 1.0, 0.0]), energy)
    assert "fewest" not in s and "100% correct at 300 J" in s


def test_rationale_targets_follow_oracle_targets(toy):
    reward = Reward("gated_rank", {"lambda_e": 0.5})
    rows = toy.split_rows("train")
    targets = oracle_targets(toy, reward, rows=rows)
    builder = PromptBuilder(ModelLegend.from_tournament(toy), "rationale")
    texts = [target_completion(builder, int(a), toy.correct[r], toy.energy_j[r]) for a, r in zip(targets, rows)]
    np.testing.assert_array_equal(parse_choices(texts, toy.n_models), targets)
    for text, a, r in zip(texts, targets, rows):
        sentence, line = text.split("\n")
        assert line == f"Choice: {'ABCD'[a]}"
        assert toy.model_ids[a] in sentence
        if toy.correct[r].max() <= 0:
            assert sentence.startswith("Reason: no model answered correctly, and")
            assert toy.energy_j[r, a] == toy.energy_j[r].min()
        elif "fewest joules" in sentence:
            assert toy.correct[r, a] == 1
            assert toy.energy_j[r, a] == toy.energy_j[r][toy.correct[r] >= 1].min()
    # Deterministic: the same facts give the same text.
    again = [target_completion(builder, int(a), toy.correct[r], toy.energy_j[r]) for a, r in zip(targets, rows)]
    assert again == texts
    with pytest.raises(ValueError, match="outcomes"):
        target_completion(builder, 0)


def test_config_flat_overrides_and_errors():
    c = ControllerConfig.from_kwargs(
        sft_max_steps=3, grpo_beta=0.1, format="rationale", model="some/model", lora=False, seed=7
    )
    assert (c.sft.max_steps, c.grpo.beta, c.prompt.output_format, c.model.name_or_path, c.lora.enabled, c.seed) == (
        3,
        0.1,
        "rationale",
        "some/model",
        False,
        7,
    )
    assert c.max_completion_length == 40 and ControllerConfig().max_completion_length == 8
    base = ControllerConfig()
    derived = ControllerConfig.from_kwargs(base, grpo_num_generations=8)
    assert base.grpo.num_generations == 4 and derived.grpo.num_generations == 8  # base untouched
    with pytest.raises(TypeError, match="unknown text-controller option 'sft_steps'.*sft_max_steps"):
        ControllerConfig.from_kwargs(sft_steps=3)
    with pytest.raises(ValueError, match="group size"):
        ControllerConfig.from_kwargs(grpo_num_generations=1)
    with pytest.raises(ValueError, match="beta"):
        ControllerConfig.from_kwargs(beta=-1.0)
    with pytest.raises(ValueError, match="output_format"):
        ControllerConfig.from_kwargs(format="json")


def test_sampled_targets_follow_the_boltzmann_distribution_of_the_reward(toy):
    from routing_gym.envs import sampled_targets

    reward = Reward("gated_rank", {"lambda_e": 0.5})
    rows = np.repeat(toy.split_rows("train")[:3], 4000)  # each query drawn 4000 times
    draws = sampled_targets(toy, reward, 0.5, np.random.default_rng(0), rows=rows).reshape(3, 4000)
    matrix = reward.matrix(toy, rows[::4000])
    expected = np.exp(matrix / 0.5) / np.exp(matrix / 0.5).sum(axis=1, keepdims=True)
    observed = np.stack([np.bincount(d, minlength=toy.n_models) / 4000 for d in draws])
    np.testing.assert_allclose(observed, expected, atol=0.03)
    # A colder distribution puts (almost) all draws on the best route, the oracle's.
    cold = sampled_targets(toy, reward, 1e-3, np.random.default_rng(1), rows=rows[::4000])
    np.testing.assert_array_equal(matrix[np.arange(3), cold], matrix.max(axis=1))
    # Seeded: the same generator state draws the same targets.
    again = sampled_targets(toy, reward, 0.5, np.random.default_rng(0), rows=rows).reshape(3, 4000)
    np.testing.assert_array_equal(draws, again)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sampled_targets(toy, reward, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="sft.targets"):
        ControllerConfig.from_kwargs(sft_targets="boltzmann")
    assert ControllerConfig().sft.targets == "predicted"
    from routing_gym_agents.controller.config import PRESETS

    assert PRESETS["paper"]["sft_targets"] == "oracle"  # the paper's own targets at its scale


def test_predicted_targets_pick_the_best_route_for_questions_that_read_alike():
    from routing_gym.envs import oracle_targets, predicted_targets
    from routing_gym.sources.specialization import DOMAIN_WORDS
    from routing_gym.sources.synthetic import generate, preset_config

    # Topics named in the text decide which model is strong: the route that is best in
    # expectation is a function of (benchmark, topic), while one draw's best route is noisy.
    t = generate(preset_config("specialist-pool", n_queries=1500))
    rows = t.split_rows("train")
    texts = [str(p)[:120] for p in t.prompts[rows]]
    reward = Reward("gated_rank", {"lambda_e": 0.5})
    matrix = reward.matrix(t, rows)
    topic = np.array([[w in x.lower() for w in DOMAIN_WORDS].index(True) for x in texts])
    cell = t.benchmark_codes[rows] * len(DOMAIN_WORDS) + topic
    expected = np.stack([matrix[cell == c].mean(axis=0) for c in cell])  # [n, K] mean over the cell
    best = expected.argmax(axis=1)
    predicted = predicted_targets(t, reward, texts, rows)
    oracle = oracle_targets(t, reward, rows=rows)
    n = np.arange(len(rows))
    assert (predicted == best).mean() > 2 * (oracle == best).mean()
    assert expected[n, predicted].mean() > expected[n, oracle].mean() + 0.2
    np.testing.assert_array_equal(predicted_targets(t, reward, texts, rows), predicted)  # no randomness
    with pytest.raises(ValueError, match="3 texts for"):
        predicted_targets(t, reward, texts[:3], rows)
    with pytest.raises(ValueError, match="target_ridge_alpha"):
        ControllerConfig.from_kwargs(sft_targets="predicted", sft_target_ridge_alpha=0.0)
    # Read on held-out texts it never saw, the regression still routes by topic: far above
    # the best single route there (what a router that reads the text can reach)
    test = t.split_rows("test")
    test_texts = [str(p)[:120] for p in t.prompts[test]]
    held_out = predicted_targets(t, reward, texts, rows, read_texts=test_texts)
    test_matrix = reward.matrix(t, test)
    assert held_out.shape == (len(test),)
    assert test_matrix[np.arange(len(test)), held_out].mean() > test_matrix.mean(axis=0).max() + 0.1
    np.testing.assert_array_equal(predicted_targets(t, reward, texts, rows, read_texts=texts), predicted)


def test_prompt_names_the_benchmark_first_and_requires_it():
    builder = PromptBuilder(LEGEND, "choice", include_benchmark=True)
    assert builder.user("What is 2+2?", benchmark="gsm8k") == "Benchmark: gsm8k\nQuestion: What is 2+2?"
    chat = builder.prompts(["q1", "q2"], None, chat=True, benchmarks=["mmlu", "never-trained-on"])
    assert [m[1]["content"].splitlines()[0] for m in chat] == ["Benchmark: mmlu", "Benchmark: never-trained-on"]
    with pytest.raises(ValueError, match="benchmark name"):
        builder.user("q")
    with pytest.raises(ValueError, match="no benchmark names"):
        builder.prompts(["q"], None, chat=True)
    assert "Benchmark" not in PromptBuilder(LEGEND).user("q")  # the bare builder leaves it out
    assert ControllerConfig().prompt.builder(LEGEND).include_benchmark  # the controller's default shows it


def test_sft_and_grpo_share_one_reward_and_the_paper_preset_keeps_its_meaning():
    from routing_gym_agents.controller.config import PRESETS

    c = ControllerConfig()
    assert c.sft.energy_coef is None  # None: GRPO's reward (the context's, compare's)
    assert c.holds_out_validation and c.route.label_nested and c.route.decoding == "auto"
    paper = PRESETS["paper"]
    assert paper["sft_energy_coef"] == 0.5 and paper["sft_targets"] == "oracle"
    assert (paper["grpo_oversample"], paper["grpo_skip_flat_queries"], paper["grpo_beta_units"]) == (1, False, "nats")
    assert (paper["route_label_nested"], paper["route_decoding"]) == (False, "greedy")
    unnested = ControllerConfig.from_kwargs(route_label_nested=False, route_decoding="greedy")
    assert not unnested.holds_out_validation  # the paper's controller trains on the whole split
    assert ControllerConfig.from_kwargs(route_alphas=[0.5, 2]).route.alphas == (0.5, 2)
    for bad, match in (({"route_alphas": (0.0,)}, "route.alphas"), ({"route_decoding": "beam"}, "route.decoding"),
                       ({"grpo_oversample": 0}, "oversample"), ({"grpo_beta_units": "bits"}, "beta_units"),
                       ({"sft_target_folds": 0}, "target_folds")):
        with pytest.raises(ValueError, match=match):
            ControllerConfig.from_kwargs(**bad)
    again = ControllerConfig.from_dict(ControllerConfig.from_kwargs(route_alphas=[0.5]).to_dict())
    assert again.route.alphas == (0.5,)


def test_cross_fitted_label_aware_teacher_reads_questions_it_did_not_see():
    from routing_gym_agents.controller.teacher import cross_fitted_targets, teacher_rewards

    # Two benchmarks; within each, the word "hard" decides the best model. Model 2 is best on
    # every question of benchmark 1 (the label alone says so).
    rng = np.random.default_rng(0)
    n = 400
    codes = rng.integers(0, 2, n)
    hard = rng.random(n) < 0.5
    texts = [f"Benchmark: b{c}\nQuestion: {'hard' if h else 'easy'} item {i % 7} of topic {i % 5}"
             for i, (c, h) in enumerate(zip(codes, hard))]
    mean = np.where(codes[:, None] == 1, [0.2, 0.3, 0.9], np.where(hard[:, None], [0.1, 0.8, 0.3], [0.8, 0.1, 0.3]))
    values = mean + rng.normal(0, 0.3, (n, 3))  # one noisy draw per question
    best = mean.argmax(axis=1)
    crossed = cross_fitted_targets(texts, values, codes, 2, alpha=3.0, folds=5, seed=0)
    assert (crossed == best).mean() > 0.95
    np.testing.assert_array_equal(cross_fitted_targets(texts, values, codes, 2, 3.0, 5, 0), crossed)  # seeded folds
    # The label alone (a text with no informative word) routes benchmark 1 to model 2.
    label_only = teacher_rewards(texts, values, codes, ["Benchmark: b1\nQuestion: ?"], np.array([1]), 2, 3.0)
    assert label_only.argmax() == 2
    # A benchmark the fitted rows lack is read from every row's mean: here all rows are benchmark 0.
    read = ["Benchmark: b9\nQuestion: hard item"]
    args = (texts, values, np.zeros(n, dtype=int))
    np.testing.assert_allclose(teacher_rewards(*args, read, np.array([1]), 2, 3.0),
                               teacher_rewards(*args, read, np.array([0]), 2, 3.0))
    with pytest.raises(ValueError, match="folds"):
        cross_fitted_targets(texts, values, codes, 2, 3.0, 0, 0)
