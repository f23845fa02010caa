"""Every gymnasium id of routing-gym, registered in one place when ``routing_gym.envs`` is imported.

| id | env |
| --- | --- |
| `RoutingGym/Replay-v0` | `RoutingEnv` over any tournament (`tournament=` a name, directory or object) |
| `RoutingGym/Budget-v0` | `BudgetRoutingEnv` |
| `RoutingGym/ChangingPool-v0` | `ChangingPoolEnv` |
| `RoutingGym/MultiTurn-v0` | `MultiTurnRoutingEnv` |
| `RoutingGym/Procedural-v0` and one id per procedural preset | `RoutingEnv` over a generated tournament |

`gym.make_vec(id, num_envs=B)` is correct by default for every id: the one-step ids
(`Replay-v0`, the procedural ones) build a native `RoutingVectorEnv` (same-step autoreset, B
envs as array gathers); the multi-step variants (budget, changing pool, multi-turn) build a
`SyncVectorEnv` of B single envs with *same-step* autoreset (gymnasium's default, next-step,
would return a zero-reward reset step after every episode end).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import gymnasium as gym

from routing_gym.envs.routing_env import RoutingEnv, default_config

REPLAY_ID = "RoutingGym/Replay-v0"
BUDGET_ID = "RoutingGym/Budget-v0"
CHANGING_POOL_ID = "RoutingGym/ChangingPool-v0"
MULTITURN_ID = "RoutingGym/MultiTurn-v0"
PROCEDURAL_ID = "RoutingGym/Procedural-v0"
# Procedural presets and their ids (the presets themselves live in routing_gym.sources.synthetic).
PRESET_IDS = {
    "paper-pool": "RoutingGym/PaperPool-v0",
    "two-model": "RoutingGym/TwoModel-v0",
    "collapse-prone": "RoutingGym/CollapseProne-v0",
    "many-models": "RoutingGym/ManyModels-v0",
    "specialist-pool": "RoutingGym/SpecialistPool-v0",
    "specialist-pool-large": "RoutingGym/SpecialistPoolLarge-v0",
}
VECTOR_ENTRY_POINT = "routing_gym.envs.vector_env:RoutingVectorEnv"
ENTRY_POINTS = {
    REPLAY_ID: "routing_gym.envs.routing_env:RoutingEnv",
    BUDGET_ID: "routing_gym.envs.budget_env:BudgetRoutingEnv",
    CHANGING_POOL_ID: "routing_gym.envs.changing_pool_env:ChangingPoolEnv",
    MULTITURN_ID: "routing_gym.envs.multiturn_env:MultiTurnRoutingEnv",
}


def make_procedural_env(preset: str | None = None, **kwargs: Any) -> gym.Env:
    """A ``RoutingEnv`` on a procedural tournament (the entry point of the gymnasium ids).

    Keyword arguments that are ``RoutingEnv`` options (``split``, ``reward``, ``coefficients``,
    ...) go to the env; the rest are ``ProceduralConfig`` knobs applied to ``preset`` (or to
    the default config when no preset is named)::

        gym.make("RoutingGym/Procedural-v0", text_signal=1.0, n_queries=500, split="test")
        gym.make("RoutingGym/TwoModel-v0", seed=3, coefficients={"lambda_e": 0.4})
    """
    tournament, env_kwargs = _procedural_tournament(preset, kwargs)
    return RoutingEnv(tournament=tournament, **env_kwargs)


def make_procedural_vector_env(num_envs: int = 1, preset: str | None = None, **kwargs: Any) -> gym.vector.VectorEnv:
    """A ``RoutingVectorEnv`` on a procedural tournament (the ids' ``vector_entry_point``);
    keywords as ``make_procedural_env``, plus the vector env's own (``observation``, ...)."""
    from routing_gym.envs.vector_env import RoutingVectorEnv

    vector_options = {"observation", "featurizer", "fit_split", "feature_params"}
    vector_kwargs = {key: kwargs.pop(key) for key in list(kwargs) if key in vector_options}
    tournament, env_kwargs = _procedural_tournament(preset, kwargs)
    return RoutingVectorEnv(num_envs, tournament=tournament, **env_kwargs, **vector_kwargs)


def _procedural_tournament(preset: str | None, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The generated tournament and the env options among ``kwargs`` (the rest are generator knobs)."""
    from routing_gym.sources.synthetic import ProceduralConfig, generate_cached, preset_config

    env_options = set(default_config()) - {"tournament"}
    if "tournament" in kwargs:
        raise TypeError("procedural environments build their own tournament; use RoutingGym/Replay-v0 for a given one")
    env_kwargs = {key: kwargs.pop(key) for key in list(kwargs) if key in env_options}
    if preset is not None:
        config = preset_config(preset, **kwargs)
    else:
        known = {f.name for f in dataclasses.fields(ProceduralConfig)}
        unknown = set(kwargs) - known
        if unknown:
            raise TypeError(
                f"{PROCEDURAL_ID}: unknown option(s) {sorted(unknown)}; env options: {sorted(env_options)}; "
                f"ProceduralConfig fields: {sorted(known)}"
            )
        config = ProceduralConfig(**kwargs)
    return generate_cached(config), env_kwargs


def make_sync_vector_env(env_id: str, num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``num_envs`` single ``env_id`` envs with same-step autoreset: the ``vector_entry_point`` of
    the multi-step variants, whose episodes a native vector env would have to keep per env."""
    return gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id, **kwargs) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def registered_ids() -> list[str]:
    """Every id this module registers."""
    return [*ENTRY_POINTS, PROCEDURAL_ID, *PRESET_IDS.values()]


def register_all() -> None:
    for env_id, entry_point in ENTRY_POINTS.items():
        if env_id not in gym.registry:
            vector = VECTOR_ENTRY_POINT if env_id == REPLAY_ID else functools.partial(make_sync_vector_env, env_id)
            gym.register(env_id, entry_point=entry_point, vector_entry_point=vector)
    procedural = "routing_gym.envs.registration:make_procedural_env"
    procedural_vector = "routing_gym.envs.registration:make_procedural_vector_env"
    if PROCEDURAL_ID not in gym.registry:
        gym.register(PROCEDURAL_ID, entry_point=procedural, vector_entry_point=procedural_vector)
    for name, env_id in PRESET_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=procedural, vector_entry_point=procedural_vector, kwargs={"preset": name})
