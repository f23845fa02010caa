"""The MMLU-Pro study, rerunnable: data, accuracy vs the published extraction, energy
spread and power, calibration, and ``compare`` / ``frontier`` on the tournament.

    OMP_NUM_THREADS=1 python experiments/mmlu_pro_study.py --data-dir ../shared/data \\
        [--out experiments/results/mmlu-pro] [--seeds 5] [--steps data,compare,frontier]

Steps (comma-separated ``--steps``; default all):

- ``data``: builds ``mmlu-pro`` (batched) and ``mmlu-pro-batch1`` in-process (the builder's
  report carries the published ``pred`` and the answer texts the accuracy rules need), saves
  them under ``<cache>/mmlu-pro-study/`` (``--tournaments DIR`` elsewhere), and writes
  ``data_info.txt``, ``accuracy.{csv,md}`` (tournament vs published extraction, both rules for
  unextracted answers, the repository's ``compute_accuracy.py`` rules), ``per_subject.{csv,md}``
  and ``subject_accuracy.csv``, ``energy.{json,md}`` (per-answer joule spread, mean power
  against each model's hardware assumption) and ``calibration.{json,md}`` (next to the
  committed rows of ``experiments/results/routing_gain/calibration.json``).
- ``compare``: ``routing-gym compare`` with the default agents, ``--seeds`` seeds -> ``<out>/compare``.
- ``frontier``: ``routing-gym frontier`` for cost-aware and knn (and ``per-benchmark`` when that
  agent is registered) -> ``<out>/frontier``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from results_readme import write_readme  # experiments/results_readme.py

ROOT = Path(__file__).resolve().parents[1]
H100_BOARD_W = 700.0  # H100 SXM TDP, the per-GPU ceiling of every energy model here


def build(data_dir: str, tournaments: Path, energy_model: str, limit: int | None):
    from routing_gym.sources.mmlu_pro import build_mmlu_pro_tournament
    from routing_gym.tournament import Tournament

    name = "mmlu-pro" if energy_model == "batched" else f"mmlu-pro-{energy_model}"
    path = tournaments / name
    tournament, report = build_mmlu_pro_tournament(data_dir, energy_model=energy_model, limit=limit)
    tournament.save(path)
    report.save(path)
    return Tournament.load(path), report, path


def markdown(frame: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """A pipe table (numbers right-aligned) without the optional tabulate dependency."""
    def cell(value) -> str:
        return format(value, floatfmt) if isinstance(value, (float, np.floating)) else str(value)

    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool for c in frame.columns]
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def energy_tables(batched, batch1) -> tuple[dict, pd.DataFrame]:
    """Per model: joules between and within subjects, mean power against its GPUs' ceiling."""
    subjects = batched.queries["benchmark"].to_numpy()
    rows = []
    for j, model in enumerate(batched.model_ids):
        energy = batched.energy_j[:, j]
        within = pd.Series(energy).groupby(subjects).agg(lambda x: np.std(x) / np.mean(x))
        serving1 = batch1.models.loc[j, "serving"]
        gpus = int(serving1["n_gpus"])
        power1 = float(batch1.mean_power_w[:, j].mean())
        power = float(batched.mean_power_w[:, j].mean())
        batched_gpus = int(batched.models.loc[j, "serving"]["n_gpus"])
        rows.append({
            "model_id": model, "mean_j": energy.mean(), "p10_j": np.percentile(energy, 10),
            "p90_j": np.percentile(energy, 90), "median_within_subject_cv": float(within.median()),
            "batched_mean_power_w": power, "batched_n_gpus": batched_gpus,
            "batched_within_ceiling": bool(0 < power <= batched_gpus * H100_BOARD_W),
            "batch1_mean_j": float(batch1.energy_j[:, j].mean()), "batch1_mean_power_w": power1, "n_gpus": gpus,
            "batch1_w_per_gpu": power1 / gpus, "ceiling_w": gpus * H100_BOARD_W,
            "batch1_within_ceiling": bool(0 < power1 <= gpus * H100_BOARD_W),
            "energy_method": serving1["energy_method"],
        })
    table = pd.DataFrame(rows)
    means = table.set_index("model_id")["mean_j"]
    summary = {
        "between_models_mean_j_ratio_max_over_min": float(means.max() / means.min()),
        "cheapest": means.idxmin(), "costliest": means.idxmax(),
        "within_model_p90_over_p10_median": float((table["p90_j"] / table["p10_j"]).median()),
        "within_subject_cv_median_over_models": float(table["median_within_subject_cv"].median()),
        "batch1_w_per_gpu_range": [float(table["batch1_w_per_gpu"].min()), float(table["batch1_w_per_gpu"].max())],
        "batched_power_range_w": [float(table["batched_mean_power_w"].min()), float(table["batched_mean_power_w"].max())],
        "all_batch1_within_ceiling": bool(table["batch1_within_ceiling"].all()),
        "all_batched_within_ceiling": bool(table["batched_within_ceiling"].all()),
    }
    return summary, table


