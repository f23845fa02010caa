"""routing-gym: gymnasium environments and tools for energy-aware LLM routing.

Importing the package registers the environments with gymnasium and stays light (no torch,
TRL or SB3).
"""

from routing_gym.envs import REPLAY_ID, Reward, RoutingEnv, oracle_targets, register_reward
from routing_gym.sources import register_tournament, resolve_tournament
from routing_gym.tournament import DataCard, Tournament

__version__ = "0.1.0"

__all__ = [
    "REPLAY_ID",
    "DataCard",
    "Reward",
    "RoutingEnv",
    "Tournament",
    "oracle_targets",
    "register_reward",
    "register_tournament",
    "resolve_tournament",
]
