"""Every gymnasium id of routing-gym, registered in one place when ``routing_gym.envs`` is imported.

| id | env |
| --- | --- |
| `RoutingGym/Replay-v0` | `RoutingEnv` over any tournament (`tournament=` a name, directory or object) |
| `RoutingGym/Budget-v0` | `BudgetRoutingEnv` |
| `RoutingGym/ChangingPool-v0` | `ChangingPoolEnv` |
| `RoutingGym/MultiTurn-v0` | `MultiTurnRoutingEnv` |
| `RoutingGym/Procedural-v0` and one id per procedural preset | `RoutingEnv` over a generated tournament |
| `RoutingGym/Serving-v0` (and `-features-v0`) | `ServingEnv`: routing under load, servers that batch (`routing_gym.serving`) |

Every id also comes as ``<name>-features-v0``: the same env with a ``Box`` observation
(``observation="features"``, which every id accepts: ``BoxObservation``, the featurizer fitted
on the training split), so libraries that take an env id and need a ``Box`` (SB3, CleanRL,
TorchRL, Tianshou) run it unmodified. The one-query ids (replay, changing pool, procedural)
also come as ``<name>-features-stream-v0``: an episode is a stream of ``STREAM_LENGTH`` queries
(``stream=T``, see ``RoutingEnv``), for clients that vectorize with gymnasium's next-step
autoreset, which otherwise spends every other step on a reward-0 reset.

Every entry point takes gymnasium's ``render_mode`` (None; ``metadata["render_modes"]`` is
empty: nothing renders) and rejects an unknown keyword with Python's own ``TypeError: ... got an
unexpected keyword argument 'x'``, which clients such as TorchRL key on, then lists the options.

Every one-query id (replay, changing pool, procedural and presets) also has a multi-objective
twin, ``RoutingGym/MO-<name>-v0`` and ``RoutingGym/MO-<name>-features-v0`` (``mo_ids()``,
``mo_env.py``): the same env with a vector reward, for ``mo_gymnasium.make``. Gymnasium's vector
envs hold scalar rewards, so ``gym.make_vec`` of an MO id raises and names MO-Gymnasium's
``MOSyncVectorEnv``.

`gym.make_vec(id, num_envs=B)` is correct by default for every other id: the one-step ids
(`Replay-v0`, the procedural ones, and their `-features` variants) build a native
`RoutingVectorEnv` (same-step autoreset, B envs as array gathers); the multi-step variants
(budget, changing pool, multi-turn, the streams) build a `SyncVectorEnv` of B single envs with
*same-step* autoreset (gymnasium's default, next-step, would return a zero-reward reset step
after every episode end).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import gymnasium as gym

from routing_gym.envs.budget_env import BudgetRoutingEnv
from routing_gym.envs.changing_pool_env import ChangingPoolEnv
from routing_gym.envs.legacy_gym import register_legacy_ids
from routing_gym.envs.mo_env import MOChangingPoolEnv, MORoutingEnv
from routing_gym.envs.multiturn_env import MultiTurnRoutingEnv
from routing_gym.envs.replay import unexpected_keyword_error
from routing_gym.envs.routing_env import RoutingEnv, default_config

REPLAY_ID = "RoutingGym/Replay-v0"
SERVING_ID = "RoutingGym/Serving-v0"
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
STREAM_LENGTH = 100  # queries per episode of the -stream ids: a next-step reset costs 1 step in 101
OBSERVATION_OPTIONS = ("observation", "featurizer", "fit_split", "feature_params")
MO_OPTIONS = ("scale", "objectives")  # MORoutingEnv's own keywords
_HERE = "routing_gym.envs.registration"
ENTRY_POINTS = {
    REPLAY_ID: f"{_HERE}:make_replay_env",
    BUDGET_ID: f"{_HERE}:make_budget_env",
    CHANGING_POOL_ID: f"{_HERE}:make_changing_pool_env",
    MULTITURN_ID: f"{_HERE}:make_multiturn_env",
}
ONE_QUERY_IDS = (REPLAY_ID, CHANGING_POOL_ID, PROCEDURAL_ID, *PRESET_IDS.values())  # ids that take `stream`


MO_ENTRY_POINTS = {
    REPLAY_ID: f"{_HERE}:make_mo_replay_env",
    CHANGING_POOL_ID: f"{_HERE}:make_mo_changing_pool_env",
}


def mo_id(env_id: str) -> str:
    """``RoutingGym/X-v0`` -> ``RoutingGym/MO-X-v0`` (the same env with a vector reward)."""
    namespace, name = env_id.split("/", 1)
    return f"{namespace}/MO-{name}"


def features_id(env_id: str) -> str:
    """``RoutingGym/X-v0`` -> ``RoutingGym/X-features-v0`` (the same env, observed as a ``Box``)."""
    name, version = env_id.rsplit("-v", 1)
    return f"{name}-features-v{version}"


def stream_id(env_id: str) -> str:
    """``RoutingGym/X-v0`` -> ``RoutingGym/X-features-stream-v0`` (``Box``, streams of ``STREAM_LENGTH`` queries)."""
    name, version = env_id.rsplit("-v", 1)
    return f"{name}-features-stream-v{version}"


def with_observation(
    make: Callable[..., gym.Env],
    observation: str = "dict",
    featurizer: Any = None,
    fit_split: str = "train",
    feature_params: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> gym.Env:
    """``make(**kwargs)``, observed as a ``Box`` through ``BoxObservation`` when
    ``observation="features"`` (the keywords ``RoutingVectorEnv`` takes for the same view)."""
    from routing_gym.envs.vector_env import OBSERVATIONS
    from routing_gym.envs.wrappers import BoxObservation

    if observation not in OBSERVATIONS:
        raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
    if observation == "dict":
        if featurizer is not None or feature_params:
            raise TypeError("featurizer / feature_params apply to observation='features' only")
        return make(**kwargs)
    return BoxObservation(make(**kwargs), featurizer, fit_split, **dict(feature_params or {}))


def make_replay_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/Replay-v0`` and its variants: a ``RoutingEnv``."""
    return with_observation(RoutingEnv, **kwargs)


