"""The agent protocol: how a router learns from a tournament and routes held-out queries.

An agent learns in one of two ways (its ``feedback`` attribute):

- ``"bandit"``: online through ``RoutingEnv`` on the training split; only the chosen model's
  outcome is revealed (``FitContext.make_env``);
- ``"full"``: from the whole training table (every model's outcome on every training query),
  as the paper's SFT target and most routing baselines do (``FitContext.train_outcomes``).

It then routes a batch of held-out queries with ``act_batch`` (or one with ``act``).
Agents that peek at held-out outcomes or outputs (oracle, Smoothie) say so with
``uses_test_outcomes = True`` and are reported as not deployable.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

import numpy as np

from routing_gym.envs import Reward, RoutingEnv
from routing_gym.tournament import Outcomes, Tournament

Feedback = Literal["bandit", "full"]

# Called once per online decision: (step, action, reward, info) — regret curves, collapse hooks.
StepHook = Callable[[int, int, float, dict[str, Any]], None]


@dataclass
class QueryBatch:
    """Queries to route. ``rows`` index ``tournament`` for agents that look outcomes up
    (oracle, Smoothie); both are unknown (-1, None) for a fresh question from ``act``."""

    texts: np.ndarray
    benchmarks: np.ndarray
    rows: np.ndarray
    tournament: Tournament | None
    difficulty: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def from_rows(cls, tournament: Tournament, rows: np.ndarray) -> QueryBatch:
        q = tournament.queries
        difficulty = q["difficulty"].to_numpy(dtype=float)[rows] if tournament.has_difficulty else None
        return cls(
            texts=q["prompt"].to_numpy(dtype=object)[rows],
            benchmarks=tournament.benchmark_codes[rows],
            rows=np.asarray(rows),
            tournament=tournament,
            difficulty=difficulty,
        )

    def observation(self, i: int) -> dict[str, Any]:
        """The RoutingEnv observation of query ``i`` of the batch."""
        obs: dict[str, Any] = {"text": self.texts[i], "benchmark": int(self.benchmarks[i])}
        if self.difficulty is not None:
            obs["difficulty"] = np.array([self.difficulty[i]], dtype=np.float32)
        return obs


@dataclass
class FitContext:
    """Everything an agent may learn from: the training split of one tournament."""

    tournament: Tournament
    reward: Reward
    train_split: str = "train"
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    step_hooks: list[StepHook] = field(default_factory=list)
    progress: bool = False

    @property
    def n_models(self) -> int:
        return self.tournament.n_models

    @property
    def train_rows(self) -> np.ndarray:
        return self.tournament.split_rows(self.train_split)

    @property
    def train_batch(self) -> QueryBatch:
        return QueryBatch.from_rows(self.tournament, self.train_rows)

    def train_outcomes(self) -> Outcomes:
        """Full-information training table (only for ``feedback = "full"`` agents)."""
        return self.tournament.outcomes(self.train_rows)

    def train_reward_matrix(self) -> np.ndarray:
        """``[n_train, K]`` reward of every route on training queries (full information)."""
        return self.reward.matrix(self.tournament, self.train_rows)

    def make_env(self, **overrides: Any) -> RoutingEnv:
        """A RoutingEnv over the training split with this context's reward (bandit feedback).

        Invalid actions are penalized, not raised, so a learning agent can explore them.
        """
        kwargs: dict[str, Any] = dict(
            tournament=self.tournament,
            split=self.train_split,
            reward=self.reward.name,
            coefficients=self.reward.coefficients,
            invalid_penalty=self.reward.invalid_penalty,
            allow_ungated=self.reward.allow_ungated,
            invalid_action="penalize",
        )
        kwargs.update(self.env_kwargs)
        kwargs.update(overrides)
        return RoutingEnv(**kwargs)


class Agent(ABC):
    """Base class of every router. Subclass, set ``feedback``, implement ``fit`` and
    ``act_batch`` (or ``act``), and register with ``@register_agent("name")``.

    Router overhead: an agent whose routing decision itself costs something (the text
    controller decodes tokens) sets ``self.overhead`` in ``act_batch`` to a dict of per-query
    arrays or means, e.g. ``{"decode_s": ..., "generated_tokens": ..., "joules": ...}``;
    ``routing-gym compare`` reports each entry beside the answer joules.
    """

    name: ClassVar[str] = "agent"
    feedback: ClassVar[Feedback] = "full"
    uses_test_outcomes: ClassVar[bool] = False  # oracle / output-informed diagnostics

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Learn from the training split; return logs (e.g. ``{"regret": [...]}``)."""
        return {}

    @abstractmethod
    def act_batch(self, batch: QueryBatch) -> np.ndarray:
        """One model index per query of ``batch`` (an index outside [0, K) counts as invalid)."""

    def act(self, observation: dict[str, Any]) -> int:
        """Route one RoutingEnv observation (text, benchmark[, difficulty])."""
        batch = QueryBatch(
            texts=np.array([observation["text"]], dtype=object),
            benchmarks=np.array([int(observation["benchmark"])]),
            rows=np.array([-1]),
            tournament=None,
            difficulty=None if "difficulty" not in observation else np.asarray(observation["difficulty"]).reshape(1),
        )
        return int(self.act_batch(batch)[0])

    def save(self, path: str | Path) -> None:
        """Default: pickle the agent (override for agents holding torch or SB3 models)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            pickle.dump(self, handle)

    @classmethod
    def load(cls, path: str | Path) -> Agent:
        with open(path, "rb") as handle:
            agent = pickle.load(handle)
        if not isinstance(agent, cls):
            raise TypeError(f"{path} holds a {type(agent).__name__}, not a {cls.__name__}")
        return agent
