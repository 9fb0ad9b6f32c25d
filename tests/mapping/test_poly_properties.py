"""Property tests of mapping.poly on small random sets, against brute-force enumeration.

A random set lives in ``[-3, 3]^n`` over the parameters ``PE_Y`` in ``[0, 1]`` and
``index`` in ``[0, 2]``, with a few random equalities, inequalities and optionally a
stride (an existentially quantified variable).  The ground truth is computed in plain
Python from the same integer coefficients, independently of isl.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping import poly

BOUND = 3
PE_VALUES = (0, 1)
INDEX_VALUES = (0, 1, 2)
PARAMS = ("PE_Y", "index")

Row = tuple[tuple[int, ...], int, int, int]  # x coefficients, PE_Y, index, constant


@dataclass(frozen=True)
class Case:
    n: int
    equalities: tuple[Row, ...]
    inequalities: tuple[Row, ...]
    stride: tuple[int, Row] | None  # s | row·(x, p) + c

    def value(self, row: Row, x: tuple[int, ...], pe_y: int, index: int) -> int:
        coefficients, a, b, c = row
        return sum(k * v for k, v in zip(coefficients, x, strict=True)) + a * pe_y + b * index + c

    def contains(self, x: tuple[int, ...], pe_y: int, index: int) -> bool:
        if any(self.value(r, x, pe_y, index) != 0 for r in self.equalities):
            return False
        if any(self.value(r, x, pe_y, index) < 0 for r in self.inequalities):
            return False
        if self.stride is not None:
            s, row = self.stride
            return self.value(row, x, pe_y, index) % s == 0
        return True

    def points(self, pe_y: int, index: int) -> set[tuple[int, ...]]:
        box = itertools.product(range(-BOUND, BOUND + 1), repeat=self.n)
        return {x for x in box if self.contains(x, pe_y, index)}


def row_strategy(n: int) -> st.SearchStrategy[Row]:
    return st.tuples(
        st.tuples(*[st.integers(-2, 2)] * n),
        st.integers(-1, 1),
        st.integers(-1, 1),
        st.integers(-2, 2),
    )


@st.composite
def cases(draw: st.DrawFn, min_dims: int = 1, strides: bool = True) -> Case:
    n = draw(st.integers(min_dims, 3))
    equalities = draw(st.lists(row_strategy(n), max_size=2))
    inequalities = draw(st.lists(row_strategy(n), max_size=2))
    stride = None
    if strides and draw(st.booleans()):
        stride = (draw(st.integers(2, 3)), draw(row_strategy(n)))
    return Case(n, tuple(equalities), tuple(inequalities), stride)


def names(n: int) -> list[str]:
    return [f"x{k}" for k in range(n)]


def constraint(space: isl.Space, row: Row, equality: bool, extra: int = 0) -> isl.Constraint:
    coefficients, a, b, c = row
    terms: dict[str | Literal[1], int] = {"PE_Y": a, "index": b, 1: c}
    terms.update(zip(names(len(coefficients)), coefficients, strict=True))
    if extra:
        terms["e"] = extra
    if equality:
        return isl.Constraint.eq_from_names(space, terms)
    return isl.Constraint.ineq_from_names(space, terms)


def build(case: Case) -> isl.Set:
    """The isl set of ``case``, built through the API (no isl text)."""
    variables = names(case.n) + (["e"] if case.stride else [])
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=variables, params=list(PARAMS))
    bset = isl.BasicSet.universe(space)
    for name in names(case.n):
        bset = bset.add_constraint(isl.Constraint.ineq_from_names(space, {name: 1, 1: BOUND}))
        bset = bset.add_constraint(isl.Constraint.ineq_from_names(space, {name: -1, 1: BOUND}))
    for param, top in (("PE_Y", PE_VALUES[-1]), ("index", INDEX_VALUES[-1])):
        bset = bset.add_constraint(isl.Constraint.ineq_from_names(space, {param: 1}))
        bset = bset.add_constraint(isl.Constraint.ineq_from_names(space, {param: -1, 1: top}))
    for row in case.equalities:
        bset = bset.add_constraint(constraint(space, row, True))
    for row in case.inequalities:
        bset = bset.add_constraint(constraint(space, row, False))
    if case.stride is not None:
        s, row = case.stride
        bset = bset.add_constraint(constraint(space, row, True, extra=-s))
        bset = bset.project_out(isl.dim_type.set, case.n, 1)
    return isl.Set.from_basic_set(bset)


def fix(obj: isl.Set, pe_y: int, index: int) -> isl.Set:
    space = obj.get_space()
    for name, value in (("PE_Y", pe_y), ("index", index)):
        pos = space.find_dim_by_name(isl.dim_type.param, name)
        if pos >= 0:
            obj = obj.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(obj.get_ctx(), value))
    return obj.project_out_all_params()


def points(s: isl.Set) -> set[tuple[int, ...]]:
    found: set[tuple[int, ...]] = set()
    n = s.dim(isl.dim_type.set)

    def record(p: isl.Point) -> None:
        found.add(tuple(p.get_coordinate_val(isl.dim_type.set, d).to_python() for d in range(n)))

    s.foreach_point(record)
    return found


def params() -> itertools.product[tuple[int, int]]:
    return itertools.product(PE_VALUES, INDEX_VALUES)


def affine_dimension(vectors: list[tuple[int, ...]]) -> int:
    """Dimension of the affine hull of integer vectors (rank of the differences)."""
    if not vectors:
        return -1
    base = vectors[0]
    rows = [[v - b for v, b in zip(vec, base, strict=True)] for vec in vectors[1:]]
    rank = 0
    width = len(base)
    for col in range(width):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][col] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(len(rows)):
            if r != rank and rows[r][col] != 0:
                a, b = rows[rank][col], rows[r][col]
                rows[r] = [a * x - b * y for x, y in zip(rows[r], rows[rank], strict=True)]
        rank += 1
    return rank


# ---------------------------------------------------------------- variable compression


@settings(max_examples=80, deadline=None)
@given(cases())
def test_compression_is_a_bijection_onto_the_points(case: Case) -> None:
    s = build(case)
    comp = poly.compress(s)
    forward = isl.Map.from_multi_aff(comp.map)
    for pe_y, index in params():
        expected = case.points(pe_y, index)
        compressed = points(fix(comp.compressed, pe_y, index))
        image = points(
            fix(fix(comp.compressed, pe_y, index).apply(fix_map(forward, pe_y, index)), pe_y, index)
        )
        assert image == expected
        assert len(compressed) == len(expected)  # injective on the compressed points
    backward = isl.Map.from_multi_aff(comp.inverse).intersect_domain(s)
    assert backward.apply_range(forward).is_equal(
        isl.Map.identity(s.get_space().map_from_set()).intersect_domain(s)
    )
    assert s.apply(isl.Map.from_multi_aff(comp.inverse)).is_equal(comp.compressed)


def fix_map(m: isl.Map, pe_y: int, index: int) -> isl.Map:
    space = m.get_space()
    for name, value in (("PE_Y", pe_y), ("index", index)):
        pos = space.find_dim_by_name(isl.dim_type.param, name)
        if pos >= 0:
            m = m.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(m.get_ctx(), value))
    return m.project_out_all_params()


@settings(max_examples=80, deadline=None)
@given(cases(strides=False))
def test_compressed_dimension_drops_the_rank_of_the_equalities(case: Case) -> None:
    s = build(case)
    comp = poly.compress(s)
    everything = [(pe_y, index, *x) for pe_y, index in params() for x in case.points(pe_y, index)]
    if not everything:
        assert comp.compressed.is_empty()
        return
    hull_dim = affine_dimension(everything)
    param_dim = affine_dimension(sorted({p[:2] for p in everything}))
    rank = case.n - (hull_dim - param_dim)
    assert comp.dim == case.n - rank


# ---------------------------------------------------------------- fixed-size box hull


@settings(max_examples=80, deadline=None)
@given(cases(min_dims=2))
def test_range_box_contains_the_range(case: Case) -> None:
    rel = isl.Map.from_range(build(case)).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, 1)
    box = poly.range_box_hull(rel)
    if box is None:
        return
    affine = poly.range_box_hull(rel, affine=True)
    assert affine is None or not affine.offset.involves_locals()
    assert affine is None or math.prod(affine.size) >= math.prod(box.size)
    assert len(box.size) == case.n - 1 and all(size >= 1 for size in box.size)
    region = poly.box_map(box)
    assert rel.is_subset(region)
    for pe_y, index in params():
        inside = points(fix(region.intersect_domain(rel.domain()).wrap(), pe_y, index))
        assert case.points(pe_y, index) <= inside


@settings(max_examples=80, deadline=None)
@given(cases())
def test_set_box_contains_the_set(case: Case) -> None:
    s = build(case)
    box = poly.set_box_hull(s)
    if box is None:
        return
    assert box.is_set_box
    region = poly.box_set(box)
    for pe_y, index in params():
        expected = case.points(pe_y, index)
        inside = points(fix(region, pe_y, index))
        assert expected <= inside
        assert len(inside) == (0 if not inside else _product(box.size))
    approx = poly.approximate_by_box(s)  # affine boxes only (SIMD code starts there)
    if approx is None:
        assert poly.set_box_hull(s, affine=True) is None
        return
    assert approx.extra.union(s).is_equal(approx.approximated.union(s))
    assert approx.extra.intersect(s).is_empty()


def _product(values: tuple[int, ...]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def test_box_hull_of_a_stride_uses_the_lattice() -> None:
    box = poly.set_box_hull(isl.Set("{ [i] : exists a: i = 2a and 1 <= i <= 5 }"))
    assert box is not None and box.size == (3,)
    assert box.offset.get_at(0).get_constant_val().to_python() == 2


# ---------------------------------------------------------------- rectangularity


@settings(max_examples=80, deadline=None)
@given(cases())
def test_rectangularity_agrees_with_enumeration(case: Case) -> None:
    s = build(case)
    rect = poly.rectangularity(s)
    dense = True
    sizes_per_pe: dict[int, set[tuple[int, ...]]] = {pe: set() for pe in PE_VALUES}
    for pe_y, index in params():
        pts = case.points(pe_y, index)
        box = points(fix(rect.box, pe_y, index))
        sizes = points(fix(rect.sizes, pe_y, index))
        if not pts:
            assert not box and not sizes
            continue
        low = [min(p[d] for p in pts) for d in range(case.n)]
        high = [max(p[d] for p in pts) for d in range(case.n)]
        extent = tuple(h - lo + 1 for lo, h in zip(low, high, strict=True))
        assert box == set(
            itertools.product(*(range(lo, h + 1) for lo, h in zip(low, high, strict=True)))
        )
        assert sizes == {extent}
        dense = dense and len(pts) == _product(extent)
        sizes_per_pe[pe_y].add(extent)
    assert rect.dense == dense
    assert rect.fixed == all(len(sizes) <= 1 for sizes in sizes_per_pe.values())

    enumeration = poly.enumerate_sizes(rect.sizes)
    if enumeration is None:
        return
    for pe_y in PE_VALUES:
        offered = {
            tuple(
                fix(isl.Set.from_multi_aff(size), pe_y, 0)
                .sample_point()
                .get_coordinate_val(isl.dim_type.set, d)
                .to_python()
                for d in range(case.n)
            )
            for _, size in enumeration.entries
        }
        assert sizes_per_pe[pe_y] <= offered


# ---------------------------------------------------------------- compression corner cases


def _check_bijection_by_enumeration(s: isl.Set, param_values: list[dict[str, int]]) -> None:
    comp = poly.compress(s)
    forward = isl.Map.from_multi_aff(comp.map)
    for values in param_values:
        fixed_s, fixed_c, fixed_f = s, comp.compressed, forward
        for name, value in values.items():
            val = isl.Val.int_from_si(s.get_ctx(), value)
            pos = fixed_s.get_space().find_dim_by_name(isl.dim_type.param, name)
            fixed_s = fixed_s.fix_val(isl.dim_type.param, pos, val)
            pos = fixed_c.get_space().find_dim_by_name(isl.dim_type.param, name)
            fixed_c = fixed_c.fix_val(isl.dim_type.param, pos, val)
            pos = fixed_f.get_space().find_dim_by_name(isl.dim_type.param, name)
            fixed_f = fixed_f.fix_val(isl.dim_type.param, pos, val)
        expected = points(fixed_s.project_out_all_params())
        compressed = points(fixed_c.project_out_all_params())
        image = points(fixed_c.apply(fixed_f).project_out_all_params())
        assert image == expected
        assert len(compressed) == len(expected)


def test_compression_with_a_non_unimodular_hermite_form() -> None:
    # x + y = n, x - y = m: H = [[1, 0], [0, 2]], so x = (n + m)/2 on the even lattice.
    s = isl.Set("[n, m] -> { [x, y] : x + y = n and x - y = m and 0 <= n, m <= 4 }")
    comp = poly.compress(s)
    assert comp.dim == 0
    _check_bijection_by_enumeration(s, [{"n": n, "m": m} for n in range(5) for m in range(5)])
    s = isl.Set("[n] -> { [x, y] : 2x = n and 0 <= y <= 2 and 0 <= n <= 6 }")
    assert poly.compress(s).dim == 1
    _check_bijection_by_enumeration(s, [{"n": n} for n in range(7)])


def test_compression_lifts_existentials_like_isl() -> None:
    # isl writes y = 3·floor(n/4) as y = 3a with a = floor(y/3): the existential is
    # lifted and, as in Example 5.7, one compressed coordinate is fixed by n.
    s = isl.Set("[n] -> { [x, y] : 0 <= x <= 3 and y = 3*floor(n/4) }")
    comp = poly.compress(s)
    assert comp.dim == 2
    _check_bijection_by_enumeration(s, [{"n": n} for n in range(12)])
    s = isl.Set("[n] -> { [x, y] : x + 3*floor(n/4) = y and 0 <= x <= 3 }")
    _check_bijection_by_enumeration(s, [{"n": n} for n in range(12)])


def test_compression_of_an_empty_set() -> None:
    comp = poly.compress(isl.Set("[n] -> { [x, y] : x > y and y > x }"))
    assert comp.dim == 0 and comp.compressed.is_empty()


# ---------------------------------------------------------------- PE-dependent sizes


def test_size_may_depend_on_the_pe() -> None:
    s = isl.Set("[PE_Y, index] -> { [i] : 0 <= i <= PE_Y and 0 <= PE_Y <= 3 and 0 <= index <= 3 }")
    rect = poly.rectangularity(s)
    assert rect.dense and rect.fixed and rect.rectangular
    assert rect.constant_size is None
    s = isl.Set("[PE_Y, index] -> { [i] : 0 <= i <= index and 0 <= PE_Y <= 3 and 0 <= index <= 3 }")
    assert not poly.rectangularity(s).fixed


@given(n=st.integers(1, 70), m=st.integers(1, 9), k=st.integers(1, 40))
@settings(max_examples=60, deadline=None)
def test_sizes_that_are_floors_of_the_pe_enumerate_over_the_region(n: int, m: int,
                                                                   k: int) -> None:
    """A cyclic placement of ``n`` rows over ``m`` PEs gives each ``(n - 1 - PE_Y)//m +
    1`` of them: with the region's context the sizes enumerate at a constant offset, and
    every PE's size is one of the entries (brute force over the PEs)."""
    sizes = isl.Set(f"[PE_Y] -> {{ [{k}, s] : s = floor(({n} - 1 - PE_Y)/{m}) + 1 }}")
    context = isl.Set(f"[PE_Y] -> {{ : 0 <= PE_Y <= {m - 1} }}")
    enumeration = poly.enumerate_sizes(sizes, index=(), context=context)
    assert enumeration is not None
    listed = {tuple(int(e.get_at(d).get_constant_val().to_python()) for d in range(2))
              for _, e in enumeration.entries}
    wanted = {(k, (n - 1 - y) // m + 1) for y in range(m)}
    assert wanted <= listed and all(size[0] == k for size in listed)
    assert len(listed) <= 2 or n < m


def test_size_enumeration_with_a_pe_dependent_offset() -> None:
    sizes = isl.Set("[PE_Y, index] -> { [PE_Y + 1 + index] : 0 <= index <= 1 and 0 <= PE_Y <= 3 }")
    enumeration = poly.enumerate_sizes(sizes)
    assert enumeration is not None
    assert enumeration.box.size == (2,)
    assert isl.Set.from_multi_aff(enumeration.box.offset).is_equal(
        isl.Set("[PE_Y] -> { [PE_Y + 1] }").align_params(
            isl.Set.from_multi_aff(enumeration.box.offset).get_space()
        )
    )
    assert enumeration.identifiers.is_equal(isl.Set("{ [0:1] }"))
    second = isl.Set.from_multi_aff(enumeration.size_of((1,)))
    assert second.is_equal(isl.Set("[PE_Y] -> { [PE_Y + 2] }").align_params(second.get_space()))