def make_budget_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/Budget-v0`` and its variant: a ``BudgetRoutingEnv``."""
    return with_observation(BudgetRoutingEnv, **kwargs)


def make_changing_pool_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/ChangingPool-v0`` and its variants: a ``ChangingPoolEnv``."""
    return with_observation(ChangingPoolEnv, **kwargs)


def make_multiturn_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/MultiTurn-v0`` and its variant: a ``MultiTurnRoutingEnv``."""
    return with_observation(MultiTurnRoutingEnv, **kwargs)


def make_serving_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/Serving-v0`` and its variant: a ``ServingEnv`` (routing under load)."""
    from routing_gym.envs.serving_env import ServingEnv

    return with_observation(ServingEnv, **kwargs)


def make_serving_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``vector_entry_point`` of the serving ids: ``make_sync_vector_env`` of ``RoutingGym/Serving-v0``."""
    return make_sync_vector_env(SERVING_ID, num_envs, **kwargs)


def serving_ids() -> list[str]:
    """``RoutingGym/Serving-v0`` and its ``-features-v0`` id (kept out of ``registered_ids``:
    they have no stream or MO twin)."""
    return [SERVING_ID, features_id(SERVING_ID)]


def register_serving_ids() -> None:
    for variant, extra in ((SERVING_ID, {}), (features_id(SERVING_ID), {"observation": "features"})):
        if variant not in gym.registry:
            gym.register(variant, entry_point=f"{_HERE}:make_serving_env",
                         vector_entry_point=f"{_HERE}:make_serving_vector_env", kwargs=extra)


def make_mo_replay_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/MO-Replay-v0`` and its variant: an ``MORoutingEnv``."""
    return with_observation(MORoutingEnv, **kwargs)


def make_mo_changing_pool_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``RoutingGym/MO-ChangingPool-v0`` and its variant: an ``MOChangingPoolEnv``."""
    return with_observation(MOChangingPoolEnv, **kwargs)


def make_mo_procedural_env(preset: str | None = None, **kwargs: Any) -> gym.Env:
    """An ``MORoutingEnv`` on a procedural tournament (the MO procedural ids); keywords as
    ``make_procedural_env`` plus ``scale`` and ``objectives``."""
    return make_procedural_env(preset, _env_class=MORoutingEnv, **kwargs)


def refuse_mo_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.VectorEnv:
    """``vector_entry_point`` of the MO ids: gymnasium's vector envs keep one scalar reward per env."""
    raise TypeError(
        "an MO id has a vector reward, which gymnasium's vector envs cannot hold: vectorize it with "
        "mo_gymnasium.wrappers.vector.MOSyncVectorEnv([lambda: mo_gymnasium.make(id) for _ in range(n)])"
    )


