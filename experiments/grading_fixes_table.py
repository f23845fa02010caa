"""Per-model accuracy on zeroeval-math before and after a grading change, and every flipped grade.

Build the tournament twice with ``routing-gym data build zeroeval-math --data-dir DIR --out ...``
(on the old code and on the new one), then::

    python experiments/grading_fixes_table.py BEFORE_DIR AFTER_DIR

prints a Markdown table (accuracy in % per model and benchmark, and the change in points)
and the flipped (query, model) grades with the reason each build gave.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def load_grades(directory: Path) -> pd.DataFrame:
    return pd.read_parquet(directory / "grades.parquet", columns=["query_id", "model_id", "benchmark", "correct", "extracted", "reason"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = load_grades(args.before), load_grades(args.after)
    both = before.merge(after, on=["query_id", "model_id", "benchmark"], suffixes=("_before", "_after"), validate="one_to_one")
    table = both.groupby(["model_id", "benchmark"]).agg(
        n=("correct_before", "size"),
        before_pct=("correct_before", "mean"),
        after_pct=("correct_after", "mean"),
        flips_to_correct=("correct_after", lambda s: int((s & ~both.loc[s.index, "correct_before"]).sum())),
        flips_to_wrong=("correct_before", lambda s: int((s & ~both.loc[s.index, "correct_after"]).sum())),
    ).reset_index()
    table[["before_pct", "after_pct"]] *= 100
    table["change_pp"] = table["after_pct"] - table["before_pct"]
    columns = list(table.columns)
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in table.itertuples(index=False):
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row) + " |")
    flipped = both[both["correct_before"] != both["correct_after"]]
    print(f"\n{len(flipped)} flipped grades of {len(both)}:\n")
    for r in flipped.sort_values(["benchmark", "query_id", "model_id"]).itertuples():
        print(f"- {r.query_id} {r.model_id}: {r.correct_before} -> {r.correct_after}; "
              f"before: {r.reason_before!r}; after: {r.reason_after!r}")


if __name__ == "__main__":
    main()
