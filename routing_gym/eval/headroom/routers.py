"""The content routers of ``routing-gym headroom``: which are run, and each one fitted on some rows
and asked for P(correct) (and joules) on others (``CorrectnessPredictor``, ``routing_gym_agents.base``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

from routing_gym.envs import DEFAULT_COEFFICIENTS, ObservationBatch, Reward
from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.eval.headroom.ladder import Scorer, bench_means, cross_fitted
from routing_gym.tournament import Tournament

DEFAULT_ROUTERS = ("cost-aware", "irt", "mf", "gbdt")  # those registered are run when none are named
FIT_SPLIT, HELDOUT_SPLIT = "headroom:fit", "headroom:heldout"


def relabelled(t: Tournament, fit_rows: np.ndarray, heldout_rows: np.ndarray) -> Tournament:
    """A copy whose ``fit_rows`` form the split FIT_SPLIT and ``heldout_rows`` HELDOUT_SPLIT (the
    rest keep theirs): a router's FitContext then sees the fit rows only."""
    split = t.queries["split"].to_numpy(dtype=object).copy()
    split[fit_rows], split[heldout_rows] = FIT_SPLIT, HELDOUT_SPLIT
    queries = t.queries.copy()
    queries["split"] = split.astype(str)
    return dataclasses.replace(t, queries=queries)


def router_fit_predict(name: str, t: Tournament, seed: int, kwargs: dict[str, Any], info: dict[str, Any]
                       ) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``fit_predict(fit_rows, rows) -> (P, E)`` for router ``name`` made with ``kwargs``. A router
    that chooses a strength on validation (``chosen_strength``, agents/nested.py) chooses it in the
    first fit; later fits reuse it (``kwargs`` and ``info`` record it; ``info["validation_value"]``:
    the value of its chosen strength's routes on its validation part, where it validated)."""
    from routing_gym_agents import FitContext, make_agent
    from routing_gym_agents.base import EnergyPredictor

    reward = Reward("gated_rank", dict(DEFAULT_COEFFICIENTS))  # recorded in fit logs; predictors train on outcomes

    def fit_predict(fit: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        copy = relabelled(t, fit, rows)
        agent = make_agent(name, **kwargs)
        log = agent.fit(FitContext(tournament=copy, reward=reward, train_split=FIT_SPLIT, seed=seed, feedback="full"))
        chosen = getattr(agent, "chosen_strength", None)
        validated = (log or {}).get("validation_value") if isinstance(log, dict) else None
        if validated:  # the value of the chosen strength's routes on the fit's validation part: how routers are compared
            info["validation_value"] = float(max(validated.values()))
        if chosen is not None and "strength" not in kwargs:  # the first fit chose: later fits keep it
            kwargs["strength"] = float(chosen)
            info["strength"] = "label only" if math.isinf(chosen) else float(chosen)
        batch = ObservationBatch.from_tournament(copy, rows)
        p = np.asarray(agent.predict_correct(batch), dtype=np.float64)
        if p.shape != (len(rows), t.n_models) or not np.isfinite(p).all() or p.min() < 0 or p.max() > 1:
            raise RoutingGymError(f"router {name!r}: predict_correct returned shape {p.shape} (want {(len(rows), t.n_models)}) "
                                  "or values outside [0, 1]")
        if isinstance(agent, EnergyPredictor):
            e = np.asarray(agent.predict_energy(batch), dtype=np.float64)
            if e.shape != p.shape or not np.isfinite(e).all():
                raise RoutingGymError(f"router {name!r}: predict_energy returned shape {e.shape} or non-finite joules")
        else:
            e = bench_means(t, t.energy_j, fit, rows)
        return p, e

    return fit_predict


def router_scorer(name: str, t: Tournament, seed: int, agent_kwargs: dict[str, Any], train_rows: np.ndarray,
                  folds: list[np.ndarray], test_rows: np.ndarray) -> Scorer:
    """A content router fitted on all of train, then once per fold, asked for P (and E). The fit on
    all of train chooses a nested router's strength; the folds reuse it, so the cross-fitted train
    points that fix mu belong to the same predictor as the test one (``fit_info["kwargs"]``: the
    settings every fit used after the first)."""
    kwargs, info = dict(agent_kwargs), {}
    scorer = cross_fitted(router_fit_predict(name, t, seed, kwargs, info), train_rows, folds, test_rows)
    scorer.fit_info.update(info)
    scorer.fit_info["kwargs"] = kwargs
    return scorer


def resolve_routers(routers: Sequence[str] | None, agent_kwargs: dict[str, dict[str, Any]]) -> list[str]:
    """The content routers of a run (``None``: the registered ones of DEFAULT_ROUTERS), each
    checked to be registered and to expose ``predict_correct`` before anything is fitted."""
    from routing_gym_agents import make_agent
    from routing_gym_agents.base import CorrectnessPredictor
    from routing_gym_agents.registry import list_agents, unknown_agent_error

    registered = list_agents()
    names = [r for r in DEFAULT_ROUTERS if r in registered] if routers is None else list(routers)
    for name in names:
        if name not in registered:
            raise unknown_agent_error(name)
        try:
            agent = make_agent(name, **agent_kwargs.get(name, {}))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"router {name!r}: {exc}") from None
        if not isinstance(agent, CorrectnessPredictor):
            raise UsageError(f"router {name!r} exposes no predict_correct(batch) -> [n, K] P(correct) (the "
                             "CorrectnessPredictor contract of routing_gym_agents.base): it cannot be a content rung")
        if getattr(agent, "feedback", "full") != "full":
            raise UsageError(f"router {name!r} learns from bandit feedback; headroom's content rung needs a "
                             "full-information correctness predictor")
    return names
