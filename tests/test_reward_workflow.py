"""A researcher's reward workflow: `routing-gym rewards`, `compare --allow-ungated`, the data
gate warned once per (reward, tournament) and recorded, and agents that ignore the reward marked."""

from __future__ import annotations

import json
import textwrap

import pytest

from routing_gym.cli import main
from routing_gym.envs import REWARDS
from routing_gym.envs.reward_variants import VARIANTS
from routing_gym.envs.rewards import reward_catalog
from routing_gym_agents.registry import AGENTS, list_agents

from conftest import make_tournament

USER_REWARD = textwrap.dedent('''
    from routing_gym import register_reward
    from routing_gym.envs import RewardBreakdown

    @register_reward("workflow_accuracy_minus_joules")
    def workflow_accuracy_minus_joules(outcomes, mu: float = 1e-3):
        """Correctness minus a price per joule."""
        return RewardBreakdown(outcomes.correct - mu * outcomes.energy_j)
''')


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("rewards") / "toy"
    make_tournament(n=80, k=3).save(path)
    return path


def test_rewards_lists_every_registered_reward_with_gate_and_meaning(tmp_path, capsys):
    module = tmp_path / "workflow_reward.py"
    module.write_text(USER_REWARD)
    assert main(["--import", str(module), "rewards", "--json"]) == 0
    listed = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    assert set(listed) == set(REWARDS) and len(listed) >= 10  # nine built in, plus the imported one
    assert listed["workflow_accuracy_minus_joules"] == {
        "name": "workflow_accuracy_minus_joules", "coefficients": {"mu": 0.001},
        "gate": "none: checked on the data (GateWarning)", "meaning": "Correctness minus a price per joule."}
    assert listed["gated_rank"]["gate"] == "analytical"
    assert listed["greenserv"]["gate"].endswith("the defaults break it (allow_ungated)")  # lambda_e = 0.5 sits on it
    built_in = {"gated_rank", *VARIANTS}
    assert all(entry["meaning"] for entry in reward_catalog() if entry["name"] in built_in)


def test_rewards_shows_the_coefficients_the_commands_use(capsys):
    assert main(["rewards"]) == 0
    out = capsys.readouterr().out
    gated = out[out.index("\ngated_rank\n"):].split("gate:")[0]
    assert "coefficients (default): lambda_t=0, lambda_e=0.4, lambda_p=0" in gated


def test_compare_warns_about_the_data_gate_once_and_records_it(toy_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["compare", "--tournament", str(toy_dir), "--reward", "lagrangian", "--coefficients", '{"mu": 0.05}',
                 "--agents", "linucb,knn,random", "--seeds", "2", "--bootstrap", "50", "--no-plots", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.count("has no analytical gate") == 1  # 6 cells, fixed-model rows, regret: one warning
    table = (out / "table.md").read_text()
    assert table.count("lagrangian(mu=0.05) has no analytical gate and breaks it on") == 1
    assert "| knn † |" in table and "| linucb |" in table and "†: not trained on the reward (knn, random;" in table


def test_allow_ungated_flag(toy_dir, tmp_path, capsys):
    argv = ["compare", "--tournament", str(toy_dir), "--coefficients", '{"lambda_e": 3.5}', "--agents", "random",
            "--seeds", "1", "--bootstrap", "50", "--no-plots"]
    assert main([*argv, "--out", str(tmp_path / "refused")]) == 2
    assert "(command line: --allow-ungated; sweep config: allow_ungated: true)" in capsys.readouterr().err
    assert main([*argv, "--allow-ungated", "--out", str(tmp_path / "ok")]) == 0
    settings = json.loads((tmp_path / "ok" / "results.json").read_text())["settings"]["reward"]
    assert settings["allow_ungated"] is True and settings["coefficients"] == {"lambda_e": 3.5}


def test_agents_that_ignore_the_reward_say_so_and_route_the_same_under_two_rewards(toy_dir):
    from routing_gym.eval.compare import CompareConfig, run_compare

    ignoring = {name for name in list_agents() if not AGENTS[name][0].trains_on_reward}
    assert {"knn", "random", "fixed-largest", "cost-aware"} <= ignoring
    assert not ignoring & {"linucb", "ppo", "oracle", "grpo"}
    rows = {}
    for lam in (0.1, 2.0):
        result = run_compare(CompareConfig(tournament=str(toy_dir), agents=["knn"], seeds=1, coefficients={"lambda_e": lam},
                                           n_bootstrap=50, fixed_models=False, progress=False))
        rows[lam] = result.row("knn")
    assert rows[0.1]["accuracy"] == rows[2.0]["accuracy"] and rows[0.1]["mean_energy_j"] == rows[2.0]["mean_energy_j"]
    assert rows[0.1]["mean_reward"] != rows[2.0]["mean_reward"]
