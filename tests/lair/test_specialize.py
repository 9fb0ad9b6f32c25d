"""Specialization of parametric nodes from the file and from the command line."""

from __future__ import annotations

import pytest
from fixtures.listings import LISTING_1

from dtg.errors import SpecializationError
from dtg.lair.check import analyze
from dtg.lair.parser import parse
from dtg.lair.specialize import parse_param, specialize


def graph_of(text: str, **params: int | str):
    return analyze(specialize(parse(text), params))


def test_command_line_sizes_specialize_listing_1() -> None:
    graph = graph_of(LISTING_1, M=32, N=16)
    assert graph.tensor("W").shape == (32, 16)
    assert graph.tensor("y").dtype == "float16"
    assert graph.statement("ff").extents == (32, 16)


def test_file_bindings_and_command_line_override() -> None:
    text = "let M = 8, N = M * 2 + 1\n" + LISTING_1
    assert graph_of(text).tensor("x").shape == (17,)
    assert graph_of(text, N=3).tensor("x").shape == (3,)


def test_type_parameter_default_and_override() -> None:
    assert graph_of(LISTING_1, M=2, N=2, T="float32").tensor("y").dtype == "float32"


@pytest.mark.parametrize(("text", "value"),
                         [("M=32", ("M", 32)), (" T = float32 ", ("T", "float32"))])
def test_parse_param(text: str, value: tuple[str, int | str]) -> None:
    assert parse_param(text) == value


@pytest.mark.parametrize("text", ["M", "=3", "M=", "M=3.5", "1M=3"])
def test_malformed_param(text: str) -> None:
    with pytest.raises(SpecializationError, match="malformed --param"):
        parse_param(text)


def test_unknown_param_is_rejected() -> None:
    with pytest.raises(SpecializationError) as info:
        graph_of(LISTING_1, M=2, N=2, Q=1)
    # the words fit both the command line and the API
    assert info.value.message == ("unknown parameter 'Q' (given by --param or params=): no "
                                  "node declares it (parameters: M, N, T)")


@pytest.mark.parametrize(("value", "shown"), [(3.5, "3.5"), (True, "True"), ("1x", "'1x'"),
                                              (None, "None")])
def test_a_value_neither_integer_nor_type_is_rejected(value: object, shown: str) -> None:
    with pytest.raises(SpecializationError) as info:
        graph_of(LISTING_1, M=value, N=2)
    assert info.value.message == (f"parameter 'M' (given by --param or params=) is {shown}; "
                                  "expected an integer size or a type name (float16, float32)")


def test_the_text_of_an_integer_is_that_integer() -> None:
    assert graph_of(LISTING_1, M="8", N=2).tensor("y").shape == (8,)


def test_size_bound_to_a_type_is_rejected() -> None:
    with pytest.raises(SpecializationError, match="bound to the type float32; expected an integer"):
        graph_of(LISTING_1, M="float32", N=2)


def test_type_bound_to_a_size_is_rejected() -> None:
    with pytest.raises(SpecializationError, match="expected a type"):
        graph_of(LISTING_1, M=2, N=2, T=3)


def test_iterator_shadowing_a_parameter_is_rejected() -> None:
    text = "lair n(M): float16 x[M] -> float16 y[M] { all (M) in (M) y[M] = x[M] }"
    with pytest.raises(SpecializationError, match="iterator 'M' has the name of a parameter"):
        graph_of(text, M=2)


def test_let_bound_twice() -> None:
    with pytest.raises(SpecializationError, match="'M' is bound twice"):
        graph_of("let M = 1\nlet M = 2\n" + LISTING_1, N=2)
