"""Blocks of a block-cyclic placement as coordinates of their own.

A PE of a block-cyclic placement (``PE[(i//8) mod 4]``) runs the instances
``32 q + 8 PE + r`` for every block ``q`` and ``0 <= r < 8``: a set whose box hull is
five times larger than it is, with gaps no SIMD instruction may fill. isl writes it with
an existentially quantified ``floor(i/32)``. Lifted into a coordinate of its own, with
the block's offset ``r = i - 32 floor(i/32)`` in place of ``i``, the same instances are
a dense box ``[0, 2) x [8 PE, 8 PE + 8)`` of the coordinates ``(q, r)``, along which every
access stays affine: one instruction per PE instead of scalar loops or extra instances.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import islpy as isl

from dtg.mapping.poly import Compression

_dt = isl.dim_type


@dataclass(frozen=True)
class _Block:
    """``q = floor((x + c) / period)``: a set dimension ``x``'s block number."""

    dim: int
    period: int
    div: isl.Aff  # x + c over the period, as isl keeps it (its floor is q)
    offset: isl.Aff  # c, on the parameters only


def lift_blocks(compression: Compression, *, rounds: int | None = None) -> Compression | None:
    """``compression`` followed by lifting, for each of its coordinates ``x`` read through
    one ``floor((x + c) / P)`` (``c`` on the parameters), that floor into a new outer
    coordinate ``q`` and ``x`` into ``r = x - P q`` (``-c <= r < P - c``); the block
    coordinates come first. Blocks within blocks (``(j//16) mod 4`` beside
    ``(j//64) mod 2``) are lifted in turn, the largest first, in up to ``rounds`` rounds
    (default :data:`MAX_LIFTS`). None where no coordinate is read so."""
    lifted = _lift_all(compression.compressed, in_order=False, rounds=rounds or MAX_LIFTS)
    if lifted is None:
        return None
    forward, s, inverse, m = lifted
    return Compression(compression.map.pullback_multi_aff(forward), s,
                       inverse.pullback_multi_aff(compression.inverse),
                       compression.lifted + m)


def lift_in_order(s: isl.Set) -> tuple[isl.MultiAff, isl.Set] | None:
    """As :func:`lift_blocks` on ``s`` itself, each block coordinate just before its
    offset's, so that the lifted points come in the same lexicographic order (a stream's
    index ``8 (i // 32) + i mod 8``): the map from the lifted coordinates to ``s``'s and
    the lifted set; None where no coordinate is read through a block's floor."""
    lifted = _lift_all(s, in_order=True)
    return None if lifted is None else (lifted[0], lifted[1])


MAX_LIFTS = 4  # rounds of lifting blocks within blocks


def _lift_all(s: isl.Set, *, in_order: bool, rounds: int = MAX_LIFTS
              ) -> tuple[isl.MultiAff, isl.Set, isl.MultiAff, int] | None:
    """:func:`_lift` again on what it gives, while some coordinate is still read through
    a block's floor (up to ``rounds`` in all): the maps composed, the blocks counted."""
    found = _lift(s, in_order=in_order)
    if found is None:
        return None
    forward, lifted, inverse, m = found
    for _ in range(rounds - 1):
        again = _lift(lifted, in_order=in_order)
        if again is None:
            break
        fwd, lifted, inv, more = again
        forward = forward.pullback_multi_aff(fwd)
        inverse = inv.pullback_multi_aff(inverse)
        m += more
    return forward, lifted, inverse, m


def _lift(s: isl.Set, *, in_order: bool
          ) -> tuple[isl.MultiAff, isl.Set, isl.MultiAff, int] | None:
    """The lifting of ``s``: the map from the lifted coordinates to ``s``'s, the lifted
    set, the map back, and the number of blocks lifted."""
    if s.n_basic_set() != 1:
        return None
    blocks = _blocks(s.get_basic_sets()[0], s.get_space())
    if not blocks:
        return None
    ctx = s.get_ctx()
    space = s.get_space()
    n, m = space.dim(_dt.set), len(blocks)
    by_dim = {b.dim: b for b in blocks}
    # where each block's number and each dimension's offset go among the m + n
    order = [("q", b.dim) for b in blocks] + [("x", j) for j in range(n)] if not in_order \
        else [kind_dim for j in range(n)
              for kind_dim in ([("q", j)] if j in by_dim else []) + [("x", j)]]
    at = {kind_dim: k for k, kind_dim in enumerate(order)}
    lifted_space = space.params().set_from_params().add_dims(_dt.set, m + n)
    for k in range(m + n):
        lifted_space = lifted_space.set_dim_name(_dt.set, k, f"i{k}")
    ls = isl.LocalSpace.from_space(lifted_space)

    def var(k: int) -> isl.Aff:
        return isl.Aff.var_on_domain(ls, _dt.set, k)

    def val(v: int) -> isl.Val:
        return isl.Val.int_from_si(ctx, v)

    to_old = []  # x = P q + r
    for j in range(n):
        x = var(at["x", j])
        if j in by_dim:
            x = x.add(var(at["q", j]).scale_val(val(by_dim[j].period)))
        to_old.append(x)
    forward = _multi_aff(isl.Space.map_from_domain_and_range(lifted_space, space), to_old)
    lifted = s.preimage_multi_aff(forward)
    for b in blocks:  # 0 <= r + c <= P - 1: q is x's block, and only it
        low = var(at["x", b.dim]).add(_on(b.offset, lifted_space))
        lifted = lifted.add_constraint(isl.Constraint.inequality_from_aff(low))
        lifted = lifted.add_constraint(isl.Constraint.inequality_from_aff(
            low.neg().add_constant_val(val(b.period - 1))))
    back: list[isl.Aff | None] = [None] * (m + n)
    for j in range(n):
        x = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), _dt.set, j)
        if j in by_dim:
            q = by_dim[j].div.floor()
            back[at["q", j]] = q
            x = x.sub(q.scale_val(val(by_dim[j].period)))
        back[at["x", j]] = x
    inverse = _multi_aff(isl.Space.map_from_domain_and_range(space, lifted_space),
                         [a for a in back if a is not None])
    return forward, lifted.coalesce(), inverse, m


