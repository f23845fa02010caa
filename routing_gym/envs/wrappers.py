"""Gymnasium wrappers around the routing environments.

``BoxObservation`` gives deep-RL libraries (Stable-Baselines3) a ``Box`` view of the
observation: SB3 rejects ``Text`` spaces (and ``Dict``s holding one). It is a plain
observation wrapper: the vector is computed from the observation the env returns — the
question text and benchmark through an ``ObservationFeaturizer`` (TF-IDF + SVD by default,
fitted on the tournament's *training* split only, whatever split the env replays), then every
other key of the observation (``difficulty``, ``budget_left``, ``queries_left``,
``available``, ``turn``, ...) flattened by gymnasium's rules. It works on every registered env.

Episodes keep the wrapped env's ends; the one-step envs end with ``terminated=True,
truncated=False`` (a truncated episode would make SB3 bootstrap a value into the reward).

The question part of a vector is cached by content, ``(text, benchmark)``, per featurizer and
shared by every env and vector env that uses it; a wrapper fills the cache with its env's whole
split in one batch when it is built. A query's vector is then a lookup (TF-IDF + SVD of one
question took ~5 ms, about 100 times the env's step).
"""

from __future__ import annotations

import weakref
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.observation import QUESTION_KEYS, ObservationBatch
from routing_gym.envs.replay import ReplayCore, ReplayEnv
from routing_gym.errors import RoutingGymError
from routing_gym.tournament import Tournament


# featurizer -> {(text, benchmark): float32 row}. Weak keys: a featurizer's cache goes with it.
_QUESTION_ROWS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], np.ndarray]] = weakref.WeakKeyDictionary()
_QUESTION_ROWS_MAX = 500_000  # rows cached per featurizer; past it, new questions are computed each time


