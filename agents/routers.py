"""Routing baselines after the reference paper's Table 2, built on scikit-learn.

- ``knn``: per-model error averaged over the question's nearest training questions (cosine; found
  exactly, as Euclidean neighbours of unit vectors by scikit-learn's GEMM search), plus a
  cost term: route to ``argmin_m err_m(x) + cost_weight * cost_m``.
- ``uniroute``: the same rule with ``err_m`` the error of the question's k-means cluster
  (UniRoute, Jitkrittum et al. 2025), shrunk towards the global error for small clusters.
- ``routellm``: a binary router between the strong model (the most accurate on the training
  split: RouteLLM's strong arm is its most capable model) and the weak one (the smallest); a
  logistic regression estimates P(strong wins | text) and the strong model is used when it
  reaches ``alpha`` (RouteLLM, Ong et al. 2024). It cannot read the benchmark label beyond its
  features, as in the paper; the fit logs name both arms.
- ``greenserv``: LinUCB over task (benchmark one-hot), cluster (k-means one-hot) and
  complexity features with reward ``(1 - lam) * correct - lam * joules / E_ref``, warmed
  online on the training split (bandit feedback) and then frozen (GreenServ-style).
- ``smoothie``: label-free, output-informed diagnostic (Smoothie, Guha et al. 2024): reads every
  model's *held-out* answer text, so it declares ``privileged = {"outputs"}`` and is not deployable.

``cost_m`` is model m's mean training joules divided by the largest model mean, so it lies in
(0, 1] and ``cost_weight`` trades error points for joules on every tournament alike.

Cost knobs (``cost_knob``, swept by ``routing-gym frontier``): ``cost_weight`` (knn, uniroute)
and ``alpha`` (routellm) are read at routing time only; greenserv's energy weight ``lam`` is
trained in, so it is refitted per value.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.errors import RoutingGymError
from routing_gym.eval.frontier import CostKnob
from routing_gym.features import ObservationFeaturizer
from routing_gym.tournament import Outcomes, Tournament
from routing_gym_agents.bandits import LinUCB
from routing_gym_agents.base import Agent, FitContext, PrivilegedAccess, featurizer_for_context
from routing_gym_agents.baselines import models_by_size
from routing_gym_agents.registry import register_agent

if TYPE_CHECKING:
    from routing_gym.eval.generalisation.unseen_models import ModelDescription


class _TextRouter(Agent):
    """Full-information router on TF-IDF + SVD features of the question (and benchmark)."""

    feedback = "full"
    trains_on_reward = False  # learns per-model correctness; joules enter through its own cost knob

    def __init__(self, features: str = "tfidf-svd", dim: int = 64):
        self.feature_config: dict[str, Any] = {"kind": features, "dim": dim}
        self.featurizer: ObservationFeaturizer | None = None

    def train_features(self, ctx: FitContext) -> np.ndarray:
        self.featurizer = featurizer_for_context(ctx, **self.feature_config)
        return self.featurizer.transform(ctx.train_observations())

    def batch_features(self, batch: ObservationBatch) -> np.ndarray:
        if self.featurizer is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return self.featurizer.transform(batch)


# Candidate cost weights: 0 ignores joules; 2 outweighs any error difference (costs are in (0, 1]).
COST_WEIGHT_KNOB = CostKnob("cost_weight", applies="act", cheaper_when="higher",
                            grid=(0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 2.0))


def model_costs(energy_j: np.ndarray) -> np.ndarray:
    """Mean joules per model (``[n, K]`` training outcomes) over the largest one: ``[K]`` in (0, 1]."""
    mean = np.asarray(energy_j).mean(axis=0)
    return mean / max(float(mean.max()), 1e-12)


KNN_WORKING_MEMORY_MB = 64


@register_agent("knn")
class KNNRouter(_TextRouter):
    """Per-model error of the ``k`` nearest training questions (cosine), plus a cost term."""

    name = "knn"
    seed_dependent = False
    cost_knob = COST_WEIGHT_KNOB

    def __init__(self, k: int = 10, cost_weight: float = 0.1, **kwargs: Any):
        super().__init__(**kwargs)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.cost_weight = cost_weight

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        from sklearn.neighbors import NearestNeighbors
        from sklearn.preprocessing import normalize

        # Cosine neighbours as Euclidean ones of unit vectors (|a - b|^2 = 2 - 2 cos): the same
        # neighbours up to ties, found by scikit-learn's GEMM-based exact search, several times
        # faster than its cosine metric (experiments/bench_compare.py --knn-check measures both).
        X = normalize(self.train_features(ctx))
        self.index = NearestNeighbors(n_neighbors=min(self.k, len(X)), algorithm="brute", metric="euclidean").fit(X)
        outcomes = ctx.train_outcomes()
        self.train_error = 1.0 - outcomes.correct  # [n_train, K]
        self.costs = model_costs(outcomes.energy_j)
        return {"costs": self.costs.tolist()}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        from sklearn import config_context
        from sklearn.preprocessing import normalize

        # Brute-force kNN computes query x train distances in chunks of sklearn's
        # working_memory (default 1 GB); smaller chunks keep a large test split's peak low.
        with config_context(working_memory=KNN_WORKING_MEMORY_MB):
            neighbours = self.index.kneighbors(normalize(self.batch_features(batch)), return_distance=False)
        error = self.train_error[neighbours].mean(axis=1)  # [n, K]
        return (error + self.cost_weight * self.costs).argmin(axis=1)


@register_agent("uniroute")
class UniRoute(_TextRouter):
    """k-means clusters of training questions; each cluster keeps a per-model error vector.

    A cluster's error is shrunk towards the global per-model error with ``prior`` pseudo
    questions, so a cluster of three questions does not decide on three coin flips.

    A model is its per-cluster error vector, so a new model is described as UniRoute describes
    one (``add_models``): its errors on the calibration questions, averaged per cluster and shrunk
    towards its own calibration mean with the same ``prior``; its cost is its mean calibration
    joules over the training pool's ``cost_scale`` (above 1 for a model dearer than every seen one).
    """

    name = "uniroute"
    cost_knob = COST_WEIGHT_KNOB
    describes_new_models = True

    def __init__(self, n_clusters: int = 8, cost_weight: float = 0.1, prior: float = 5.0, **kwargs: Any):
        super().__init__(**kwargs)
        if n_clusters < 1:
            raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
        self.n_clusters = n_clusters
        self.cost_weight = cost_weight
        self.prior = prior

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        from sklearn.cluster import KMeans

        X = self.train_features(ctx)
        n_clusters = min(self.n_clusters, len(X))
        self.kmeans = KMeans(n_clusters, n_init=4, random_state=ctx.seed).fit(X)
        outcomes = ctx.train_outcomes()
        self.cluster_error, counts = self._cluster_error(self.kmeans.labels_, 1.0 - outcomes.correct)
        self.costs = model_costs(outcomes.energy_j)
        self.cost_scale = max(float(outcomes.energy_j.mean(axis=0).max()), 1e-12)
        return {"cluster_sizes": counts.tolist(), "costs": self.costs.tolist()}

    def _cluster_error(self, labels: np.ndarray, error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[clusters, K]`` per-cluster error of ``[n, K]`` errors, shrunk to each model's mean; and the cluster sizes."""
        n_clusters = self.kmeans.n_clusters
        sums = np.zeros((n_clusters, error.shape[1]))
        np.add.at(sums, labels, error)
        counts = np.bincount(labels, minlength=n_clusters)
        return (sums + self.prior * error.mean(axis=0)) / (counts[:, None] + self.prior), counts

    def add_models(self, description: ModelDescription) -> None:
        """Append new models as per-cluster error vectors of their calibration outcomes (class docstring)."""
        clusters = self.kmeans.predict(self.batch_features(description.observations))
        error, _ = self._cluster_error(clusters, 1.0 - np.asarray(description.outcomes.correct, dtype=np.float64))
        self.cluster_error = np.hstack([self.cluster_error, error])
        self.costs = np.concatenate([self.costs, np.asarray(description.outcomes.energy_j).mean(axis=0) / self.cost_scale])

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.featurizer is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        clusters = self.kmeans.predict(self.batch_features(batch))
        return (self.cluster_error[clusters] + self.cost_weight * self.costs).argmin(axis=1)


