"""routing-gym agents (import name ``routing_gym_agents``): the contract, the registry and
the built-in routers (bandits, baselines, SB3 policies, the TRL text controller)."""

from routing_gym.envs.observation import ObservationBatch
from routing_gym_agents.base import (
    PRIVILEGES,
    Agent,
    CorrectnessPredictor,
    EnergyPredictor,
    FitContext,
    PrivilegedAccess,
    StepHooks,
    featurizer_for_context,
)
from routing_gym_agents.registry import list_agents, load_plugins, make_agent, register_agent

__all__ = [
    "PRIVILEGES",
    "Agent",
    "CorrectnessPredictor",
    "EnergyPredictor",
    "FitContext",
    "ObservationBatch",
    "PrivilegedAccess",
    "StepHooks",
    "featurizer_for_context",
    "list_agents",
    "load_plugins",
    "make_agent",
    "register_agent",
]