def subject_tables(t) -> tuple[pd.DataFrame, pd.DataFrame]:
    subjects = t.queries["benchmark"].to_numpy()
    accuracy = pd.DataFrame(t.correct, columns=t.model_ids).groupby(subjects).mean()
    joules = pd.DataFrame(t.energy_j, columns=t.model_ids).groupby(subjects).sum()
    tokens = pd.DataFrame(t.output_tokens, columns=t.model_ids).groupby(subjects).mean()
    counts = pd.Series(subjects).value_counts()
    per_subject = pd.DataFrame({
        "subject": accuracy.index, "questions": counts.loc[accuracy.index].to_numpy(),
        "question_share_pct": 100 * counts.loc[accuracy.index].to_numpy() / len(subjects),
        "mean_accuracy_pct": 100 * accuracy.mean(axis=1).to_numpy(),
        "best_model": accuracy.idxmax(axis=1).to_numpy(), "best_accuracy_pct": 100 * accuracy.max(axis=1).to_numpy(),
        "joule_share_pct": 100 * joules.sum(axis=1).to_numpy() / joules.to_numpy().sum(),
        "mean_output_tokens": tokens.mean(axis=1).to_numpy(),
    })
    return per_subject, (100 * accuracy).round(2).reset_index(names="subject")


def step_data(args, out: Path) -> Path:
    from routing_gym.eval.core.summary import describe
    from routing_gym.sources.mmlu_pro import accuracy_table
    from routing_gym.sources.specialization import calibration_statistics

    tournaments = tournament_root(args)
    batched, report, path = build(args.data_dir, tournaments, "batched", args.limit)
    batch1, _, _ = build(args.data_dir, tournaments, "batch1", args.limit)
    (out / "data_info.txt").write_text(describe(batched) + "\n")

    accuracy = accuracy_table(report, batched)
    accuracy.to_csv(out / "accuracy.csv", index=False)
    worst = float(accuracy["tournament_minus_published_pp"].abs().max())
    queries = batched.queries
    cross = int(queries.groupby(queries["prompt"].str.casefold().str.split().str.join(" "))["split"].nunique().gt(1).sum())
    (out / "accuracy.md").write_text(
        f"# MMLU-Pro: accuracy per model (%)\n\n{batched.n_queries} questions x {batched.n_models} models; largest "
        f"|tournament - published extraction| = {worst:.3f} pp; cross-split duplicates (normalised question + options): "
        f"{cross}. `published_unextracted_wrong_pct`: `pred == answer` with an unextracted answer wrong (this "
        "tournament's rule); `..._guess_pct`: an unextracted answer counted as a random letter (expected value); "
        "`repo_rule_l1/l2_pct`: the repository's compute_accuracy.py (re-extraction from the text, random letter when "
        "none, random.seed(12345) per model).\n\n" + markdown(accuracy))

    per_subject, subject_accuracy = subject_tables(batched)
    per_subject.to_csv(out / "per_subject.csv", index=False)
    subject_accuracy.to_csv(out / "subject_accuracy.csv", index=False)
    (out / "per_subject.md").write_text(
        "# MMLU-Pro per subject (all queries, batched energy model)\n\nJoule share: the subject's share of the joules "
        "of all 26 models' answers (derived energy).\n\n" + markdown(per_subject))

    summary, energy = energy_tables(batched, batch1)
    (out / "energy.json").write_text(json.dumps({"summary": summary, "models": energy.to_dict("records")}, indent=1))
    (out / "energy.md").write_text(
        "# MMLU-Pro: per-answer joules (DERIVED) and mean power\n\n"
        f"Between models, mean joules per answer differ {summary['between_models_mean_j_ratio_max_over_min']:.0f}x "
        f"({summary['cheapest']} to {summary['costliest']}). Within one model, p90/p10 of joules per answer is "
        f"{summary['within_model_p90_over_p10_median']:.1f} (median over models); within one model and one subject the "
        f"coefficient of variation is {summary['within_subject_cv_median_over_models']:.2f} (median over models of the "
        "median over subjects): answers differ because each model wrote its own number of tokens.\n\n"
        f"Mean power. batched (decode: a request's share of a vLLM server at batch ~128; prefill: compute-bound "
        f"at full board power): {summary['batched_power_range_w'][0]:.1f}-{summary['batched_power_range_w'][1]:.1f} W "
        f"per request, within n_gpus x {H100_BOARD_W:.0f} W for every model: {summary['all_batched_within_ceiling']}. batch1 "
        f"(one request alone on the model's GPUs): {summary['batch1_w_per_gpu_range'][0]:.0f}-"
        f"{summary['batch1_w_per_gpu_range'][1]:.0f} W per GPU, every model within its ceiling of n_gpus x "
        f"{H100_BOARD_W:.0f} W (H100 SXM board power): {summary['all_batch1_within_ceiling']}.\n\n" + markdown(energy))

    calibration_file = ROOT / "experiments" / "results" / "routing_gain" / "calibration.json"
    rows = json.loads(calibration_file.read_text()) if calibration_file.exists() else {}
    rows["mmlu-pro (real)"] = calibration_statistics(batched)
    (out / "calibration.json").write_text(json.dumps(rows, indent=1, sort_keys=True))
    table = pd.DataFrame([{"tournament": name, "queries": r["n_queries"], "models": r["n_models"],
                           "correlation": r["correlation"], "big_from_small_auc": r["big_from_small_auc"],
                           "length_auc": r["length_auc"], "mean_accuracy": r["mean_accuracy"]} for name, r in rows.items()])
    (out / "calibration.md").write_text(
        "# Calibration row: MMLU-Pro next to the other tournaments\n\n`calibration_statistics` (within subject, by "
        "size); the other rows are copied from experiments/results/routing_gain/calibration.json.\n\n"
        + markdown(table, ".3f"))
    return path


