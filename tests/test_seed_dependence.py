"""``Agent.seed_dependent``: an agent declared seed-free routes alike under every seed, and
``compare`` then fits and audits it once and gives every seed that run, with rows equal to
fitting it per seed.

A declaration is checked over the registry: every registered agent declared seed-free is
fitted with two seeds on a tournament with answer texts (so the output-informed ones fit too)
and must give the same held-out actions; a wrong declaration (an agent that reads the seed)
fails here. The seed-dependent ``random`` is the check's own control: its actions do differ.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_tournament
from test_baselines import with_outputs
from routing_gym.envs import Reward
from routing_gym.eval.compare import CompareConfig, run_compare
from routing_gym.eval.execution.fitting import held_out_actions
from routing_gym_agents.registry import AGENTS, list_agents

SEEDS = (0, 7)


@pytest.fixture(scope="module")
def tournament():
    return with_outputs(make_tournament(n=150, k=4, seed=3), noise=(0.7, 0.5, 0.1, 0.4))


def actions(t, name: str, seed: int) -> np.ndarray:
    kwargs = {"model_id": t.model_ids[1]} if name == "fixed" else {}  # the one registration without defaults
    return held_out_actions(t, name, kwargs, Reward("gated_rank"), "train", "test", seed)


SEED_FREE = [name for name in list_agents() if not AGENTS[name][0].seed_dependent]


def test_the_suite_declares_its_seed_free_agents() -> None:
    assert {"fixed-smallest", "per-benchmark", "oracle", "knn", "routellm"} <= set(SEED_FREE)
    assert not {"random", "linucb", "irt", "gbdt", "mf", "cost-aware", "uniroute"} & set(SEED_FREE)


@pytest.mark.parametrize("name", SEED_FREE)
def test_a_seed_free_agent_routes_alike_under_two_seeds(tournament, name: str) -> None:
    first, second = (actions(tournament, name, seed) for seed in SEEDS)
    assert np.array_equal(first, second), f"{name} declares seed_dependent = False but its actions change with the seed"


def test_the_check_sees_a_seed_dependent_agent(tournament) -> None:
    first, second = (actions(tournament, "random", seed) for seed in SEEDS)
    assert not np.array_equal(first, second)


def _rows(result, names):
    return {(r.method, r.seed): (r.metrics.to_dict(), r.per_query["actions"].tolist(), r.audit["status"])
            for r in result.runs if r.method in names}


def test_compare_fits_a_seed_free_agent_once_with_the_rows_of_one_fit_per_seed(tournament, tmp_path, monkeypatch) -> None:
    names = ["knn", "per-benchmark", "random"]
    config = dict(tournament=tournament, agents=names, seeds=3, n_bootstrap=50, progress=False)
    fits: list[tuple[str, int]] = []
    from routing_gym.eval.compare import cells

    fit_and_act = cells.fit_and_act

    def counted(name, *args, **kwargs):
        fits.append((name, args[3]))
        return fit_and_act(name, *args, **kwargs)

    monkeypatch.setattr(cells, "fit_and_act", counted)
    shared = run_compare(CompareConfig(**config), out_dir=tmp_path / "shared")
    assert sorted(fits) == [("knn", 0), ("per-benchmark", 0), ("random", 0), ("random", 1), ("random", 2)]
    assert len(list((tmp_path / "shared" / "cells").glob("knn-*.json"))) == 3  # every seed saved, so a rerun resumes
    for name in ("knn", "per-benchmark"):
        monkeypatch.setattr(AGENTS[name][0], "seed_dependent", True)
    fits.clear()
    per_seed = run_compare(CompareConfig(**config))
    assert len(fits) == 9
    assert _rows(shared, names) == _rows(per_seed, names)
    assert _untimed(shared.rows) == _untimed(per_seed.rows)


def _untimed(rows: list[dict]) -> list[dict]:
    """The table's rows without the machine-dependent seconds (fit, act, audit)."""
    return [{k: ({**v, "seconds": None} if k == "audit" else v) for k, v in row.items()
             if k not in ("fit_s", "act_ms_per_query")} for row in rows]


def test_a_resumed_run_shares_a_saved_seed(tournament, tmp_path, monkeypatch) -> None:
    config = CompareConfig(tournament=tournament, agents=["knn"], seeds=2, n_bootstrap=50, progress=False)
    run_compare(config, out_dir=tmp_path)
    (tmp_path / "cells" / "knn-1.json").unlink()
    from routing_gym.eval.compare import cells

    monkeypatch.setattr(cells, "fit_and_act", lambda *a, **k: pytest.fail("a saved seed-free cell was fitted again"))
    result = run_compare(config, out_dir=tmp_path)
    assert [r.seed for r in result.runs if r.method == "knn"] == [0, 1]
