"""One exit-status rule for every command (README "Exit status"; ``routing_gym.cli.exit_status``):
2 for a usage error (nothing ran), 1 for bad data. Each command is tried with one of each
(where the command reads data at all), and every command the parser knows must be listed here."""

from __future__ import annotations

import json

import pytest

from routing_gym.cli import build_parser, main

from conftest import make_tournament

BAD = "{tmp}/bad-tournament"  # a tournament whose outcomes file fails validation
GOOD = "{tmp}/good"

# command -> (usage-error argv, bad-data argv or None where the command reads no data)
CASES: dict[str, tuple[list[str], list[str] | None]] = {
    "data info": (["data", "info", "no-such-tournament"], ["data", "info", BAD]),
    "data validate": (["data", "validate"], ["data", "validate", BAD]),
    "data split": (["data", "split", GOOD, "--out", "{tmp}/x", "--split", "train=x"],
                   ["data", "split", BAD, "--out", "{tmp}/x"]),
    "data generate": (["data", "generate", "--text-signal", "2", "--out", "{tmp}/x"], None),
    "data import": (["data", "import", "{tmp}/bad-log.csv", "--out", "{tmp}/x", "--column", "nonsense"],
                    ["data", "import", "{tmp}/bad-log.csv", "--out", "{tmp}/x"]),
    "data export": (["data", "export", "no-such-tournament", "--out", "{tmp}/x.csv"],
                    ["data", "export", BAD, "--out", "{tmp}/x.csv"]),
    "data build": (["data", "build", "llmrouter", "--models", "a", "--data-dir", "{tmp}/no-data", "--out", "{tmp}/x"],
                   ["data", "build", "llmrouter", "--data-dir", "{tmp}/no-data", "--out", "{tmp}/x"]),
    "env check": (["env", "check", "--id", "RoutingGym/Nope-v0"], ["env", "check", "--tournament", BAD]),
    "compare": (["compare", "--tournament", GOOD, "--agents", "linucbb", "--out", "{tmp}/x"],
                ["compare", "--tournament", BAD, "--agents", "random", "--out", "{tmp}/x"]),
    "frontier": (["frontier", "--tournament", GOOD, "--agents", "knnn", "--out", "{tmp}/x"],
                 ["frontier", "--tournament", BAD, "--agents", "knn", "--out", "{tmp}/x"]),
    "headroom": (["headroom", GOOD, "--routers", "cost-awre", "--out", "{tmp}/x"],
                 ["headroom", BAD, "--routers", "cost-aware", "--out", "{tmp}/x"]),
    "sweep": (["sweep", "{tmp}/sweep-unknown-key.yaml"], ["sweep", "{tmp}/sweep-bad-tournament.yaml"]),
    "rewards": (["rewards", "--nope"], None),
    "collapse": (["collapse", "--agent", "linucbb", "--tournament", GOOD, "--out", "{tmp}/x"],
                 ["collapse", "--agent", "linucb", "--tournament", BAD, "--out", "{tmp}/x"]),
    "serve": (["serve", "--tournament", GOOD, "--policies", "jsqq", "--out", "{tmp}/x"],
              ["serve", "--tournament", BAD, "--policies", "jsq", "--out", "{tmp}/x"]),
    "collect run": (["collect", "run", "{tmp}/no-such-config.yaml", "--out", "{tmp}/run"], None),
    "collect sweep": (["collect", "sweep", "{tmp}/no-such-config.yaml", "--out", "{tmp}/run"], None),
    "collect status": (["collect", "status"], ["collect", "status", "{tmp}/no-data"]),
    "collect to-tournament": (["collect", "to-tournament", "{tmp}/no-data", "--dest", "{tmp}/x", "--split", "train=x"],
                              ["collect", "to-tournament", "{tmp}/no-data", "--dest", "{tmp}/x"]),
}


def leaf_commands() -> set[str]:
    """Every runnable command of the parser, e.g. 'data info', 'compare'."""
    names = set()

    def walk(parser, prefix):
        subparsers = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subparsers:
            names.add(" ".join(prefix))
        for action in subparsers:
            for name, sub in action.choices.items():
                walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return names


