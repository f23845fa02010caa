"""Run a policy through episodes of a multi-step routing env."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from routing_gym.envs.multiturn_env import MultiTurnRoutingEnv
from routing_gym.errors import RoutingGymError


def rollout(
    env: gym.Env, policy: Callable[[dict[str, Any]], int], episodes: int | None = None, seed: int | None = 0
) -> dict[str, np.ndarray]:
    """Run ``policy(observation) -> action`` for ``episodes`` episodes (default: one per query
    of the split) and return per-episode arrays: ``final_correct``, ``energy_j`` (all turns),
    ``turns``, ``return`` and ``stopped``."""
    base = env.unwrapped
    if not isinstance(base, MultiTurnRoutingEnv):
        raise RoutingGymError(f"rollout needs a MultiTurnRoutingEnv, got {type(base).__name__}")
    n = len(base.core) if episodes is None else int(episodes)
    if n < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    out = {name: np.zeros(n) for name in ("final_correct", "energy_j", "turns", "return", "stopped")}
    for episode in range(n):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, info = env.step(policy(obs))
            total += reward
        out["final_correct"][episode], out["energy_j"][episode] = info["final_correct"], info["total_energy_j"]
        out["turns"][episode], out["return"][episode], out["stopped"][episode] = info["turns"], total, info["stopped"]
    return out
