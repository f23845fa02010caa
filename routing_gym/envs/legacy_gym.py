"""The ``Box`` ids in the registry of the pre-gymnasium ``gym`` package (0.2x) too.

Code written against ``gym`` still ships: the PyPI ``cleanrl`` package's ``ppo.py`` imports
``gym`` 0.23 and calls ``gym.make(env_id)``. ``register_legacy_ids`` adds every
``-features`` and ``-features-stream`` id to ``gym``'s registry when ``gym`` is already
imported; it never imports ``gym`` itself. Old gym runs ``registration.register_gym_plugin``
when it is imported (routing-gym's ``gym.envs`` entry point), so a plain id works there: gym 0.23 reads
``routing_gym:RoutingGym/...`` as a namespace and never imports the module. The ``Dict`` ids
stay out: old ``gym`` has no ``Text`` space.

``LegacyGymEnv`` is the gymnasium env behind the old API: ``seed(s)`` seeds the next
``reset()``, ``reset()`` returns the observation (and the info with ``return_info=True``),
``step`` returns ``(obs, reward, terminated or truncated, info)`` with
``info["TimeLimit.truncated"]`` on a cut stream, as old ``TimeLimit`` reported it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import gymnasium


def register_legacy_ids(env_ids: list[str]) -> None:
    """Register ``env_ids`` in ``gym``'s registry if ``gym`` (the old package) is imported."""
    gym = sys.modules.get("gym")
    # From sys.modules: while gym imports its plugins, `gym.envs` is not yet bound on `gym`.
    registry = getattr(sys.modules.get("gym.envs.registration"), "registry", None)
    if gym is None or registry is None or _version(getattr(gym, "__version__", "0")) >= (0, 26):
        return  # gym 0.26 has gymnasium's five-value step: not the API this adapter serves
    known = set(getattr(registry, "env_specs", registry))
    for env_id in env_ids:
        if env_id not in known:  # the registry's own method: gym.register is unbound while gym imports plugins
            registry.register(env_id, entry_point="routing_gym.envs.legacy_gym:LegacyGymEnv", kwargs={"env_id": env_id})


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def _legacy_space(space: gymnasium.spaces.Space) -> Any:
    spaces = sys.modules["gym"].spaces
    if isinstance(space, gymnasium.spaces.Box):
        return spaces.Box(space.low, space.high, dtype=space.dtype)
    if isinstance(space, gymnasium.spaces.Discrete):
        return spaces.Discrete(int(space.n))
    raise TypeError(f"old gym gets the Box ids only; {space} has no gym 0.2x counterpart")


@functools.cache
def _legacy_env_class() -> type:
    gym = sys.modules["gym"]

    class LegacyGymEnv(gym.Env):
        """A gymnasium routing env behind ``gym`` 0.2x's API (see the module docstring)."""

        metadata = {"render.modes": []}

        def __init__(self, env_id: str, **kwargs: Any):
            self.env = gymnasium.make(env_id, **kwargs)
            self.observation_space = _legacy_space(self.env.observation_space)
            self.action_space = _legacy_space(self.env.action_space)
            self._seed: int | None = None

        def seed(self, seed: int | None = None) -> list[int | None]:
            self._seed = seed
            return [seed]

        def reset(self, *, seed: int | None = None, return_info: bool = False, options: dict | None = None) -> Any:
            seed, self._seed = (seed if seed is not None else self._seed), None
            obs, info = self.env.reset(seed=seed, options=options)
            return (obs, info) if return_info else obs

        def step(self, action: Any) -> tuple[Any, float, bool, dict]:
            obs, reward, terminated, truncated, info = self.env.step(action)
            if truncated and not terminated:
                info["TimeLimit.truncated"] = True
            return obs, float(reward), bool(terminated or truncated), info

        def close(self) -> None:
            self.env.close()

    return LegacyGymEnv


def __getattr__(name: str) -> Any:
    # gym's entry point loader asks for LegacyGymEnv; the class needs gym's Env, so it is built then.
    if name == "LegacyGymEnv":
        return _legacy_env_class()
    raise AttributeError(name)