def test_every_command_is_covered():
    assert leaf_commands() == set(CASES)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    root = tmp_path_factory.mktemp("exit-status")
    make_tournament(n=40, k=3).save(root / "good")
    make_tournament(n=40, k=3).save(root / "bad-tournament", format="jsonl")
    lines = (root / "bad-tournament" / "outcomes.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "correct": "yes"})
    (root / "bad-tournament" / "outcomes.jsonl").write_text("\n".join(lines) + "\n")
    (root / "no-data").mkdir()
    (root / "bad-log.csv").write_text("query_id,prompt,benchmark,model_id,correct\nq1,hi,b,m1,yes\n")
    (root / "sweep-unknown-key.yaml").write_text(json.dumps({"tournaments": [str(root / "good")], "nope": 1}))
    (root / "sweep-bad-tournament.yaml").write_text(json.dumps(
        {"tournaments": [str(root / "bad-tournament")], "agents": ["random"], "seeds": 1, "out": str(root / "sw")}))
    return root


def run(argv: list[str], tmp) -> int:
    try:
        return main([a.replace("{tmp}", str(tmp)) for a in argv])
    except SystemExit as exc:  # argparse's own usage errors
        return int(exc.code)


@pytest.mark.parametrize("command", sorted(CASES))
def test_usage_error_exits_2(command, tmp, capsys):
    assert run(CASES[command][0], tmp) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("command", sorted(c for c, (_, bad) in CASES.items() if bad is not None))
def test_bad_data_exits_1(command, tmp, capsys):
    assert run(CASES[command][1], tmp) == 1
    captured = capsys.readouterr()
    if command == "data validate":  # a report of every tournament named, on stdout
        assert "INVALID" in captured.out and "row 2, column 'correct'" in captured.out
    else:
        assert f"routing-gym {command}: error:" in captured.err
    assert "Traceback" not in captured.err


def test_unknown_names_suggest_the_closest(tmp, capsys):
    assert run(["compare", "--tournament", "paper-pol", "--agents", "random"], tmp) == 2
    assert "did you mean 'paper-pool'?" in capsys.readouterr().err
    assert run(["compare", "--tournament", GOOD, "--agents", "thompsn", "--out", "{tmp}/x"], tmp) == 2
    err = capsys.readouterr().err
    assert "did you mean 'thompson'?" in err and "--import MODULE" in err
    assert run(["compare", "--tournament", GOOD, "--reward", "gated-rank", "--out", "{tmp}/x"], tmp) == 2
    assert "did you mean 'gated_rank'" in capsys.readouterr().err


def test_validation_rows_say_how_they_count(tmp, capsys):
    assert run(["data", "info", BAD], tmp) == 1
    err = capsys.readouterr().err
    assert "row N = the N-th data row, counted from 1; pandas index N-1" in err and "row 2, column 'correct'" in err


# command -> argv whose output option (--out, or --dest) names "{tmp}/a-file", an existing file
OUTPUT_IS_A_FILE: dict[str, list[str]] = {
    "data split": ["data", "split", GOOD, "--out", "{tmp}/a-file"],
    "data generate": ["data", "generate", "--n-queries", "50", "--out", "{tmp}/a-file"],
    "data import": ["data", "import", "{tmp}/bad-log.csv", "--out", "{tmp}/a-file"],
    "data export": ["data", "export", GOOD, "--out", "{tmp}/a-file/x.csv"],
    "data build": ["data", "build", "llmrouter", "--data-dir", "{tmp}/no-data", "--out", "{tmp}/a-file"],
    "compare": ["compare", "--tournament", GOOD, "--agents", "random", "--seeds", "1", "--out", "{tmp}/a-file"],
    "frontier": ["frontier", "--tournament", GOOD, "--agents", "knn", "--out", "{tmp}/a-file"],
    "headroom": ["headroom", GOOD, "--routers", "cost-aware", "--out", "{tmp}/a-file"],
    "sweep": ["sweep", "{tmp}/sweep-bad-tournament.yaml", "--out", "{tmp}/a-file"],
    "collapse": ["collapse", "--agent", "linucb", "--tournament", GOOD, "--out", "{tmp}/a-file"],
    "collect run": ["collect", "run", "{tmp}/no-such-config.yaml", "--out", "{tmp}/a-file"],
    "collect sweep": ["collect", "sweep", "{tmp}/no-such-config.yaml", "--out", "{tmp}/a-file"],
    "serve": ["serve", "--tournament", GOOD, "--policies", "jsq", "--out", "{tmp}/a-file"],
    "collect to-tournament": ["collect", "to-tournament", "{tmp}/no-data", "--dest", "{tmp}/a-file"],
}


def commands_with_an_output_option() -> set[str]:
    names = set()

    def walk(parser, prefix):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
            elif {"--out", "--dest"} & set(action.option_strings):
                names.add(" ".join(prefix))

    walk(build_parser(), [])
    return names


def test_every_output_option_is_covered():
    assert commands_with_an_output_option() == set(OUTPUT_IS_A_FILE)


@pytest.mark.parametrize("command", sorted(OUTPUT_IS_A_FILE))
def test_an_output_that_cannot_be_written_exits_2_before_any_work(command, tmp, capsys):
    (tmp / "a-file").write_text("not a folder\n")
    assert run(OUTPUT_IS_A_FILE[command], tmp) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp}/a-file" in err and "Traceback" not in err, err
    assert (tmp / "a-file").read_text() == "not a folder\n"


def test_an_export_file_that_is_a_directory_exits_2(tmp, capsys):
    assert run(["data", "export", GOOD, "--out", "{tmp}/no-data"], tmp) == 2
    assert "is a directory; name the file to write" in capsys.readouterr().err


def test_a_missing_data_directory_says_what_it_is_and_where_the_docs_are(tmp, capsys, monkeypatch):
    from pathlib import Path

    monkeypatch.delenv("ROUTING_GYM_DATA_DIR", raising=False)
    (tmp / "log.csv").write_text("query_id,prompt,benchmark,model_id,correct,output_tokens\nq1,hi,b,m1,1,10\n")
    assert run(["data", "import", "{tmp}/log.csv", "--out", "{tmp}/imported", "--energy-model", "batched",
                "--model-spec", "m1=1"], tmp) == 1
    err = capsys.readouterr().err
    assert "no data directory: pass --data-dir DIR or set ROUTING_GYM_DATA_DIR" in err and "README" not in err
    docs = Path(__file__).resolve().parents[1] / "docs"
    assert "docs/importing.md" in err and (docs / "importing.md").exists()
    assert "docs/tournaments.md, 'Real data'" in err and "## Real data" in (docs / "tournaments.md").read_text()
