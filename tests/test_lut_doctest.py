"""The examples in the docstrings of npukit.lut run and say what they show."""

import doctest
import importlib

import pytest

MODULES = ["catalogue", "cli", "demo", "design", "fit", "semantics", "sigmoid", "special",
           "table"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"npukit.lut.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
