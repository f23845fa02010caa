"""Imports inside ``routing_gym`` form no cycle (layers import only downward).

The graph is read with ``ast`` from the source files (no module is imported): an edge
``a -> b`` for every ``import b`` / ``from b import ...`` in ``a``, where ``b`` is a module
under ``routing_gym`` (``from pkg import name`` counts ``pkg.name`` when that is a module).
Blocks under ``if TYPE_CHECKING:`` never run and are not edges. Edges between a package and
its own submodules are one layer (Python runs a package's ``__init__`` before its
submodules anyway), so they are left out.

Two graphs: module-level imports only (must have no cycle at all), and every import,
including the late ones inside functions (no cycle beyond the known ones listed below).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "routing_gym"



def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _import_nodes(tree: ast.Module, late: bool) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run at import time (module level, in if/try/with blocks and
    class bodies too), and with ``late`` also those inside functions."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            stack.extend(node.orelse)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif late or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(path: Path, name: str, modules: set[str], late: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(tree, late):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            target = f"{base}.{node.module}" if node.module else base
        else:
            target = node.module or ""
        targets.add(target)
        targets.update(f"{target}.{alias.name}" for alias in node.names)
    edges = set()
    for target in targets:  # "import a.b.c" imports a, a.b and a.b.c
        parts = target.split(".")
        edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    # a package and its own submodules are one layer
    return {m for m in edges & modules if m != name and not (m.startswith(name + ".") or name.startswith(m + "."))}


def import_graph(late: bool = False) -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported_modules(path, name, set(files), late) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_what_runs():
    graph = import_graph()
    assert "routing_gym.tournament.card" in graph["routing_gym.tournament.io"]
    # tournament.py reads and writes through io.py, never the other way round
    assert "routing_gym.tournament.io" in graph["routing_gym.tournament.tournament"]
    assert "routing_gym.tournament.tournament" not in graph["routing_gym.tournament.io"]
    assert "routing_gym.collect.meter_base" in graph["routing_gym.collect.replay"]
    assert "routing_gym.collect.replay" in graph["routing_gym.collect.meters"]
    # the CLI loads heavy modules inside its handlers: late edges only
    assert "routing_gym.collect.runner" not in graph["routing_gym.cli.collect"]
    assert "routing_gym.collect.runner" in import_graph(late=True)["routing_gym.cli.collect"]


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]


def test_no_import_cycles_at_module_level():
    assert cycles(import_graph()) == []


def test_no_import_cycles_through_late_imports_either():
    assert [sorted(c) for c in cycles(import_graph(late=True))] == []


def test_envs_never_import_the_agents_package():
    """Agents depend on routing_gym, never the reverse; the env layer not even lazily."""
    for path in sorted((PACKAGE / "envs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "routing_gym_agents" for n in names), f"{path.name} imports {names}"


LAYERS = ("tournament", "sources", "envs", "eval", "cli")  # lowest first


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_layers_import_only_downward_at_module_level():
    upward = sorted((m, d) for m, deps in import_graph().items() for d in deps
                    if _layer(m) is not None and _layer(d) is not None and _layer(d) > _layer(m))
    assert upward == []


def test_the_scorer_sits_below_the_envs_that_use_it():
    graph = import_graph()
    assert "routing_gym.tournament.scoring" in graph["routing_gym.envs.replay"]
    assert graph["routing_gym.tournament.scoring"] == {"routing_gym.tournament.tournament"}
    assert "routing_gym.eval.scoring" not in graph  # no shim at the old home
