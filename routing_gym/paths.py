"""Where routing-gym finds real data, shipped data and its cache."""

from __future__ import annotations

import os
from pathlib import Path

from routing_gym.errors import RoutingGymError

DATA_DIR_ENV = "ROUTING_GYM_DATA_DIR"
CACHE_DIR_ENV = "ROUTING_GYM_CACHE"


def data_dir(override: str | os.PathLike | None = None, required: bool = True) -> Path | None:
    """The directory of real public data (benchmarks, outcomes, energy figures).

    Resolution order: ``override`` (a ``--data-dir`` option), then the environment variable
    ``ROUTING_GYM_DATA_DIR``. Returns ``None`` when neither is set and ``required`` is False.
    """
    value = override if override is not None else os.environ.get(DATA_DIR_ENV)
    if not value:
        if required:
            raise RoutingGymError(
                f"no data directory: pass --data-dir DIR or set {DATA_DIR_ENV}: a folder of the public source files "
                "(benchmarks, model outcomes, ML.ENERGY measurements) that `routing-gym data build NAME --download "
                "--data-dir DIR` fills (docs/tournaments.md, 'Real data'; for pricing an import, docs/importing.md)"
            )
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise RoutingGymError(f"data directory {path} (from {'--data-dir' if override else DATA_DIR_ENV}) does not exist")
    return path


def shipped_data_dir() -> Path:
    """``envs_data/``: data cards and small tournaments that ship with routing-gym."""
    import routing_gym_envs_data

    return Path(routing_gym_envs_data.__file__).resolve().parent


def cache_dir() -> Path:
    """Writable cache (converted models, built features); ``ROUTING_GYM_CACHE`` overrides."""
    path = Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "routing_gym")
    path.mkdir(parents=True, exist_ok=True)
    return path
