"""Which methods of a comparison train on the reward, for the mark in ``compare``'s and
``sweep``'s tables: an agent with ``trains_on_reward = False`` (``routing_gym_agents.Agent``)
routes the same under every reward, so its rows change with ``--reward`` only through the
reward they are scored under."""

from __future__ import annotations

from typing import Iterable

REWARD_FREE_MARK = " †"


def reward_free_methods(methods: Iterable[str]) -> set[str]:
    """The registered agents among ``methods`` whose training ignores the reward."""
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    return {m for m in methods if m in AGENTS and not getattr(AGENTS[m][0], "trains_on_reward", True)}


def reward_free_note(methods: Iterable[str]) -> str | None:
    """The table note explaining the mark, or None when every method trains on the reward."""
    free = sorted(reward_free_methods(methods))
    if not free:
        return None
    return (f"†: not trained on the reward ({', '.join(free)}; `Agent.trains_on_reward = False`): these rows route the "
            "same under every reward; only the reward they are scored under changes.")
