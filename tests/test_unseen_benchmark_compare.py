"""Leave-one-benchmark-out comparisons (issue 50): folds in their own cells, the privileged label."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.eval.compare import CompareConfig, markdown_report, run_compare
from routing_gym.eval.compare import CompareJob
from routing_gym.eval.compare.cells import CellSettings, cell_fingerprint
from routing_gym.eval.generalisation.unseen_benchmarks import (CROSS_FIT_FOLDS, cross_fit_folds, fold_dir, label_chains, lobo_folds,
                                                run_leave_one_benchmark_out, unseen_markdown, write_unseen_outputs)
from routing_gym.envs import Reward


def test_two_folds_never_share_a_saved_cell(tmp_path):
    """Folds (or split seeds) of one tournament share ``Tournament.fingerprint``; a resumed run must
    not read one fold's cell for another (it did: the cell key ignored the split assignment)."""
    t = make_tournament(n=120)
    (_, fold_a), (_, fold_b) = lobo_folds(t, ["gsm8k", "mmlu"])
    assert fold_a.fingerprint == fold_b.fingerprint  # why the key needs the assignment
    settings = CellSettings(Reward("gated_rank", {"lambda_e": 0.4}), "train", "test", {})
    assert cell_fingerprint(fold_a, settings, "per-benchmark", 0) != cell_fingerprint(fold_b, settings, "per-benchmark", 0)
    assert (cell_fingerprint(t.with_splits(seed=1), settings, "knn", 0)
            != cell_fingerprint(t.with_splits(seed=2), settings, "knn", 0))
    config = dict(agents=["per-benchmark"], seeds=1, audit=False, fixed_models=False, n_bootstrap=50, progress=False)
    run_compare(CompareConfig(tournament=fold_a, **config), out_dir=tmp_path)
    second = run_compare(CompareConfig(tournament=fold_b, **config), out_dir=tmp_path)  # same folder: resumes
    assert second.runs[0].metrics.n == len(fold_b.split_rows("test")) != len(fold_a.split_rows("test"))
    # one run_jobs over both folds ships each fold's own copy (the payload key holds the assignment too)
    assert CompareJob(CompareConfig(tournament=fold_a, **config)).group != CompareJob(CompareConfig(tournament=fold_b, **config)).group


def test_lobo_fold_tests_only_the_held_out_benchmark():
    t = make_tournament(n=150)
    folds = dict(lobo_folds(t))
    assert list(folds) == t.benchmarks
    for benchmark, fold in folds.items():
        test = fold.queries.loc[fold.split_rows("test"), "benchmark"]
        assert set(test) == {benchmark}  # no copies across benchmarks in this toy
        assert set(fold.queries.loc[fold.split_rows("train"), "benchmark"]) == set(t.benchmarks) - {benchmark}


def test_the_label_chain_of_a_fold_never_reads_that_fold():
    rng = np.random.default_rng(0)
    n, k = 60, 3
    correct, joules = (rng.uniform(size=(n, k)) < 0.5).astype(float), rng.uniform(1, 2, size=(n, k))
    prompts = [f"question {i}" for i in range(n)] + [f"QUESTION  {i}" for i in range(10)]  # copies of 0..9
    correct, joules = np.concatenate([correct, correct[:10]]), np.concatenate([joules, joules[:10]])
    fold = cross_fit_folds(prompts, seed=4)
    assert set(fold.tolist()) == set(range(CROSS_FIT_FOLDS))
    assert (fold[n:] == fold[:10]).all()  # copies in one fold
    chains = label_chains(correct, joules, fold, ["a", "b", "c"])
    for f in range(CROSS_FIT_FOLDS):  # rewriting fold f's outcomes leaves fold f's chain as it was
        changed = correct.copy()
        changed[fold == f] = 1 - changed[fold == f]
        again = label_chains(changed, joules, fold, ["a", "b", "c"])
        assert again[f].names == chains[f].names
        np.testing.assert_array_equal(again[f].train_accuracy, chains[f].train_accuracy)
    # a model right everywhere and cheapest is every fold's whole chain
    correct[:, 1], joules[:, 1] = 1.0, 0.5
    assert all(c.names == ["b"] for c in label_chains(correct, joules, fold, ["a", "b", "c"]))


