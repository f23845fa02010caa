"""Gymnasium environments; importing this module registers their ids (``registration.py``)."""

from routing_gym.envs.budget_env import BudgetConfig, BudgetRoutingEnv
from routing_gym.envs.changing_pool_env import ChangingPoolConfig, ChangingPoolEnv, PoolEvent
from routing_gym.envs.mo_env import MOChangingPoolEnv, MORoutingEnv, objective_values
from routing_gym.envs.multiturn_env import MultiTurnConfig, MultiTurnRoutingEnv
from routing_gym.envs.observation import ObservationBatch
from routing_gym.envs.registration import (
    BUDGET_ID,
    CHANGING_POOL_ID,
    MULTITURN_ID,
    PROCEDURAL_ID,
    REPLAY_ID,
    STREAM_LENGTH,
    features_id,
    features_ids,
    mo_id,
    mo_ids,
    register_all,
    registered_ids,
    stream_id,
    stream_ids,
)
from routing_gym.envs.replay import QueryStreamConfig, ReplayCore, ReplayEnv, RoutingConfig
from routing_gym.envs.rewards import (
    DEFAULT_COEFFICIENTS,
    REWARDS,
    Reward,
    RewardBreakdown,
    get_reward,
    oracle_targets,
    predicted_targets,
    rank_penalty,
    register_reward,
    sampled_targets,
)
from routing_gym.envs.routing_env import RoutingEnv, default_config
from routing_gym.envs.vector_env import RoutingVectorEnv, to_sb3
from routing_gym.tournament.scoring import BatchResult
from routing_gym.envs import reward_variants  # noqa: E402,F401  (registers the reward variants)

register_all()

__all__ = [
    "BUDGET_ID",
    "CHANGING_POOL_ID",
    "DEFAULT_COEFFICIENTS",
    "MULTITURN_ID",
    "PROCEDURAL_ID",
    "REPLAY_ID",
    "REWARDS",
    "STREAM_LENGTH",
    "BatchResult",
    "BudgetConfig",
    "BudgetRoutingEnv",
    "ChangingPoolConfig",
    "ChangingPoolEnv",
    "MOChangingPoolEnv",
    "MORoutingEnv",
    "MultiTurnConfig",
    "MultiTurnRoutingEnv",
    "ObservationBatch",
    "PoolEvent",
    "QueryStreamConfig",
    "ReplayCore",
    "ReplayEnv",
    "Reward",
    "RewardBreakdown",
    "RoutingConfig",
    "RoutingEnv",
    "RoutingVectorEnv",
    "default_config",
    "features_id",
    "features_ids",
    "get_reward",
    "mo_id",
    "mo_ids",
    "objective_values",
    "oracle_targets",
    "predicted_targets",
    "rank_penalty",
    "register_reward",
    "registered_ids",
    "sampled_targets",
    "stream_id",
    "stream_ids",
    "to_sb3",
]
