"""What a new user hit on a fresh clone (issue 51): the docs' first example, the CLI page's
markup, a reward `collapse` cannot sweep, `data generate --name`, a latin-1 CSV, pareto.png's
markers."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from routing_gym.cli import main
from routing_gym.envs.rewards import REWARDS
from routing_gym.eval.compare.cells import DEFAULT_AGENTS
from routing_gym.eval.core.plots import _agent_styles
from routing_gym.sources.synthetic import preset_config

REPO = Path(__file__).resolve().parents[1]


def test_the_getting_started_environment_example_runs_as_written(capsys):
    page = (REPO / "docs" / "getting-started.md").read_text()
    section = page.split("## The environment in five lines", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL).group(1)
    exec(compile(code, "getting-started.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "'accuracy'" in printed and "'invalid_rate': 0.0" in printed


def test_cli_page_help_keeps_options_and_code_spans_literal():
    sys.path.insert(0, str(REPO / "docs" / "_ext"))
    try:
        import cli_parser
    finally:
        sys.path.remove(str(REPO / "docs" / "_ext"))
    assert cli_parser._escape("given to `ray start --head`, or *x* a_b") == r"given to ``ray start --head``, or \*x\* a\_b"
    conf = (REPO / "docs" / "conf.py").read_text()
    assert re.search(r"^smartquotes = False$", conf, flags=re.MULTILINE)  # `--out` rendered as an en dash


def test_generate_a_preset_under_a_new_name(tmp_path, capsys):
    assert preset_config("paper-pool", name="X").name == "X"
    assert main(["data", "generate", "--preset", "paper-pool", "--name", "X", "--out", str(tmp_path / "x")]) == 0
    assert json.loads((tmp_path / "x" / "card.json").read_text())["name"] == "X"


LATIN1_CSV = (
    "query_id,prompt,benchmark,model_id,correct,energy_j,latency_s\n"
    "q1,Café au lait?,demo,m1,1,10,1\nq1,Café au lait?,demo,m2,0,5,1\n"
    "q2,Crème?,demo,m1,0,10,1\nq2,Crème?,demo,m2,1,5,1\n"
).encode("latin-1")


def test_a_latin1_csv_names_the_line_and_the_way_out(tmp_path, capsys):
    table = tmp_path / "logs.csv"
    table.write_bytes(LATIN1_CSV)
    assert main(["data", "import", str(table), "--out", str(tmp_path / "t")]) == 1
    error = capsys.readouterr().err
    assert "logs.csv, line 2" in error and "not valid utf-8" in error and "--encoding latin-1" in error
    assert not (tmp_path / "t").exists()
    assert main(["data", "import", str(table), "--out", str(tmp_path / "t"), "--encoding", "latin-1"]) == 0
    from routing_gym.tournament import load_tournament

    assert "Café au lait?" in set(load_tournament(tmp_path / "t").queries["prompt"])


def test_an_unknown_encoding_is_a_clear_error(tmp_path, capsys):
    table = tmp_path / "logs.csv"
    table.write_bytes(LATIN1_CSV)
    assert main(["data", "import", str(table), "--out", str(tmp_path / "t"), "--encoding", "latin-9x"]) == 1
    assert "unknown encoding 'latin-9x'" in capsys.readouterr().err


def test_every_default_agent_has_its_own_marker_and_none_is_the_fixed_models_square():
    rows = [{"method": name, "kind": "agent"} for name in DEFAULT_AGENTS]
    markers = [style["marker"] for style in _agent_styles(SimpleNamespace(rows=rows)).values()]
    assert len(set(markers)) == len(DEFAULT_AGENTS) and "s" not in markers


def test_collapse_says_on_stderr_which_named_reward_it_leaves_out(tmp_path, capsys):
    module = tmp_path / "unswept_reward.py"
    module.write_text(textwrap.dedent("""
        import numpy as np
        from routing_gym.envs import register_reward

        @register_reward("test-unswept")
        def unswept(outcomes, price=0.1):
            return outcomes.correct - price * np.log1p(outcomes.energy_j)
    """))
    try:
        status = main(["collapse", "--import", str(module), "--agent", "random", "--rewards", "gated_rank", "test-unswept",
                       "--gate-fractions", "0.5", "--timesteps", "200", "--window", "100", "--no-plots",
                       "--out", str(tmp_path / "out")])
    finally:
        REWARDS.pop("test-unswept", None)
    captured = capsys.readouterr()
    assert status == 0
    assert "routing-gym collapse: warning: reward test-unswept: left out, no energy coefficient" in captured.err
    assert "test-unswept: left out" in (tmp_path / "out" / "table.md").read_text()


def test_a_reward_with_lambda_e_is_swept_and_an_unknown_name_raises():
    from routing_gym.errors import UnknownNameError
    from routing_gym.eval.collapse.study import left_out_note

    assert left_out_note("gated_rank") is None
    with pytest.raises(UnknownNameError):
        left_out_note("no-such-reward")
