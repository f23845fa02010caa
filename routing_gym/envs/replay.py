"""The replay core that every routing environment composes.

- ``QueryStreamConfig`` / ``RoutingConfig``: frozen option dataclasses (the env variants add
  their own fields by subclassing); ``default_config()`` of each env is ``asdict`` of one.
- ``ReplayCore``: one split of a tournament as arrays: question texts, benchmark codes, the
  ``[n, K]`` reward of every route, the outcomes, and scoring through the one scorer
  (``routing_gym.tournament.scoring``). Built once per env; the tournament itself is shared read-only.
- ``QuerySampler``: which query comes next (a seeded permutation per pass, or table order).
- ``ReplayEnv``: the ``gymnasium.Env`` base holding the three, the question part of the
  observation space, the action rule and ``action_masks()`` (the sb3-contrib convention).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.observation import ObservationBatch
from routing_gym.envs.rewards import DEFAULT_INVALID_PENALTY, Reward, resolve_coefficients
from routing_gym.envs.text_space import QuestionText
from routing_gym.errors import InvalidActionError, PrivilegedAccessError, RoutingGymError, UnknownNameError
from routing_gym.tournament import Outcomes, Tournament
from routing_gym.tournament.scoring import BatchResult, ScoringTable, action_index

ORDERS = ("shuffle", "sequential")
# Step info that describes routes not taken (the best reward available): a logging handle for
# regret, absent from the bandit-feedback view agents train on (``BanditView``).
COUNTERFACTUAL_INFO_KEYS = ("oracle_reward",)
INVALID_ACTION_MODES = ("raise", "penalize")


def unexpected_keyword_error(function: str, unknown: list[str], known: Any) -> TypeError:
    """Python's own wording for an unknown keyword (clients such as TorchRL retry without a
    keyword on exactly that message), then the options there are."""
    return TypeError(
        f"{function}() got an unexpected keyword argument {unknown[0]!r} "
        f"(unknown option(s) {unknown}; options: {sorted(known)})"
    )


def checked_render_mode(owner: type, render_mode: str | None) -> str | None:
    """``render_mode`` if ``owner.metadata`` declares it (None, gymnasium's default, always).

    Another mode raises ``TypeError``: SB3 asks for ``"rgb_array"`` and retries without it on
    exactly that error."""
    modes = owner.metadata["render_modes"]
    if render_mode is not None and render_mode not in modes:
        raise TypeError(
            f"{owner.__name__}.__init__() got render_mode={render_mode!r}, which it does not support "
            f"(render_modes: {modes}): an episode is a question and a route; read the step info instead"
        )
    return render_mode


@dataclass(frozen=True)
class QueryStreamConfig:
    """Which queries an env replays and what its observation shows."""

    tournament: Any = "default"  # Tournament, tournament directory, or registered name
    split: str = "train"  # split name, or "all"
    order: str = "shuffle"  # "shuffle": a new seeded permutation per pass; "sequential": table order
    include_difficulty: bool = False  # privileged: the generator's latent difficulty in the observation

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise UnknownNameError("order", self.order, list(ORDERS))

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any], env_name: str) -> QueryStreamConfig:
        """The defaults with ``overrides`` applied; unknown options raise a ``TypeError`` listing the known."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise unexpected_keyword_error(f"{env_name}.__init__", unknown, known)
        return cls(**overrides)

    @classmethod
    def resolve(cls, config: QueryStreamConfig | None, overrides: Mapping[str, Any], owner: str) -> QueryStreamConfig:
        """``config`` (checked to be a ``cls``) or the defaults with ``overrides``; never both."""
        if config is not None and overrides:
            raise TypeError(f"{owner}: pass either a config or keyword options, not both")
        if config is None:
            return cls.from_overrides(overrides, owner)
        if not isinstance(config, cls):
            raise TypeError(f"{owner} takes a {cls.__name__}, got {type(config).__name__}")
        return config

    def to_dict(self) -> dict[str, Any]:
        # Shallow on purpose: a Tournament object stays itself, not a deep copy.
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> QueryStreamConfig:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class RoutingConfig(QueryStreamConfig):
    """A query stream plus the reward of each route and the rule for invalid actions."""

    reward: str = "gated_rank"  # registered reward name
    # None: the documented default, DEFAULT_COEFFICIENTS (lambda_e = 0.4), for the coefficients the
    # reward takes; compare uses the same default.
    coefficients: Mapping[str, float] | None = None
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    invalid_action: str = "raise"  # "raise" or "penalize" an invalid action
    allow_ungated: bool = False  # accept coefficients that break the reward's gate
    # None: every episode is one query. T: an episode is a stream of T queries (each step shows
    # the next one; truncated after T), so a client's next-step autoreset costs 1 step in T.
    stream: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.invalid_action not in INVALID_ACTION_MODES:
            raise UnknownNameError("invalid_action mode", self.invalid_action, list(INVALID_ACTION_MODES))
        if self.stream is not None and not (
            isinstance(self.stream, (int, np.integer)) and not isinstance(self.stream, bool) and self.stream >= 2
        ):
            raise ValueError(f"stream (queries per episode) must be an integer >= 2 or None for one-query episodes, got {self.stream!r}")
        object.__setattr__(self, "coefficients", resolve_coefficients(self.reward, self.coefficients))

    def make_reward(self) -> Reward:
        return Reward(self.reward, dict(self.coefficients), self.invalid_penalty, self.allow_ungated)


class ReplayCore:
    """One split of a tournament as arrays, with the reward of every route (when a reward is given)."""

    def __init__(self, tournament: Tournament, split: str, reward: Reward | None = None):
        t = tournament
        self.tournament = t
        self.split = split
        self.reward = reward
        self.rows = t.split_rows(split)
        q = t.queries
        self.texts = t.prompts[self.rows]
        self.benchmarks = t.benchmark_codes[self.rows]
        self.difficulty = q["difficulty"].to_numpy(dtype=np.float32)[self.rows] if t.has_difficulty else None
        self.reward_matrix: np.ndarray | None = None
        self.components: dict[str, np.ndarray] = {}
        if reward is not None:
            breakdown = reward(self.outcomes)
            self.reward_matrix = breakdown.total
            self.components = breakdown.components
            self.oracle_reward = self.reward_matrix.max(axis=1)
            self.table = ScoringTable(self.reward_matrix, self.outcomes, reward.invalid_penalty)

    # Built on first use: a core without a reward (RoutingVectorEnv's) never copies the outcome
    # arrays or materializes the ids, so it stays a small fraction of the tournament.
    @functools.cached_property
    def outcomes(self) -> Outcomes:
        return self.tournament.outcomes(self.rows)

    @functools.cached_property
    def query_ids(self) -> np.ndarray:
        return self.tournament.queries["query_id"].to_numpy(dtype=object)[self.rows]

    @functools.cached_property
    def _position_of(self) -> dict[str, int]:
        return {qid: i for i, qid in enumerate(self.query_ids)}

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def n_models(self) -> int:
        return self.tournament.n_models

    @functools.cached_property
    def model_ids(self) -> list[str]:
        return self.tournament.model_ids  # read from the models table: once, not per step

    def position_of(self, query_id: str) -> int:
        if query_id not in self._position_of:
            raise RoutingGymError(f"query_id {query_id!r} is not in split {self.split!r} of {self.tournament.card.name}")
        return self._position_of[query_id]

    # ------------------------------------------------------------------ observations
    def question_spaces(self, include_difficulty: bool) -> dict[str, spaces.Space]:
        """``text`` (charset: every character of the tournament's prompts), ``benchmark`` and
        optionally ``difficulty``."""
        t = self.tournament
        prompts = t.queries["prompt"]
        out: dict[str, spaces.Space] = {
            # QuestionText: a Text that survives gymnasium's async (shared-memory) vector envs
            "text": QuestionText(max(1, int(prompts.str.len().max())), min_length=0, charset=_charset(prompts) or " "),
            "benchmark": spaces.Discrete(len(t.benchmarks)),
        }
        if include_difficulty:
            if self.difficulty is None:
                raise RoutingGymError(f"{t.card.name}: include_difficulty=True but the tournament records no difficulty")
            out["difficulty"] = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        return out

    def observation(self, position: int, include_difficulty: bool) -> dict[str, Any]:
        # ndarray.item: a Python scalar without a numpy scalar in between (a step's cost is its lookups)
        obs: dict[str, Any] = {"text": self.texts[position], "benchmark": self.benchmarks.item(position)}
        if include_difficulty:
            obs["difficulty"] = self.difficulty[position : position + 1].copy()
        return obs

    def observations(self, include_difficulty: bool, positions: np.ndarray | None = None) -> ObservationBatch:
        """The question part of the observations of ``positions`` (default: the whole split, in order)."""
        index = slice(None) if positions is None else np.asarray(positions, dtype=np.int64)
        extras = {"difficulty": self.difficulty[index].reshape(-1, 1)} if include_difficulty else {}
        return ObservationBatch(self.texts[index], self.benchmarks[index], extras, self.query_ids[index])

    # ------------------------------------------------------------------ routes
    def query_info(self, position: int) -> dict[str, Any]:
        """The query's id and tournament row: handles for logs and tests. An agent learns what a
        query is from its observation (it holds no tournament to look a row up in)."""
        return {"query_id": self.query_ids[position], "row": self.rows.item(position)}

    def route_info_defaults(self) -> dict[str, Any]:
        """Every key of ``route_info`` with its value where it does not apply (see
        ``ReplayEnv.info_defaults``)."""
        numbers = [*(["oracle_reward"] if self.reward is not None else []), "correct", "energy_j", "latency_s",
                   "mean_power_w", *self.components]
        return {"model_id": "", "valid": False, **dict.fromkeys(numbers, 0.0)}

    def route_info(self, position: int, action: int | None) -> dict[str, Any]:
        """What ``step`` reports about routing query ``position`` to ``action`` (None: invalid,
        ``model_id`` then ``""``)."""
        info = self.query_info(position)
        if self.reward is not None:
            info["oracle_reward"] = self.oracle_reward.item(position)
        if action is None:
            info.update(model_id="", valid=False, correct=0.0, energy_j=0.0, latency_s=0.0, mean_power_w=0.0)
            return info
        info["model_id"], info["valid"] = self.model_ids[action], True
        names, values = self._route_values
        info.update(zip(names, values[position, action].tolist()))
        return info

    @functools.cached_property
    def _route_values(self) -> tuple[list[str], np.ndarray]:
        """``route_info``'s per-route numbers, names and a ``[n, K, names]`` float64 stack (built
        at the first step): one lookup gives a route's Python floats (numpy scalars one at a time
        were most of a step's time)."""
        o = self.outcomes
        named = {"correct": o.correct, "energy_j": o.energy_j, "latency_s": o.latency_s,
                 "mean_power_w": o.mean_power_w, **self.components}
        return list(named), np.stack([np.asarray(v, dtype=np.float64) for v in named.values()], axis=-1)

    def score(self, actions: Any, allowed: np.ndarray | None = None) -> BatchResult:
        """One action per query of the split (split order), vectorized, by the one scorer."""
        if self.reward is None:
            raise RoutingGymError("this replay has no reward to score with")
        return self.table.score(actions, allowed)


def _charset(texts: Any, block: int = 4096) -> frozenset[str]:
    """Every character of ``texts``, joined a block at a time (one join of 100,000 prompts
    held ~60 MB at once)."""
    chars: set[str] = set()
    for start in range(0, len(texts), block):
        chars.update("".join(texts[start : start + block].tolist()))
    return frozenset(chars)


class QuerySampler:
    """The order in which a split's queries are shown."""

    def __init__(self, n: int, order: str):
        self.n = n
        self.order = order
        self._order = np.arange(n)
        self._cursor = n  # forces a new pass (and permutation) at the first draw

    def restart(self) -> None:
        self._cursor = self.n

    def next(self, rng: np.random.Generator) -> int:
        if self._cursor >= self.n:
            self._cursor = 0
            if self.order == "shuffle":
                self._order = rng.permutation(self.n)
        position = self._order.item(self._cursor)
        self._cursor += 1
        return position

    def next_many(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """The next ``count`` draws, exactly as ``count`` calls of ``next`` make them (slices of
        the pass's permutation, a new permutation whenever a pass ends)."""
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            if self._cursor >= self.n:
                self._cursor = 0
                if self.order == "shuffle":
                    self._order = rng.permutation(self.n)
            take = min(count - filled, self.n - self._cursor)
            out[filled : filled + take] = self._order[self._cursor : self._cursor + take]
            self._cursor += take
            filled += take
        return out


class BanditView:
    """Mixin: ``hide_counterfactuals()`` turns an env into the bandit-feedback view that
    ``FitContext`` gives a bandit-feedback agent: the public per-route arrays (``reward_matrix``,
    ``evaluate``) then raise ``PrivilegedAccessError``, so the agent learns only the outcome of
    the route it took. (``FitContext`` also strips ``COUNTERFACTUAL_INFO_KEYS`` from the step
    info the agent sees.) A plain ``gym.make`` env keeps them: logging handles, privileged."""

    _counterfactuals_hidden = False

    def hide_counterfactuals(self) -> None:
        self._counterfactuals_hidden = True

    def _check_counterfactuals(self, what: str) -> None:
        if self._counterfactuals_hidden:
            raise PrivilegedAccessError(
                f"{what} holds the outcome of every route, and this env is the bandit-feedback view a bandit agent "
                "trains on: only the chosen route's outcome is shown. An agent that learns from every route declares "
                "`feedback = 'full'` and reads ctx.train_reward_matrix() / ctx.train_outcomes()"
            )


class ReplayEnv(BanditView, gym.Env):
    """Base of the replay environments: config, core, sampler, the question observation, the
    action rule and ``action_masks``. Subclasses define ``reset``/``step`` and their spaces."""

    # Nothing to draw (render() says so): no render mode but gymnasium's default None.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    config_class: ClassVar[type[QueryStreamConfig]] = QueryStreamConfig

    def __init__(self, config: QueryStreamConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        self.render_mode = checked_render_mode(type(self), render_mode)
        config = self.config_class.resolve(config, overrides, type(self).__name__)
        self.config = config
        from routing_gym.sources import resolve_tournament  # sources sit beside envs; import on use

        self.tournament: Tournament = resolve_tournament(config.tournament)
        reward = config.make_reward() if isinstance(config, RoutingConfig) else None
        self.core = ReplayCore(self.tournament, config.split, reward)
        self.reward = reward
        self.sampler = QuerySampler(len(self.core), config.order)
        self._question_spaces = self.core.question_spaces(config.include_difficulty)

    # ------------------------------------------------------------------ infos
    def info_defaults(self) -> dict[str, Any]:
        """Every key this env's infos hold, each with its value where it does not apply (``""``
        for a name, 0.0 for a number, -1 for a count or row, ``False`` for a flag; a flag such as
        ``valid`` says whether the numbers apply: NaN would fail gymnasium's determinism check,
        which compares step infos with ``==``). ``reset`` and every ``step`` return all of them,
        in this order and with these types, so infos stack key by key: Minari's
        ``DataCollector(record_infos=True)`` needs that."""
        return {"query_id": "", "row": -1}

    @functools.cached_property
    def _info_template(self) -> dict[str, Any]:
        return self.info_defaults()

    def _complete_info(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**self._info_template, **info}

    # ------------------------------------------------------------------ shared API
    @property
    def rows(self) -> np.ndarray:
        """Tournament rows of the split, in split order."""
        return self.core.rows

    @property
    def prompts(self) -> np.ndarray:
        """The split's question texts in split order."""
        return self.core.texts

    @property
    def reward_matrix(self) -> np.ndarray:
        """``[n_split, K]`` reward of every route for the split's queries (split order)."""
        self._check_counterfactuals("reward_matrix")
        if self.core.reward_matrix is None:
            raise RoutingGymError(f"{type(self).__name__} has no per-route reward matrix")
        return self.core.reward_matrix

    def observations(self) -> ObservationBatch:
        """The question part of every observation of the split, in split order."""
        return self.core.observations(self.config.include_difficulty)

    def action_masks(self) -> np.ndarray:
        """Boolean ``[n_actions]``: the actions valid now (sb3-contrib's ``MaskablePPO`` reads it)."""
        mask = self._valid_now()
        return np.ones(self.action_space.n, dtype=bool) if mask is None else mask.copy()

    def _valid_now(self) -> np.ndarray | None:
        """The mask of valid actions, or None when every action is valid (no per-step array)."""
        return None

    def render(self) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} has nothing to draw: an episode is a question and a route. "
            "Read the step info, or plot results with routing_gym.eval.core.plots"
        )

    # ------------------------------------------------------------------ internals
    def _draw(self, options: dict[str, Any] | None) -> int:
        """The position of the next query, or the one pinned by ``options``."""
        if not options:
            return self.sampler.next(self.np_random)
        if "query_id" in options:
            return self.core.position_of(options["query_id"])
        if "index" in options:
            position = action_index(options["index"])
            if position is None or not 0 <= position < len(self.core):
                raise RoutingGymError(f"index {options['index']!r} is outside the split's [0, {len(self.core)})")
            return position
        return self.sampler.next(self.np_random)

    def _question(self, position: int) -> dict[str, Any]:
        return self.core.observation(position, self.config.include_difficulty)

    def _checked_action(self, action: Any, n_actions: int, mask: np.ndarray | None = None, mode: str = "raise") -> int | None:
        """The action as an index, or None when it is invalid and ``mode="penalize"``.

        The rule is the scorer's (``routing_gym.tournament.scoring``): integers and integral floats
        only; booleans, non-integral values, indices outside ``[0, n_actions)`` or outside
        ``mask`` are invalid."""
        a = action_index(action)
        ok = a is not None and 0 <= a < n_actions and (mask is None or bool(mask[a]))
        if ok:
            return a
        if mode == "penalize":
            return None
        if a is None:
            raise InvalidActionError(f"action {action!r} is not an integer model index (bools and non-integral values are invalid)")
        names = ", ".join(self.tournament.model_ids)
        if not 0 <= a < n_actions:
            raise InvalidActionError(
                f"action {a} is outside [0, {n_actions}) for tournament {self.tournament.card.name!r} "
                f"(models: {names}); use invalid_action='penalize' to score it instead"
            )
        raise InvalidActionError(
            f"model {self.tournament.model_ids[a]!r} (action {a}) is not in the pool now; available: "
            f"{', '.join(np.asarray(self.tournament.model_ids)[mask])} (action_masks())"
        )