def _blocks(b: isl.BasicSet, space: isl.Space) -> list[_Block]:
    """The divs of ``b`` of the form ``floor((x + c) / P)``, one set dimension ``x`` with
    coefficient 1, ``c`` on the parameters, ``P >= 2``. Of a dimension read through
    several, the one of the largest period where every other period divides it (the
    smaller blocks then lie within it, lifted in a later round); none otherwise."""
    n = space.dim(_dt.set)
    ctx = space.get_ctx()
    found: dict[int, list[_Block]] = {}
    fine: dict[int, _Block] = {}
    for k in range(b.dim(_dt.div)):
        try:
            div = b.get_div(k)
        except isl.Error:  # (an existential isl knows no expression of)
            continue
        if div.involves_dims(_dt.div, 0, b.dim(_dt.div)):
            continue
        dims = [j for j in range(n) if not div.get_coefficient_val(_dt.in_, j).is_zero()]
        if len(dims) > 1:
            for block in _fine_blocks(div, dims, space):
                fine.setdefault(block.dim, block)
            continue
        if len(dims) != 1:
            continue
        period = div.get_denominator_val()
        if not period.is_int() or period.le(isl.Val.one(ctx)):
            continue
        if not div.get_coefficient_val(_dt.in_, dims[0]).mul(period).is_one():
            continue
        offset = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))
        whole = True
        for p in range(space.dim(_dt.param)):
            c = div.get_coefficient_val(_dt.param, p).mul(period)
            whole = whole and c.is_int()
            offset = offset.set_coefficient_val(_dt.param, p, c)
        constant = div.get_constant_val().mul(period)
        if not whole or not constant.is_int():
            continue
        j = dims[0]
        found.setdefault(j, []).append(_Block(j, period.to_python(), div,
                                              offset.set_constant_val(constant)))
    blocks = []
    for _, candidates in sorted(found.items()):
        largest = max(candidates, key=lambda block: block.period)
        if all(largest.period % block.period == 0 for block in candidates):
            blocks.append(largest)
    if not blocks:  # (then a dimension's blocks inside a floor of several)
        blocks = [block for _, block in sorted(fine.items())]
    return blocks


def _fine_blocks(div: isl.Aff, dims: list[int], space: isl.Space) -> list[_Block]:
    """Of ``floor((a x + b y + c) / P)`` (several set dimensions): each dimension ``x``
    of coefficient 1 whose blocks of ``g = gcd(P, b, c, ...) >= 2`` the floor reads
    whole (``floor((8 floor(j/8) + i) / 32)``, a PE of ``(i//8 + j//8) mod 4``: ``i``'s
    blocks of 8), as a block of period ``g`` without offset; lifted, the floor reads
    the block numbers alone."""
    ctx = space.get_ctx()
    period = div.get_denominator_val()
    if not period.is_int():
        return []
    whole = [div.get_coefficient_val(_dt.in_, j).mul(period) for j in dims]
    rest = [div.get_coefficient_val(_dt.param, p).mul(period)
            for p in range(space.dim(_dt.param))] + [div.get_constant_val().mul(period)]
    if not all(v.is_int() for v in (*whole, *rest)):
        return []
    found = []
    for j, coefficient in zip(dims, whole, strict=True):
        if not coefficient.is_one():
            continue
        g = period.to_python()
        for other in (*(w for d, w in zip(dims, whole, strict=True) if d != j), *rest):
            g = gcd(g, other.to_python())
        if g < 2:
            continue
        x = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), _dt.set, j)
        found.append(_Block(j, g, x.scale_down_val(isl.Val.int_from_si(ctx, g)),
                            isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))))
    return found


def _on(offset: isl.Aff, space: isl.Space) -> isl.Aff:
    """``offset`` (on the parameters only) as an expression on the set space ``space``."""
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))
    for p in range(space.dim(_dt.param)):
        aff = aff.set_coefficient_val(_dt.param, p, offset.get_coefficient_val(_dt.param, p))
    return aff.set_constant_val(offset.get_constant_val())


def _multi_aff(space: isl.Space, affs: list[isl.Aff]) -> isl.MultiAff:
    lst = isl.AffList.alloc(space.get_ctx(), len(affs))
    for aff in affs:
        lst = lst.add(aff)
    return isl.MultiAff.from_aff_list(space, lst)


__all__ = ["lift_blocks", "lift_in_order"]
