"""Exchanges without turns: every sender streams its block straight to the PEs that
need it, all at once (docs/codegen.md, "Internal tensors").

The turn protocol (codegen.sharing) broadcasts each block to its whole line, one
sender after the other: an MLP's activations crossing from a column of 4 x 4 PEs to a
row take 4 turns of about 35 cycles. Where every receiver needs blocks from one other
PE only and the senders' routes (along the sender's row, then the receiver's column)
never enter a PE by the same port, each sender's wavelets reach its receivers alone:
one SIMD ``out`` per sender, one landing and SIMD copy per receiver, no waiting for
others' turns. Where routes on one color would enter a PE by the same port (a transpose
between two placements: the blocks of a row all go to one column), the senders are
grouped by the displacement to their receiver, and displacements whose routes do not
meet share a color: a few colors, all senders at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from math import prod
from typing import Literal

import islpy as isl

from dtg.codegen.blocks import block_base, sender_blocks
from dtg.codegen.islast import condition_of, pw_aff_expr, substitute
from dtg.codegen.routes import direct_routes
from dtg.codegen.simd import row_major
from dtg.mapping import poly
from dtg.mapping.flows import Exchange, Region, axis_line
from dtg.mapping.memory import LocalTensor
from dtg.mapping.mesh import pe_space, translate
from dtg.pe.ir import (
    Array,
    Cond,
    IConst,
    Route,
    Run,
    SimdConfig,
    SimdOperand,
    Stmt,
)


@dataclass(frozen=True)
class DirectExchange:
    """Routes, SIMD configurations and statements of an exchange without turns, or of
    the senders of one of its colors."""

    color: int
    routes: tuple[Route, ...]
    configs: tuple[SimdConfig, ...]
    land: Array
    send: tuple[Stmt, ...]  # a sender's block, dense on the color (guarded to senders)
    receive: tuple[Stmt, ...]  # the landed block into place (runs on receivers only)
    sender: Cond | None  # the PEs that send (None: every PE)
    receiver: Cond | None  # the PEs that receive a block (None: every PE)
    size: int  # elements of a block
    receivers: isl.Set  # the PEs that receive, as values of PE_X, PE_Y


def direct_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str,
                    fresh: Callable[[], int] | None = None,
                    op: Literal["fadd", "fmax"] = "fadd", shape: tuple[int, ...] | None = None,
                    pairs: isl.Map | None = None) -> tuple[DirectExchange, ...] | None:
    """The exchange of ``ex`` without turns (one part per color: ``fresh`` gives the
    colors beyond ``ex.color``, none without it), or None where it does not apply:
    blocks that are not one box per sender (of a few sizes: uneven tiles), a receiver
    needing blocks of several others or keeping only part of one, routes that would
    cross on every grouping of the senders. Partial sums (``op`` combines them) go to
    their keeper, each sender's on a color of its own among the keeper's senders: every
    element a sender wrote must be kept by one PE. With the tensor's ``shape``, blocks
    of uneven tiles may go at the largest tile's size, what they add lying beyond it.
    ``pairs`` (``{ sender -> receiver }``) says who sends to whom where elements have
    several holders (a halo's second phase: a corner held by its writer and by the PE
    beside it)."""
    context = region.context()
    blocks = sender_blocks(ex, context, partial=ex.reduce,
                           shape=None if ex.reduce else shape, reorder=True)
    if blocks is None:
        return None
    # receiver -> the other PEs holding what it needs
    sources = ex.needed.apply_range(ex.produced.reverse()) if pairs is None else \
        pairs.reverse()
    identity = isl.Map.identity(isl.Space.map_from_set(region.pes().get_space()))
    sources, identity = poly.align_params(sources, identity)
    sources = sources.subtract(identity)
    if ex.reduce:  # (a receiver adds the partial results of its line's senders only)
        line = axis_line(ex.axis)
        sources, line = poly.align_params(sources, line)
        sources = sources.intersect(line)
    sources = sources.coalesce()
    if sources.is_empty():
        return None
    pairs = sources.reverse()  # sender -> receiver
    if ex.reduce:
        # (a sender's block, all of it, to the one keeper of its elements)
        written = ex.produced.intersect_domain(pairs.domain())
        kept_there = pairs.apply_range(ex.needed)
        written, kept_there = poly.align_params(written, kept_there)
        if not pairs.is_single_valued() or not written.is_subset(kept_there):
            return None
    elif not sources.is_single_valued():
        return None
    # a receiver keeps the whole block it lands (its array holds it, and the sender's
    # holds what it sends)
    sent = ex.produced
    if blocks.padded is not None:
        sent = blocks.padded.unbind_params_insert_domain(
            poly.multi_id(pe_space(), poly.PE_NAMES))
    received = sources.apply_range(sent)
    kept = poly.box_map(local.array.box)
    received, kept = poly.align_params(received, kept)
    if blocks.sent_whole is not None:  # (sent at the largest size, read from the array)
        sent = blocks.sent_whole.unbind_params_insert_domain(
            poly.multi_id(pe_space(), poly.PE_NAMES))
    own, kept_s = poly.align_params(sent.intersect_domain(pairs.domain()), kept)
    if not received.is_subset(kept) or not own.is_subset(kept_s):
        return None
    groups = _groups(pairs, context, many=fresh is not None)
    if groups is None:
        return None
    colors = [ex.color, *(fresh() for _ in groups[1:])] if fresh is not None else [ex.color]
    origin = [pw_aff_expr(o, context) for o in blocks.origin]
    base, strides = block_base(local, context)
    size = prod(blocks.size)
    # (a receiver with several senders lands each on its own color, all at once)
    apart = not sources.is_single_valued()
    land = f"land_{name}"
    # (blocks scanned in their order: the configurations' dimensions permuted, the
    # landing array row-major in that order)
    order = blocks.order or tuple(range(len(blocks.size)))
    variants = tuple(tuple(v[d] for d in order) for v in blocks.variants)
    sent_variants = variants if blocks.sent_whole is None else (
        tuple(blocks.sent[d] for d in order),)
    send_variant = blocks.variant if blocks.sent_whole is None else None
    strides = tuple(strides[d] for d in order)
    block_strides = row_major(tuple(blocks.size[d] for d in order))
    if ex.reduce:
        recv_cfg = SimdConfig(f"out_{name}_recv", op, variants,
                              SimdOperand("array", local.name, strides),
                              (SimdOperand("array", local.name, strides),
                               SimdOperand("array", land, block_strides)))
    else:
        recv_cfg = SimdConfig(f"out_{name}_recv", "copy", variants,
                              SimdOperand("array", local.name, strides),
                              (SimdOperand("array", land, block_strides),))
    parts = []
    for k, (group, color) in enumerate(zip(groups, colors, strict=True)):
        routes = direct_routes(color, group, context)
        assert routes is not None  # (as when the group was formed)
        send_cfg = SimdConfig(f"out_{name}_send" + (f"_{k}" if k else ""), "copy",
                              sent_variants, SimdOperand("out", color=color),
                              (SimdOperand("array", local.name, strides),))
        # the sender of a receiver's block, as expressions of the receiver's coordinates
        sender_of = group.reverse().as_pw_multi_aff()
        at = {name_: pw_aff_expr(_on_pe_params(sender_of.get_pw_aff(d)), context)
              for d, name_ in enumerate(poly.PE_NAMES)}
        theirs = [substitute(o, at) for o in origin]
        which = None if blocks.variant is None else substitute(blocks.variant, at)
        cut = None if blocks.length is None else substitute(blocks.length, at)
        mine = f"{land}_{k}" if apart and k else land
        receive = (Run(recv_cfg.name, ((local.name, base(theirs)), (land, IConst(0))), None,
                       which, cut, arrays=((land, mine),) if mine != land else ()),)
        receivers = poly.bind_pe(isl.Map.from_domain(group.range())).params()
        senders = poly.bind_pe(isl.Map.from_domain(group.domain())).params()
        parts.append(DirectExchange(
            color, tuple(routes), (send_cfg, recv_cfg) if k == 0 else (send_cfg,),
            Array(mine, local.dtype, (size,)),
            (Run(send_cfg.name, ((local.name, base(origin)),), None, send_variant,
                 blocks.length),),
            receive, condition_of(senders, context), condition_of(receivers, context),
            size, receivers))
    return tuple(parts)


def halo_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str,
                  fresh: Callable[[], int], shape: tuple[int, ...] | None = None
                  ) -> tuple[DirectExchange, ...] | None:
    """The exchange of ``ex`` without turns where receivers need parts of others' blocks,
    or of several others' (a halo: the last row of the PE above, the last column of the
    PE to the west, their corner): one exchange without turns per displacement from
    sender to receiver, each sender's part for it the box of what it holds that the PE so
    far off reads, on colors of their own (``fresh``, which may have given some before a
    displacement fails: try with throwaway ones first). None where a displacement's parts
    are not such boxes, or beyond :data:`MAX_DISPLACEMENTS` or the colors an exchange may take.
    Partial results go likewise, each displacement's to the keepers that far off: a PE
    holding partial sums of blocks kept on several PEs (a rotated 3-D GEMM's diagonal)
    sends each block to its keeper."""
    pairs = _pairs(ex, region)
    if pairs.is_empty():
        return None
    moves = _displacements(pairs)
    if moves is None:
        return None
    return _displacement_parts(ex, pairs, moves, local, region, name=name, fresh=fresh,
                               shape=shape, first=ex.color)


def two_phase_halo(ex: Exchange, local: LocalTensor, region: Region, *, name: str,
                   fresh: Callable[[], int], shape: tuple[int, ...] | None = None,
                   relay: bool = False
                   ) -> tuple[tuple[DirectExchange, ...], tuple[DirectExchange, ...]] | None:
    """A halo whose readers need their diagonal neighbours' elements too (a window centred
    on its pixel: 8 displacements, 16 configurations) in two phases: first across (each
    PE's parts to the PEs beside it, east and west), then down (its parts to the PEs above
    and below it, the corners it received across included). Where every element a PE
    reads of a diagonal neighbour is one the PE beside it reads too (a convex window),
    four displacements do the work of eight. With ``relay``, also where a PE reads
    elements of a diagonal neighbour that the PE beside it does not (tilings that do not
    line up): that PE relays them. None where that does not hold, or where the parts are
    not boxes (as :func:`halo_exchange`)."""
    if ex.reduce:
        return None
    pairs = _pairs(ex, region)
    moves = _displacements(pairs)
    if moves is None or not any(dx and dy for dx, dy in moves):
        return None
    across = sorted({(dx, 0) for dx, _ in moves if dx})
    down = sorted({(0, dy) for _, dy in moves if dy})
    if not across or not down:
        return None
    beside = _union(pairs, across)
    # what each PE reads of the PEs beside it, and then holds
    needed, produced = poly.align_params(ex.needed, ex.produced)
    needed_a = needed.intersect(beside.reverse().apply_range(produced))
    # and what it relays down to the diagonal neighbours of the PEs beside it (tiles
    # that do not line up: the row a PE below reads of its diagonal neighbour's tile
    # may be one the PE beside it does not read)
    for dx, dy in moves if relay else ():
        if dx and dy:
            theirs = translate(-dx, 0).apply_range(produced)
            read = translate(0, dy).apply_range(needed)
            theirs, read = poly.align_params(theirs, read)
            needed_a = needed_a.union(theirs.intersect(read))
    needed_a = needed_a.coalesce()
    # (the pairs across, relays included: a PE beside that reads nothing of a sender's
    # may still relay its elements down)
    beside = _union(_pairs(replace(ex, needed=needed_a), region), across)
    held = produced.union(needed_a).coalesce()
    # (what else it reads and some PE holds: elements nobody writes stay where they are)
    rest = needed.subtract(produced).subtract(needed_a).intersect_range(
        produced.range()).coalesce()
    second = replace(ex, produced=held, needed=rest)
    vertical = _union(_pairs(second, region), down)
    if not rest.is_subset(vertical.reverse().apply_range(held)):
        return None  # (a diagonal neighbour's element the PE beside does not read)
    parts_a = _displacement_parts(replace(ex, needed=needed_a), beside, across, local,
                                  region, name=name, fresh=fresh, shape=shape,
                                  first=ex.color)
    if parts_a is None:
        return None
    parts_b = _displacement_parts(second, vertical, down, local, region, name=name,
                                  fresh=fresh, shape=shape, number=len(across))
    if parts_b is None:
        return None
    return parts_a, parts_b


def _displacements(pairs: isl.Map) -> list[tuple[int, ...]] | None:
    """The displacements from sender to receiver of ``pairs``; None beyond
    :data:`MAX_DISPLACEMENTS` (the listing may look at a few times as many points: those
    of a wrapped pattern's pieces lie far apart)."""
    try:
        moves = poly.points(pairs.deltas(), limit=4 * MAX_DISPLACEMENTS)
    except poly.TooManyPointsError:
        return None
    return moves if len(moves) <= MAX_DISPLACEMENTS else None


def _pairs(ex: Exchange, region: Region) -> isl.Map:
    """``{ sender -> receiver }`` of ``ex``: each PE to the others reading what it holds."""
    sources = ex.needed.apply_range(ex.produced.reverse())
    identity = isl.Map.identity(isl.Space.map_from_set(region.pes().get_space()))
    sources, identity = poly.align_params(sources, identity)
    return sources.subtract(identity).coalesce().reverse()


def _union(pairs: isl.Map, moves: Sequence[tuple[int, int]]) -> isl.Map:
    """The pairs one of ``moves`` apart."""
    chosen = pairs.intersect(translate(*moves[0]))
    for dx, dy in moves[1:]:
        chosen = chosen.union(pairs.intersect(translate(dx, dy)))
    return chosen.coalesce()


def _displacement_parts(ex: Exchange, pairs: isl.Map, moves: Sequence[tuple[int, ...]],
                        local: LocalTensor, region: Region, *, name: str,
                        fresh: Callable[[], int], shape: tuple[int, ...] | None,
                        first: int | None = None, number: int = 0
                        ) -> tuple[DirectExchange, ...] | None:
    """One exchange without turns per displacement of ``moves`` (numbered from
    ``number``; the first on color ``first`` where given, the others on fresh ones)."""
    parts: list[DirectExchange] = []
    for n, (dx, dy) in enumerate(moves):
        moved = pairs.intersect(translate(dx, dy)).coalesce()
        # (what each sender holds that its receiver so far off reads, and that, as
        # the receiver needs it from there)
        produced = ex.produced.intersect(moved.apply_range(ex.needed)).coalesce()
        needed = moved.reverse().apply_range(produced).coalesce()
        color = first if n == 0 and first is not None else fresh()
        made = direct_exchange(replace(ex, produced=produced, needed=needed, color=color),
                               local, region, name=f"{name}_{number + n}", fresh=fresh,
                               shape=shape, pairs=moved.intersect_domain(produced.domain()))
        if made is None or len(parts) + len(made) > MAX_DIRECT_PARTS:
            return None
        parts.extend(made)
    return tuple(parts)


MAX_DISPLACEMENTS = 16  # sender-to-receiver displacements grouped onto colors, at most
MAX_DIRECT_COLORS = 6  # colors a displacement's groups may take
MAX_DIRECT_PARTS = 16  # parts (a color each) an exchange without turns may take


def _groups(pairs: isl.Map, context: isl.Set, *, many: bool) -> list[isl.Map] | None:
    """``pairs`` (``{ sender -> receiver }``) in groups whose routes can share a color:
    all of them where they can; else (``many``) by displacement, a displacement's
    senders apart by their coordinates modulo its length where their routes overlap
    (two of a row ``|dx|`` or fewer apart run along the same links), pieces joining a
    group where its routes still do not meet (greedily); None beyond the limits."""
    if direct_routes(0, pairs, context) is not None:
        return [pairs]
    if not many or not pairs.is_single_valued():
        return None
    moves = _displacements(pairs)
    if moves is None:
        return None
    pieces: list[isl.Map] = []
    for dx, dy in moves:
        moved = pairs.intersect(translate(dx, dy)).coalesce()
        if direct_routes(0, moved, context) is not None:
            pieces.append(moved)
            continue
        for rx in range(max(1, abs(dx))):
            for ry in range(max(1, abs(dy))):
                part = moved.intersect_domain(_residues(abs(dx), rx, abs(dy), ry))
                if part.is_empty():
                    continue
                if direct_routes(0, part, context) is None:
                    return None
                pieces.append(part)
    groups: list[isl.Map] = []
    for piece in pieces:
        for k, group in enumerate(groups):
            joined = group.union(piece).coalesce()
            if direct_routes(0, joined, context) is not None:
                groups[k] = joined
                break
        else:
            if len(groups) == MAX_DIRECT_COLORS:
                return None
            groups.append(piece)
    return groups


def _residues(mx: int, rx: int, my: int, ry: int) -> isl.Set:
    """``{ PE[x, y] : x mod mx = rx and y mod my = ry }``."""
    space = pe_space()
    ls = isl.LocalSpace.from_space(space)
    result = isl.Set.universe(space)
    for dim, (m, r) in enumerate(((mx, rx), (my, ry))):
        if m <= 1:
            continue
        coord = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, dim))
        rem = coord.mod_val(isl.Val.int_from_si(space.get_ctx(), m))
        result = result.intersect(rem.eq_set(rem.sub(rem).add_constant_val(
            isl.Val.int_from_si(space.get_ctx(), r))))
    return result


def _on_pe_params(value: isl.PwAff) -> isl.PwAff:
    """A function on ``PE[x, y]`` as a function of the parameters ``PE_X``, ``PE_Y``."""
    graph = isl.Map.from_pw_aff(value)
    bound = poly.bind_pe(graph)  # { [v] } over PE_X, PE_Y
    return bound.dim_max(0)