@register_agent("routellm")
class RouteLLMRouter(_TextRouter):
    """Strong (most accurate on train) vs weak (smallest): the strong model when P(strong wins | x) >= alpha.

    "Strong wins" means the strong model is strictly more correct than the weak one on that
    question; lower ``alpha`` buys accuracy with joules.
    """

    name = "routellm"
    seed_dependent = False
    cost_knob = CostKnob("alpha", applies="act", cheaper_when="higher", grid=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9))

    def __init__(self, alpha: float = 0.5, C: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0 <= alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha = alpha
        self.C = C

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        from sklearn.linear_model import LogisticRegression

        X = self.train_features(ctx)
        outcomes = ctx.train_outcomes()
        correct = outcomes.correct
        accuracy = correct.mean(axis=0)
        best = np.flatnonzero(accuracy >= accuracy.max() - 1e-12)
        self.strong = int(best[outcomes.energy_j.mean(axis=0)[best].argmin()])  # ties: the cheaper
        # The weak arm: the smallest model, or the next smallest when the smallest is also the most accurate.
        self.weak = int(next(m for m in models_by_size(ctx.models, outcomes.energy_j) if m != self.strong or ctx.n_models == 1))
        y = (correct[:, self.strong] > correct[:, self.weak]).astype(int)
        self.classifier = None
        self.base_rate = float(y.mean())
        if 0 < y.sum() < len(y):  # a one-class label has nothing to learn: use the base rate
            self.classifier = LogisticRegression(C=self.C, max_iter=1000).fit(X, y)
        ids = ctx.model_ids
        return {"strong": ids[self.strong], "weak": ids[self.weak], "p_strong_wins_train": self.base_rate}

    def p_strong_wins(self, batch: ObservationBatch) -> np.ndarray:
        X = self.batch_features(batch)
        if self.classifier is None:
            return np.full(len(X), self.base_rate)
        return self.classifier.predict_proba(X)[:, 1]

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.where(self.p_strong_wins(batch) >= self.alpha, self.strong, self.weak)


def complexity_features(texts: np.ndarray) -> np.ndarray:
    """``[n, 5]`` raw question complexity: log chars, log words, digit / math-symbol / upper-case share."""
    rows = []
    for text in texts:
        text = str(text)
        n = max(len(text), 1)
        rows.append(
            (
                np.log1p(len(text)),
                np.log1p(len(text.split())),
                sum(ch.isdigit() for ch in text) / n,
                len(re.findall(r"[=+\-*/^<>$\\]", text)) / n,
                sum(ch.isupper() for ch in text) / n,
            )
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), 5)


