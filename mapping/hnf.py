"""Integer Hermite normal forms for variable compression.

Variable compression (Meister 2004) parametrizes the integer points of an affine
hull ``M·x = C(p)`` through a column Hermite normal form ``M·U = [H 0]`` with ``U``
unimodular.  The matrices are tiny (a handful of loop dimensions), so plain Python
integers are both exact and fast enough; no dependency is needed.

The pivot rule is fixed on purpose: every row is processed in turn and pivots on the
leftmost column that still has a non-zero entry, while the non-pivot columns keep
their original relative order.  The free columns of ``U`` therefore come last in
their original order, which is what makes the compressions of the paper's
examples come out exactly as printed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

Matrix = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ColumnHermiteForm:
    """``M·U = [H 0]``: ``H`` is ``m x rank`` in column echelon form, ``U`` unimodular.

    Column ``j`` of ``H`` has its leading (topmost non-zero, positive) entry in row
    ``pivot_rows[j]``; these rows strictly increase and every entry of a pivot row left
    of its pivot lies in ``[0, pivot)``.
    """

    h: Matrix
    u: Matrix
    pivot_rows: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.pivot_rows)


def identity(n: int) -> Matrix:
    return tuple(tuple(int(i == j) for j in range(n)) for i in range(n))


def transpose(m: Sequence[Sequence[int]], n_cols: int | None = None) -> Matrix:
    """Transpose; ``n_cols`` gives the width of a matrix without rows."""
    width = len(m[0]) if m else (n_cols or 0)
    return tuple(tuple(row[j] for row in m) for j in range(width))


def matmul(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> Matrix:
    inner = len(b)
    width = len(b[0]) if b else 0
    return tuple(
        tuple(sum(row[k] * b[k][j] for k in range(inner)) for j in range(width)) for row in a
    )


def determinant(m: Sequence[Sequence[int]]) -> int:
    """Exact determinant (fraction-free Bareiss elimination)."""
    n = len(m)
    if n == 0:
        return 1
    a = [list(row) for row in m]
    sign = 1
    previous = 1
    for k in range(n - 1):
        if a[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if a[i][k] != 0), None)
            if swap is None:
                return 0
            a[k], a[swap] = a[swap], a[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] = (a[i][j] * a[k][k] - a[i][k] * a[k][j]) // previous
        previous = a[k][k]
    return sign * a[n - 1][n - 1]


def inverse_unimodular(u: Sequence[Sequence[int]]) -> Matrix:
    """Integer inverse of a unimodular matrix (Gauss-Jordan over the rationals)."""
    n = len(u)
    a = [
        [Fraction(x) for x in row] + [Fraction(int(i == j)) for j in range(n)]
        for i, row in enumerate(u)
    ]
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col] != 0), None)
        if pivot is None:
            raise ValueError("matrix is singular")
        a[col], a[pivot] = a[pivot], a[col]
        scale = a[col][col]
        a[col] = [x / scale for x in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0:
                factor = a[r][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    result = tuple(tuple(a[i][n + j] for j in range(n)) for i in range(n))
    if any(x.denominator != 1 for row in result for x in row):
        raise ValueError("matrix is not unimodular")
    return tuple(tuple(int(x) for x in row) for row in result)


def solve_lower_triangular(h: Sequence[Sequence[int]]) -> tuple[tuple[Fraction, ...], ...]:
    """Rational inverse of a square lower-triangular matrix with non-zero diagonal."""
    n = len(h)
    inverse = [[Fraction(0)] * n for _ in range(n)]
    for col in range(n):
        for row in range(n):
            acc = Fraction(int(row == col))
            acc -= sum((h[row][k] * inverse[k][col] for k in range(row)), Fraction(0))
            inverse[row][col] = acc / h[row][row]
    return tuple(tuple(row) for row in inverse)


def _extended_gcd(a: int, b: int) -> tuple[int, int, int]:
    """``(g, s, t)`` with ``s·a + t·b = g = gcd(a, b) > 0``."""
    old_r, r = a, b
    old_s, s = 1, 0
    old_t, t = 0, 1
    while r != 0:
        q = old_r // r
        old_r, r = r, old_r - q * r
        old_s, s = s, old_s - q * s
        old_t, t = t, old_t - q * t
    if old_r < 0:
        return -old_r, -old_s, -old_t
    return old_r, old_s, old_t


def column_hnf(m: Sequence[Sequence[int]], n_cols: int | None = None) -> ColumnHermiteForm:
    """Column Hermite normal form of ``m`` (``n_cols`` is needed only without rows).

    Dependent rows get no pivot; ``H`` then has fewer columns than ``m`` has rows.
    """
    n = len(m[0]) if m else (n_cols or 0)
    if any(len(row) != n for row in m):
        raise ValueError("ragged matrix")
    # Work on columns: cols[c] is column c of the current M·U, ucols[c] of U.
    cols = [[row[c] for row in m] for c in range(n)]
    ucols = [[int(i == c) for i in range(n)] for c in range(n)]
    pivot_rows: list[int] = []

    def combine(p: int, q: int, row: int) -> None:
        """Unimodular column operation on (p, q) that zeroes entry ``row`` of column q."""
        a, b = cols[p][row], cols[q][row]
        if b % a == 0:
            f = b // a
            cols[q] = [y - f * x for x, y in zip(cols[p], cols[q], strict=True)]
            ucols[q] = [y - f * x for x, y in zip(ucols[p], ucols[q], strict=True)]
            return
        g, s, t = _extended_gcd(a, b)
        ag, bg = a // g, b // g
        for store in (cols, ucols):
            x, y = store[p], store[q]
            store[p] = [s * xi + t * yi for xi, yi in zip(x, y, strict=True)]
            store[q] = [-bg * xi + ag * yi for xi, yi in zip(x, y, strict=True)]

    for row in range(len(m)):
        rank = len(pivot_rows)
        nonzero = [c for c in range(rank, n) if cols[c][row] != 0]
        if not nonzero:
            continue
        p = nonzero[0]
        for q in nonzero[1:]:
            combine(p, q, row)
        if cols[p][row] < 0:
            cols[p] = [-x for x in cols[p]]
            ucols[p] = [-x for x in ucols[p]]
        cols.insert(rank, cols.pop(p))
        ucols.insert(rank, ucols.pop(p))
        pivot = cols[rank][row]
        for c in range(rank):
            f = cols[c][row] // pivot
            if f:
                cols[c] = [x - f * y for x, y in zip(cols[c], cols[rank], strict=True)]
                ucols[c] = [x - f * y for x, y in zip(ucols[c], ucols[rank], strict=True)]
        pivot_rows.append(row)

    rank = len(pivot_rows)
    h = tuple(tuple(cols[c][r] for c in range(rank)) for r in range(len(m)))
    u = tuple(tuple(ucols[c][r] for c in range(n)) for r in range(n))
    return ColumnHermiteForm(h=h, u=u, pivot_rows=tuple(pivot_rows))


def row_echelon(m: Sequence[Sequence[int]], n_cols: int | None = None) -> tuple[Matrix, Matrix]:
    """Row Hermite form: ``(E, T)`` with ``T`` unimodular and ``E = T·m``.

    The non-zero rows of ``E`` come first, each with its leading entry (positive)
    strictly right of the previous one; dependent rows become zero rows at the end.
    Used to bring isl's equalities into a canonical basis before compressing.
    """
    width = len(m[0]) if m else (n_cols or 0)
    form = column_hnf(transpose(m, width), len(m))
    t = transpose(form.u, len(m))
    return matmul(t, m), t
