"""Agents, task functions and a collector backend that worker processes can import.

Ray workers and spawned pool workers import work by module name, so what they run lives here
(``tests/`` is put on ``PYTHONPATH`` / ``sys.path`` by the tests) rather than in a test module.
Importing this module registers the agents.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from routing_gym.collect.backends import Backend, Generation
from routing_gym.collect.config import ModelSpec
from routing_gym_agents import Agent, FitContext, ObservationBatch, register_agent


def _claim(marker_dir: str, key: str) -> int:
    """Count attempts across processes: each call creates the next ``key.N`` file."""
    folder = Path(marker_dir)
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        try:
            os.close(os.open(folder / f"{key}.{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


def busy(seconds: float) -> int:
    """Burn CPU (not sleep) for ``seconds``, so parallel speed-ups are honest."""
    end, x = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        x += sum(i * i for i in range(2000)) % 7
    return x


class _CheapestOnTrain(Agent):
    """Routes every query to the model with the best mean training reward."""

    def fit(self, ctx: FitContext) -> dict:
        self.best = int(np.argmax(ctx.train_reward_matrix().mean(axis=0)))
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("test-die-once")
class DieOnceAgent(_CheapestOnTrain):
    """Kills its own worker process (``os._exit``) on the first attempt of each seed."""

    def __init__(self, marker_dir: str = ""):
        self.marker_dir = marker_dir

    def fit(self, ctx: FitContext) -> dict:
        if _claim(self.marker_dir, f"seed{ctx.seed}") == 1:
            os._exit(17)
        return super().fit(ctx)


@register_agent("test-always-die")
class AlwaysDieAgent(_CheapestOnTrain):
    def __init__(self, marker_dir: str = ""):
        self.marker_dir = marker_dir

    def fit(self, ctx: FitContext) -> dict:
        _claim(self.marker_dir, f"always{ctx.seed}")
        os._exit(9)


@register_agent("test-busy")
class BusyAgent(_CheapestOnTrain):
    """Trains for ``seconds`` of real CPU work, then routes like ``_CheapestOnTrain``."""

    def __init__(self, seconds: float = 1.0):
        self.seconds = seconds

    def fit(self, ctx: FitContext) -> dict:
        busy(self.seconds)
        return super().fit(ctx)


def die_once_task(payload: Any, marker_dir: str, key: str) -> tuple[Any, int, int]:
    """A generic executor task: dies on its first attempt, returns (payload, attempt, pid) after."""
    attempt = _claim(marker_dir, key)
    if attempt == 1:
        os._exit(3)
    return payload, attempt, os.getpid()


class ArithmeticBackend(Backend):
    """Answers 'What is a + b?' in process (no server); ``good*`` models are right, others off by one."""

    def check(self, model: ModelSpec) -> dict[str, Any]:
        return {"digest": "sha256:" + "c" * 64, "backend": "in-process"}

    def generate(self, model: ModelSpec, messages: list[dict[str, str]]) -> Generation:
        time.sleep(float(os.environ.get("RG_TEST_CALL_S", "0.05")))
        m = re.search(r"What is (\d+) \+ (\d+)\?", messages[-1]["content"])
        value = int(m.group(1)) + int(m.group(2)) + (0 if model.id.startswith("good") else 1)
        return Generation(text=f"The answer is {value}.", input_tokens=12, output_tokens=5, done_reason="stop",
                          server={"pid": os.getpid()})

    def warmup(self, model: ModelSpec, prompt: str, calls: int) -> None:
        pass


def arithmetic_backends(config: Any) -> dict[str, Backend]:
    """Backend factory for ``routing_gym.collect.shards``: every model answered in process."""
    backend = ArithmeticBackend(config.generation)
    return {m.id: backend for m in config.models}


def echo_task(payload: Any, value: Any) -> tuple[Any, Any, int]:
    """A generic executor task: (payload, value, pid of the process that ran it)."""
    return payload, value, os.getpid()
