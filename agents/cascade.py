"""Cascade baselines for multi-turn routing: cheapest model first, escalate on failure.

A cascade orders models by their mean joules on the training split and, in
``MultiTurnRoutingEnv``, asks them in that order: after each answer it stops if the verifier
judged the answer correct and otherwise escalates to the next model (stopping when the
chain is exhausted). Two chains are registered:

- ``cascade-cheapest``: every model of the pool, cheapest first;
- ``cascade-pareto``: only the models on the training accuracy-energy Pareto front (each rung
  is dearer *and* more accurate than the one before), so no escalation buys a worse model.

Like every agent it acts through ``act_batch`` (``act`` for one observation). On
``MultiTurnRoutingEnv`` observations (they carry ``turn``, ``verdict`` and ``previous_model``)
the action is the next rung or ``K`` (the env's ``Stop``); on one-step ``RoutingEnv``
observations a cascade gets no verdict and cannot escalate, so it routes every query to the
chain's first rung.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routing_gym.envs.multiturn_env import JUDGED_CORRECT
from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.eval.core.pareto import pareto_front
from routing_gym_agents.base import Agent, FitContext
from routing_gym_agents.registry import register_agent

CHAINS = ("cheapest", "pareto")


class CascadeAgent(Agent):
    """Ask models in order of training-split mean joules; stop on a 'correct' verdict.

    Args:
        chain: ``"cheapest"`` (every model) or ``"pareto"`` (the training Pareto front).
        max_rungs: keep only the first ``max_rungs`` models of the chain (None: all).
    """

    feedback = "full"
    seed_dependent = False
    trains_on_reward = False  # a fixed chain by training joules

    def __init__(self, chain: str = "cheapest", max_rungs: int | None = None):
        if chain not in CHAINS:
            raise UnknownNameError("cascade chain", chain, list(CHAINS))
        if max_rungs is not None and max_rungs < 1:
            raise ValueError(f"max_rungs must be >= 1, got {max_rungs}")
        self.chain = chain
        self.max_rungs = max_rungs
        self.order: list[int] | None = None  # model indices, cheapest first
        self.n_models: int | None = None

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        outcomes = ctx.train_outcomes()
        joules = outcomes.energy_j.mean(axis=0)
        accuracy = outcomes.correct.mean(axis=0)
        if self.chain == "pareto":
            order = [int(i) for i in pareto_front(accuracy, joules)]  # by increasing joules
        else:
            order = [int(i) for i in np.lexsort((-accuracy, joules))]
        self.order = order[: self.max_rungs] if self.max_rungs else order
        self.n_models = ctx.n_models
        ids = ctx.model_ids
        return {"chain": [ids[i] for i in self.order]}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        """The next action per observation: a model index, or ``K`` (Stop) in the multi-turn env."""
        self._check_fitted()
        turns = batch.get("turn")
        if turns is None:  # one-step env: no verdict, no escalation
            return np.full(len(batch), self.order[0], dtype=np.int64)
        verdicts, previous = batch.get("verdict"), batch.get("previous_model")
        return np.array([self._next(int(t), int(v), int(p)) for t, v, p in zip(turns, verdicts, previous)], dtype=np.int64)

    def _next(self, turn: int, verdict: int, previous: int) -> int:
        stop = self.n_models
        if turn == 0:
            return self.order[0]
        if verdict == JUDGED_CORRECT:
            return stop
        if previous not in self.order:
            raise RoutingGymError(f"{self.name}: the previous model (index {previous}) is not on this cascade's chain {self.order}")
        rung = self.order.index(previous) + 1
        return self.order[rung] if rung < len(self.order) else stop

    def _check_fitted(self) -> None:
        if self.order is None:
            raise RoutingGymError(f"{self.name}: call fit(ctx) before routing")


register_agent("cascade-cheapest", chain="cheapest")(CascadeAgent)
register_agent("cascade-pareto", chain="pareto")(CascadeAgent)