@pytest.fixture(scope="module")
def lobo(tmp_path_factory):
    out = tmp_path_factory.mktemp("lobo")
    t = make_tournament(n=240, seed=3)
    config = CompareConfig(tournament=t, agents=["per-benchmark", "knn", "oracle"], seeds=1, audit=False,
                           n_bootstrap=200, progress=False)
    return t, config, out, run_leave_one_benchmark_out(config, ["gsm8k", "mmlu"], out)


def test_lobo_tables_per_fold_and_pooled(lobo):
    t, config, out, result = lobo
    assert list(result.folds) == ["gsm8k", "mmlu"]
    benchmarks = {r["benchmark"] for r in result.rows}
    assert benchmarks == {"gsm8k", "mmlu", "pooled"}
    for benchmark, fold in result.folds.items():
        # the label router meets an unseen label: its pooled choice, one model for every question
        actions = [r for r in fold.runs if r.method == "per-benchmark"][0].per_query["actions"]
        assert len(set(actions.tolist())) == 1
        rows = {r["method"]: r for r in result.rows if r["benchmark"] == benchmark}
        assert set(rows) == {"per-benchmark", "knn", "oracle"}
        assert rows["oracle"]["verdict"] == "not in family"  # privileged rows are outside the family
        # --no-audit: every agent row is unverified, listed with its numbers and no verdict
        assert rows["knn"]["verdict"].startswith("no verdict: unverified")
        assert rows["oracle"]["routing_gain_pp"] > 0
        lo, hi = rows["knn"]["routing_gain_pp_ci_low"], rows["knn"]["routing_gain_pp_ci_high"]
        assert lo <= rows["knn"]["routing_gain_pp"] <= hi
    # pooled = question-weighted mean of the folds
    n = {b: len(f.test_rows) for b, f in result.folds.items()}
    for method in ("per-benchmark", "knn"):
        per = {r["benchmark"]: r["routing_gain_pp"] for r in result.rows if r["method"] == method}
        expected = sum(n[b] * per[b] for b in n) / sum(n.values())
        assert per["pooled"] == pytest.approx(expected)
    for row in result.rows:  # a share exactly where the label's value is clearly positive
        if row["share_of_label"] is None:
            assert row["share_note"] and (row["label_value_pp_ci_low"] <= 0 or row["label_value_pp"] < 1.0)
        else:
            assert row["label_value_pp_ci_low"] > 0
            assert row["share_of_label"] == pytest.approx(row["routing_gain_pp"] / row["label_value_pp"])
    # on a toy whose questions differ only by size, the label's chain is about the fixed-model chain
    per = {r["benchmark"]: r for r in result.rows if r["method"] == "per-benchmark"}
    assert all(abs(r["label_value_pp"]) < 15 for r in per.values())
    assert "## pooled" in unseen_markdown(result)
    for fold in result.folds.values():  # only unseen questions in test: the label carries nothing
        assert fold.pareto["task_hull"]["unseen_share"] == 1.0
        assert fold.pareto["task_hull"]["vertices"] == fold.pareto["hull"]["models"]
        for row in fold.rows:
            if row["seeds_ok"]:
                assert row["content_gain_pp"] == row["routing_gain_pp"]
                assert row["content_gain_pp_ci_low"] == row["routing_gain_pp_ci_low"]


