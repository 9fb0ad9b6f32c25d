"""Arrival windows (batched arrivals) against brute force: ``over_window`` is the union
of a set over a window of its ``index`` parameter; ``batch_starts`` and
``window_starts`` are the batches a dense or sparse stream's arrivals form."""

from __future__ import annotations

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping import poly


def _params(s: isl.Set, names: list[str], ranges: list[range]) -> set[tuple[int, ...]]:
    """The parameter values (in ``names`` order) where ``s`` is not empty."""
    found = set()

    def walk(k: int, fixed: isl.Set, values: tuple[int, ...]) -> None:
        if k == len(names):
            if not fixed.is_empty():
                found.add(values)
            return
        pos = fixed.get_space().find_dim_by_name(isl.dim_type.param, names[k])
        for v in ranges[k]:
            walk(k + 1, fixed.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(
                fixed.get_ctx(), v)), (*values, v))

    walk(0, s, ())
    return found


@settings(max_examples=40, deadline=None)
@given(lo=st.integers(0, 5), length=st.integers(1, 9), shift=st.integers(-2, 3),
       first=st.integers(-3, 8), width=st.integers(1, 5))
def test_over_window_is_the_union_over_the_window(lo: int, length: int, shift: int,
                                                  first: int, width: int) -> None:
    # instances triggered by arrival `index`: { S[i] : i = index + shift }, index in range
    s = isl.Set(f"[index] -> {{ S[i] : i = index + {shift} and {lo} <= index < {lo + length} }}")
    w = poly.over_window(s, "index", "count")
    fixed = w.fix_val(isl.dim_type.param, w.get_space().find_dim_by_name(
        isl.dim_type.param, "index"), isl.Val.int_from_si(w.get_ctx(), first))
    fixed = fixed.fix_val(isl.dim_type.param, fixed.get_space().find_dim_by_name(
        isl.dim_type.param, "count"), isl.Val.int_from_si(w.get_ctx(), width))
    got = {p[0] for p in poly.points(fixed.project_out_all_params())}
    want = {v + shift for v in range(first, first + width) if lo <= v < lo + length}
    assert got == want
    assert w.get_tuple_name() == "S"


@settings(max_examples=40, deadline=None)
@given(first=st.integers(0, 6), length=st.integers(1, 12), size=st.integers(1, 6))
def test_batch_starts_cover_the_group_once(first: int, length: int, size: int) -> None:
    last = first + length - 1
    arrivals = isl.Set(f"[index] -> {{ : {first} <= index <= {last} }}")
    f = isl.PwAff(f"{{ [({first})] }}").align_params(arrivals.get_space())
    lst = isl.PwAff(f"{{ [({last})] }}").align_params(arrivals.get_space())
    starts = poly.batch_starts(arrivals, f, lst, size, "index", "count")
    batches = _params(starts, ["index", "count"], [range(-2, last + 3), range(0, size + 2)])
    # (a superset of the exact batches, relaxed to the widths that occur: every batch
    # stays in the group and starts on the grid)
    exact = {(s, min(size, last - s + 1)) for s in range(first, last + 1, size)}
    assert exact <= batches
    widths = {c for _, c in exact}
    assert all(first <= s and s + c - 1 <= last and (s - first) % size == 0 and c in widths
               for s, c in batches)


@settings(max_examples=40, deadline=None)
@given(first=st.integers(0, 9), length=st.integers(1, 12), size=st.integers(1, 6))
def test_window_starts_are_the_aligned_windows_that_meet_the_group(first: int, length: int,
                                                                   size: int) -> None:
    last = first + length - 1
    arrivals = isl.Set(f"[index] -> {{ : {first} <= index <= {last} }}")
    windows = poly.window_starts(arrivals, size, "index", "count")
    got = _params(windows, ["index", "count"], [range(-size - 2, last + 3), range(0, size + 2)])
    want = {(s, size) for s in range(-size - 2, last + 3)
            if s % size == 0 and s <= last and s + size - 1 >= first}
    assert got == want
