"""Quasi-affine functions read by meaning: divisions that are fixed on a domain.

A stream's order such as ``index[h mod 4, w, c mod 2]`` has divisions of the element's
coordinates, but on the elements one PE receives (``h // 4`` and ``c // 2`` fixed by the
PE's row) it is affine: ``h - 4 * (PE_Y // 2)``. Code that needs an affine position
(landing arrays, SIMD strides) asks isl whether each division is a function of the
parameters alone on the domain, and substitutes it; how the order was written does not
matter.
"""

from __future__ import annotations

import islpy as isl

_dt = isl.dim_type
MAX_DIVISIONS = 8  # divisions substituted at most (each needs two parametric optima)


def one_piece(value: isl.PwAff) -> isl.Aff | None:
    """The quasi-affine expression that equals ``value`` on its whole domain, if one of
    its pieces does (isl may split an expression such as ``PE_Y // 2`` into cases)."""
    pieces: list[isl.Aff] = []
    value.foreach_piece(lambda _s, aff: pieces.append(aff))
    domain = value.domain()
    for aff in pieces:
        if isl.PwAff.from_aff(aff).intersect_domain(domain).is_equal(value):
            return aff
    return None


def lift(value: isl.Aff, space: isl.Space) -> isl.Aff:
    """A function of the parameters as a function on the set space ``space``."""
    value = value.align_params(space)
    space = space.align_params(value.get_space())
    onto = isl.Space.map_from_domain_and_range(space, value.get_domain_space())
    return value.pullback_multi_aff(isl.MultiAff.zero(onto))


def _set_divisions(aff: isl.Aff) -> list[int]:
    n = aff.dim(_dt.in_)
    return [d for d in range(aff.dim(_dt.div))
            if aff.get_div(d).involves_dims(_dt.in_, 0, n)]


def affine_on(aff: isl.Aff, domain: isl.Set) -> isl.Aff | None:
    """``aff`` without divisions of its domain's coordinates, equal to it on ``domain``
    (where each such division takes one value per parameter value), or None."""
    aff, domain = aff.align_params(domain.get_space()), domain.align_params(aff.get_space())
    for _ in range(MAX_DIVISIONS):
        found = _set_divisions(aff)
        if not found:
            return aff
        d = found[0]
        division = aff.get_div(d).floor()
        values = isl.Map.from_aff(division).intersect_domain(domain).range()
        lo, hi = values.dim_min(0), values.dim_max(0)
        if not lo.is_equal(hi):
            return None
        fixed = one_piece(lo)
        if fixed is None:
            return None
        coefficient = aff.get_coefficient_val(_dt.div, d)
        substitute = lift(fixed, domain.get_space())
        aff = aff.sub(division.scale_val(coefficient)).add(substitute.scale_val(coefficient))
    return aff if not _set_divisions(aff) else None
