"""``routing-gym``'s argparse parser for sphinx-argparse, with its help texts made safe as reST;
and, as a Sphinx extension, the CLI page's per-command argument headings kept out of the contents.

sphinx-argparse reads every help string as reStructuredText; the CLI's help is plain text
(``--lambda-*``), so the characters reST treats as markup are escaped here, not in the CLI; a
`backticked` span becomes an inline literal (escaped, its backticks showed on the page).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from routing_gym.cli import build_parser

MARKUP = re.compile(r"([*`|_\\])")
CODE_SPAN = re.compile(r"`([^`]+)`")
# sphinx-argparse makes a section of each command's argument groups: as headings, ~20 of each
# filled the page's contents. They become rubrics (bold, no contents entry).
ARGUMENT_HEADINGS = ("Positional Arguments", "Named Arguments")


def _escape(text: str | None) -> str | None:
    if text is None or text == argparse.SUPPRESS:
        return None
    parts = CODE_SPAN.split(text)  # even indices: plain text; odd: the inside of a `code` span
    return "".join(f"``{part}``" if i % 2 else MARKUP.sub(r"\\\1", part) for i, part in enumerate(parts))


def parser() -> argparse.ArgumentParser:
    root = build_parser()
    todo = [root]
    while todo:
        current = todo.pop()
        current.description = _escape(current.description)
        for action in current._actions:
            if action.help != argparse.SUPPRESS:
                action.help = _escape(action.help)
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    choice.help = _escape(choice.help)
                todo.extend(action.choices.values())
    return root


def _argument_headings_to_rubrics(app: Any, doctree: Any) -> None:
    from docutils import nodes

    for section in list(doctree.findall(nodes.section)):
        title = section.children[0] if section.children else None
        if isinstance(title, nodes.title) and title.astext() in ARGUMENT_HEADINGS:
            section.replace_self([nodes.rubric(title.astext(), title.astext()), *section.children[1:]])


def setup(app: Any) -> dict[str, Any]:
    # before Sphinx's own doctree-read listeners (priority 500) collect the contents
    app.connect("doctree-read", _argument_headings_to_rubrics, priority=400)
    return {"parallel_read_safe": True, "version": "1"}
