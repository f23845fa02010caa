"""The append-only record log of a collection run (``records.jsonl``).

One JSON object per line, written with a single ``write`` and ``fsync``-ed before the next
call starts, so a crash (even ``kill -9``) loses at most the line being written. Reading
tolerates a torn *last* line (the crash case) and reports it; a bad line anywhere else is
corruption and raises, naming the file and line. Before appending again the torn tail is cut
off (and kept in ``records.jsonl.torn``), so new lines never glue onto a fragment.

Line types (``type``): ``session`` (one per run/resume: host, meter, hardware), ``idle`` (an
idle-baseline measurement), ``call`` (one generation: ``status`` ``ok`` or ``failed``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routing_gym.collect.errors import CollectError, StorageError

SCHEMA_VERSION = 1


@dataclass
class LogContents:
    records: list[dict[str, Any]] = field(default_factory=list)
    torn_tail: bytes = b""  # an incomplete last line (crash while writing)
    valid_bytes: int = 0  # length of the well-formed prefix


def read_records(path: str | Path) -> LogContents:
    """Every complete record of a log; a missing file is an empty log."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogContents()
    except OSError as exc:
        raise StorageError(f"{path}: cannot read records ({exc.strerror or exc})") from exc
    contents = LogContents()
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        if is_last:
            # text after the final newline: empty for a clean file, a torn line after a crash
            contents.torn_tail = raw
            break
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if number == len(lines) - 1 and not lines[-1]:
                # the last line is complete but unparsable: a crash inside a multi-block write
                contents.torn_tail = raw + b"\n"
                break
            raise CollectError(
                f"{path}: line {number} is not a valid record ({exc}); the log is corrupt beyond a torn "
                "last line. Move the bad line out of the file by hand, then resume."
            ) from exc
        contents.records.append(record)
        offset += len(raw) + 1
    contents.valid_bytes = offset
    return contents


class RecordLog:
    """Appends records durably. Holds an exclusive lock on ``<dir>/.lock`` so that two
    collectors never write the same run."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._lock_fd: int | None = None

    def open(self) -> LogContents:
        """Lock the run, repair a torn tail, and return what is already recorded."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.parent / ".lock"
        self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise CollectError(
                f"another collector is writing to {self.path.parent} (lock {lock_path} is held); "
                "wait for it to finish or stop it first"
            ) from None
        contents = read_records(self.path)
        created = not self.path.exists()
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if contents.torn_tail:
                with open(self.path.with_name(self.path.name + ".torn"), "ab") as keep:
                    keep.write(contents.torn_tail + b"\n")
                os.ftruncate(self._fd, contents.valid_bytes)
                os.fsync(self._fd)
            if created:
                _fsync_dir(self.path.parent)
        except OSError as exc:
            self.close()
            raise StorageError(f"{self.path}: cannot open the record log for writing ({_describe(exc)})") from exc
        return contents

    def append(self, record: dict[str, Any]) -> None:
        """Write one record and fsync it. On failure the run must stop: raises
        :class:`StorageError` and prints the unsaved record to stderr so it is not lost."""
        if self._fd is None:
            raise RuntimeError("RecordLog.append before open()")
        line = (json.dumps(record, ensure_ascii=False, allow_nan=False, sort_keys=True, default=_scalar) + "\n").encode()
        try:
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except OSError as exc:
            print(f"routing-gym: unsaved record: {line.decode().strip()}", file=sys.stderr)
            raise StorageError(
                f"{self.path}: cannot write a record ({_describe(exc)}). Every earlier record is saved; "
                "the unsaved one is printed above. Free space (or fix the folder), then rerun the same "
                "command to resume."
            ) from exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def __enter__(self) -> RecordLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _scalar(value: Any) -> Any:
    """numpy scalars (from meters and graders) as plain Python values."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _describe(exc: OSError) -> str:
    code = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    hint = " - the disk is full" if exc.errno == errno.ENOSPC else ""
    hint = hint or (" - the file size limit is reached" if exc.errno == errno.EFBIG else "")
    return f"{code}: {text}{hint}" if code else text + hint


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write a JSON file via a temporary file and rename (never half-written)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a text file via a temporary file and rename (never half-written)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"{path}: cannot write ({_describe(exc)})") from exc
