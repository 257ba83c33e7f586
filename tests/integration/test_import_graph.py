"""The package's modules import each other without a loop: every import counted — at module level
or inside a function, relative or absolute, and by name (``importlib.import_module`` and module
names kept as strings) — plus the package ``__init__`` that importing a submodule runs first."""

from __future__ import annotations

import ast
import pathlib

import networkx as nx
import pytest

import blowfish_te

ROOT = pathlib.Path(blowfish_te.__file__).parent
PACKAGE = "blowfish_te"


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _targets(node: ast.AST, name: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = name.split(".") if is_package else name.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__"):
        return [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE + "."):
        return [node.value]  # a module named in a string, e.g. for a lazy import
    return []


def import_graph() -> nx.DiGraph:
    """Edges importer → imported module, with the packages a submodule import runs first."""
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, name, is_package):
                named = target
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if isinstance(node, ast.ImportFrom) and target == PACKAGE and named.startswith(PACKAGE + ".") and name != PACKAGE:
                    graph.add_edge(name, PACKAGE)  # a name the package's __init__ defines (from .. import x)
                chain = []
                while target and target != PACKAGE:  # the target and the packages above it
                    chain.append(target)
                    target = target.rpartition(".")[0]
                for module in chain:
                    if module != name and not name.startswith(module + "."):
                        graph.add_edge(name, module)
    return graph


def test_the_graph_sees_imports_of_every_kind():
    graph = import_graph()
    assert graph.has_edge("blowfish_te.cli", PACKAGE)  # from . import __version__: a name the package defines
    assert not graph.has_edge("blowfish_te.strategies.store", PACKAGE)  # the version from its leaf module
    assert graph.has_edge("blowfish_te.release", "blowfish_te.routes")  # module level
    assert graph.has_edge("blowfish_te.mechanisms.base", "blowfish_te.routes")
    assert graph.has_edge("blowfish_te.routes", "blowfish_te.strategies")  # the package a submodule import runs
    assert len(graph) > 50 and graph.number_of_edges() > 200


@pytest.mark.slow
def test_no_module_imports_itself_through_others():
    graph = import_graph()
    loops = [sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]
    assert loops == [], f"modules importing each other in a loop: {loops}"


@pytest.mark.slow
def test_the_routes_sit_below_the_mechanisms_and_the_release():
    """The layering of the release seam: routes know mechanisms by their tags only."""
    below_routes = nx.descendants(import_graph(), "blowfish_te.routes")
    assert not {m for m in below_routes if m.startswith(("blowfish_te.mechanisms", "blowfish_te.release",
                                                           "blowfish_te.constraints", "blowfish_te.budget"))}


#: The package's floors, lowest first, along the data's path: a module imports only from its own
#: floor or from floors below it (docs/architecture.md). Each entry is a module or a package
#: (its submodules with it); ``_*`` is every private helper module at the top level.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundations", ("_*", "errors", "noise", "secure", "progress", "metrics")),
    ("structures", ("policies", "forest", "trees", "workloads", "sensitivity", "io", "datasets")),
    ("algebra", ("transform", "strategies", "partitions", "bounds", "smoothing", "selection")),
    ("mechanisms", ("routes", "mechanisms", "constraints", "kmeans")),
    ("release", ("release", "budget", "ledger")),
    ("applications", ("audit", "evaluation", "explore", "cli", "console", "testing", "")),
)


def floor_of(module: str) -> int:
    """The floor of ``module`` (an index into :data:`LAYERS`); KeyError when no floor names it."""
    rest = module.removeprefix(PACKAGE).removeprefix(".")
    top = rest.split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if member == top or (member == "_*" and top.startswith("_") and "." not in rest):
                return index
    raise KeyError(f"{module} is on no floor: add it to LAYERS (and to docs/architecture.md)")


def test_every_module_has_a_floor_and_imports_only_from_its_floor_or_below():
    graph = import_graph()
    floors = {module: floor_of(module) for module in graph}  # every module placed, or KeyError names it
    assert floors[PACKAGE] == len(LAYERS) - 1 and floors["blowfish_te._version"] == 0
    upward = sorted(f"{a} ({LAYERS[floors[a]][0]}) -> {b} ({LAYERS[floors[b]][0]})"
                    for a, b in graph.edges if floors[b] > floors[a])
    assert upward == [], "imports running up a floor:\n" + "\n".join(upward)


def test_the_floor_check_catches_an_import_running_up():
    graph = import_graph()
    graph.add_edge("blowfish_te.strategies.store", "blowfish_te.release")  # what strategies once did
    floors = {module: floor_of(module) for module in graph}
    assert [(a, b) for a, b in graph.edges if floors[b] > floors[a]] == [("blowfish_te.strategies.store", "blowfish_te.release")]
    with pytest.raises(KeyError, match="on no floor"):
        floor_of("blowfish_te.newmodule")
