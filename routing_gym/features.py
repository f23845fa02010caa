"""Text features shared by agents (bandits, kNN, UniRoute, ...) and env wrappers (SB3 Box views).

A ``TextFeaturizer`` turns question texts plus benchmark codes into a dense ``float32``
matrix with a fixed number of columns ``n_features``::

    f = TextFeaturizer(kind="tfidf-svd", dim=64).fit(train_texts, train_benchmarks, n_benchmarks)
    X = f.transform(texts, benchmarks)          # float32 [n, f.n_features]

Kinds (``FEATURE_KINDS``):

- ``"tfidf-svd"``: TF-IDF of word 1-2 grams reduced to ``dim`` columns by TruncatedSVD (LSA);
- ``"tfidf"``: TF-IDF restricted to the ``dim`` most frequent terms;
- ``"hashing"``: HashingVectorizer with ``dim`` buckets (stateless, no vocabulary);
- ``"benchmark"``: no text columns, only the benchmark one-hot;
- ``"lm"``: mean-pooled last hidden states of a local causal LM (the offline SmolLM2 from
  ``routing_gym.offline_llm.load_offline_model()``, or a transformers directory ``lm_path``),
  PCA-reduced to ``dim``;
- ``"sentence-transformers"``: a sentence-transformers model (needs the package and the
  Hub or a local copy), PCA-reduced to ``dim``.

Every kind appends the benchmark one-hot (``benchmark_onehot=True``) and optionally a
constant column (``bias=True``). Everything learned (vocabulary, SVD, PCA) is fitted on the
training split only. When a fitted kind has fewer components than ``dim`` (a tiny
vocabulary), the missing columns are zeros, so the shape never depends on the data.

``featurizer_for(tournament, split="train", **config)`` fits once per (tournament content,
split, config) and caches the result in memory and, with ``disk=True``, under
``routing_gym.paths.cache_dir() / "features"``.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.tournament import Tournament

FEATURE_KINDS = ("tfidf-svd", "tfidf", "hashing", "benchmark", "lm", "sentence-transformers")
_NEURAL = ("lm", "sentence-transformers")


@dataclass(frozen=True)
class FeatureConfig:
    """How texts become vectors; every field is part of the cache key."""

    kind: str = "tfidf-svd"  # one of FEATURE_KINDS
    dim: int = 64  # text columns (before the benchmark one-hot and bias)
    benchmark_onehot: bool = True  # append one column per benchmark
    bias: bool = False  # append a constant 1 column (linear models without an intercept)
    ngram_max: int = 2  # word n-grams 1..ngram_max for tfidf / hashing
    seed: int = 0  # TruncatedSVD / PCA randomness
    lm_path: str | None = None  # "lm": a transformers model directory; None = the offline SmolLM2
    st_model: str = "sentence-transformers/all-MiniLM-L6-v2"  # "sentence-transformers" model name
    batch_size: int = 16  # neural kinds: texts per forward pass
    max_length: int = 256  # neural kinds: tokens kept per text

    def __post_init__(self) -> None:
        if self.kind not in FEATURE_KINDS:
            raise UnknownNameError("feature kind", self.kind, list(FEATURE_KINDS))
        if self.dim < 0 or (self.dim == 0 and self.kind != "benchmark"):
            raise ValueError(f"feature dim must be > 0 for kind {self.kind!r}, got {self.dim}")
        if self.ngram_max < 1:
            raise ValueError(f"ngram_max must be >= 1, got {self.ngram_max}")


class TextFeaturizer:
    """Fit on training texts, then map any texts (and benchmark codes) to ``float32 [n, d]``."""

    def __init__(self, config: FeatureConfig | None = None, **kwargs: Any):
        if config is not None and kwargs:
            raise TypeError("pass either a FeatureConfig or keyword options, not both")
        self.config = config or FeatureConfig(**kwargs)
        if self.config.kind == "benchmark":
            self.config = FeatureConfig(**{**asdict(self.config), "dim": 0})
        self.n_benchmarks: int | None = None
        self._vectorizer: Any = None  # sklearn TfidfVectorizer / HashingVectorizer
        self._reducer: Any = None  # TruncatedSVD (sparse) or PCA (dense embeddings)
        self._encoder: _NeuralEncoder | None = None

    # ------------------------------------------------------------------ public API
    @property
    def fitted(self) -> bool:
        return self.n_benchmarks is not None

    @property
    def n_features(self) -> int:
        """Columns of ``transform``'s output (text dim + one-hot + bias)."""
        self._check_fitted()
        c = self.config
        return c.dim + (self.n_benchmarks if c.benchmark_onehot else 0) + int(c.bias)

    def fit(self, texts: Sequence[str], benchmarks: Sequence[int] | np.ndarray, n_benchmarks: int) -> TextFeaturizer:
        """Learn the vocabulary / projection from training texts; returns ``self``."""
        texts = _as_texts(texts)
        if len(texts) == 0:
            raise RoutingGymError("TextFeaturizer.fit needs at least one training text")
        if len(np.asarray(benchmarks)) != len(texts):
            raise ValueError(f"fit got {len(texts)} texts but {len(np.asarray(benchmarks))} benchmark codes")
        if n_benchmarks < 1:
            raise ValueError(f"n_benchmarks must be >= 1, got {n_benchmarks}")
        c = self.config
        if c.kind in ("tfidf", "tfidf-svd"):
            from sklearn.feature_extraction.text import TfidfVectorizer

            self._vectorizer = TfidfVectorizer(
                ngram_range=(1, c.ngram_max),
                sublinear_tf=True,
                max_features=c.dim if c.kind == "tfidf" else None,
                dtype=np.float32,
            )
            sparse = self._vectorizer.fit_transform(texts)
            if c.kind == "tfidf-svd":
                # TruncatedSVD needs fewer components than both matrix sides; pad the rest.
                n_components = min(c.dim, sparse.shape[1] - 1, sparse.shape[0] - 1)
                if n_components >= 1:
                    from sklearn.decomposition import TruncatedSVD

                    self._reducer = TruncatedSVD(n_components, random_state=c.seed).fit(sparse)
        elif c.kind == "hashing":
            from sklearn.feature_extraction.text import HashingVectorizer

            self._vectorizer = HashingVectorizer(
                n_features=c.dim, ngram_range=(1, c.ngram_max), alternate_sign=False, dtype=np.float32
            )
        elif c.kind in _NEURAL:
            self._encoder = _NeuralEncoder(c)
            embeddings = self._encoder.encode(texts)
            n_components = min(c.dim, embeddings.shape[1], embeddings.shape[0])
            if n_components < embeddings.shape[1]:
                from sklearn.decomposition import PCA

                self._reducer = PCA(n_components, random_state=c.seed).fit(embeddings)
        self.n_benchmarks = int(n_benchmarks)
        return self

    def transform(self, texts: Sequence[str], benchmarks: Sequence[int] | np.ndarray) -> np.ndarray:
        """``float32 [n, n_features]``; benchmark codes outside [0, B) get an all-zero one-hot."""
        self._check_fitted()
        texts = _as_texts(texts)
        codes = np.asarray(benchmarks, dtype=np.int64).reshape(-1)
        if len(codes) != len(texts):
            raise ValueError(f"transform got {len(texts)} texts but {len(codes)} benchmark codes")
        c = self.config
        parts = [self._text_block(texts)] if c.dim else []
        if c.benchmark_onehot:
            onehot = np.zeros((len(texts), self.n_benchmarks), dtype=np.float32)
            known = (codes >= 0) & (codes < self.n_benchmarks)
            onehot[np.flatnonzero(known), codes[known]] = 1.0
            parts.append(onehot)
        if c.bias:
            parts.append(np.ones((len(texts), 1), dtype=np.float32))
        if not parts:
            return np.zeros((len(texts), 0), dtype=np.float32)
        return np.ascontiguousarray(np.hstack(parts), dtype=np.float32)

    def fit_transform(self, texts: Sequence[str], benchmarks: Sequence[int] | np.ndarray, n_benchmarks: int) -> np.ndarray:
        return self.fit(texts, benchmarks, n_benchmarks).transform(texts, benchmarks)

    def __getstate__(self) -> dict[str, Any]:
        # The neural encoder (torch weights) is reloaded on demand instead of pickled.
        state = dict(self.__dict__)
        state["_encoder"] = None
        return state

    def __repr__(self) -> str:
        c = self.config
        return f"TextFeaturizer(kind={c.kind!r}, dim={c.dim}, fitted={self.fitted})"

    # ------------------------------------------------------------------ internals
    def _check_fitted(self) -> None:
        if not self.fitted:
            raise RoutingGymError(f"{self!r} is not fitted: call fit(train_texts, train_benchmarks, n_benchmarks) first")

    def _text_block(self, texts: list[str]) -> np.ndarray:
        c = self.config
        if c.kind in _NEURAL:
            if self._encoder is None:
                self._encoder = _NeuralEncoder(c)
            dense = self._encoder.encode(texts)
        else:
            sparse = self._vectorizer.transform(texts)
            if c.kind == "tfidf-svd":
                if self._reducer is None:  # a one-word vocabulary: nothing to project
                    return np.zeros((len(texts), c.dim), dtype=np.float32)
                dense = self._reducer.transform(sparse)
                # LSA convention: unit-length rows, so similarity is cosine and scales stay comparable.
                norms = np.linalg.norm(dense, axis=1, keepdims=True)
                return _pad(dense / np.where(norms > 0, norms, 1.0), c.dim)
            return _pad(sparse.toarray(), c.dim)
        if self._reducer is not None:
            dense = self._reducer.transform(dense)
        return _pad(dense, c.dim)