def tournament_root(args) -> Path:
    from routing_gym.paths import cache_dir

    return Path(args.tournaments) if args.tournaments else cache_dir() / "mmlu-pro-study"


def step_cli(argv: list[str]) -> None:
    print("+ routing-gym", " ".join(argv), flush=True)
    subprocess.run([sys.executable, "-m", "routing_gym", *argv], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ROUTING_GYM_DATA_DIR"))
    parser.add_argument("--out", default=str(ROOT / "experiments" / "results" / "mmlu-pro"))
    parser.add_argument("--tournaments", default=None, help="where the built tournaments go (default: the routing-gym cache)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", default="data,compare,frontier")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only (a quick check, not the study)")
    args = parser.parse_args()
    if not args.data_dir:
        sys.exit("give --data-dir or set ROUTING_GYM_DATA_DIR")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = args.steps.split(",")
    path = tournament_root(args) / "mmlu-pro"
    if "data" in steps:
        path = step_data(args, out)
    if "compare" in steps:
        step_cli(["compare", "--tournament", str(path), "--seeds", str(args.seeds), "--out", str(out / "compare")])
        shutil.rmtree(out / "compare" / "cells", ignore_errors=True)  # resume state, not a result
    if "frontier" in steps:
        from routing_gym_agents.registry import list_agents

        agents = ["cost-aware", "knn"] + [a for a in ("per-benchmark",) if a in list_agents()]
        step_cli(["frontier", "--tournament", str(path), "--agents", ",".join(agents), "--out", str(out / "frontier")])
    write_readme(out, "MMLU-Pro: a large real tournament with per-answer (derived) energy",
                 f"This run did the steps {', '.join(steps)}.\n\n{__doc__}")


if __name__ == "__main__":
    main()
