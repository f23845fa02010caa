"""``routing-gym``'s argparse parser for sphinx-argparse, with its help texts made safe as reST.

sphinx-argparse reads every help string as reStructuredText; the CLI's help is plain text
(``--lambda-*``), so the characters reST treats as markup are escaped here, not in the CLI.
"""

from __future__ import annotations

import argparse
import re

from routing_gym.cli import build_parser

MARKUP = re.compile(r"([*`|_\\])")


def _escape(text: str | None) -> str | None:
    return None if text is None or text == argparse.SUPPRESS else MARKUP.sub(r"\\\1", text)


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
