"""Agents that read what a deployed router would not have, each through one door.

Worker processes import this module by name (``CompareConfig(imports=["cheating_agents"])``),
so the audit can be checked on every executor. Each cheater routes a held-out query to the
model that actually did best on it, which puts it far above the fixed-model hull: if the
suite did not catch it, it would be listed under "routes".
"""

from __future__ import annotations

import functools
import gc
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import two_skill_tournament

from routing_gym.envs import ObservationBatch
from routing_gym.eval.frontier import CostKnob
from routing_gym.paths import cache_dir, data_dir, shipped_data_dir
from routing_gym.sources import register_tournament, resolve_tournament
from routing_gym.tournament import Tournament
from routing_gym_agents import Agent, FitContext, register_agent

BY_NAME = "cheat-two-skill"  # the registered tournament the rebuild-by-name cheater asks for
register_tournament(BY_NAME)(functools.cache(lambda: two_skill_tournament(n=600)))  # honest routers route on it


class _PerQueryCheat(Agent):
    """Routes each held-out query (by its id) to its best model in ``self.best``."""

    feedback = "full"

    def routes_from(self, t: Tournament, reward=None) -> None:
        self.best = best_routes(t)

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.array([self.best.get(q, 0) for q in batch.query_ids], dtype=np.int64)


def best_routes(t: Tournament, split: str | None = "test") -> dict[str, int]:
    """Each held-out query's (``split=None``: every query's) best model: correct first, then cheap."""
    test = t.split_rows(split) if split else np.arange(t.n_queries)
    score = t.correct[test] - 1e-3 * t.energy_j[test] / t.energy_j[test].max()
    return dict(zip(t.queries["query_id"].to_numpy()[test], score.argmax(axis=1)))


def best_routes_from_files(folder: Path, model_ids: list[str]) -> dict[str, int]:
    """The same from a tournament folder's Parquet files, read with pandas (every query: the
    held-out ones are those the router is later asked about)."""
    outcomes = pd.read_parquet(folder / "outcomes.parquet")
    outcomes["score"] = outcomes["correct"] - 1e-3 * outcomes["energy_j"] / outcomes["energy_j"].max()
    best = outcomes.loc[outcomes.groupby("query_id")["score"].idxmax()]
    return {q: model_ids.index(m) for q, m in zip(best["query_id"], best["model_id"])}


@register_agent("cheat-test-env")
class CheatTestEnv(_PerQueryCheat):
    """Door 1: a held-out env through the documented context."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        env = ctx.make_env(split="test")
        self.routes_from(env.unwrapped.tournament)
        return {}


@register_agent("cheat-reward-matrix")
class CheatRewardMatrix(Agent):
    """Door 2: the training env's full ``[n_train, K]`` reward table, as a "bandit"."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        self.best = int(ctx.make_env().unwrapped.reward_matrix.mean(axis=0).argmax())
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("cheat-oracle-info")
class CheatOracleInfo(Agent):
    """Door 3: the counterfactual ``oracle_reward`` in the step info, as a "bandit"."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        env = ctx.make_env()
        env.reset(seed=ctx.seed)
        _, reward, _, _, info = env.step(0)
        self.best = int(info["oracle_reward"] > reward)
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("cheat-by-name")
class CheatByName(_PerQueryCheat):
    """Door 4: rebuilds the tournament by its name inside ``fit``."""

    def fit(self, ctx: FitContext) -> dict:
        self.routes_from(resolve_tournament(BY_NAME))
        return {}


@register_agent("cheat-private")
class CheatPrivate(_PerQueryCheat):
    """Door 5: a private attribute of the context."""

    def fit(self, ctx: FitContext) -> dict:
        self.routes_from(ctx._tournament)
        return {}


@register_agent("cheat-env-tournament")
class CheatEnvTournament(_PerQueryCheat):
    """Door 5 through the training env: its replay's tournament object holds held-out rows too."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        self.routes_from(ctx.make_env().unwrapped.tournament)
        return {}


@register_agent("cheat-best-on-test")
class CheatBestOnTest(Agent):
    """Door 5 again, coarsely: only the model with the best held-out mean (one number per model)."""

    def fit(self, ctx: FitContext) -> dict:
        t = ctx._tournament
        self.best = int(t.correct[t.split_rows("test")].mean(axis=0).argmax())
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("cheat-at-act")
class CheatAtAct(_PerQueryCheat):
    """Door 4 at routing time: looks each query up in the tournament rebuilt by name."""

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        self.routes_from(resolve_tournament(BY_NAME))
        return super().act_batch(batch)


