"""Specialization in procedural pools: off is today's pool bit for bit; on, topics shown in the
text decide which model wins, a text router beats the fixed-model hull, and privileged
difficulty is labelled."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from routing_gym.envs.registration import PRESET_IDS
from routing_gym.paths import shipped_data_dir
from routing_gym.sources import resolve_tournament
from routing_gym.sources.specialization import DOMAIN_WORDS, TOPICS, calibration_statistics
from routing_gym.sources.synthetic import PRESETS, ProceduralConfig, generate, preset_config
from routing_gym.tournament import Tournament
from routing_gym.tournament.schema import METRIC_ARRAYS


def topics_of(t: Tournament) -> np.ndarray:
    return np.array([m.get("topic", "") for m in t.queries["metadata"]], dtype=object)


def test_signal_zero_reproduces_the_shipped_paper_pool_bit_for_bit():
    shipped = Tournament.load(shipped_data_dir() / "paper-pool")
    regenerated = generate(preset_config("paper-pool", specialization_signal=0.0))
    for name in METRIC_ARRAYS:
        a, b = getattr(shipped, name), getattr(regenerated, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    for column in ("query_id", "benchmark", "prompt", "reference", "split"):
        assert shipped.queries[column].tolist() == regenerated.queries[column].tolist(), column
    assert "topic" not in regenerated.queries["metadata"].iloc[0]
    # Off is left out of the stored config, so the card (and old cards) stay the same.
    assert "specialization_signal" not in regenerated.card.extra["config"]
    assert regenerated.card.to_dict() == shipped.card.to_dict()


def test_config_round_trip_and_bad_values():
    on = preset_config("paper-pool", specialization_signal=0.6, n_queries=50)
    stored = on.to_dict()
    assert stored["specialization_signal"] == 0.6
    assert ProceduralConfig.from_dict(stored) == on
    assert "specialization_signal" in generate(on).card.description
    with pytest.raises(ValueError, match="specialization_signal must be in"):
        ProceduralConfig(specialization_signal=1.5)


def test_topics_move_where_models_are_right_not_how_often_and_keep_the_shared_parts():
    n = 6000
    off = generate(preset_config("paper-pool", n_queries=n, seed=3))
    on = generate(preset_config("paper-pool", n_queries=n, seed=3, specialization_signal=1.0))
    topic = topics_of(on)
    assert set(topic) == set(TOPICS) and (topics_of(off) == "").all()
    # Question bodies and the shared difficulty are the same; each prompt gains a topic sentence
    # that names its domain.
    assert np.array_equal(off.queries["difficulty"], on.queries["difficulty"])
    for body, prompt, tp in zip(off.queries["prompt"][:200], on.queries["prompt"][:200], topic[:200]):
        assert prompt.endswith(body) and DOMAIN_WORDS[TOPICS.index(tp)] in prompt[: len(prompt) - len(body)]
    # Marginal accuracy per model stays calibrated (the offsets keep it in expectation) ...
    assert np.abs(on.correct.mean(axis=0) - off.correct.mean(axis=0)).max() < 0.03
    # ... while per-topic accuracy differences between models grow: which model wins depends on the topic.
    def topic_spread(t: Tournament, labels: np.ndarray) -> float:
        per_topic = np.array([t.correct[labels == tp].mean(axis=0) for tp in TOPICS])  # [T, K]
        relative = per_topic - per_topic.mean(axis=1, keepdims=True)  # model vs the pool, per topic
        return float(relative.std(axis=0).mean())

    assert topic_spread(on, topic) > 2 * topic_spread(off, topic)  # same topic labels on the off pool


def test_the_text_reveals_the_topic():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    t = generate(preset_config("paper-pool", n_queries=2000, seed=4, specialization_signal=0.5, splits=None))
    topic, prompts = topics_of(t), t.queries["prompt"].tolist()
    vectorizer = TfidfVectorizer(sublinear_tf=True).fit(prompts[:1500])
    clf = LogisticRegression(max_iter=1000).fit(vectorizer.transform(prompts[:1500]), topic[:1500])
    assert (clf.predict(vectorizer.transform(prompts[1500:])) == topic[1500:]).mean() > 0.9  # chance: 1/6


def test_calibration_statistics_track_how_shared_correctness_is():
    shared = calibration_statistics(generate(ProceduralConfig(n_queries=3000, noise=0.0, splits=None)))
    independent = calibration_statistics(generate(ProceduralConfig(n_queries=3000, noise=1.0, splits=None)))
    assert shared["correlation"] > independent["correlation"] + 0.15
    assert shared["big_from_small_auc"] > 0.7 and abs(independent["big_from_small_auc"] - 0.5) < 0.05
    assert 0.5 < shared["length_auc"] < 0.75
    assert shared["big_model"] == "deepseek-r1-distill-32b" and "qwen2.5-0.5b" in shared["small_models"]


def test_specialist_presets_and_gym_ids():
    assert {"specialist-pool", "specialist-pool-large"} <= set(PRESETS) <= set(PRESET_IDS)
    large = preset_config("specialist-pool-large")
    assert large.n_queries >= 20_000 and large.specialization_signal == 1.0
    env = gym.make(PRESET_IDS["specialist-pool"], n_queries=300, split="test")
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert any(f"({word})" in obs["text"] or f"This {word} problem" in obs["text"] for word in DOMAIN_WORDS)


def test_a_text_router_beats_the_hull_only_when_topics_are_on():
    """knn on TF-IDF features, 1 seed: gain CI above 0 with topics, not with them off."""
    from routing_gym.eval.compare import CompareConfig, run_compare

    gains = {}
    for signal in (0.0, 1.0):
        t = generate(preset_config("specialist-pool", n_queries=3000, specialization_signal=signal))
        row = run_compare(CompareConfig(tournament=t, agents=["knn"], seeds=1, n_bootstrap=300, progress=False)).row("knn")
        gains[signal] = (row["routing_gain_pp_ci_low"], row["routing_gain_pp"], row["routing_gain_pp_ci_high"])
    print("knn routing gain [CI] by specialization_signal:", gains)
    assert gains[1.0][0] > 0 and gains[1.0][1] >= 3
    assert gains[0.0][0] < 0


def test_an_agent_reading_difficulty_is_labelled_not_deployable():
    from routing_gym.eval.compare import CompareConfig, markdown_report, run_compare
    from routing_gym_agents import Agent, register_agent

    seen: dict[str, bool] = {}

    @register_agent("test-difficulty-reader")
    class DifficultyReader(Agent):
        """Sends hard questions to the largest model: it reads the generator's latent."""

        privileged = frozenset({"difficulty"})

        def fit(self, ctx):
            seen["fit"] = "difficulty" in ctx.train_observations().extras
            return {}

        def act_batch(self, batch):
            hard = np.asarray(batch.get("difficulty")).reshape(-1) > 0.5
            seen["act"] = True
            return np.where(hard, 8, 0)

    t = resolve_tournament("paper-pool")
    result = run_compare(CompareConfig(tournament=t, agents=["test-difficulty-reader", "knn"], seeds=1,
                                       n_bootstrap=100, progress=False))
    assert seen == {"fit": True, "act": True}
    assert result.row("test-difficulty-reader")["deployable"] is False and result.row("knn")["deployable"] is True
    lines = markdown_report(result).splitlines()
    reader = next(line for line in lines if line.startswith("| test-difficulty-reader |"))
    knn = next(line for line in lines if line.startswith("| knn † |"))  # †: knn does not train on the reward
    assert reader.split("|")[2].strip() == "no" and knn.split("|")[2].strip() == "yes"
