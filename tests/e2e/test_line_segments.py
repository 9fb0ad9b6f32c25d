"""Lines cut into segments: where a PE would take several whole streams down its ramp
(every PE of a column takes the whole column's stream on one color), each stream's
elements go on one color per place of their farthest reader along the line, and a PE
takes only the segments it reads from; the routers of the others pass them on. On the
helpers' ``d = a .* b + c`` over 4 x 4 PEs (three streams of 1,024): 4,771 -> 2,919
cycles. Both engines, SIMD and scalar, against the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dtg
from dtg.mapping import inputs
from dtg.mapping.mesh import pe_box
from dtg.pe.fabric import FabricConfig
from dtg.pesim.run import run_program


def _ew3(pes: int, tile: int = 8) -> tuple[str, str]:
    """``d = a .* b + c`` on ``pes`` x ``pes`` PEs, a ``tile`` x ``tile`` tile each: a from
    the north, b from the west, c (sparse) from the south, d east per row of PEs."""
    n, t = pes * tile, tile
    ij = f"i = 0:{n - 1}, j = 0:{n - 1}"
    return (f"""
    lair ew3(): float16 a[{n}][{n}], float16 b[{n}][{n}], float16 c[{n}][{n}] -> float16 d[{n}][{n}]
    {{ all (i, j) in ({n}, {n}) d[i][j] = a[i][j] * b[i][j] + c[i][j] }}
    """, f"""
    rectangle {{ PE[{pes}, {pes}] }}
    placement {{ ew3[i, j] -> PE[j//{t}, i//{t}] }}
    input  a dense  {{ a[{ij}] -> [PE[j//{t}, -1] -> index[i, j mod {t}]] }}
    input  b dense  {{ b[{ij}] -> [PE[-1, i//{t}] -> index[i mod {t}, j]] }}
    input  c sparse {{ c[{ij}] -> [PE[j//{t}, {pes}] -> index[i, j mod {t}]] }}
    output d dense  {{ d[{ij}] -> [PE[{pes}, i//{t}] -> index[i mod {t}, j]] }}
    """)


EW3 = _ew3(4)
EW3_WIDE = _ew3(8)

ONE = ("""
    lair one(): float16 a[32][32] -> float16 d[32][32]
    { all (i, j) in (32, 32) d[i][j] = 2 * a[i][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { one[i, j] -> PE[j//8, i//8] }
    input  a dense  { a[i = 0:31, j = 0:31] -> [PE[j//8, -1] -> index[i, j mod 8]] }
    output d resident
    """)


def test_each_pe_takes_only_its_segment(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *EW3))
    assert compiled.tasks is not None
    for tensor, box in (("a", lambda k: pe_box(0, 3, k, k)),
                        ("b", lambda k: pe_box(k, k, 0, 3)),
                        ("c", lambda k: pe_box(0, 3, 3 - k, 3 - k))):
        flows = compiled.tasks.input_flows(tensor)
        assert len(flows) == 4
        assert len({f.color for f in flows}) == 4
        for k, flow in enumerate(flows):  # nearest segment first
            assert flow.lines.is_equal(box(k)), (tensor, k, flow.lines)


def test_a_stream_alone_is_not_cut(tmp_path: Path) -> None:
    """One stream: each PE takes it as fast as the link brings it, so segments would
    only add colors and tasks."""
    compiled = dtg.compile(write_pair(tmp_path, *ONE))
    assert compiled.tasks is not None
    assert len(compiled.tasks.input_flows("a")) == 1


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_segments_verify_alike_on_both_engines(tmp_path: Path, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *EW3), simd=simd)


def test_segments_are_faster_than_whole_lines(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pair(tmp_path, *EW3)
    cut = run_program(path, seed=1, engine="fast")
    monkeypatch.setattr(inputs, "MAX_SEGMENTS", 1)
    whole = run_program(path, seed=1, engine="fast")
    assert whole.comparison.verified
    assert cut.result.cycles < whole.result.cycles


@st.composite
def tiled_sums(draw: st.DrawFn) -> tuple[str, str]:
    """``d = a + b + c`` shifted by a halo of ``h`` rows in ``c`` on a random grid of
    row and column tiles; ``a`` and ``c`` down the columns (from the north or the south),
    ``b`` along the rows, each dense or sparse."""
    px, py = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    tx, ty = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    h = draw(st.integers(0, 1))
    n, m = py * ty, px * tx
    kinds = [draw(st.sampled_from(["dense", "sparse"])) for _ in range(3)]
    north = draw(st.booleans())
    vertical = "-1" if north else f"{py}"
    lair = (f"lair s(): float16 a[{n}][{m}], float16 b[{n}][{m}], float16 c[{n + h}][{m}]"
            f" -> float16 d[{n}][{m}]\n"
            f"{{ all (i, j) in ({n}, {m}) d[i][j] = a[i][j] + b[i][j] + c[i + {h}][j] }}\n")
    mapping = (
        f"rectangle {{ PE[{px}, {py}] }}\n"
        f"placement {{ s[i, j] -> PE[j//{tx}, i//{ty}] }}\n"
        f"input a {kinds[0]} {{ a[i = 0:{n - 1}, j = 0:{m - 1}] -> "
        f"[PE[j//{tx}, {vertical}] -> index[i, j mod {tx}]] }}\n"
        f"input b {kinds[1]} {{ b[i = 0:{n - 1}, j = 0:{m - 1}] -> "
        f"[PE[-1, i//{ty}] -> index[i mod {ty}, j]] }}\n"
        f"input c {kinds[2]} {{ c[i = 0:{n + h - 1}, j = 0:{m - 1}] -> "
        f"[PE[j//{tx}, {vertical}] -> index[i, j mod {tx}]] }}\n"
        f"output d resident\n")
    return lair, mapping


@pytest.mark.long
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tiled_sums(), st.integers(0, 3))
def test_random_tiles_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             case: tuple[str, str], seed: int) -> None:
    """Segments wherever a PE takes more than the busiest link carries (however little
    more), so that the small cases cut their lines too."""
    monkeypatch.setattr(inputs, "MIN_RAMP_SAVING", 0)
    monkeypatch.setattr(inputs, "RAMP_MARGIN", 0.0)
    path = write_pair(tmp_path, *case)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    segmented = len(compiled.tasks.inputs) > 3
    event("lines cut into segments" if segmented else "whole lines")
    for simd in (True, False):
        outcome = run_program(path, simd=simd, seed=seed, engine="fast")
        assert outcome.comparison.verified, (case, outcome.comparison.mismatch)


@pytest.mark.parametrize(("colors", "segments"), [(8, 2), (5, 1)])
def test_short_of_colors_lines_take_fewer_segments_or_none(tmp_path: Path, colors: int,
                                                            segments: int) -> None:
    """Twelve segments do not fit eight colors: six do (two per stream, with the
    output's two); with five the streams are planned whole again."""
    path = write_pair(tmp_path, *EW3)
    fabric = FabricConfig(colors=colors)
    compiled = dtg.compile(path, fabric=fabric)
    assert compiled.tasks is not None
    assert all(len(compiled.tasks.input_flows(t)) == segments for t in "abc")
    outcome = run_program(path, seed=2, config=fabric, engine="fast")
    assert outcome.comparison.verified


def test_short_of_colors_lines_take_fewer_segments(tmp_path: Path) -> None:
    """Eight segments for each of three streams and the output need 25 colors of 24:
    four segments of two PEs each fit, and are still faster than whole lines."""
    path = write_pair(tmp_path, *EW3_WIDE)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    for tensor in "abc":
        flows = compiled.tasks.input_flows(tensor)
        assert len(flows) == 4 and all(f.segmented for f in flows)
        assert all(int(f.lines.count_val().to_python()) == 16 for f in flows)
    outcome = run_program(path, seed=4, engine="fast")
    assert outcome.comparison.verified and outcome.comparison.exact


CLASH = ("""
    lair clash(): float16 a[32][32], float16 b[32][32], float16 a_1[32] -> float16 d[32][32]
    { all (i, j) in (32, 32) d[i][j] = a[i][j] * a_1[j] + b[i][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { clash[i, j] -> PE[j//8, i//8] }
    input a dense { a[i = 0:31, j = 0:31] -> [PE[j//8, -1] -> index[i, j mod 8]] }
    input b dense { b[i = 0:31, j = 0:31] -> [PE[-1, i//8] -> index[i mod 8, j]] }
    input a_1 sparse { a_1[j = 0:31] -> [PE[-1, 0] -> index[j]] }
    output d resident
    """)


def test_a_segment_is_not_named_like_another_tensor(tmp_path: Path) -> None:
    """``a``'s second segment would be ``a_1``, the name of the tensor ``a_1`` streamed
    whole (found by review: two tasks ``on_a_1``)."""
    path = write_pair(tmp_path, *CLASH)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    names = [f.name for f in compiled.tasks.inputs]
    assert len(names) == len(set(names)) and "a_1" in names
    assert len(compiled.tasks.input_flows("a")) == 4
    assert all(f.name != "a_1" for f in compiled.tasks.input_flows("a"))
    for simd in (True, False):
        outcome = run_program(path, simd=simd, seed=1, engine="fast")
        assert outcome.comparison.verified
