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

from dtg.mapping import poly

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
            if not aff.get_coefficient_val(_dt.div, d).is_zero()
            and aff.get_div(d).involves_dims(_dt.in_, 0, n)]


def _whole_part(quotient: isl.Aff) -> tuple[isl.Aff, isl.Aff]:
    """``floor(quotient)`` as ``whole + floor(rest)``: ``whole`` the coordinates' integer
    coefficients, ``rest``'s less than one, so ``(4 i) // 3`` is ``i + i // 3`` and its
    division may be fixed where the first is not."""
    n = quotient.dim(_dt.in_)
    whole = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(quotient.get_domain_space()))
    for k in range(n):
        value = quotient.get_coefficient_val(_dt.in_, k)
        whole = whole.set_coefficient_val(_dt.in_, k, value.floor())
    return whole, quotient.sub(whole).floor()


def affine_on(aff: isl.Aff, domain: isl.Set) -> isl.Aff | None:
    """``aff`` without divisions of its domain's coordinates, equal to it on ``domain``
    (where each such division takes one value per parameter value), or None."""
    aff, domain = aff.align_params(domain.get_space()), domain.align_params(aff.get_space())
    for _ in range(MAX_DIVISIONS):
        found = _set_divisions(aff)
        if not found:
            return aff
        d = found[0]
        whole, rest = _whole_part(aff.get_div(d))
        values = isl.Map.from_aff(rest).intersect_domain(domain).range()
        lo, hi = values.dim_min(0), values.dim_max(0)
        if not lo.is_equal(hi):
            return None
        fixed = one_piece(lo)
        if fixed is None:
            return None
        coefficient = aff.get_coefficient_val(_dt.div, d)
        substitute = whole.add(lift(fixed, domain.get_space()).align_params(whole.get_space()))
        # (the division dropped by its coefficient: isl may simplify the same division
        # built anew, ``floor(4i/3)`` to ``i + floor(i/3)``, which would not cancel it)
        aff = aff.set_coefficient_val(_dt.div, d, 0).add(substitute.scale_val(coefficient))
    return aff if not _set_divisions(aff) else None


def affine_on_lattice(aff: isl.Aff, domain: isl.Set) -> bool:
    """Whether ``aff`` is, on the integer points of ``domain``, an affine function of the
    coordinates of ``domain``'s lattice: ``i // 2`` on the odd ``i`` is ``(i - 1) / 2``, the
    ``t`` of ``i = 2t + 1``. Code that addresses through ``aff`` over such points (a copy
    with a stride) then sees isl simplify its divisions away."""
    aff, domain = aff.align_params(domain.get_space()), domain.align_params(aff.get_space())
    if domain.is_empty():
        return False
    if affine_on(aff, domain) is not None:
        return True
    compression = poly.within_effort(LATTICE_EFFORT, lambda: poly.compress(domain))
    if compression is None:
        return False
    pulled = aff.pullback_multi_aff(compression.map.align_params(aff.get_space()))
    return affine_on(pulled, compression.compressed) is not None


LATTICE_EFFORT = 100_000