@register_agent("greenserv")
class GreenServ(LinUCB):
    """LinUCB over [task one-hot, cluster one-hot, standardised complexity, 1] trained on the
    registered ``greenserv_pool`` reward, ``(1 - lam) * correct - lam * min(joules / E_ref, 1)``;
    warmed on train, frozen for evaluation.

    ``E_ref`` is the largest per-model mean training energy: one profiled number per pool, as
    GreenServ profiles each model's energy before serving; the arms still see only the chosen
    model's outcome. This objective is GreenServ's own (the method is defined by it), so it is
    recorded in the fit logs as ``objective`` instead of the context's reward.
    """

    name = "greenserv"
    trains_on_reward = False  # its own greenserv_pool objective (recorded in the fit logs)
    cost_knob = CostKnob("lam", applies="fit", cheaper_when="higher", grid=(0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9))

    def __init__(self, lam: float = 0.2, n_clusters: int = 8, alpha: float = 1.0, dim: int = 64, **kwargs: Any):
        super().__init__(alpha=alpha, dim=dim, **kwargs)
        if not 0 <= lam <= 1:
            raise ValueError(f"lam (energy weight) must be in [0, 1], got {lam}")
        self.energy_weight = lam
        self.n_clusters = n_clusters
        self.feature_config["bias"] = False  # text features only feed k-means; the context has its own bias

    def prepare(self, ctx: FitContext) -> None:
        from sklearn.cluster import KMeans

        self.featurizer = featurizer_for_context(ctx, **self.feature_config)
        train = ctx.train_observations()
        self.kmeans = KMeans(min(self.n_clusters, len(train)), n_init=4, random_state=ctx.seed).fit(self.featurizer.transform(train))
        complexity = complexity_features(train.texts)
        self.complexity_mean = complexity.mean(axis=0)
        self.complexity_std = complexity.std(axis=0) + 1e-9
        self.n_benchmarks = len(ctx.benchmarks)
        self.e_ref = float(ctx.train_outcomes().energy_j.mean(axis=0).max()) or 1.0
        lam = self.energy_weight
        # lam = 0.5 (GreenServ's own setting) sits on the reward's gate: allowed, on purpose.
        self.own_reward = Reward("greenserv_pool", {"lambda_e": lam, "scale_j": self.e_ref}, allow_ungated=lam >= 0.5)

    def contexts(self, batch: ObservationBatch) -> np.ndarray:
        text = self.featurizer.transform(batch)
        return self._contexts(text, batch.benchmarks, complexity_features(batch.texts))

    def _contexts(self, text: np.ndarray, benchmarks: np.ndarray, complexity: np.ndarray) -> np.ndarray:
        n = len(text)
        task = np.zeros((n, self.n_benchmarks))
        # An unseen benchmark's column never trained (its ridge weight is 0): no task feature, as the featurizer does.
        known = np.isin(benchmarks, self.featurizer.seen_benchmarks_)
        task[np.flatnonzero(known), benchmarks[known]] = 1.0
        cluster = np.zeros((n, self.kmeans.n_clusters))
        cluster[np.arange(n), self.kmeans.predict(text)] = 1.0
        z = (complexity - self.complexity_mean) / self.complexity_std
        return np.hstack([task, cluster, z, np.ones((n, 1))])

    def learning_reward(self, reward: float, info: dict[str, Any]) -> float:
        outcome = Outcomes(*(np.array([[float(info[k])]]) for k in ("correct", "energy_j", "latency_s", "mean_power_w")))
        return float(self.own_reward(outcome).total[0, 0])

    def objective(self, ctx: FitContext) -> str:
        return self.own_reward.describe()