def _as_texts(texts: Sequence[str] | np.ndarray) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("expected a sequence of texts, got a single str (wrap it in a list)")
    return ["" if t is None else str(t) for t in texts]


def _pad(matrix: np.ndarray, dim: int) -> np.ndarray:
    """Zero-pad (never truncate) to exactly ``dim`` columns."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.shape[1] == dim:
        return matrix
    out = np.zeros((matrix.shape[0], dim), dtype=np.float32)
    out[:, : matrix.shape[1]] = matrix
    return out


class _NeuralEncoder:
    """Mean-pooled embeddings of a causal LM or a sentence-transformers model (lazy imports)."""

    def __init__(self, config: FeatureConfig):
        self.config = config
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        c = self.config
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


# ---------------------------------------------------------------------- per-tournament cache
_CACHE: dict[str, TextFeaturizer] = {}


def featurizer_for(
    tournament: Tournament, split: str = "train", disk: bool = False, **config: Any
) -> TextFeaturizer:
    """A featurizer fitted on ``split`` of ``tournament`` (cached; the same object is returned
    for the same tournament content, split and config).

    The key hashes the tournament name, the split's prompts and the benchmark list, so two
    tournaments that share a name but not their questions never share features. With
    ``disk=True`` the fitted featurizer is also pickled under ``cache_dir()/features`` (worth
    it for the neural kinds).
    """
    cfg = FeatureConfig(**config)
    rows = tournament.split_rows(split)
    key = _cache_key(tournament, split, rows, cfg)
    if key in _CACHE:
        return _CACHE[key]
    path = None
    if disk:
        from routing_gym.paths import cache_dir

        folder = cache_dir() / "features"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_safe(tournament.card.name)}-{split}-{key[:16]}.pkl"
        if path.exists():
            with open(path, "rb") as handle:
                _CACHE[key] = pickle.load(handle)
            return _CACHE[key]
    texts = tournament.queries["prompt"].to_numpy(dtype=object)[rows]
    featurizer = TextFeaturizer(cfg).fit(texts, tournament.benchmark_codes[rows], len(tournament.benchmarks))
    if path is not None:
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as handle:
            pickle.dump(featurizer, handle)
        tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    _CACHE[key] = featurizer
    return featurizer


# All-rows feature matrices per (featurizer, tournament content): online agents index rows.
_MATRICES: dict[tuple[int, str], np.ndarray] = {}


def tournament_features(tournament: Tournament, split: str = "train", **config: Any) -> np.ndarray:
    """``float32 [N, d]`` features of *every* query of the tournament (row order), with the
    featurizer fitted on ``split`` only; cached, so online agents can index rows cheaply."""
    featurizer = featurizer_for(tournament, split, **config)
    key = (id(featurizer), _content_hash(tournament))
    if key not in _MATRICES:
        texts = tournament.queries["prompt"].to_numpy(dtype=object)
        matrix = featurizer.transform(texts, tournament.benchmark_codes)
        matrix.setflags(write=False)  # shared between agents: nobody may modify it in place
        _MATRICES[key] = matrix
    return _MATRICES[key]


def clear_feature_cache() -> None:
    """Forget every in-memory featurizer and matrix (the disk cache stays)."""
    _CACHE.clear()
    _MATRICES.clear()


def _content_hash(tournament: Tournament, rows: np.ndarray | None = None) -> str:
    q = tournament.queries if rows is None else tournament.queries.iloc[rows]
    h = hashlib.sha1(tournament.card.name.encode())
    h.update("\x1f".join(tournament.benchmarks).encode())
    h.update("\x1e".join(q["prompt"].astype(str)).encode())
    h.update(np.asarray(tournament.benchmark_codes if rows is None else tournament.benchmark_codes[rows]).tobytes())
    return h.hexdigest()


def _cache_key(tournament: Tournament, split: str, rows: np.ndarray, cfg: FeatureConfig) -> str:
    import sklearn

    payload = repr((split, sorted(asdict(cfg).items()), sklearn.__version__, _content_hash(tournament, rows)))
    return hashlib.sha1(payload.encode()).hexdigest()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "tournament"
