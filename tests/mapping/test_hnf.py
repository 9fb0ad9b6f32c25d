"""Column Hermite normal form: unit cases and hypothesis properties."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping.hnf import (
    column_hnf,
    determinant,
    identity,
    inverse_unimodular,
    matmul,
    row_echelon,
    solve_lower_triangular,
)


def rational_rank(m: list[list[int]]) -> int:
    rows = [[Fraction(x) for x in row] for row in m]
    rank = 0
    width = len(rows[0]) if rows else 0
    for col in range(width):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][col] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(len(rows)):
            if r != rank and rows[r][col] != 0:
                f = rows[r][col] / rows[rank][col]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[rank], strict=True)]
        rank += 1
    return rank


def check_hnf(m: list[list[int]], n: int) -> None:
    form = column_hnf(m, n)
    u = form.u
    assert len(u) == n and all(len(row) == n for row in u)
    assert abs(determinant(u)) == 1
    assert matmul(inverse_unimodular(u), u) == identity(n)
    mu = matmul(m, u) if m else ()
    rank = form.rank
    assert rank == rational_rank(m)
    for i, row in enumerate(mu):
        assert row[:rank] == form.h[i]
        assert all(x == 0 for x in row[rank:])  # M·U = [H 0]
    previous = -1
    for j, p in enumerate(form.pivot_rows):
        assert p > previous  # lower triangular (echelon)
        previous = p
        assert form.h[p][j] > 0
        assert all(form.h[i][j] == 0 for i in range(p))
        assert all(0 <= form.h[p][k] < form.h[p][j] for k in range(j))


matrices = st.integers(min_value=1, max_value=5).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.lists(st.integers(min_value=-6, max_value=6), min_size=n, max_size=n),
            min_size=0,
            max_size=4,
        ),
    )
)


@settings(max_examples=300, deadline=None)
@given(matrices)
def test_column_hnf_properties(case: tuple[int, list[list[int]]]) -> None:
    n, m = case
    check_hnf(m, n)


@settings(max_examples=200, deadline=None)
@given(matrices)
def test_row_echelon_properties(case: tuple[int, list[list[int]]]) -> None:
    n, m = case
    echelon, t = row_echelon(m, n)
    if not m:
        assert echelon == ()
        return
    assert abs(determinant(t)) == 1
    assert echelon == matmul(t, m)
    leads = []
    for row in echelon:
        lead = next((j for j, x in enumerate(row) if x != 0), None)
        if lead is None:
            continue
        assert row[lead] > 0
        leads.append(lead)
    assert leads == sorted(set(leads))
    assert len(leads) == rational_rank(m)
    zero_rows = [k for k, row in enumerate(echelon) if not any(row)]
    assert zero_rows == list(range(len(leads), len(m)))  # zero rows last


def test_free_columns_keep_their_order() -> None:
    # Equalities of eq. (32) over [k, h, w, c, e] (e the lifted existential).
    m = [[0, 1, 0, 0, 4], [0, 0, 1, 0, 0], [0, 1, 0, 1, 0]]
    form = column_hnf(m)
    assert form.h == ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    free = [tuple(row[j] for row in form.u) for j in (3, 4)]
    assert free == [(1, 0, 0, 0, 0), (0, -4, 0, 4, 1)]  # k = i0; h -= 4·i1, c += 4·i1


def test_small_known_forms() -> None:
    assert column_hnf([[2, 3], [4, 5]]).h == ((1, 0), (1, 2))
    assert column_hnf([[6, 4, 10], [3, 2, 5]]).h == ((2,), (1,))
    assert column_hnf([], 3).u == identity(3)
    assert column_hnf([[0, 0, 0]]).rank == 0


def test_determinant_and_inverse() -> None:
    assert determinant([[2, 1], [7, 4]]) == 1
    assert determinant([[0, 1], [1, 0]]) == -1
    assert determinant([[1, 2], [2, 4]]) == 0
    assert determinant([[0, 2, 1], [3, 0, 0], [1, 1, 1]]) == -3
    assert inverse_unimodular([[2, 1], [7, 4]]) == ((4, -1), (-7, 2))
    inv = solve_lower_triangular([[2, 0], [1, 3]])
    assert inv == ((Fraction(1, 2), Fraction(0)), (Fraction(-1, 6), Fraction(1, 3)))
