"""Batches of whole groups over a window of one outer dimension: a stream of many rows
whose rows do not all fit one landing array lands in batches of as many consecutive
rows as fit (a divisor of the rows a PE receives), one task per batch instead of a data
and a control task per row (a 3 x 3 convolution over 66 streamed rows: 6,806 cycles
before, 4,384 after). The data-flow check rebuilds what each batch runs and where the
engines land its elements. Both engines, SIMD and scalar, against the interpreter."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dtg
from dtg.codegen import groupbatch
from dtg.codegen.dataflow import DataFlowError, check_batch
from dtg.mapping import poly
from dtg.pesim.run import run_program

CONV = ("""
    lair conv(): float16 x[66][20], float16 w[3][3] -> float16 y[64][18]
    { all (i, j, a, b) in (64, 18, 3, 3) y[i][j] += w[a][b] * x[i + a][j + b] }
    """, """
    rectangle { PE[1, 4] }
    placement { conv[i, j, a, b] -> PE[0, i//16] }
    input  x KIND { x[i = 0:65, j = 0:19] -> [PE[0, -1] -> index[i, j]] }
    input  w resident
    output y resident
    """)


# a horizontal and a vertical 3-point stencil scaled by a tensor computed on the PE (so
# that x is kept in memory for them): each PE needs a cross of its rows, whose corners
# it does not read; a window's box of them is copied, corners too
CROSS = ("""
    lair cross(): float16 x[66][20], float16 w[64][18]
      -> float16 h[64][18], float16 v[64][18], float16 t[64][18]
    {
      T: all (i, j) in (64, 18) t[i][j] = w[i][j] * w[i][j]
      H: all (i, j, r) in (64, 18, 3) h[i][j] += t[i][j] * x[i + 1][j + r]
      V: all (i, j, r) in (64, 18, 3) v[i][j] += t[i][j] * x[i + r][j + 1]
    }
    """, """
    rectangle { PE[1, 4] }
    placement { T[i, j] -> PE[0, i//16]; H[i, j, r] -> PE[0, i//16];
                V[i, j, r] -> PE[0, i//16] }
    input  x dense { x[i = 0:65, j = 0:19] -> [PE[0, -1] -> index[i, j]] }
    input  w resident
    output h resident
    output v resident
    """)


def _write(tmp_path: Path, lair: str, mapping: str) -> Path:
    (tmp_path / "p.lair").write_text(textwrap.dedent(lair))
    (tmp_path / "p.map").write_text(textwrap.dedent(mapping))
    return tmp_path / "p.lair"


def _conv(tmp_path: Path, kind: str) -> Path:
    return _write(tmp_path, CONV[0], CONV[1].replace("KIND", kind))


def test_rows_land_in_windows(tmp_path: Path) -> None:
    """66 rows of 20 do not fit 1,024 slots; 33 rows do: two batches per PE (a sparse
    stream's windows cost their clearing too: the cost model takes rows one by one)."""
    compiled = dtg.compile(_conv(tmp_path, "dense"))
    assert compiled.arrivals is not None and compiled.tasks is not None
    assert compiled.memory is not None
    (batch,) = compiled.arrivals.batches
    assert (batch.groups, batch.window, batch.size) == (33, 33, 20)
    check_batch(compiled.tasks, compiled.memory, batch)  # as planned: quiet
    with pytest.raises(DataFlowError):  # a window of other rows than the batch's
        check_batch(compiled.tasks, compiled.memory, dataclasses.replace(batch, window=11))


def test_the_check_rejects_a_window_left_out(tmp_path: Path) -> None:
    """The check derives where windows start from the arrivals, not from the plan: a
    batch whose context drops the second window (rows 33 to 65) is refused."""
    compiled = dtg.compile(_conv(tmp_path, "dense"))
    assert compiled.arrivals is not None and compiled.tasks is not None
    assert compiled.memory is not None
    (batch,) = compiled.arrivals.batches
    name = batch.fixed[-1]
    first = poly.param_pw_aff(batch.context, name)
    only_first = batch.context.intersect(first.eq_set(first.sub(first)))
    with pytest.raises(DataFlowError, match="run other instances than their arrivals"):
        check_batch(compiled.tasks, compiled.memory,
                    dataclasses.replace(batch, context=only_first))


def test_the_check_rejects_windows_that_do_not_tile_the_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planner that took windows of 20 of the 66 rows (its last window would never
    close: the engines close a batch at every G-th end mark) is stopped by the check."""
    monkeypatch.setattr(groupbatch, "_window", lambda values, per_value, max_slots: 20)
    with pytest.raises(DataFlowError, match="do not divide"):
        dtg.compile(_conv(tmp_path, "dense"))


def test_rows_starting_at_other_indices_are_not_windowed(tmp_path: Path) -> None:
    """Each row's first index depends on the row (``index[i, j + i]``): a window of rows
    would count them from its first row's, so none is formed; the rows land one by one
    (before, the plan was made and the data-flow check stopped the compiler)."""
    path = _write(tmp_path, """
        lair shifted(): float16 x[50][40], float16 w[40] -> float16 y[50][40]
        { all (i, c) in (50, 40) y[i][c] = w[c] * x[i][c] }
        """, """
        rectangle { PE[1, 2] }
        placement { shifted[i, c] -> PE[0, i//25] }
        input  x dense { x[i = 0:49, j = 0:39] -> [PE[0, -1] -> index[i, j + i]] }
        input  w resident
        output y resident
        """)
    compiled = dtg.compile(path)
    assert compiled.arrivals is not None
    assert not any(b.window for b in compiled.arrivals.batches)
    for engine in ("fast", "simpy"):
        assert run_program(path, engine=engine).comparison.verified


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_windows_verify(tmp_path: Path, kind: str, simd: bool, engine: str) -> None:
    path = _conv(tmp_path, kind)
    for seed in (0, 1):
        outcome = run_program(path, simd=simd, seed=seed, engine=engine)
        assert outcome.comparison.verified, outcome.comparison.mismatch


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_cross_of_rows_is_kept_by_its_box(tmp_path: Path, engine: str) -> None:
    path = _write(tmp_path, *CROSS)
    compiled = dtg.compile(path)
    assert compiled.arrivals is not None
    (batch,) = compiled.arrivals.batches
    assert batch.window == 33 and batch.keep is not None
    for seed in (0, 1):
        outcome = run_program(path, seed=seed, engine=engine)
        assert outcome.comparison.verified, outcome.comparison.mismatch


@st.composite
def row_streams(draw: st.DrawFn) -> tuple[str, str]:
    """A 1-D stencil over rows (or a copy: one tap), the rows streamed down a column of
    PEs (mostly dense; sparse streams are mostly taken row by row), each PE's instances
    on a block of rows; more rows than fit one landing array, half of them fitting."""
    pes = draw(st.integers(1, 4))
    block = draw(st.sampled_from([6, 10, 12, 16, 20, 24]))
    taps = draw(st.sampled_from([1, 3]))
    rows = pes * block + taps - 1
    width = draw(st.integers(1024 // rows + 1, max(1024 // rows + 1, 2048 // rows)))
    kind = draw(st.sampled_from(["dense", "dense", "sparse"]))
    lair = (f"lair rs(): float16 x[{rows}][{width}], float16 w[{taps}] -> "
            f"float16 y[{pes * block}][{width}]\n"
            f"{{ all (i, j, a) in ({pes * block}, {width}, {taps}) "
            f"y[i][j] += w[a] * x[i + a][j] }}\n")
    mapping = (f"rectangle {{ PE[1, {pes}] }}\n"
               f"placement {{ rs[i, j, a] -> PE[0, i//{block}] }}\n"
               f"input  x {kind} {{ x[i = 0:{rows - 1}, j = 0:{width - 1}] -> "
               f"[PE[0, -1] -> index[i, j]] }}\n"
               "input  w resident\noutput y resident\n")
    return lair, mapping


@pytest.mark.long
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=row_streams())
def test_random_row_streams(tmp_path: Path, case: tuple[str, str]) -> None:
    path = _write(tmp_path, *case)
    for engine in ("fast", "simpy"):
        outcome = run_program(path, engine=engine)
        assert outcome.comparison.verified, (engine, outcome.comparison.mismatch)
