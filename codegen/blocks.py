"""Exchanges of whole blocks: one SIMD instruction sends a PE's block, one receives it.

An exchange (docs/codegen.md) lets each PE in turn send the elements of an internal
tensor it holds along its line. The general protocol sends (value, flat index) pairs
from a scalar loop and stores each arriving pair in a data task: about 30 cycles per
element. Where every PE holds one box of the same size and every receiver keeps every
block it receives (its local array holds the blocks of all PEs of its line), the
exchange needs no indices: the sender streams its block densely with ``out(c)``, the
receiver lands it whole (a batched data task, docs/pecode.md) and copies it into place
with one SIMD instruction. The sender of the ``j``-th block a PE receives is known from
the turn order: the ``j``-th PE of the line, skipping the receiver itself. Along rows
and columns a receiver may keep only part of each block (the elements inside its local
array, as the indexed protocol keeps them): a box per block, copied by one SIMD
instruction where it is not empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Literal

import islpy as isl

from dtg.codegen.islast import aff_expr, condition_of, normalize, pw_aff_expr, substitute
from dtg.codegen.simd import row_major
from dtg.codegen.turns import TurnOrder
from dtg.codegen.variants import size_variants
from dtg.lair.lower import CTX
from dtg.mapping import poly
from dtg.mapping.flows import Exchange, Region
from dtg.mapping.memory import LocalTensor
from dtg.mapping.mesh import pe_space, same_line
from dtg.mapping.padding import grown_box, padded_blocks
from dtg.pe.ir import (
    MAX_SIMD_DIMS,
    MAX_SIMD_SIZE,
    Array,
    Cmp,
    IBin,
    IConst,
    IExpr,
    If,
    ISel,
    IVar,
    Run,
    SimdConfig,
    SimdOperand,
    Stmt,
    cut_dimension,
)

MAX_BLOCK = 4096  # elements landed at once


@dataclass(frozen=True)
class BlockExchange:
    """What the emitter puts in place of the scalar sends and the per-element receives."""

    configs: tuple[SimdConfig, ...]
    land: Array
    send: tuple[Stmt, ...]  # the PE's own block (if it has one), dense, on the color
    receive: tuple[Stmt, ...]  # the block just landed, into place (uses the block count)

    @property
    def size(self) -> int:
        """Wavelets of the largest block (a smaller one is closed by its end mark)."""
        return max(prod(v) for v in self.configs[0].variants)


@dataclass(frozen=True)
class SenderBlocks:
    """The block each sender of an exchange holds: one box, its size one of
    ``variants``, selected by ``variant`` (an expression of the sender's PE; None where
    every block has the same size: uneven tiles give a smaller last one). Sizes differ
    in their outermost dimension only, so that every block lands row-major with the
    same strides."""

    origin: tuple[isl.PwAff, ...]  # a block's first element, functions of its sender
    variants: tuple[tuple[int, ...], ...]
    variant: IExpr | None = None
    # sent at one size beyond some tiles: what each sends (elements, over its PE)
    padded: isl.Set | None = None
    # blocks of more sizes than variants take, differing in the dimension a length cuts
    # (pe.ir.cut_dimension): the one size, cut to this length (of the sender's PE)
    length: IExpr | None = None
    # the dimensions in the order a block is scanned, sent and landed, where not the
    # tensor's: the one whose length varies first, so that a length cuts it
    order: tuple[int, ...] | None = None
    # blocks varying in the cut dimension and in others (two misaligned tilings in 2-D):
    # every sender sends its block at the largest size in the others, from its array
    # (what each sends, over its PE), and a receiver copies its sender's variant of it
    sent_whole: isl.Set | None = None

    @property
    def sent(self) -> tuple[int, ...]:
        """The size a sender sends (a length may cut it)."""
        return self.size if self.sent_whole is not None else self.variants[0]

    @property
    def size(self) -> tuple[int, ...]:
        return max(self.variants, key=prod)


def sender_blocks(ex: Exchange, context: isl.Set, *, partial: bool = False,
                  shape: tuple[int, ...] | None = None, reorder: bool = False
                  ) -> SenderBlocks | None:
    """The blocks the senders of ``ex`` hold, where SIMD can send them: one box of one
    size (:func:`sender_block`; else at a quasi-affine offset), or boxes of a few sizes
    (uneven tiles); ``partial``: of partial sums too (what each sender wrote);
    ``reorder``: the caller scans blocks in :attr:`SenderBlocks.order`."""
    box = sender_block(ex, partial=partial)
    if box is not None:
        return SenderBlocks(tuple(isl.PwAff.from_aff(box.offset.get_at(d))
                                  for d in range(len(box.size))), (box.size,))
    if ex.reduce and not partial:
        return None
    produced = poly.bind_pe(ex.produced)
    if produced.is_empty() or not produced.is_bounded():
        return None
    rect = poly.rectangularity(produced, index=())
    if not rect.dense:
        return None
    variants: tuple[tuple[int, ...], ...]
    variant: IExpr | None = None
    if rect.constant_size is not None:  # (at a quasi-affine offset: a skewed block)
        variants = (rect.constant_size,)
    else:
        by_pe = size_variants(rect.sizes, context)
        if by_pe is None:
            return _cut_blocks(rect, context, reorder=reorder)
        variants, variant = by_pe
    size = max(variants, key=prod)
    if not 0 < len(size) <= MAX_SIMD_DIMS or prod(size) > MAX_BLOCK or \
            max(size) > MAX_SIMD_SIZE:
        return None
    if len({v[1:] for v in variants}) != 1:
        # (sizes that differ inside: every block sent at the largest, where what the
        # smaller ones add lies beyond the tensor, which nothing reads; else cut to a
        # length, where they differ in one dimension)
        padded = _padded(ex.produced, rect, shape) if shape is not None else None
        return padded or _cut_blocks(rect, context, reorder=reorder)
    return SenderBlocks(tuple(rect.minimum.get_at(d) for d in range(len(size))), variants,
                        variant)


def _cut_blocks(rect: poly.Rectangularity, context: isl.Set, *, reorder: bool = False
                ) -> SenderBlocks | None:
    """Blocks of many sizes that differ only in the dimension a length cuts (two
    tilings of one tensor that do not line up: the part of a 33-element tile a 32-element
    one reads is 1 to 7 long): one size, the largest, cut to each sender's length. With
    ``reorder``, the dimension that varies may be any one: blocks are then scanned with
    it outermost (2 rows of 27 to 33 columns go column by column)."""
    try:
        vectors = poly.points(rect.sizes.project_out_all_params(), limit=1 << 12)
    except poly.TooManyPointsError:
        return None
    if not vectors:
        return None
    size = tuple(max(v[d] for v in vectors) for d in range(len(vectors[0])))
    varied = [d for d in range(len(size)) if any(v[d] != size[d] for v in vectors)]
    cut = cut_dimension(size)
    order = None
    if varied and varied != [cut]:
        if not reorder:
            return None
        if len(varied) != 1:
            return _cut_and_variants(rect, context, size, varied)
        cut = varied[0]
        order = (cut, *(d for d in range(len(size)) if d != cut))
    if not 0 < len(size) <= MAX_SIMD_DIMS or prod(size) > MAX_BLOCK or \
            max(size) > MAX_SIMD_SIZE:
        return None
    length = pw_aff_expr(rect.extent.get_at(cut), context)
    return SenderBlocks(tuple(rect.minimum.get_at(d) for d in range(len(size))), (size,),
                        length=length, order=order)


def _cut_and_variants(rect: poly.Rectangularity, context: isl.Set, size: tuple[int, ...],
                      varied: list[int]) -> SenderBlocks | None:
    """Blocks varying in several dimensions (a halo between tiles of 17 and of 16 in
    2-D: 1 to 3 rows of 15 to 17 columns): one of them cut to a length, scanned
    outermost, and the others taking a few sizes, each a variant. Every sender sends
    its block at the largest size in the others (its array must hold that box), so that
    blocks land with the same strides; a receiver copies its sender's variant out of
    it. The cut dimension is the one whose sizes are the most varied."""
    def inner(c: int) -> isl.Set:
        return rect.sizes.project_out(isl.dim_type.set, c, 1)

    def distinct(c: int) -> int:
        try:
            return len(poly.points(inner(c).project_out_all_params(), limit=1 << 12))
        except poly.TooManyPointsError:
            return 1 << 12
    cut = min(varied, key=distinct)  # (the fewest variants left in the others)
    by_pe = size_variants(inner(cut), context)
    if by_pe is None:
        return None
    others, variant = by_pe
    variants = tuple((*v[:cut], size[cut], *v[cut:]) for v in others)
    if not 0 < len(size) <= MAX_SIMD_DIMS or prod(size) > MAX_BLOCK or \
            max(size) > MAX_SIMD_SIZE:
        return None
    bound = rect.box  # (the parameters where a PE holds a block)
    whole = grown_box(bound, rect.minimum, size).intersect(
        isl.PwAff.var_on_domain(isl.LocalSpace.from_space(bound.get_space()),
                                isl.dim_type.set, cut).le_set(
            rect.maximum.get_at(cut).insert_domain(bound.get_space())))
    order = (cut, *(d for d in range(len(size)) if d != cut))
    length = pw_aff_expr(rect.extent.get_at(cut), context)
    return SenderBlocks(tuple(rect.minimum.get_at(d) for d in range(len(size))), variants,
                        variant, length=length, order=order, sent_whole=whole)


def _padded(produced: isl.Map, rect: poly.Rectangularity, shape: tuple[int, ...]
            ) -> SenderBlocks | None:
    """Blocks of uneven tiles sent at the largest tile's size from their first element
    (one configuration, the same strides everywhere), where the elements the smaller
    ones then add all lie outside the tensor's ``shape`` (:mod:`mapping.padding`):
    nothing reads them, and a receiver holds them in its array's box (the caller
    checks)."""
    grown = padded_blocks(produced, shape)
    if grown is None:
        return None
    blocks, size = grown
    return SenderBlocks(tuple(rect.minimum.get_at(d) for d in range(len(size))), (size,),
                        padded=poly.bind_pe(blocks))


def block_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str, got: str,
                   turns: TurnOrder, shape: tuple[int, ...] | None = None
                   ) -> BlockExchange | None:
    """The block protocol for ``ex``, or None where the general one is needed (partial
    sums, blocks of different sizes or shapes, receivers that keep only part of them).
    With the tensor's ``shape``, blocks of uneven tiles may go at the largest tile's
    size, where what that adds lies beyond the tensor and inside every array involved."""
    context = region.context()
    blocks = sender_blocks(ex, context, shape=shape)
    if blocks is None or blocks.length is not None:
        return None
    sent = ex.produced
    kept = poly.box_map(local.array.box)
    if blocks.padded is not None:
        sent = blocks.padded.unbind_params_insert_domain(
            poly.multi_id(pe_space(), poly.PE_NAMES))
        own, kept_s = poly.align_params(sent.intersect_domain(ex.produced.domain()), kept)
        if not own.is_subset(kept_s):  # (a sender reads its whole padded block)
            return None
    line = {"row": same_line("E"), "column": same_line("N")}.get(ex.axis)
    if line is None:
        line = isl.Map.from_domain_and_range(region.pes(), region.pes())
    line = line.intersect_domain(region.pes()).intersect_range(region.pes())
    received = line.apply_range(sent)
    received, kept = poly.align_params(received, kept)
    whole = received.is_subset(kept)
    # The j-th block received comes from the j-th sender of the line, skipping this PE.
    j = IVar(got)
    sender = normalize(ISel(Cmp(">=", j, turns.position), IBin("+", j, IConst(1)), j))
    at = turns.sender(sender)
    origin = [pw_aff_expr(o, context) for o in blocks.origin]
    base, strides = block_base(local, context)
    land = f"land_{name}"
    send_cfg = SimdConfig(f"out_{name}_send", "copy", blocks.variants,
                          SimdOperand("out", color=ex.color),
                          (SimdOperand("array", local.name, strides),))
    # A PE holding nothing sends only its end mark: receivers count it, land nothing.
    holds = condition_of(poly.bind_pe(ex.produced).params(), context)
    run = Run(send_cfg.name, ((local.name, base(origin)),), None, blocks.variant)
    send = (run,) if holds is None else (If(holds, (run,)),)
    array = Array(land, local.dtype, (prod(blocks.size),))
    if whole:
        recv_cfg = SimdConfig(f"out_{name}_recv", "copy", blocks.variants,
                              SimdOperand("array", local.name, strides),
                              (SimdOperand("array", land, row_major(blocks.size)),))
        theirs = [substitute(o, at) for o in origin]
        which = None if blocks.variant is None else substitute(blocks.variant, at)
        return BlockExchange((send_cfg, recv_cfg), array, send, (Run(
            recv_cfg.name, ((local.name, base(theirs)), (land, IConst(0))), None, which),))
    parts = _parts(ex, local, region, got, turns, blocks.size, land, name, sent=sent,
                   uneven=True)
    if parts is None:
        return None
    configs, receive = parts
    return BlockExchange((send_cfg, *configs), array, send, receive)


def sender_block(ex: Exchange, *, partial: bool = False) -> poly.FixedSizeBox | None:
    """The block each sender of ``ex`` holds, one box of one size (a function of its
    PE) that SIMD can send, or None (partial sums unless ``partial``, other shapes, too
    large)."""
    if ex.reduce and not partial:
        return None
    produced = poly.bind_pe(ex.produced)
    box = poly.set_box_hull(produced, affine=True)
    if box is None or not 0 < len(box.size) <= MAX_SIMD_DIMS:
        return None
    if prod(box.size) > MAX_BLOCK or max(box.size) > MAX_SIMD_SIZE:
        return None
    exact, produced_a = poly.align_params(poly.box_set(box, produced.params()), produced)
    return box if exact.is_equal(produced_a) else None


def block_addressing(local: LocalTensor, box: poly.FixedSizeBox, context: isl.Set
                     ) -> tuple[list[IExpr], Callable[[list[IExpr]], IExpr], tuple[int, ...]]:
    """A sender's block (``box``, a function of its PE) in ``local``'s array: its first
    element's coordinates, the flat base in this PE's array of a block starting at given
    coordinates, and the array's strides."""
    origin = [aff_expr(box.offset.get_at(d), context) for d in range(len(box.size))]
    base, strides = block_base(local, context)
    return origin, base, strides


