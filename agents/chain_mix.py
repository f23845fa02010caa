"""``chain-mix``: a seeded random mix of two adjacent policies of compare's yardstick chain.

``compare`` measures every router against a chain of policies chosen on the training split
(``routing_gym/eval/core/yardstick.py``): the fixed models' chain for the routing gain, the chain of
fixed models and per-benchmark routes for the content gain. This router takes two consecutive
policies of one of those chains (``chain``: ``"fixed"`` or ``"task"``; ``segment``: which pair,
counted from the cheapest, negative from the dearest) and sends each query to the dearer one with
probability ``weight``, as a seeded hash of (seed, question text) like ``random``: the same
question always takes the same route, so the audit's rerun agrees.

It never reads the question for anything but that coin, so its population gain over its own
yardstick is 0 by construction (the yardstick at its mean joules is the same mix of the same two
policies), while its estimate has spread: the non-degenerate true-zero rows a calibration of the
verdicts needs (``experiments/verdict_calibration.py``). A chain policy itself, by contrast, has a
gain of exactly 0 in every resample and tells a calibration nothing.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from routing_gym.envs import ObservationBatch
from routing_gym.eval.core.yardstick import train_yardsticks
from routing_gym_agents.base import Agent, FitContext
from routing_gym_agents.baselines import text_hashes
from routing_gym_agents.registry import register_agent

_UNIT = float(2**64)


@register_agent("chain-mix")
class ChainMix(Agent):
    """Mixes two consecutive policies of the train-chosen ``chain`` (module docstring)."""

    name = "chain-mix"
    feedback = "full"
    trains_on_reward = False  # the chain is chosen from accuracy and joules, whatever the reward
    reads_question = False  # the coin hashes the text but reads nothing in it

    def __init__(self, chain: Literal["fixed", "task"] = "task", segment: int = 0, weight: float = 0.5,
                 seed: int | None = None):
        if chain not in ("fixed", "task"):
            raise ValueError(f"chain must be 'fixed' or 'task', got {chain!r}")
        if not 0 < weight < 1:
            raise ValueError(f"weight (the dearer policy's share) must lie in (0, 1), got {weight}")
        self.chain, self.segment, self.weight, self.seed = chain, int(segment), float(weight), seed
        self.routes: np.ndarray | None = None  # [2, n_benchmarks]: the cheaper and the dearer policy's model per benchmark
        self.policies: list[str] = []

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.seed = ctx.seed if self.seed is None else self.seed
        outcomes, codes = ctx.train_outcomes(), ctx.train_observations().benchmarks
        sticks = train_yardsticks(outcomes.correct, outcomes.energy_j, codes, len(ctx.benchmarks), list(ctx.model_ids))
        stick = sticks.fixed if self.chain == "fixed" else sticks.task
        pairs = len(stick.index) - 1
        if not -pairs <= self.segment < pairs:
            raise ValueError(f"{self.name}: segment {self.segment} outside the {self.chain} chain's {pairs} pair(s) of "
                             f"consecutive policies ({stick.names})")
        first = self.segment % pairs
        k, n_benchmarks = ctx.n_models, len(ctx.benchmarks)
        self.routes = np.stack([np.full(n_benchmarks, c) if c < k else sticks.routes.choices[c - k]
                                for c in stick.index[first:first + 2]]).astype(np.int64)
        self.policies = stick.names[first:first + 2]
        return {"policies": self.policies, "weight": self.weight, "chain": self.chain}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.routes is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        dearer = (text_hashes(batch.texts, self.seed).astype(np.float64) / _UNIT) < self.weight
        codes = np.asarray(batch.benchmarks, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= self.routes.shape[1]):
            raise ValueError(f"{self.name}: benchmark codes {codes.min()}..{codes.max()} outside the "
                             f"{self.routes.shape[1]} benchmarks it was trained on")
        return self.routes[dearer.astype(np.int64), codes]
