"""Pages generated from the code and the committed results at every docs build.

Written under ``docs/_generated/`` (not committed) when the builder starts:

- ``envs/<id>.md``: one page per env family, Minigrid style — a table of the ids, action and
  observation spaces read off an instance on the shipped default tournament, then the class
  docstring (its ``## Description`` / ``## Action Space`` / ``## Observation Space`` /
  ``## Rewards`` / ... sections are Markdown already);
- ``agents.md`` and ``rewards.md``: the agent and reward registries as tables;
- ``results/<folder>.md``: every folder under ``experiments/results`` — its README (written by the
  script that produced it) and its tables and figures, the files themselves, never retyped.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
REPO = DOCS.parent
OUT = DOCS / "_generated"
RESULTS = REPO / "experiments" / "results"

# (page slug, class path, the ids that build it), in the order of the env section.
ENV_PAGES = (
    ("replay", "routing_gym.envs.routing_env:RoutingEnv", "RoutingGym/Replay-v0"),
    ("budget", "routing_gym.envs.budget_env:BudgetRoutingEnv", "RoutingGym/Budget-v0"),
    ("changing-pool", "routing_gym.envs.changing_pool_env:ChangingPoolEnv", "RoutingGym/ChangingPool-v0"),
    ("multi-turn", "routing_gym.envs.multiturn_env:MultiTurnRoutingEnv", "RoutingGym/MultiTurn-v0"),
    ("serving", "routing_gym.envs.serving_env:ServingEnv", "RoutingGym/Serving-v0"),
)


def _object(path: str) -> Any:
    import importlib

    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:  # unchanged pages keep Sphinx's cache valid
        path.write_text(text)


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def env_page(slug: str, class_path: str, env_id: str) -> str:
    import gymnasium as gym

    from routing_gym.envs import registration

    cls = _object(class_path)
    env = gym.make(env_id, tournament="default")
    ids = [env_id, registration.features_id(env_id)]
    if env_id in registration.ONE_QUERY_IDS:
        ids.append(registration.stream_id(env_id))
    # The text space's charset is every character of the tournament: show its kind, not the set.
    observation = env.observation_space
    shown = {key: (f"Text(max_length={space.max_length})" if isinstance(space, gym.spaces.Text) else repr(space))
             for key, space in getattr(observation, "spaces", {"": observation}).items()}
    rows = [
        ("Ids", ", ".join(f"`{i}`" for i in ids)),
        ("Class", f"`{cls.__module__}.{cls.__qualname__}`"),
        ("Action Space (default tournament)", f"`{env.action_space!r}`"),
        ("Observation Space (default tournament)", "<br>".join(f"`{k}`: `{v}`" for k, v in shown.items())),
        ("Creation", f'`gym.make("{env_id}", tournament="default")`'),
    ]
    env.close()
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {name} | {_cell(value)} |" for name, value in rows)
    doc = inspect.cleandoc(cls.__doc__ or "")
    title = env_id.split("/", 1)[1].rsplit("-v", 1)[0]
    return f"# {title}\n\n{table}\n\n{doc}\n"


def envs_pages() -> None:
    from routing_gym.envs import registration

    for slug, class_path, env_id in ENV_PAGES:
        _write(OUT / "envs" / f"{slug}.md", env_page(slug, class_path, env_id))
    presets = "\n".join(f"| `{env_id}` | `{name}` |" for name, env_id in registration.PRESET_IDS.items())
    _write(OUT / "envs" / "presets.md", (
        "# Procedural presets\n\n"
        "Each id is `RoutingGym/Replay-v0` over a generated tournament of that preset "
        "(`routing-gym data generate --list` shows the presets and their knobs); "
        f"`{registration.PROCEDURAL_ID}` takes `preset=` and the generator's knobs as keywords. "
        "Each also exists as `-features-v0` and `-features-stream-v0`.\n\n"
        "| id | preset |\n| --- | --- |\n" + presets + "\n"
    ))


def agents_page() -> None:
    from routing_gym_agents.registry import AGENTS, load_plugins

    load_plugins()
    rows = []
    for name in sorted(AGENTS):
        cls, defaults = AGENTS[name]
        summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        kwargs = ", ".join(f"`{k}={v!r}`" for k, v in defaults.items())
        rows.append(f"| `{name}` | `{cls.__module__}.{cls.__qualname__}` | {_cell(kwargs)} | "
                    f"{cls.feedback} | {_cell(summary)} |")
    _write(OUT / "agents.md", "| name | class | registered with | feedback | what it does |\n"
                              "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")


def rewards_page() -> None:
    from routing_gym.envs.rewards import reward_catalog

    rows = [f"| `{entry['name']}` | {_cell(', '.join(f'`{k}={v}`' for k, v in entry['coefficients'].items()))} | "
            f"{_cell(entry['gate'])} | {_cell(entry['meaning'])} |" for entry in reward_catalog()]
    _write(OUT / "rewards.md", "| reward | coefficients (defaults) | gate | meaning |\n| --- | --- | --- | --- |\n"
                               + "\n".join(rows) + "\n")


LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _rewrite_links(text: str, folder: Path, page: Path) -> str:
    """A README's relative links point into its folder; the page lives elsewhere: re-root them
    (files that exist become downloads or images, anything else is left as plain text)."""

    def fix(match: re.Match) -> str:
        bang, label, target = match.groups()
        if re.match(r"[a-z]+://|#|mailto:", target):
            return match.group(0)
        resolved = (folder / target.split("#")[0]).resolve()
        if not resolved.exists() or resolved.is_dir():
            return f"{label} (`{target}`)"
        rel = os.path.relpath(resolved, page.parent)
        return f"{bang}[{label}]({rel})" if bang else f"[{label}]({{download}}`{rel}`)"

    return LINK.sub(fix, text)


def _shift_headings(text: str, top: int = 3) -> str:
    """A file's headings sit below the page's own: its first heading becomes level ``top``, the
    others keep their relative depth but never jump more than one level (outside code fences)."""
    out, fenced, first, previous = [], False, None, top - 1
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"(#{1,6}) (.*)", line)
        if heading:
            depth = len(heading.group(1))
            first = depth if first is None else first
            previous = max(top, min(depth - first + top, previous + 1, 6))
            line = "#" * previous + " " + heading.group(2)
        out.append(line)
    return "\n".join(out)


def results_pages() -> None:
    index = ["# Results", "",
             "Every folder of `experiments/results`, as its script wrote it: the README names the command "
             "that wrote the folder; tables and figures are the committed files, shown as they are.", "",
             "```{toctree}", ":maxdepth: 1", ""]
    pages = OUT / "results"
    if pages.exists():
        shutil.rmtree(pages)  # a retired folder must not leave its page behind
    for folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        page = pages / f"{folder.name}.md"
        parts = [f"# `{folder.name}`", ""]
        readme = folder / "README.md"
        if readme.exists():
            parts.append(_shift_headings(_rewrite_links(readme.read_text(), folder, page), top=2))
        files = sorted(p for p in folder.rglob("*") if p.is_file() and "cells" not in p.relative_to(folder).parts)
        for table in (p for p in files if p.suffix == ".md" and p != readme):
            text = _shift_headings(_rewrite_links(table.read_text(), table.parent, page))
            parts += ["", f"## `{table.relative_to(folder)}`", "", text]
        for figure in (p for p in files if p.suffix == ".png"):
            rel = os.path.relpath(figure, page.parent)
            parts += ["", f"## `{figure.relative_to(folder)}`", "", f"![{figure.name}]({rel})"]
        parts += ["", "## Files", ""]
        parts += [f"- {{download}}`{p.relative_to(folder)} <{os.path.relpath(p, page.parent)}>`" for p in files]
        _write(page, "\n".join(parts) + "\n")
        index.append(f"{folder.name}")
    index.append("```")
    _write(pages / "index.md", "\n".join(index) + "\n")


def generate(app: Any) -> None:
    envs_pages()
    agents_page()
    rewards_page()
    results_pages()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "version": "1"}
