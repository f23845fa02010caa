"""ChangingPoolEnv: the model pool changes mid-stream (models added or removed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
from gymnasium import spaces

from routing_gym.envs.replay import RoutingConfig
from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.errors import RoutingGymError

EVENT_KINDS = ("add", "remove")


@dataclass(frozen=True)
class PoolEvent:
    """At decision ``step`` (0-based, counted from the last seeded reset), ``kind`` ("add" or
    "remove") ``model_id``; the change applies before that decision is made."""

    step: int
    kind: str
    model_id: str

    @classmethod
    def parse(cls, event: PoolEvent | Sequence[Any] | dict[str, Any]) -> PoolEvent:
        if isinstance(event, PoolEvent):
            return event
        if isinstance(event, dict):
            return cls(int(event["step"]), str(event["kind"]), str(event["model_id"]))
        step, kind, model_id = event
        return cls(int(step), str(kind), str(model_id))


@dataclass(frozen=True)
class ChangingPoolConfig(RoutingConfig):
    """RoutingEnv's options plus the pool schedule; invalid actions are penalized by default."""

    # Absent models are part of the action space, so penalizing them (not raising) is the
    # default: a random or learning agent meets them as the env's dynamics.
    invalid_action: str = "penalize"
    events: tuple = ()  # PoolEvents, (step, "add"|"remove", model_id) tuples or dicts
    initial_models: tuple | None = None  # model ids available at step 0; None: all but those first added by an event

    def __post_init__(self) -> None:
        super().__post_init__()
        events = sorted((PoolEvent.parse(e) for e in self.events or ()), key=lambda e: e.step)
        object.__setattr__(self, "events", tuple(events))
        if self.initial_models is not None:
            object.__setattr__(self, "initial_models", tuple(self.initial_models))


def default_config() -> dict[str, Any]:
    """Every ChangingPoolEnv option with its default (``ChangingPoolConfig``)."""
    return ChangingPoolConfig().to_dict()


class ChangingPoolEnv(RoutingEnv):
    """
    ## Description
    `RoutingEnv` with a model pool that changes during the stream, as in GreenServ's
    adaptability study: a schedule of events adds a model (a new release) or removes one (a
    deprecation or an outage) at given decision steps. The step counter runs across
    episodes from the last seeded `reset`, so a bandit's training stream sees the change
    once, mid-stream.

    ## Action Space
    `Discrete(K)` over the whole tournament's models (so indices never shift). Routing to a
    model that is not in the pool right now is an invalid action: it earns `invalid_penalty`,
    costs nothing and counts as wrong (`invalid_action="penalize"`, the default here), or
    raises `InvalidActionError` (`invalid_action="raise"`). `action_masks()` is the pool.

    ## Observation Space
    `RoutingEnv`'s `Dict` plus `"available"`: `MultiBinary(K)` — 1 for the models in the pool
    at this decision.

    ## Rewards
    As `RoutingEnv` (the registered reward of the chosen route); `info["oracle_reward"]` is
    the best reward among the models *available* at this step, so regret curves measure
    the gap to the best current model.

    ## Starting State
    `reset()` applies the events due by the current step and shows the next query;
    `reset(seed=...)` restarts the stream (step 0, the initial pool, a new query order).

    ## Episode End
    One step per episode (`terminated=True`), as `RoutingEnv`.

    ## Info
    `RoutingEnv`'s, plus `stream_step` (the decision's step), `available` (the mask) and
    `pool_events` (the events fired at this step, `"; "`-joined, e.g. `"add m3"`; `""` when none),
    at `reset` and `step` alike.

    ## Arguments
    `ChangingPoolConfig` (`default_config()`): RoutingEnv's options plus `events` and
    `initial_models`. Registered id: `RoutingGym/ChangingPool-v0`. `evaluate(actions)` scores
    against the current pool.
    """

    config_class: ClassVar[type[ChangingPoolConfig]] = ChangingPoolConfig
    config: ChangingPoolConfig

    def __init__(self, config: ChangingPoolConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self.events = list(self.config.events)
        ids = self.tournament.model_ids
        for e in self.events:
            if e.kind not in EVENT_KINDS:
                raise RoutingGymError(f"pool event {e}: kind must be one of {EVENT_KINDS}")
            if e.model_id not in ids:
                raise RoutingGymError(f"pool event {e}: unknown model {e.model_id!r}; models: {', '.join(ids)}")
            if e.step < 0:
                raise RoutingGymError(f"pool event {e}: step must be >= 0")
        initial = self.config.initial_models
        if initial is None:
            first: dict[str, str] = {}
            for e in self.events:
                first.setdefault(e.model_id, e.kind)
            initial = tuple(m for m in ids if first.get(m) != "add")
            self.config = self.config.replace(initial_models=initial)
        unknown_ids = sorted(set(initial) - set(ids))
        if unknown_ids:
            raise RoutingGymError(f"initial_models: unknown model(s) {unknown_ids}; models: {', '.join(ids)}")
        self._initial = np.isin(ids, list(initial))
        self._check_schedule()
        self._available = self._initial.copy()
        self._stream_step = 0
        self._next_event = 0
        self._fired: list[PoolEvent] = []

    def _make_observation_space(self) -> spaces.Dict:
        return spaces.Dict({**self._question_spaces, "available": spaces.MultiBinary(self.tournament.n_models)})

    @property
    def available(self) -> np.ndarray:
        """Boolean ``[K]`` mask of the models in the pool now (a copy)."""
        return self._available.copy()

    def _valid_now(self) -> np.ndarray:
        return self._available

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._available, self._stream_step, self._next_event = self._initial.copy(), 0, 0
        return super().reset(seed=seed, options=options)

    def _before_draw(self) -> None:
        self._fired = self._apply_due_events()

    def info_defaults(self) -> dict[str, Any]:
        return {**super().info_defaults(), "stream_step": -1, "available": self.available, "pool_events": ""}

    def _pool_info(self) -> dict[str, Any]:
        """The pool at this decision: its step, the mask, and the events fired before it ("; "-joined:
        one string, so infos keep one type however many fired)."""
        events = "; ".join(f"{e.kind} {e.model_id}" for e in self._fired)
        return {"stream_step": self._stream_step, "available": self.available, "pool_events": events}

    def _reset_info(self, position: int) -> dict[str, Any]:
        return {**super()._reset_info(position), **self._pool_info()}

    def _add_info(self, info: dict[str, Any]) -> None:
        info.update(self._pool_info())
        self._stream_step += 1

    def _observe(self, position: int) -> dict[str, Any]:
        obs = self._question(position)
        obs["available"] = self._available.astype(np.int8)
        return obs

    def _apply_due_events(self) -> list[PoolEvent]:
        fired = []
        while self._next_event < len(self.events) and self.events[self._next_event].step <= self._stream_step:
            e = self.events[self._next_event]
            self._available[self.tournament.model_index(e.model_id)] = e.kind == "add"
            fired.append(e)
            self._next_event += 1
        return fired

    def _check_schedule(self) -> None:
        pool = self._initial.copy()
        for e in self.events:
            pool[self.tournament.model_index(e.model_id)] = e.kind == "add"
            if not pool.any():
                raise RoutingGymError(f"pool event {e} leaves no model in the pool")
        if not self._initial.any():
            raise RoutingGymError("the initial pool is empty")
