"""Blocks of block-cyclic placements lifted into coordinates of their own
(:mod:`mapping.lifting`): the same instances, one for one, and a dense box where the
blocks tile the range evenly."""

from __future__ import annotations

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping import poly
from dtg.mapping.lifting import lift_blocks


def _cyclic(dims: list[tuple[int, int, int, int]]) -> isl.Set:
    """``{ s[x0, ...] }`` with dimension ``d`` over ``[0, n)``, in blocks of ``b`` dealt
    over ``p`` PEs with a shift ``o``; the PE's coordinate is ``P{d}``."""
    params = ", ".join(f"P{d}" for d in range(len(dims)))
    names = ", ".join(f"x{d}" for d in range(len(dims)))
    parts = [f"0 <= P{d} < {p} and 0 <= x{d} < {n} and ((x{d} + {o}) // {b}) mod {p} = P{d}"
             for d, (n, b, p, o) in enumerate(dims)]
    return isl.Set(f"[{params}] -> {{ s[{names}] : {' and '.join(parts)} }}")


def _bijective(s: isl.Set) -> poly.Compression:
    comp = poly.compress(s)
    lifted = lift_blocks(comp)
    assert lifted is not None
    image = lifted.compressed.apply(isl.Map.from_multi_aff(lifted.map))
    assert image.is_equal(s)
    assert s.apply(isl.Map.from_multi_aff(lifted.inverse)).is_equal(lifted.compressed)
    # (one lifted point per instance: the map is injective on the lifted set)
    assert isl.Map.from_multi_aff(lifted.map).intersect_domain(
        lifted.compressed).is_injective()
    return lifted


def _one_for_one_if_lifted(s: isl.Set) -> None:
    """Where ``s`` has blocks to lift, the lifted set maps one for one onto ``s``."""
    lifted = lift_blocks(poly.compress(s))
    if lifted is None:  # (isl found the set without a block's floor)
        return
    image = lifted.compressed.apply(isl.Map.from_multi_aff(lifted.map))
    assert image.is_equal(s)
    assert isl.Map.from_multi_aff(lifted.map).intersect_domain(
        lifted.compressed).is_injective()


def test_a_block_cyclic_gemm_is_a_dense_box_of_blocks_and_offsets() -> None:
    s = _cyclic([(64, 8, 4, 0), (64, 8, 4, 0), (32, 32, 1, 0)])
    lifted = _bijective(s)
    approx = poly.approximate_by_box(lifted.compressed)
    assert approx is not None and approx.exact
    # (the blocks outermost, then each dimension's offset in its block)
    assert approx.box.size == (2, 2, 8, 8, 32)
    assert poly.approximate_by_box(s).box.size == (40, 40, 32)  # type: ignore[union-attr]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(2, 6), st.integers(2, 4),
                          st.integers(0, 5)), min_size=1, max_size=2))
def test_lifting_keeps_every_instance_once(dims: list[tuple[int, int, int, int]]) -> None:
    s = _cyclic(dims)
    comp = poly.compress(s)
    lifted = lift_blocks(comp)
    if lifted is None:  # (isl found the set without a block's floor: one block per PE)
        return
    image = lifted.compressed.apply(isl.Map.from_multi_aff(lifted.map))
    assert image.is_equal(s)
    assert s.apply(isl.Map.from_multi_aff(lifted.inverse)).is_equal(lifted.compressed)
    assert isl.Map.from_multi_aff(lifted.map).intersect_domain(
        lifted.compressed).is_injective()


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(2, 8), st.integers(2, 4))
def test_even_blocks_lift_to_an_exact_box(rounds: int, block: int, pes: int) -> None:
    s = _cyclic([(rounds * block * pes, block, pes, 0)])
    lifted = lift_blocks(poly.compress(s))
    if rounds == 1:  # (one block per PE: already a box)
        assert lifted is None or poly.approximate_by_box(lifted.compressed) is not None
        return
    assert lifted is not None
    approx = poly.approximate_by_box(lifted.compressed)
    assert approx is not None and approx.exact and approx.box.size == (rounds, block)


