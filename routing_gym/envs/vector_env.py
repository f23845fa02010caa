"""``RoutingVectorEnv``: B routing envs stepped as arrays over one shared replay core.

A replay step is a table lookup, so a vector of B of them is a handful of numpy gathers:
rewards, correctness, joules, seconds and watts of all B routes at once, then the next B
questions. It is the ``vector_entry_point`` of every RoutingGym id, so
``gym.make_vec("RoutingGym/Replay-v0", num_envs=B)`` returns it (``registration.py``).

- **One core, B envs.** The split's question texts, benchmark codes and ``[n, K]`` reward of
  every route are held once (``ReplayCore`` without its scoring tables, the reward computed in
  row blocks); outcomes are gathered from the tournament's own read-only arrays. Nothing is
  copied per env.
- **Episodes.** Each step ends every env's one-step episode (``terminated`` all true,
  ``truncated`` all false) and shows the next B questions at once: same-step autoreset
  (``metadata["autoreset_mode"]``), so every step is a real decision.
- **Query streams.** The B envs are dealt the split's queries from one stream with the single
  env's rule (``QuerySampler``): ``order="shuffle"`` draws a seeded permutation per pass and
  deals it B at a time, so no query repeats within a pass, and ``num_envs=1`` replays exactly the
  queries of ``RoutingEnv`` with the same seed; ``order="sequential"`` deals table order.
  (B separately shuffled streams would hold B permutations of the split: 800 MB for
  100,000 queries at B = 1,024.) ``reset(options={"index": [...]})`` or
  ``{"query_id": [...]}`` pins the B questions shown.
- **Observations.** ``observation="dict"``: the single env's ``Dict`` batched: ``text`` an
  object array of B strings, ``benchmark`` an int array, ``difficulty`` ``[B, 1]`` when
  configured. ``observation="features"``: ``float32 [B, d]`` rows of the shared featurizer's
  ``Box`` view (``BoxFeatures``; default featurizer fitted on ``fit_split``), computed once for
  the split, so a neural policy never touches text at step time.
- **Actions.** One per env, by the single env's rule (``routing_gym.tournament.scoring``):
  ``invalid_action="raise"`` raises ``InvalidActionError`` naming the env before anything
  moves; ``"penalize"`` scores ``invalid_penalty`` for that env only.
- **Infos** (arrays, each with its gymnasium ``_key`` mask): after ``reset`` and ``step``,
  ``row`` (tournament row) of the questions now shown; after ``step``, ``final_info`` holds
  the ended episodes' ``row``, ``action`` (the model index; -1 when invalid), ``valid``,
  ``correct``, ``energy_j``, ``latency_s``, ``mean_power_w`` and ``oracle_reward`` (privileged:
  the bandit-feedback view of ``FitContext`` strips it and hides ``reward_matrix``). The
  ended episode's observation is the one the previous call returned (a one-step episode
  never changes it), so no ``final_obs`` is repeated; model ids are ``tournament.model_ids[action]``
  (an object array per step would cost more than the rest of the step).

- **Held-out evaluation.** ``observations()`` is the whole split in order, as these envs show
  it (an ``ObservationBatch``, or the feature matrix), and ``evaluate(actions)`` scores one
  action per query with the one scorer, as ``RoutingEnv.evaluate``.

``per_env_infos`` turns such infos into one dict per env (the ended episode's where one
ended); ``to_sb3`` wraps any same-step vector env as a Stable-Baselines3 ``VecEnv``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from routing_gym.envs.replay import BanditView, QuerySampler, ReplayCore, RoutingConfig, checked_render_mode
from routing_gym.envs.rewards import Reward
from routing_gym.envs.wrappers import BoxFeatures, tournament_featurizer
from routing_gym.errors import InvalidActionError, RoutingGymError
from routing_gym.tournament import Tournament
from routing_gym.tournament.scoring import INVALID, BatchResult, ScoringTable, action_index, coerce_actions

OBSERVATIONS = ("dict", "features")
_REWARD_BLOCK_ROWS = 4096  # rows per reward call at construction: bounds the peak memory


def reward_matrix_in_blocks(tournament: Tournament, rows: np.ndarray, reward: Reward) -> np.ndarray:
    """``[len(rows), K]`` reward of every route, computed a block of rows at a time (a reward is
    row-wise: each query's routes are ranked among themselves), so building it never holds
    more than one block's outcome copies."""
    out = np.empty((len(rows), tournament.n_models), dtype=np.float64)
    for start in range(0, len(rows), _REWARD_BLOCK_ROWS):
        block = rows[start : start + _REWARD_BLOCK_ROWS]
        out[start : start + len(block)] = reward(tournament.outcomes(block)).total
    out.setflags(write=False)
    return out


class RoutingVectorEnv(BanditView, VectorEnv):
    """``num_envs`` ``RoutingEnv``s stepped together (see the module docstring).

    Args:
        num_envs: B, the number of envs.
        config: a ``RoutingConfig``; or pass its fields as keyword options (``tournament=``,
            ``split=``, ``reward=``, ``coefficients=``, ``invalid_action=``, ...), as for
            ``RoutingEnv``.
        observation: ``"dict"`` (text, benchmark[, difficulty]) or ``"features"`` (``Box``).
        featurizer: a fitted ``ObservationFeaturizer`` for ``"features"``; default: the shared
            one fitted on ``fit_split`` of the tournament with ``feature_params``.
        render_mode: gymnasium's; None only (nothing renders).
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        config: RoutingConfig | None = None,
        *,
        observation: str = "dict",
        featurizer: Any = None,
        fit_split: str = "train",
        feature_params: Mapping[str, Any] | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        self.render_mode = checked_render_mode(type(self), render_mode)
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        if observation == "dict" and (featurizer is not None or feature_params):
            raise TypeError("featurizer / feature_params apply to observation='features' only")
        self.config: RoutingConfig = RoutingConfig.resolve(config, overrides, type(self).__name__)
        if self.config.stream is not None:
            raise ValueError(
                "RoutingVectorEnv steps one-query episodes with same-step autoreset (no reset step to amortize); "
                "gym.make_vec(id, num_envs=B, stream=T) vectorizes streams (a SyncVectorEnv, same-step autoreset)"
            )
        from routing_gym.sources import resolve_tournament  # sources sit beside envs; import on use

        self.tournament = resolve_tournament(self.config.tournament)
        self.num_envs = int(num_envs)
        self.observation_mode = observation
        self.reward = self.config.make_reward()
        self.core = ReplayCore(self.tournament, self.config.split)  # no reward: no per-route tables
        self.sampler = QuerySampler(len(self.core), self.config.order)
        n_models = self.tournament.n_models
        matrix = reward_matrix_in_blocks(self.tournament, self.core.rows, self.reward)
        self._reward_matrix = matrix
        self._oracle = matrix.max(axis=1)
        # Flat gathers: route (position, a) is reward_flat[position * K + a]; its outcomes sit
        # at row_offset[position] + a of the tournament's own [N, K] arrays.
        self._reward_flat = matrix.reshape(-1)
        self._row_offset = self.core.rows * n_models
        t = self.tournament
        self._outcome_flat = {
            name: np.ascontiguousarray(getattr(t, name)).reshape(-1)
            for name in ("correct", "energy_j", "latency_s", "mean_power_w")
        }
        self._k, self._k_unsigned = np.int64(n_models), np.uint64(n_models)  # numpy scalars: no conversion per step

        question = spaces.Dict(self.core.question_spaces(self.config.include_difficulty))
        self._features: np.ndarray | None = None
        if observation == "features":
            if featurizer is None:
                featurizer = tournament_featurizer(t, fit_split, **dict(feature_params or {}))
            elif feature_params:
                raise TypeError("pass either a fitted featurizer or feature_params, not both")
            self.box: BoxFeatures | None = BoxFeatures(featurizer, question)
            self.featurizer = featurizer
            self._features = self.box.features(self.core.observations(self.config.include_difficulty))
            self._features.setflags(write=False)
            self.single_observation_space = self.box.observation_space
        else:
            self.box = None
            self.featurizer = None
            self.single_observation_space = question
        self.single_action_space = spaces.Discrete(n_models)
        self.observation_space = self._batched(self.single_observation_space)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        # Preallocated: the constant episode ends (read-only, safe to share), index scratch, masks.
        b = self.num_envs
        self._terminated = np.ones(b, dtype=bool)
        self._truncated = np.zeros(b, dtype=bool)
        self._all = np.ones(b, dtype=bool)
        for array in (self._terminated, self._truncated, self._all):
            array.setflags(write=False)
        self._route = np.empty(b, dtype=np.int64)
        self._cell = np.empty(b, dtype=np.int64)
        self._positions: np.ndarray | None = None
        self._scoring: ScoringTable | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Seed (an int: one generator for the whole vector, as the single env's) and show B new
        questions; ``options`` ``{"index": [B positions]}`` or ``{"query_id": [B ids]}`` pins them."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}.reset(seed=...) takes one int for the whole vector, got {seed!r}")
        super().reset(seed=None if seed is None else int(seed))
        if seed is not None:
            self.sampler.restart()
        self._positions = self._pinned(options) if options else self.sampler.next_many(self.np_random, self.num_envs)
        return self._observe(self._positions), self._shown_info(self._positions)

    def step(self, actions: Any):
        if self._positions is None:
            raise RoutingGymError("step() called before reset(): reset() shows the first B questions")
        a = coerce_actions(actions, self.num_envs)
        valid = np.less(a.view(np.uint64), self._k_unsigned)  # negatives (INVALID) wrap to huge
        all_valid = bool(valid.all())
        if not all_valid:
            if self.config.invalid_action == "raise":
                raise InvalidActionError(self._invalid_message(actions, a, valid))
            a[~valid] = INVALID
        safe = a if all_valid else np.where(valid, a, 0)
        positions = self._positions
        np.multiply(positions, self._k, out=self._route)
        np.add(self._route, safe, out=self._route)
        np.take(self._row_offset, positions, out=self._cell)
        np.add(self._cell, safe, out=self._cell)
        rewards = self._reward_flat.take(self._route)
        final_info = {"row": self.core.rows.take(positions), "action": a, "valid": valid}
        for name, flat in self._outcome_flat.items():
            final_info[name] = flat.take(self._cell)
        final_info["oracle_reward"] = self._oracle.take(positions)
        if not all_valid:
            rewards[~valid] = self.reward.invalid_penalty
            for name in self._outcome_flat:
                final_info[name][~valid] = 0.0
        self._positions = self.sampler.next_many(self.np_random, self.num_envs)
        infos = self._shown_info(self._positions)
        infos["final_info"] = self._with_masks(final_info)
        infos["_final_info"] = self._all
        return self._observe(self._positions), rewards, self._terminated, self._truncated, infos

    # ------------------------------------------------------------------ held-out evaluation
    def observations(self) -> Any:
        """Every query of the split in split order, as these envs show one: an
        ``ObservationBatch`` (``observation="dict"``, for ``Agent.act_batch``) or the ``[n, D]``
        feature matrix (``"features"``, for an SB3 policy's ``predict``)."""
        if self._features is not None:
            return self._features
        return self.core.observations(self.config.include_difficulty)

    def evaluate(self, actions: Any) -> BatchResult:
        """Score one action per query of the split (split order, as ``observations()``) with the
        one scorer (``routing_gym.tournament.scoring``), as ``RoutingEnv.evaluate`` does; invalid
        actions earn ``invalid_penalty``, count as wrong and cost nothing."""
        if self._scoring is None:  # stacked on first use: training never needs it
            self._scoring = ScoringTable(self.reward_matrix, self.core.outcomes, self.reward.invalid_penalty)
        return self._scoring.score(actions)

    def render(self) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} has nothing to draw: an episode is a question and a route. "
            "Read the step infos, or plot results with routing_gym.eval.core.plots"
        )

    # ------------------------------------------------------------------ helpers
    @property
    def reward_matrix(self) -> np.ndarray:
        """``[n_split, K]`` reward of every route (privileged: hidden in the bandit-feedback view)."""
        self._check_counterfactuals("reward_matrix")
        return self._reward_matrix

    def action_masks(self) -> np.ndarray:
        """Boolean ``[B, K]``: every model is valid for every env (sb3-contrib's convention)."""
        return np.ones((self.num_envs, self.single_action_space.n), dtype=bool)

    def _batched(self, single: spaces.Space) -> spaces.Space:
        """``batch_space``, but the B text spaces are one shared ``Text`` (its copies, each with
        the tournament's charset, took ~10 MB at B = 1,024)."""
        if not isinstance(single, spaces.Dict):
            return batch_space(single, self.num_envs)
        return spaces.Dict(
            {
                key: spaces.Tuple((sub,) * self.num_envs) if isinstance(sub, spaces.Text) else batch_space(sub, self.num_envs)
                for key, sub in single.spaces.items()
            }
        )

    def _observe(self, positions: np.ndarray) -> Any:
        if self._features is not None:
            return self._features.take(positions, axis=0)
        obs: dict[str, np.ndarray] = {
            "text": self.core.texts.take(positions),
            "benchmark": self.core.benchmarks.take(positions),
        }
        if self.config.include_difficulty:
            obs["difficulty"] = self.core.difficulty.take(positions).reshape(-1, 1)
        return obs

    def _shown_info(self, positions: np.ndarray) -> dict[str, Any]:
        return {"row": self.core.rows.take(positions), "_row": self._all}

    def _with_masks(self, info: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        info.update({f"_{key}": self._all for key in list(info)})
        return info

    def _pinned(self, options: dict[str, Any]) -> np.ndarray:
        b, n = self.num_envs, len(self.core)
        unknown = sorted(set(options) - {"index", "query_id"})
        if unknown or len(options) != 1:
            raise RoutingGymError(f"reset options take one of 'index' or 'query_id' (B values each), got {sorted(options)}")
        key, values = next(iter(options.items()))
        values = list(np.asarray(values, dtype=object).reshape(-1))
        if len(values) != b:
            raise RoutingGymError(f"reset option {key!r} needs {b} values (one per env), got {len(values)}")
        if key == "query_id":
            return np.array([self.core.position_of(q) for q in values], dtype=np.int64)
        positions = [action_index(v) for v in values]
        bad = [(i, v) for i, (v, p) in enumerate(zip(values, positions)) if p is None or not 0 <= p < n]
        if bad:
            i, v = bad[0]
            raise RoutingGymError(f"reset option 'index' of env {i} is {v!r}, outside the split's [0, {n})")
        return np.array(positions, dtype=np.int64)

    def _invalid_message(self, actions: Any, coerced: np.ndarray, valid: np.ndarray) -> str:
        i = int(np.flatnonzero(~valid)[0])
        raw = np.asarray(actions).reshape(-1)[i]
        k = self.single_action_space.n
        why = (
            "is not an integer model index (bools and non-integral values are invalid)"
            if coerced[i] == INVALID and action_index(raw) is None
            else f"is outside [0, {k}) for tournament {self.tournament.card.name!r}"
        )
        return (
            f"env {i} of {self.num_envs}: action {raw!r} {why} ({int((~valid).sum())} invalid in this step); "
            "use invalid_action='penalize' to score invalid actions instead"
        )


def per_env_infos(infos: Mapping[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """One info dict per env from a vector env's infos: the ended episode's (``final_info``)
    where one ended this step, else the step's own; ``_key`` masks say which envs have a key."""
    final = infos.get("final_info")
    ended = infos.get("_final_info", np.zeros(num_envs, dtype=bool)) if final is not None else None
    top = {k: v for k, v in infos.items() if not k.startswith("_") and k not in ("final_info", "final_obs")}
    out = []
    for i in range(num_envs):
        source = final if ended is not None and ended[i] else top
        out.append({k: _item(v[i]) for k, v in source.items() if not k.startswith("_") and source.get(f"_{k}", _ALWAYS)[i]})
    return out


class _Always:
    def __getitem__(self, i: int) -> bool:
        return True


_ALWAYS = _Always()


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def to_sb3(env: VectorEnv) -> Any:
    """A Stable-Baselines3 ``VecEnv`` over ``env`` (any gymnasium vector env with same-step
    autoreset, e.g. ``RoutingVectorEnv`` with ``observation="features"``)."""
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise RoutingGymError(
            f"SB3 expects same-step autoreset; {env} uses {mode}. Build it with autoreset_mode=AutoresetMode.SAME_STEP"
        )
    return _sb3_adapter_class()(env)


_ADAPTER: list[type] = []


def _sb3_adapter_class() -> type:
    """``SB3VecEnv``, defined on first use: SB3 (and torch) are imported only when asked for."""
    if _ADAPTER:
        return _ADAPTER[0]
    from stable_baselines3.common.vec_env import VecEnv

    class SB3VecEnv(VecEnv):
        """SB3's ``VecEnv`` API over a gymnasium vector env (same-step autoreset).

        ``step_wait`` returns the next observations, rewards, ``dones = terminated | truncated``
        and one info dict per env (``per_env_infos``), with ``TimeLimit.truncated`` and, when the
        env reports ``final_obs``, ``terminal_observation`` for the envs whose episode ended."""

        def __init__(self, venv: VectorEnv):
            self.venv = venv
            self.render_mode = None
            super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
            self._actions: np.ndarray | None = None

        def reset(self) -> Any:
            seed = self._seeds[0]
            options = self._options[0] or None
            obs, infos = self.venv.reset(seed=seed, options=options)
            self.reset_infos = per_env_infos(infos, self.num_envs)
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> Any:
            obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
            dones = np.logical_or(terminated, truncated)
            env_infos = per_env_infos(infos, self.num_envs)
            final_obs = infos.get("final_obs")
            for i in np.flatnonzero(dones):
                env_infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                if final_obs is not None:
                    env_infos[i]["terminal_observation"] = final_obs[i]
            return obs, np.asarray(rewards, dtype=np.float32), dones, env_infos

        def close(self) -> None:
            self.venv.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            value = getattr(self.venv, attr_name)
            return [value for _ in self._get_indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            setattr(self.venv, attr_name, value)

        def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
            result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
            return [result for _ in self._get_indices(indices)]

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False for _ in self._get_indices(indices)]

    _ADAPTER.append(SB3VecEnv)
    return SB3VecEnv


__all__: Sequence[str] = ("OBSERVATIONS", "RoutingVectorEnv", "per_env_infos", "reward_matrix_in_blocks", "to_sb3")