def block_base(local: LocalTensor, context: isl.Set
                ) -> tuple[Callable[[list[IExpr]], IExpr], tuple[int, ...]]:
    """The flat base in this PE's array of a block starting at given coordinates, and
    the array's strides."""
    offset = local.offset_aff()
    mine = [aff_expr(offset.get_at(d), context) for d in range(len(local.size))]
    strides = row_major(local.size)

    def base(block: list[IExpr]) -> IExpr:
        flat: IExpr = IConst(0)
        for o, m, stride in zip(block, mine, strides, strict=True):
            flat = IBin("+", flat, IBin("*", IConst(stride), IBin("-", o, m)))
        return normalize(flat)

    return base, strides


def reduce_block_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str,
                          got: str, turns: TurnOrder, op: Literal["fadd", "fmax"]
                          ) -> BlockExchange | None:
    """Partial results summed by blocks: each sender streams its whole local array (one
    SIMD ``out(c)``), each receiver adds the part of every block holding totals it keeps
    (one SIMD ``fadd``/``fmax`` per block) into place. An element of a sender's array it
    neither keeps nor writes still holds the reduction's neutral value (arrays start at
    0, a ``max=`` target's at -inf), which leaves the totals it is added to as they are;
    each total has one keeper, so a kept total sent along is added by nobody. None where
    the parts are not boxes of one size, or the arrays are much larger than what their
    PEs send (the indexed protocol then sends less)."""
    if not ex.reduce:
        return None
    size = local.size
    if not 0 < len(size) <= MAX_SIMD_DIMS or prod(size) > MAX_BLOCK or \
            max(size) > MAX_SIMD_SIZE:
        return None
    sends = poly.set_box_hull(poly.bind_pe(ex.produced))
    if sends is None or prod(size) > WHOLE_ARRAY_FACTOR * max(1, prod(sends.size)):
        return None
    land = f"land_{name}"
    strides = row_major(size)
    ways: list[tuple[tuple[int, ...], IExpr, isl.Map]] = []
    own = _own_block(ex, sends, size)
    if own is not None:  # (the box of what it wrote, not its whole array)
        origin, at, _ = block_addressing(local, sends, region.context())
        ways.append((sends.size, at(origin), own))
    ways.append((size, IConst(0),
                 poly.box_map(local.array.box).intersect_domain(ex.produced.domain())))
    for block, base, sent in ways:
        parts = _parts(ex, local, region, got, turns, block, land, name, sent=sent,
                       keeps=ex.needed, op=op)
        if parts is None:
            continue
        send_cfg = SimdConfig(f"out_{name}_send", "copy", (block,),
                              SimdOperand("out", color=ex.color),
                              (SimdOperand("array", local.name, strides),))
        configs, receive = parts
        return BlockExchange((send_cfg, *configs), Array(land, local.dtype, (prod(block),)),
                             (Run(send_cfg.name, ((local.name, base),)),), receive)
    return None