def test_a_held_out_benchmark_split_never_calls_a_fixed_or_label_router_beyond_the_label():
    t = make_tournament(n=300, seed=4).with_splits(seed=0, hold_out_benchmarks=["mmlu"])
    config = CompareConfig(tournament=t, agents=["fixed-smallest", "per-benchmark", "knn"], seeds=1,
                           n_bootstrap=200, progress=False)
    result = run_compare(config)
    rows = {r["method"]: r for r in result.rows}
    test = t.split_rows("test")
    unseen = (t.queries["benchmark"].to_numpy()[test] == "mmlu").mean()
    assert 0 < unseen < 1 and result.pareto["task_hull"]["unseen_share"] == pytest.approx(unseen)
    assert result.pareto["task_hull"]["unseen_benchmarks"] == ["mmlu"]
    assert [rows[m]["reads_question"] for m in ("fixed-smallest", "per-benchmark", "knn")] == [False, False, True]
    for method in ("fixed-smallest", "per-benchmark"):  # out of the content family, in the routing one
        assert rows[method]["deployable_label"] == "yes"
        assert rows[method]["content_gain_pp_fw"] == "" and "content_gain_pp_fw_low" not in rows[method]
        assert "routing_gain_pp_fw_low" in rows[method]
    assert "content_gain_pp_fw_low" in rows["knn"]
    text = markdown_report(result)
    beyond = next(line for line in text.splitlines() if line.startswith("- routes beyond the task label"))
    assert "fixed-smallest" not in beyond and "per-benchmark" not in beyond
    assert "fixed-smallest (cannot read the question)" in text and "per-benchmark (cannot read the question)" in text
    assert "come from benchmarks with no train rows (mmlu)" in text


def test_unseen_md_opens_with_its_answer_and_prints_no_degenerate_cell(lobo):
    from routing_gym.eval.generalisation.unseen_benchmarks import ONE_SIDED_NOTE, _cells, _share_note, unseen_answer

    _, _, _, result = lobo
    text = unseen_markdown(result)
    first = text.split("\n\n")[1]
    pooled = [r for r in result.rows if r["benchmark"] == "pooled" and r["verdict"] != "not in family"]
    above = [r["method"] for r in pooled if r["verdict"].startswith("above")]
    assert first == unseen_answer(result.rows) and first.startswith("**Answer:** on benchmarks never seen in training")
    assert f"{len(above)} of {len(pooled)} routers route above the fixed-model chain" in first
    assert ONE_SIDED_NOTE in text and "adding or removing routers can change them" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| method")]
    assert not any("+0.00 [" in line or "+0.00]" in line or "| +0.00 |" in line for line in table_rows)
    assert not any(line.split(" | ")[3] == "" for line in table_rows)  # an undecided verdict is said in words
    # the cells of the issue: a one-sided zero and a label value that rounded to the threshold
    assert _cells(0.0, -2.84, 0.0) == ("0¹", "[-2.84, 0]") and _cells(0.26, -2.71, 0.98) == ("+0.26", "[-2.71, +0.98]")
    note = _share_note(0.2, 0.996, 0.95)
    assert "0.99 pp, is under the 1 pp a share needs" in note and "1.00" not in note


def test_lobo_resumes_and_writes_every_fold(lobo):
    t, config, out, result = lobo
    paths = write_unseen_outputs(result, out, plots=False)
    assert {p.name for p in paths.values()} == {"unseen.md", "unseen.csv", "unseen.json"}
    for benchmark in result.folds:
        assert (fold_dir(out, benchmark) / "cells").is_dir() and (fold_dir(out, benchmark) / "table.md").is_file()
    jobs = [CompareJob(CompareConfig(**{**config.__dict__, "tournament": fold}), fold_dir(out, b))
            for b, fold in lobo_folds(t, ["gsm8k", "mmlu"])]
    assert all(job.tasks() == [] for job in jobs)  # every cell is read back
    again = run_leave_one_benchmark_out(config, ["gsm8k", "mmlu"], out)
    assert again.rows == result.rows
    small = out / "small"
    write_unseen_outputs(result, small, fold_tables_only=True)
    assert sorted(p.name for p in fold_dir(small, "mmlu").iterdir()) == ["table.md"]