# ------------------------------------------------------------------ roads past a same-process audit
# (issue 31): code written the way ordinary research code is, each fooling a second run that
# shares the first's process, memory or files.
@functools.lru_cache(maxsize=None)
def load_cached(name: str) -> Tournament:
    return resolve_tournament(name)


@register_agent("cheat-lru-cache")
class CheatLruCache(_PerQueryCheat):
    """A cached loader: the first call caches the tournament, later calls reuse it."""

    def fit(self, ctx: FitContext) -> dict:
        self.routes_from(load_cached(BY_NAME))
        return {}


_MEMO: dict[str, dict[str, int]] = {}  # module state, filled by the first fit of the process


@register_agent("cheat-module-state")
class CheatModuleState(_PerQueryCheat):
    """State kept across fits: the first fit's lookup, reused by every later one."""

    def fit(self, ctx: FitContext) -> dict:
        if "best" not in _MEMO:
            _MEMO["best"] = best_routes(ctx._tournament)
        self.best = _MEMO["best"]
        return {}


@register_agent("cheat-shipped-parquet")
class CheatShippedParquet(_PerQueryCheat):
    """The shipped default's files, read with pandas from the installed package."""

    def fit(self, ctx: FitContext) -> dict:
        self.best = best_routes_from_files(shipped_data_dir() / "paper-pool", ctx.model_ids)
        return {}


CACHED_BUILD = "cheat-built"  # a build under the cache's tournaments/ (the test saves it there)


@register_agent("cheat-cached-build")
class CheatCachedBuild(_PerQueryCheat):
    """A built tournament's files under the cache, read with pandas."""

    def fit(self, ctx: FitContext) -> dict:
        self.best = best_routes_from_files(cache_dir() / "tournaments" / CACHED_BUILD, ctx.model_ids)
        return {}


@register_agent("cheat-data-dir")
class CheatDataDir(_PerQueryCheat):
    """Files under the data directory (``ROUTING_GYM_DATA_DIR``), read with pandas."""

    def fit(self, ctx: FitContext) -> dict:
        self.best = best_routes_from_files(data_dir() / CACHED_BUILD, ctx.model_ids)
        return {}


@register_agent("cheat-gc")
class CheatGc(_PerQueryCheat):
    """A live object found through ``gc``: a tournament with the same queries that is not the
    one handed to ``fit`` (a same-process audit's original), else the one handed to it."""

    def fit(self, ctx: FitContext) -> dict:
        own = ctx._tournament
        ids = own.queries["query_id"].tolist()
        found = [o for o in gc.get_objects() if isinstance(o, Tournament) and o is not own
                 and o.queries["query_id"].tolist() == ids]
        self.routes_from(found[0] if found else own)
        return {}


@register_agent("cheat-frontier")
class CheatFrontier(_PerQueryCheat):
    """A cached loader on a curve: a share ``share`` of the queries (by a hash of the id) goes to
    its best model (held-out and validation queries alike, so validation picks its points), the
    rest to model 0."""

    cost_knob = CostKnob("share", applies="act", cheaper_when="lower", grid=(0.0, 0.5, 1.0))

    def __init__(self, share: float = 1.0):
        self.share = share

    def fit(self, ctx: FitContext) -> dict:
        self.best = best_routes(load_cached(BY_NAME), split=None)
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        u = np.array([zlib.crc32(q.encode()) / 2**32 for q in batch.query_ids])
        return np.where(u < self.share, super().act_batch(batch), 0)


ROADS = ("cheat-lru-cache", "cheat-module-state", "cheat-gc")  # on the registered BY_NAME tournament


@register_agent("bandit-reads-training-table")
class BanditReadsTrainingTable(Agent):
    """Declares bandit feedback but learns from the whole training table: legitimate data,
    labelled "full information"."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        self.best = int(ctx.train_reward_matrix().mean(axis=0).argmax())
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("costly-to-audit")
class CostlyToAudit(Agent):
    """Honest, but declares itself too costly to fit twice (as the text controller does)."""

    audit_skip_reason = "not audited: too costly in this test"

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.zeros(len(batch), dtype=np.int64)
