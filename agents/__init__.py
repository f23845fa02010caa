"""routing-gym agents (import name ``routing_gym_agents``): the protocol, the registry and
the built-in routers (bandits, baselines, SB3 policies, the TRL text controller)."""

from routing_gym_agents.base import Agent, FitContext, QueryBatch
from routing_gym_agents.registry import list_agents, load_plugins, make_agent, register_agent

__all__ = ["Agent", "FitContext", "QueryBatch", "list_agents", "load_plugins", "make_agent", "register_agent"]
