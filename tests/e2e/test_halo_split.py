"""Tree streams cut into their halos and the rest (mapping.inputs.halo_split).

A multicast tree carries every wavelet of its source to every PE it reaches: where each
PE's block comes from the external PE beside it and a neighbour reads a few elements of
it (a stencil's halo), the neighbour took the whole block down its ramp, and a row
band's tree ran the whole band along the neighbouring row. Cut, the halo goes by a tree
on a color of its own and the rest straight down the source's line. A helper's 5 x 5
convolution with row bands from west and east: 3,658 -> 2,231 cycles. Both engines,
SIMD and scalar, against the reference interpreter."""

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


def _blocks(pes: int, block: int, taps: int = 5) -> tuple[str, str]:
    """A 1-D ``taps``-point stencil, each PE's block of x from the external PE north of
    it, the last ``taps - 1`` points from the last one; y south, block by block."""
    n, h = pes * block, taps - 1
    return (f"""
    lair st(): float16 x[{n + h}], float16 c[{taps}] -> float16 y[{n}]
    {{ all (i, r) in ({n}, {taps}) y[i] += c[r] * x[i + r] }}
    """, f"""
    rectangle {{ PE[{pes}, 1] }}
    placement {{ st[i, r] -> PE[i//{block}, 0] }}
    input  x dense {{ x[i = 0:{n + h - 1}] -> [PE[i//{block}, -1] -> index[i mod {block}]]
                        : i < {n};
                      x[i = 0:{n + h - 1}] -> [PE[{pes - 1}, -1] -> index[i - {n - block}]]
                        : i >= {n} }}
    input  c resident
    output y dense {{ y[i = 0:{n - 1}] -> [PE[i//{block}, 1] -> index[i mod {block}]] }}
    """)


# A 3 x 3 convolution over 18 x 34 inputs on 4 x 2 PEs: each 8-row band's west half of
# the columns from the west, the east half from the east, nearest column first; the two
# rows of halo below each band come from the next band's sources.
HALVES = ("""
    lair conv(): float16 x[18][34], float16 f[3][3] -> float16 y[16][32]
    { all (i, j, r, s) in (16, 32, 3, 3) y[i][j] += x[i + r][j + s] * f[r][s] }
    """, """
    rectangle { PE[4, 2] }
    placement { conv[i, j, r, s] -> PE[j//8, i//8] }
    input x dense { x[i = 0:17, j = 0:33] -> [PE[-1, i//8] -> index[i mod 8, j]]
                      : i < 16 and j < 17;
                    x[i = 0:17, j = 0:33] -> [PE[-1, 1] -> index[i - 8, j]]
                      : i >= 16 and j < 17;
                    x[i = 0:17, j = 0:33] -> [PE[4, i//8] -> index[i mod 8, 33 - j]]
                      : i < 16 and j >= 17;
                    x[i = 0:17, j = 0:33] -> [PE[4, 1] -> index[i - 8, 33 - j]]
                      : i >= 16 and j >= 17 }
    input f resident
    output y resident
    """)

BLOCKS = _blocks(4, 128)


def _bands(block: int, band: int) -> tuple[str, str]:
    """A 3 x 3 stencil on 2 x 2 PEs of ``block`` x ``block`` outputs, its input in row
    bands of ``band`` rows from the west (the left half of the columns) and the east:
    bands that do not match the PEs' rows, so a band's first rows are read by the row of
    PEs above and its last ones by the row below."""
    n = 2 * block + 2
    half = n // 2
    return (f"""
    lair st(): float16 x[{n}][{n}], float16 f[3][3] -> float16 y[{n - 2}][{n - 2}]
    {{ all (i, j, r, s) in ({n - 2}, {n - 2}, 3, 3) y[i][j] += x[i + r][j + s] * f[r][s] }}
    """, f"""
    rectangle {{ PE[2, 2] }}
    placement {{ st[i, j, r, s] -> PE[j//{block}, i//{block}] }}
    input x dense {{ x[i = 0:{n - 1}, j = 0:{n - 1}] -> [PE[-1, i//{band}] ->
                       index[i mod {band}, j]] : j < {half};
                     x[i = 0:{n - 1}, j = 0:{n - 1}] -> [PE[2, i//{band}] ->
                       index[i mod {band}, j - {half}]] : j >= {half} }}
    input f resident
    output y resident
    """)


# 8 x 8 blocks, bands of 9 rows: the halo of each band's source is a first row read by
# the row above and a last row read by the row below (not one box of rows together).
MISALIGNED = _bands(8, 9)


def _ramp(compiled: dtg.api.Compilation, x: int, y: int) -> int:
    """Wavelets of ``x`` that reach PE[x, y]'s core, over all its flows."""
    assert compiled.tasks is not None
    total = 0
    for flow in compiled.tasks.input_flows("x"):
        there = flow.reaching().intersect_range(pe_box(x, x, y, y)).domain()
        total += int(there.count_val().to_python())
    return total


def test_a_neighbour_takes_only_its_halo(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *BLOCKS))
    assert compiled.tasks is not None
    flows = compiled.tasks.input_flows("x")
    assert all(f.halo for f in flows)
    # its block (the first four of which are on the halo's colors, as on every source)
    # and the next block's first four: not the next block whole
    assert _ramp(compiled, 1, 0) == 128 + 4


