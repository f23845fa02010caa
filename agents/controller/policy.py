"""The text controller's routing policy: its choice probabilities nested in the benchmark label.

For a query x of benchmark b the controller gives p_k(x), the probability of ``Choice: X_k``
(``controller.inference.choice_probabilities``). Nested in the label (``route.label_nested``),
model k scores

    s_k(x) = S[b, k] + alpha x (log p_k(x) - m[b, k])

``S`` the per-benchmark mean training reward of each model under the reward compare evaluates
(``per-benchmark``'s score: alpha = 0 routes exactly as it does, ties to the cheaper model) and
``m`` the controller's mean log-probability of each letter on the benchmark, so the controller
moves a route only by what it reads in this question beyond the label. Greedy decoding takes
``argmax s``; sampling draws from ``softmax(s / alpha) = softmax(S / alpha + log p - m)`` (alpha is
the temperature of the label's score beside the controller's own log-odds). Unnested, the
controller routes alone: the greedy letter (``choice_actions``) or a draw from p, the mass that
is not ``Choice: X`` drawing an invalid route.

alpha and the decoding are chosen as ``agents/nested.py`` chooses its routers' text strength:
by the value of the routes (here the exact expected reward) on a validation part of train
(``nested.validation_parts``) that the controller did not train on, "label only" (alpha = 0,
greedy) always a candidate and first among ties; ``S`` is then refitted on the whole training
split. A draw is a function of the fit seed and the question's text (``baselines.text_hashes``),
so a route does not depend on the batch it came in and reruns route alike (the audit).

numpy only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from routing_gym.fronts.hull import benchmark_means, best_per_benchmark
from routing_gym_agents.baselines import text_hashes
from routing_gym_agents.controller.inference import choice_actions
from routing_gym_agents.controller.prompt import INVALID

DECODINGS = ("greedy", "sample")
TINY = 1e-12  # floor of a probability before its log: a letter with p = 0 scores very low, not -inf


@dataclass
class RoutePolicy:
    """A fitted routing rule: ``alpha`` None routes by the controller alone, else nested."""

    alpha: float | None
    decoding: str
    seed: int
    label: np.ndarray | None = None  # [B, K] S: per-benchmark mean training reward
    joules: np.ndarray | None = None  # [B, K] per-benchmark mean training joules (ties)
    centre: np.ndarray | None = None  # [B, K] m: per-benchmark mean log p on validation

    def __post_init__(self) -> None:
        if self.decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {DECODINGS}, got {self.decoding!r}")
        if self.alpha is not None and (self.label is None or self.joules is None or self.centre is None):
            raise ValueError("a nested policy needs the label, joules and centre tables")

    def scores(self, probs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """``[n, K]`` s_k(x) of a nested policy."""
        logp = np.log(np.maximum(probs, TINY))
        return self.label[codes] + self.alpha * (logp - self.centre[codes])

    def distribution(self, probs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """``[n, K]`` what sampling draws from (rows sum to 1, or less unnested: the rest is invalid)."""
        if self.alpha is None:
            return probs
        if self.alpha == 0:  # label only: the greedy route with certainty
            return np.eye(probs.shape[1])[self.greedy(probs, codes)]
        z = self.scores(probs, codes) / self.alpha
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def greedy(self, probs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        if self.alpha is None:
            return choice_actions(probs)
        return best_per_benchmark(self.scores(probs, codes), self.joules[codes])

    def act(self, probs: np.ndarray, codes: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """One route per query (``INVALID`` where an unnested draw is not a letter)."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.decoding == "greedy":
            return self.greedy(probs, codes)
        u = text_hashes(texts, self.seed).astype(np.float64) / 2.0**64  # uniform in [0, 1)
        cdf = np.cumsum(self.distribution(probs, codes), axis=1)
        actions = (u[:, None] >= cdf).sum(axis=1)
        return np.where(actions < probs.shape[1], actions, INVALID).astype(np.int64)

    def expected_reward(self, probs: np.ndarray, codes: np.ndarray, rewards: np.ndarray, invalid_penalty: float) -> float:
        """The policy's exact mean reward on queries with ``[n, K]`` ``rewards``."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.decoding == "greedy":
            a = self.greedy(probs, codes)
            return float(np.where(a >= 0, rewards[np.arange(len(a)), np.maximum(a, 0)], invalid_penalty).mean())
        pi = self.distribution(probs, codes)
        return float(((pi * rewards).sum(axis=1) + (1.0 - pi.sum(axis=1)) * invalid_penalty).mean())

    def describe(self) -> dict[str, Any]:
        """What a row reports: alpha ("label only" at 0, "controller only" unnested) and decoding."""
        alpha: Any = "controller only" if self.alpha is None else ("label only" if self.alpha == 0 else self.alpha)
        return {"alpha": alpha, "decoding": self.decoding}

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoutePolicy:
        arrays = {k: None if data.get(k) is None else np.asarray(data[k], dtype=np.float64)
                  for k in ("label", "joules", "centre")}
        return cls(data["alpha"], data["decoding"], int(data["seed"]), **arrays)


def choose_policy(
    probs: np.ndarray,
    codes: np.ndarray,
    rewards: np.ndarray,
    fit_label: np.ndarray | None,
    fit_joules: np.ndarray | None,
    n_benchmarks: int,
    alphas: Sequence[float],
    decodings: Sequence[str],
    nested: bool,
    invalid_penalty: float,
    seed: int,
) -> tuple[RoutePolicy, dict[str, float]]:
    """The candidate with the best expected reward on validation queries (``probs``, their
    benchmark ``codes`` and ``[n, K]`` ``rewards``), with every candidate's value by name.

    Nested (``fit_label`` / ``fit_joules``: the tables of the training rows left after carving
    validation out): alpha = 0 (greedy) first, then each alpha with each decoding; ``m`` is the
    validation queries' mean log p per benchmark. Unnested: each decoding of the controller alone.
    The returned policy carries the validation part's tables; ``refit_label`` replaces ``S``."""
    codes = np.asarray(codes, dtype=np.int64)
    if nested:
        centre = benchmark_means(np.log(np.maximum(probs, TINY)), codes, n_benchmarks)
        candidates = [RoutePolicy(0.0, "greedy", seed, fit_label, fit_joules, centre)]
        candidates += [RoutePolicy(float(a), d, seed, fit_label, fit_joules, centre) for a in alphas for d in decodings]
    else:
        candidates = [RoutePolicy(None, d, seed) for d in decodings]
    values = {_name(p): p.expected_reward(probs, codes, rewards, invalid_penalty) for p in candidates}
    best = max(candidates, key=lambda p: values[_name(p)])  # ties: the first, label only
    return best, values


