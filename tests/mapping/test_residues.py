"""A compressed coordinate's residues lifted (:func:`mapping.poly.residues_lifted`): the
same instances, one for one, and for a cyclic diagonal's rows of one residue a dense box."""

from __future__ import annotations

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping import poly


def _diagonal(n: int, m: int, u: int, v: int, rows: int) -> isl.Set:
    """The elements of an ``n`` x ``n`` tensor on a PE of ``PE[(u i + v j) mod m,
    i // rows]``: a lattice whose basis is not along the axes."""
    return isl.Set(f"[X, Y] -> {{ s[i, j] : 0 <= X < {m} and 0 <= Y and 0 <= i < {n} and "
                   f"0 <= j < {n} and {rows} Y <= i < {rows} Y + {rows} and "
                   f"({u} i + {v} j - X) mod {m} = 0 }}")


def _one_for_one(s: isl.Set, lifted: poly.Compression) -> None:
    image = lifted.compressed.apply(isl.Map.from_multi_aff(lifted.map))
    assert image.is_equal(s)
    assert s.apply(isl.Map.from_multi_aff(lifted.inverse)).is_equal(lifted.compressed)
    assert isl.Map.from_multi_aff(lifted.map).intersect_domain(
        lifted.compressed).is_injective()


def _boxes_per_residue(lifted: poly.Compression, y: int) -> list[tuple[int, ...]] | None:
    """The exact box sizes of ``lifted``'s rows of each residue on PEs ``(x, y)``;
    None where one is not a box."""
    sizes = []
    for x in range(4):
        for r in range(4):
            piece = lifted.compressed.fix_val(isl.dim_type.param, 0, isl.Val(x)).fix_val(
                isl.dim_type.param, 1, isl.Val(y)).fix_val(isl.dim_type.set, 0, isl.Val(r))
            approx = poly.approximate_by_box(piece)
            if approx is None or not approx.exact:
                return None
            sizes.append(approx.box.size)
    return sizes


def test_a_cyclic_diagonal_is_a_box_per_residue() -> None:
    """``(i + j) mod 4``: skewed by 4 each row is one run at stride 4; with the rows'
    residues modulo 4 lifted, the rows of one residue are an 8 x 32 box."""
    s = _diagonal(128, 4, 1, 1, 32)
    comp = poly.compress(s)
    found = []
    for a in (0, 1):
        for factor in (4, -4):
            for shift in (1, -1):
                lifted = poly.residues_lifted(poly.skewed(comp, a, 1 - a, factor), a, 1 - a,
                                              4, shift)
                _one_for_one(s, lifted)
                sizes = _boxes_per_residue(lifted, 1)
                if sizes is not None:
                    found.append(sizes)
    assert found and all(size == (1, 8, 32) for size in found[0])


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 40), st.integers(2, 6), st.sampled_from([(1, 1), (1, -1), (2, 1),
                                                               (1, 2), (3, 1)]),
       st.integers(1, 12), st.integers(0, 1), st.integers(0, 1), st.integers(2, 6),
       st.integers(-2, 2))
def test_residues_keep_every_instance_once(n: int, m: int, uv: tuple[int, int], rows: int,
                                           a: int, skewed: int, modulus: int,
                                           shift: int) -> None:
    """Any coordinate, any modulus and shift: the lifted set maps one for one onto the
    set."""
    s = _diagonal(n, m, *uv, rows)
    comp = poly.compress(s)
    if comp.dim != 2:
        return
    if skewed:
        comp = poly.skewed(comp, a, 1 - a, modulus)
    _one_for_one(s, poly.residues_lifted(comp, a, 1 - a, modulus, shift))
