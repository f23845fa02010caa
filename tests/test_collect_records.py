"""The append-only record log: durable appends, torn tails, corruption, locking."""

from __future__ import annotations

import pytest

from routing_gym.collect.errors import CollectError
from routing_gym.collect.records import RecordLog, read_records


def test_append_then_read_back(tmp_path):
    path = tmp_path / "run" / "records.jsonl"
    with RecordLog(path) as log:
        assert log.open().records == []
        log.append({"type": "call", "n": 1, "x": 0.5})
        log.append({"type": "call", "n": 2, "text": "ünïcode\nnewline"})
    contents = read_records(path)
    assert [r["n"] for r in contents.records] == [1, 2] and contents.torn_tail == b""
    assert contents.records[1]["text"] == "ünïcode\nnewline"
    assert path.read_bytes().count(b"\n") == 2  # one line per record, newlines escaped


def test_torn_last_line_is_reported_then_cut_off_and_kept(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3, "tex')
    contents = read_records(path)
    assert [r["n"] for r in contents.records] == [1, 2] and contents.torn_tail == b'{"n": 3, "tex'
    with RecordLog(path) as log:
        log.open()
        log.append({"n": 4})
    assert [r["n"] for r in read_records(path).records] == [1, 2, 4]
    assert (tmp_path / "records.jsonl.torn").read_bytes() == b'{"n": 3, "tex\n'


def test_an_unparsable_complete_last_line_counts_as_torn(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2, "te\x00\n')
    contents = read_records(path)
    assert [r["n"] for r in contents.records] == [1] and contents.torn_tail.startswith(b'{"n": 2')


def test_a_bad_line_in_the_middle_is_corruption_and_names_the_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"n": 1}\nnot json\n{"n": 3}\n')
    with pytest.raises(CollectError, match=r"records.jsonl: line 2 is not a valid record"):
        read_records(path)
    path.write_bytes(b'{"n": 1}\n[1, 2]\n{"n": 3}\n')
    with pytest.raises(CollectError, match="line 2 .*not a JSON object"):
        read_records(path)


def test_nan_is_refused_rather_than_written_as_invalid_json(tmp_path):
    with RecordLog(tmp_path / "records.jsonl") as log:
        log.open()
        with pytest.raises(ValueError):
            log.append({"energy_j": float("nan")})
    assert read_records(tmp_path / "records.jsonl").records == []


def test_one_writer_per_folder(tmp_path):
    first = RecordLog(tmp_path / "records.jsonl")
    first.open()
    try:
        with pytest.raises(CollectError, match="another collector is writing"):
            RecordLog(tmp_path / "records.jsonl").open()
    finally:
        first.close()
    second = RecordLog(tmp_path / "records.jsonl")
    second.open()  # released on close
    second.close()