def make_procedural_env(preset: str | None = None, _env_class: type = RoutingEnv, **kwargs: Any) -> gym.Env:
    """A ``RoutingEnv`` on a procedural tournament (the entry point of the gymnasium ids).

    Keyword arguments that are ``RoutingEnv`` options (``split``, ``reward``, ``coefficients``,
    ``stream``, ...) and gymnasium's ``render_mode`` go to the env, ``observation`` (and the
    feature options) choose its view as for every id; the rest are ``ProceduralConfig`` knobs
    applied to ``preset`` (or to the default config when no preset is named)::

        gym.make("RoutingGym/Procedural-v0", text_signal=1.0, n_queries=500, split="test")
        gym.make("RoutingGym/TwoModel-v0", seed=3, coefficients={"lambda_e": 0.4})

    ``_env_class`` is the env built (``MORoutingEnv`` for the MO ids, which also take ``scale``
    and ``objectives``).
    """
    view = {key: kwargs.pop(key) for key in list(kwargs) if key in OBSERVATION_OPTIONS}
    # the MO class's own keywords (scale, objectives) go to it, not to the generator
    mo = {key: kwargs.pop(key) for key in list(kwargs) if key in MO_OPTIONS and _env_class is not RoutingEnv}
    tournament, env_kwargs = _procedural_tournament(preset, kwargs)
    return with_observation(_env_class, **view, tournament=tournament, **env_kwargs, **mo)


def make_procedural_vector_env(num_envs: int = 1, preset: str | None = None, **kwargs: Any) -> gym.vector.VectorEnv:
    """A ``RoutingVectorEnv`` on a procedural tournament (the ids' ``vector_entry_point``);
    keywords as ``make_procedural_env``. Streams (``stream=T``) vectorize as ``make_sync_vector_env``."""
    from routing_gym.envs.vector_env import RoutingVectorEnv

    if kwargs.get("stream") is not None:
        return make_sync_vector_env(PROCEDURAL_ID, num_envs, preset=preset, **kwargs)
    view = {key: kwargs.pop(key) for key in list(kwargs) if key in OBSERVATION_OPTIONS}
    tournament, env_kwargs = _procedural_tournament(preset, kwargs)
    return RoutingVectorEnv(num_envs, tournament=tournament, **env_kwargs, **view)


def make_replay_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.VectorEnv:
    """``RoutingGym/Replay-v0``'s ``vector_entry_point``: a ``RoutingVectorEnv``, or for streams
    (``stream=T``) ``make_sync_vector_env``."""
    from routing_gym.envs.vector_env import RoutingVectorEnv

    if kwargs.get("stream") is not None:
        return make_sync_vector_env(REPLAY_ID, num_envs, **kwargs)
    return RoutingVectorEnv(num_envs, **kwargs)


