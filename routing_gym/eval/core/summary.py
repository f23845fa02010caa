"""Text summaries of a tournament: shape, per-model accuracy and cost, oracle routes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from routing_gym.tournament.duplicates import duplicate_counts
from routing_gym.tournament.tournament import Tournament

# The paper's RL energy coefficient; the oracle under it routes to the cheapest correct model.
SUMMARY_LAMBDA_E = 0.4


def oracle_rows(t: Tournament, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Accuracy and cost of the two reference oracles over ``rows``."""
    from routing_gym.envs.rewards import Reward, oracle_targets

    sel = np.arange(t.n_queries) if rows is None else rows
    records = []
    for label, reward in (
        ("oracle (accuracy only: largest correct)", Reward("gated_rank", {})),
        (f"oracle (lambda_e={SUMMARY_LAMBDA_E}: cheapest correct)", Reward("gated_rank", {"lambda_e": SUMMARY_LAMBDA_E})),
    ):
        choice = oracle_targets(t, reward, rows=sel)
        pick = lambda a: a[sel, choice]  # noqa: E731
        records.append(
            {
                "model_id": label,
                "params_b": np.nan,
                "accuracy": pick(t.correct).mean(),
                "mean_energy_j": pick(t.energy_j).mean(),
                "mean_latency_s": pick(t.latency_s).mean(),
                "mean_power_w": pick(t.mean_power_w).mean(),
                "mean_output_tokens": np.nanmean(pick(t.output_tokens)) if np.isfinite(pick(t.output_tokens)).any() else np.nan,
                "energy_provenance": "",
            }
        )
    return pd.DataFrame.from_records(records)


def summary_table(t: Tournament, split: str | None = None) -> pd.DataFrame:
    rows = None if split in (None, "all") else t.split_rows(split)
    return pd.concat([t.model_summary(rows), oracle_rows(t, rows)], ignore_index=True)


def describe(t: Tournament, split: str | None = None) -> str:
    """The multi-line report printed by ``routing-gym data info``."""
    card = t.card
    counts = t.queries["benchmark"].value_counts().sort_index()
    split_counts = t.queries["split"].replace("", "(none)").value_counts().sort_index()
    head = [
        f"{card.name}: N={t.n_queries} queries x K={t.n_models} models   energy provenance: {card.provenance}",
        "benchmarks: " + ", ".join(f"{b} {c}" for b, c in counts.items()),
        "splits: " + ", ".join(f"{s} {c}" for s, c in split_counts.items()),
        duplicates_line(t),
    ]
    if card.provenance != "measured":
        head.append(f"note: energy is {card.provenance}, not measured")
    table = summary_table(t, split)
    formatted = table.to_string(
        index=False,
        na_rep="",
        formatters={
            "params_b": "{:g}".format,
            "accuracy": "{:.1%}".format,
            "mean_energy_j": "{:,.1f}".format,
            "mean_latency_s": "{:.2f}".format,
            "mean_power_w": "{:.0f}".format,
            "mean_output_tokens": "{:.0f}".format,
        },
    )
    scope = f"split {split}" if split not in (None, "all") else "all queries"
    return "\n".join(head + [f"per model ({scope}):", formatted])


def duplicates_line(t: Tournament) -> str:
    """Copies of a question (normalised text) within each split and across splits."""
    d = duplicate_counts(t.queries["prompt"], t.queries["split"].replace("", "(none)"))
    within = ", ".join(f"{s} {c}" for s, c in d["within"].items())
    return (f"duplicate questions ({d['normalisation']}): extra copies within a split: {within}; across splits: "
            f"{d['cross_split_texts']} texts ({d['cross_split_queries']} queries)")


def side_by_side(tournaments: list[Tournament], split: str | None = None) -> pd.DataFrame:
    """Key calibration numbers of several tournaments in one table (one column each)."""
    columns = {}
    for t in tournaments:
        table = summary_table(t, split)
        models = table.iloc[: t.n_models]
        oracles = table.iloc[t.n_models :]
        best = models.loc[models["accuracy"].idxmax()]
        columns[t.card.name] = {
            "queries x models": f"{t.n_queries} x {t.n_models}",
            "energy provenance": t.card.provenance,
            "accuracy range": f"{models['accuracy'].min():.1%} - {models['accuracy'].max():.1%}",
            "mean J range": f"{models['mean_energy_j'].min():,.0f} - {models['mean_energy_j'].max():,.0f}",
            "most accurate model": f"{best['model_id']} {best['accuracy']:.1%} at {best['mean_energy_j']:,.0f} J",
            "oracle accuracy": f"{oracles['accuracy'].iloc[0]:.1%}",
            "oracle J (largest correct)": f"{oracles['mean_energy_j'].iloc[0]:,.0f}",
            "oracle J (cheapest correct)": f"{oracles['mean_energy_j'].iloc[1]:,.0f}",
            "corr(params, accuracy)": f"{np.corrcoef(models['params_b'].fillna(0), models['accuracy'])[0, 1]:+.2f}",
        }
    return pd.DataFrame(columns)
