"""Parsing: the paper's listings verbatim, positions, round trips, hostile input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import EXAMPLE_PROGRAMS
from fixtures.listings import LISTINGS
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.errors import DtgError, InputError, LairSyntaxError
from dtg.lair import ast
from dtg.lair.parser import parse, parse_file
from dtg.lair.printer import format_expr, format_module


@pytest.mark.parametrize("number", sorted(LISTINGS))
def test_paper_listing_parses_verbatim(number: str) -> None:
    module = parse(LISTINGS[number], f"listing{number}.lair")
    (node,) = module.nodes
    (stmt,) = node.body
    assert stmt.op == "+="
    assert len(stmt.iterators) == len(stmt.extents)


def test_listing_1_structure() -> None:
    node = parse(LISTINGS["1"]).nodes[0]
    assert node.name == "ff"
    assert node.type_params == (ast.TypeParam("T", "float16"),)
    assert [p.name for p in node.size_params] == ["M", "N"]
    assert [d.name for d in node.inputs] == ["W", "x"]
    assert [d.name for d in node.outputs] == ["y"]
    stmt = node.body[0]
    assert [i.name for i in stmt.iterators] == ["i", "j"]
    assert stmt.target == ast.Access("y", (ast.Name("i"),))
    assert stmt.value == ast.BinOp(
        "*", ast.Access("W", (ast.Name("i"), ast.Name("j"))), ast.Access("x", (ast.Name("j"),)))


def test_listing_3_extent_expression_and_positions() -> None:
    node = parse(LISTINGS["3"], "l3.lair").nodes[0]
    stmt = node.body[0]
    assert stmt.extents[1] == ast.BinOp(
        "+", ast.BinOp("-", ast.IntLit(16), ast.IntLit(3)), ast.IntLit(1))
    assert (stmt.loc.line, stmt.loc.column) == (4, 5)
    assert (stmt.target.loc.line, stmt.target.loc.column) == (5, 7)
    assert node.inputs[1].loc.file == "l3.lair"


def test_comments_lets_labels_and_operators() -> None:
    text = """
    # a comment
    let M = 4, K = 2 * M   /* block
                              comment */
    lair pool(M, K): float32 x[K] -> float32 y[M], float32 z[M]
    {
      first: all (i, r) in (M, 2) y[i] max= x[2 * i + r]
      all (i) in (M) z[i] = max(-y[i], 0.5) - 1e-3;
    }
    """
    module = parse(text)
    assert [b.name for b in module.lets] == ["M", "K"]
    body = module.nodes[0].body
    assert body[0].label == "first" and body[0].op == "max="
    assert body[1].label is None and body[1].op == "="
    assert isinstance(body[1].value, ast.BinOp)


@pytest.mark.parametrize("path", EXAMPLE_PROGRAMS, ids=lambda p: p.name)
def test_print_parse_round_trip_on_examples(path: Path) -> None:
    module = parse_file(path)
    printed = format_module(module)
    again = parse(printed)
    assert again == module
    assert format_module(again) == printed


@pytest.mark.parametrize("number", sorted(LISTINGS))
def test_print_parse_round_trip_on_listings(number: str) -> None:
    module = parse(LISTINGS[number])
    assert parse(format_module(module)) == module


NAMES = st.sampled_from(["i", "j", "k", "M"])


def _exprs() -> st.SearchStrategy[ast.Expr]:
    leaves = st.one_of(
        st.integers(0, 50).map(ast.IntLit),
        st.floats(0, 100, allow_nan=False).map(ast.FloatLit),
        NAMES.map(ast.Name),
    )

    def extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        return st.one_of(
            st.builds(ast.BinOp, st.sampled_from(["+", "-", "*", "/", "//", "%"]),
                      children, children),
            st.builds(ast.Neg, children),
            st.builds(lambda a, b: ast.Call("max", (a, b)), children, children),
            st.builds(lambda n, ix: ast.Access(n, tuple(ix)), st.sampled_from(["x", "W"]),
                      st.lists(children, min_size=1, max_size=2)),
        )

    return st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(_exprs())
def test_expression_printer_round_trips(expr: ast.Expr) -> None:
    text = f"lair n(): float16 x[4] -> float16 y[4] {{ all (i) in (4) y[i] = {format_expr(expr)} }}"
    parsed = parse(text).nodes[0].body[0].value
    assert parsed == expr


def test_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.lair"
    path.write_text("")
    with pytest.raises(LairSyntaxError) as info:
        parse_file(path)
    assert info.value.format() == f"{path}:1:1: syntax error: no 'lair' node in file; " \
                                  "expected at least one node"


def test_random_bytes_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "noise.lair"
    path.write_bytes(bytes([0x6C, 0x61, 0x0A, 0xFF, 0xFE, 0x00, 0x13]))
    with pytest.raises(InputError) as info:
        parse_file(path)
    assert info.value.format() == \
        f"{path}:2:1: error: byte 0xff is not UTF-8 text; expected a text file"


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_give_a_dtg_error_or_a_module(tmp_path_factory: pytest.TempPathFactory,
                                                data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.lair"
    path.write_bytes(data)
    try:
        parse_file(path)
    except DtgError as err:
        assert err.loc is None or err.loc.line >= 1
        assert err.format()


@pytest.mark.parametrize("path", EXAMPLE_PROGRAMS, ids=lambda p: p.name)
def test_every_truncation_inside_a_node_is_a_clear_error(path: Path) -> None:
    text = path.read_text()
    starts = [m.start() for m in re.finditer(r"^lair ", text, re.MULTILINE)]
    assert starts
    for begin in starts:
        end = text.index("\n}", begin) + 1
        for cut in range(begin + 1, end, 3):
            with pytest.raises(LairSyntaxError) as info:
                parse(text[:cut], "cut.lair")
            assert info.value.loc is not None and info.value.loc.file == "cut.lair"
            assert "expected" in info.value.message
