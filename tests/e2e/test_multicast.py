"""Streams spread by multicast trees (issue 10): inputs needed away from their source's
line where no border line is free for adapters, from several sources whose trees
overlap (one color each), split over two sides, with multi-dimensional dense indices;
compiled and verified exactly, with and without SIMD."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import verify_pair

from dtg.codegen.colors import colors_used
from dtg.errors import UnsupportedMappingError
from dtg.lair.frontend import program_from_text
from dtg.mapping.flows import TaskGraph
from dtg.mapping.spec import parse_mapping
from dtg.mapping.tasks import build_task_graph
from dtg.mapping.validate import validate_mapping
from dtg.pesim.run import run_program

GEMV = """
lair gemv<T=float16>(): T W[16][16], T x[16] -> T y[16]
{ all (i, j) in (16, 16) y[i] += W[i][j] * x[j] }
"""
CONV = """
lair conv<T=float16>(): T x[18], T w[3] -> T y[16]
{ all (i, k) in (16, 3) y[i] += x[i + k] * w[k] }
"""
CASES = {
    # x enters at one PE; every column needs its part, and row 0 computes (no adapters).
    "one_source_busy_border": (GEMV, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//4, i//4] }
        input  x sparse { x[j = 0:15] -> [PE[1, -1] -> index[j]] }
        input  W resident
        output y dense { y[i = 0:15] -> [PE[4, i//4] -> index[i mod 4]] }
        """),
    "one_source_dense": (GEMV, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//4, i//4] }
        input  x dense { x[j = 0:15] -> [PE[3, -1] -> index[j]] }
        input  W resident
        output y resident
        """),
    # Each PE of a row needs its own x tile and its neighbour's halo: overlapping trees.
    "halo_from_every_column": (CONV, """
        rectangle { PE[4, 1] }
        placement { conv[i, k] -> PE[i//4, 0] }
        input  x sparse { x[j = 0:17] -> [PE[j//5, -1] -> index[j mod 5]] }
        input  w resident
        output y resident
        """),
    # Half of x from the north, half from the south.
    "two_sides": (GEMV, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//4, i//4] }
        input  x sparse { x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]] : j < 8;
                          x[j = 0:15] -> [PE[j//4, 4] -> index[j mod 4]] : j >= 8 }
        input  W resident
        output y resident
        """),
    # x from the west, needed down the columns (a transposed entry).
    "from_the_west_down_columns": (GEMV, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//4, i//4] }
        input  x dense { x[j = 0:15] -> [PE[-1, j//4] -> index[j mod 4]] }
        input  W resident
        output y resident
        """),
    # A 2-D dense index through a tree: groups counted by end marks.
    "two_dim_dense_index": (GEMV, """
        rectangle { PE[2, 2] }
        placement { gemv[i, j] -> PE[j//8, i//8] }
        input  x dense { x[j = 0:15] -> [PE[0, -1] -> index[j//4, j mod 4]] }
        input  W resident
        output y resident
        """),
    # Uneven tiles of a stream with a 2-D index: the last source sends fewer groups, so
    # its receivers count fewer end marks.
    "uneven_groups_dense": ("""
        lair gemv<T=float16>(): T W[30][18], T x[18] -> T y[30]
        { all (i, j) in (30, 18) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//5, i//8] }
        input  x dense { x[j = 0:17] -> [PE[j//5, -1] -> index[(j mod 5)//2, j mod 2]] }
        input  W resident
        output y resident
        """),
    "uneven_groups_tree": ("""
        lair gemv<T=float16>(): T W[30][18], T x[18] -> T y[30]
        { all (i, j) in (30, 18) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//5, i//8] }
        input  x sparse { x[j = 0:17] -> [PE[3 - j//5, -1] -> index[(j mod 5)//2, j mod 2]] }
        input  W resident
        output y resident
        """),
}



@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_verifies(tmp_path: Path, name: str, simd: bool) -> None:
    verify_pair(tmp_path, *CASES[name], simd=simd)


def _task_graph(name: str) -> TaskGraph:
    lair, mapping = CASES[name]
    model = program_from_text(textwrap.dedent(lair)).model
    return build_task_graph(model, validate_mapping(parse_mapping(textwrap.dedent(mapping)),
                                                    model))


def test_overlapping_trees_take_one_color_each() -> None:
    """Neighbouring sources' trees overlap (the halo), so they never share a color; and
    since each source sends its own indices (``j mod 5``), sources of one color would
    give a PE a position in the stream that isl writes by piece: each takes its own."""
    tg = _task_graph("halo_from_every_column")
    flows = tg.input_flows("x")
    assert len(flows) == 4 and len({f.color for f in flows}) == 4
    assert all(f.members is not None and f.order_on_pe() is not None for f in flows)
    for f in flows:
        assert f.members is not None
        assert f.members.domain().count_val().to_python() == 1
    model = tg.model
    _, mapping = CASES["halo_from_every_column"]
    whole = build_task_graph(model, validate_mapping(parse_mapping(textwrap.dedent(mapping)),
                                                     model), split=False)
    assert len(whole.input_flows("x")) == 2
    assert all(f.order_on_pe() is None for f in whole.input_flows("x"))


def test_a_stream_on_two_sides_is_carried_by_two_flows() -> None:
    tg = _task_graph("two_sides")
    assert sorted((f.name, f.side) for f in tg.input_flows("x")) == [("x_N", "N"),
                                                                      ("x_S", "S")]


def test_too_many_overlapping_trees_is_a_located_error(tmp_path: Path) -> None:
    """x[j] enters at row j from the west and is read down column j: every tree crosses
    every other, so 26 of them need 26 colors, more than the fabric's 24, shared or not."""
    (tmp_path / "p.lair").write_text(textwrap.dedent("""
        lair gemv<T=float16>(): T W[26][26], T x[26] -> T y[26]
        { all (i, j) in (26, 26) y[i] += W[i][j] * x[j] }
        """))
    (tmp_path / "p.map").write_text(textwrap.dedent("""\
        rectangle { PE[26, 26] }
        placement { gemv[i, j] -> PE[j, i] }
        input  x dense { x[j = 0:25] -> [PE[-1, j] -> index[0]] }
        input  W resident
        output y resident
        """))
    with pytest.raises(UnsupportedMappingError) as info:
        run_program(tmp_path / "p.lair")
    text = info.value.format()
    assert text.startswith(f"{tmp_path / 'p.map'}:3:1: error: the routes need 28 colors, "
                           "more than the fabric's 24, even where routes that never meet "
                           "share one (routed: input 'x' (multicast trees) 26, partial "
                           "results of 'y' 2)"), text


def _many_rows(n: int, *, streamed_inputs: bool) -> tuple[str, str]:
    """``n`` independent statements, one per row, each streamed out east (a chain of two
    colors) and, if asked, fed by its own stream from the west: 2n or 3n colors, on
    routes that never meet."""
    ins = ", ".join(f"float16 a{k}[4]" for k in range(n))
    outs = ", ".join(f"float16 b{k}[4]" for k in range(n))
    body = "\n".join(f"  s{k}: all (i) in (4) b{k}[i] = 2 * a{k}[i]" for k in range(n))
    lair = f"lair p():\n  {ins}\n    -> {outs}\n{{\n{body}\n}}\n"
    placement = "; ".join(f"s{k}[i] -> PE[i//2, {k}]" for k in range(n))
    lines = [f"rectangle {{ PE[2, {n}] }}", f"placement {{ {placement} }}"]
    for k in range(n):
        kind = "dense" if k % 2 else "sparse"
        lines.append(f"input a{k} {kind} {{ a{k}[i = 0:3] -> [PE[-1, {k}] -> index[i]] }}"
                     if streamed_inputs else f"input a{k} resident")
        lines.append(f"output b{k} dense {{ b{k}[i = 0:3] -> [PE[2, {k}] -> index[i]] }}")
    return lair, "\n".join(lines) + "\n"


@pytest.mark.parametrize("streamed_inputs", [False, True], ids=["chains", "chains+inputs"])
def test_routes_that_never_meet_share_colors(tmp_path: Path, streamed_inputs: bool) -> None:
    lair, mapping = _many_rows(13, streamed_inputs=streamed_inputs)
    (tmp_path / "p.lair").write_text(lair)
    (tmp_path / "p.map").write_text(mapping)
    for simd in (True, False):
        outcome = run_program(tmp_path / "p.lair", simd=simd)
        assert outcome.comparison.verified, outcome.comparison.mismatch
        assert len(colors_used(outcome.module)) <= 24
