"""Gymnasium environments; importing this module registers their ids."""

import gymnasium as gym

from routing_gym.envs.rewards import (
    REWARDS,
    Reward,
    RewardBreakdown,
    get_reward,
    oracle_targets,
    rank_penalty,
    register_reward,
)
from routing_gym.envs.routing_env import BatchResult, RoutingEnv, default_config

REPLAY_ID = "RoutingGym/Replay-v0"

if REPLAY_ID not in gym.registry:
    gym.register(REPLAY_ID, entry_point="routing_gym.envs.routing_env:RoutingEnv")

import routing_gym.sources.synthetic  # noqa: E402,F401  (registers the procedural presets and their ids)
from routing_gym.envs import budget_env, changing_pool_env, multiturn_env, reward_variants  # noqa: E402,F401

__all__ = [
    "REPLAY_ID",
    "REWARDS",
    "BatchResult",
    "Reward",
    "RewardBreakdown",
    "RoutingEnv",
    "default_config",
    "get_reward",
    "oracle_targets",
    "rank_penalty",
    "register_reward",
]
