"""The Examples sections of graphtune.x86's docstrings run and agree with the code."""

import doctest
import importlib
import pkgutil

import pytest

import graphtune.x86

MODULES = sorted(m.name for m in pkgutil.iter_modules(graphtune.x86.__path__, "graphtune.x86."))


@pytest.mark.parametrize("name", ["graphtune.x86"] + MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
