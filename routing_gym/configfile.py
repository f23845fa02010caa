"""Read a YAML, JSON or TOML config file into plain data, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

READERS = (".yaml", ".yml", ".json", ".toml")


def read_config_file(path: str | Path, error: type[Exception], what: str = "config",
                     formats: tuple[str, ...] = READERS) -> Any:
    """The parsed content of ``path``; every problem raises ``error`` naming the file and ``what``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    suffix = path.suffix.lower()
    if suffix not in formats:
        raise error(f"{path}: unknown {what} format {suffix!r} (use {', '.join(formats)})")
    try:
        if suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ModuleNotFoundError:
                raise error(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or use JSON/TOML") from None
            return yaml.safe_load(text)
        if suffix == ".json":
            return json.loads(text)
        import tomllib

        return tomllib.loads(text)
    except error:
        raise
    except Exception as exc:  # each parser has its own error type; all mean "not parseable"
        raise error(f"{path}: not valid {suffix[1:].upper()}: {exc}") from None
