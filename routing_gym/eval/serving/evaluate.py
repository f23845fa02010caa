"""Paired evaluation of serving policies: the same arrival seeds for every policy.

Each policy runs ``episodes`` episodes of ``RoutingGym/Serving-v0`` with seeds ``0..episodes-1``;
an episode's arrival times and questions depend on its seed only (not on the routes), so the
policies are compared on identical traffic. Per episode: accuracy, joules per request (active,
idle share, total), latency percentiles, SLO attainment, throughput (requests completed
while traffic arrived, per second of the arrival window: below the arrival rate when queues
grow) and the top-1 model share. Intervals are percentile bootstraps over episodes
(``BootstrapPlan``); verdicts compare each policy with a reference on accuracy, total J per
request and p95 latency, family-wise (Romano-Wolf ``stepdown`` over every policy x metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from routing_gym.eval.core.familywise import stepdown
from routing_gym.eval.core.stats import BootstrapPlan

METRICS = ("accuracy", "active_j_per_request", "idle_j_per_request", "total_j_per_request", "p50_latency_s",
           "p95_latency_s", "p99_latency_s", "slo_attainment", "throughput_rps", "top1_share")
VERDICT_METRICS = ("accuracy", "total_j_per_request", "p95_latency_s")


def run_episode(env: gym.Env, policy: Any, seed: int) -> dict[str, float]:
    """One episode of ``policy``; its per-episode metrics."""
    obs, _ = env.reset(seed=seed)
    terminated = False
    while not terminated:
        obs, _, terminated, _, info = env.step(policy.act(obs))
    base = env.unwrapped
    log = np.array(base.log, dtype=np.float64)
    n = len(log)
    latency = log[:, 4]
    shares = np.bincount(log[:, 1].astype(int), minlength=base.action_space.n) / n
    active, idle = info["active_energy_j"] / n, info["idle_energy_j"] / n
    window = float(base.arrivals[-1])  # requests completed while traffic arrived, per second of it
    return {"accuracy": float(log[:, 2].mean()), "active_j_per_request": active, "idle_j_per_request": idle,
            "total_j_per_request": active + idle, "p50_latency_s": float(np.percentile(latency, 50)),
            "p95_latency_s": float(np.percentile(latency, 95)), "p99_latency_s": float(np.percentile(latency, 99)),
            "slo_attainment": float((latency <= base.config.slo_s).mean()),
            "throughput_rps": float((log[:, 5] <= window).sum() / window), "top1_share": float(shares.max())}


@dataclass
class ServingComparison:
    """Per-episode metrics (``episodes``: one row per policy x seed), the summary with intervals,
    and the verdicts against ``reference``."""

    episodes: pd.DataFrame
    summary: pd.DataFrame
    verdicts: pd.DataFrame
    reference: str


def compare_policies(policies: dict[str, Any], env_kwargs: dict[str, Any], episodes: int, reference: str,
                     n_resamples: int = 2000, progress: bool = False) -> ServingComparison:
    """Run every policy on seeds ``0..episodes-1`` of ``RoutingGym/Serving-v0`` (``env_kwargs``)."""
    from tqdm.auto import tqdm

    env = gym.make("RoutingGym/Serving-v0", **env_kwargs)
    rows = []
    bar = tqdm(total=len(policies) * episodes, desc="serve", disable=not progress)
    for name, policy in policies.items():
        for seed in range(episodes):
            rows.append({"policy": name, "seed": seed, **run_episode(env, policy, seed)})
            bar.update()
    bar.close()
    frame = pd.DataFrame(rows)
    return summarise(frame, reference, n_resamples)


def summarise(frame: pd.DataFrame, reference: str, n_resamples: int = 2000) -> ServingComparison:
    """Bootstrap intervals over episodes and paired verdicts against ``reference``."""
    names = list(dict.fromkeys(frame["policy"]))
    if reference not in names:
        raise ValueError(f"reference policy {reference!r} is not among {names}")
    by = {name: frame[frame["policy"] == name].sort_values("seed")[list(METRICS)].to_numpy(float) for name in names}
    n = len(next(iter(by.values())))
    plan = BootstrapPlan(n, n_resamples=n_resamples, seed=0)  # one plan: every policy resamples the same episodes
    summary = []
    for name in names:
        low, high = plan.ci(by[name])
        mean = by[name].mean(axis=0)
        summary.append({"policy": name, **{m: mean[i] for i, m in enumerate(METRICS)},
                        **{f"{m}_ci": (low[i], high[i]) for i, m in enumerate(METRICS)}})
    cols = [METRICS.index(m) for m in VERDICT_METRICS]
    others = [name for name in names if name != reference]
    diffs = np.concatenate([by[name][:, cols] - by[reference][:, cols] for name in others], axis=1) if others else np.zeros((n, 0))
    verdicts = []
    if others:
        decision = stepdown(diffs.mean(axis=0), plan.means(diffs))
        for j, (name, metric) in enumerate((name, m) for name in others for m in VERDICT_METRICS):
            verdicts.append({"policy": name, "metric": metric, "difference": float(diffs[:, j].mean()),
                             "low": float(decision.low[j]), "high": float(decision.high[j]),
                             "verdict": decision.decisions[j] or "no claim"})
    return ServingComparison(frame, pd.DataFrame(summary), pd.DataFrame(verdicts), reference)


def format_table(result: ServingComparison) -> str:
    """The summary as a Markdown table (means with 95 % intervals over episodes) and the verdicts."""
    lines = ["| policy | accuracy | J/req active | J/req idle | J/req total | p50 s | p95 s | p99 s | SLO | req/s | top-1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result.summary.to_dict("records"):
        cells = [_cell(row, m) for m in METRICS]
        lines.append(f"| {row['policy']} | " + " | ".join(cells) + " |")
    lines += ["", f"Paired differences against `{result.reference}` (same arrival seeds); verdicts family-wise "
              "(Romano-Wolf step-down, alpha 0.05, every policy x metric); bounds are simultaneous.", "",
              "| policy | metric | difference | bounds | verdict |", "|---|---|---|---|---|"]
    for v in result.verdicts.to_dict("records"):
        bounds = "no spread" if np.isnan(v["low"]) else f"[{v['low']:+.4g}, {v['high']:+.4g}]"
        lines.append(f"| {v['policy']} | {v['metric']} | {v['difference']:+.4g} | {bounds} | {v['verdict']} |")
    return "\n".join(lines)


def _cell(row: dict[str, Any], metric: str) -> str:
    low, high = row[f"{metric}_ci"]
    value = row[metric]
    digits = 3 if abs(value) < 10 else 1
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def policy_names(text: Sequence[str]) -> list[str]:
    """Comma- or space-separated names, flattened."""
    return [name for part in text for name in part.split(",") if name]
