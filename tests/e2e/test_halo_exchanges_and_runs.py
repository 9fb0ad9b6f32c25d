"""Patterns a helper's kernels ran 20 to 200 times their bound in (issue 27):

- an internal tensor whose readers need parts of their neighbours' blocks (a halo: an
  activation's last rows and columns read by the next PE's convolution window) went by
  the indexed protocol, every PE's whole block to the whole region in turns; now one
  exchange without turns per displacement, each sender's part a box, on colors of
  their own (also where blocks wrap to the next row of PEs: 6.8x -> 2.6x on 4 x 4);
- a stream whose order is one linearized sequence (an image row-major, `i * 18 + j`),
  kept whole by PEs that read a few rows of it: a batch's kept elements are no box, but
  one run of the local array, copied by one SIMD instruction cut to its length;
- a column's stream that brings each PE every row's block, reversed per block: the
  position is affine on the elements a PE reads, so it lands in batches;
- an output whose order is linearized (`index[(i mod 4) * 32 + j]`) went by a scalar
  loop; each PE's box sent row-major is one SIMD instruction;
- two tilings that do not line up (9 and 8): the parts a PE sends take more sizes than
  variants do, so one size goes cut to each sender's length (scanned with the varying
  dimension outermost where a PE holds several rows);
- an output computed away from its exit lines (a transpose) went to the PE next to the
  side over the whole region in turns; where the holders of each exit line lie in one
  line across it, it gathers where the two cross, along lines;
- a linearized order of several channels from one entry PE: batches of one channel's
  row each, longer than the usual 64, so that each batch's kept part is one box.

Both engines, SIMD and scalar, against the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair

import dtg

HALO = ("""
    lair act(): float16 x[2][16][16] -> float16 a[2][16][16]
    { all (c, i, j) in (2, 16, 16) a[c][i][j] = max(x[c][i][j], 0) }
    lair conv(): float16 a[2][16][16], float16 w[2][3][3] -> float16 y[14][14]
    { all (i, j, c, p, q) in (14, 14, 2, 3, 3) y[i][j] += a[c][i + p][j + q] * w[c][p][q] }
    """, """
    rectangle { PE[4, 4] }
    placement { act[c, i, j] -> PE[j//4, i//4]; conv[i, j, c, p, q] -> PE[j//4, i//4] }
    input  x resident
    input  w resident
    output y resident
    """)

LINEAR = ("""
    lair dw(): float16 x[4][18][18], float16 w[4][3][3] -> float16 y[4][16][16]
    { all (c, i, j, p, q) in (4, 16, 16, 3, 3) y[c][i][j] += x[c][i + p][j + q] * w[c][p][q] }
    """, """
    rectangle { PE[4, 8] }
    placement { dw[c, i, j, p, q] -> PE[c, i//2] }
    input  x dense { x[c = 0:3, i = 0:17, j = 0:17] -> [PE[c, -1] -> index[i*18 + j]] }
    input  w resident
    output y dense { y[c = 0:3, i = 0:15, j = 0:15] -> [PE[c, 8] -> index[i*16 + j]] }
    """)

BLOCKS = ("""
    lair gemv(): float16 W[32][48], float16 x[48] -> float16 y[32]
    { all (i, j) in (32, 48) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[4, 3] }
    placement { gemv[i, j] -> PE[(j//4) mod 4, j//16] }
    input  x dense { x[j = 0:47] -> [PE[(j//4) mod 4, -1] -> index[11 - ((j//16)*4 + j mod 4)]] }
    input  W resident
    output y dense { y[i = 0:31] -> [PE[4, i//16] -> index[i mod 16]] }
    """)

# k split over the columns; C's partial sums chained east and leaving in a linearized
# order, `index[(i mod 4) * 8 + j]`: each PE's 4 x 8 box row-major, one instruction.
ROWS = ("""
    lair gemm(): float16 A[16][16], float16 B[16][8] -> float16 C[16][8]
    { all (i, j, k) in (16, 8, 16) C[i][j] += A[i][k] * B[k][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { gemm[i, j, k] -> PE[k//4, i//4] }
    input  A resident
    input  B dense { B[k = 0:15, j = 0:7] -> [PE[k//4, -1] -> index[(k mod 4)*8 + j]] }
    output C dense { C[i = 0:15, j = 0:7] -> [PE[4, i//4] -> index[(i mod 4)*8 + j]] }
    """)

# Two sweeps tiled by 9 and by 8 along a row of 8 PEs: the part of a 9-element tile the
# next PE's 8-element window reads is 1 to 7 long, more sizes than variants take: one
# size, cut to each sender's length.
MISALIGNED = ("""
    lair s1(): float16 x[66] -> float16 u[66]
    { all (i) in (66) u[i] = x[i] * 2 }
    lair s2(): float16 u[66], float16 c[3] -> float16 y[64]
    { all (i, q) in (64, 3) y[i] += u[i + q] * c[q] }
    """, """
    rectangle { PE[8, 1] }
    placement { s1[i] -> PE[i//9, 0]; s2[i, q] -> PE[i//8, 0] }
    input  x resident
    input  c resident
    output y resident
    """)

# The same over two rows a PE, the second sweep below the first: the parts vary in
# their inner dimension, so they are scanned column by column and cut there.
MISALIGNED_ROWS = ("""
    lair s1(): float16 x[4][66] -> float16 u[4][66]
    { all (k, i) in (4, 66) u[k][i] = x[k][i] * 2 }
    lair s2(): float16 u[4][66], float16 c[3] -> float16 y[4][64]
    { all (k, i, q) in (4, 64, 3) y[k][i] += u[k][i + q] * c[q] }
    """, """
    rectangle { PE[8, 4] }
    placement { s1[k, i] -> PE[i//9, k//2]; s2[k, i, q] -> PE[i//8, 2 + k//2] }
    input  x resident
    input  c resident
    output y resident
    """)

# Four channels of 66 from one entry PE as one sequence, `index[c * 66 + i]`, every PE
# keeping 18 of each: batches of one channel's row (longer than the usual 64), whose
# kept part is one box.
CHANNEL_ROWS = ("""
    lair conv(): float16 x[4][66], float16 W[2][4][3] -> float16 y[2][64]
    { all (k, w, c, r) in (2, 64, 4, 3) y[k][w] += x[c][w + r] * W[k][c][r] }
    """, """
    rectangle { PE[4, 2] }
    placement { conv[k, w, c, r] -> PE[w//16, k] }
    input  x dense { x[c = 0:3, i = 0:65] -> [PE[0, -1] -> index[c*66 + i]] }
    input  W resident
    output y dense { y[k = 0:1, w = 0:63] -> [PE[4, k] -> index[w]] }
    """)

# A transpose whose blocks for exit row r are computed down column r: gathered on the
# diagonal along columns, then sent east through the PEs beyond it (sparse: with indices).
TRANSPOSED = ('''
    lair tr(): float16 A[32][24] -> float16 B[24][32]
    { all (i, j) in (32, 24) B[j][i] = A[i][j] * 3 }
    ''', '''
    rectangle { PE[4, 4] }
    placement { tr[i, j] -> PE[i//8, j//6] }
    input  A resident
    output B %s { B[j = 0:23, i = 0:31] -> [PE[%s] -> index[%s]] }
    ''')

# A padded 1-D convolution whose blocks of 64 run along rows and wrap to the next row
# (`PE[(i//64) mod 4, i//256]`): the last PE of a row reads the first elements of the
# next row's first PE, so the halo's displacements are (1, 0), (-3, 1) and their
# opposites, four points spread over a box of 35.
WRAPPED = ("""
    lair pd(): float32 x[512] -> float32 xp[516]
    { all (i) in (512) xp[i + 2] = x[i] }
    lair cv(): float32 xp[516], float32 w[5] -> float32 y[512]
    { all (i, r) in (512, 5) y[i] += xp[i + r] * w[r] }
    """, """
    rectangle { PE[4, 2] }
    placement { pd[i] -> PE[(i//64) mod 4, i//256]; cv[i, r] -> PE[(i//64) mod 4, i//256] }
    input x dense { x[i = 0:511] -> [PE[-1, i//256] -> index[i mod 256]] }
    input w resident
    output y resident
    """)

PAIRS = {"halo": HALO, "wrapped": WRAPPED, "linear": LINEAR, "blocks": BLOCKS, "rows": ROWS,
         "misaligned": MISALIGNED, "misaligned_rows": MISALIGNED_ROWS,
         "channel_rows": CHANNEL_ROWS,
         "transposed_east": (TRANSPOSED[0], TRANSPOSED[1] % ("dense", "4, i//8", "j, i mod 8")),
         "transposed_north_sparse": (TRANSPOSED[0], TRANSPOSED[1] % (
             "sparse", "j//6, -1", "j mod 6, i"))}


def test_a_halo_goes_by_displacement_without_turns(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *HALO))
    assert compiled.module is not None
    program = compiled.module.programs[0]
    sends = sorted(c.name for c in program.configs if c.name.endswith("_send"))
    # (from the PEs east, south and south-east: the last rows, columns and corner)
    assert sends == ["out_a_0_send", "out_a_1_send", "out_a_2_send"], sends
    text = dtg.module_text(compiled)
    assert "send(" not in text and "got_a ==" not in text


def test_a_halo_wrapping_to_the_next_row_goes_by_displacement(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *WRAPPED))
    assert compiled.module is not None
    program = compiled.module.programs[0]
    sends = sorted(c.name for c in program.configs if c.name.endswith("_send"))
    assert len(sends) == 4, sends  # (one per displacement, no turns)
    assert "got_xp ==" not in dtg.module_text(compiled)


def test_a_linearized_stream_is_kept_by_runs(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *LINEAR))
    assert compiled.arrivals is not None and compiled.tasks is not None
    assert compiled.tasks.buffered == ("x",)
    (batch,) = compiled.arrivals.batches
    assert batch.keep is not None and batch.keep.length is not None
    assert batch.keep.dst_strides == (1,) and batch.keep.src_strides == (1,)


def test_blocks_reversed_per_row_land_in_batches(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *BLOCKS))
    assert compiled.arrivals is not None
    assert [b.flow for b in compiled.arrivals.batches] == ["x"]


def test_a_linearized_output_order_is_sent_by_one_instruction(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *ROWS))
    assert compiled.module is not None
    program = compiled.module.programs[0]
    outs = [c for c in program.configs if c.name.startswith("out_C")]
    assert outs and all(c.variants == ((4, 8),) for c in outs), outs
    assert "send(" not in dtg.module_text(compiled)


def test_parts_of_many_lengths_go_cut_to_their_length(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *MISALIGNED))
    text = dtg.module_text(compiled)
    assert "send(" not in text
    assert "_send length(PE_X + 1)" in text and "_recv length(PE_X)" in text


def test_parts_varying_in_an_inner_dimension_are_scanned_with_it_outermost(
        tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *MISALIGNED_ROWS))
    assert compiled.module is not None
    text = dtg.module_text(compiled)
    assert "send(" not in text
    sends = [c for c in compiled.module.programs[0].configs if "_send" in c.name]
    # (the largest part, columns of two rows: the column dimension first, cut to a
    # length)
    assert any(c.variants == ((9, 2),) for c in sends), sends
    assert "_send length(" in text


def test_a_linearized_order_lands_a_row_per_batch(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *CHANNEL_ROWS))
    assert compiled.arrivals is not None
    assert [b.size for b in compiled.arrivals.batches] == [66]


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", list(PAIRS))
def test_verified_alike_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)
