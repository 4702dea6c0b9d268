"""The test suite's own habits (tests/conftest.py): shared code lives in helper modules, and the
import path is set in one place (setup.cfg), not per module."""

import ast
import pathlib

import pytest

pytestmark = pytest.mark.unit

MODULES = sorted(pathlib.Path(__file__).parent.glob("*.py"))


def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_imports_a_test_module(path):
    imported = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not {m for m in imported if m.split(".")[0].startswith("test_")}, \
        "move what tests share into a helper module (tests/conftest.py lists them)"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_edits_sys_path(path):
    edits = [node.lineno for node in ast.walk(_tree(path))
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert not edits, f"sys.path at lines {edits}: use `pythonpath` in setup.cfg's [tool:pytest]"
