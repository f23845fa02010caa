"""The env–agent contract: observations in, actions out; privileged information only when declared.

Covers issue 13's must-shows not tested beside their modules (the Box view of the budget env and
check_env of every id are in test_wrappers.py; the import layers in test_import_layers.py) and
the user-agent tools of issue 17 (hooks on every training env, --import, lazy plugins,
Agent.load dispatch).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_tournament
from gymnasium.utils.env_checker import check_env

import routing_gym
from routing_gym.envs import BudgetRoutingEnv, ObservationBatch, Reward
from routing_gym.envs.wrappers import BoxObservation
from routing_gym.errors import PrivilegedAccessError
from routing_gym.eval.compare import CompareConfig, run_compare
from routing_gym.sources import resolve_tournament
from routing_gym_agents import Agent, FitContext, make_agent, register_agent
from routing_gym_agents import registry
from test_baselines import with_outputs

REPO = Path(__file__).resolve().parents[1]


@register_agent("peeks-at-fit")
class PeeksAtFit(Agent):
    """Reads held-out outcomes through the context without declaring it."""

    def fit(self, ctx: FitContext) -> dict:
        self.best = int(ctx.tournament.correct.mean(axis=0).argmax())
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("peeks-at-act")
class PeeksAtAct(Agent):
    """Looks outcomes up through the batch without declaring it."""

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return batch.tournament.correct[batch.rows].argmax(axis=1)


def test_an_agent_that_reads_outcomes_without_declaring_gets_a_clear_error():
    t = make_tournament(n=90)
    with pytest.raises(PrivilegedAccessError, match="declare"):
        make_agent("peeks-at-fit").fit(FitContext(t, Reward()))
    with pytest.raises(PrivilegedAccessError, match="observations only"):
        make_agent("peeks-at-act").act_batch(ObservationBatch.from_tournament(t, t.split_rows("test")))
    result = run_compare(CompareConfig(tournament=t, agents=["peeks-at-fit", "peeks-at-act", "random"], seeds=1,
                                       n_bootstrap=50, progress=False))
    failed = {r.method: r.error for r in result.failures}
    assert set(failed) == {"peeks-at-fit", "peeks-at-act"}
    assert all("PrivilegedAccessError" in e for e in failed.values())
    assert result.row("random")["seeds_ok"] == 1


def test_privileged_agents_declare_and_compare_labels_them_not_deployable():
    t = with_outputs(make_tournament(n=120, k=4), noise=(0.7, 0.5, 0.1, 0.4))
    result = run_compare(CompareConfig(tournament=t, agents=["oracle", "smoothie", "knn"], seeds=1, n_bootstrap=50,
                                       progress=False))
    assert not result.failures
    labels = {m: result.row(m)["deployable"] for m in ("oracle", "smoothie", "knn")}
    assert labels == {"oracle": False, "smoothie": False, "knn": True}
    from routing_gym.eval.compare import markdown_report

    table = markdown_report(result)
    # † marks agents whose training ignores the reward (Agent.trains_on_reward = False)
    assert "| oracle | no |" in table and "| smoothie † | no |" in table and "| knn † | yes |" in table


def test_a_resolved_tournament_is_frozen():
    t = resolve_tournament("two-model")
    before = t.fingerprint
    for name in ("correct", "energy_j", "latency_s", "mean_power_w", "output_tokens"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(t, name)[0, 0] = 123.0
    with pytest.raises(ValueError, match="read-only"):
        t.benchmark_codes[0] = 1
    assert resolve_tournament("two-model") is t and t.fingerprint == before


@pytest.mark.parametrize("name, kwargs", [("knn", {}), ("linucb", {}), ("greenserv", {}),
                                          ("ppo", {"total_timesteps": 256, "features": {"dim": 8}})])
def test_a_saved_and_reloaded_agent_gives_identical_features_and_actions(tmp_path, name, kwargs):
    t = make_tournament(n=150)
    agent = make_agent(name, **kwargs)
    agent.fit(FitContext(t, Reward(), seed=0))
    batch = ObservationBatch.from_tournament(t, t.split_rows("test"))
    path = tmp_path / name
    agent.save(path)
    loaded = Agent.load(path)  # the base class dispatches to whatever class saved it
    assert type(loaded) is type(agent)
    features = {"knn": "batch_features", "linucb": "contexts", "greenserv": "contexts", "ppo": "features_of"}[name]
    np.testing.assert_array_equal(getattr(loaded, features)(batch), getattr(agent, features)(batch))
    np.testing.assert_array_equal(loaded.act_batch(batch), agent.act_batch(batch))
    # one observation through the alias equals the batch entry point
    assert loaded.act(batch.observation(3)) == int(agent.act_batch(batch)[3])


def test_check_env_accepts_the_box_view_of_a_made_env():
    env = BoxObservation(gym.make(routing_gym.REPLAY_ID, tournament="two-model"), dim=8)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)
    assert env.spec is not None and env.spec.id == routing_gym.REPLAY_ID  # RecordConstructorArgs keeps the spec chain


def test_any_variant_is_a_training_env_and_every_step_reaches_the_hooks():
    t = make_tournament(n=120)
    reward = Reward()
    steps: list[tuple[int, str]] = []
    budget_env = lambda **kw: BudgetRoutingEnv(tournament=t, horizon=10, invalid_action="penalize", **kw)  # noqa: E731
    ctx = FitContext(t, reward, env_fn=budget_env, step_hooks=[lambda s, a, r, info: steps.append((s, info["query_id"]))])
    logs = make_agent("linucb").fit(ctx)
    assert len(steps) == ctx.n_train == len(logs["actions"])
    assert [s for s, _ in steps] == list(range(ctx.n_train))
    assert len({q for _, q in steps}) == ctx.n_train  # one pass: every training query once


def test_make_vec_env_steps_are_all_real():
    t = make_tournament(n=90)
    reward = Reward()
    ctx = FitContext(t, reward)
    vec = ctx.make_vec_env(4)
    vec.reset(seed=0)
    for _ in range(50):
        actions = np.arange(4) % t.n_models
        _, rewards, terminated, _, infos = vec.step(actions)
        assert terminated.all()
        routed = np.asarray(infos["final_info"]["row"])  # same-step autoreset: infos show the next queries
        np.testing.assert_allclose(rewards, reward.matrix(t, routed)[np.arange(4), actions])


def test_a_broken_plugin_is_reported_by_name_only_when_asked_for(tmp_path, monkeypatch):
    (tmp_path / "rg_broken_plugin.py").write_text("raise ImportError('this plugin needs a package you lack')\n")
    info = tmp_path / "rg_broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rg-broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[routing_gym.agents]\nbroken = rg_broken_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "BROKEN_PLUGINS", {})
    assert "random" in registry.list_agents()  # the others still load
    make_agent("random")
    with pytest.raises(routing_gym.errors.RoutingGymError, match="broken: ImportError: this plugin needs"):
        make_agent("the-agent-the-plugin-would-add")


def test_cli_import_registers_a_users_agent(tmp_path):
    (tmp_path / "my_routers.py").write_text(textwrap.dedent('''
        import numpy as np
        from routing_gym_agents import Agent, register_agent

        @register_agent("always-second")
        class AlwaysSecond(Agent):
            def act_batch(self, batch):
                return np.ones(len(batch), dtype=np.int64)
    '''))
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "routing_gym", "compare", "--tournament", "two-model", "--agents", "always-second",
         "--seeds", "1", "--bootstrap", "50", "--out", str(out), "--import", "my_routers"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "| always-second | yes |" in (out / "table.md").read_text()
    bad = subprocess.run([sys.executable, "-m", "routing_gym", "--import", "no_such_module", "data", "info"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no_such_module" in bad.stderr and "Traceback" not in bad.stderr


def test_collapse_study_takes_any_registered_bandit_agent(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "experiments" / "collapse_study.py"), "--agent", "linucb", "--tournament", "two-model",
         "--gate-fractions", "0", "--seeds", "0", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("# Collapse study") and "linucb" in table
