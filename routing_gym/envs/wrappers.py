"""Gymnasium wrappers around ``RoutingEnv``.

``BoxObservation`` gives deep-RL libraries (Stable-Baselines3) a ``Box`` view of the question:
SB3 rejects ``Text`` spaces (and ``Dict``s holding one). The vector is the shared text
features of ``routing_gym.features`` (TF-IDF + SVD by default, plus the benchmark one-hot),
fitted on the tournament's *training* split only, whatever split the env replays, so that a
test-split env never leaks held-out vocabulary into the features.

Episodes stay one step long and end with ``terminated=True, truncated=False``: a truncated
episode would make SB3 bootstrap a value estimate into the bandit reward.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.errors import RoutingGymError

# Kinds whose text block has unit-length (L2-normalised) rows, so every column is in [-1, 1].
_BOUNDED_KINDS = ("tfidf-svd", "tfidf", "hashing", "benchmark")


class BoxObservation(gym.Wrapper):
    """Observation ``Box(float32, (d,))``: text features + benchmark one-hot (+ difficulty).

    Args:
        env: a ``RoutingEnv`` (possibly already wrapped).
        featurizer: a fitted ``routing_gym.features.TextFeaturizer``; by default one is fitted
            (and cached) on ``fit_split`` of the env's tournament with ``feature_config``.
        fit_split: the split the default featurizer learns its vocabulary from.
        **feature_config: ``routing_gym.features.FeatureConfig`` fields (``kind``, ``dim``, ...).

    The feature rows of the env's queries are computed once at construction and looked up
    by the ``row`` that ``RoutingEnv`` reports in ``info``, so a step costs no vectorizing.
    With ``include_difficulty=True`` on the env, the difficulty is appended as a last column.
    """

    def __init__(self, env: gym.Env, featurizer: Any = None, fit_split: str = "train", **feature_config: Any):
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, RoutingEnv):
            raise RoutingGymError(f"BoxObservation wraps a RoutingEnv, got {type(base).__name__}")
        from routing_gym.features import featurizer_for

        tournament = base.tournament
        if featurizer is None:
            if fit_split not in tournament.splits:
                raise RoutingGymError(
                    f"{tournament.card.name}: BoxObservation fits its features on split {fit_split!r}, which the "
                    f"tournament does not have (splits: {tournament.splits or 'none'}); call with_splits() first "
                    "or pass a fitted featurizer"
                )
            featurizer = featurizer_for(tournament, fit_split, **feature_config)
        elif feature_config:
            raise TypeError("pass either a fitted featurizer or feature options, not both")
        if not featurizer.fitted:
            raise RoutingGymError(f"{featurizer!r} is not fitted")
        if featurizer.n_benchmarks != len(tournament.benchmarks):
            raise RoutingGymError(
                f"featurizer was fitted for {featurizer.n_benchmarks} benchmarks, tournament "
                f"{tournament.card.name!r} has {len(tournament.benchmarks)}"
            )
        self.featurizer = featurizer
        # Feature row of every query of the env's split, keyed by tournament row.
        features = featurizer.transform(base.prompts, tournament.benchmark_codes[base.rows])
        self.with_difficulty: bool = "difficulty" in base.observation_space.spaces
        if self.with_difficulty:
            difficulty = base.tournament.queries["difficulty"].to_numpy(dtype=np.float32)[base.rows]
            features = np.hstack([features, difficulty[:, None]])
        bounded = featurizer.config.kind in _BOUNDED_KINDS
        low, high = (-1.0, 1.0) if bounded else (-np.inf, np.inf)
        if bounded:
            features = np.clip(features, low, high)  # float32 round-off must not leave the box
        self._features = np.ascontiguousarray(features, dtype=np.float32)
        self._position_of_row = {int(r): i for i, r in enumerate(base.rows)}
        self.observation_space = spaces.Box(low, high, shape=(self._features.shape[1],), dtype=np.float32)

    @property
    def n_features(self) -> int:
        return int(self.observation_space.shape[0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._box(info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._box(info), reward, terminated, truncated, info

    def _box(self, info: dict[str, Any]) -> np.ndarray:
        # A fresh array each call: check_env (and SB3 buffers) must never alias observations.
        return self._features[self._position_of_row[int(info["row"])]].copy()