@register_agent("smoothie")
class Smoothie(Agent):
    """Output-informed, label-free routing (Smoothie-local): the answer closest to consensus.

    Each model's answer is embedded (TF-IDF + SVD fitted on training answers). For a question,
    ``delta_ij`` is the mean squared distance between models i and j's answer embeddings over
    the question's ``n_neighbors`` nearest questions (all tournament rows, by question text).
    Under Smoothie's Gaussian model ``delta_ij = 1/theta_i + 1/theta_j``, so each triplet gives
    ``1/theta_i = (delta_ij + delta_ik - delta_jk) / 2``; the route is the model with the
    largest estimated quality ``theta_i``. Needs K >= 3 and ``output_text``.
    """

    name = "smoothie"
    feedback = "full"
    seed_dependent = False
    trains_on_reward = False  # label-free: answer consensus
    privileged = frozenset({"outputs"})

    def __init__(self, n_neighbors: int = 20, dim: int = 64):
        self.n_neighbors = n_neighbors
        self.dim = dim
        self.output_featurizer: ObservationFeaturizer | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.access: PrivilegedAccess = ctx.privileged
        t = _require_outputs(self.access.tournament, self.name)
        train = ctx.train_tournament
        outputs = train.output_text.ravel()
        self.output_featurizer = ObservationFeaturizer(kind="tfidf-svd", dim=self.dim, benchmark_onehot=False, n_benchmarks=1).fit(
            ObservationBatch(outputs, np.zeros(len(outputs), dtype=np.int64))
        )
        self.input_featurizer = featurizer_for_context(ctx, kind="tfidf-svd", dim=self.dim)
        self._cache: dict[str, tuple[np.ndarray, Any]] = {}
        return {"n_models": t.n_models}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.output_featurizer is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        t = self.access.tournament
        pair_dist, index = self._prepare(t)
        neighbours = index.kneighbors(self.input_featurizer.transform(batch), return_distance=False)
        delta = pair_dist[neighbours].mean(axis=1)  # [n, K, K]
        k = t.n_models
        inv_theta = np.zeros((len(batch), k))
        for i in range(k):
            others = [j for j in range(k) if j != i]
            pairs = [(j, m) for a, j in enumerate(others) for m in others[a + 1 :]]
            inv_theta[:, i] = np.mean([(delta[:, i, j] + delta[:, i, m] - delta[:, j, m]) / 2 for j, m in pairs], axis=0)
        return inv_theta.argmin(axis=1)

    def _prepare(self, t: Tournament) -> tuple[np.ndarray, Any]:
        """Per row, squared distances between every pair of models' answers; a question index
        over every tournament row (by question text). Keyed by the tournament's content."""
        if t.fingerprint not in self._cache:
            from sklearn.neighbors import NearestNeighbors

            n, k = t.output_text.shape
            emb = self.output_featurizer.transform(ObservationBatch(t.output_text.ravel(), np.zeros(n * k, dtype=np.int64)))
            emb = emb.reshape(n, k, -1).astype(np.float64)
            pair_dist = ((emb[:, :, None, :] - emb[:, None, :, :]) ** 2).sum(-1)  # [N, K, K]
            queries = self.input_featurizer.transform(ObservationBatch.from_tournament(t, np.arange(n)))
            index = NearestNeighbors(n_neighbors=min(self.n_neighbors, n), metric="cosine").fit(queries)
            self._cache = {t.fingerprint: (pair_dist, index)}  # one tournament at a time
        return self._cache[t.fingerprint]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}  # derived from the tournament; rebuilt on demand
        return state


def _require_outputs(t: Tournament, agent: str) -> Tournament:
    if t.output_text is None:
        raise RoutingGymError(
            f"{agent} routes on the models' answer texts, but tournament {t.card.name!r} has no output_text "
            "(it is an output-informed diagnostic: run it on a tournament collected with answers)"
        )
    if t.n_models < 3:
        raise RoutingGymError(f"{agent} needs at least 3 models to form triplets; {t.card.name!r} has {t.n_models}")
    return t
