"""Does the energy model change the picture? Per-model joules and routing gain, batched vs batch 1.

    OMP_NUM_THREADS=1 python experiments/energy_model_study.py --seeds 2 --out experiments/results/energy_models

Builds (once, cached under their own names) ``zeroeval-math`` / ``zeroeval-math-batch1`` and
``llmrouter`` / ``llmrouter-batch1``: the same outcomes and token counts, energy *derived*
under the ``batched`` and ``batch1`` energy models (``routing_gym/sources/energy_model.py``).

1. ``per_model_joules.csv`` and a Markdown table: per model, accuracy, mean output tokens, mean
   joules per query under each model, their ratio, an HBM-bandwidth floor for batch 1 (bf16
   weights read once per output token at the model's batch-1 board power: a lower bound, also
   derived), and the reference paper's published per-model figures where the same
   architecture appears (:data:`PAPER_ANCHORS`).
2. ``routing-gym compare`` (default agents, ``--seeds`` seeds) on all four tournaments, each in
   ``compare/<tournament>/``, and ``routing_gain.csv`` / a Markdown table: per method, the routing
   gain over the fixed-model hull (pp, with its bootstrap interval) under each energy model, and
   whether it changes sign: ``point`` when the point estimates have opposite signs,
   ``significant`` when the intervals lie on opposite sides of 0.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from routing_gym.sources import resolve_tournament
from routing_gym.sources.energy_model import ARCHITECTURE_OF, H100_HBM_BYTES_PER_S, batch1_curves
from results_readme import write_readme  # experiments/results_readme.py

PAIRS = {"zeroeval-math": "zeroeval-math-batch1", "llmrouter": "llmrouter-batch1"}
# The reference paper's per-model joules (arXiv 2609.23085; one A100-80GB, Ollama, batch 1,
# NVML 200 ms polling, idle subtracted), keyed by the architecture they measured.
PAPER_ANCHORS = {
    "qwen2.5-7b": "281.6 J per query (always-Qwen2.5-7B, held-out mix of 7 benchmarks)",
    "llama-3.1-8b": "638 J (one GSM8K item, answered wrong)",
}


def per_model_table(batched_name: str, batch1_name: str, data_dir: str | None = None) -> pd.DataFrame:
    """One row per model: accuracy, tokens, mean J under both energy models, the HBM floor."""
    a, b = resolve_tournament(batched_name), resolve_tournament(batch1_name)
    if a.model_ids != b.model_ids or not np.array_equal(a.output_tokens, b.output_tokens) \
            or not np.array_equal(a.correct, b.correct):
        raise SystemExit(f"{batched_name} and {batch1_name} differ in more than energy: rebuild both")
    curves = batch1_curves(data_dir).set_index("model")
    median_power = float(curves["power1_w_per_gpu"].median())
    rows = []
    for k, (model, serving) in enumerate(zip(a.model_ids, a.models["serving"])):
        spec_params = float(a.models["params_b"].iloc[k])
        mlenergy = next((m for m in curves.index if m == serving.get("hf_id") or m.endswith("/" + model)), None)
        power = float(curves.loc[mlenergy, "power1_w_per_gpu"]) if mlenergy else median_power
        # n_gpus x power x (2 N bytes / (n_gpus x bandwidth)): the GPU count cancels
        floor_j_per_token = power * 2 * spec_params * 1e9 / H100_HBM_BYTES_PER_S
        floor = a.output_tokens[:, k] * floor_j_per_token + a.input_tokens[:, k] * serving["prefill_joules_per_input_token"]
        gsm = (a.queries["benchmark"] == "gsm8k").to_numpy()
        arch = ARCHITECTURE_OF.get(serving.get("hf_id", ""), "")
        rows.append({
            "tournament": batched_name, "model": model, "architecture": arch, "params_b": spec_params,
            "accuracy_pct": 100 * a.correct[:, k].mean(), "mean_output_tokens": a.output_tokens[:, k].mean(),
            "batched_j": a.energy_j[:, k].mean(), "batch1_j": b.energy_j[:, k].mean(),
            "batch1_over_batched": b.energy_j[:, k].mean() / a.energy_j[:, k].mean(),
            "batch1_hbm_floor_j": floor.mean(),
            "batch1_method": b.models["serving"].iloc[k]["energy_method"],
            "batched_j_gsm8k": a.energy_j[gsm, k].mean() if gsm.any() else np.nan,
            "batch1_j_gsm8k": b.energy_j[gsm, k].mean() if gsm.any() else np.nan,
            "batch1_j_gsm8k_wrong": b.energy_j[gsm & (a.correct[:, k] < 0.5), k].mean() if gsm.any() else np.nan,
            "paper": PAPER_ANCHORS.get(arch, ""),
        })
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    lines = ["| tournament | model | arch | acc % | out tok | batched J | batch-1 J | x | HBM floor J | "
             "GSM8K: batched J / batch-1 J (batch-1 J, wrong answers) | batch-1 from | paper (A100, Ollama) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in table.itertuples():
        gsm = "" if np.isnan(r.batch1_j_gsm8k) else \
            f"{r.batched_j_gsm8k:,.1f} / {r.batch1_j_gsm8k:,.0f} ({r.batch1_j_gsm8k_wrong:,.0f})"
        lines.append(f"| {r.tournament} | {r.model} | {r.architecture} | {r.accuracy_pct:.1f} | {r.mean_output_tokens:.0f} | "
                     f"{r.batched_j:,.1f} | {r.batch1_j:,.0f} | {r.batch1_over_batched:.0f} | {r.batch1_hbm_floor_j:,.0f} | "
                     f"{gsm} | {r.batch1_method.replace('batch1-', '')} | {r.paper} |")
    return "\n".join(lines)


def routing_gains(name: str, seeds: int, out: Path) -> pd.DataFrame:
    """``compare`` on one tournament (outputs kept in ``out/compare/<name>``); one row per method."""
    from routing_gym.eval.compare import CompareConfig, run_compare, write_outputs

    start = time.monotonic()
    result = run_compare(CompareConfig(tournament=name, seeds=seeds, progress=False))
    write_outputs(result, out / "compare" / name, plots=False)
    print(f"compare on {name}: {time.monotonic() - start:.0f} s", flush=True)
    keep = ["method", "kind", "accuracy", "mean_energy_j", "routing_gain_pp", "routing_gain_pp_ci_low",
            "routing_gain_pp_ci_high", "routing_gain_pp_vs", "joules_saved_pct"]
    rows = pd.DataFrame([{k: r.get(k) for k in keep} for r in result.rows])
    rows.insert(0, "tournament", name)
    return rows


def sign_change(a: pd.Series, b: pd.Series) -> str:
    """``significant`` (intervals on opposite sides of 0), ``point`` (point estimates only), or ''."""
    if (a.routing_gain_pp_ci_low > 0 and b.routing_gain_pp_ci_high < 0) or \
            (a.routing_gain_pp_ci_high < 0 and b.routing_gain_pp_ci_low > 0):
        return "significant"
    return "point" if a.routing_gain_pp * b.routing_gain_pp < 0 else ""


def gain_markdown(gains: pd.DataFrame) -> str:
    def cell(r: pd.Series) -> str:
        outside = "" if r.routing_gain_pp_vs == "within" else "*"
        if pd.isna(r.routing_gain_pp_ci_low):  # a fixed model: on the hull or a distance below it, no interval
            return "on the hull" if r.routing_gain_pp == 0 else f"{r.routing_gain_pp:+.1f} below the hull{outside}"
        return f"{r.routing_gain_pp:+.1f} [{r.routing_gain_pp_ci_low:+.1f}, {r.routing_gain_pp_ci_high:+.1f}]{outside}"

    head, rule = ["method"], ["---"]
    for base, variant in PAIRS.items():
        head += [f"{base} batched", f"{base} batch-1", "sign change"]
        rule += ["---:", "---:", "---"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    by = gains.set_index(["tournament", "method"])
    methods = [m for m in dict.fromkeys(gains["method"]) if not m.startswith("always ")]
    for method in methods:
        cells = [method]
        for base, variant in PAIRS.items():
            if (base, method) in by.index and (variant, method) in by.index:
                a, b = by.loc[(base, method)], by.loc[(variant, method)]
                cells += [cell(a), cell(b), sign_change(a, b)]
            else:
                cells += ["", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="experiments/results/energy_models")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=2, help="seeds per agent in compare")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.concat([per_model_table(a, b, args.data_dir) for a, b in PAIRS.items()], ignore_index=True)
    table.to_csv(out / "per_model_joules.csv", index=False, float_format="%.4g")
    gains = pd.concat([routing_gains(name, args.seeds, out) for pair in PAIRS.items() for name in pair],
                      ignore_index=True)
    gains.to_csv(out / "routing_gain.csv", index=False, float_format="%.4g")
    tables = ["## Per model: mean joules per query under each energy model (derived)", "", markdown(table), "",
              "## Routing gain over the fixed-model hull, pp [95% CI] (* outside the hull's range: nearest end point)", "",
              gain_markdown(gains), ""]
    (out / "tables.md").write_text("\n".join(tables))
    print("\n".join(tables[2:]))
    write_readme(out, "Energy models: batched vs batch-1 joules on the derived tournaments, and the routing gain",
                 f"`tables.md` holds both tables (`per_model_joules.csv`, `routing_gain.csv`); each compare run is in "
                 f"`compare/<tournament>/`.\n\n{__doc__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
