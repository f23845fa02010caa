"""Unseen models: route to models that joined the pool after training (UniRoute's protocol).

UniRoute (Jitkrittum et al., "Universal Model Routing for Efficient LLM Inference", arXiv
2502.08773) trains a router on one set of models and, at test time, describes each new model
only by its answers on a small set of calibration questions; a router that represents models
by per-model parameters estimates the new model's from those answers, with everything it
learned about questions kept fixed. Here:

- ``hold_out_models(t, models, n_calibration, seed)`` splits the pool: ``seen`` (the tournament
  without the held-out models, every row and split kept: fit the agent on it) and ``pool`` (the
  seen models, then the held-out ones: score routes on it, so a new model's index is
  ``K_seen + j``). ``n_calibration`` training questions are drawn uniformly without replacement
  (``numpy.random.default_rng(seed)``, sorted by row); only on them are the new models'
  outcomes revealed, so the size stated is the whole description.
- ``UnseenModels.description()`` is the ``ModelDescription`` an agent receives through
  ``Agent.add_models``: the new models' static rows, the calibration questions as observations,
  the new models' outcomes there, and the seen models' outcomes on the same questions (training
  data the agent could read anyway; pairwise learners compare against them).

With no calibration question a new model is undescribed: route among the seen models (do not
call ``add_models``). Agents that can use a description set ``describes_new_models = True``
(``uniroute``, ``cost-aware``, ``irt``, ``mf``, ``gbdt``); the others raise
``UnseenModelsError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import EmptySplitError, UsageError
from routing_gym.tournament import Outcomes, Tournament


@dataclass(frozen=True)
class ModelDescription:
    """New models described only by their outcomes on calibration questions (training questions).

    ``models``: the new models' rows (static facts: ids, parameters, ...); ``observations``: the
    calibration questions as the env shows them; ``outcomes``: ``[n_calibration, K_new]`` the new
    models' outcomes on them; ``seen_outcomes``: ``[n_calibration, K_seen]`` the outcomes there of
    the pool the agent was fitted on (one ``add_models`` call per fitted agent)."""

    models: pd.DataFrame
    observations: ObservationBatch
    outcomes: Outcomes
    seen_outcomes: Outcomes

    @property
    def model_ids(self) -> list[str]:
        return self.models["model_id"].tolist()

    @property
    def n_calibration(self) -> int:
        return len(self.observations)


@dataclass(frozen=True)
class UnseenModels:
    """One unseen-model split of a tournament (module docstring)."""

    seen: Tournament
    pool: Tournament
    held_out: tuple[str, ...]
    calibration_rows: np.ndarray  # rows of both tournaments (the same queries), all in the training split

    def description(self) -> ModelDescription:
        n_seen = self.seen.n_models
        rows = self.calibration_rows
        outcomes = self.pool.outcomes(rows)
        return ModelDescription(
            models=self.pool.models.iloc[n_seen:].reset_index(drop=True),
            observations=ObservationBatch.from_tournament(self.pool, rows),
            outcomes=Outcomes(*(a[:, n_seen:] for a in outcomes)),
            seen_outcomes=Outcomes(*(a[:, :n_seen] for a in outcomes)),
        )


def hold_out_models(tournament: Tournament, models: Sequence[str], n_calibration: int, seed: int = 0,
                    train_split: str = "train") -> UnseenModels:
    """Hold ``models`` out of training; describe them on ``n_calibration`` training questions."""
    held_out = list(dict.fromkeys(models))
    for model in held_out:
        tournament.model_index(model)  # an unknown id raises UnknownNameError listing the pool
    seen = [m for m in tournament.model_ids if m not in held_out]
    if not held_out or not seen:
        raise UsageError(f"{tournament.card.name}: hold out at least one model and keep at least one "
                         f"(asked to hold out {held_out} of {tournament.model_ids})")
    train_rows = tournament.split_rows(train_split)
    if not 1 <= n_calibration <= len(train_rows):
        raise EmptySplitError(f"{tournament.card.name}: n_calibration must be between 1 and the {len(train_rows)} "
                              f"{train_split!r} questions, got {n_calibration} (with none, route among the seen models)")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(train_rows, size=n_calibration, replace=False))
    return UnseenModels(seen=tournament.subset(models=seen), pool=tournament.subset(models=seen + held_out),
                        held_out=tuple(held_out), calibration_rows=rows)
