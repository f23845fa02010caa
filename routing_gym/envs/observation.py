"""``ObservationBatch``: what an agent is shown when it routes, and nothing more.

A batch holds the observations of ``n`` queries column-wise: the question texts, the benchmark
codes and every other key of the env's observation (``difficulty``, ``budget_left``,
``available``, ...) stacked as ``[n, ...]`` arrays. Query ids travel along as identifiers only:
looking their outcomes up needs privileged access, which an agent must declare
(``Agent.privileged``) and ``compare`` grants and labels *not deployable*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from routing_gym.errors import PrivilegedAccessError

if TYPE_CHECKING:
    from routing_gym.tournament import Tournament

QUESTION_KEYS = ("text", "benchmark")


@dataclass(frozen=True)
class ObservationBatch:
    """Column-wise observations of ``n`` queries (``texts[i]``, ``benchmarks[i]``, ``extras[key][i]``)."""

    texts: np.ndarray
    benchmarks: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    query_ids: np.ndarray | None = None  # identifiers, not information: see the module docstring

    def __post_init__(self) -> None:
        n = len(self.texts)
        if len(self.benchmarks) != n:
            raise ValueError(f"ObservationBatch: {n} texts but {len(self.benchmarks)} benchmark codes")
        for key, values in self.extras.items():
            if len(values) != n:
                raise ValueError(f"ObservationBatch: {n} texts but {len(values)} values of {key!r}")

    def __len__(self) -> int:
        return len(self.texts)

    def __getattr__(self, name: str) -> Any:
        # Agents written against the old QueryBatch reached outcomes through these.
        if name in ("tournament", "rows"):
            raise PrivilegedAccessError(
                f"ObservationBatch.{name}: a batch holds observations only. An agent that needs held-out "
                "outcomes or answers declares `privileged = frozenset({'test_outcomes'})` (or 'outputs') and "
                "reads them through FitContext.privileged, which compare grants and labels not deployable"
            )
        raise AttributeError(name)

    @property
    def keys(self) -> list[str]:
        return [*QUESTION_KEYS, *self.extras]

    def get(self, key: str) -> np.ndarray | None:
        """The ``[n, ...]`` column of observation key ``key`` (None when the env shows none)."""
        if key == "text":
            return self.texts
        if key == "benchmark":
            return self.benchmarks
        return self.extras.get(key)

    def observation(self, i: int) -> dict[str, Any]:
        """Query ``i`` as the env's ``Dict`` observation."""
        obs: dict[str, Any] = {"text": self.texts[i], "benchmark": int(self.benchmarks[i])}
        for key, values in self.extras.items():
            value = values[i]
            obs[key] = value.copy() if isinstance(value, np.ndarray) else value
        return obs

    def select(self, index: np.ndarray | slice | Sequence[int]) -> ObservationBatch:
        return ObservationBatch(
            self.texts[index],
            self.benchmarks[index],
            {k: v[index] for k, v in self.extras.items()},
            None if self.query_ids is None else self.query_ids[index],
        )

    @classmethod
    def from_observations(cls, observations: Sequence[dict[str, Any]], query_ids: Sequence[str] | None = None) -> ObservationBatch:
        """Stack env observations (dicts with ``text``, ``benchmark`` and any extra keys)."""
        if isinstance(observations, dict):
            observations = [observations]
        if not observations:
            return cls(np.array([], dtype=object), np.zeros(0, dtype=np.int64))
        extra_keys = [k for k in observations[0] if k not in QUESTION_KEYS]
        return cls(
            texts=np.array([o["text"] for o in observations], dtype=object),
            benchmarks=np.array([int(o["benchmark"]) for o in observations], dtype=np.int64),
            extras={k: np.stack([np.asarray(o[k]) for o in observations]) for k in extra_keys},
            query_ids=None if query_ids is None else np.asarray(query_ids, dtype=object),
        )

    @classmethod
    def from_tournament(cls, tournament: Tournament, rows: np.ndarray, include_difficulty: bool = False) -> ObservationBatch:
        """The observations ``RoutingEnv`` shows for ``rows`` (text, benchmark; ``difficulty``
        only when asked, as with the env's ``include_difficulty``). No outcome is attached."""
        rows = np.asarray(rows, dtype=np.int64)
        q = tournament.queries
        extras = {}
        if include_difficulty:
            extras["difficulty"] = q["difficulty"].to_numpy(dtype=np.float32)[rows].reshape(-1, 1)
        return cls(
            texts=tournament.prompts[rows],
            benchmarks=tournament.benchmark_codes[rows],
            extras=extras,
            query_ids=q["query_id"].to_numpy(dtype=object)[rows],
        )
