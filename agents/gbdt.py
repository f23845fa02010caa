"""``gbdt``: a per-model gradient-boosted correctness model, blended with the benchmark label.

Per model k, scikit-learn's ``HistGradientBoostingClassifier`` estimates P(k answers x
correctly) from the question's features (TF-IDF + SVD by default, reduced to ``dim``;
``features="e5"`` gives multilingual-e5 embeddings, the configuration the routers study runs where a
tournament is already embedded: embedding costs ~0.1 s of CPU per new question, so a default of e5
would make the first ``compare`` of every tournament minutes long), the benchmark one-hot and cheap scalar features: log characters, log
words, digit / math-symbol / upper-case share (``routers.complexity_features``) and the
number of answer options. This is the "predict each model's correctness, then route"
family that LLMRouterBench (arXiv 2601.07206) and RouterBench (arXiv 2403.12031) evaluate
with tree ensembles; the boosting library is scikit-learn's (Ke et al.'s LightGBM histogram
algorithm).

Trees cannot take the label's logit as an offset, so the nesting (``agents/nested.py``) is a
blend: ``P_k(x) = (1 - w) r_{b(x)k} + w P^gbdt_k(x)``, with the weight w chosen on frontier's
validation part of train by the value of its routes, from ``strengths`` ("label only", w = 0, among them);
the boosted models are fitted once per data part and every w reuses them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym_agents.nested import LabelNestedRouter, sigmoid
from routing_gym_agents.registry import register_agent
from routing_gym_agents.routers import complexity_features

# A line that opens an answer option: "A) ...", "(B) ...", "C. ..." (MMLU-Pro lists up to J).
OPTION_LINE = re.compile(r"^\s*\(?[A-J][).:]\s", re.MULTILINE)


def option_counts(texts: np.ndarray) -> np.ndarray:
    """``[n, 1]`` number of answer-option lines in each question text."""
    return np.array([[len(OPTION_LINE.findall(str(t)))] for t in texts], dtype=np.float64).reshape(len(texts), 1)


@register_agent("gbdt")
class GradientBoostedRouter(LabelNestedRouter):
    """Per-model ``HistGradientBoostingClassifier`` blended with the label (module docstring)."""

    name = "gbdt"
    strengths = (0.25, 0.5, 0.75, 1.0)  # blend weight of the boosted P
    strength_in_fit = False

    def __init__(self, features: str = "tfidf-svd", dim: int = 32, max_iter: int = 100, learning_rate: float = 0.1,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 40, l2_regularization: float = 1.0, **kwargs: Any):
        super().__init__(features=features, dim=dim, **kwargs)
        self.boosting = {"max_iter": max_iter, "learning_rate": learning_rate, "max_leaf_nodes": max_leaf_nodes,
                         "min_samples_leaf": min_samples_leaf, "l2_regularization": l2_regularization}

    def featurize(self, batch: ObservationBatch) -> np.ndarray:
        return np.hstack([super().featurize(batch), complexity_features(batch.texts), option_counts(batch.texts)])

    def fit_text(self, X: np.ndarray, offset: np.ndarray, Y: np.ndarray, strength: float | None, seed: int) -> list[Any]:
        return [self._fit_one(X, Y[:, k], seed) for k in range(Y.shape[1])]

    def _fit_one(self, X: np.ndarray, correct: np.ndarray, seed: int) -> Any:
        """One model's classifier, or its training rate (a float) when it is always or never right."""
        from sklearn.ensemble import HistGradientBoostingClassifier

        if correct.min() == correct.max():
            return float(correct.mean())
        weight = None
        if not np.isin(correct, (0.0, 1.0)).all():  # expected log loss of c: weight c on "right", 1 - c on "wrong"
            X, weight = np.vstack([X, X]), np.r_[correct, 1 - correct]
            correct = np.r_[np.ones(len(weight) // 2), np.zeros(len(weight) // 2)]
        model = HistGradientBoostingClassifier(early_stopping=False, random_state=seed, **self.boosting)
        return model.fit(X, correct.astype(int), sample_weight=weight)

    def fit_new_models(self, model: list[Any], X: np.ndarray, offset: np.ndarray, Y: np.ndarray, seen_offset: np.ndarray,
                       seen_Y: np.ndarray, strength: float) -> list[Any]:
        # One classifier per model, no shared part: a new model's is fitted on its calibration questions.
        return model + self.fit_text(X, offset, Y, None, self.seed)

    def text_proba(self, model: list[Any], X: np.ndarray, offset: np.ndarray, strength: float) -> np.ndarray:
        boosted = np.stack([np.full(len(X), m) if isinstance(m, float) else m.predict_proba(X)[:, 1] for m in model], axis=1)
        return (1 - strength) * sigmoid(offset) + strength * boosted
