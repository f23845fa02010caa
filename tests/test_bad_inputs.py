"""Every bad input gets a clean answer: one table of cases, one helper per kind of case.

Each row of ``CASES`` is one bad input and what it must produce:

- ``Raises(call, error, message)``: ``call()`` raises ``error`` whose text matches ``message``;
- ``Warns(call, warning, message)``: ``call()`` warns ``warning`` matching ``message``;
- ``Grades(grader, output, reference, correct, reason)``: a grader's verdict and reason;
- ``Cli(argv, status, message)``: ``python -m routing_gym *argv`` in a real subprocess exits
  with ``status``, its stderr (or stdout) matches ``message`` and holds no traceback;
- ``Script(source, status, message)``: a Python script run in a real subprocess.

``argv`` and ``source`` may hold ``{tmp}`` (a fresh directory holding the fixture tournaments
of ``prepare``). Add a row for a new case; add a kind only when no existing one fits.
Cases that need a live server or signals (Ctrl-C, a closed pipe) follow the table.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
from collect_server import FakeOllama, make_config
from conftest import make_tournament

from routing_gym.collect import CollectError, ConfigError, config_from_dict
from routing_gym.collect.runner import run_collection
from routing_gym.envs import Reward
from routing_gym.envs.rewards import CoefficientTypeError, CoefficientValueError, GateWarning, rank_penalty
from routing_gym.errors import GateViolationError, TournamentValidationError, UnknownNameError
from routing_gym.grading import get_grader
from routing_gym.sources import resolve_tournament
from routing_gym.tournament import DataCard, Outcomes, Tournament
from routing_gym.tournament.io import write_tables

REPO = Path(__file__).resolve().parents[1]
CARD = DataCard(name="bad-input", provenance="synthetic", description="tests/test_bad_inputs.py")


@dataclass(frozen=True)
class Raises:
    call: Callable[[], Any]
    error: type[BaseException]
    message: str


@dataclass(frozen=True)
class Warns:
    call: Callable[[], Any]
    warning: type[Warning]
    message: str


@dataclass(frozen=True)
class Grades:
    grader: str
    output: str
    reference: Any
    correct: bool
    reason: str
    metadata: dict | None = None


@dataclass(frozen=True)
class Cli:
    argv: tuple[str, ...]
    status: int
    message: str


@dataclass(frozen=True)
class Script:
    source: str
    status: int
    message: str


def long_tables(t: Tournament) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return t.queries.copy(), t.models.copy(), t.to_long()


def tournament_with(edit: Callable[[pd.DataFrame, pd.DataFrame, pd.DataFrame], Any]) -> Callable[[], Tournament]:
    """A call that builds a small tournament from long tables after ``edit`` broke them
    (in place, or by returning a new outcomes table)."""

    def build() -> Tournament:
        queries, models, outcomes = long_tables(make_tournament(n=12, k=3))
        replaced = edit(queries, models, outcomes)
        if isinstance(replaced, pd.DataFrame):
            outcomes = replaced
        return Tournament.from_records(queries, models, outcomes, CARD, source="t")

    return build


def _set(frame: pd.DataFrame, row: int, column: str, value: Any) -> None:
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value


def _empty_tables() -> Tournament:
    queries, models, outcomes = long_tables(make_tournament(n=12, k=3))
    return Tournament.from_records(queries.iloc[:0], models.iloc[:0], outcomes.iloc[:0], CARD, source="t")


def _outcomes_with_nan_energy() -> Outcomes:
    ones = np.ones((1, 3))
    return Outcomes(ones, np.array([[np.nan, 10.0, 20.0]]), ones, ones)


def _lagrangian_on_real_scale() -> None:
    # a correct 1.5 kJ answer and a wrong 100 J one: mu = 1/J prices the correct route far below
    o = Outcomes(np.array([[1.0, 0.0]]), np.array([[1500.0, 100.0]]), np.ones((1, 2)), np.ones((1, 2)))
    Reward("lagrangian", {"mu": 1.0})(o)


UNGUARDED_SCRIPT = """
from routing_gym.grading import grade_batch
results = grade_batch("math", ['{"answer": "6\\u221a2"}', '{"answer": "1/2"}'] * 3, ["6\\\\sqrt{2}", "0.5"] * 3,
                      processes=2, chunksize=2, disable_progress=True)
