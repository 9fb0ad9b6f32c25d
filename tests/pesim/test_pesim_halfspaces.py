"""The corner test of load/store sets (pesim.isltext.Halfspaces) against isl."""

from __future__ import annotations

import islpy as isl
from hypothesis import given
from hypothesis import strategies as st

from dtg.pesim.isltext import Halfspaces, check_array_set, fix_pe

coefficient = st.integers(-3, 3)


@st.composite
def constraint(draw: st.DrawFn) -> str:
    px, py, a, b, c = (draw(coefficient) for _ in range(5))
    relation = draw(st.sampled_from([">=", "<=", "="]))
    return f"{px}PE_X + {py}PE_Y + {a}i0 + {b}i1 {relation} {c}"


@given(st.lists(constraint(), min_size=1, max_size=3), st.integers(-2, 3), st.integers(-2, 3),
       st.integers(-4, 4), st.integers(-4, 4), st.integers(0, 3), st.integers(0, 3))
def test_the_corner_test_agrees_with_isl(constraints: list[str], x: int, y: int,
                                         i0: int, i1: int, n0: int, n1: int) -> None:
    text = "{ T[i0, i1] : " + " and ".join(constraints) + " }"
    s = check_array_set(text, "T", 2, "test set", None)
    test = Halfspaces.of(s)
    if test is None:
        return  # a union or divisions after isl's simplification: pesim asks isl
    box = isl.Set(f"{{ T[a, b] : {i0} <= a <= {i0 + n0} and {i1} <= b <= {i1 + n1} }}")
    expected = box.is_subset(fix_pe(s, x, y))
    assert test.contains_box((x, y), [i0, i1], [i0 + n0, i1 + n1]) == expected


def test_unions_and_divisions_are_left_to_isl() -> None:
    union = check_array_set("{ T[i] : i <= PE_X or i >= 5 + PE_X }", "T", 1, "s", None)
    strided = check_array_set("{ T[i] : i mod 2 = PE_Y }", "T", 1, "s", None)
    assert Halfspaces.of(union) is None and Halfspaces.of(strided) is None
    plain = Halfspaces.of(check_array_set("{ T[i] : 4PE_X <= i < 4PE_X + 4 }", "T", 1, "s",
                                          None))
    assert plain is not None
    assert plain.contains_box((2, 0), [8], [11]) and not plain.contains_box((2, 0), [8], [12])
