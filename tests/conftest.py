"""Shared fixtures: small hand-built tournaments and the real-data directory."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from routing_gym.tournament import DataCard, Tournament  # noqa: E402

BENCHMARKS = ("gsm8k", "mmlu", "math500")
WORDS = "route the question to a model that answers it with few joules please".split()


def make_tournament(n: int = 60, k: int = 4, seed: int = 0, with_splits: bool = True) -> Tournament:
    """A small random tournament: bigger models are more accurate and cost more joules."""
    rng = np.random.default_rng(seed)
    params = np.linspace(0.5, 8.0, k)
    benchmark = np.array(BENCHMARKS)[rng.integers(0, len(BENCHMARKS), n)]
    difficulty = rng.uniform(0, 1, n)
    p_correct = 1 / (1 + np.exp(-(np.log(params)[None, :] * 1.5 - 4 * difficulty[:, None] + 1)))
    correct = (rng.uniform(size=(n, k)) < p_correct).astype(float)
    tokens = rng.integers(20, 400, (n, k)).astype(float)
    energy = tokens * params[None, :] * 0.3 + rng.uniform(1, 5, (n, k))
    latency = tokens * 0.01 * np.sqrt(params)[None, :] + 0.05
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "benchmark": benchmark,
            "prompt": [" ".join(rng.choice(WORDS, 6)) + f" #{i}?" for i in range(n)],
            "reference": [str(i % 10) for i in range(n)],
            "difficulty": difficulty,
        }
    )
    models = pd.DataFrame(
        {
            "model_id": [f"m{j}" for j in range(k)],
            "family": "toy",
            "params_b": params,
            "reasoning": [False] * k,
            "energy_provenance": "synthetic",
            "energy_source": "tests/conftest.py",
        }
    )
    t = Tournament(
        queries=queries,
        models=models,
        correct=correct,
        energy_j=energy,
        latency_s=latency,
        mean_power_w=energy / latency,
        input_tokens=np.full((n, k), 30.0),
        output_tokens=tokens,
        card=DataCard(name=f"toy-{n}x{k}", provenance="synthetic", description="test fixture"),
    )
    return t.with_splits(seed=seed, proportions={"train": 2, "test": 1}) if with_splits else t


def two_skill_tournament(n: int = 900, seed: int = 0, n_benchmarks: int = 2, grouped: bool = False) -> Tournament:
    """Model 0 (cheap) solves arithmetic, model 1 (costly) solves trivia, model 2 (costliest)
    half of everything: routing by benchmark beats model 2 on both axes. Benchmarks alternate
    between the two skills (``n_benchmarks`` even); rows alternate between benchmarks, or come
    grouped by benchmark as real tournaments do, with texts that do not tell the skill."""
    rng = np.random.default_rng(seed)
    code = np.repeat(np.arange(n_benchmarks), -(-n // n_benchmarks))[:n] if grouped else np.arange(n) % n_benchmarks
    benchmark = np.array([f"{'arith' if c % 2 == 0 else 'trivia'}-{c}" for c in code])
    arith = code % 2 == 0
    p = np.stack([np.where(arith, 0.95, 0.1), np.where(arith, 0.1, 0.95), np.full(n, 0.5)], axis=1)
    correct = (rng.uniform(size=(n, 3)) < p).astype(float)
    energy = np.array([10.0, 40.0, 80.0])[None, :] * rng.uniform(0.8, 1.2, (n, 3))
    prompts = [f"question number {i}" if grouped else f"what is {i} plus {i % 7}?" if a else f"who wrote book number {i}?"
               for i, a in enumerate(arith)]
    queries = pd.DataFrame({
        "query_id": [f"q{i}" for i in range(n)], "benchmark": benchmark,
        "prompt": prompts,
        "reference": ["x"] * n,
    })
    models = pd.DataFrame({"model_id": ["cheap-arith", "mid-trivia", "big-generalist"], "family": "toy",
                           "params_b": [1.0, 8.0, 70.0], "reasoning": [False] * 3, "energy_provenance": "synthetic",
                           "energy_source": "tests/conftest.py"})
    t = Tournament(queries=queries, models=models, correct=correct, energy_j=energy, latency_s=energy / 100,
                   mean_power_w=np.full((n, 3), 100.0), input_tokens=np.full((n, 3), 20.0),
                   output_tokens=np.full((n, 3), 50.0),
                   card=DataCard(name="two-skill", provenance="synthetic", description="test fixture"))
    return t.with_splits(seed=seed, proportions={"train": 2, "test": 1})


def text_skill_tournament(n: int = 1200, seed: int = 0) -> Tournament:
    """``two_skill_tournament`` with the skill moved from the benchmark label into the text:
    two benchmarks, each half arithmetic and half trivia, and every question naming its skill.
    A router that reads the text beats any benchmark-label-only router (content gain)."""
    t = two_skill_tournament(n=n, seed=seed, n_benchmarks=2)
    skill = t.benchmark_codes % 2
    queries = t.queries.copy()
    queries["benchmark"] = np.where(np.arange(n) % 4 < 2, "set-a", "set-b")
    queries["prompt"] = [f"{'arith' if s == 0 else 'trivia'} question number {i}" for i, s in enumerate(skill)]
    return replace(t, queries=queries)


@pytest.fixture
def toy() -> Tournament:
    return make_tournament()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real public data; skips only where no data directory exists (CI always has one)."""
    value = os.environ.get("ROUTING_GYM_DATA_DIR")
    if not value:
        candidate = Path(__file__).resolve().parents[2] / "shared" / "data"
        value = str(candidate) if candidate.is_dir() else ""
    if not value or not Path(value).is_dir():
        pytest.skip("no data directory (set ROUTING_GYM_DATA_DIR)")
    # Absolute: tests link into it from temporary directories (the README passes ../shared/data).
    return Path(value).resolve()


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray (2 CPUs, no dashboard, no usage stats) for the whole test session.

    ``tests/`` goes on the workers' PYTHONPATH so they can import ``cluster_helpers``."""
    from routing_gym.ray_cluster import ray_module

    tests_dir = str(Path(__file__).resolve().parent)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, saved) if p)  # Ray workers inherit it
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
