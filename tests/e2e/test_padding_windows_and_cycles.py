"""Patterns a helper's kernels ran 20 to 115 times their bound in, or were refused
(issue 27):

- a padding copy read on the PE that wrote it: the border nobody writes was taken for
  elements to bring, and the whole region exchanged its blocks element by element;
- a centred window over an internal tensor tiled in 2-D: each PE keeps parts of its 8
  neighbours' blocks, of three sizes. The halo by displacement needs 16 configurations,
  more than a PE has, and the block turns refused parts of several sizes, so the
  indexed protocol ran; now the halo goes in two phases, across then down (the corners
  by the PEs beside), 8 configurations; and the turns take a size variant per part, the
  budget giving up the halo for them before the indexed protocol, where it weighs the
  configurations they free against the cycles they cost;
- a cyclic placement of sizes the mesh does not divide (30 over 4): each PE's sizes,
  7 or 8, are floors of its coordinates, which the size enumeration refused, so the
  GEMM ran scalar;
- a stream whose last row band is short (18, 18, 18, 6): its receivers' group counts
  were refused as not countable (the sizes' bounding box, 6 to 18, was taken for their
  number).

Each verified exactly on both engines, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair

import dtg
import dtg.codegen.sharing

PAD_SAME_PE = ("""
    lair pd(): float16 x[4][32] -> float16 xp[4][34]
    { all (c, i) in (4, 32) xp[c][i + 1] = x[c][i] }
    lair cv(): float16 xp[4][34], float16 w[3] -> float16 y[4][32]
    { all (c, i, r) in (4, 32, 3) y[c][i] += xp[c][i + r] * w[r] }
    """, """
    rectangle { PE[4, 1] }
    placement { pd[c, i] -> PE[c, 0]; cv[c, i, r] -> PE[c, 0] }
    input  x dense { x[c = 0:3, i = 0:31] -> [PE[c, -1] -> index[i]] }
    input  w resident
    output y resident
    """)

CENTRED_WINDOW = ("""
    lair pad(): float16 x[16][16] -> float16 xp[18][18]
    { all (i, j) in (16, 16) xp[i + 1][j + 1] = x[i][j] }
    lair conv(): float16 xp[18][18], float16 W[2][3][3] -> float16 y[2][16][16]
    { all (k, i, j, a, b) in (2, 16, 16, 3, 3) y[k][i][j] += xp[i + a][j + b] * W[k][a][b] }
    """, """
    rectangle { PE[4, 4] }
    placement { pad[i, j] -> PE[j//4, i//4]; conv[k, i, j, a, b] -> PE[j//4, i//4] }
    input  x dense { x[r = 0:15, c = 0:15] -> [PE[-1, r//4] -> index[r mod 4, c]] }
    input  W resident
    output y resident
    """)

CYCLIC_UNEVEN = ("""
    lair mm(): float16 A[30][30], float16 B[30][30] -> float16 C[30][30]
    { all (i, j, k) in (30, 30, 30) C[i][j] += A[i][k] * B[k][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { mm[i, j, k] -> PE[j mod 4, i mod 4] }
    input  A dense { A[i = 0:29, k = 0:29] -> [PE[-1, i mod 4] -> index[i//4, k]] }
    input  B dense { B[k = 0:29, j = 0:29] -> [PE[j mod 4, -1] -> index[k, j//4]] }
    output C dense { C[i = 0:29, j = 0:29] -> [PE[4, i mod 4] -> index[i//4, j]] }
    """)

SHORT_LAST_BAND = ("""
    lair sq(): float16 x[2][60][12] -> float16 y[2][60][12]
    { all (c, i, j) in (2, 60, 12) y[c][i][j] = x[c][i][j] * x[c][i][j] }
    """, """
    rectangle { PE[2, 4] }
    placement { sq[c, i, j] -> PE[j//6, i//18] }
    input  x dense { x[c = 0:1, r = 0:59, q = 0:11] -> [PE[-1, r//18] -> index[c, r mod 18, q]] }
    output y resident
    """)

# An upsampling copy, then a centred window over it tiled otherwise: the window's halo in
# two phases takes 8 configurations, which the per-wavelet copy and the batches need
# too; the block turns take 4.
UPSAMPLED = ("""
    lair up(): float16 x[16][16] -> float16 u[34][34]
    { all (i, j, a, b) in (16, 16, 2, 2) u[2*i + a + 1][2*j + b + 1] = x[i][j] }
    lair cv(): float16 u[34][34], float16 W[2][3][3] -> float16 y[2][32][32]
    { all (k, i, j, a, b) in (2, 32, 32, 3, 3) y[k][i][j] += u[i + a][j + b] * W[k][a][b] }
    """, """
    rectangle { PE[4, 4] }
    placement { up[i, j, a, b] -> PE[j//4, i//4]; cv[k, i, j, a, b] -> PE[j//8, i//8] }
    input  x dense { x[i = 0:15, j = 0:15] -> [PE[j//4, -1] -> index[i, j mod 4]] }
    input  W resident
    output y dense { y[k = 0:1, i = 0:31, j = 0:31] -> [PE[-1, i//8] -> index[k, i mod 8, j]] }
    """)

PAIRS = {"pad_same_pe": PAD_SAME_PE, "upsampled": UPSAMPLED, "centred_window": CENTRED_WINDOW,
         "cyclic_uneven": CYCLIC_UNEVEN, "short_last_band": SHORT_LAST_BAND}


def test_a_padding_read_where_it_is_written_moves_nothing(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAD_SAME_PE))
    assert compiled.tasks is not None and not compiled.tasks.exchanges


def test_a_centred_window_goes_in_two_phases(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *CENTRED_WINDOW))
    assert compiled.module is not None
    text = dtg.module_text(compiled)
    assert "send(" not in text and "got_xp_b" in text  # (across, then down)
    sends = {c.name for p in compiled.module.programs for c in p.configs if "_send" in c.name}
    assert len(sends) == 4, sends  # (east, west, then north, south: not 8 displacements)


def test_a_centred_window_takes_block_turns_with_a_variant_per_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dtg.codegen.sharing, "two_phase_halo", lambda *a, **k: None)
    compiled = dtg.compile(write_pair(tmp_path, *CENTRED_WINDOW))
    assert compiled.module is not None
    text = dtg.module_text(compiled)
    assert "send(" not in text  # (no indexed sends: blocks by SIMD)
    recv = [c for p in compiled.module.programs for c in p.configs if "_recv" in c.name]
    # (the parts kept of the neighbours' 4 x 4 blocks: a row, a column, a corner)
    assert {v for c in recv for v in c.variants} == {(1, 1), (1, 4), (4, 1)}


def test_the_budget_trades_a_halo_for_the_block_turns(tmp_path: Path) -> None:
    """The budget weighs the configurations the turns free against the cycles they cost
    (``halo:u``), among its other options: here the halo gives way."""
    compiled = dtg.compile(write_pair(tmp_path, *UPSAMPLED))
    assert compiled.module is not None
    text = dtg.module_text(compiled)
    assert "got_u_b" not in text and "send(" not in text
    shares = [t for p in compiled.module.programs for t in p.tasks
              if t.name.startswith("share_u")]
    assert len(shares) == 1 and shares[0].batch  # (one block turn task, by SIMD)


def test_a_cyclic_placement_of_uneven_sizes_keeps_simd(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *CYCLIC_UNEVEN))
    assert compiled.decisions is not None
    (decision,) = [d for name, d in compiled.decisions.items() if name.startswith("mm")]
    assert decision.used, decision.reason
    assert {v[1:] for v in decision.variants} == {(7, 7), (7, 8), (8, 7), (8, 8)}


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", list(PAIRS))
def test_verified_alike_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)
