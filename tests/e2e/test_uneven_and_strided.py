"""Mappings as researchers write them that ran in scalar loops, 6 to 17 times their bound:

- uneven tiles (a smaller last tile) whose partial sums combine along a chain and whose
  totals are gathered by an exchange to PEs next to another side: the chain's SIMD
  instructions and the exchange's blocks get one size variant per tile size, selected
  by the PE (and, for a block received, by its sender);
- a cyclic placement whose streams a PE keeps every k-th element of: each batch's kept
  elements are copied by one SIMD instruction with a stride (a box of the lattice);
- a stream's order permuted by residue classes (odd positions first, a stride-4
  interleave): each class goes apart on a color of its own and lands in batches.

Both engines, SIMD and scalar, against the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair

import dtg

# y = W x, 40 rows in tiles of 16 (the last 8) on 3 PE rows, 4 columns of 8; y summed
# along each row, then gathered north: block r leaves above column r.
UNEVEN = ("""
    lair gemv(): float16 W[40][32], float16 x[32] -> float16 y[40]
    { all (i, j) in (40, 32) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[4, 3] }
    placement { gemv[i, j] -> PE[j//8, i//16] }
    input  W resident
    input  x dense { x[j = 0:31] -> [PE[j//8, 3] -> index[j mod 8]] }
    output y dense { y[i = 0:39] -> [PE[i//16, -1] -> index[i mod 16]] }
    """)

# z = max(a * x, y) with x from the north and y from the south, cyclic in both
# dimensions: PE[j mod 4, i mod 2] keeps every fourth element of each row of x it
# receives, of every second row.
CYCLIC = ("""
    lair axpy_max(): float16 a, float16 x[8][16], float16 y[8][16] -> float16 z[8][16]
    { all (i, j) in (8, 16) z[i][j] = max(a * x[i][j], y[i][j]) }
    """, """
    rectangle { PE[4, 2] }
    placement { axpy_max[i, j] -> PE[j mod 4, i mod 2] }
    input  a resident
    input  x dense { x[i = 0:7, j = 0:15] -> [PE[j mod 4, -1] -> index[i, j//4]] }
    input  y dense { y[i = 0:7, j = 0:15] -> [PE[j mod 4, 2] -> index[i, j//4]] }
    output z dense { z[i = 0:7, j = 0:15] -> [PE[4, i mod 2] -> index[i//2, j]] }
    """)


def test_uneven_chain_and_gather_take_a_variant_per_tile_size(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *UNEVEN))
    assert compiled.module is not None
    program = compiled.module.programs[0]
    combines = [c for c in program.configs if c.name.startswith("combine_y")]
    assert combines and all(sorted(c.variants) == [(8,), (16,)] for c in combines), combines
    send = next(c for c in program.configs if c.name == "out_y_send")
    assert sorted(send.variants) == [(8,), (16,)]
    # (no scalar loop sends the sums or the totals)
    assert "send(" not in dtg.module_text(compiled)


def test_cyclic_streams_kept_by_a_strided_copy(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *CYCLIC))
    assert compiled.module is not None and compiled.arrivals is not None
    assert {b.flow for b in compiled.arrivals.batches} == {"x", "y"}
    program = compiled.module.programs[0]
    keeps = [c for c in program.configs if c.name.startswith("keep_")]
    assert len(keeps) == 2
    # every fourth element of a row of the local array, from consecutive landed ones
    assert all(c.dst.strides[-1] == 4 and c.srcs[0].strides[-1] == 1 for c in keeps), keeps


# A transpose between two statements: T's block (bi, bj) is computed on PE[bj, bi] and
# read on PE[bi, bj]. On one color the blocks of a row would enter the PEs on their way
# by the same port; grouped by their displacement, they go at once on a few colors.
TRANSPOSE = ("""
    lair scale(): float16 A[12][12] -> float16 T[12][12]
    { all (i, j) in (12, 12) T[i][j] = A[i][j] * 2 }
    lair addt(): float16 T[12][12], float16 C[12][12] -> float16 B[12][12]
    { all (j, i) in (12, 12) B[j][i] = T[i][j] + C[j][i] }
    """, """
    rectangle { PE[3, 3] }
    placement { scale[i, j] -> PE[j//4, i//4]; addt[j, i] -> PE[i//4, j//4] }
    input  A dense { A[i = 0:11, j = 0:11] -> [PE[-1, i//4] -> index[j, i mod 4]] }
    input  C dense { C[j = 0:11, i = 0:11] -> [PE[i//4, -1] -> index[j, i mod 4]] }
    output B resident
    """)


def test_a_transpose_goes_at_once_on_a_few_colors(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *TRANSPOSE))
    assert compiled.module is not None
    program = compiled.module.programs[-1]
    sends = [c for c in program.configs if c.name.startswith("out_T_send")]
    colors = {c.dst.color for c in sends}
    # (displacements +-1 and +-2 along the diagonal: a color for each sign's pair at
    # most, not one turn per block)
    assert 2 <= len(colors) <= 4, colors
    # (one landing task per color, the blocks all at once: no sender waits for a turn)
    shares = [t for t in program.tasks if t.name.startswith("share_T")]
    assert len(shares) == len(colors) and {t.color for t in shares} == colors


# D computed on the top row of PEs in column tiles of 7 (the last 6) and read on the row
# below: each block goes straight down, the last one sent at the full width (its extra
# column lies beyond D's 20 columns, which nothing reads).
MOVED_UNEVEN = ("""
    lair ew(): float16 X[8][20], float16 m[20] -> float16 D[8][20], float16 E[8][20]
    {
      S1: all (i, j) in (8, 20) D[i][j] = X[i][j] - m[j]
      S3: all (i, j) in (8, 20) E[i][j] = -D[i][j] + X[i][j] * 2
    }
    """, """
    rectangle { PE[3, 2] }
    placement { S1[i, j] -> PE[j//7, 0]; S3[i, j] -> PE[j//7, 1] }
    input  X resident
    input  m resident
    output E resident
    """)


def test_uneven_blocks_go_at_the_largest_size(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *MOVED_UNEVEN))
    assert compiled.module is not None
    program = compiled.module.programs[-1]
    send = next(c for c in program.configs if c.name == "out_D_send")
    assert send.variants == ((8, 7),)
    assert "send(" not in dtg.module_text(compiled)  # (no element by element)


# C's partial sums meet on pairs of PE rows; the east PE of each row sends half of its
# row pair's columns: the first element it sends sits at column 16 * (PE_Y mod 2) of its
# array, which isl writes `(16 PE_Y + k) mod 32`: a division fixed on what it sends,
# read by meaning, so one SIMD instruction sends it.
OUT_BY_HALVES = ("""
    lair mm(): float16 A[8][8], float16 B[8][32] -> float16 C[8][32]
    { all (i, k, j) in (8, 8, 32) C[i][j] += A[i][k] * B[k][j] }
    """, """
    rectangle { PE[2, 4] }
    placement { mm[i, k, j] -> PE[j//16, 2*(i//4) + k//4] }
    input  A resident
    input  B resident
    output C dense { C[i = 0:7, j = 0:31] -> [PE[2, 2*(i//4) + j//16] -> index[i mod 4, j mod 16]] }
    """)


def test_output_at_a_mod_offset_is_one_instruction(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *OUT_BY_HALVES))
    assert "send(" not in dtg.module_text(compiled)


# A stride-2 convolution whose last input element of each channel comes from the last
# external PE after its blocks (`index[64 + c]`): that PE's order has two pieces, so its
# elements go as two parts on colors of their own, each batched.
TRAILING = ("""
    lair conv(): float16 x[2][65], float16 f[2][2][3] -> float16 y[2][32]
    { all (k, w, c, r) in (2, 32, 2, 3) y[k][w] += x[c][2 * w + r] * f[k][c][r] }
    """, """
    rectangle { PE[2, 2] }
    placement { conv[k, w, c, r] -> PE[w//16, k] }
    input  x dense { x[c = 0:1, i = 0:63] -> [PE[i//32, -1] -> index[c * 32 + i mod 32]];
                     x[c = 0:1, i = 64] -> [PE[1, -1] -> index[64 + c]] }
    input  f resident
    output y resident
    """)


def test_trailing_elements_go_apart_and_batched(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *TRAILING))
    assert compiled.tasks is not None and compiled.arrivals is not None
    flows = compiled.tasks.input_flows("x")
    assert len(flows) >= 2 and all(f.order_on_pe() is not None for f in flows)
    assert compiled.arrivals.batches  # (batched, not a task per wavelet)


# A correlation with a flipped filter whose input comes odd positions first, then even
# ones (`32 - 32 (i mod 2) + i // 2`): on a PE's window that position is affine only on
# each parity's lattice, so each parity goes apart on a color of its own and lands in
# batches (kept by a copy with a stride).
PARITY = ("""
    lair flip(): float16 x[2][64], float16 f[4][2][3] -> float16 y[4][62]
    { all (k, c, w, r) in (4, 2, 62, 3) y[k][w] += x[c][w + 2 - r] * f[k][c][2 - r] }
    """, """
    rectangle { PE[2, 2] }
    placement { flip[k, c, w, r] -> PE[w//31, k//2] }
    input  x dense { x[c = 0:1, i = 0:63] -> [PE[-1, 0] -> index[c, 32 - 32*(i mod 2) + i//2]] }
    input  f resident
    output y dense { y[k = 0:3, w = 0:61] -> [PE[2, k//2] -> index[k mod 2, w]] }
    """)

# A GEMV whose x comes in a stride-4 order within each column's block, the last block
# (12 elements) written by a clause of its own: each piece of the order in four residue
# classes, eight parts.
STRIDED_ORDER = ("""
    lair gemv(): float16 W[16][44], float16 x[44] -> float16 y[16]
    { all (i, j) in (16, 44) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[3, 2] }
    placement { gemv[i, j] -> PE[j//16, i//8] }
    input  W resident
    input  x dense { x[j = 0:43] -> [PE[j//16, 2] -> index[(j mod 4) * 4 + (j mod 16)//4]] : j < 32;
                     x[j = 0:43] -> [PE[2, 2] -> index[(j mod 4) * 3 + (j - 32)//4]] : j >= 32 }
    output y dense { y[i = 0:15] -> [PE[3, i//8] -> index[i mod 8]] }
    """)


@pytest.mark.parametrize("name", ["parity", "strided_order"])
def test_residue_classes_of_an_order_go_apart_and_batched(tmp_path: Path, name: str) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS[name]))
    assert compiled.tasks is not None and compiled.arrivals is not None
    flows = compiled.tasks.input_flows("x")
    assert len(flows) == {"parity": 2, "strided_order": 8}[name]
    assert all(f.position_affine() for f in flows)
    assert {b.flow for b in compiled.arrivals.batches} == {f.name for f in flows}


PAIRS = {"uneven": UNEVEN, "cyclic": CYCLIC, "transpose": TRANSPOSE,
         "moved_uneven": MOVED_UNEVEN, "out_by_halves": OUT_BY_HALVES, "trailing": TRAILING,
         "parity": PARITY, "strided_order": STRIDED_ORDER}


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", list(PAIRS))
def test_verified_alike_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)
