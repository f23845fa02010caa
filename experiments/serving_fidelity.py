"""Fidelity of the serving simulator (issue 62): held-out batches, Little's law, vanishing load.

Writes experiments/results/serving-fidelity/: held_out.csv (one row per configuration x held-out
batch, H100 and A100) and a README with the medians, the worst cases, Little's law and the
vanishing-load check. The tests in tests/test_serving_fidelity.py assert the thresholds.

    OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR=../shared/data python experiments/serving_fidelity.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import write_readme  # noqa: E402

from routing_gym.serving.curves import mlenergy_batch_curves, mlenergy_tables  # noqa: E402
from routing_gym.serving.fidelity import held_out_batches, littles_law, vanishing_load  # noqa: E402
from routing_gym.serving.physics import batch1_anchors, fit_physics, main_configuration  # noqa: E402
from routing_gym.sources.energy_model import batch1_curves  # noqa: E402

LLAMA_8B = "meta-llama/Meta-Llama-3.1-8B-Instruct"


def worst(frame: pd.DataFrame, column: str) -> str:
    row = frame.loc[frame[column].abs().idxmax()]
    return f"{row[column]:+.1%} ({row['model']}, {row['gpu']}, batch {row['batch']})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/results/serving-fidelity")
    args = parser.parse_args()
    table = mlenergy_tables()
    anchors = batch1_anchors(None)
    frames = [held_out_batches(table, anchors), held_out_batches(mlenergy_batch_curves(gpu="A100-SXM4-40GB"), {})]
    held = pd.concat(frames, ignore_index=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    held.to_csv(out / "held_out.csv", index=False, float_format="%.6g")
    lines = ["| GPU | held-out points | median abs J/request error | worst | median abs TPOT error | worst |",
             "|---|---|---|---|---|---|"]
    for gpu, frame in held.groupby("gpu"):
        lines.append(f"| {gpu} | {len(frame)} | {frame['j_error'].abs().median():.1%} | {worst(frame, 'j_error')} | "
                     f"{frame['tpot_error'].abs().median():.1%} | {worst(frame, 'tpot_error')} |")
    physics = [fit_physics(main_configuration(table, m), anchors[m]) for m in (LLAMA_8B, "google/gemma-2-9b-it")]
    tokens = np.column_stack([np.full(50, 80.0), np.random.default_rng(1).integers(50, 600, 50)])
    law_lines = ["| arrivals/s | L sampled at arrivals | lambda x W | difference | mean in system |", "|---|---|---|---|---|"]
    for rate in (2.0, 10.0):
        law = littles_law(physics, rate, 40_000, tokens, seed=3)
        law_lines.append(f"| {rate:g} | {law['L_sampled']:.3f} | {law['lambda_W']:.3f} | "
                         f"{law['L_sampled'] / law['lambda_W'] - 1:+.2%} | {law['mean_batch']:.1f} |")
    single = fit_physics(main_configuration(table, LLAMA_8B), anchors[LLAMA_8B], params_b=8.03)
    out_tokens, in_tokens = np.array([100.0, 250.0, 400.0]), np.array([50.0, 120.0, 0.0])
    jpt1 = float(batch1_curves(None).set_index("model").loc[LLAMA_8B, "joules_per_token1"])
    law_j = float(np.mean(out_tokens * jpt1 + in_tokens * single.prefill_j_per_token))
    sim_j = vanishing_load(single, out_tokens, in_tokens)
    about = f"""
How close the serving simulator (`routing_gym/serving/`) comes to ML.ENERGY v2's measurements
(vLLM, ShareGPT prompts) at batch sizes it was **not** fitted to, and two queueing checks.

## Held-out batch sizes

For every measured configuration and every interior measured batch b (not the largest: that
would be an extrapolation; on the A100, whose runs have no batch-1 anchor, not the smallest
either), the physics is fitted without that point (PCHIP in log batch and log value; on the H100
the batch-1 law anchors batch 1), then b requests are held in flight (a closed loop with the
measurement's mean output length, no prompt) and the simulated J per request and time per
output token are compared with the measured ones. Errors are simulated / measured - 1;
`held_out.csv` has every point.

{chr(10).join(lines)}

The largest errors sit next to the batch-1 anchor (the first measured batch held out leaves a
gap from 1 to the next measured batch, 128 or more) or at a measured point off the trend.

## Little's law

Poisson arrivals routed uniformly to Llama-3.1-8B and Gemma-2-9B (one H100 replica each, max
batch 256), 40,000 arrivals, the first tenth left out; L is the number in the system sampled
at arrivals (Poisson arrivals see time averages), W the mean time in the system.

{chr(10).join(law_lines)}

## Vanishing load

Three Llama-3.1-8B requests 10,000 s apart (each served alone): simulated {sim_j:.4f} J per
request; the batch-1 law (`energy_model.batch1_curves`: {jpt1:.4f} J per output token, plus the
compute-bound prefill) gives {law_j:.4f} J (ratio {sim_j / law_j:.6f}).
"""
    write_readme(out, "Serving simulator fidelity (issue 62)", about)
    print((out / "README.md").read_text())


if __name__ == "__main__":
    main()
