"""A stream's order written as one function where one gives all of it (the same
relation; the sets built from it then carry no existential variables)."""

from __future__ import annotations

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping.inputs import plain_order


def plain(order: isl.Map) -> bool:
    """One basic map without existentially quantified variables."""
    maps = order.get_basic_maps()
    return len(maps) == 1 and maps[0].dim(isl.dim_type.div) == 0


def test_a_trailing_row_written_apart_is_one_function() -> None:
    """Rows 48 .. 63 at ``a mod 16`` and row 64 at 16: both ``a - 48``."""
    order = isl.Map("{ X[c, a, b] -> index[c, a mod 16, b] : 0 <= c <= 1 and 48 <= a <= 63 "
                    "and 0 <= b <= 64; X[c, 64, b] -> index[c, 16, b] : 0 <= c <= 1 and "
                    "0 <= b <= 64 }")
    made = plain_order(order)
    assert made.is_equal(order) and plain(made)


def test_an_order_of_two_functions_is_kept() -> None:
    order = isl.Map("{ x[i] -> index[i] : 0 <= i <= 7; x[i] -> index[i - 8 + 100] : "
                    "8 <= i <= 9 }")
    made = plain_order(order)
    assert made.is_equal(order)
    assert not plain(made) or made.as_pw_multi_aff().n_piece() == 1


@settings(max_examples=50, deadline=None)
@given(period=st.integers(2, 9), start=st.integers(0, 30), length=st.integers(1, 20),
       scale=st.integers(1, 3))
def test_against_the_relation(period: int, start: int, length: int, scale: int) -> None:
    """``index[scale * (i mod period)]`` on ``start .. start + length - 1``: always the
    same relation; one plain function where the range lies in one period, and none where
    three points or more cross a period's end (on two, any function is affine)."""
    order = isl.Map(f"{{ x[i] -> index[{scale} * (i mod {period})] : "
                    f"{start} <= i < {start + length} }}")
    made = plain_order(order)
    assert made.is_equal(order)
    one_period = start // period == (start + length - 1) // period
    if one_period:
        assert plain(made)
    elif length >= 3:
        assert not plain(made)