def test_whole_trees_without_the_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "halo_split", lambda *a, **k: None)
    compiled = dtg.compile(write_pair(tmp_path, *BLOCKS))
    assert _ramp(compiled, 1, 0) == 2 * 128


def test_a_halo_read_above_and_below_goes_in_two_parts(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pair(tmp_path, *MISALIGNED)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    assert any(f.halo for f in compiled.tasks.input_flows("x"))
    cut = _ramp(compiled, 0, 0)
    monkeypatch.setattr(inputs, "halo_split", lambda *a, **k: None)
    whole = _ramp(dtg.compile(path), 0, 0)
    # (PE[0, 0] reads 10 rows of 10: the rows of its band and the first of the next; whole,
    # it took both bands of the west half and the next band of the east half)
    assert 100 <= cut < whole, (cut, whole)


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("pair", [BLOCKS, HALVES, MISALIGNED],
                         ids=["blocks", "halves", "misaligned"])
def test_verified_alike_on_both_engines(tmp_path: Path, pair: tuple[str, str],
                                        simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *pair), simd=simd)


@pytest.mark.parametrize("pair", [BLOCKS, HALVES], ids=["blocks", "halves"])
def test_the_cut_is_faster_than_whole_trees(tmp_path: Path, pair: tuple[str, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pair(tmp_path, *pair)
    cut = run_program(path, seed=1, engine="fast")
    monkeypatch.setattr(inputs, "halo_split", lambda *a, **k: None)
    whole = run_program(path, seed=1, engine="fast")
    assert cut.comparison.verified and whole.comparison.verified
    assert cut.result.cycles < whole.result.cycles


def test_not_cut_where_the_neighbours_read_most(tmp_path: Path) -> None:
    """Blocks of 8: the neighbour reads half of each, which spares it too little."""
    compiled = dtg.compile(write_pair(tmp_path, *_blocks(4, 8)))
    assert compiled.tasks is not None
    assert not any(f.halo for f in compiled.tasks.inputs)


def test_short_of_colors_the_halos_go_back_into_their_trees(tmp_path: Path) -> None:
    """Cut, the blocks stencil needs 4 halo colors, 1 for the rest and 1 for y; with 5
    the trees stay whole (4 colors, taken apart)."""
    path = write_pair(tmp_path, *BLOCKS)
    fabric = FabricConfig(colors=5)
    compiled = dtg.compile(path, fabric=fabric)
    assert compiled.tasks is not None
    assert not any(f.halo for f in compiled.tasks.inputs)
    outcome = run_program(path, seed=2, config=fabric, engine="fast")
    assert outcome.comparison.verified


@st.composite
def banded(draw: st.DrawFn) -> tuple[str, str]:
    """A ``k``-tap 1-D stencil on random blocks, each PE's block from the external PE
    beside it (north or south), the tail from the last; dense or sparse."""
    pes, block = draw(st.integers(2, 4)), draw(st.integers(4, 12))
    taps = draw(st.integers(2, 4))
    kind = draw(st.sampled_from(["dense", "sparse"]))
    side = draw(st.sampled_from(["-1", "1"]))
    n, h = pes * block, taps - 1
    lair = (f"lair st(): float16 x[{n + h}], float16 c[{taps}] -> float16 y[{n}]\n"
            f"{{ all (i, r) in ({n}, {taps}) y[i] += c[r] * x[i + r] }}\n")
    mapping = (
        f"rectangle {{ PE[{pes}, 1] }}\n"
        f"placement {{ st[i, r] -> PE[i//{block}, 0] }}\n"
        f"input x {kind} {{ x[i = 0:{n + h - 1}] -> [PE[i//{block}, {side}] -> "
        f"index[i mod {block}]] : i < {n};\n"
        f"  x[i = 0:{n + h - 1}] -> [PE[{pes - 1}, {side}] -> index[i - {n - block}]]"
        f" : i >= {n} }}\n"
        f"input c resident\n"
        f"output y resident\n")
    return lair, mapping


@pytest.mark.long
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(3, 8), st.integers(1, 3), st.integers(0, 3))
def test_random_bands_verify(tmp_path: Path, block: int, extra: int, seed: int) -> None:
    """Row bands one to three rows longer than the PEs' blocks, cut where predicted
    faster: verified with and without SIMD."""
    path = write_pair(tmp_path, *_bands(block, block + extra))
    for simd in (True, False):
        outcome = run_program(path, simd=simd, seed=seed, engine="fast")
        assert outcome.comparison.verified, outcome.comparison.mismatch


@pytest.mark.long
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(banded(), st.integers(0, 3))
def test_random_blocks_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              case: tuple[str, str], seed: int) -> None:
    """Cut wherever a neighbour reads anything less than the whole block, so that the
    small cases are cut too."""
    monkeypatch.setattr(inputs, "MIN_RAMP_SAVING", 0)
    monkeypatch.setattr(inputs, "RAMP_MARGIN", 0.0)
    path = write_pair(tmp_path, *case)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    event("cut" if any(f.halo for f in compiled.tasks.inputs) else "whole")
    for simd in (True, False):
        outcome = run_program(path, simd=simd, seed=seed, engine="fast")
        assert outcome.comparison.verified, (case, outcome.comparison.mismatch)
