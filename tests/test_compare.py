"""``routing-gym compare`` end to end on a small tournament, with agents from outside the package.

One agent is registered by this test module with ``register_agent``, one arrives through an
entry point (a temporary ``*.dist-info`` on ``sys.path``); a failing agent must be reported
while the others finish, and an agent returning invalid actions is charged and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
import textwrap

import numpy as np
import pandas as pd
import pytest

from routing_gym.eval.core.yardstick import MORE_ACCURATE_THAN_CHAIN, NULL_POLICY, Yardstick

from routing_gym.cli import main
from routing_gym.eval.compare import FIXED_PREFIX, CompareConfig, markdown_report, run_compare, write_outputs
from routing_gym_agents import Agent, FitContext, ObservationBatch, register_agent
from routing_gym_agents import registry

from conftest import make_tournament

SEEDS = 2
EP_MODULE = "rg_test_external_router"


@register_agent("ext-const", model=0)
class ConstantAgent(Agent):
    """Always model ``model``; exposes the documented overhead hook."""

    def __init__(self, model: int = 0):
        self.model = model

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        self.overhead = {"decode_s": np.full(len(batch), 0.25), "tokens": 12.0}
        return np.full(len(batch), self.model)


@register_agent("ext-greedy")
class GreedyBandit(Agent):
    """Epsilon-greedy over arms without context, online through the env (bandit feedback).

    It calls no hook itself: the env ``make_env`` returns reports every step (regret curves)."""

    feedback = "bandit"

    def fit(self, ctx: FitContext) -> dict:
        env, k = ctx.make_env(), ctx.n_models
        rng = np.random.default_rng(ctx.seed)
        total, count = np.zeros(k), np.full(k, 1e-9)
        env.reset(seed=ctx.seed)
        for _ in range(ctx.n_train):
            env.reset()
            a = int(rng.integers(k)) if rng.random() < 0.3 else int(np.argmax(total / count))
            _, r, _, _, info = env.step(a)
            total[a] += r
            count[a] += 1
        self.best = int(np.argmax(total / count))
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.full(len(batch), self.best)


@register_agent("ext-invalid")
class SometimesInvalid(Agent):
    """Model 1, except -1 on every 4th query and 1.5 (not an index) on every 7th."""

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        actions = np.ones(len(batch))
        actions[::4] = -1
        actions[1::7] = 1.5
        return actions


@register_agent("ext-failing")
class Failing(Agent):
    def fit(self, ctx: FitContext) -> dict:
        if ctx.seed == 1:
            raise RuntimeError("diverged on seed 1")
        return {}

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        return np.zeros(len(batch), dtype=int)


@pytest.fixture(scope="module")
def tournament():
    return make_tournament(n=240, k=4, seed=1)


@pytest.fixture(scope="module")
def entry_point_agent(tmp_path_factory):
    """Install a plugin the way pip would: a module plus a dist-info with entry_points.txt."""
    root = tmp_path_factory.mktemp("site")
    (root / f"{EP_MODULE}.py").write_text(textwrap.dedent('''
        import numpy as np
        from routing_gym_agents import Agent, register_agent

        @register_agent("ext-plugin")
        class Cheapest(Agent):
            """Routes every query to the model with the lowest mean training joules."""

            def fit(self, ctx):
                self.best = int(ctx.train_outcomes().energy_j.mean(axis=0).argmin())
                return {}

            def act_batch(self, batch):
                return np.full(len(batch), self.best)
    '''))
    info = root / "rg_test_external_router-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rg-test-external-router\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[routing_gym.agents]\nplugin = {EP_MODULE}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        mp.setattr(registry, "_plugins_loaded", False)  # rescan entry points with the new path
        assert "ext-plugin" in registry.list_agents()
        yield "ext-plugin"


@pytest.fixture(scope="module")
def outputs(tournament, entry_point_agent, tmp_path_factory):
    config = CompareConfig(
        tournament=tournament,
        agents=["ext-const", entry_point_agent, "ext-greedy", "ext-invalid", "ext-failing"],
        seeds=SEEDS, n_bootstrap=500, progress=False,
    )
    result = run_compare(config)
    out = tmp_path_factory.mktemp("compare")
    return result, write_outputs(result, out), out


def test_all_outputs_exist_and_agree(outputs, tournament):
    result, paths, out = outputs
    expected = {"results.json", "summary.csv", "per_seed.csv", "per_benchmark.csv", "dominance.csv", "table.md",
                "pareto.png", "selection.png", "regret.png"}
    assert {p.name for p in paths.values()} == expected
    for name in ("pareto.png", "selection.png", "regret.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    def no_nan(constant):  # results.json is strict JSON: NaN is written as null
        raise AssertionError(f"{constant} in results.json")

    payload = json.loads((out / "results.json").read_text(), parse_constant=no_nan)
    summary = pd.read_csv(out / "summary.csv")
    methods = [FIXED_PREFIX + m for m in tournament.model_ids] + ["ext-const", "ext-plugin", "ext-greedy", "ext-invalid", "ext-failing"]
    assert [r["method"] for r in payload["rows"]] == methods == summary["method"].tolist()
    for row, (_, csv_row) in zip(payload["rows"], summary.iterrows()):
        for key in ("accuracy", "mean_energy_j", "mean_reward"):
            if key in row:
                assert csv_row[key] == pytest.approx(row[key])
    assert payload["settings"]["reward"]["describe"] == "gated_rank(lambda_e=0.4)"
    assert payload["settings"]["seeds"] == [0, 1]
    per_seed = pd.read_csv(out / "per_seed.csv")
    assert len(per_seed) == tournament.n_models + 5 * SEEDS
    table = (out / "table.md").read_text()
    assert "Reward gated_rank(lambda_e=0.4) [95% CI]" in table
    for method in methods:
        assert f"| {method}" in table
    # per-benchmark joule shares of every method add up to 1
    shares = pd.read_csv(out / "per_benchmark.csv").groupby("method")["energy_share"].sum()
    assert np.allclose(shares.to_numpy(), 1.0)


def test_notes_are_a_short_list_that_states_the_family_and_links_the_rules(outputs, tournament):
    result, _, out = outputs
    table = (out / "table.md").read_text()
    notes = table.split("Notes (the rules in full: [docs/evaluation.md](docs/evaluation.md)):\n\n", 1)[1].split("\n\n")[0]
    bullets = notes.splitlines()
    assert all(b.startswith("- ") for b in bullets) and 5 <= len(bullets) <= 11
    assert max(len(b.split()) for b in bullets) < 80 and len(notes.split()) < 400  # was one ~600-word paragraph
    family = sum(1 for r in result.rows if "content_gain_pp_fw_low" in r)  # the rows the step-down decided
    assert family >= 1
    assert any((f"- Verdict lines (and ▲ / ▼) are family-wise over the {family} deployable verified rows of this table "
                "(balanced Romano-Wolf step-down, both gains): adding or removing agents can change them") in b for b in bullets)
    assert "per-benchmark (the label router)" not in table  # said only where the table lists it
    small = run_compare(CompareConfig(tournament=tournament, agents=["per-benchmark"], seeds=1, n_bootstrap=50,
                                      audit=False, progress=False))
    small_table = markdown_report(small)
    assert "family-wise over the 0 deployable verified rows" in small_table  # --no-audit: nothing verified
    assert ("- per-benchmark (the label router) sends each benchmark to the model with the best mean training reward "
            "(gated_rank(lambda_e=0.4)), not the best accuracy − λ·J that the task-aware yardstick's routes maximise") in small_table


def test_fixed_rows_equal_direct_computation(outputs, tournament):
    result, _, _ = outputs
    rows = tournament.split_rows("test")
    for k, model in enumerate(tournament.model_ids):
        row = result.row(FIXED_PREFIX + model)
        assert row["accuracy"] == pytest.approx(tournament.correct[rows, k].mean())
        assert row["mean_energy_j"] == pytest.approx(tournament.energy_j[rows, k].mean())
        assert row["mean_latency_s"] == pytest.approx(tournament.latency_s[rows, k].mean())
        assert row["mean_power_w"] == pytest.approx(tournament.mean_power_w[rows, k].mean())
        assert row["mean_reward"] == pytest.approx(result.reward.matrix(tournament, rows)[:, k].mean())
        assert row["top1_share"] == 1.0 and row["selection_entropy"] == 0.0
        assert row["accuracy_ci_low"] < row["accuracy"] < row["accuracy_ci_high"]
    const = result.row("ext-const")
    assert const["accuracy"] == pytest.approx(result.row(FIXED_PREFIX + "m0")["accuracy"])
    assert const["accuracy_seed_sd"] == 0.0


def test_external_agents_ran(outputs, tournament):
    result, _, _ = outputs
    plugin = result.row("ext-plugin")
    cheapest = tournament.model_ids[int(tournament.energy_j[tournament.split_rows("train")].mean(axis=0).argmin())]
    assert plugin["seeds_ok"] == SEEDS and plugin["top1_model"] == cheapest
    const = result.row("ext-const")
    assert const["overhead_decode_s"] == pytest.approx(0.25) and const["overhead_tokens"] == pytest.approx(12.0)
    table = markdown_report(result)
    assert "| overhead decode_s | overhead tokens |" in table and "| 0.25 | 12 |" in table


def test_bandit_regret_is_logged(outputs, tournament):
    result, _, _ = outputs
    assert set(result.regret) == {"ext-greedy"}
    curve = result.regret["ext-greedy"]
    n_train = len(tournament.split_rows("train"))
    assert curve["n_seeds"] == SEEDS and len(curve["steps"]) == n_train
    assert np.all(np.diff(curve["mean"]) >= -1e-12)  # regret against the oracle is never negative
    runs = [r for r in result.runs if r.method == "ext-greedy"]
    assert all(r.regret is not None and len(r.regret) == n_train for r in runs)
    assert curve["mean"][-1] == pytest.approx(np.mean([r.regret.sum() for r in runs]))
    # collapse tracking came with the env's step hooks too: the test agent has no code for it
    assert all(r.collapse is not None and r.collapse["n_steps"] == n_train for r in runs)
    assert all(r.collapse is None for r in result.runs if r.method == "ext-const")  # no online decisions


def test_invalid_actions_are_charged_and_counted(outputs, tournament):
    result, _, _ = outputs
    n = len(result.test_rows)
    invalid = np.zeros(n, bool)
    invalid[::4] = True
    invalid[1::7] = True
    row = result.row("ext-invalid")
    assert row["invalid_count"] == invalid.sum()
    rewards = result.reward.matrix(tournament, result.test_rows)[:, 1]
    expected = np.where(invalid, result.reward.invalid_penalty, rewards).mean()
    assert row["mean_reward"] == pytest.approx(expected)
    assert row["accuracy"] == pytest.approx(np.where(invalid, 0.0, tournament.correct[result.test_rows, 1]).mean())
    assert row["selection"]["m1"] == pytest.approx(1 - invalid.mean())


def test_failing_agent_is_reported_and_others_finish(outputs):
    result, _, out = outputs
    failures = result.failures
    assert [(f.method, f.seed) for f in failures] == [("ext-failing", 1)]
    assert failures[0].error == "RuntimeError: diverged on seed 1"
    assert any("in fit" in frame and "diverged" in frame for frame in failures[0].traceback)
    row = result.row("ext-failing")
    assert row["seeds_ok"] == 1 and row["seeds_failed"] == 1
    assert all(r["seeds_ok"] == SEEDS for r in result.rows if r["method"] not in ("ext-failing",) and r["kind"] == "agent")
    payload = json.loads((out / "results.json").read_text())
    assert payload["failures"][0]["error"] == "RuntimeError: diverged on seed 1"
    assert "## Failures" in (out / "table.md").read_text()
    repo_root = str(Path(__file__).resolve().parents[1])
    assert repo_root not in json.dumps(payload["failures"])  # tracebacks carry no machine-specific paths


def test_dominance_and_pareto(outputs):
    result, _, _ = outputs
    pairs = {(d["a"], d["b"]): d for d in result.dominance}
    # the same routes as 'always m0': never dominates it, nor is dominated
    assert not pairs[("ext-const", FIXED_PREFIX + "m0")]["dominates"]
    assert pairs[("ext-const", FIXED_PREFIX + "m0")]["prob_dominates"] == 0.0
    # 'always m1' answers as model 1 does on every query, and ext-invalid is m1 with fewer answers
    assert not pairs[("ext-invalid", FIXED_PREFIX + "m1")]["dominates"]
    ref = result.pareto["reference"]
    assert ref["accuracy"] == 0.0 and ref["energy_j"] > max(r["mean_energy_j"] for r in result.rows if r["kind"] == "fixed-model")
    assert 0 < result.pareto["hypervolume_fixed_models"] <= result.pareto["hypervolume_all"] <= 1


def test_mo_indicators_of_rows_and_fronts(outputs):
    """pymoo's hypervolume of each row equals the table's normalised one; the exact oracle front
    dominates every front; the reference point is stated in table.md and results.json."""
    result, _, out = outputs
    mo = result.pareto["mo_indicators"]
    for r in result.rows:
        if r["seeds_ok"]:
            assert mo["rows"][r["method"]]["hypervolume"] == pytest.approx(r["hypervolume"])
    fronts = mo["fronts"]
    oracle = fronts["oracle (exact, per-query best route)"]
    for name, f in fronts.items():
        assert f["expected_utility"] <= oracle["expected_utility"] + 1e-12, name
    assert fronts["front of all methods"]["hypervolume"] == pytest.approx(result.pareto["hypervolume_all"])
    assert fronts["task-aware hull"]["expected_utility"] >= fronts["fixed-model hull"]["expected_utility"] - 1e-12
    table = (out / "table.md").read_text()
    assert "## Multi-objective indicators" in table and "reference point (0, -1)" in table
    assert json.loads((out / "results.json").read_text())["pareto"]["mo_indicators"]["reference_point"] == [0.0, -1.0]


def test_cli_compare_and_errors(tmp_path, tournament, capsys):
    tournament.save(tmp_path / "t")
    out = tmp_path / "out"
    code = main(["compare", "--tournament", str(tmp_path / "t"), "--agents", "ext-const,ext-invalid", "--seeds", "1",
                 "--lambda-e", "0.2", "--bootstrap", "200", "--no-plots", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| ext-invalid |" in printed and "gated_rank(lambda_e=0.2)" in printed
    payload = json.loads((out / "results.json").read_text())
    assert payload["settings"]["reward"]["coefficients"] == {"lambda_e": 0.2}
    assert not list(out.glob("*.png"))

    assert main(["compare", "--tournament", str(tmp_path / "t"), "--agents", "ext-const,no-such-agent", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown agent 'no-such-agent'; registered:" in err and "ext-const" in err

    code = main(["compare", "--tournament", str(tmp_path / "t"), "--agents", "ext-failing", "--seeds", "2",
                 "--bootstrap", "200", "--no-plots", "--out", str(out)])
    assert code == 1 and "1 run(s) failed: ext-failing seed 1" in capsys.readouterr().out


def test_yardstick_gains_in_every_output(outputs, tournament):
    result, _, out = outputs
    rows = result.test_rows
    hull = result.pareto["hull"]
    # the chain is chosen on train: the null policy, then the fixed models of the train hull, in order
    train = tournament.split_rows("train")
    stick = Yardstick.chosen_on_train(tournament.energy_j[train].mean(axis=0), tournament.correct[train].mean(axis=0),
                                      tournament.model_ids)
    assert hull["chain"] == [NULL_POLICY, *stick.names] and hull["energy_j"][0] == hull["accuracy"][0] == 0.0
    fixed_acc, fixed_j = tournament.correct[rows].mean(axis=0), tournament.energy_j[rows].mean(axis=0)
    np.testing.assert_allclose(hull["chain_accuracy"][1:], fixed_acc[stick.index])  # ... evaluated on test
    # on test the yardstick is the best mix of the chain's policies: its vertices are some of them
    assert set(hull["models"]) <= set(hull["chain"]) and hull["energy_j"] == sorted(hull["energy_j"])
    assert all(np.diff(hull["accuracy"]) > 0)
    for r in result.rows:
        if not r["seeds_ok"]:
            continue
        # the gain from the chain's test points, by interpolation (np.interp is flat beyond the last, like the chain)
        expected = 100 * (r["accuracy"] - np.interp(r["mean_energy_j"], hull["energy_j"], hull["accuracy"]))
        assert r["routing_gain_pp"] == pytest.approx(expected, abs=1e-9)
        assert r["routing_gain_pp_ci_low"] <= r["routing_gain_pp"] + 1e-9 <= r["routing_gain_pp_ci_high"] + 2e-9
        if r["joules_saved_pct"] is not None and r["joules_saved_pct_ci_low"] is not None:
            assert r["joules_saved_pct_ci_low"] <= r["joules_saved_pct_ci_high"]
        if r["kind"] == "fixed-model" and r["method"].removeprefix(FIXED_PREFIX) in stick.names:
            # a chain policy is never above the best mix of the chain; 0 exactly where it is a vertex
            assert r["routing_gain_pp"] <= 0.0 and r["routing_gain_pp_ci_high"] <= 1e-9
            assert r["on_yardstick"] == (r["method"].removeprefix(FIXED_PREFIX) in hull["models"])
            assert r["on_yardstick"] == (r["routing_gain_pp"] == 0.0)
            assert r["routing_gain_pp_shape"] in ("", "atom", "atom, two modes")
    # an invalid action costs 0 J and is wrong: ext-invalid sits between the null point and model 1
    invalid = result.row("ext-invalid")
    assert invalid["routing_gain_pp_vs"] == "within"
    # a row more accurate than every chain policy has no joules saved, and says so
    for r in result.rows:
        if r["seeds_ok"] and r["accuracy"] > max(hull["accuracy"]) + 1e-9:
            assert r["joules_saved_pct"] is None and r["joules_saved_pct_vs"] == MORE_ACCURATE_THAN_CHAIN
    summary = pd.read_csv(out / "summary.csv")
    assert {"routing_gain_pp", "routing_gain_pp_ci_low", "routing_gain_pp_fw", "joules_saved_pct",
            "joules_saved_pct_vs", "same_routes_as", "routing_gain_pp_shape", "content_gain_pp_shape",
            "joules_saved_pct_shape"} <= set(summary.columns)
    payload = json.loads((out / "results.json").read_text())
    assert payload["pareto"]["hull"]["models"] == hull["models"] and "routing_gain_pp_ci_high" in payload["rows"][0]
    table = (out / "table.md").read_text()
    assert "Routing gain pp [95% CI]" in table and "## Routing gain over the fixed-model yardstick" in table
    assert f"{invalid['routing_gain_pp']:+.1f} [" in table
    for r in result.rows:  # a fixed model the chain passes through is on the yardstick
        if r["kind"] == "fixed-model" and r["seeds_ok"] and r["on_yardstick"]:
            line = next(x for x in table.splitlines() if x.startswith(f"| {r['method']} |"))
            if r["routing_gain_pp_ci_low"] == r["routing_gain_pp_ci_high"]:  # a vertex in every resample
                assert "| on the yardstick" in line
            else:  # below the yardstick in some resamples: the interval, flagged
                assert f"| {r['routing_gain_pp']:+.1f} [" in line and "(atom" in line
    beyond = any(r.get("joules_saved_pct_vs", "within") != "within" for r in result.rows)
    table_rows = "\n".join(line for line in table.splitlines() if line.startswith("| "))
    assert beyond == ("— (beyond)" in table_rows)


@pytest.fixture
def saved(tmp_path, tournament):
    tournament.save(tmp_path / "t")
    return str(tmp_path / "t")


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "seeds (--seeds) must be >= 1, got 0"),
    (["--bootstrap", "0"], "n_bootstrap (--bootstrap) must be >= 10, got 0"),
    (["--agents", "ext-const", "--agent-kwargs", '{"ext-const": {"modle": 3}}'],
     "agent_kwargs (--agent-kwargs) for 'ext-const': unknown keyword 'modle' (did you mean 'model'?) for agent 'ext-const'; "
     "ext-const accepts: model"),
    (["--agents", "ext-const", "--agent-kwargs", '{"ext-const": 3}'], "expected an object of keyword arguments, got 3"),
    (["--agents", "ext-const", "--agent-kwargs", '{"ext-greedy": {}}'], "agent_kwargs given for agents not in the run"),
    (["--agents", "ext-const", "--agent-kwargs", "{nope"], "--agent-kwargs: not valid JSON"),
    (["--agents", "ext-const", "--train-split", "nope"], "nope"),
])
def test_cli_bad_settings_one_line_exit_2_before_training(saved, tmp_path, capsys, argv, message):
    code = main(["compare", "--tournament", saved, "--agents", "ext-failing", "--out", str(tmp_path / "o")] + argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("routing-gym compare: error: ") and message in captured.err
    assert "Traceback" not in captured.err and "compare: [" not in captured.err  # nothing trained
    assert not (tmp_path / "o").exists()


def test_knn_kwargs_typo_is_caught_before_training(saved, tmp_path, capsys):
    code = main(["compare", "--tournament", saved, "--agents", "knn", "--agent-kwargs", '{"knn": {"kk": 3}}',
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown keyword 'kk' (did you mean 'k'?) for agent 'knn'" in err
    assert err.rstrip().endswith("knn accepts: k, cost_weight, features, dim")  # parameters forwarded by **kwargs too
    assert "__init__" not in err and "_TextRouter" not in err  # the agent's name, not a private base class


def test_cli_same_split_warns_duplicates_collapse_and_progress_goes_to_stderr(saved, tmp_path, capsys):
    code = main(["compare", "--tournament", saved, "--agents", "ext-const,ext-const", "--seeds", "2",
                 "--train-split", "test", "--test-split", "test", "--bootstrap", "100", "--no-plots",
                 "--out", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert code == 0
    warning = "routing-gym compare: warning: trained and tested on the same split 'test': every number is in-sample"
    assert warning in captured.err and "Traceback" not in captured.err
    # pytest's captured stderr is not a terminal: one line per finished run
    assert "compare: [1/2] ext-const seed 0: ok in " in captured.err and "compare: [2/2] ext-const seed 1: ok" in captured.err
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert (summary["method"] == "ext-const").sum() == 1
    assert "**Warning: trained and tested on the same split" in (tmp_path / "o" / "table.md").read_text()


def test_plots_do_not_import_compare():
    import subprocess
    import sys

    code = ("import sys, routing_gym.eval.core.plots; "
            "assert not [m for m in sys.modules if m.startswith('routing_gym.eval.compare')], sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_builtin_default_agents_on_a_small_tournament():
    from routing_gym.eval.compare import DEFAULT_AGENTS, resolve_agent_names

    assert "smoothie" not in resolve_agent_names(None) and "smoothie" in resolve_agent_names(None, has_output_text=True)
    t = make_tournament(n=300, k=4, seed=2)
    result = run_compare(CompareConfig(tournament=t, seeds=1, n_bootstrap=200, progress=False))
    agents = [r["method"] for r in result.rows if r["kind"] == "agent"]
    assert agents == list(DEFAULT_AGENTS)
    assert not result.failures, [f.error for f in result.failures]
    oracle = result.row("oracle")
    assert not oracle["deployable"] and all(r["mean_reward"] <= oracle["mean_reward"] + 1e-12 for r in result.rows)
    assert {"linucb", "epsilon-greedy", "thompson"} <= set(result.regret)
