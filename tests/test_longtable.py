"""``routing-gym data import`` / ``data export``: the long table round trip and every refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_tournament

from routing_gym.cli import main
from routing_gym.errors import RoutingGymError
from routing_gym.sources.longtable import (
    ColumnMap,
    export_long_table,
    import_long_table,
    long_table_to_tournament,
    parse_model_spec,
    write_tournament_atomically,
)
from routing_gym.tournament import Tournament
from routing_gym.tournament.schema import METRIC_ARRAYS

TEN_LINES = """query_id,prompt,benchmark,model_id,correct,output_tokens,input_tokens
q1,What is 2+2?,arith,small,1,12,9
q1,What is 2+2?,arith,big,1,40,9
q2,Capital of France?,geo,small,0,8,7
q2,Capital of France?,geo,big,1,15,7
q3,Derivative of x^2?,calc,small,0,30,8
q3,Derivative of x^2?,calc,big,1,120,8
q4,Largest planet?,geo,small,1,6,6
q4,Largest planet?,geo,big,true,9,6
q5,7 times 8?,arith,small,0.5,10,7
"""


def _rows(text: str) -> str:
    return TEN_LINES + text


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_export_then_import_gives_the_same_arrays(tmp_path: Path, suffix: str) -> None:
    original = make_tournament(n=40, k=3)
    path = export_long_table(original, tmp_path / f"long{suffix}")
    out = tmp_path / "again"
    assert main(["data", "import", str(path), "--out", str(out), "--energy-provenance", "synthetic"]) == 0
    again = Tournament.load(out)
    assert again.query_ids == original.query_ids and again.model_ids == original.model_ids
    for name in METRIC_ARRAYS:
        np.testing.assert_array_equal(getattr(again, name), getattr(original, name), err_msg=name)
    assert again.queries["split"].tolist() == original.queries["split"].tolist()
    assert again.queries["prompt"].tolist() == original.queries["prompt"].tolist()
    assert set(again.models["energy_provenance"]) == {"synthetic"}


def test_cli_export_writes_every_pair(tmp_path: Path, capsys) -> None:
    original = make_tournament(n=12, k=2)
    original.save(tmp_path / "t")
    assert main(["data", "export", str(tmp_path / "t"), "--out", str(tmp_path / "long.csv")]) == 0
    long = pd.read_csv(tmp_path / "long.csv")
    assert len(long) == 24 and {"query_id", "model_id", "correct", "energy_j", "prompt", "benchmark"} <= set(long)


def test_ten_line_csv_derives_energy_from_tokens(tmp_path: Path, data_dir: Path) -> None:
    table = tmp_path / "logs.csv"
    table.write_text(_rows("q5,7 times 8?,arith,big,1,14,7\n"))
    out = tmp_path / "t"
    assert main(["data", "import", str(table), "--out", str(out), "--energy-model", "batched", "--data-dir",
                 str(data_dir), "--model-spec", "small=1.5", "--model-spec", "big=7.6"]) == 0
    t = Tournament.load(out)
    assert (t.n_queries, t.n_models) == (5, 2)
    assert set(t.models["energy_provenance"]) == {"derived"} and t.card.provenance == "derived"
    assert all("DERIVED" in s for s in t.models["energy_source"])
    big, small = t.model_index("big"), t.model_index("small")
    # same question: the bigger model that writes more tokens spends more joules
    assert (t.energy_j[:, big] > t.energy_j[:, small]).all()
    assert t.correct[t.query_ids.index("q5"), small] == 0.5 and t.correct[t.query_ids.index("q4"), big] == 1.0


def test_column_mapping_by_flag_and_config(tmp_path: Path) -> None:
    table = tmp_path / "logs.jsonl"
    rows = [{"doc": f"d{i}", "text": f"question {i}", "task": "t", "model": m, "score": float(i % 2), "joules": 1.0 + i,
             "secs": 0.5} for i in range(4) for m in ("a", "b")]
    pd.DataFrame(rows).to_json(table, orient="records", lines=True)
    config = tmp_path / "map.json"
    config.write_text('{"columns": {"query_id": "doc", "prompt": "text", "benchmark": "task", "model_id": "model", '
                      '"energy_j": "joules"}, "name": "mine"}')
    out = tmp_path / "t"
    assert main(["data", "import", str(table), "--out", str(out), "--config", str(config), "--column", "correct=score",
                 "--column", "latency_s=secs"]) == 0
    t = Tournament.load(out)
    assert t.card.name == "mine" and t.correct[:, 0].tolist() == [0.0, 1.0, 0.0, 1.0]
    np.testing.assert_allclose(t.mean_power_w, t.energy_j / 0.5)


def _refused(tmp_path: Path, capsys, text: str, *extra: str) -> str:
    table = tmp_path / "logs.csv"
    table.write_text(text)
    out = tmp_path / "out"
    assert main(["data", "import", str(table), "--out", str(out), *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err  # one clear line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs.csv"], "a refused import left something behind"
    return err


def test_missing_column_is_named(tmp_path: Path, capsys) -> None:
    text = TEN_LINES.replace(",correct,", ",score,")
    err = _refused(tmp_path, capsys, text)
    assert "logs.csv" in err and "missing required column 'correct'" in err and "--column" in err


def test_score_outside_unit_interval(tmp_path: Path, capsys) -> None:
    err = _refused(tmp_path, capsys, _rows("q5,7 times 8?,arith,big,1.5,14,7\n"))
    assert "logs.csv, row 10, column 'correct'" in err and "[0, 1]" in err


def test_duplicate_pair(tmp_path: Path, capsys) -> None:
    err = _refused(tmp_path, capsys, _rows("q5,7 times 8?,arith,big,1,14,7\nq1,What is 2+2?,arith,big,0,3,9\n"))
    assert "row 11" in err and "duplicate (question 'q1', model 'big'), first at row 2" in err


def test_model_missing_on_some_questions(tmp_path: Path, capsys) -> None:
    err = _refused(tmp_path, capsys, TEN_LINES)
    assert "model 'big' has no row for 1 of 5 questions" in err and "'q5'" in err


def test_unknown_model_for_energy(tmp_path: Path, capsys, data_dir: Path) -> None:
    err = _refused(tmp_path, capsys, _rows("q5,7 times 8?,arith,big,1,14,7\n"), "--energy-model", "batched",
                   "--data-dir", str(data_dir), "--model-spec", "small=1.5")
    assert "['big']" in err and "--model-spec big=PARAMS_B" in err


def test_energy_missing_without_energy_model(tmp_path: Path, capsys) -> None:
    err = _refused(tmp_path, capsys, _rows("q5,7 times 8?,arith,big,1,14,7\n"))
    assert "energy_j" in err and "--energy-model" in err


def test_tokens_missing_too(tmp_path: Path, capsys, data_dir: Path) -> None:
    text = _rows("q5,7 times 8?,arith,big,1,,7\n")
    err = _refused(tmp_path, capsys, text, "--energy-model", "batched", "--data-dir", str(data_dir),
                   "--model-spec", "small=1.5", "--model-spec", "big=7.6")
    assert "row 10" in err and "output_tokens is missing" in err and "--column output_tokens=NAME" in err


def test_a_row_with_an_extra_field_is_named_by_its_field_count(tmp_path: Path, capsys) -> None:
    header = "query_id,prompt,benchmark,model_id,correct,energy_j,latency_s\n"
    body = ["q1,a,t,m,1,2.5,1", "q1,a,t,n,0,3.5,1", "q2,b,t,m,1,2.5,1", "q2,b,t,n,0,3.5,1"]
    for row in (1, 3):  # on the first row pandas would have read the first column as an index
        lines = [line + (",oops" if i == row - 1 else "") for i, line in enumerate(body)]
        err = _refused(tmp_path, capsys, header + "\n".join(lines) + "\n")
        assert f"logs.csv, row {row}: 8 fields, but the header has 7" in err
    quoted = header + '"q1","a, with a comma",t,m,1,2.5,1\n"q1","a, with a comma",t,n,0,3.5,1\n'
    (tmp_path / "quoted.csv").write_text(quoted)
    assert import_long_table(tmp_path / "quoted.csv").queries["prompt"].tolist() == ["a, with a comma"]


def test_logged_energy_without_latency_is_accepted(tmp_path: Path, capsys) -> None:
    table = tmp_path / "logs.csv"
    table.write_text("query_id,prompt,benchmark,model_id,correct,energy_j\nq1,a,t,m,1,2.5\nq1,a,t,n,0,3.5\n")
    assert main(["data", "import", str(table), "--out", str(tmp_path / "t")]) == 0
    assert "latency not logged for m, n" in capsys.readouterr().out
    t = Tournament.load(tmp_path / "t")
    assert t.energy_j.tolist() == [[2.5, 3.5]] and t.latency_s.tolist() == [[0.0, 0.0]]
    assert t.mean_power_w.tolist() == [[0.0, 0.0]] and any("latency not logged" in n for n in t.card.notes)


def test_question_fields_must_agree(tmp_path: Path) -> None:
    frame = pd.read_csv(pd.io.common.StringIO(_rows("q5,7 times 8?,arith,big,1,14,7\n")))
    frame.loc[1, "benchmark"] = "other"
    frame["energy_j"], frame["latency_s"] = 1.0, 1.0
    with pytest.raises(RoutingGymError, match=r"row 1, column 'benchmark': question 'q1' has different benchmark"):
        long_table_to_tournament(frame, "mine.csv")


def test_bad_flags() -> None:
    with pytest.raises(RoutingGymError, match="CANONICAL=THEIRS"):
        ColumnMap.parse(["correct"])
    with pytest.raises(RoutingGymError, match="unknown column"):
        ColumnMap.parse(["score=correct"])
    with pytest.raises(RoutingGymError, match="PARAMS_B"):
        parse_model_spec("big=seven")
    assert parse_model_spec("moe=46.7,12.9")[1].active_b == 12.9


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path, monkeypatch) -> None:
    t = make_tournament(n=10, k=2)

    def broken_save(self, path, format="parquet"):
        Path(path, "queries.parquet").write_text("half")
        raise OSError("disk full")

    monkeypatch.setattr(Tournament, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        write_tournament_atomically(t, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_refuses_then_replaces(tmp_path: Path) -> None:
    first, second = make_tournament(n=10, k=2, seed=1), make_tournament(n=12, k=2, seed=2)
    write_tournament_atomically(first, tmp_path / "out")
    with pytest.raises(RoutingGymError, match="already exists"):
        write_tournament_atomically(second, tmp_path / "out")
    write_tournament_atomically(second, tmp_path / "out", overwrite=True)
    assert Tournament.load(tmp_path / "out").n_queries == 12 and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_import_reads_parquet_with_bool_correctness(tmp_path: Path) -> None:
    frame = pd.DataFrame({"query_id": ["a", "a", "b", "b"], "prompt": ["x", "x", "y", "y"], "benchmark": "t",
                          "model_id": ["m", "n", "m", "n"], "correct": [True, False, False, True],
                          "energy_j": 2.0, "latency_s": 1.0})
    frame.to_parquet(tmp_path / "t.parquet")
    t = import_long_table(tmp_path / "t.parquet")
    assert t.correct.tolist() == [[1.0, 0.0], [0.0, 1.0]] and set(t.models["energy_provenance"]) == {"measured"}


def test_csv_ids_stay_text(tmp_path: Path) -> None:
    table = tmp_path / "ids.csv"
    table.write_text("query_id,prompt,benchmark,model_id,correct,energy_j,latency_s\n"
                     "007,a,t,01,1,2.5,1\n007,a,t,1,0,2.5,1\n")
    t = import_long_table(table)
    assert t.query_ids == ["007"] and t.model_ids == ["01", "1"]
