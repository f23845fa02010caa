"""MultiTurnRoutingEnv: route a query, see a verifier's verdict, route again or Stop."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from routing_gym.envs.rewards import CORRECT_BASE, WRONG_REWARD
from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.errors import InvalidActionError, RoutingGymError

MULTITURN_ID = "RoutingGym/MultiTurn-v0"

# Verifier verdicts in the observation.
NO_ANSWER, JUDGED_CORRECT, JUDGED_WRONG = 0, 1, 2


def default_config() -> dict[str, Any]:
    """Every MultiTurnRoutingEnv option with its default."""
    return {
        "tournament": "default",
        "split": "train",
        "order": "shuffle",
        "include_difficulty": False,
        "max_turns": 3,  # answers per query at most; the episode ends after the last one
        "verifier_accuracy": 1.0,  # probability that the verdict matches the answer's correctness
        "lambda_e": 0.5,  # reward charged per scale_j joules spent, summed over turns
        "scale_j": 1000.0,  # joules that cost lambda_e reward (set per pool, e.g. reward_variants.pool_scales)
        "correct_reward": CORRECT_BASE,
        "wrong_reward": WRONG_REWARD,  # also the outcome of stopping before any answer
    }


class MultiTurnRoutingEnv(gym.Env):
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
    standing answer). Out-of-range actions raise `InvalidActionError`.

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
    After a routed turn: `model_id`, `correct` (the drawn truth of this answer), `verdict`,
    `energy_j` (this turn), `total_energy_j`, `turn`. At the end also `final_correct`,
    `final_model_id` (None without an answer), `turns`, `stopped` (True for `Stop`, False
    at the turn limit).

    ## Arguments
    See `default_config()`. Registered id: `RoutingGym/MultiTurn-v0`. The queries are drawn
    by an inner `RoutingEnv` (`replay`) with the same tournament, split and order.
    """

    metadata = {"render_modes": []}

    def __init__(self, **overrides: Any):
        config = default_config()
        unknown = set(overrides) - set(config)
        if unknown:
            raise TypeError(f"MultiTurnRoutingEnv got unknown option(s) {sorted(unknown)}; options: {sorted(config)}")
        config.update(overrides)
        self.config = config
        if not (isinstance(config["max_turns"], (int, np.integer)) and config["max_turns"] >= 1):
            raise ValueError(f"max_turns must be an integer >= 1, got {config['max_turns']!r}")
        if not 0.5 <= config["verifier_accuracy"] <= 1.0:
            raise ValueError(
                f"verifier_accuracy must be in [0.5, 1] (below 0.5 an inverted verdict is informative), got {config['verifier_accuracy']}"
            )
        if not (config["lambda_e"] >= 0 and config["scale_j"] > 0):
            raise ValueError(f"need lambda_e >= 0 and scale_j > 0, got lambda_e={config['lambda_e']}, scale_j={config['scale_j']}")
        if not config["correct_reward"] > config["wrong_reward"]:
            raise ValueError(f"correct_reward ({config['correct_reward']}) must exceed wrong_reward ({config['wrong_reward']})")
        self.replay = RoutingEnv(**{k: config[k] for k in ("tournament", "split", "order", "include_difficulty")})
        self.tournament = self.replay.tournament
        self.max_turns = int(config["max_turns"])
        self.verifier_accuracy = float(config["verifier_accuracy"])
        self.lambda_e, self.scale_j = float(config["lambda_e"]), float(config["scale_j"])
        self.correct_reward, self.wrong_reward = float(config["correct_reward"]), float(config["wrong_reward"])
        k = self.tournament.n_models
        self.stop_action = k
        # At most max_turns of the split's dearest answers (a finite bound for the Box).
        max_spent = np.float32(self.max_turns * self.tournament.energy_j[self.replay.rows].max() / self.scale_j * (1 + 1e-6))
        self.action_space = spaces.Discrete(k + 1)
        self.observation_space = spaces.Dict(
            {
                **self.replay.observation_space.spaces,
                "turn": spaces.Discrete(self.max_turns + 1),
                "previous_model": spaces.Discrete(k + 1),
                "verdict": spaces.Discrete(3),
                "spent": spaces.Box(0.0, max_spent, shape=(1,), dtype=np.float32),
            }
        )
        self._query: tuple[dict[str, Any], dict[str, Any]] | None = None  # (question obs, reset info)
        self._turn = 0
        self._previous = k
        self._verdict = NO_ANSWER
        self._answer_correct: float | None = None
        self._spent = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, info = self.replay.reset(seed=seed, options=options)
        self._query = (obs, info)
        self._turn, self._previous, self._verdict = 0, self.stop_action, NO_ANSWER
        self._answer_correct, self._spent = None, 0.0
        return self._observation(), dict(info)

    def step(self, action):
        if self._query is None:
            raise RoutingGymError("step() called before reset() (or after the episode ended)")
        a = self._action(action)
        row = self._query[1]["row"]
        info: dict[str, Any] = dict(self._query[1])
        reward = 0.0
        if a != self.stop_action:
            t = self.tournament
            c = float(t.correct[row, a])
            correct = float(c >= 1.0 or (c > 0.0 and self.np_random.random() < c))
            truthful = self.verifier_accuracy >= 1.0 or self.np_random.random() < self.verifier_accuracy
            joules = float(t.energy_j[row, a])
            self._turn += 1
            self._previous, self._answer_correct = a, correct
            self._verdict = JUDGED_CORRECT if bool(correct) == truthful else JUDGED_WRONG
            self._spent += joules
            reward -= self.lambda_e * joules / self.scale_j
            info.update(
                model_id=t.model_ids[a], correct=correct, verdict=self._verdict, energy_j=joules,
                latency_s=float(t.latency_s[row, a]), turn=self._turn,
            )
        info["total_energy_j"] = self._spent
        done = a == self.stop_action or self._turn >= self.max_turns
        obs = self._observation()
        if done:
            final = bool(self._answer_correct)
            reward += self.correct_reward if final else self.wrong_reward
            info.update(
                final_correct=float(final),
                final_model_id=None if self._answer_correct is None else self.tournament.model_ids[self._previous],
                turns=self._turn,
                stopped=a == self.stop_action,
            )
            self._query = None
        return obs, float(reward), done, False, info

    def _action(self, action: Any) -> int:
        try:
            a = int(action)
        except (TypeError, ValueError):
            raise InvalidActionError(f"action {action!r} is not an integer") from None
        if a != action and not isinstance(action, (np.ndarray, np.generic)):
            raise InvalidActionError(f"action {action!r} is not an integer")
        if not 0 <= a <= self.stop_action:
            raise InvalidActionError(
                f"action {a} is outside [0, {self.stop_action}]: 0..{self.stop_action - 1} route to a model "
                f"({', '.join(self.tournament.model_ids)}), {self.stop_action} is Stop"
            )
        return a

    def _observation(self) -> dict[str, Any]:
        obs = {key: (value.copy() if isinstance(value, np.ndarray) else value) for key, value in self._query[0].items()}
        obs.update(turn=self._turn, previous_model=self._previous, verdict=self._verdict)
        obs["spent"] = np.array([self._spent / self.scale_j], dtype=np.float32)
        return obs


