"""Collect a measured tournament: served models answer every question, GPU energy per call.

Start with ``docs/collecting.md``. The parts: ``config`` (what to run), ``backends`` (Ollama,
OpenAI-compatible servers, transformers in process), ``meters`` (NVML energy counter, NVML
power polling, replayed traces), ``runner`` (the crash-safe, resumable loop), ``convert``
(records -> Tournament), ``sweep`` (batch curves: N requests in flight per model). Nothing heavy is
imported here.
"""

from routing_gym.collect.config import CollectConfig, config_from_dict, load_config
from routing_gym.collect.errors import CollectError, ConfigError, MeterUnavailable, StorageError

__all__ = [
    "CollectConfig",
    "CollectError",
    "ConfigError",
    "MeterUnavailable",
    "StorageError",
    "config_from_dict",
    "load_config",
    "records_to_tournament",
    "run_collection",
    "run_status",
    "run_sweep",
]


def __getattr__(name: str):
    if name in ("run_collection", "run_status"):
        from routing_gym.collect import runner

        return getattr(runner, name)
    if name == "records_to_tournament":
        from routing_gym.collect.convert import records_to_tournament

        return records_to_tournament
    if name == "run_sweep":
        from routing_gym.collect.sweep import run_sweep

        return run_sweep
    raise AttributeError(name)
