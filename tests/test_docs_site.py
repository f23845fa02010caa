"""The docs site's generated parts (docs/_ext): env pages, docstrings as reST, results pages.

The full build (``sphinx-build -W``) and the Chromium check run in ``.ci/run``; these tests keep
the pieces that generate pages honest on every test run, in seconds.
"""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "_ext"))

docutils_core = pytest.importorskip("docutils.core", reason="the docs extra (pip install -e '.[docs]')")
napoleon = pytest.importorskip("sphinx.ext.napoleon", reason="the docs extra (pip install -e '.[docs]')")

import docstrings  # noqa: E402  (docs/_ext)
import generate  # noqa: E402


def rst_problems(text: str) -> list[str]:
    """docutils' warnings and errors for a reST text, minus Sphinx's own roles and directives
    (``:func:``, ``versionadded``), which plain docutils does not know."""
    stream = io.StringIO()
    docutils_core.publish_doctree(text, settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": stream})
    return [line for line in stream.getvalue().splitlines()
            if re.search(r"\((WARNING|ERROR|SEVERE)/", line) and "Unknown interpreted text role" not in line
            and "Unknown directive type" not in line]


def documented_objects():
    import routing_gym
    import routing_gym_agents

    for package in (routing_gym, routing_gym_agents):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            yield info.name, module
            for name, obj in vars(module).items():
                if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                    continue
                if inspect.isclass(obj) or inspect.isfunction(obj):
                    yield f"{info.name}.{name}", obj
                if inspect.isclass(obj):
                    for member, value in vars(obj).items():
                        if not member.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
                            yield f"{info.name}.{name}.{member}", value


def test_every_docstring_reads_as_rest_after_the_hook():
    config = napoleon.Config()
    problems = {}
    for name, obj in documented_objects():
        doc = inspect.cleandoc(obj.__doc__ or "")  # own docstring only, as autodoc_inherit_docstrings=False
        if not doc:
            continue
        lines = napoleon.NumpyDocstring(str(napoleon.GoogleDocstring(doc, config)), config).lines()
        found = rst_problems("\n".join(docstrings.to_rst(lines)))
        if found:
            problems[name] = found
    assert not problems, problems


def test_the_hook_fixes_what_rest_would_reject():
    markdown = ["A `Dict` with:", "- `text`: the question;", "- `benchmark`: its set.", "Then prose.",
                "", "## Rewards", "| name | value |", "|---|---|", "| a | 1 |", "", "``Agent``s and ``x``/``y``."]
    assert rst_problems("\n".join(markdown))  # as written: reST complains
    rst = docstrings.to_rst(markdown)
    assert rst_problems("\n".join(rst)) == []
    assert ".. rubric:: Rewards" in rst and ".. list-table::" in rst
    assert "``Agent``\\ s and ``x``/``y``." in rst  # glued literal escaped, adjacent pair left alone


@pytest.mark.parametrize("slug, class_path, env_id", generate.ENV_PAGES)
def test_env_pages_have_minigrid_sections_and_real_spaces(slug, class_path, env_id):
    import gymnasium as gym

    page = generate.env_page(slug, class_path, env_id)
    for section in ("## Description", "## Action Space", "## Observation Space", "## Rewards", "## Episode End"):
        assert section in page, (slug, section)
    env = gym.make(env_id, tournament="default")
    assert f"`{env.action_space!r}`" in page  # read off a real instance, not typed in
    ids_row = next(line for line in page.splitlines() if line.startswith("| Ids |"))
    assert f"`{env_id}`" in ids_row


def test_headings_of_an_included_file_never_jump_levels():
    text = "# Title\n\n### Deep\n\n```bash\n# a comment, not a heading\n```\n\n## Back\n"
    # "###" right under the title goes one level down, not two; the fenced comment is untouched.
    assert generate._shift_headings(text, top=2) == (
        "## Title\n\n### Deep\n\n```bash\n# a comment, not a heading\n```\n\n### Back")


def test_results_links_are_rerooted_or_dropped(tmp_path):
    folder = tmp_path / "results" / "study"
    folder.mkdir(parents=True)
    (folder / "table.csv").write_text("a\n1\n")
    page = tmp_path / "docs" / "_generated" / "results" / "study.md"
    text = generate._rewrite_links("[the table](table.csv), [gone](missing.csv), [web](https://x.org)", folder, page)
    assert "{download}`../../../results/study/table.csv`" in text
    assert "gone (`missing.csv`)" in text and "[web](https://x.org)" in text


def test_readme_commands_are_the_getting_started_ones():
    readme = (REPO / "README.md").read_text()
    start = (REPO / "docs" / "getting-started.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.DOTALL)[:2]
    assert commands and all(command in start for command in commands)
    assert "pytest" in commands[1] and "routing-gym compare" in commands[0]
