"""The examples in the docstrings of npukit.tpp (and the C back end's threads) run and say
what they show."""

import doctest
import importlib

import pytest

MODULES = ["npukit.tpp.csource", "npukit.tpp.einsum", "npukit.tpp.errors",
           "npukit.tpp.operation", "npukit.tpp.primitives", "npukit.c.threads",
           "npukit.tpp.equation", "npukit.tpp.equation_tree", "npukit.tpp.gather",
           "npukit.tpp.packing"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