print("graded", sum(r.correct for r in results), "of", len(results))
"""

CASES: dict[str, Raises | Warns | Grades | Cli | Script] = {
    # ------------------------------------------------------------------ rewards (item 7)
    "reward-nan-coefficient": Raises(lambda: Reward("gated_rank", {"lambda_e": math.nan}), CoefficientValueError,
                                     r"coefficient 'lambda_e' must be finite, got nan"),
    "reward-inf-coefficient": Raises(lambda: Reward("lagrangian", {"mu": math.inf}), CoefficientValueError,
                                     r"coefficient 'mu' must be finite, got inf"),
    "reward-string-coefficient": Raises(lambda: Reward("gated_rank", {"lambda_e": "0.4"}), CoefficientTypeError,
                                        r"coefficient 'lambda_e' must be a number, got str '0.4'"),
    "reward-none-coefficient": Raises(lambda: Reward("gated_rank", {"lambda_t": None}), CoefficientTypeError,
                                      r"coefficient 'lambda_t' must be a number, got NoneType None"),
    "reward-bool-coefficient": Raises(lambda: Reward("gated_rank", {"lambda_e": True}), CoefficientTypeError,
                                      r"coefficient 'lambda_e' must be a number, got bool True"),
    "reward-string-invalid-penalty": Raises(lambda: Reward("gated_rank", invalid_penalty="-2"), CoefficientTypeError,
                                            r"invalid_penalty must be a number, got str"),
    "reward-unknown-coefficient": Raises(lambda: Reward("gated_rank", {"lambda_x": 0.4}), CoefficientTypeError,
                                         r"has no coefficient\(s\) \['lambda_x'\]; it takes \['lambda_e', 'lambda_p', 'lambda_t'\]"),
    "reward-unknown-name": Raises(lambda: Reward("gated_rnak"), UnknownNameError, r"unknown reward 'gated_rnak'"),
    "reward-analytical-gate": Raises(lambda: Reward("gated_rank", {"lambda_e": 2.0, "lambda_t": 1.0}), GateViolationError,
                                     r"= 3 >= 3.*allow_ungated=True"),
    "reward-data-gate-lagrangian": Warns(_lagrangian_on_real_scale, GateWarning,
                                         r"lagrangian\(mu=1\) has no analytical gate.*in 1 of 1 queries.*"
                                         r"correct route earns -1499, a wrong one -100"),
    "rank-penalty-nan": Raises(lambda: rank_penalty(np.array([math.nan, 10.0, 20.0])), ValueError,
                               r"NaN cost at index \(0,\).*cannot be ranked"),
    "reward-nan-energy-outcomes": Raises(lambda: Reward("gated_rank", {"lambda_e": 0.4})(_outcomes_with_nan_energy()),
                                         ValueError, r"NaN cost at index \(0, 0\)"),
    # ------------------------------------------------------------------ tournaments (item 8)
    "tournament-0x0": Raises(_empty_tables, TournamentValidationError, r"has no questions.*\n.*has no models"),
    "tournament-null-benchmark": Raises(tournament_with(lambda q, m, o: _set(q, 2, "benchmark", None)),
                                        TournamentValidationError, r"t \(queries\), row 3, column 'benchmark': empty or null benchmark"),
    "tournament-correct-yes-no": Raises(tournament_with(lambda q, m, o: (_set(o, 4, "correct", "yes"), _set(o, 5, "correct", "no"))),
                                        TournamentValidationError,
                                        r"^2 problem\(s\).*row 5, column 'correct': 'yes' is not a number\n.*row 6, column 'correct': 'no' is not a number"),
    "tournament-missing-pairs-count": Raises(tournament_with(lambda q, m, o: o.iloc[30:]),
                                             TournamentValidationError,
                                             r"^1 problem\(s\).*30 of 36 \(query, model\) pairs are missing: \('q0', 'm0'\), .* and 25 more$"),
    "tournament-duplicate-query-id": Raises(tournament_with(lambda q, m, o: _set(q, 1, "query_id", "q0")),
                                            TournamentValidationError, r"row 2, column 'query_id': duplicate query_id 'q0'"),
    "tournament-correct-out-of-range": Raises(tournament_with(lambda q, m, o: _set(o, 0, "correct", 1.5)),
                                              TournamentValidationError, r"row 1, column 'correct': 1.5 must be in \[0, 1\]"),
    "tournament-unknown-name": Raises(lambda: resolve_tournament("no-such-tournament"), UnknownNameError, r"unknown tournament"),
    # ------------------------------------------------------------------ grading (item 9)
    "grade-unicode-root": Grades("math", '{"answer": "6\u221a2"}', "6", False, r"not equivalent"),
    "grade-unicode-root-right": Grades("math", '{"answer": "4\u221a2 + 8"}', "8 + 4\\sqrt{2}", True, r"equivalent"),
    "grade-trailing-ellipsis": Grades("math", '{"answer": "9, 18, 27, 36, ..."}', "36", False, r"unending list"),
    "grade-sentence-period-kept-working": Grades("math", '{"answer": "12."}', "12", True, r"equivalent"),
    "grade-gsm8k-last-json-answer": Grades(
        "gsm8k", '```json\n{"reasoning": "...", "answer": "190"}\n```\nThat is wrong; corrected:\n'
        '```json\n{"reasoning": "...", "answer": "90"}\n```', "90", True, r"json answer field: 90 == 90"),
    "grade-gsm8k-invented-question": Grades(
        "gsm8k", '```json\n{"reasoning": "...", "answer": "13"}\n```\n\nQuestion: Tom has 5 apples ...\n'
        '```json\n{"reasoning": "...", "answer": "42"}\n```', "13", True, r"13 == 13"),
    "grade-choice-lists-options": Grades("mmlu", "A. radio tower\nB. road", "A", False, r"lists the options without choosing"),
    "grade-choice-letter-kept-working": Grades("mmlu", "B. Paris", "B", True, r"starts with a letter"),
    "grade-empty-output": Grades("gsm8k", "   ", "4", False, r"empty output"),
    "grade-empty-reference": Raises(lambda: get_grader("math").grade("x", ""), ValueError, r"math grader: empty reference"),
    # ------------------------------------------------------------------ grading workers (item 10)
    "script-without-main-guard": Script(UNGUARDED_SCRIPT, 0, r"(?s)grading 6 math outputs in this process, not in 2 "
                                        r"workers: .*script\.py calls this from top-level code outside "
                                        r"'if __name__ == \"__main__\":'.*graded 6 of 6"),
    # ------------------------------------------------------------------ CLI (items 8, 11, 12)
    "cli-env-check-unknown-id": Cli(("env", "check", "--id", "RoutingGym/Replay-v9"), 2,
                                    r"^routing-gym env check: error: unknown environment id \(--id\) 'RoutingGym/Replay-v9'; "
                                    r"did you mean 'RoutingGym/Replay-v0'\?.*RoutingGym/Budget-v0"),
    "cli-env-check-negative-steps": Cli(("env", "check", "--steps", "-1"), 2, r"^routing-gym env check: error: argument --steps: must be >= 1, got -1"),
    "cli-env-check-bad-kwargs": Cli(("env", "check", "--kwargs", "{"), 2, r"^routing-gym env check: error: --kwargs: not valid JSON"),
    "cli-env-check-string-coefficient": Cli(("env", "check", "--tournament", "{tmp}/good", "--kwargs",
                                             '{"coefficients": {"lambda_e": "0.4"}}'), 2,
                                            r"^routing-gym env check: error: reward 'gated_rank': coefficient 'lambda_e' must be a number"),
    "cli-data-info-0x0": Cli(("data", "info", "{tmp}/empty"), 1, r"(?s)^routing-gym data info: error: 2 problem.*empty/queries.parquet: has no questions"),
    "cli-data-info-unknown": Cli(("data", "info", "no-such-tournament"), 2, r"^routing-gym data info: error: unknown tournament"),
    "cli-data-validate-yes-no": Cli(("data", "validate", "{tmp}/yes-no"), 1, r"row 2, column 'correct': 'yes' is not a number"),
    "cli-data-split-bad-proportions": Cli(("data", "split", "{tmp}/good", "--out", "{tmp}/x", "--split", "train=x"), 2,
                                          r"^routing-gym data split: error: --split 'train=x': expected NAME=WEIGHT pairs"),
    "cli-unknown-option": Cli(("data", "info", "--nope"), 2, r"^routing-gym: error: unrecognized arguments: --nope"),
    "cli-collect-status-not-a-run": Cli(("collect", "status", "{tmp}"), 1, r"is not a collection run folder"),
    "cli-collect-run-refused-config": Cli(("collect", "run", "{tmp}/n-too-large.json", "--out", "{tmp}/refused"), 2,
                                          r"^routing-gym collect run: error: .*benchmark 'arith': n=100000 but it has only 6 questions"),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    """Fixture tournaments and configs the CLI rows name as ``{tmp}/...``."""
    root = tmp_path_factory.mktemp("bad-inputs")
    make_tournament(n=12, k=3).save(root / "good")
    queries, models, outcomes = long_tables(make_tournament(n=12, k=3))
    # 0 x 0, written the way a user's tool would: Parquet tables with their columns and no rows
    write_tables(root / "empty", {"queries": queries.iloc[:0], "models": models.iloc[:0], "outcomes": outcomes.iloc[:0]}, CARD)
    make_tournament(n=12, k=3).save(root / "yes-no", format="jsonl")
    lines = (root / "yes-no" / "outcomes.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "correct": "yes"})
    (root / "yes-no" / "outcomes.jsonl").write_text("\n".join(lines) + "\n")
    config = make_config(root, "http://127.0.0.1:9")
    config["benchmarks"][0]["n"] = 100_000
    (root / "n-too-large.json").write_text(json.dumps(config))
    return root


def run_python(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def check_raises(case: Raises, tmp: Path) -> None:
    with pytest.raises(case.error) as info:
        case.call()
    assert re.search(case.message, str(info.value), re.DOTALL | re.MULTILINE), str(info.value)


def check_warns(case: Warns, tmp: Path) -> None:
    with pytest.warns(case.warning, match=case.message):
        case.call()


def check_grades(case: Grades, tmp: Path) -> None:
    result = get_grader(case.grader).grade(case.output, case.reference, case.metadata)
    assert result.correct is case.correct, result
    assert re.search(case.reason, result.reason), result.reason


def check_cli(case: Cli, tmp: Path) -> None:
    argv = [arg.replace("{tmp}", str(tmp)) for arg in case.argv]
    result = run_python(["-m", "routing_gym", *argv], cwd=tmp)
    assert result.returncode == case.status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    shown = result.stderr if re.search(case.message, result.stderr, re.MULTILINE) else result.stdout
    assert re.search(case.message, shown, re.MULTILINE), (result.stdout, result.stderr)
    if case.status == 2:  # a usage error is one line
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def check_script(case: Script, tmp: Path) -> None:
    script = tmp / "script.py"
    script.write_text(textwrap.dedent(case.source))
    result = run_python([str(script)], cwd=tmp)
    assert result.returncode == case.status, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert re.search(case.message, result.stderr + result.stdout), (result.stdout, result.stderr)


CHECKS = {Raises: check_raises, Warns: check_warns, Grades: check_grades, Cli: check_cli, Script: check_script}


@pytest.mark.parametrize("case_id", list(CASES))
def test_bad_input(case_id: str, tmp: Path) -> None:
    case = CASES[case_id]
    CHECKS[type(case)](case, tmp)


# ---------------------------------------------------------------------- beyond the table
def test_guarded_script_grades_in_worker_processes(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent("""
        from routing_gym.grading import grade_batch

        if __name__ == "__main__":
            results = grade_batch("gsm8k", ["4", "5"] * 2, ["4", "4"] * 2, processes=2, chunksize=2, disable_progress=True)
            print("graded", sum(r.correct for r in results), "of", len(results))
    """))
    result = run_python([str(script)], cwd=tmp_path)
    assert result.returncode == 0 and "graded 2 of 4" in result.stdout, result.stderr
    assert "in this process" not in result.stderr  # no fallback: the workers ran


def test_a_refused_config_writes_nothing_and_the_fixed_one_starts_there(tmp_path):
    server = FakeOllama()
    try:
        data = make_config(tmp_path, server.url, models=("good:7b",))
        out = tmp_path / "run"
        for broken, message in (({"n": 100_000}, r"n=100000 but it has only 6"), ({"name": "gsm9k"}, r"gsm9k")):
            bad = json.loads(json.dumps(data))
            bad["benchmarks"][0].update(broken)
            if "name" in broken:  # a shared question set by name, not a file
                del bad["benchmarks"][0]["path"], bad["benchmarks"][0]["grader"]
            with pytest.raises((ConfigError, CollectError, UnknownNameError), match=message):
                run_collection(config_from_dict(bad), out, progress=False, log=lambda msg: None)
            assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
        summary = run_collection(config_from_dict(data), out, progress=False, log=lambda msg: None)
        assert summary.complete and summary.done_now == 10
    finally:
        server.stop()


def test_to_tournament_and_data_split_write_seeded_paper_ratio_splits(tmp_path):
    server = FakeOllama()
    try:
        config = tmp_path / "run.json"
        config.write_text(json.dumps(make_config(tmp_path, server.url)))
        assert run_python(["-m", "routing_gym", "collect", "run", str(config), "--out", str(tmp_path / "run"),
                           "--no-progress"], cwd=tmp_path).returncode == 0
    finally:
        server.stop()
    written = {}
    for seed in (0, 0, 1):
        dest = tmp_path / f"t{seed}-{len(written)}"
        result = run_python(["-m", "routing_gym", "collect", "to-tournament", str(tmp_path / "run"), "--dest", str(dest),
                             "--split-seed", str(seed)], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert f"(seed {seed})" in result.stdout
        t = Tournament.load(dest)
        assert t.card.split["proportions"] == {"train": 2050, "test": 913} and t.card.split["seed"] == seed
        written[dest] = t.queries.set_index("query_id")["split"]
    first, again, other = written.values()
    assert first.equals(again) and not first.equals(other)  # seeded: same seed, same split
    # 10 questions in two benchmarks (6 + 4), each cut 2050:913 with largest remainders: 4+2, 3+1
    assert (first == "train").sum() == 7 and (first == "test").sum() == 3
    # `compare` needs a train split; `data split` gives any tournament one
    result = run_python(["-m", "routing_gym", "data", "split", str(tmp_path / "t0-0"), "--out", str(tmp_path / "resplit"),
                         "--split", "train=1,test=1", "--seed", "3"], cwd=tmp_path)
    assert result.returncode == 0 and "(seed 3)" in result.stdout, result.stderr
    assert Tournament.load(tmp_path / "resplit").card.split == {
        "seed": 3, "proportions": {"train": 1.0, "test": 1.0}, "stratified_by": "benchmark",
        "grouped_by": "normalised question text (lowercase, whitespace collapsed)"}


@pytest.mark.slow
def test_ctrl_c_in_collect_run_is_one_friendly_line(tmp_path):
    # 1 s per answer: the run lasts >= 20 s, so a loaded machine still signals it mid-run.
    server = FakeOllama(latency_s=1.0)
    try:
        config = tmp_path / "run.json"
        config.write_text(json.dumps(make_config(tmp_path, server.url)))
        out = tmp_path / "run"
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        # A shell starts background jobs with SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler: the child restores it, as a command typed at a terminal has it.
        as_at_a_terminal = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                            "sys.argv[0] = 'routing-gym'; runpy.run_module('routing_gym', run_name='__main__')")
        proc = subprocess.Popen([sys.executable, "-c", as_at_a_terminal, "collect", "run", str(config), "--out", str(out),
                                 "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Signal only once answers are being collected: a SIGINT that lands while the child is
        # still importing (a loaded machine once took > 60 s) can be swallowed there.
        deadline = time.monotonic() + 300
        while server.n_generations < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        server.stop()
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr, stderr
    assert re.search(r"interrupted; every finished call is saved in .*records\.jsonl; rerun the same command to resume", stderr)
    assert len(stderr.strip().splitlines()) <= 2, stderr


def test_a_closed_pipe_ends_quietly(tmp_path):
    """``routing-gym collect status RUN | head -2``: the reader goes away before we write."""
    server = FakeOllama()
    try:
        config_from = make_config(tmp_path, server.url)
        run_collection(config_from_dict(config_from), tmp_path / "run", progress=False, log=lambda msg: None)
    finally:
        server.stop()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "routing_gym", "collect", "status", str(tmp_path / "run")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `head` exiting: every write of the command now fails with EPIPE
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr, stderr
    assert proc.returncode == 141


def test_py_typed_ships_with_the_package():
    assert (importlib.resources.files("routing_gym") / "py.typed").is_file()