def _own_block(ex: Exchange, sends: poly.FixedSizeBox, size: tuple[int, ...]
               ) -> isl.Map | None:
    """``PE -> element`` of the box around the partial results each sender wrote, where
    that box is smaller than its whole array (a PE of a skewed placement holding its
    block and a total it keeps elsewhere in the array): sending it alone sends less.
    Inside the box, an element the PE did not write holds the neutral value or a total
    it keeps, as in the whole array. None where the whole array is as small."""
    if len(sends.size) != len(size) or prod(sends.size) >= prod(size):
        return None
    box = poly.range_box_hull(ex.produced)
    if box is None or box.size != sends.size:
        return None
    return poly.box_map(box).intersect_domain(ex.produced.domain())


WHOLE_ARRAY_FACTOR = 4  # a whole array sent, at most this many times what a PE sends


def _parts(ex: Exchange, local: LocalTensor, region: Region, got: str, turns: TurnOrder,
           block: tuple[int, ...], land: str, name: str, *, sent: isl.Map | None = None,
           keeps: isl.Map | None = None, op: Literal["copy", "fadd", "fmax"] = "copy",
           uneven: bool = False) -> tuple[tuple[SimdConfig, ...], tuple[Stmt, ...]] | None:
    """Where a receiver keeps only part of the blocks (the elements inside its local
    array): per block, that part (a box, the intersection of two) copied by one SIMD
    instruction, or nothing. The sender of block ``j`` is the ``j``-th sender of the
    line (``turns``: row, column, or the region in row-major order) before the
    receiver's own turn, the ``j + 1``-th from it on: one case each. ``sent`` (what
    each sender sends, default the elements it holds), ``keeps`` (what each receiver
    keeps of it, default what its array holds) and ``op`` (``fadd``/``fmax``: partial
    results added into the totals) serve reducing exchanges; ``uneven``: blocks whose
    kept parts differ in size (uneven tiles) take a size variant each."""
    sent = ex.produced if sent is None else sent
    kept_map = poly.box_map(local.array.box) if keeps is None else keeps
    row = ex.axis == "row"
    rj = isl.Space.create_from_names(CTX, set=["x", "y", "j"]).set_tuple_name(
        isl.dim_type.set, "RJ")
    ls = isl.LocalSpace.from_space(rj)
    x, y, j = (isl.Aff.var_on_domain(ls, isl.dim_type.set, k) for k in range(3))
    zero = j.sub(j)

    def const(v: int) -> isl.Aff:
        return zero.add_constant_val(isl.Val.int_from_si(CTX, v))

    def within(a: isl.Aff, low: int, n: int) -> isl.Set:
        pa = isl.PwAff.from_aff(a)
        return pa.ge_set(isl.PwAff.from_aff(const(low))).intersect(
            pa.le_set(isl.PwAff.from_aff(const(low + n - 1))))

    w = isl.Val.int_from_si(CTX, turns.width)
    rx, ry = x.sub(const(turns.x0)), y.sub(const(turns.y0))
    rank = {"row": rx, "column": ry}.get(ex.axis, ry.scale_val(w).add(rx))
    senders = within(x, turns.x0, turns.width).intersect(within(y, turns.y0, turns.height))
    lines = {"row": within(y, turns.y0, turns.height),
             "column": within(x, turns.x0, turns.width)}.get(ex.axis, isl.Set.universe(rj))
    count = {"row": turns.width, "column": turns.height}.get(
        ex.axis, turns.width * turns.height)
    one = isl.Val.one(CTX)
    to_receiver = isl.MultiAff.zero(isl.Space.map_from_domain_and_range(rj, pe_space()))
    to_receiver = to_receiver.set_at(0, x).set_at(1, y)
    names = [*poly.PE_NAMES, got]
    from_zero = isl.PwAff.from_aff(j).ge_set(isl.PwAff.from_aff(zero))
    # a sender receives count - 1 blocks, any other PE of a line with senders count
    every = from_zero.intersect(senders).intersect(isl.PwAff.from_aff(j).le_set(
        isl.PwAff.from_aff(const(count - 2)))).union(
        from_zero.intersect(lines).subtract(senders).intersect(isl.PwAff.from_aff(j).le_set(
            isl.PwAff.from_aff(const(count - 1)))))
    every = every.intersect(region.pes().preimage_multi_aff(to_receiver))
    # (a receiver's own turn: its rank where it sends, after every block otherwise)
    me = isl.PwAff.from_aff(rank).intersect_domain(senders).union_add(
        isl.PwAff.from_aff(const(count)).intersect_domain(isl.Set.universe(rj).subtract(
            senders)))
    strides, block_strides = row_major(local.size), row_major(block)
    offset = local.offset_aff()
    configs: list[SimdConfig] = []
    cases: list[tuple[Stmt, ...]] = []
    for before in (True, False):
        sender_at = j if before else j.add_constant_val(one)
        chosen = isl.PwAff.from_aff(j).lt_set(me) if before else \
            isl.PwAff.from_aff(j).ge_set(me)
        case = every.intersect(chosen)
        if ex.axis == "region":
            sender = to_receiver.set_at(0, sender_at.mod_val(w).add(const(turns.x0))).set_at(
                1, sender_at.scale_down_val(w).floor().add(const(turns.y0)))
        else:
            sender = to_receiver.set_at(0 if row else 1, sender_at.add(
                const(turns.x0 if row else turns.y0)))
        blocks = isl.Map.from_multi_aff(sender).intersect_domain(case).apply_range(sent)
        inside = isl.Map.from_multi_aff(to_receiver).intersect_domain(case).apply_range(
            kept_map)
        blocks, inside = poly.align_params(blocks, inside)
        part = blocks.intersect(inside)
        context = case.bind(poly.multi_id(rj, names)).params()
        if part.is_empty():
            cases.append(())
            continue
        kept = part.bind_domain(poly.multi_id(rj, names))
        origin = blocks.bind_domain(poly.multi_id(rj, names))
        rect = poly.rectangularity(kept, index=(got,))
        if not rect.dense:
            return None
        variants: tuple[tuple[int, ...], ...] | None = None
        variant: IExpr | None = None
        if rect.fixed and rect.constant_size is not None:
            variants = (rect.constant_size,)
        elif not uneven:
            return None
        else:  # (blocks of uneven tiles: a size per block, by the receiver and the block)
            by_block = size_variants(rect.sizes, context)
            if by_block is None:
                return None
            variants, variant = by_block
        dst = src = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(kept.get_space(
            ).params()))
        for d in range(len(block)):
            low = rect.minimum.get_at(d)
            mine = isl.PwAff.from_aff(offset.get_at(d)).align_params(low.get_space())
            theirs = origin.dim_min(d).align_params(low.get_space())
            dst = dst.align_params(low.get_space()).add(low.sub(mine).scale_val(
                isl.Val.int_from_si(CTX, strides[d])))
            src = src.align_params(low.get_space()).add(low.sub(theirs).scale_val(
                isl.Val.int_from_si(CTX, block_strides[d])))
        where = kept.params()
        config = next((c for c in configs if c.variants == variants), None)
        if config is None:
            srcs: tuple[SimdOperand, ...] = (SimdOperand("array", land, block_strides),)
            if op != "copy":  # (totals += partial results)
                srcs = (SimdOperand("array", local.name, strides), *srcs)
            config = SimdConfig(f"out_{name}_recv" + (f"_{len(configs)}" if configs else ""),
                                op, variants,
                                SimdOperand("array", local.name, strides), srcs)
            configs.append(config)
        run = Run(config.name, ((local.name, pw_aff_expr(dst.intersect_domain(where), where)),
                                (land, pw_aff_expr(src.intersect_domain(where), where))),
                  None, variant)
        guard = condition_of(where, context)
        cases.append((run,) if guard is None else (If(guard, (run,)),))
    if not configs:
        return None
    return tuple(configs), (If(Cmp("<", IVar(got), turns.position), cases[0], cases[1]),)
