"""The observation preprocessor: shapes, train-only fitting, scikit-learn conventions, caching,
and the neural kind on a real tiny LM."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament

from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from routing_gym.envs import ObservationBatch
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.features import FEATURE_KINDS, ObservationFeaturizer, clear_feature_cache, fit_featurizer

TEXTS = ["solve the integral of x squared", "integral of sin x", "who wrote hamlet", "capital of france please"]
CODES = np.array([0, 0, 1, 2])


def batch(texts, codes, **extras) -> ObservationBatch:
    return ObservationBatch(np.asarray(texts, dtype=object), np.asarray(codes), {k: np.asarray(v) for k, v in extras.items()})


def featurizer(**params) -> ObservationFeaturizer:
    return ObservationFeaturizer(**{"n_benchmarks": 3, **params})


def train_featurizer(t, split: str, **params) -> ObservationFeaturizer:
    rows = t.split_rows(split)
    return fit_featurizer(ObservationBatch.from_tournament(t, rows), n_benchmarks=len(t.benchmarks), **params)


@pytest.mark.parametrize("kind", ["tfidf-svd", "tfidf", "hashing", "benchmark"])
def test_shapes_dtype_onehot_and_bias(kind: str) -> None:
    f = featurizer(kind=kind, dim=8, bias=True).fit(batch(TEXTS, CODES))
    X = f.transform(batch(TEXTS + ["an unseen question"], np.append(CODES, -1)))
    text_dim = 0 if kind == "benchmark" else 8
    assert X.dtype == np.float32 and X.shape == (5, text_dim + 3 + 1) == (5, f.n_features)
    onehot = X[:, text_dim : text_dim + 3]
    assert onehot[:4].argmax(axis=1).tolist() == CODES.tolist() and np.all(onehot[:4].sum(axis=1) == 1)
    assert np.all(onehot[4] == 0), "an unknown benchmark code has no one-hot"
    assert np.all(X[:, -1] == 1.0)


def test_tfidf_svd_pads_a_tiny_vocabulary_and_keeps_similarity() -> None:
    f = featurizer(kind="tfidf-svd", dim=64, benchmark_onehot=False).fit(batch(TEXTS, CODES))
    X = f.transform(batch(TEXTS, CODES))
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
    f = train_featurizer(t, "train", kind="tfidf", dim=500, benchmark_onehot=False)
    assert "zebra" not in f.vectorizer_.vocabulary_
    assert np.all(f.transform(batch(["zebra xylophone"], [0])) == 0)
    everything = train_featurizer(t, "all", kind="tfidf", dim=500, benchmark_onehot=False)
    assert "zebra" in everything.vectorizer_.vocabulary_


def test_cache_is_per_content_split_and_config() -> None:
    a, b = make_tournament(seed=0), make_tournament(seed=1)
    assert a.card.name == b.card.name  # same name, different questions
    f = train_featurizer(a, "train", dim=16)
    assert train_featurizer(a, "train", dim=16) is f
    assert train_featurizer(b, "train", dim=16) is not f
    assert train_featurizer(a, "train", dim=8) is not f
    assert train_featurizer(a, "test", dim=16) is not f


def test_scikit_learn_conventions_and_extra_keys() -> None:
    f = ObservationFeaturizer(kind="hashing", dim=16, n_benchmarks=3)
    assert clone(f).get_params() == f.get_params()
    observations = batch(TEXTS, CODES, difficulty=[[0.1], [0.2], [0.3], [0.9]], available=[[1, 0], [1, 1], [0, 1], [1, 1]])
    pipe = make_pipeline(f, StandardScaler()).fit(observations)
    assert pipe.transform(observations).shape == (4, 16 + 3 + 1 + 2)
    fitted = pipe[0]
    assert fitted.get_feature_names_out()[-3:].tolist() == ["difficulty", "available0", "available1"]
    X = fitted.transform(observations)
    np.testing.assert_allclose(X[:, -3], [0.1, 0.2, 0.3, 0.9], rtol=1e-6)
    # one observation dict, as an env returns it, gives the same row
    np.testing.assert_allclose(fitted.transform(observations.observation(2)), X[2:3])
    with pytest.raises(RoutingGymError, match="difficulty"):
        fitted.transform(batch(TEXTS, CODES))


def test_disk_cache_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path))
    t = make_tournament()
    train = ObservationBatch.from_tournament(t, t.split_rows("train"))
    f = fit_featurizer(train, disk=True, name=t.card.name, n_benchmarks=3, dim=12)
    files = list((tmp_path / "features").glob("*.pkl"))
    assert len(files) == 1 and t.card.name in files[0].name
    clear_feature_cache()
    g = fit_featurizer(train, disk=True, name=t.card.name, n_benchmarks=3, dim=12)
    assert g is not f
    new = batch(["a brand new question about joules"], [1])
    np.testing.assert_array_equal(f.transform(new), g.transform(new))


def test_pickle_round_trip_and_errors() -> None:
    f = featurizer(kind="hashing", dim=32).fit(batch(TEXTS, CODES))
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(f.transform(batch(TEXTS, CODES)), g.transform(batch(TEXTS, CODES)))
    with pytest.raises(RoutingGymError, match="not fitted"):
        featurizer().transform(batch(TEXTS, CODES))
    with pytest.raises(UnknownNameError, match="tfidf-svd"):
        featurizer(kind="word2vec").fit(batch(TEXTS, CODES))
    with pytest.raises(ValueError, match="n_benchmarks"):
        ObservationFeaturizer().fit(batch(TEXTS, CODES))
    with pytest.raises(ValueError, match="benchmark codes"):
        batch(TEXTS, CODES[:2])
    with pytest.raises(TypeError, match="ObservationBatch"):
        f.transform("one text")
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
    f = featurizer(kind="lm", dim=3, lm_path=str(tmp_path), benchmark_onehot=False).fit(batch(TEXTS, CODES))
    X = f.transform(batch(TEXTS, CODES))
    assert X.shape == (4, 3) and np.isfinite(X).all() and np.abs(X).sum() > 0
    # Padding must not change a text's embedding: alone vs. in a batch with longer texts.
    np.testing.assert_allclose(f._compute_text_block(TEXTS[2:3]), X[2:3], atol=1e-4)
    g = pickle.loads(pickle.dumps(f))  # weights are reloaded, not pickled
    np.testing.assert_allclose(g.transform(batch(TEXTS, CODES)), X, atol=1e-5)