def test_sets_without_blocks_are_left_alone() -> None:
    assert lift_blocks(poly.compress(isl.Set("[P] -> { s[i] : 0 <= i < 16 and i mod 4 = P }"))
                       ) is None
    assert lift_blocks(poly.compress(isl.Set("[P] -> { s[i] : 4P <= i < 4P + 4 }"))) is None


def _nested(n: int, inner: int, outer_factor: int, pes: int, halves: int) -> isl.Set:
    """``{ s[i, j] }``: ``j``'s blocks of ``inner`` dealt over ``pes`` PE columns, and
    the parity (over ``halves``) of its blocks of ``inner * pes * outer_factor`` adding
    to the PE row of ``i``'s block (blocks within blocks of one coordinate)."""
    outer = inner * pes * outer_factor
    return isl.Set(
        f"[X, Y] -> {{ s[i, j] : 0 <= i < 64 and 0 <= j < {n} and 0 <= X < {pes} and "
        f"0 <= Y < {4 * halves} and "
        f"X = (j//{inner}) mod {pes} and Y = i//16 + 4*((j//{outer}) mod {halves}) }}")


def test_blocks_within_blocks_lift_to_a_dense_box() -> None:
    """``PE[(j//16) mod 4, i//16 + 4 ((j//64) mod 2)]``: ``j`` read through two floors,
    the larger lifted first, then what is left; the 3 x 16 x 16 instances of a PE are a
    dense box (where a scalar loop once scanned 64 x 272 with a test of each)."""
    s = _nested(384, 16, 1, 4, 2)
    lifted = _bijective(s)
    box = poly.set_box_hull(lifted.compressed.coalesce())
    assert box is not None and box.size == (3, 16, 16)
    whole, lifted_set = poly.align_params(poly.box_set(box, s.params()), lifted.compressed)
    assert whole.is_equal(lifted_set)
    # (written by its blocks, the same elements have a box of a PE's 16 rows: the
    # local arrays' box, mapping.memory)
    image = lifted.compressed.apply(lifted.as_map())
    assert image.is_equal(s)
    assert poly.set_box_hull(image).size == (16, 272)  # type: ignore[union-attr]
    assert poly.set_box_hull(s).size == (64, 320)  # type: ignore[union-attr]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.sampled_from([2, 4, 8]), st.integers(1, 2), st.integers(2, 4),
       st.integers(2, 3))
def test_blocks_within_blocks_keep_every_instance_once(
        rounds: int, inner: int, outer_factor: int, pes: int, halves: int) -> None:
    n = rounds * inner * pes * outer_factor * halves
    s = _nested(n, inner, outer_factor, pes, halves)
    _one_for_one_if_lifted(s)


def _mixed(n: int, block: int, pes: int) -> isl.Set:
    """``{ s[i, j] }`` of ``PE[(i//b + j//b) mod P]``: a floor of two coordinates'
    blocks, as isl writes it ``floor((b floor(j/b) + i) / (b P))``."""
    return isl.Set(f"[X] -> {{ s[i, j] : 0 <= i < {n} and 0 <= j < {n} and 0 <= X < {pes} "
                   f"and X = (i//{block} + j//{block}) mod {pes} }}")


def test_blocks_inside_a_floor_of_several_are_lifted() -> None:
    """``(i//8 + j//8) mod 4``: ``i``'s blocks of 8, read whole by the floor of both,
    are lifted; the blocks then meet on a lattice (``(qi + qj) mod 4 = X``) and the
    offsets in them are a dense 8 x 8 box (an independently written GEMV: 497x its bound
    in a scalar loop with a test of each point, 3.6x by SIMD over the blocks)."""
    s = _mixed(64, 8, 4)
    lifted = _bijective(s)
    n = lifted.compressed.dim(isl.dim_type.set)
    inner = lifted.compressed.project_out(isl.dim_type.set, 0, n - 2)
    box = poly.set_box_hull(inner)
    assert box is not None and box.size == (8, 8)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.sampled_from([2, 4, 8]), st.integers(2, 4))
def test_mixed_blocks_keep_every_instance_once(rounds: int, block: int, pes: int) -> None:
    s = _mixed(rounds * block * pes, block, pes)
    _one_for_one_if_lifted(s)
