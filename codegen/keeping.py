"""Streams kept in local memory: the store of each arriving element where its PE needs
it, shared by the emitter and the cost model that weighs keeping against per-element
work."""

from __future__ import annotations

import islpy as isl

from dtg.codegen.cost import branch_cycles, costs
from dtg.codegen.hoist import per_arrival_ops
from dtg.codegen.islast import aff_expr, condition_of, pw_aff_expr
from dtg.codegen.stmtutil import guarded, simplify
from dtg.mapping import poly
from dtg.mapping.flows import InputFlow
from dtg.mapping.memory import LocalTensor
from dtg.pe.ir import FValue, IBin, If, Load, Stmt, Store
from dtg.pe.walk import store_ops


def keep_element(flow: InputFlow, local: LocalTensor, region: isl.Set) -> list[Stmt]:
    """A data task's store of the arriving element into ``local``, where this PE needs
    it (``region``: the constraints on the PE coordinates)."""
    reaching = poly.bind_pe(flow.reaching().reverse())
    order = flow.order.reverse()
    with_index = order.bind_domain(poly.multi_id(order.get_space().domain(),
                                                 poly.index_names(flow.index_dims)))
    needed = poly.bind_pe(local.array.per_pe)
    arriving, with_index = poly.align_params(reaching, with_index)
    arriving = arriving.intersect(with_index)
    arriving, needed = poly.align_params(arriving, needed)
    kept = arriving.intersect(needed)
    if kept.is_empty():  # (a part of a stream no PE reads)
        return []
    context = flow.arrival_context()
    where = condition_of(kept.params(), context)
    element = kept.as_pw_multi_aff()
    offset = local.offset_aff()
    index = tuple(simplify(IBin("-", pw_aff_expr(element.get_pw_aff(d), context),
                                 aff_expr(offset.get_at(d), region)))
                  for d in range(offset.dim(isl.dim_type.out)))
    return list(guarded(where, [Store(Load(local.name, index), "=", FValue())]))



def keep_cycles(flow: InputFlow, local: LocalTensor, region: isl.Set,
                varying: frozenset[str]) -> int:
    """Predicted cycles of :func:`keep_element` per arriving wavelet (what is left of its
    address arithmetic and guard once the parts that do not change with ``varying``
    are computed once per group)."""
    cycles = 0
    for s in keep_element(flow, local, region):
        if isinstance(s, If):
            cycles += branch_cycles(s.cond, varying)
            body = s.then
        else:
            body = (s,)
        for store in body:
            assert isinstance(store, Store)
            cycles += costs().scalar_op * store_ops(
                store, lambda e: per_arrival_ops(e, varying))
    return cycles
