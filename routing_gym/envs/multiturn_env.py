"""MultiTurnRoutingEnv: route a query, see a verifier's verdict, route again or Stop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from routing_gym.envs.replay import QueryStreamConfig, ReplayEnv
from routing_gym.envs.rewards import CORRECT_BASE, WRONG_REWARD
from routing_gym.errors import RoutingGymError

# Verifier verdicts in the observation.
NO_ANSWER, JUDGED_CORRECT, JUDGED_WRONG = 0, 1, 2


@dataclass(frozen=True)
class MultiTurnConfig(QueryStreamConfig):
    """The query stream plus the multi-turn task and its additive-energy reward."""

    max_turns: int = 3  # answers per query at most; the episode ends after the last one
    verifier_accuracy: float = 1.0  # probability that the verdict matches the answer's correctness
    lambda_e: float = 0.5  # reward charged per scale_j joules spent, summed over turns
    scale_j: float = 1000.0  # joules that cost lambda_e reward (set per pool, e.g. reward_variants.pool_scales)
    correct_reward: float = CORRECT_BASE
    wrong_reward: float = WRONG_REWARD  # also the outcome of stopping before any answer

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.max_turns, (int, np.integer)) and not isinstance(self.max_turns, bool) and self.max_turns >= 1):
            raise ValueError(f"max_turns must be an integer >= 1, got {self.max_turns!r}")
        if not 0.5 <= self.verifier_accuracy <= 1.0:
            raise ValueError(
                f"verifier_accuracy must be in [0.5, 1] (below 0.5 an inverted verdict is informative), got {self.verifier_accuracy}"
            )
        if not (self.lambda_e >= 0 and self.scale_j > 0):
            raise ValueError(f"need lambda_e >= 0 and scale_j > 0, got lambda_e={self.lambda_e}, scale_j={self.scale_j}")
        if not self.correct_reward > self.wrong_reward:
            raise ValueError(f"correct_reward ({self.correct_reward}) must exceed wrong_reward ({self.wrong_reward})")


def default_config() -> dict[str, Any]:
    """Every MultiTurnRoutingEnv option with its default (``MultiTurnConfig``)."""
    return MultiTurnConfig().to_dict()


class MultiTurnRoutingEnv(ReplayEnv):
    """
    ## Description
    Multi-turn routing (described in the reference paper, not run there): the router sends a
    question to a model, is told whether the answer was right, by a perfect or noisy
    verifier, and may then send it to another model or stop. The answer standing when the
    episode ends is the final answer; every answer's joules are paid. Outcomes are replayed
    from the tournament: asking a model returns its logged answer (a fractional correctness
    c is drawn as a Bernoulli(c) success per ask).

    ## Action Space
    `Discrete(K + 1)`: `0..K-1` routes the question to that model; `K` is `Stop` (accept the
    standing answer). Invalid actions (the scorer's rule) raise `InvalidActionError`.

    ## Observation Space
    A `Dict` with `text`, `benchmark` (and `difficulty` with `include_difficulty=True`) as in
    `RoutingEnv`, plus:
    - `"turn"`: `Discrete(max_turns + 1)` — answers obtained so far;
    - `"previous_model"`: `Discrete(K + 1)` — the last model asked, `K` before any answer;
    - `"verdict"`: `Discrete(3)` — the verifier's verdict on the standing answer:
      0 no answer yet, 1 judged correct, 2 judged wrong;
    - `"spent"`: `Box(0, S, (1,))` — joules spent on the query so far, in units of `scale_j`
      (S: `max_turns` of the split's dearest answers).

    ## Rewards
    Each routed turn costs `-lambda_e * E / scale_j` (E its joules), so energy accumulates
    additively over turns. When the episode ends the final answer earns `correct_reward`
    (2) if correct, else `wrong_reward` (-1); stopping before any answer earns
    `wrong_reward`. The return is `r_final - lambda_e * (sum of joules) / scale_j`. With a
    fractional correctness the drawn success decides.

    ## Starting State
    `reset()` draws the next query of the split as `RoutingEnv` does (`options` may pin a
    `query_id` or `index`); no answer yet, turn 0.

    ## Episode End
    `terminated=True` on `Stop`, or after the `max_turns`-th answer (the turn limit is part of
    the task and visible in `turn`, so no value is bootstrapped past it). Never truncated.

    ## Info
    After a routed turn: `model_id`, `correct` (the drawn truth of this answer), `energy_j`,
    `latency_s` (this turn); always `verdict`, `turn`, `total_energy_j`. At the end also
    `final_correct`, `final_model_id` (`""` without an answer), `turns`, `stopped` (True for
    `Stop`, False at the turn limit). `reset` and every `step` return all these keys: where one
    does not apply it holds `""`, 0.0, -1 or `False` (`model_id` `""`: no answer this turn;
    `turns` -1: not ended).

    ## Arguments
    `MultiTurnConfig` (`default_config()`). Registered id: `RoutingGym/MultiTurn-v0`. The
    queries are drawn by the shared replay core (`ReplayEnv`), as in every routing env. The
    reward is this env's own (additive joules over turns), not a registered per-route reward.
    """

    config_class: ClassVar[type[MultiTurnConfig]] = MultiTurnConfig
    config: MultiTurnConfig

    def __init__(self, config: MultiTurnConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        c = self.config
        self.max_turns = int(c.max_turns)
        self.verifier_accuracy = float(c.verifier_accuracy)
        self.lambda_e, self.scale_j = float(c.lambda_e), float(c.scale_j)
        self.correct_reward, self.wrong_reward = float(c.correct_reward), float(c.wrong_reward)
        k = self.tournament.n_models
        self.stop_action = k
        # At most max_turns of the split's dearest answers (a finite bound for the Box).
        max_spent = np.float32(self.max_turns * self.core.outcomes.energy_j.max() / self.scale_j * (1 + 1e-6))
        self.action_space = spaces.Discrete(k + 1)
        self.observation_space = spaces.Dict(
            {
                **self._question_spaces,
                "turn": spaces.Discrete(self.max_turns + 1),
                "previous_model": spaces.Discrete(k + 1),
                "verdict": spaces.Discrete(3),
                "spent": spaces.Box(0.0, max_spent, shape=(1,), dtype=np.float32),
            }
        )
        self._position: int | None = None
        self._turn = 0
        self._previous = k
        self._verdict = NO_ANSWER
        self._answer_correct: float | None = None
        self._spent = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.sampler.restart()
        self._position = self._draw(options)
        self._turn, self._previous, self._verdict = 0, self.stop_action, NO_ANSWER
        self._answer_correct, self._spent = None, 0.0
        return self._observation(), self._complete_info({**self.core.query_info(self._position), **self._turn_info()})

    def info_defaults(self) -> dict[str, Any]:
        """``ReplayEnv.info_defaults`` plus this turn's answer (``""`` / 0.0 without one), the turn
        state, and the episode's end (``final_*`` ``""`` / 0.0 and ``turns`` -1 before it)."""
        return {**super().info_defaults(), "model_id": "", "correct": 0.0, "energy_j": 0.0, "latency_s": 0.0,
                **self._turn_info(), "final_correct": 0.0, "final_model_id": "", "turns": -1, "stopped": False}

    def _turn_info(self) -> dict[str, Any]:
        return {"verdict": self._verdict, "turn": self._turn, "total_energy_j": self._spent}

    def step(self, action):
        if self._position is None:
            raise RoutingGymError("step() called before reset() (or after the episode ended)")
        a = self._checked_action(action, self.action_space.n)
        position = self._position
        info: dict[str, Any] = self.core.query_info(position)
        reward = 0.0
        if a != self.stop_action:
            o = self.core.outcomes
            c = float(o.correct[position, a])
            correct = float(c >= 1.0 or (c > 0.0 and self.np_random.random() < c))
            truthful = self.verifier_accuracy >= 1.0 or self.np_random.random() < self.verifier_accuracy
            joules = float(o.energy_j[position, a])
            self._turn += 1
            self._previous, self._answer_correct = a, correct
            self._verdict = JUDGED_CORRECT if bool(correct) == truthful else JUDGED_WRONG
            self._spent += joules
            reward -= self.lambda_e * joules / self.scale_j
            info.update(
                model_id=self.core.model_ids[a], correct=correct, energy_j=joules, latency_s=float(o.latency_s[position, a])
            )
        info.update(self._turn_info())
        done = a == self.stop_action or self._turn >= self.max_turns
        obs = self._observation()
        if done:
            final = bool(self._answer_correct)
            reward += self.correct_reward if final else self.wrong_reward
            info.update(
                final_correct=float(final),
                final_model_id="" if self._answer_correct is None else self.tournament.model_ids[self._previous],
                turns=self._turn,
                stopped=a == self.stop_action,
            )
            self._position = None
        return obs, float(reward), done, False, self._complete_info(info)

    def _observation(self) -> dict[str, Any]:
        obs = self._question(self._position)
        obs.update(turn=self._turn, previous_model=self._previous, verdict=self._verdict)
        obs["spent"] = np.array([self._spent / self.scale_j], dtype=np.float32)
        return obs
