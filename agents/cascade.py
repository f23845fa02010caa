"""Cascade baselines for multi-turn routing: cheapest model first, escalate on failure.

A cascade orders models by their mean joules on the training split and, in
``MultiTurnRoutingEnv``, asks them in that order: after each answer it stops if the verifier
judged the answer correct and otherwise escalates to the next model (stopping when the
chain is exhausted). Two chains are registered:

- ``cascade-cheapest``: every model of the pool, cheapest first;
- ``cascade-pareto``: only the models on the training accuracy-energy Pareto front (each rung
  is dearer *and* more accurate than the one before), so no escalation buys a worse model.

Multi-turn routing goes through ``act_turn(observation) -> action`` (the env's ``Stop`` is
action ``K``). In the one-step ``RoutingEnv`` a cascade gets no verdict and cannot escalate,
so ``act_batch`` routes every query to the chain's first rung.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routing_gym.envs.multiturn_env import JUDGED_CORRECT
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.eval.pareto import pareto_front
from routing_gym_agents.base import Agent, FitContext, QueryBatch
from routing_gym_agents.registry import register_agent

CHAINS = ("cheapest", "pareto")


class CascadeAgent(Agent):
    """Ask models in order of training-split mean joules; stop on a 'correct' verdict.

    Args:
        chain: ``"cheapest"`` (every model) or ``"pareto"`` (the training Pareto front).
        max_rungs: keep only the first ``max_rungs`` models of the chain (None: all).
    """

    feedback = "full"

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
        ids = ctx.tournament.model_ids
        return {"chain": [ids[i] for i in self.order]}

    def act_batch(self, batch: QueryBatch) -> np.ndarray:
        """Without a verdict a cascade cannot escalate: the first rung for every query."""
        self._check_fitted()
        return np.full(len(batch), self.order[0], dtype=np.int64)

    def act_turn(self, observation: dict[str, Any]) -> int:
        """The next action in ``MultiTurnRoutingEnv``: a model index, or ``K`` (Stop)."""
        self._check_fitted()
        stop = self.n_models
        if int(observation["turn"]) == 0:
            return self.order[0]
        if int(observation["verdict"]) == JUDGED_CORRECT:
            return stop
        previous = int(observation["previous_model"])
        if previous not in self.order:
            raise RoutingGymError(f"{self.name}: the previous model (index {previous}) is not on this cascade's chain {self.order}")
        rung = self.order.index(previous) + 1
        return self.order[rung] if rung < len(self.order) else stop

    def _check_fitted(self) -> None:
        if self.order is None:
            raise RoutingGymError(f"{self.name}: call fit(ctx) before routing")


register_agent("cascade-cheapest", chain="cheapest")(CascadeAgent)
register_agent("cascade-pareto", chain="pareto")(CascadeAgent)
