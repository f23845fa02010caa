"""Text features: shapes, train-only fitting, caching, and the neural kind on a real tiny LM."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.features import (
    FEATURE_KINDS,
    TextFeaturizer,
    clear_feature_cache,
    featurizer_for,
    tournament_features,
)

TEXTS = ["solve the integral of x squared", "integral of sin x", "who wrote hamlet", "capital of france please"]
CODES = np.array([0, 0, 1, 2])


@pytest.mark.parametrize("kind", ["tfidf-svd", "tfidf", "hashing", "benchmark"])
def test_shapes_dtype_onehot_and_bias(kind: str) -> None:
    f = TextFeaturizer(kind=kind, dim=8, bias=True).fit(TEXTS, CODES, n_benchmarks=3)
    X = f.transform(TEXTS + ["an unseen question"], np.append(CODES, -1))
    text_dim = 0 if kind == "benchmark" else 8
    assert X.dtype == np.float32 and X.shape == (5, text_dim + 3 + 1) == (5, f.n_features)
    onehot = X[:, text_dim : text_dim + 3]
    assert onehot[:4].argmax(axis=1).tolist() == CODES.tolist() and np.all(onehot[:4].sum(axis=1) == 1)
    assert np.all(onehot[4] == 0), "an unknown benchmark code has no one-hot"
    assert np.all(X[:, -1] == 1.0)


def test_tfidf_svd_pads_a_tiny_vocabulary_and_keeps_similarity() -> None:
    f = TextFeaturizer(kind="tfidf-svd", dim=64, benchmark_onehot=False).fit(TEXTS, CODES, 3)
    X = f.transform(TEXTS, CODES)
    assert X.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    cosine = X @ X.T
    assert cosine[0, 1] > cosine[0, 2] and cosine[0, 1] > cosine[0, 3], "shared words must be closer"


def test_fitted_on_the_training_split_only() -> None:
    t = make_tournament(n=60)
    test_rows = t.split_rows("test")
    queries = t.queries.copy()
    queries.loc[test_rows, "prompt"] = "zebra xylophone"  # words that exist only in the test split
    t = replace(t, queries=queries)
    f = featurizer_for(t, split="train", kind="tfidf", dim=500, benchmark_onehot=False)
    assert "zebra" not in f._vectorizer.vocabulary_
    assert np.all(f.transform(["zebra xylophone"], [0]) == 0)
    everything = featurizer_for(t, split="all", kind="tfidf", dim=500, benchmark_onehot=False)
    assert "zebra" in everything._vectorizer.vocabulary_


def test_cache_is_per_content_split_and_config() -> None:
    a, b = make_tournament(seed=0), make_tournament(seed=1)
    assert a.card.name == b.card.name  # same name, different questions
    f = featurizer_for(a, dim=16)
    assert featurizer_for(a, dim=16) is f
    assert featurizer_for(b, dim=16) is not f
    assert featurizer_for(a, dim=8) is not f
    assert featurizer_for(a, split="test", dim=16) is not f
    X = tournament_features(a, dim=16)
    assert X.shape == (a.n_queries, f.n_features) and tournament_features(a, dim=16) is X
    np.testing.assert_array_equal(X, f.transform(a.queries["prompt"], a.benchmark_codes))
    with pytest.raises(ValueError):
        X[0, 0] = 1.0  # shared matrix is read-only


def test_disk_cache_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    t = make_tournament()
    f = featurizer_for(t, disk=True, dim=12)
    files = list((tmp_path / "features").glob("*.pkl"))
    assert len(files) == 1 and t.card.name in files[0].name
    clear_feature_cache()
    g = featurizer_for(t, disk=True, dim=12)
    assert g is not f
    texts = ["a brand new question about joules"]
    np.testing.assert_array_equal(f.transform(texts, [1]), g.transform(texts, [1]))


def test_pickle_round_trip_and_errors() -> None:
    f = TextFeaturizer(kind="hashing", dim=32).fit(TEXTS, CODES, 3)
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(f.transform(TEXTS, CODES), g.transform(TEXTS, CODES))
    with pytest.raises(RoutingGymError, match="not fitted"):
        TextFeaturizer().transform(TEXTS, CODES)
    with pytest.raises(UnknownNameError, match="tfidf-svd"):
        TextFeaturizer(kind="word2vec")
    with pytest.raises(ValueError, match="benchmark codes"):
        f.transform(TEXTS, CODES[:2])
    with pytest.raises(TypeError, match="single str"):
        f.transform("one text", [0])
    assert set(FEATURE_KINDS) >= {"tfidf-svd", "tfidf", "hashing", "benchmark", "lm"}


def _tiny_causal_lm(path) -> None:
    """A real (random-weight) Llama causal LM with a word-level tokenizer, saved locally."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "</s>"] + sorted({w for t in TEXTS for w in t.split()}))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>")
    fast.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
    )
    LlamaForCausalLM(config).save_pretrained(path)


@pytest.mark.slow
def test_lm_mean_pooled_embeddings(tmp_path) -> None:
    pytest.importorskip("transformers")
    _tiny_causal_lm(tmp_path)
    f = TextFeaturizer(kind="lm", dim=3, lm_path=str(tmp_path), benchmark_onehot=False).fit(TEXTS, CODES, 3)
    X = f.transform(TEXTS, CODES)
    assert X.shape == (4, 3) and np.isfinite(X).all() and np.abs(X).sum() > 0
    # Padding must not change a text's embedding: alone vs. in a batch with longer texts.
    np.testing.assert_allclose(f.transform(TEXTS[2:3], [1]), X[2:3], atol=1e-4)
    g = pickle.loads(pickle.dumps(f))  # weights are reloaded, not pickled
    np.testing.assert_allclose(g.transform(TEXTS, CODES), X, atol=1e-5)

