"""Size variants: one SIMD configuration for the boxes of uneven tiles (a smaller last
tile), each PE selecting its size by an expression of its coordinates (§5.4)."""

from __future__ import annotations

import islpy as isl

from dtg.codegen.islast import pw_aff_expr
from dtg.lair.lower import CTX
from dtg.mapping import poly
from dtg.pe.ir import IExpr

MAX_SIZE_VARIANTS = 4


def size_variants(sizes: isl.Set, context: isl.Set
                  ) -> tuple[tuple[tuple[int, ...], ...], IExpr] | None:
    """The box sizes a PE's elements take (``sizes``: size vectors over the PE
    coordinates and any other parameters) and the expression selecting a PE's; None
    beyond a few, or where there is only one."""
    try:
        vectors = poly.points(sizes.project_out_all_params(), limit=1 << 12)
    except poly.TooManyPointsError:
        return None
    if not 1 < len(vectors) <= MAX_SIZE_VARIANTS:
        return None
    which: isl.PwAff | None = None
    for k, vector in enumerate(vectors):
        point = isl.Set.universe(sizes.get_space())
        for d, v in enumerate(vector):
            point = point.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(CTX, v))
        where = sizes.intersect(point).params()
        piece = isl.PwAff.val_on_domain(where, isl.Val.int_from_si(CTX, k))
        which = piece if which is None else which.union_add(piece)
    assert which is not None
    return tuple(tuple(v) for v in vectors), pw_aff_expr(which.coalesce(), context)
