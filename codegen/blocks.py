"""Exchanges of whole blocks: one SIMD instruction sends a PE's block, one receives it.

An exchange (docs/codegen.md) lets each PE in turn send the elements of an internal
tensor it holds along its line. The general protocol sends (value, flat index) pairs
from a scalar loop and stores each arriving pair in a data task: about 30 cycles per
element. Where every PE holds one box of the same size and every receiver keeps every
block it receives (its local array holds the blocks of all PEs of its line), the
exchange needs no indices: the sender streams its block densely with ``out(c)``, the
receiver lands it whole (a batched data task, docs/pecode.md) and copies it into place
with one SIMD instruction. The sender of the ``j``-th block a PE receives is known from
the turn order: the ``j``-th PE of the line, skipping the receiver itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import islpy as isl

from codegen.islast import aff_expr, normalize, substitute
from codegen.peir import (
    MAX_SIMD_DIMS,
    MAX_SIMD_SIZE,
    Array,
    Cmp,
    IBin,
    IConst,
    IExpr,
    ISel,
    IVar,
    Run,
    SimdConfig,
    SimdOperand,
)
from codegen.simd import row_major
from mapping import poly
from mapping.flows import Exchange, Region
from mapping.memory import LocalTensor
from mapping.mesh import same_line

MAX_BLOCK = 4096  # elements landed at once


@dataclass(frozen=True)
class BlockExchange:
    """What the emitter puts in place of the scalar sends and the per-element receives."""

    configs: tuple[SimdConfig, SimdConfig]
    land: Array
    send: Run  # the PE's own block, dense, on the exchange's color
    receive: Run  # the block just landed, into place (uses the count of blocks so far)

    @property
    def size(self) -> int:
        return prod(self.configs[0].variants[0])


def block_exchange(ex: Exchange, local: LocalTensor, region: Region, *, name: str, got: str,
                   position: IExpr) -> BlockExchange | None:
    """The block protocol for ``ex``, or None where the general one is needed (partial
    sums, blocks of different sizes or shapes, receivers that keep only part of them)."""
    if ex.reduce:
        return None
    context = region.context()
    produced = poly.bind_pe(ex.produced)
    box = poly.set_box_hull(produced, affine=True)
    if box is None or not 0 < len(box.size) <= MAX_SIMD_DIMS:
        return None
    if prod(box.size) > MAX_BLOCK or max(box.size) > MAX_SIMD_SIZE:
        return None
    every_pe = region.pes().bind(poly.multi_id(region.pes().get_space(), poly.PE_NAMES))
    every_pe, senders = poly.align_params(every_pe.params(), produced.params())
    if not every_pe.is_subset(senders):
        return None  # a PE with nothing to send would still stream a block
    exact = poly.box_set(box, produced.params())
    exact, produced_a = poly.align_params(exact, produced)
    if not exact.is_equal(produced_a):
        return None
    line = {"row": same_line("E"), "column": same_line("N")}.get(ex.axis)
    if line is None:
        line = isl.Map.from_domain_and_range(region.pes(), region.pes())
    line = line.intersect_domain(region.pes()).intersect_range(region.pes())
    received = line.apply_range(ex.produced)
    kept = poly.box_map(local.array.box)
    received, kept = poly.align_params(received, kept)
    if not received.is_subset(kept):
        return None
    # The j-th block received comes from the j-th PE of the line, skipping this one.
    j = IVar(got)
    sender = normalize(ISel(Cmp(">=", j, position), IBin("+", j, IConst(1)), j))
    if ex.axis == "row":
        at: dict[str, IExpr] = {"PE_X": sender}
    elif ex.axis == "column":
        at = {"PE_Y": sender}
    else:
        width = IConst(region.width)
        at = {"PE_X": IBin("%", sender, width), "PE_Y": IBin("//", sender, width)}
    origin = [aff_expr(box.offset.get_at(d), context) for d in range(len(box.size))]
    offset = local.offset_aff()
    mine = [aff_expr(offset.get_at(d), context) for d in range(len(box.size))]
    strides = row_major(local.size)

    def base(block: list[IExpr]) -> IExpr:
        flat: IExpr = IConst(0)
        for o, m, stride in zip(block, mine, strides, strict=True):
            flat = IBin("+", flat, IBin("*", IConst(stride), IBin("-", o, m)))
        return normalize(flat)

    land = f"land_{name}"
    send_cfg = SimdConfig(f"out_{name}_send", "copy", (box.size,),
                          SimdOperand("out", color=ex.color),
                          (SimdOperand("array", local.name, strides),))
    recv_cfg = SimdConfig(f"out_{name}_recv", "copy", (box.size,),
                          SimdOperand("array", local.name, strides),
                          (SimdOperand("array", land, row_major(box.size)),))
    theirs = [substitute(o, at) for o in origin]
    return BlockExchange(
        (send_cfg, recv_cfg), Array(land, local.dtype, (prod(box.size),)),
        Run(send_cfg.name, ((local.name, base(origin)),)),
        Run(recv_cfg.name, ((local.name, base(theirs)), (land, IConst(0)))))
