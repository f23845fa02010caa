"""Read the project's docstrings as reStructuredText for autodoc.

The docstrings are written to be read in an editor and in the env pages (Minigrid-style
``## Action Space`` sections, Markdown pipe tables, lists that start right under a sentence,
``Agent``s with a plural s). reStructuredText needs blank lines around lists, tables as
directives and inline literals that end at a word boundary; this hook rewrites those few
constructs, leaving the source docstrings as they are.
"""

from __future__ import annotations

import re
from typing import Any

LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+\.) \S")
HEADING = re.compile(r"^(\s*)#{2,4} (.+)$")
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
TABLE_RULE = re.compile(r"^\s*\|[\s:|-]+\|\s*$")
UNDERLINE = re.compile(r"^([-=~^])\1{2,}$")
LITERAL = re.compile(r"``.+?``")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unglue(line: str) -> str:
    """An inline literal glued to a word on either side (``Agent``s): reST wants an escaped
    space there. Literals are paired left to right; a line holding half of one is left alone."""
    if line.count("``") % 2:
        return line
    out, pos = [], 0
    for match in LITERAL.finditer(line):
        start, end = match.span()
        out.append(line[pos:start])
        out.append(("\\ " if start and line[start - 1].isalnum() else "") + match.group(0)
                   + ("\\ " if end < len(line) and line[end].isalnum() else ""))
        pos = end
    return "".join(out) + line[pos:]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def to_rst(lines: list[str]) -> list[str]:
    out: list[str] = []
    item_indent: int | None = None  # indentation of the list item we are inside, if any
    literal_indent: int | None = None  # inside a ``::`` literal block indented deeper than this
    i = 0
    while i < len(lines):
        line = lines[i]
        if literal_indent is not None and line.strip() and _indent(line) <= literal_indent:
            literal_indent = None
        if literal_indent is not None:
            out.append(line)
            i += 1
            continue
        if line.rstrip().endswith("::"):
            literal_indent = _indent(line)
        if TABLE_ROW.match(line) and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1]):
            pad = " " * _indent(line)
            rows = [_cells(line)]
            i += 2
            while i < len(lines) and TABLE_ROW.match(lines[i]):
                rows.append(_cells(lines[i]))
                i += 1
            out += ["", f"{pad}.. list-table::", f"{pad}   :header-rows: 1", ""]
            for row in rows:
                out += [f"{pad}   {'* -' if n == 0 else '  -'} {cell or ' '}" for n, cell in enumerate(row)]
            out.append("")
            continue
        heading = HEADING.match(line)
        if heading:
            out += ["", f"{heading.group(1)}.. rubric:: {heading.group(2)}", ""]
            item_indent = None
            i += 1
            continue
        if UNDERLINE.match(line.strip()) and out and out[-1].strip() and len(line.strip()) < len(out[-1].strip()):
            line = _indent(line) * " " + line.strip()[0] * len(out[-1].strip())
        line = _unglue(line)
        previous = out[-1] if out else ""
        item = LIST_ITEM.match(line)
        if item:
            if previous.strip():
                out.append("")
            item_indent = _indent(line)
        elif line.strip() and item_indent is not None and _indent(line) <= item_indent:
            if previous.strip():  # the list ended without a blank line
                out.append("")
            item_indent = None
        elif not line.strip() and i + 1 < len(lines) and lines[i + 1].strip() and not LIST_ITEM.match(lines[i + 1]) \
                and item_indent is not None and _indent(lines[i + 1]) <= item_indent:
            item_indent = None
        out.append(line)
        i += 1
    return out


def process(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    lines[:] = to_rst(lines)


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", process)
    return {"parallel_read_safe": True, "version": "1"}
