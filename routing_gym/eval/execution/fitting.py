"""One agent fitted on the training split and routing a block of queries: what a ``compare``
cell does, and what the audit's process does again on the replaced copy (``eval/execution/audit_process.py``).

Its own module so that both import it without importing each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from routing_gym.envs import ObservationBatch, Reward
from routing_gym.errors import RoutingGymError
from routing_gym.tournament import Tournament


@dataclass
class Fitted:
    """A fitted agent, its context and logs, and its actions on the routed rows."""

    agent: Any
    ctx: Any
    logs: dict[str, Any]
    actions: np.ndarray
    fit_s: float
    act_s: float


def fit_and_act(name: str, kwargs: dict[str, Any], reward: Reward, train_split: str, seed: int,
                tournament: Tournament, rows: np.ndarray, hooks: list[Any]) -> Fitted:
    """``make_agent(name, **kwargs)``, ``fit`` on ``train_split`` with ``seed``, then
    ``act_batch`` on ``rows``; privileges are granted exactly as the agent declares them."""
    from routing_gym_agents import FitContext, make_agent

    agent = make_agent(name, **kwargs)
    ctx = FitContext(tournament=tournament, reward=reward, train_split=train_split, seed=seed,
                     step_hooks=hooks, progress=False, grants=agent.privileged, feedback=agent.feedback)
    tic = time.perf_counter()
    logs = agent.fit(ctx) or {}
    fit_s = time.perf_counter() - tic
    batch = ObservationBatch.from_tournament(tournament, rows, include_difficulty="difficulty" in agent.privileged)
    tic = time.perf_counter()
    actions = np.asarray(agent.act_batch(batch))
    act_s = time.perf_counter() - tic
    if actions.shape != (len(batch),):
        raise RoutingGymError(f"act_batch returned shape {actions.shape} for {len(batch)} queries; expected ({len(batch)},)")
    return Fitted(agent, ctx, logs, actions, fit_s, act_s)


def held_out_actions(tournament: Tournament, name: str, kwargs: dict[str, Any], reward: Reward, train_split: str,
                     test_split: str, seed: int) -> np.ndarray:
    """A compare cell's actions on ``test_split``: what the audit's process runs on the copy."""
    return fit_and_act(name, kwargs, reward, train_split, seed, tournament, tournament.split_rows(test_split), []).actions
