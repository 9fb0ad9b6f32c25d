"""poly.skewed: the same instances along a sheared basis of the compressed coordinates."""

from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping import poly

SETS = [
    "[index] -> { S[i, k] : 0 <= k <= 2 and index <= i + k < index + 16 and 0 <= i <= 15 }",
    "{ S[i, j, k] : 0 <= i <= 3 and 0 <= j <= 4 and i <= k <= i + 2 }",
    "[n] -> { S[i, j] : 0 <= i < n and 2i <= j <= 2i + 3 }",
]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SETS), st.integers(0, 2), st.integers(0, 2),
       st.sampled_from([1, -1]))
def test_a_skew_is_a_bijection_onto_the_same_instances(text: str, a: int, b: int,
                                                       sign: int) -> None:
    s = isl.Set(text)
    comp = poly.compress(s)
    if a >= comp.dim or b >= comp.dim or a == b:
        return
    skew = poly.skewed(comp, a, b, sign)
    image = isl.Map.from_multi_aff(skew.map).intersect_domain(skew.compressed).range()
    assert image.is_equal(s)
    # the inverse takes every instance back to its skewed coordinates
    back = isl.Map.from_multi_aff(skew.inverse).intersect_domain(s).range()
    assert back.is_equal(skew.compressed)


def test_a_sliding_window_becomes_a_box() -> None:
    s = isl.Set(SETS[0])
    skew = poly.skewed(poly.compress(s), 0, 1, 1)  # (i, k) -> (i + k, k)
    hull = poly.approximate_by_box(skew.compressed)
    assert hull is not None and hull.box.size == (16, 3)


@pytest.mark.parametrize("sign", [1, -1])
def test_skewing_back_is_the_identity(sign: int) -> None:
    s = isl.Set(SETS[1])
    comp = poly.compress(s)
    twice = poly.skewed(poly.skewed(comp, 2, 0, sign), 2, 0, -sign)
    assert twice.compressed.is_equal(comp.compressed)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SETS), st.integers(0, 2), st.integers(0, 2))
def test_moving_a_coordinate_outwards_keeps_the_instances(text: str, d: int, to: int) -> None:
    """poly.moved_outermost: the same instances, coordinate ``d`` scanned at ``to``."""
    s = isl.Set(text)
    comp = poly.compress(s)
    if d >= comp.dim or to > d:
        return
    moved = poly.moved_outermost(comp, d, to)
    image = isl.Map.from_multi_aff(moved.map).intersect_domain(moved.compressed).range()
    assert image.is_equal(s)
    back = isl.Map.from_multi_aff(moved.inverse).intersect_domain(s).range()
    assert back.is_equal(moved.compressed)
    # the moved coordinate's values are where it went, the others keep their order
    before = comp.compressed.project_out(isl.dim_type.set, 0, d).project_out(
        isl.dim_type.set, 1, comp.dim - d - 1)
    after = moved.compressed.project_out(isl.dim_type.set, 0, to).project_out(
        isl.dim_type.set, 1, comp.dim - to - 1)
    assert before.is_equal(after)
