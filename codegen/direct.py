"""Exchanges without turns: every sender streams its block straight to the PEs that
need it, all at once on one color (docs/codegen.md, "Internal tensors").

The turn protocol (codegen.sharing) broadcasts each block to its whole line, one
sender after the other: an MLP's activations crossing from a column of 4 x 4 PEs to a
row take 4 turns of about 35 cycles. Where every receiver needs blocks from one other
PE only and the senders' routes (along the sender's row, then the receiver's column)
never enter a PE by the same port, each sender's wavelets reach its receivers alone:
one SIMD ``out`` per sender, one landing and SIMD copy per receiver, no waiting for
others' turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import islpy as isl

from dtg.codegen.blocks import block_addressing, sender_block
from dtg.codegen.islast import condition_of, pw_aff_expr, substitute
from dtg.codegen.routes import direct_routes
from dtg.codegen.simd import row_major
from dtg.mapping import poly
from dtg.mapping.flows import Exchange, Region
from dtg.mapping.memory import LocalTensor
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
    """Routes, SIMD configurations and statements of an exchange without turns."""

    routes: tuple[Route, ...]
    configs: tuple[SimdConfig, ...]
    land: Array
    send: tuple[Stmt, ...]  # a sender's block, dense on the color (guarded to senders)
    receive: tuple[Stmt, ...]  # the landed block into place (runs on receivers only)
    sender: Cond | None  # the PEs that send (None: every PE)
    receiver: Cond | None  # the PEs that receive a block (None: every PE)
    size: int  # elements of a block
    receivers: isl.Set  # the PEs that receive, as values of PE_X, PE_Y


def direct_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str
                    ) -> DirectExchange | None:
    """The exchange of ``ex`` without turns, or None where it does not apply: partial
    sums, blocks that are not one box of one size per sender, a receiver needing
    blocks of several others or keeping only part of one, routes that would cross."""
    box = sender_block(ex)
    if box is None:
        return None
    context = region.context()
    # receiver -> the other PEs holding what it needs
    sources = ex.needed.apply_range(ex.produced.reverse())
    identity = isl.Map.identity(isl.Space.map_from_set(region.pes().get_space()))
    sources, identity = poly.align_params(sources, identity)
    sources = sources.subtract(identity).coalesce()
    if sources.is_empty() or not sources.is_single_valued():
        return None
    # a receiver keeps the whole block it lands (its array holds it)
    received = sources.apply_range(ex.produced)
    kept = poly.box_map(local.array.box)
    received, kept = poly.align_params(received, kept)
    if not received.is_subset(kept):
        return None
    routes = direct_routes(ex.color, sources.reverse(), context)
    if routes is None:
        return None
    origin, base, strides = block_addressing(local, box, context)
    land = f"land_{name}"
    send_cfg = SimdConfig(f"out_{name}_send", "copy", (box.size,),
                          SimdOperand("out", color=ex.color),
                          (SimdOperand("array", local.name, strides),))
    recv_cfg = SimdConfig(f"out_{name}_recv", "copy", (box.size,),
                          SimdOperand("array", local.name, strides),
                          (SimdOperand("array", land, row_major(box.size)),))
    # the sender of a receiver's block, as expressions of the receiver's coordinates
    sender_of = sources.as_pw_multi_aff()
    receivers = poly.bind_pe(isl.Map.from_domain(sources.domain())).params()
    at = {name_: pw_aff_expr(_on_pe_params(sender_of.get_pw_aff(d)), context)
          for d, name_ in enumerate(poly.PE_NAMES)}
    theirs = [substitute(o, at) for o in origin]
    senders = poly.bind_pe(isl.Map.from_domain(sources.range())).params()
    return DirectExchange(
        tuple(routes), (send_cfg, recv_cfg), Array(land, local.dtype, (prod(box.size),)),
        (Run(send_cfg.name, ((local.name, base(origin)),)),),
        (Run(recv_cfg.name, ((local.name, base(theirs)), (land, IConst(0)))),),
        condition_of(senders, context), condition_of(receivers, context), prod(box.size),
        receivers)


def _on_pe_params(value: isl.PwAff) -> isl.PwAff:
    """A function on ``PE[x, y]`` as a function of the parameters ``PE_X``, ``PE_Y``."""
    graph = isl.Map.from_pw_aff(value)
    bound = poly.bind_pe(graph)  # { [v] } over PE_X, PE_Y
    return bound.dim_max(0)