def test_lobo_same_table_on_the_process_executor(lobo, tmp_path):
    t, config, out, result = lobo
    config_p = CompareConfig(**{**config.__dict__, "executor": "process", "workers": 2})
    other = run_leave_one_benchmark_out(config_p, ["gsm8k", "mmlu"], tmp_path)
    assert other.rows == result.rows


def test_frontier_folds_are_written_and_a_rerun_skips_them(tmp_path):
    from routing_gym.eval.frontier import FrontierConfig
    from routing_gym.eval.generalisation.unseen_benchmarks import FOLD_KEY, run_frontier_leave_one_benchmark_out

    config = FrontierConfig(tournament=make_tournament(n=240, seed=3), agents=["per-benchmark"], audit=False,
                            n_bootstrap=50, progress=False)
    tables = run_frontier_leave_one_benchmark_out(config, ["gsm8k", "mmlu"], tmp_path, plots=False)
    assert list(tables) == ["gsm8k", "mmlu"] and all(p.is_file() for p in tables.values())
    stamps = {b: p.stat().st_mtime_ns for b, p in tables.items()}
    run_frontier_leave_one_benchmark_out(config, ["gsm8k", "mmlu"], tmp_path, plots=False)
    assert {b: p.stat().st_mtime_ns for b, p in tables.items()} == stamps  # resumed: nothing rerun
    (fold_dir(tmp_path, "mmlu") / FOLD_KEY).write_text("{}")  # other settings: that fold runs again
    run_frontier_leave_one_benchmark_out(config, ["gsm8k", "mmlu"], tmp_path, plots=False)
    assert tables["mmlu"].stat().st_mtime_ns != stamps["mmlu"] and tables["gsm8k"].stat().st_mtime_ns == stamps["gsm8k"]


def test_cli_leave_one_benchmark_out(tmp_path, capsys):
    from routing_gym.cli import main

    make_tournament(n=240, seed=3).save(tmp_path / "t")
    out = tmp_path / "out"
    argv = ["--tournament", str(tmp_path / "t"), "--agents", "per-benchmark", "--no-audit", "--no-plots", "--out", str(out)]
    assert main(["compare", *argv, "--seeds", "1", "--bootstrap", "100", "--leave-one-benchmark-out", "gsm8k,mmlu"]) == 0
    printed = capsys.readouterr().out
    assert "## pooled" in printed and "2 fold folders" in printed and (out / "held-out" / "mmlu" / "table.md").is_file()
    assert main(["frontier", *argv, "--bootstrap", "100", "--leave-one-benchmark-out", "gsm8k"]) == 0
    assert "## held out: gsm8k" in capsys.readouterr().out
    assert main(["compare", *argv, "--leave-one-benchmark-out", "nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


def test_one_family_over_every_fold_and_the_pooled_table():
    from routing_gym.eval.core import familywise
    from routing_gym.eval.generalisation.unseen_benchmarks import _family_decisions

    rng = np.random.default_rng(0)

    def table(effect: float, verified: bool) -> dict:
        boot = rng.normal(0.0, 0.01, (400, 3)) + np.array([effect, 0.0, 0.0])
        return {"names": ["a", "b", "c"], "point": np.array([effect, 0.001, -0.001]), "boot": boot, "confidence": 0.95,
                "deployable": {"a": True, "b": True, "c": verified}}

    tables = [("f1", table(0.05, True)), ("f2", table(0.0, False))]
    decisions = _family_decisions(tables)
    assert set(decisions["f1"]) == {"a", "b", "c"} and set(decisions["f2"]) == {"a", "b"}  # c of f2: unverified
    assert decisions["f1"]["a"] == familywise.ABOVE
    keys = [("f1", 0), ("f1", 1), ("f1", 2), ("f2", 0), ("f2", 1)]
    g = dict(tables)
    joint = familywise.stepdown(np.array([100 * g[t]["point"][i] for t, i in keys]),
                                np.stack([100 * g[t]["boot"][:, i] for t, i in keys], axis=1), 0.05)
    assert [decisions[t][g[t]["names"][i]] for t, i in keys] == list(joint.decisions)