def _procedural_tournament(preset: str | None, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The generated tournament and the env options among ``kwargs`` (the rest are generator knobs)."""
    from routing_gym.sources.synthetic import ProceduralConfig, generate_cached, preset_config

    env_options = {*default_config(), "render_mode"} - {"tournament"}
    if "tournament" in kwargs:
        raise TypeError("procedural environments build their own tournament; use RoutingGym/Replay-v0 for a given one")
    env_kwargs = {key: kwargs.pop(key) for key in list(kwargs) if key in env_options}
    known = {f.name for f in dataclasses.fields(ProceduralConfig)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise unexpected_keyword_error(
            "make_procedural_env", unknown, [*env_options, *OBSERVATION_OPTIONS, *(f"ProceduralConfig.{k}" for k in known)]
        )
    config = preset_config(preset, **kwargs) if preset is not None else ProceduralConfig(**kwargs)
    return generate_cached(config), env_kwargs


def make_sync_vector_env(env_id: str, num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``num_envs`` single ``env_id`` envs with same-step autoreset: how the multi-step variants
    vectorize, whose episodes a native vector env would have to keep per env."""
    return gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id, **kwargs) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def make_budget_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``vector_entry_point`` of the budget ids: ``make_sync_vector_env`` of ``RoutingGym/Budget-v0``
    (the variant's own keywords, such as ``observation``, arrive in ``kwargs``)."""
    return make_sync_vector_env(BUDGET_ID, num_envs, **kwargs)


def make_changing_pool_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``vector_entry_point`` of the changing-pool ids: ``make_sync_vector_env`` of ``RoutingGym/ChangingPool-v0``."""
    return make_sync_vector_env(CHANGING_POOL_ID, num_envs, **kwargs)


def make_multiturn_vector_env(num_envs: int = 1, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``vector_entry_point`` of the multi-turn ids: ``make_sync_vector_env`` of ``RoutingGym/MultiTurn-v0``."""
    return make_sync_vector_env(MULTITURN_ID, num_envs, **kwargs)


# Every vector_entry_point is a "module:function" string, not a callable: EnvSpec.to_json()
# (and so Minari's DataCollector, which stores the spec) refuses callables.
VECTOR_ENTRY_POINTS = {
    REPLAY_ID: f"{_HERE}:make_replay_vector_env",
    BUDGET_ID: f"{_HERE}:make_budget_vector_env",
    CHANGING_POOL_ID: f"{_HERE}:make_changing_pool_vector_env",
    MULTITURN_ID: f"{_HERE}:make_multiturn_vector_env",
}


def registered_ids() -> list[str]:
    """The base id of every env family and procedural preset (each also registered as
    ``features_ids()`` and, for the one-query ones, ``stream_ids()``)."""
    return [*ENTRY_POINTS, PROCEDURAL_ID, *PRESET_IDS.values()]


def features_ids() -> list[str]:
    """The ``-features-v0`` id of every base id: the same env observed as a ``Box``."""
    return [features_id(env_id) for env_id in registered_ids()]


def stream_ids() -> list[str]:
    """The ``-features-stream-v0`` id of every one-query base id."""
    return [stream_id(env_id) for env_id in ONE_QUERY_IDS]


def mo_ids() -> list[str]:
    """The MO twin of every one-query base id and of its ``-features-v0`` id."""
    return [variant for env_id in ONE_QUERY_IDS for variant in (mo_id(env_id), features_id(mo_id(env_id)))]


def register_mo_ids() -> None:
    procedural = f"{_HERE}:make_mo_procedural_env"
    presets = {env_id: {"preset": name} for name, env_id in PRESET_IDS.items()}
    for env_id in ONE_QUERY_IDS:
        entry_point = MO_ENTRY_POINTS.get(env_id, procedural)
        base = presets.get(env_id, {})
        for variant, extra in ((mo_id(env_id), {}), (features_id(mo_id(env_id)), {"observation": "features"})):
            if variant not in gym.registry:
                gym.register(variant, entry_point=entry_point, vector_entry_point=f"{_HERE}:refuse_mo_vector_env",
                             kwargs={**base, **extra})


def register_all() -> None:
    procedural = f"{_HERE}:make_procedural_env"
    procedural_vector = f"{_HERE}:make_procedural_vector_env"
    entries = {**ENTRY_POINTS, PROCEDURAL_ID: procedural, **{env_id: procedural for env_id in PRESET_IDS.values()}}
    presets = {env_id: {"preset": name} for name, env_id in PRESET_IDS.items()}
    for env_id, entry_point in entries.items():
        # the replay and procedural vector entries build a RoutingVectorEnv, or a SyncVectorEnv for a stream
        vector = procedural_vector if entry_point == procedural else VECTOR_ENTRY_POINTS[env_id]
        base = presets.get(env_id, {})
        variants = {env_id: {}, features_id(env_id): {"observation": "features"}}
        if env_id in ONE_QUERY_IDS:
            variants[stream_id(env_id)] = {"observation": "features", "stream": STREAM_LENGTH}
        for variant, extra in variants.items():
            if variant not in gym.registry:
                gym.register(variant, entry_point=entry_point, vector_entry_point=vector, kwargs={**base, **extra})
    register_mo_ids()
    register_serving_ids()
    register_gym_plugin()  # into old gym's registry too, when it is loaded


def register_gym_plugin() -> None:
    """The Box ids in old gym's registry (if gym is loaded); also old gym's plugin hook (entry
    point group ``gym.envs``), which it runs while it is imported."""
    register_legacy_ids(features_ids() + stream_ids())
