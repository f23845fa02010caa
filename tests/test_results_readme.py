"""Results folders name the command that wrote them (experiments/results_readme.py), and none is stale."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
sys.path.insert(0, str(REPO / "experiments"))

import results_readme  # noqa: E402  (experiments/results_readme.py)

# A command a reader can rerun: a study script or a routing-gym command, in backticks or a code block.
COMMAND = re.compile(r"(`|```bash\n)[^`]*(python experiments/\w+\.py|routing-gym \w+)")


def test_readme_names_the_command_with_repository_relative_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = RESULTS / "some-study"
    argv = [str(REPO / "experiments" / "some_study.py"), "--out", str(out), f"--tournament={REPO / 'envs_data' / 'x'}", "--seeds", "2"]
    path = results_readme.write_readme(tmp_path, "A study", "What the files hold.", argv=argv)
    text = path.read_text()
    assert text.startswith("# A study\n")
    assert ("OMP_NUM_THREADS=1 python experiments/some_study.py --out experiments/results/some-study "
            "--tournament=envs_data/x --seeds 2") in text
    assert str(REPO) not in text and "What the files hold." in text
    assert COMMAND.search(text)


def test_index_lists_each_run_with_its_command(tmp_path, monkeypatch):
    for name in results_readme.SHOWN_ENV:
        monkeypatch.delenv(name, raising=False)
    results_readme.write_readme(tmp_path / "b-run", "B", "b", argv=[str(REPO / "experiments" / "b.py"), "--tournament", "b"])
    (tmp_path / "a-run").mkdir()  # a folder no run of this script wrote
    text = results_readme.write_index(tmp_path, "Index", "About.").read_text()
    assert "- `a-run/`: no README (not rerun by this script)" in text
    assert "- `b-run/`: `python experiments/b.py --tournament b`" in text
    assert text.index("a-run") < text.index("b-run")


COMMITTED = sorted([*RESULTS.glob("*/README.md"), *RESULTS.glob("*/*/README.md")])


@pytest.mark.parametrize("readme", COMMITTED, ids=[str(p.relative_to(RESULTS)) for p in COMMITTED])
def test_every_committed_results_readme_names_its_command(readme):
    assert COMMAND.search(readme.read_text()), f"{readme.relative_to(REPO)} names no command that wrote it"


def test_no_results_file_says_it_is_stale():
    stale = [str(p.relative_to(REPO)) for p in RESULTS.rglob("*")
             if p.is_file() and p.suffix in {".md", ".csv", ".json", ".txt"}
             and "stale" in p.read_text(errors="replace").lower()]
    assert not stale, stale
