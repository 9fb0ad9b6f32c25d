"""Quasi-affine functions made affine where their divisions are fixed on a domain."""

from __future__ import annotations

from itertools import pairwise

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.mapping.affine import affine_on, affine_on_lattice, one_piece


def values(aff: isl.Aff, domain: isl.Set) -> dict[tuple[int, ...], int]:
    """Brute force: ``aff`` at every point of ``domain`` (parameters included)."""
    graph = isl.Map.from_aff(aff).intersect_domain(domain).wrap()
    n_par = graph.dim(isl.dim_type.param)
    points = graph.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n_par)
    out: dict[tuple[int, ...], int] = {}

    def point(p: isl.Point) -> None:
        n = p.get_space().dim(isl.dim_type.set)
        coords = [int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
                  for k in range(n)]
        out[tuple(coords[:-1])] = coords[-1]

    points.foreach_point(point)
    return out


def no_set_divisions(aff: isl.Aff) -> bool:
    n = aff.dim(isl.dim_type.in_)
    return not any(aff.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
                   for d in range(aff.dim(isl.dim_type.div)))


def test_the_papers_sparse_order_is_affine_on_each_pe() -> None:
    """Example 5.7: index[h mod 4, w, c mod 2] on the elements of one PE row."""
    domain = isl.Set("[PE_Y] -> { x[h, w, c] : 0 <= PE_Y <= 3 and 0 <= h <= 7 and "
                     "0 <= w <= 7 and 0 <= c <= 3 and 2*floor(h/4) + floor(c/2) = PE_Y }")
    aff = isl.Aff("[PE_Y] -> { x[h, w, c] -> [(16*(h mod 4) + 2*w + (c mod 2))] }")
    made = affine_on(aff, domain)
    assert made is not None and no_set_divisions(made)
    assert values(made, domain) == values(aff, domain)


def test_a_division_that_varies_on_the_domain_is_kept() -> None:
    domain = isl.Set("[P] -> { x[i] : 0 <= P <= 1 and 8*P <= i <= 8*P + 7 }")
    assert affine_on(isl.Aff("[P] -> { x[i] -> [(i mod 4)] }"), domain) is None


def test_one_piece_finds_the_expression_isl_split_into_cases() -> None:
    value = isl.PwAff("[P] -> { [] -> [(0)] : P = 0; [] -> [(P)] : 1 <= P <= 3 }")
    assert value.n_piece() == 2
    made = one_piece(value)
    assert made is not None
    assert isl.PwAff.from_aff(made).intersect_domain(value.domain()).is_equal(value)
    assert one_piece(isl.PwAff("[P] -> { [] -> [(0)] : P <= 1; [] -> [(5)] : P >= 2 }")) \
        is None


@settings(max_examples=60, deadline=None)
@given(tile=st.sampled_from([1, 2, 3, 4, 6, 8]), modulus=st.sampled_from([2, 3, 4, 8, 12]),
       scale=st.integers(-3, 3), shift=st.integers(-2, 2))
def test_against_brute_force(tile: int, modulus: int, scale: int, shift: int) -> None:
    """Elements tiled by ``tile`` per PE, a position with ``i mod modulus``: affine on a
    PE exactly where the tile lies within one period of the modulus, and then equal."""
    domain = isl.Set(f"[P] -> {{ x[i] : 0 <= P <= 5 and {tile}*P <= i < {tile}*P + {tile} }}")
    aff = isl.Aff(f"[P] -> {{ x[i] -> [({scale}*(i mod {modulus}) + {shift}*i)] }}")
    made = affine_on(aff, domain)
    fixed = all(len({i // modulus for i in range(tile * p, tile * p + tile)}) == 1
                for p in range(6))
    if scale == 0:
        fixed = True  # (isl drops the division)
    assert (made is not None) == fixed
    if made is not None:
        assert no_set_divisions(made)
        assert values(made, domain) == values(aff, domain)


def test_an_order_by_parity_is_affine_on_each_class() -> None:
    """The odd positions first, then the even ones: ``i // 2`` is ``(i - 1) / 2`` on the
    odd ``i`` of a PE's window, not affine on the window itself."""
    order = isl.Aff("[P] -> { x[i] -> [(128 - 128*(i mod 2) + floor(i/2))] }")
    window = "0 <= P <= 3 and 63*P <= i <= 63*P + 66"
    assert not affine_on_lattice(order, isl.Set(f"[P] -> {{ x[i] : {window} }}"))
    for parity in (0, 1):
        assert affine_on_lattice(order, isl.Set(
            f"[P] -> {{ x[i] : {window} and (i - {parity}) mod 2 = 0 }}"))


def lattice_affine_by_brute_force(aff: isl.Aff, domain: isl.Set) -> bool:
    """Whether ``aff`` is, at each parameter value, ``a + b * t`` over the consecutive
    points of the domain (all one lattice step apart): their values one constant apart."""
    by_param: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for point, value in values(aff, domain).items():
        by_param.setdefault(point[:-1], []).append((point[-1], value))
    steps = set()
    for pairs in by_param.values():
        pairs.sort()
        steps |= {b[1] - a[1] for a, b in pairwise(pairs)}
    return len(steps) <= 1


@settings(max_examples=60, deadline=None)
@given(step=st.sampled_from([1, 2, 3, 4]), residue=st.integers(0, 3),
       modulus=st.sampled_from([2, 3, 4, 8]), scale=st.integers(-3, 3),
       shift=st.integers(-2, 2), tile=st.sampled_from([8, 12, 16]))
def test_lattice_against_brute_force(step: int, residue: int, modulus: int, scale: int,
                                     shift: int, tile: int) -> None:
    """Every ``step``-th element of a PE's tile, a position written with ``i // modulus``
    and ``i mod modulus``: affine on the lattice only where brute force finds the
    positions of consecutive lattice points one constant apart, and there wherever a PE
    has three points or more (on two, any function is affine, which isl need not see)."""
    residue %= step
    domain = isl.Set(f"[P] -> {{ x[i] : 0 <= P <= 3 and {tile}*P <= i < {tile}*P + {tile} "
                     f"and (i - {residue}) mod {step} = 0 }}")
    aff = isl.Aff(f"[P] -> {{ x[i] -> [({scale}*floor(i/{modulus}) + "
                  f"{shift}*(i mod {modulus}))] }}")
    found, truth = affine_on_lattice(aff, domain), lattice_affine_by_brute_force(aff, domain)
    assert truth or not found
    if tile // step >= 3:
        assert found == truth
