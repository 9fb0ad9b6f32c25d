"""Uneven tiles sent at one size: each PE's block grown to the largest tile's.

Tiles of 10 over a tensor of 36 leave a last tile of 6: blocks of four sizes, which
differ inside (10 x 6 and 10 x 10), so no one SIMD configuration sends and lands them
all row-major. Sent from its first element at the largest size, every block is one
configuration; what the smaller ones add lies beyond the tensor's shape, where no
statement reads, so a receiver may hold it anywhere its array has room. The local
arrays of senders (and of receivers keeping whole blocks) are grown to hold it
(:func:`mapping.memory.allocate`), and the exchanges send it (:mod:`codegen.blocks`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import islpy as isl

from dtg.mapping import poly

_dt = isl.dim_type
_PADDING: ContextVar[bool] = ContextVar("padding", default=True)


def padding_enabled() -> bool:
    return _PADDING.get()


@contextmanager
def without_padding() -> Iterator[None]:
    """Compile without growing the local arrays for padded blocks (where the module's
    arrays with them would not fit a PE): the exchanges then check that a padded block
    does not fit and take another protocol."""
    token = _PADDING.set(False)
    try:
        yield
    finally:
        _PADDING.reset(token)


def padded_blocks(produced: isl.Map, shape: Sequence[int]
                  ) -> tuple[isl.Map, tuple[int, ...]] | None:
    """``PE -> element``: each PE's elements of ``produced`` (one box per PE, of a few
    sizes) grown from its first element to the largest size (also returned), where
    everything this adds lies outside ``shape``; None where the blocks already have one
    size, are not boxes, or a grown block would take in an element of the tensor."""
    bound = poly.bind_pe(produced)
    if bound.is_empty() or not bound.is_bounded():
        return None
    rect = poly.rectangularity(bound, index=())
    if not rect.dense or rect.constant_size is not None:
        return None
    try:
        sizes = poly.points(rect.sizes.project_out_all_params(), limit=1 << 12)
    except poly.TooManyPointsError:
        return None
    if not sizes or len(sizes[0]) != len(shape):
        return None
    size = tuple(max(v[d] for v in sizes) for d in range(len(sizes[0])))
    box = grown_box(bound, rect.minimum, size)
    extra, bound_a = poly.align_params(box, bound)
    extra = extra.subtract(bound_a)
    inside = isl.Set.universe(extra.get_space())
    for d, n in enumerate(shape):
        inside = inside.lower_bound_val(_dt.set, d, isl.Val.int_from_si(inside.get_ctx(), 0))
        inside = inside.upper_bound_val(_dt.set, d, isl.Val.int_from_si(inside.get_ctx(),
                                                                          n - 1))
    if not extra.intersect(inside).is_empty():
        return None
    return box.unbind_params_insert_domain(poly.multi_id(produced.get_space().domain(),
                                                         poly.PE_NAMES)), size


def grown_box(bound: isl.Set, minimum: isl.MultiPwAff, size: tuple[int, ...]) -> isl.Set:
    """The box of ``size`` from ``minimum`` (over the PE), where ``bound`` is not empty."""
    space = bound.get_space()
    ls = isl.LocalSpace.from_space(space)
    box = isl.Set.universe(space).intersect_params(bound.params())
    for d, n in enumerate(size):
        var = isl.PwAff.var_on_domain(ls, _dt.set, d)
        low = minimum.get_at(d).insert_domain(space)
        box = box.intersect(var.ge_set(low)).intersect(
            var.lt_set(low.add_constant_val(isl.Val.int_from_si(space.get_ctx(), n))))
    return box


__all__ = ["grown_box", "padded_blocks", "padding_enabled", "without_padding"]
