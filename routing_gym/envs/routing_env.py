"""RoutingEnv: replay a tournament as a contextual bandit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.rewards import DEFAULT_INVALID_PENALTY, Reward
from routing_gym.errors import InvalidActionError, RoutingGymError, UnknownNameError
from routing_gym.tournament import Tournament

ORDERS = ("shuffle", "sequential")
INVALID_ACTION_MODES = ("raise", "penalize")


def default_config() -> dict[str, Any]:
    """Every RoutingEnv option with its default; pass overrides as keyword arguments."""
    return {
        "tournament": "default",  # Tournament, tournament directory, or registered preset name
        "split": "train",  # split name, or "all"
        "reward": "gated_rank",  # registered reward name
        "coefficients": {},  # keyword coefficients of the reward, e.g. {"lambda_e": 0.4}
        "invalid_penalty": DEFAULT_INVALID_PENALTY,
        "invalid_action": "raise",  # "raise" or "penalize" an action outside [0, K)
        "allow_ungated": False,  # accept coefficients that break the reward's gate
        "order": "shuffle",  # "shuffle": a new permutation each pass; "sequential": table order
        "include_difficulty": False,  # add the queries' difficulty field to the observation
    }


@dataclass
class BatchResult:
    """Outcome of scoring one action per query of a split at once (``RoutingEnv.evaluate``)."""

    actions: np.ndarray
    rewards: np.ndarray
    valid: np.ndarray
    correct: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    mean_power_w: np.ndarray

    def metrics(self) -> dict[str, float]:
        """Means over queries; invalid routes count as wrong and cost nothing."""
        return {
            "accuracy": float(self.correct.mean()),
            "mean_energy_j": float(self.energy_j.mean()),
            "mean_latency_s": float(self.latency_s.mean()),
            "mean_power_w": float(self.mean_power_w.mean()),
            "mean_reward": float(self.rewards.mean()),
            "invalid_rate": float(1.0 - self.valid.mean()),
        }


class RoutingEnv(gym.Env):
    """
    ## Description
    Replays a tournament (every candidate model's logged answer to every question) as a
    contextual bandit: each episode shows one question and the agent routes it to one of K
    answer models. Nothing is generated at run time; the chosen model's logged correctness,
    joules, seconds and watts are looked up.

    ## Action Space
    `Discrete(K)`: the index of the answer model (order of `tournament.model_ids`). An index
    outside `[0, K)` raises `InvalidActionError` (`invalid_action="raise"`, the default) or
    earns `invalid_penalty` (`invalid_action="penalize"`).

    ## Observation Space
    A `Dict` with:
    - `"text"`: `Text` — the question as shown to a router; the charset is every character
      the tournament's prompts use, `max_length` its longest prompt;
    - `"benchmark"`: `Discrete(B)` — index into `tournament.benchmarks`;
    - `"difficulty"`: `Box(0, 1, (1,))` — only with `include_difficulty=True` on a tournament
      that records difficulty.

    ## Rewards
    The registered reward (default `gated_rank`, the paper's): a correct route earns
    `2 - (lambda_t z_t + lambda_e z_e + lambda_p z_p)`, where the z are the chosen model's rank
    penalties in [0, 1] among the query's candidates for latency, energy and power; a wrong
    route earns -1; an invalid action `invalid_penalty`. Coefficients that break the gate
    are rejected unless `allow_ungated=True`. See `routing_gym.envs.rewards`.

    ## Starting State
    `reset()` draws the next query of the split: a fresh seeded permutation per pass
    (`order="shuffle"`) or table order (`order="sequential"`). `reset(options={"query_id":
    ...})` or `reset(options={"index": i})` (position within the split) pins a query.

    ## Episode End
    Every episode is one step: `terminated=True`, `truncated=False` (so no value is ever
    bootstrapped into the bandit reward).

    ## Info
    After `reset`: `query_id`, `row`. After `step`: also `model_id`, `valid`, `correct`,
    `energy_j`, `latency_s`, `mean_power_w`, `oracle_reward` (best reward available for the
    query, for regret) and the reward components (e.g. `z_energy`).

    ## Arguments
    See `default_config()`. Registered ids: `RoutingGym/Replay-v0` (any tournament) and the
    procedural presets.

    ## Batched evaluation
    `evaluate(actions)` scores one action per query of the split in split order, vectorized.
    """

    metadata = {"render_modes": []}

    def __init__(self, **overrides: Any):
        config = default_config()
        unknown = set(overrides) - set(config)
        if unknown:
            raise TypeError(f"RoutingEnv got unknown option(s) {sorted(unknown)}; options: {sorted(config)}")
        config.update(overrides)
        self.config = config
        if config["order"] not in ORDERS:
            raise UnknownNameError("order", config["order"], list(ORDERS))
        if config["invalid_action"] not in INVALID_ACTION_MODES:
            raise UnknownNameError("invalid_action mode", config["invalid_action"], list(INVALID_ACTION_MODES))

        from routing_gym.sources import resolve_tournament

        self.tournament: Tournament = resolve_tournament(config["tournament"])
        self.reward = Reward(
            config["reward"], dict(config["coefficients"] or {}), config["invalid_penalty"], config["allow_ungated"]
        )
        self.rows = self.tournament.split_rows(config["split"])
        breakdown = self.reward(self.tournament.outcomes(self.rows))
        self._reward_matrix = breakdown.total
        self._components = breakdown.components
        self._oracle_reward = self._reward_matrix.max(axis=1)
        t = self.tournament
        self._prompts = t.queries["prompt"].to_numpy(dtype=object)[self.rows]
        self._query_ids = t.queries["query_id"].to_numpy(dtype=object)[self.rows]
        self._benchmarks = t.benchmark_codes[self.rows]
        self._position_of = {qid: i for i, qid in enumerate(self._query_ids)}
        self._outcomes = t.outcomes(self.rows)
        self._model_ids = t.model_ids
        # [n * K, 5] table (reward and outcomes of every route) for evaluate()
        self._stacked = np.stack([self._reward_matrix, *self._outcomes], axis=-1).reshape(-1, 5)
        self._row_offsets = np.arange(len(self.rows)) * t.n_models

        all_prompts = t.queries["prompt"]
        obs_spaces: dict[str, spaces.Space] = {
            "text": spaces.Text(
                max_length=max(1, int(all_prompts.str.len().max())),
                min_length=0,
                charset=frozenset("".join(all_prompts)) or frozenset(" "),
            ),
            "benchmark": spaces.Discrete(len(t.benchmarks)),
        }
        self._difficulty = None
        if config["include_difficulty"]:
            if not t.has_difficulty:
                raise RoutingGymError(f"{t.card.name}: include_difficulty=True but the tournament records no difficulty")
            self._difficulty = t.queries["difficulty"].to_numpy(dtype=np.float32)[self.rows]
            obs_spaces["difficulty"] = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Discrete(t.n_models)

        self._order = np.arange(len(self.rows))
        self._cursor = len(self.rows)  # forces a new pass (and permutation) at the first reset
        self._current: int | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._cursor = len(self.rows)
        options = options or {}
        if "query_id" in options:
            if options["query_id"] not in self._position_of:
                raise RoutingGymError(
                    f"query_id {options['query_id']!r} is not in split {self.config['split']!r} of {self.tournament.card.name}"
                )
            position = self._position_of[options["query_id"]]
        elif "index" in options:
            position = int(options["index"])
            if not 0 <= position < len(self.rows):
                raise RoutingGymError(f"index {position} is outside the split's [0, {len(self.rows)})")
        else:
            if self._cursor >= len(self.rows):
                self._start_pass()
            position = int(self._order[self._cursor])
            self._cursor += 1
        self._current = position
        return self._observation(position), {"query_id": self._query_ids[position], "row": int(self.rows[position])}

    def step(self, action):
        if self._current is None:
            raise RoutingGymError("step() called before reset(): every episode is one query, reset() shows it")
        position, self._current = self._current, None
        info: dict[str, Any] = {"query_id": self._query_ids[position], "row": int(self.rows[position])}
        info["oracle_reward"] = float(self._oracle_reward[position])
        a = self._as_index(action)
        if a is None:
            info.update(model_id=None, valid=False, correct=0.0, energy_j=0.0, latency_s=0.0, mean_power_w=0.0)
            return self._observation(position), float(self.reward.invalid_penalty), True, False, info
        o = self._outcomes
        info.update(
            model_id=self._model_ids[a],
            valid=True,
            correct=float(o.correct[position, a]),
            energy_j=float(o.energy_j[position, a]),
            latency_s=float(o.latency_s[position, a]),
            mean_power_w=float(o.mean_power_w[position, a]),
        )
        for name, values in self._components.items():
            info[name] = float(values[position, a])
        return self._observation(position), float(self._reward_matrix[position, a]), True, False, info

    # ------------------------------------------------------------------ batched API
    def evaluate(self, actions: np.ndarray) -> BatchResult:
        """Score one action per query of the split (in split order) at once.

        Invalid actions (outside [0, K), e.g. -1 for an unparsable choice) earn
        ``invalid_penalty``, count as wrong and cost nothing; they never raise here.
        """
        actions = np.asarray(actions).astype(np.int64, copy=False)
        n = len(self.rows)
        if actions.shape != (n,):
            raise ValueError(f"expected {n} actions (one per query of split {self.config['split']!r}), got shape {actions.shape}")
        # One take from a stacked [n * K, 5] table instead of five gathers: batched
        # evaluation stays within a small factor of a raw numpy gather (experiments/bench_env.py).
        valid = actions.view(np.uint64) < self.tournament.n_models  # negatives wrap to huge
        if valid.all():
            picked = self._stacked.take(self._row_offsets + actions, axis=0)
        else:
            picked = self._stacked.take(self._row_offsets + np.where(valid, actions, 0), axis=0)
            picked[~valid] = (self.reward.invalid_penalty, 0.0, 0.0, 0.0, 0.0)
        return BatchResult(actions, picked[:, 0], valid, *(picked[:, j] for j in range(1, 5)))

    @property
    def reward_matrix(self) -> np.ndarray:
        """``[n_split, K]`` reward of every route for the split's queries (split order)."""
        return self._reward_matrix

    @property
    def prompts(self) -> np.ndarray:
        """The split's question texts in split order (what ``evaluate`` expects actions for)."""
        return self._prompts

    # ------------------------------------------------------------------ internals
    def _start_pass(self) -> None:
        self._cursor = 0
        if self.config["order"] == "shuffle":
            self._order = self.np_random.permutation(len(self.rows))

    def _observation(self, position: int) -> dict[str, Any]:
        obs: dict[str, Any] = {"text": self._prompts[position], "benchmark": int(self._benchmarks[position])}
        if self._difficulty is not None:
            obs["difficulty"] = self._difficulty[position : position + 1].copy()
        return obs

    def _as_index(self, action) -> int | None:
        try:
            a = int(action)
        except (TypeError, ValueError):
            raise InvalidActionError(f"action {action!r} is not an integer model index") from None
        if a != action and not isinstance(action, (np.ndarray, np.generic)):
            raise InvalidActionError(f"action {action!r} is not an integer model index")
        k = self.tournament.n_models
        if 0 <= a < k:
            return a
        if self.config["invalid_action"] == "raise":
            raise InvalidActionError(
                f"action {a} is outside [0, {k}) for tournament {self.tournament.card.name!r} "
                f"(models: {', '.join(self._model_ids)}); use invalid_action='penalize' to score it instead"
            )
        return None
