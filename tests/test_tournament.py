"""Tournament data model: construction, validation messages, I/O round trips, splits."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import make_tournament

from routing_gym.errors import EmptySplitError, TournamentValidationError, UnknownNameError
from routing_gym.tournament import PAPER_SPLIT, Tournament
from routing_gym.tournament.duplicates import duplicate_counts, normalise_question


def long_tables(t: Tournament) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return t.queries.copy(), t.models.copy(), t.to_long()


def test_from_records_round_trips_dense_arrays(toy):
    queries, models, outcomes = long_tables(toy)
    rebuilt = Tournament.from_records(queries, models, outcomes.sample(frac=1.0, random_state=3), toy.card)
    for name in ("correct", "energy_j", "latency_s", "mean_power_w", "output_tokens"):
        np.testing.assert_array_equal(getattr(rebuilt, name), getattr(toy, name))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_save_load_round_trip(tmp_path, toy, fmt):
    toy.queries.at[0, "metadata"] = {"source": "unit test", "level": 3}
    toy.save(tmp_path / "t", format=fmt)
    loaded = Tournament.load(tmp_path / "t")
    assert loaded.queries["metadata"].iloc[0] == {"source": "unit test", "level": 3}
    assert loaded.queries["split"].tolist() == toy.queries["split"].tolist()
    np.testing.assert_allclose(loaded.energy_j, toy.energy_j)
    assert loaded.card == toy.card
    assert (tmp_path / "t" / "CARD.md").read_text().startswith("# Data card")


def test_saving_again_in_other_format_leaves_no_stale_tables(tmp_path, toy):
    toy.save(tmp_path / "t", format="jsonl")
    toy.save(tmp_path / "t", format="parquet")
    assert not list((tmp_path / "t").glob("*.jsonl"))


def _problems(exc: TournamentValidationError) -> str:
    return str(exc)


def test_validation_names_file_row_and_column_for_bad_values(tmp_path, toy):
    toy.save(tmp_path / "t", format="jsonl")
    lines = (tmp_path / "t" / "outcomes.jsonl").read_text().splitlines()
    bad = json.loads(lines[4])
    bad["energy_j"] = -3.0
    lines[4] = json.dumps(bad)
    bad = json.loads(lines[6])
    bad["correct"] = 1.5
    lines[6] = json.dumps(bad)
    (tmp_path / "t" / "outcomes.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(TournamentValidationError) as info:
        Tournament.load(tmp_path / "t")
    message = _problems(info.value)
    assert "outcomes.jsonl, row 5, column 'energy_j': -3.0 must be finite and >= 0 joules" in message
    assert "outcomes.jsonl, row 7, column 'correct': 1.5 must be in [0, 1]" in message
    assert len(info.value.problems) == 2


def test_validation_reports_missing_duplicate_and_unknown_pairs(toy):
    queries, models, outcomes = long_tables(toy)
    outcomes = pd.concat([outcomes.iloc[1:], outcomes.iloc[[5]]], ignore_index=True)
    outcomes.loc[10, "model_id"] = "ghost"
    with pytest.raises(TournamentValidationError) as info:
        Tournament.from_records(queries, models, outcomes, toy.card, source="t.parquet")
    message = str(info.value)
    assert "unknown model_id 'ghost' (not in models)" in message and "row 11" in message
    assert "duplicate pair (query 'q1', model 'm1')" in message
    assert "2 of 240 (query, model) pairs are missing: ('q0', 'm0'), ('q2', 'm3')" in message


def test_nan_energy_and_unknown_provenance_are_rejected(toy):
    queries, models, outcomes = long_tables(toy)
    outcomes.loc[3, "energy_j"] = np.nan
    models.loc[1, "energy_provenance"] = "guessed"
    with pytest.raises(TournamentValidationError) as info:
        Tournament.from_records(queries, models, outcomes, toy.card, source="x")
    message = str(info.value)
    assert "row 4, column 'energy_j': nan" in message
    assert "row 2, column 'energy_provenance': 'guessed' is not one of measured, derived, synthetic" in message


def test_missing_required_column_and_corrupt_files(tmp_path, toy):
    queries, models, outcomes = long_tables(toy)
    with pytest.raises(TournamentValidationError, match="column 'energy_j': required column is missing"):
        Tournament.from_records(queries, models, outcomes.drop(columns="energy_j"), toy.card)
    toy.save(tmp_path / "t")
    (tmp_path / "t" / "models.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(TournamentValidationError, match="models.parquet: unreadable Parquet file"):
        Tournament.load(tmp_path / "t")
    toy.save(tmp_path / "j", format="jsonl")
    with open(tmp_path / "j" / "queries.jsonl", "a") as handle:
        handle.write('{"query_id": "broken"\n')
    with pytest.raises(TournamentValidationError, match=r"queries.jsonl, row \d+: not valid JSON"):
        Tournament.load(tmp_path / "j")
    with pytest.raises(FileNotFoundError):
        Tournament.load(tmp_path / "nowhere")


def test_array_constructor_validates_shapes_and_duplicates(toy):
    with pytest.raises(TournamentValidationError, match="array shape"):
        Tournament(**{**_fields(toy), "energy_j": toy.energy_j[:, :2]})
    queries = toy.queries.copy()
    queries.loc[3, "query_id"] = "q0"
    with pytest.raises(TournamentValidationError, match="row 4, column 'query_id': duplicate query_id 'q0'"):
        Tournament(**{**_fields(toy), "queries": queries})


def _fields(t: Tournament) -> dict:
    names = ("queries", "models", "correct", "energy_j", "latency_s", "mean_power_w", "input_tokens", "output_tokens", "card")
    return {n: getattr(t, n) for n in names}


def test_splits_are_seeded_stratified_and_default_to_paper_proportions():
    t = make_tournament(n=2963, k=3, with_splits=False)
    a, b, c = t.with_splits(seed=1), t.with_splits(seed=1), t.with_splits(seed=2)
    assert a.queries["split"].tolist() == b.queries["split"].tolist()
    assert a.queries["split"].tolist() != c.queries["split"].tolist()
    counts = a.queries["split"].value_counts()
    assert abs(counts["train"] - PAPER_SPLIT["train"]) <= len(a.benchmarks)
    assert counts.sum() == 2963
    for _, group in a.queries.groupby("benchmark"):  # every benchmark cut in the same proportion
        share = (group["split"] == "train").mean()
        assert share == pytest.approx(2050 / 2963, abs=0.01)
    assert a.card.split == {"seed": 1, "proportions": PAPER_SPLIT, "stratified_by": "benchmark",
                            "grouped_by": "normalised question text (lowercase, whitespace collapsed)"}


def _per_query_split(t: Tournament, seed: int, proportions: dict[str, float]) -> list[str]:
    """The split rule before group splits (one draw per query), kept here as the reference."""
    weights = np.array(list(proportions.values()), dtype=float) / sum(proportions.values())
    rng = np.random.default_rng(seed)
    split = np.empty(t.n_queries, dtype=object)
    for benchmark in t.benchmarks:
        rows = np.flatnonzero(t.queries["benchmark"].to_numpy() == benchmark)
        rows = rows[rng.permutation(len(rows))]
        quotas = weights * len(rows)
        counts = np.floor(quotas).astype(int)
        counts[np.argsort(-(quotas - counts), kind="stable")[: int(round(quotas.sum())) - counts.sum()]] += 1
        split[rows] = np.repeat(list(proportions), counts)
    return split.tolist()


@pytest.mark.parametrize("seed, proportions", [(0, PAPER_SPLIT), (7, {"train": 2, "test": 1}),
                                               (3, {"train": 5, "validation": 1, "test": 2})])
def test_without_duplicates_the_group_split_is_the_per_query_split_draw_for_draw(seed, proportions):
    t = make_tournament(n=700, k=2, seed=seed, with_splits=False)  # every prompt unique
    assert t.queries["prompt"].map(normalise_question).is_unique
    assert t.with_splits(seed=seed, proportions=proportions).queries["split"].tolist() == _per_query_split(t, seed, proportions)


def test_every_copy_of_a_question_lands_on_one_side_still_stratified():
    t = make_tournament(n=1500, k=2, with_splits=False)
    rng = np.random.default_rng(0)
    stems = [f"What is {i} plus {i}?" for i in range(300)]  # 300 questions, each asked ~5 times
    variants = (str, str.upper, lambda q: "  " + q.replace(" ", "\n  ") + "\t")  # case and whitespace differ
    queries = t.queries.copy()
    queries["prompt"] = [variants[rng.integers(3)](stems[rng.integers(300)]) for _ in range(t.n_queries)]
    t = Tournament(**{**_fields(t), "queries": queries})
    for seed in range(3):
        split = t.with_splits(seed=seed).queries
        groups = split["prompt"].map(normalise_question)
        assert (split.groupby(groups)["split"].nunique() == 1).all()
        counts = duplicate_counts(split["prompt"], split["split"])
        assert counts["cross_split_texts"] == counts["cross_split_queries"] == 0
        assert sum(counts["within"].values()) == t.n_queries - groups.nunique()
        assert abs((split["split"] == "train").mean() - 2050 / 2963) < 0.03  # whole groups: close, not exact
    # The per-query rule puts copies on both sides: what the group split prevents.
    per_query = _per_query_split(t, 0, PAPER_SPLIT)
    assert duplicate_counts(t.queries["prompt"], per_query)["cross_split_texts"] > 100


def test_shipped_and_procedural_presets_have_no_cross_split_duplicates():
    from routing_gym.sources import resolve_tournament

    for name in ("paper-pool", "specialist-pool", "two-model"):
        t = resolve_tournament(name)
        counts = duplicate_counts(t.queries["prompt"], t.queries["split"])
        assert counts["cross_split_texts"] == 0, (name, counts)


def test_split_errors_are_clear():
    t = make_tournament(with_splits=False)
    with pytest.raises(EmptySplitError, match="has no splits; call with_splits"):
        t.split_rows("train")
    with pytest.raises(UnknownNameError, match="unknown split 'dev'; in this tournament: all, test, train"):
        make_tournament().split_rows("dev")
    with pytest.raises(EmptySplitError, match="split 'test' has no queries"):
        make_tournament(n=30).with_splits(proportions={"train": 1, "test": 0}).split_rows("test")


def test_subset_by_benchmark_model_and_split(toy):
    sub = toy.subset(benchmarks=["gsm8k"], models=["m3", "m0"], split="train")
    assert set(sub.queries["benchmark"]) == {"gsm8k"}
    assert sub.model_ids == ["m3", "m0"]
    rows = np.flatnonzero((toy.queries["benchmark"] == "gsm8k").to_numpy() & (toy.queries["split"] == "train").to_numpy())
    np.testing.assert_array_equal(sub.energy_j, toy.energy_j[rows][:, [3, 0]])
    # a tournament's benchmarks and models are its own, not registered names
    with pytest.raises(UnknownNameError, match="unknown benchmark 'bbh'; in this tournament: ") as caught:
        toy.subset(benchmarks=["bbh"])
    assert "registered" not in str(caught.value).lower()
    with pytest.raises(UnknownNameError, match="unknown model 'm9'; in this tournament: m0, m1"):
        toy.subset(models=["m9"])


def test_data_split_and_info_report_duplicates(tmp_path, capsys):
    from routing_gym.cli import main

    t = make_tournament(n=90, with_splits=False)
    queries = t.queries.copy()
    queries.loc[[1, 2, 3], "prompt"] = [queries.loc[0, "prompt"].upper(), queries.loc[0, "prompt"] + "  ", "Same?"]
    queries.loc[[4, 5], "prompt"] = ["same?", " SAME? "]
    Tournament(**{**_fields(t), "queries": queries}).save(tmp_path / "raw")
    # The raw file gives copies of one text both splits: data info counts them.
    raw = Tournament.load(tmp_path / "raw")
    raw.queries["split"] = ["train", "test"] * 45
    raw.save(tmp_path / "leaky")
    assert main(["data", "info", str(tmp_path / "leaky")]) == 0
    assert "across splits: 2 texts (6 queries)" in capsys.readouterr().out
    assert main(["data", "split", str(tmp_path / "raw"), "--out", str(tmp_path / "split")]) == 0
    out = capsys.readouterr().out
    assert "across splits: 0 texts (0 queries)" in out and "extra copies within a split" in out
    split = Tournament.load(tmp_path / "split").queries["split"]
    assert split[0] == split[1] == split[2] and split[3] == split[4] == split[5]


def test_a_split_copy_takes_its_folders_name(tmp_path, capsys):
    from routing_gym.cli import main

    make_tournament(n=60, with_splits=False).save(tmp_path / "crux-t")
    assert main(["data", "split", str(tmp_path / "crux-t"), "--out", str(tmp_path / "crux-split")]) == 0
    assert main(["data", "split", str(tmp_path / "crux-t"), "--out", str(tmp_path / "named"), "--name", "mine"]) == 0
    original = Tournament.load(tmp_path / "crux-t").card.name
    assert main(["data", "split", str(tmp_path / "crux-t"), "--out", str(tmp_path / "crux-t")]) == 0
    assert Tournament.load(tmp_path / "crux-split").card.name == "crux-split"
    assert Tournament.load(tmp_path / "named").card.name == "mine"
    assert Tournament.load(tmp_path / "crux-t").card.name == original  # in place: the name stays
    capsys.readouterr()
    assert main(["data", "info", str(tmp_path / "crux-t"), str(tmp_path / "crux-split")]) == 0
    assert "crux-split: N=60" in capsys.readouterr().out


def test_benchmark_proportions_cut_named_benchmarks_their_own_way():
    t = make_tournament(n=600, with_splits=False)
    split = t.with_splits(seed=0, proportions={"train": 2, "test": 1},
                          benchmark_proportions={"mmlu": {"train": 1, "test": 0}}).queries
    assert (split.loc[split["benchmark"] == "mmlu", "split"] == "train").all()
    assert (split.loc[split["benchmark"] == "gsm8k", "split"] == "test").mean() == pytest.approx(1 / 3, abs=0.01)
    with pytest.raises(ValueError, match="expected the splits"):
        t.with_splits(proportions={"train": 2, "test": 1}, benchmark_proportions={"mmlu": {"train": 1, "val": 1}})
