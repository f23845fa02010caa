"""The agent registry: built-in names, unknown names, and agents from outside the package."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest
from conftest import make_tournament

from routing_gym.envs import Reward, RoutingEnv
from routing_gym.errors import UnknownNameError
from routing_gym_agents import FitContext, ObservationBatch, list_agents, make_agent, register_agent
from routing_gym_agents import registry
from routing_gym_agents.baselines import RandomRouter

BUILT_IN = {"fixed", "fixed-smallest", "fixed-medium", "fixed-largest", "random", "oracle", "knn", "uniroute",
            "routellm", "greenserv", "smoothie", "linucb", "epsilon-greedy", "thompson"}

EXTERNAL_MODULE = '''
import numpy as np
from routing_gym_agents import Agent, register_agent


@register_agent("ext-cheapest")
class CheapestOnTrain(Agent):
    """Routes everything to the model with the lowest mean training joules."""

    feedback = "full"

    def fit(self, ctx):
        self.choice = int(ctx.train_outcomes().energy_j.mean(axis=0).argmin())
        return {"choice": self.choice}

    def act_batch(self, batch):
        return np.full(len(batch), self.choice)
'''


def test_built_in_agents_are_registered() -> None:
    assert BUILT_IN <= set(list_agents())


def test_unknown_names_list_the_registered_ones() -> None:
    with pytest.raises(UnknownNameError) as err:
        make_agent("linucbb")
    message = str(err.value)
    assert "unknown agent 'linucbb'" in message
    for name in ("linucb", "fixed-largest", "smoothie"):
        assert name in message


def test_every_unknown_agent_of_a_list_is_named(capsys) -> None:
    from routing_gym.cli import main

    assert main(["compare", "--agents", "linucbb,my-agent,random", "--tournament", "paper-pool"]) == 2
    err = capsys.readouterr().err
    assert "unknown agents 'linucbb' (did you mean 'linucb'?), 'my-agent'; registered:" in err and "--import" in err


def test_variant_defaults_and_overrides() -> None:
    agent = make_agent("fixed-largest")
    assert agent.name == "fixed-largest" and agent.size == "largest"
    assert make_agent("linucb", alpha=0.25).alpha == 0.25


def test_a_name_cannot_be_taken_by_a_second_class(monkeypatch) -> None:
    monkeypatch.setattr(registry, "AGENTS", dict(registry.AGENTS))
    with pytest.raises(ValueError, match="already registered"):
        register_agent("random")(type("Impostor", (RandomRouter,), {}))


def test_entry_point_agent_from_outside_the_package(tmp_path, monkeypatch) -> None:
    """An installed distribution (a dist-info folder on sys.path) declares a routing_gym.agents
    entry point; make_agent finds its agent and it routes through a real RoutingEnv."""
    (tmp_path / "ext_router_pkg.py").write_text(textwrap.dedent(EXTERNAL_MODULE))
    dist = tmp_path / "ext_router_pkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ext-router-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[routing_gym.agents]\ncheapest = ext_router_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "AGENTS", dict(registry.AGENTS))  # forget the plugin afterwards
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.delitem(sys.modules, "ext_router_pkg", raising=False)
    importlib.invalidate_caches()

    assert "ext-cheapest" in list_agents()
    t = make_tournament()
    agent = make_agent("ext-cheapest")
    logs = agent.fit(FitContext(t, Reward()))
    expected = int(t.energy_j[t.split_rows("train")].mean(axis=0).argmin())
    assert logs == {"choice": expected}
    env = RoutingEnv(tournament=t, split="test")
    result = env.evaluate(agent.act_batch(ObservationBatch.from_tournament(t, env.rows)))
    assert result.metrics()["mean_energy_j"] == pytest.approx(t.energy_j[env.rows, expected].mean())
    assert np.all(result.valid)
