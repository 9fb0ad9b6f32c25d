"""Whether a SIMD instruction may scan its instances in another order.

A SIMD instruction runs its box in row-major order of the compressed coordinates.
Scanning the same instances along other coordinates (a varying dimension moved
outermost, so that one configuration cut by a run-time length serves every size) computes
the same values only where no two instances that touch the same local element (one
writing it) change their relative order. That is checked here with isl on the local
positions, so tensors that share one array (codegen.inplace) count as the same memory.
"""

from __future__ import annotations

import islpy as isl

from dtg.lair.lower import PolyStatement
from dtg.mapping import poly
from dtg.mapping.memory import Memory


def _before(comp: poly.Compression, instances: isl.Set) -> isl.Map:
    """``{p -> q}`` over ``instances``: ``p`` comes before ``q`` in the scan of ``comp``."""
    to_c = isl.Map.from_multi_aff(comp.inverse)
    lex = isl.Map.lex_lt(comp.compressed.get_space())
    to_c, lex = poly.align_params(to_c, lex)
    before = to_c.apply_range(lex).apply_range(to_c.reverse())
    before, instances = poly.align_params(before, instances)
    return before.intersect_domain(instances).intersect_range(instances)


def _positions(pstmt: PolyStatement, tensor: str, memory: Memory) -> isl.Map | None:
    """Instance -> the local element it touches of ``tensor`` (named by its array)."""
    local = memory.of(tensor)
    if local is None:
        return None
    access, to_local = poly.align_params(pstmt.access_function(tensor), local.to_local_bound)
    return access.apply_range(isl.Map.from_multi_aff(to_local))


def scan_keeps_conflicts(pstmt: PolyStatement, instances: isl.Set, dst: str,
                         srcs: tuple[str, ...], old: poly.Compression,
                         new: poly.Compression, memory: Memory) -> bool:
    """Every pair of ``instances`` that writes and then touches (or touches and then
    writes) one local element keeps its order when the scan of ``old`` becomes ``new``."""
    written = _positions(pstmt, dst, memory)
    if written is None:
        return False
    conflicts: list[isl.Map] = []
    for tensor in dict.fromkeys((dst, *srcs)):
        touched = _positions(pstmt, tensor, memory)
        if touched is None:
            return False
        if touched.get_tuple_name(isl.dim_type.out) != written.get_tuple_name(
                isl.dim_type.out):
            continue  # another array
        w, t = poly.align_params(written, touched)
        conflicts += [w.apply_range(t.reverse()), t.apply_range(w.reverse())]
    before_old = _before(old, instances)
    before_new = _before(new, instances)
    for pairs in conflicts:
        pairs, b_old = poly.align_params(pairs, before_old)
        ordered = pairs.intersect(b_old)
        ordered, b_new = poly.align_params(ordered, before_new)
        if not ordered.is_subset(b_new):
            return False
    return True
