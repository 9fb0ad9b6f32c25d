"""Fixed-size box hulls as tight as isl's: lower bounds with floors and ``mod`` offsets
(rotated and cyclic tiles, the paper's placement (30)), results that do not depend on
how a set is written, checked against brute force; and the primitives' limits (values
beyond 64 bits, unbounded relations, sets too large to list)."""

from __future__ import annotations

import itertools
import time

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.errors import CodegenError
from dtg.lair.limits import MAX_POINTS
from dtg.mapping import poly


def per_value_extents(s: isl.Set, names: list[str], values: range) -> list[tuple[int, ...]]:
    """For every value of the parameters ``names``: the extent of each dimension of the
    set there (brute force: its points listed)."""
    out = []
    for value in itertools.product(values, repeat=len(names)):
        fixed = s
        for name, v in zip(names, value, strict=True):
            pos = fixed.find_dim_by_name(isl.dim_type.param, name)
            fixed = fixed.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(s.get_ctx(), v))
        pts = poly.points(fixed.project_out_all_params())
        if pts:
            out.append(tuple(max(p[d] for p in pts) - min(p[d] for p in pts) + 1
                             for d in range(len(pts[0]))))
    return out


@pytest.mark.parametrize(("text", "size"), [
    ("[PE_X] -> { [i] : 2*floor(PE_X/2) <= i <= 2*floor(PE_X/2) + 1 }", (2,)),
    ("[x, y] -> { [i] : 8*((x + y) mod 4) <= i < 8*((x + y) mod 4) + 8 }", (8,)),
    ("[x] -> { [i] : 4*floor(x/3) <= i < 4*floor(x/3) + 4 and 0 <= x < 12 }", (4,)),
    ("[x] -> { [i] : i >= 3*floor((x + 1)/2) and i <= 3*floor((x + 1)/2) + 2 }", (3,)),
    ("[x, y] -> { [i, j] : 8*((x + y) mod 4) <= i < 8*((x + y) mod 4) + 8 and "
     "2*floor(y/2) <= j <= 2*floor(y/2) + 1 }", (8, 2)),
    # a Cannon-style skewed block: the column block is a mod of the PE, implied by the
    # placement rather than written as bounds (no lower bound of the simple hull)
    ("[x, y] -> { W[i, j] : 0 <= i < 32 and 0 <= j < 32 and y = floor(i/8) and "
     "x = (floor(i/8) + floor(j/8)) mod 4 }", (8, 8)),
])
def test_offsets_with_floors_and_mods_give_the_smallest_box(text: str, size: tuple[int, ...]
                                                            ) -> None:
    s = isl.Set(text)
    box = poly.set_box_hull(s)
    assert box is not None and box.size == size
    assert s.is_subset(poly.box_set(box))
    names = [s.get_dim_name(isl.dim_type.param, k) for k in range(s.dim(isl.dim_type.param))]
    assert max(per_value_extents(s, names, range(-6, 7))) == size  # the smallest possible


def test_the_per_pe_instances_of_placement_30_get_isls_box() -> None:
    """Placement (30): each PE runs 2 x 4 x 4 x 2 instances of C (isl's box), not
    4 x 8 x 8 x 4."""
    placement = isl.Map("{ C[k, h, w, c] -> PE[k//2 + 2*(w//4), 2*(h//4) + c//2] }")
    domain = isl.Set("{ C[k, h, w, c] : 0 <= k < 4 and 0 <= h < 8 and 0 <= w < 8 and "
                     "0 <= c < 4 }")
    per_pe = placement.intersect_domain(domain).reverse()
    box = poly.range_box_hull(per_pe)
    assert box is not None and box.size == (2, 4, 4, 2)
    assert per_pe.is_subset(poly.box_map(box))
    x = poly.elements_per_pe(placement, isl.Map("{ C[k, h, w, c] -> x[h, w, c] }"), domain)
    box = poly.range_box_hull(x)
    assert box is not None and box.size == (4, 4, 2)


@pytest.mark.parametrize("texts", [
    ["[x] -> { [i] : x <= i < x + 4 and x >= 0 }",
     "[x] -> { [i] : x <= i < x + 4 and x >= 0 and i >= 0 }",
     "[x] -> { [i] : x <= i <= x + 3 and i >= x and 0 <= x }"],
    ["[x] -> { [i] : 0 <= i < 16 and 4*floor(i/4) = 4*floor(x/4) }",
     "[x] -> { [i] : 0 <= i < 16 and 4*floor(x/4) <= i < 4*floor(x/4) + 4 }",
     "[x] -> { [i] : exists a : 4a <= i < 4a + 4 and 4a <= x < 4a + 4 and 0 <= i < 16 }"],
])
def test_the_box_does_not_depend_on_how_the_set_is_written(texts: list[str]) -> None:
    sets = [isl.Set(t) for t in texts]
    assert all(s.is_equal(sets[0]) for s in sets)
    boxes = [poly.set_box_hull(s) for s in sets]
    assert all(b is not None for b in boxes)
    assert len({b.size for b in boxes if b is not None}) == 1


