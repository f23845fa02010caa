"""Do verdicts depend on how the joules were derived? The energy law, validated, and every verdict under each law.

    OMP_NUM_THREADS=1 python experiments/energy_laws.py --seeds 2 --out experiments/results/energy_laws

1. ``loo.csv``: each ML.ENERGY-measured H100 chat model predicted by fits without it, by the
   previous method (power law in the parameter count) and by the energy law (GPUs and size,
   ``routing_gym/sources/energy_law.py``): out-of-sample error of J per output token (and TPOT).
2. ``per_model_<tournament>.csv``: per model of ``zeroeval-math`` and ``llmrouter``, its serving
   (precision, GPUs), its default pricing method, and J per output token under each energy law
   the build records (``batched`` = the default, ``law`` = the law for every model, ``params`` =
   the previous method, ``batch1`` = one request at a time).
3. ``verdicts_<tournament>.csv``: ``routing-gym compare`` with the default agents (``--seeds``
   seeds), then every method's verdict (routes / below / indistinguishable; fixed models on or
   below the hull) and routing gain under each law from the same actions
   (``routing_gym/eval/core/robustness.py``), and whether it is robust; the hull vertices per law.

The tables land in ``tables.md``; ``README.md`` (written here too) names the command.
Energies are DERIVED (ML.ENERGY per-token figures x the logged token counts), never measured.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from routing_gym.eval.compare import CompareConfig, run_compare
from routing_gym.eval.compare.statistics import test_plan
from routing_gym.eval.core.robustness import robustness_of_runs
from routing_gym.sources import resolve_tournament
from routing_gym.sources.energy_law import leave_one_out
from routing_gym.sources.energy_model import measured_runs
from results_readme import write_readme  # experiments/results_readme.py

TOURNAMENTS = ("zeroeval-math", "llmrouter")


def per_model_table(name: str) -> pd.DataFrame:
    t = resolve_tournament(name)
    rows = []
    for model, params, serving in zip(t.model_ids, t.models["params_b"], t.models["serving"]):
        alternatives = serving["energy_alternatives"]
        rows.append({"model": model, "params_b": params, "precision": serving["precision"], "n_gpus": serving["n_gpus"],
                     "default_method": serving["energy_method"],
                     **{f"j_per_token_{law}": v["joules_per_output_token"] for law, v in alternatives.items()},
                     "serving_note": serving["serving_note"]})
    return pd.DataFrame(rows)


def verdicts(name: str, seeds: int) -> tuple[pd.DataFrame, dict[str, list[str]], float]:
    start = time.monotonic()
    config = CompareConfig(tournament=name, seeds=seeds, progress=False)
    result = run_compare(config)
    plan = test_plan(config, result.tournament, result.test_rows)
    robustness = robustness_of_runs(result.tournament, result.test_rows, result.runs, plan, config.confidence,
                                    train_rows=result.tournament.split_rows(config.train_split))
    if robustness is None:
        raise SystemExit(f"{name}: the build records no alternative energy laws (rebuild it with this version)")
    summary = robustness.to_dict()
    return pd.DataFrame(summary["methods"]), summary["hull_models"], time.monotonic() - start


def markdown(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """A Markdown table (pandas' to_markdown needs tabulate, not a dependency)."""
    def cell(v: object) -> str:
        return format(v, floatfmt) if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("experiments/results/energy_laws"))
    p.add_argument("--tournaments", nargs="+", default=list(TOURNAMENTS))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    loo = leave_one_out(measured_runs(None))
    loo.to_csv(args.out / "loo.csv", index=False)
    sections = ["## Leave-one-out error on every ML.ENERGY-measured model (J per output token)", "",
                markdown(loo[["model", "params_b", "n_gpus", "rule_gpus", "measured_j_per_token", "params_fit_j_per_token",
                              "params_fit_error", "law_j_per_token", "law_error", "law_tpot_error"]]), "",
                f"median |error|: parameter-count fit {loo['params_fit_error'].abs().median():.1%}, law "
                f"{loo['law_error'].abs().median():.1%}; max: {loo['params_fit_error'].abs().max():.1%} vs "
                f"{loo['law_error'].abs().max():.1%}", ""]
    for name in args.tournaments:
        models = per_model_table(name)
        models.to_csv(args.out / f"per_model_{name}.csv", index=False)
        table, hulls, seconds = verdicts(name, args.seeds)
        table.to_csv(args.out / f"verdicts_{name}.csv", index=False)
        sections += [f"## {name}: J per output token under each energy law (derived)", "",
                     markdown(models.drop(columns=["serving_note"]), ".4f"), "",
                     f"## {name}: verdicts under each energy law ({args.seeds} seed(s), default agents, {seconds:.0f} s)", "",
                     markdown(table, "+.1f"), "",
                     *[f"- hull under {law}: {' → '.join(models_)}" for law, models_ in hulls.items()],
                     f"- verdicts that depend on the energy law: "
                     f"{', '.join(table.loc[~table['robust'], 'method']) or 'none'}", ""]
        print(f"{name}: {seconds:.0f} s; fragile: {table.loc[~table['robust'], 'method'].tolist()}", flush=True)
    (args.out / "tables.md").write_text("\n".join(sections), encoding="utf-8")
    write_readme(args.out, "Energy laws: one law per tournament, and which verdicts depend on it",
                 f"`tables.md` holds every table.\n\n{__doc__}")


if __name__ == "__main__":
    main()
