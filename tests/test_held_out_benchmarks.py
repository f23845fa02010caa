"""Unseen benchmarks (issue 50, item 1): held-out benchmark splits and leave-one-benchmark-out folds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.errors import EmptySplitError, UnknownNameError
from routing_gym.tournament import Tournament, leave_one_benchmark_out
from routing_gym.tournament.duplicates import normalise_question


def with_cross_benchmark_copies(n: int = 300) -> Tournament:
    """A toy tournament where rows 1-3 (of other benchmarks) are copies of one mmlu question (row 0),
    differing in case and whitespace."""
    t = make_tournament(n=n, with_splits=False)
    queries = t.queries.copy()
    queries.loc[0, "benchmark"] = "mmlu"
    queries.loc[[1, 2, 3], "benchmark"] = ["gsm8k", "math500", "gsm8k"]
    text = queries.loc[0, "prompt"]
    queries.loc[[1, 2, 3], "prompt"] = [text.upper(), "  " + text + "\n", text.replace(" ", "\t")]
    return replace(t, queries=queries)


def test_a_held_out_benchmark_has_no_training_row_and_the_rest_keep_their_split():
    t = with_cross_benchmark_copies()
    plain = t.with_splits(seed=3)
    held = t.with_splits(seed=3, hold_out_benchmarks=["mmlu"])
    split, benchmark = held.queries["split"].to_numpy(), held.queries["benchmark"].to_numpy()
    assert (split[benchmark == "mmlu"] == "test").all()
    assert "mmlu" not in set(benchmark[held.split_rows("train")])
    # copies of an mmlu question in other benchmarks go with it; every other query keeps its draw
    assert (split[[1, 2, 3]] == "test").all()
    others = (benchmark != "mmlu") & ~np.isin(np.arange(t.n_queries), [1, 2, 3])
    np.testing.assert_array_equal(split[others], plain.queries["split"].to_numpy()[others])
    groups = held.queries["prompt"].map(normalise_question)
    assert (held.queries.groupby(groups)["split"].nunique() == 1).all()
    assert held.card.split["held_out_benchmarks"] == ["mmlu"] and held.card.split["held_out_split"] == "test"
    assert held.card.split["held_out_copies"] == 3
    assert held.card.split["seed"] == 3  # the base split's record stays


def test_holding_out_twice_adds_benchmarks():
    t = make_tournament(n=120).with_held_out_benchmarks(["mmlu"]).with_held_out_benchmarks(["gsm8k"])
    assert t.card.split["held_out_benchmarks"] == ["gsm8k", "mmlu"]
    assert set(t.queries.loc[t.queries["split"] == "train", "benchmark"]) == {"math500"}


def test_held_out_benchmark_errors_are_clear():
    t = make_tournament(n=90)
    with pytest.raises(UnknownNameError, match="unknown benchmark 'bbh'"):
        t.with_held_out_benchmarks(["bbh"])
    with pytest.raises(UnknownNameError, match="unknown split 'dev'"):
        t.with_held_out_benchmarks(["mmlu"], split="dev")
    with pytest.raises(EmptySplitError, match="call with_splits"):
        make_tournament(n=90, with_splits=False).with_held_out_benchmarks(["mmlu"])
    with pytest.raises(EmptySplitError, match="leaves no question outside the held-out split"):
        t.with_held_out_benchmarks(t.benchmarks)


def test_leave_one_benchmark_out_yields_one_fold_per_benchmark():
    t = with_cross_benchmark_copies().with_splits(seed=1)
    folds = list(leave_one_benchmark_out(t))
    assert [b for b, _ in folds] == t.benchmarks == ["gsm8k", "math500", "mmlu"]
    for benchmark, fold in folds:
        train = fold.queries.iloc[fold.split_rows("train")]
        assert benchmark not in set(train["benchmark"]) and set(train["benchmark"]) == set(t.benchmarks) - {benchmark}
        untouched = ~fold.queries["prompt"].map(normalise_question).isin(
            fold.queries.loc[fold.queries["benchmark"] == benchmark, "prompt"].map(normalise_question)).to_numpy()
        np.testing.assert_array_equal(fold.queries["split"].to_numpy()[untouched], t.queries["split"].to_numpy()[untouched])
        assert fold.card.split["held_out_benchmarks"] == [benchmark]
    # a fold whose other benchmarks are all training
    all_train = t.with_splits(seed=1, proportions={"train": 1, "test": 0})
    _, fold = next(leave_one_benchmark_out(all_train, ["math500"]))
    expected = set(np.flatnonzero(fold.queries["benchmark"] == "math500")) | {0, 1, 3}  # row 2's copies go with it
    assert set(fold.split_rows("test")) == expected and fold.card.split["held_out_copies"] == 3
    with pytest.raises(UnknownNameError, match="unknown benchmark 'bbh'"):
        leave_one_benchmark_out(t, ["mmlu", "bbh"])  # checked before any fold is made
    with pytest.raises(EmptySplitError, match="at least two benchmarks"):
        leave_one_benchmark_out(t.subset(benchmarks=["mmlu"]))


def test_data_split_holds_out_benchmarks(tmp_path, capsys):
    from routing_gym.cli import main

    with_cross_benchmark_copies(n=150).save(tmp_path / "raw")
    assert main(["data", "split", str(tmp_path / "raw"), "--out", str(tmp_path / "held"),
                 "--hold-out-benchmarks", "mmlu, math500"]) == 0
    out = capsys.readouterr().out
    assert "held out in test: math500, mmlu (+" in out
    held = Tournament.load(tmp_path / "held")
    assert set(held.queries.loc[held.queries["split"] == "train", "benchmark"]) == {"gsm8k"}
    assert held.card.split["held_out_benchmarks"] == ["math500", "mmlu"]
    assert main(["data", "split", str(tmp_path / "raw"), "--out", str(tmp_path / "bad"), "--hold-out-benchmarks", "mmlu,bbh"]) == 2
    assert "unknown benchmark 'bbh'" in capsys.readouterr().err
    assert main(["data", "split", str(tmp_path / "raw"), "--out", str(tmp_path / "bad"), "--hold-out-benchmarks", ","]) == 2
    assert not (tmp_path / "bad").exists()
