"""Agent registry: ``@register_agent("name")``, ``make_agent(name, **kwargs)``, plugins.

External packages add agents without touching routing-gym through the entry-point group
``routing_gym.agents`` (each entry point names a module or an Agent class; importing it
registers the agents)::

    [project.entry-points."routing_gym.agents"]
    my_router = "my_package.routers"
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any, Callable, TypeVar

from routing_gym.errors import UnknownKeywordError, UnknownNameError

ENTRY_POINT_GROUP = "routing_gym.agents"

AGENTS: dict[str, tuple[type, dict[str, Any]]] = {}
# Entry points that failed to import: name -> "ExceptionType: message". Reported only when an
# agent that is not registered is asked for, so one broken plugin never blocks the others.
BROKEN_PLUGINS: dict[str, str] = {}
A = TypeVar("A", bound=type)

# Built-in agent modules; each keeps torch/SB3/TRL imports inside functions.
_BUILTIN_MODULES = (
    "routing_gym_agents.baselines",
    "routing_gym_agents.bandits",
    "routing_gym_agents.routers",
    "routing_gym_agents.sb3_agents",
    "routing_gym_agents.controller.agent",
    "routing_gym_agents.lagrangian",
    "routing_gym_agents.cascade",
    "routing_gym_agents.cost_aware",
    "routing_gym_agents.irt",
    "routing_gym_agents.mf",
    "routing_gym_agents.gbdt",
    "routing_gym_agents.chain_mix",
    "routing_gym_agents.vw",
)
_plugins_loaded = False


def register_agent(name: str, **defaults: Any) -> Callable[[A], A]:
    """Register an Agent class under ``name``; ``defaults`` are constructor kwargs, so one
    class can be registered several times as variants (e.g. ``fixed-largest``)."""

    def decorator(cls: A) -> A:
        if name in AGENTS and AGENTS[name][0] is not cls:
            raise ValueError(f"agent {name!r} is already registered by {AGENTS[name][0].__module__}")
        AGENTS[name] = (cls, dict(defaults))
        return cls

    return decorator


def load_plugins() -> None:
    """Import built-in agent modules and every ``routing_gym.agents`` entry point once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a real missing dependency, not an unwritten module
                raise
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry_point.load()
        except Exception as exc:  # a plugin's bug must not break the registry for everyone
            BROKEN_PLUGINS[entry_point.name] = f"{type(exc).__name__}: {exc} (entry point {entry_point.value})"


def list_agents() -> list[str]:
    load_plugins()
    return sorted(AGENTS)


def make_agent(name: str, **kwargs: Any):
    """Instantiate a registered agent; unknown names list the registered ones."""
    load_plugins()
    if name not in AGENTS:
        raise unknown_agent_error(name)
    cls, defaults = AGENTS[name]
    accepted = agent_keywords(name)
    if accepted is not None and (unknown := [k for k in kwargs if k not in accepted]):
        raise UnknownKeywordError(name, unknown, accepted)
    agent = cls(**{**defaults, **kwargs})
    agent.name = name
    return agent


def agent_keywords(name: str) -> list[str] | None:
    """The keywords registered agent ``name`` accepts: its constructor's named parameters,
    following ``**kwargs`` up the class hierarchy; None where the chain never closes (a
    constructor forwards ``**kwargs`` all the way: anything may be accepted)."""
    names: list[str] = []
    for klass in AGENTS[name][0].__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        forwards = False
        for p in list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]:
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                forwards = True
            elif p.kind != inspect.Parameter.VAR_POSITIONAL and p.name not in names:
                names.append(p.name)
        if not forwards:
            return names
    return None


# How an agent outside this package becomes known; ends every unknown-agent message.
IMPORT_HINT = ("An agent from your own module or file needs --import MODULE (or path/to/file.py) on the command line "
               f"(import it first in Python), or an entry point in the {ENTRY_POINT_GROUP!r} group")


def unknown_agent_error(name: str | list[str]) -> UnknownNameError:
    """The error for an agent name that is not registered: the closest registered names, how a
    plugin's agent is imported, and the plugins that failed to load."""
    hint = IMPORT_HINT
    if BROKEN_PLUGINS:
        broken = "; ".join(f"{plugin}: {why}" for plugin, why in BROKEN_PLUGINS.items())
        hint += f". Plugin(s) of the {ENTRY_POINT_GROUP!r} entry-point group failed to load: {broken}"
    return UnknownNameError("agent", name, list(AGENTS), hint=hint)
