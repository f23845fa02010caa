"""docs/guide.md runs as written: every snippet, in order, in one fresh folder.

The guide's conventions (stated at its top): ` ```python file=NAME ` / ` ```yaml file=NAME `
blocks are saved as files; ` ```bash ` and ` ```python ` blocks are run (bash with ``set -e``;
` ```bash exit=N ` must exit with N); the ` ```text expect ` block after a run lists lines its
output must contain, ``...`` standing for anything. One test per ``##`` section, run in the
guide's order (later sections use files and tournaments of earlier ones).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "guide.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)


@dataclass
class Block:
    kind: str  # "file", "run"
    language: str
    body: str
    name: str = ""  # file name
    exit_status: int = 0
    expect: list[str] = field(default_factory=list)


def parse_sections(text: str) -> list[tuple[str, list[Block]]]:
    sections = []
    for chunk in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        title = chunk.splitlines()[0].strip()
        blocks: list[Block] = []
        for language, info, body in FENCE.findall(chunk):
            options = dict(part.split("=", 1) for part in info.split() if "=" in part)
            if language == "text" and "expect" in info.split():
                assert blocks and blocks[-1].kind == "run", f"{title}: an expect block follows no snippet"
                blocks[-1].expect = [line for line in body.splitlines() if line.strip()]
            elif "file" in options:
                blocks.append(Block("file", language, body, name=options["file"]))
            elif language in ("bash", "python"):
                blocks.append(Block("run", language, body, exit_status=int(options.get("exit", 0))))
        sections.append((title, blocks))
    return sections


SECTIONS = parse_sections(GUIDE.read_text())


def test_the_guide_has_a_snippet_for_every_workflow():
    titles = " / ".join(title for title, _ in SECTIONS)
    for topic in ("agent", "reward", "collapse", "vector env", "frontier", "Ray", "logs"):
        assert topic.lower() in titles.lower(), (topic, titles)
    assert all(any(b.kind == "run" and b.expect for b in blocks) for _, blocks in SECTIONS), "a section checks nothing"


def test_the_readme_links_the_guide():
    assert "docs/guide.md" in (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, set[str]]:
    """The folder every section runs in, and the sections already run there."""
    return tmp_path_factory.mktemp("guide"), set()


def _pattern(line: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in line.split("...")))


def run_block(block: Block, cwd: Path) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if block.language == "bash":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.body]
    else:
        command = [sys.executable, "-c", block.body]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == block.exit_status, f"exit {result.returncode}, expected {block.exit_status}:\n{output[-3000:]}"
    assert "Traceback" not in output, output[-3000:]
    return output


def run_section(title: str, cwd: Path) -> None:
    for block in dict(SECTIONS)[title]:
        if block.kind == "file":
            (cwd / block.name).write_text(block.body)
            continue
        output = run_block(block, cwd)
        for line in block.expect:
            assert _pattern(line).search(output), f"{title}: expected {line!r} in the output:\n{output[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("title", [title for title, _ in SECTIONS])
def test_guide_section_runs_as_written(title, workdir):
    cwd, done = workdir
    for earlier, _ in SECTIONS[: [t for t, _ in SECTIONS].index(title)]:
        if earlier not in done:  # a later section uses the files of earlier ones (e.g. run alone with -k)
            run_section(earlier, cwd)
            done.add(earlier)
    run_section(title, cwd)
    done.add(title)