OFFSETS = ["x", "2*floor(x/2)", "3*floor((x + y)/4)", "8*((x + y) mod 4)", "(x mod 3) + y",
           "-x + 2*floor(y/3)", "4*floor(x/4) + (y mod 2)"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OFFSETS), st.integers(1, 6), st.booleans()),
                min_size=1, max_size=2))
def test_a_shifted_box_is_found_at_its_size(dims: list[tuple[str, int, bool]]) -> None:
    """Sets ``offset(x, y) <= i < offset(x, y) + size`` per dimension (sometimes with a
    redundant bound): the box is found, holds the set, and has exactly that size, which
    is the smallest (brute force over the parameters)."""
    names = [f"i{k}" for k in range(len(dims))]
    parts = []
    for name, (offset, size, redundant) in zip(names, dims, strict=True):
        parts.append(f"{offset} <= {name} < {offset} + {size}")
        if redundant:
            parts.append(f"{name} >= {offset} - 5")
    s = isl.Set(f"[x, y] -> {{ [{', '.join(names)}] : {' and '.join(parts)} }}")
    box = poly.set_box_hull(s)
    assert box is not None
    assert box.size == tuple(size for _, size, _ in dims)
    assert s.is_subset(poly.box_set(box))
    assert max(per_value_extents(s, ["x", "y"], range(-4, 5))) == box.size


def test_values_beyond_64_bits_are_isl_integers() -> None:
    box = poly.set_box_hull(isl.Set("{ [i] : 0 <= i < 100000000000000000000 }"))
    assert box is not None and box.size == (10**20,)
    shifted = poly.set_box_hull(isl.Set(
        "[x] -> { [i] : 100000000000000000000 * x <= i < 100000000000000000000 * x + 3 }"))
    assert shifted is not None and shifted.size == (3,)
    assert poly.box_set(shifted).is_equal(isl.Set(
        "[x] -> { [i] : 100000000000000000000 * x <= i < 100000000000000000000 * x + 3 }"))


def test_gaps_of_an_unbounded_relation_are_the_projects_error() -> None:
    with pytest.raises(CodegenError, match="needs a bounded set"):
        poly.index_gaps(isl.Map("{ [a] -> index[v] : v >= a }"))


@pytest.mark.parametrize("text", ["{ [i] : 0 <= i < 1000000000000 }",
                                  "{ [i, j] : i = j and 0 <= i < 100000000 }"])
def test_a_set_too_large_to_list_is_refused_before_listing(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(poly.TooManyPointsError, match=f"more than {MAX_POINTS} points"):
        poly.points(isl.Set(text))
    assert time.perf_counter() - started < 60  # (not listed: 10^8 points take minutes)
    assert len(poly.points(isl.Set("{ [i, j] : i = j and 0 <= i < 1000 }"))) == 1000


def test_a_set_of_small_pieces_far_apart_is_listed() -> None:
    """The displacements of a halo that wraps to the next row of PEs, ``(1, 0)`` and
    ``(-3, 1)`` and their opposites: four points in two pieces whose bounding box holds
    35, and none of the pieces made dense is that large."""
    deltas = isl.Set("{ [x, y] : -3 <= x <= 3 and ((2y = 1 - x and x > 0) or "
                     "(2y = -1 - x and x < 0)) }")
    assert poly.points(deltas, limit=16) == [(-3, 1), (-1, 0), (1, 0), (3, -1)]
    with pytest.raises(poly.TooManyPointsError):
        poly.points(deltas, limit=3)
    many = isl.Set("{ [x, y] : 0 <= x < 100 and (y = 0 or y = 50) }")
    with pytest.raises(poly.TooManyPointsError):  # (200 points in pieces of 100)
        poly.points(many, limit=150)


def test_size_enumeration_stops_at_its_limit() -> None:
    sizes = isl.Set("[PE_X, index] -> { [s] : s = index and 0 <= index < 100 }")
    with pytest.raises(poly.TooManyPointsError):
        poly.enumerate_sizes(sizes, index=["index"], limit=10)
    enum = poly.enumerate_sizes(sizes, index=["index"], limit=100)
    assert enum is not None and len(enum.entries) == 100


def test_a_function_is_listed_by_its_arguments() -> None:
    """A function's points are as many as its arguments: a tile's PE and an element, as
    floors and sums of the instance, give a box around all three 2,048 times larger."""
    rel = isl.Map("{ S[c, i, a] -> [P[i//4] -> x[c, 2i + a]] : 0 <= c < 2 and 0 <= i < 8 "
                  "and 0 <= a < 2 }")
    listed = poly.function_points(rel, limit=32)
    assert len(listed) == 32 and listed == sorted(listed)
    assert all(p == (c, i, a, i // 4, c, 2 * i + a) for p in listed for c, i, a in [p[:3]])
    with pytest.raises(poly.TooManyPointsError):
        poly.points(rel.wrap(), limit=32)
    with pytest.raises(poly.TooManyPointsError):
        poly.function_points(rel, limit=31)
    assert poly.function_points(rel.intersect_domain(isl.Set("{ S[c, i, a] : c > 5 }"))) == []
    # (not a function: listed as the set it wraps)
    assert len(poly.function_points(isl.Map("{ [i] -> [j] : 0 <= i, j < 3 }"))) == 9
