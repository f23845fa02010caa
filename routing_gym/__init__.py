"""routing-gym: gymnasium environments and tools for energy-aware LLM routing.

Importing the package registers the environments with gymnasium and stays light (no torch,
TRL or SB3).
"""

import gymnasium as _gymnasium

# gymnasium.vector.AutoresetMode is new in 1.1: on 1.0 (which d3rlpy 2.8.1 pins) the imports below
# would fail naming it, and old gym, which imports this package as a plugin, with them.
if tuple(int(part) for part in _gymnasium.__version__.split(".")[:2] if part.isdigit()) < (1, 1):
    raise ImportError(f"routing-gym needs gymnasium>=1.1, found gymnasium {_gymnasium.__version__}: "
                      "pip install 'gymnasium>=1.1,<2' (a package pinning an older one needs a venv of its own)")

from routing_gym import moved as _moved
from routing_gym.envs import REPLAY_ID, Reward, RoutingEnv, oracle_targets, register_reward
from routing_gym.sources import register_tournament, resolve_tournament
from routing_gym.tournament import DataCard, Tournament

__version__ = "0.1.0"
_moved.install()  # routing_gym.eval.pareto, routing_gym.eval.mo_fronts, ...: aliases for one release

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