def keep_grpo(grpo_values: dict[str, float], sft_values: dict[str, float]) -> bool:
    """Whether the GRPO model routes rather than the SFT model it started from: its best policy's
    validation value (``choose_policy``'s values) is at least the SFT model's (ties: GRPO)."""
    return max(grpo_values.values()) >= max(sft_values.values())


def refit_label(policy: RoutePolicy, label: np.ndarray, joules: np.ndarray) -> RoutePolicy:
    """The chosen policy with ``S`` and the tie-break joules of the whole training split."""
    if policy.alpha is None:
        return policy
    return RoutePolicy(policy.alpha, policy.decoding, policy.seed, label, joules, policy.centre)


def _name(policy: RoutePolicy) -> str:
    d = policy.describe()
    alpha = d["alpha"] if isinstance(d["alpha"], str) else f"alpha={d['alpha']:g}"
    return alpha if d["alpha"] == "label only" else f"{alpha}, {d['decoding']}"


def fit_overhead(policy: RoutePolicy) -> dict[str, float]:
    """The choice as numbers for compare's row (``fit_overhead_<name>`` columns): alpha (0: label
    only, NaN: controller only) and 1 for sampling, 0 for greedy."""
    return {"route_alpha": math.nan if policy.alpha is None else float(policy.alpha),
            "route_sampling": float(policy.decoding == "sample")}
