"""Layering of graphtune's modules, read from their source with ``ast`` (nothing imported, no TVM).

- No import cycle among graphtune's modules, counting imports inside functions (a cycle hidden
  in a function is a cycle all the same); imports under ``if TYPE_CHECKING:`` do not count.
- ``graphtune.measure`` imports nothing of ``graphtune.compiler`` or ``graphtune.opgroups``:
  the op-group layer sits above both.
- The TVM-free core loads no TVM: no module it imports at module level (itself included)
  imports ``tvm`` or ``tvm_ffi`` at module level.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "graphtune"

CORE = ("graphtune.ops", "graphtune.taps", "graphtune.layouts", "graphtune.graph", "graphtune.solve",
        "graphtune.config", "graphtune.lazy", "graphtune.errors")
"""The TVM-free core (``graphtune.solve`` with its submodules)."""

TVM = ("tvm", "tvm_ffi")


@dataclass(frozen=True)
class Import:
    """One import of a module: what it names, and whether it runs when the module is imported."""

    target: str
    module_level: bool


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST, module_level: bool = True) -> Iterator[tuple[ast.stmt, bool]]:
    """Import statements under ``tree`` that run, and whether at module level (not in a function);
    the bodies of ``if TYPE_CHECKING:`` are skipped."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, module_level
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield from _statements(ast.Module([other], []), module_level)
        else:
            inner = module_level and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                           ast.Lambda))
            yield from _statements(node, inner)


def _targets(module: str, is_package: bool, node: ast.stmt, known: dict[str, Path]) -> list[str]:
    """Dotted names an import statement of ``module`` loads: a known module where the name is
    one (``from . import x86``), else the module imported from."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
        base = ".".join(parts + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names]


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The known module a dotted name belongs to (``graphtune.x86.specs.SPECS`` -> its module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(known: dict[str, Path] | None = None) -> dict[str, list[Import]]:
    """Every module's imports that run (module- or function-level, not ``TYPE_CHECKING``)."""
    known = _modules() if known is None else known
    found: dict[str, list[Import]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        found[module] = [Import(target, level) for node, level in _statements(tree)
                         for target in _targets(module, is_package, node, known)]
    return found


def import_graph(found: dict[str, list[Import]], module_level_only: bool = False) -> nx.DiGraph:
    """Module -> graphtune module it imports (a module's own packages left out: importing a
    module runs them anyway, they are no dependency of it)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(found)
    for module, edges in found.items():
        for edge in edges:
            target = _owner(edge.target, found)
            if target is None or target == module or module.startswith(target + "."):
                continue
            if edge.module_level or not module_level_only:
                graph.add_edge(module, target)
    return graph


@pytest.fixture(scope="module")
def found() -> dict[str, list[Import]]:
    return imports()


def test_no_import_cycle_among_graphtune_modules(found):
    cycles = sorted(nx.simple_cycles(import_graph(found)), key=len)
    assert cycles == [], "import cycles (function-level imports count): " + "; ".join(
        " -> ".join(cycle + cycle[:1]) for cycle in cycles[:10])


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    """The check itself: a cycle closed by an import inside a function is one; an import under
    ``if TYPE_CHECKING:`` is none."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import g\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from . import a\nelse:\n    import json\n")
    (package / "d.py").write_text("from .c import x\n")
    found = imports(_modules(package))
    assert [sorted(cycle) for cycle in nx.simple_cycles(import_graph(found))] == [["pkg.a", "pkg.b"]]
    assert found["pkg.c"] == [Import("typing", True), Import("json", True)]
    assert list(import_graph(found).successors("pkg.d")) == ["pkg.c"]


def test_measure_imports_neither_the_compiler_nor_op_groups(found):
    bad = sorted(f"{module} -> {edge.target}" for module, edges in found.items()
                 if module == "graphtune.measure" or module.startswith("graphtune.measure.")
                 for edge in edges
                 if edge.target.split(".")[:2] in (["graphtune", "compiler"], ["graphtune", "opgroups"]))
    assert bad == []


def test_the_core_loads_no_tvm(found):
    graph = import_graph(found, module_level_only=True)
    core = [m for m in found if m in CORE or m.startswith("graphtune.solve.")]
    assert len(core) > len(CORE)  # the solvers too
    for module in core:
        loaded = {module} | nx.descendants(graph, module)
        tvm = sorted(f"{m} imports {edge.target}" for m in loaded for edge in found[m]
                     if edge.module_level and edge.target.split(".")[0] in TVM)
        assert tvm == [], f"importing {module} loads TVM: {tvm}"
