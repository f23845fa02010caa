"""The text controller's SFT teacher: a label-aware reward regression, cross-fitted.

Per query and model the teacher predicts the reward as the benchmark's mean training reward of
that model (what ``per-benchmark`` routes by) plus a ridge regression of the residual on TF-IDF
features of the question as the controller's prompt shows it (``text_regression``). The SFT
target is the route with the best prediction.

Cross-fitted: the training rows are cut into ``folds`` seeded folds and each fold's targets come
from a teacher fitted on the other folds, so a target says what the text predicts for a
question the teacher did not see, as held-out routing will (read back in-sample, the ridge
recalls each question's own noisy draw). With ``folds=1`` the teacher is fitted and read on the
same rows.

numpy and scikit-learn only; the reward is the one GRPO and compare use (``train_controller``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from routing_gym.envs.rewards import text_regression
from routing_gym.fronts.hull import benchmark_means


def teacher_rewards(
    texts: Sequence[str],
    values: np.ndarray,
    codes: np.ndarray,
    read_texts: Sequence[str],
    read_codes: np.ndarray,
    n_benchmarks: int,
    alpha: float,
) -> np.ndarray:
    """``[len(read_texts), K]`` predicted rewards: each benchmark's mean of ``values`` over the
    fitted rows (the mean of every row for a benchmark they lack) plus the text's residual."""
    values = np.asarray(values, dtype=np.float64)
    label = benchmark_means(values, codes, n_benchmarks)
    residual = values - label[np.asarray(codes)]
    return label[np.asarray(read_codes)] + text_regression(texts, residual, read_texts, alpha)


def cross_fitted_targets(
    texts: Sequence[str],
    values: np.ndarray,
    codes: np.ndarray,
    n_benchmarks: int,
    alpha: float,
    folds: int,
    seed: int,
) -> np.ndarray:
    """``[n]`` teacher routes of ``n`` rows (``values``: their ``[n, K]`` rewards), each read by
    a teacher fitted on the other folds (``folds >= 2``) or on all rows (``folds = 1``)."""
    n = len(texts)
    if folds < 1:
        raise ValueError(f"folds must be >= 1, got {folds}")
    codes = np.asarray(codes, dtype=np.int64)
    texts = list(texts)
    if folds == 1 or n < 2 * folds:  # too few rows to leave a fold out: in-sample
        return teacher_rewards(texts, values, codes, texts, codes, n_benchmarks, alpha).argmax(axis=1)
    fold = np.random.default_rng(seed).permutation(n) % folds
    predicted = np.zeros_like(np.asarray(values, dtype=np.float64))
    for f in range(folds):
        fit, read = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        predicted[read] = teacher_rewards([texts[i] for i in fit], values[fit], codes[fit],
                                          [texts[i] for i in read], codes[read], n_benchmarks, alpha)
    return predicted.argmax(axis=1)