def rollout(
    env: gym.Env, policy: Callable[[dict[str, Any]], int], episodes: int | None = None, seed: int | None = 0
) -> dict[str, np.ndarray]:
    """Run ``policy(observation) -> action`` for ``episodes`` episodes (default: one per query
    of the split) and return per-episode arrays: ``final_correct``, ``energy_j`` (all turns),
    ``turns``, ``return`` and ``stopped``."""
    base = env.unwrapped
    if not isinstance(base, MultiTurnRoutingEnv):
        raise RoutingGymError(f"rollout needs a MultiTurnRoutingEnv, got {type(base).__name__}")
    n = len(base.replay.rows) if episodes is None else int(episodes)
    if n < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    out = {name: np.zeros(n) for name in ("final_correct", "energy_j", "turns", "return", "stopped")}
    for episode in range(n):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, info = env.step(policy(obs))
            total += reward
        out["final_correct"][episode], out["energy_j"][episode] = info["final_correct"], info["total_energy_j"]
        out["turns"][episode], out["return"][episode], out["stopped"][episode] = info["turns"], total, info["stopped"]
    return out


if MULTITURN_ID not in gym.registry:
    gym.register(MULTITURN_ID, entry_point="routing_gym.envs.multiturn_env:MultiTurnRoutingEnv")