class BoxFeatures:
    """The ``Box`` view of a ``Dict`` routing observation space: what ``BoxObservation``
    computes, as a picklable object an agent can keep (and save) without the env.

    ``features(batch)``: the question part through ``featurizer`` (text block, benchmark
    one-hot), then every other key of ``space`` flattened by gymnasium's rules, in space order.
    """

    def __init__(self, featurizer: Any, space: spaces.Dict):
        if not isinstance(space, spaces.Dict) or any(k not in space.spaces for k in QUESTION_KEYS):
            raise RoutingGymError(f"a Box view needs a Dict observation with 'text' and 'benchmark', got {space}")
        if not featurizer.fitted:
            raise RoutingGymError(f"{featurizer!r} is not fitted")
        if featurizer.extra_keys_:
            raise RoutingGymError(f"the Box view's featurizer covers text and benchmark only; it was fitted with {featurizer.extra_keys_}")
        n_benchmarks = int(space["benchmark"].n)
        if featurizer.benchmark_onehot and featurizer.n_benchmarks != n_benchmarks:
            raise RoutingGymError(f"featurizer was fitted for {featurizer.n_benchmarks} benchmarks, the env has {n_benchmarks}")
        self.featurizer = featurizer
        self.extra_keys = [k for k in space.spaces if k not in QUESTION_KEYS]
        self.extra_spaces = [space[k] for k in self.extra_keys]
        bound = 1.0 if featurizer.bounded else np.inf
        width = featurizer.n_features_out_
        lows, highs = [np.full(width, -bound, dtype=np.float32)], [np.full(width, bound, dtype=np.float32)]
        for sub in self.extra_spaces:
            flat = spaces.flatten_space(sub)
            lows.append(flat.low.astype(np.float32))
            highs.append(flat.high.astype(np.float32))
        self.observation_space = spaces.Box(np.concatenate(lows), np.concatenate(highs), dtype=np.float32)

    def features(self, batch: ObservationBatch) -> np.ndarray:
        """``float32 [n, d]``: the Box observations of a batch."""
        parts = [self.question_features(batch)]
        for key, sub in zip(self.extra_keys, self.extra_spaces):
            values = batch.get(key)
            if values is None:
                raise RoutingGymError(f"the Box view was built with observation key {key!r}; this batch has only {batch.keys}")
            parts.append(np.stack([spaces.flatten(sub, v) for v in values]).astype(np.float32).reshape(len(batch), -1))
        return np.ascontiguousarray(np.hstack(parts), dtype=np.float32)

    def question_features(self, batch: ObservationBatch) -> np.ndarray:
        """``float32 [n, width]``: the text and benchmark block, from the content cache; the
        questions not in it are featurized in one batch and added."""
        rows = _QUESTION_ROWS.setdefault(self.featurizer, {})
        keys = list(zip(batch.texts.tolist(), np.asarray(batch.benchmarks).tolist()))
        missing = [i for i, key in enumerate(keys) if key not in rows]
        computed: dict[tuple[str, int], np.ndarray] = {}
        if missing:
            index = np.asarray(missing, dtype=np.int64)
            block = self.featurizer.transform(ObservationBatch(batch.texts[index], np.asarray(batch.benchmarks)[index]))
            if self.featurizer.bounded:
                block = np.clip(block, -1.0, 1.0)  # float32 round-off must not leave the box
            block = np.asarray(block, dtype=np.float32)
            block.setflags(write=False)  # rows are shared between envs
            computed = {keys[i]: row for i, row in zip(missing, block)}
            if len(rows) + len(computed) <= _QUESTION_ROWS_MAX:
                rows.update(computed)
        out = np.empty((len(keys), self.featurizer.n_features_out_), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = rows[key] if key in rows else computed[key]
        return out


class BoxObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Observation ``Box(float32, (d,))``: text features + benchmark one-hot + the other keys.

    Args:
        env: any routing env (possibly already wrapped) with a ``Dict`` observation holding
            ``text`` and ``benchmark``.
        featurizer: a fitted ``ObservationFeaturizer`` of the question part; by default one is
            fitted (and shared, ``fit_featurizer``) on ``fit_split`` of the env's tournament.
        fit_split: the split the default featurizer learns its vocabulary from.
        **feature_params: ``ObservationFeaturizer`` parameters (``kind``, ``dim``, ...).

    ``features(batch)`` computes the same vectors for a whole ``ObservationBatch`` at once
    (e.g. to score a policy on a split: ``env.unwrapped.observations()``).
    """

    def __init__(self, env: gym.Env, featurizer: Any = None, fit_split: str = "train", **feature_params: Any):
        gym.utils.RecordConstructorArgs.__init__(self, featurizer=featurizer, fit_split=fit_split, **feature_params)
        gym.ObservationWrapper.__init__(self, env)
        if featurizer is None:
            featurizer = question_featurizer(env, fit_split, **feature_params)
        elif feature_params:
            raise TypeError("pass either a fitted featurizer or feature options, not both")
        self.box = BoxFeatures(featurizer, env.observation_space)
        self.featurizer = featurizer
        self.observation_space = self.box.observation_space
        base = env.unwrapped
        if isinstance(base, ReplayEnv):
            self.box.question_features(base.core.observations(include_difficulty=False))  # fill the cache

    @property
    def n_features(self) -> int:
        return int(self.observation_space.shape[0])

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        # A fresh array each call: check_env (and SB3 buffers) must never alias observations.
        return self.box.features(ObservationBatch.from_observations([observation]))[0]

    def features(self, batch: ObservationBatch) -> np.ndarray:
        """``float32 [n, d]``: the Box observations of a batch, as ``observation`` computes them one by one."""
        return self.box.features(batch)


def question_featurizer(env: gym.Env, fit_split: str = "train", **feature_params: Any) -> Any:
    """The shared featurizer of the question part, fitted on ``fit_split`` of ``env``'s tournament."""
    base = env.unwrapped
    if not isinstance(base, ReplayEnv):
        raise RoutingGymError(f"pass a fitted featurizer: {type(base).__name__} is not a replay env with a tournament")
    return tournament_featurizer(base.tournament, fit_split, **feature_params)


def tournament_featurizer(tournament: Tournament, fit_split: str = "train", **feature_params: Any) -> Any:
    """The shared featurizer of the question part, fitted on ``fit_split`` of ``tournament``."""
    from routing_gym.features import fit_featurizer

    if fit_split not in tournament.splits and fit_split != "all":
        raise RoutingGymError(
            f"{tournament.card.name}: the Box view fits its features on split {fit_split!r}, which the "
            f"tournament does not have (splits: {tournament.splits or 'none'}); call with_splits() first "
            "or pass a fitted featurizer"
        )
    train = ReplayCore(tournament, fit_split).observations(include_difficulty=False)
    return fit_featurizer(train, n_benchmarks=len(tournament.benchmarks), extra_keys=(), **feature_params)
