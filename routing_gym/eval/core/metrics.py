"""Per-policy metrics on one split, from the ``BatchResult`` of ``RoutingEnv.evaluate``.

Conventions (the same as ``BatchResult``): an invalid action counts as a wrong answer that
cost 0 J, 0 s and 0 W and earned the invalid penalty, and it is counted in
``invalid_count``. Every mean is over all queries of the split.

The reward is the mean reward under the env's reward and coefficients. Rewards under
different coefficients are different metrics, so ``reward_name`` always travels with the
number (e.g. ``gated_rank(lambda_e=0.4)``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from routing_gym.tournament.scoring import BatchResult


def selection_frequencies(actions: np.ndarray, n_models: int) -> np.ndarray:
    """Share of *all* queries routed to each model; invalid actions count in no bin, so the
    shares sum to ``1 - invalid_rate``."""
    actions = np.asarray(actions)
    if len(actions) == 0:
        return np.zeros(n_models)
    valid = (actions >= 0) & (actions < n_models)
    return np.bincount(actions[valid].astype(np.int64), minlength=n_models) / len(actions)


def selection_entropy(frequencies: np.ndarray) -> float:
    """Shannon entropy of the valid selection mix divided by ``log K``: 0 when one model gets
    every query (collapse), 1 when all K are used equally. 0 for K = 1 or no valid action."""
    p = np.asarray(frequencies, dtype=np.float64)
    total = p.sum()
    if len(p) <= 1 or total <= 0:
        return 0.0
    p = p[p > 0] / total
    return float(-(p * np.log(p)).sum() / np.log(len(frequencies))) + 0.0  # -0.0 -> 0.0 in CSVs


@dataclass
class BenchmarkMetrics:
    benchmark: str
    n: int
    accuracy: float
    mean_energy_j: float
    energy_share: float  # this benchmark's share of the policy's total joules on the split
    mean_latency_s: float
    mean_reward: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PolicyMetrics:
    """Everything ``compare`` reports about one policy on one split."""

    n: int
    reward_name: str
    accuracy: float
    mean_energy_j: float
    mean_latency_s: float
    mean_power_w: float
    mean_reward: float
    invalid_count: int
    selection: dict[str, float]  # model_id -> share of all queries
    selection_entropy: float
    top1_share: float
    top1_model: str
    per_benchmark: list[BenchmarkMetrics] = field(default_factory=list)

    @property
    def invalid_rate(self) -> float:
        return self.invalid_count / self.n if self.n else 0.0

    def scalars(self) -> dict[str, float]:
        """The flat numeric metrics (the columns of per-seed tables)."""
        return {
            "accuracy": self.accuracy,
            "mean_energy_j": self.mean_energy_j,
            "mean_latency_s": self.mean_latency_s,
            "mean_power_w": self.mean_power_w,
            "mean_reward": self.mean_reward,
            "invalid_count": float(self.invalid_count),
            "selection_entropy": self.selection_entropy,
            "top1_share": self.top1_share,
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["invalid_rate"] = self.invalid_rate
        return data


def policy_metrics(
    result: BatchResult,
    model_ids: Sequence[str],
    benchmark_codes: np.ndarray,
    benchmark_names: Sequence[str],
    reward_name: str,
) -> PolicyMetrics:
    """Metrics of one policy from its ``BatchResult``.

    ``benchmark_codes[i]`` indexes ``benchmark_names`` for query i of the split (split
    order, as ``RoutingEnv.evaluate`` scores it); ``reward_name`` states the reward and
    coefficients behind ``result.rewards``.
    """
    n = len(result.actions)
    codes = np.asarray(benchmark_codes)
    if codes.shape != (n,):
        raise ValueError(f"benchmark_codes has shape {codes.shape}, expected ({n},) like the actions")
    k = len(model_ids)
    freq = selection_frequencies(result.actions, k)
    top = int(np.argmax(freq)) if n else 0
    total_j = float(result.energy_j.sum())
    per_benchmark = []
    for b, name in enumerate(benchmark_names):
        mask = codes == b
        if not mask.any():
            continue
        joules = result.energy_j[mask]
        per_benchmark.append(
            BenchmarkMetrics(
                benchmark=str(name),
                n=int(mask.sum()),
                accuracy=float(result.correct[mask].mean()),
                mean_energy_j=float(joules.mean()),
                # nan, not 0, when the policy spent nothing at all (all invalid): no share exists
                energy_share=float(joules.sum() / total_j) if total_j > 0 else float("nan"),
                mean_latency_s=float(result.latency_s[mask].mean()),
                mean_reward=float(result.rewards[mask].mean()),
            )
        )
    mean = lambda a: float(np.mean(a)) if n else float("nan")  # noqa: E731
    return PolicyMetrics(
        n=n,
        reward_name=reward_name,
        accuracy=mean(result.correct),
        mean_energy_j=mean(result.energy_j),
        mean_latency_s=mean(result.latency_s),
        mean_power_w=mean(result.mean_power_w),
        mean_reward=mean(result.rewards),
        invalid_count=int((~result.valid).sum()),
        selection={m: float(f) for m, f in zip(model_ids, freq)},
        selection_entropy=selection_entropy(freq),
        top1_share=float(freq[top]) if n else 0.0,
        top1_model=str(model_ids[top]) if k else "",
        per_benchmark=per_benchmark,
    )
