"""Streams kept in local memory: the store of each arriving element where its PE needs
it, shared by the emitter and the cost model that weighs keeping against per-element
work."""

from __future__ import annotations

from math import ceil

import islpy as isl

from dtg.codegen.cost import branch_cycles, costs
from dtg.codegen.hoist import per_arrival_ops
from dtg.codegen.islast import aff_expr, condition_of, pw_aff_expr
from dtg.codegen.stmtutil import guarded, pe_condition_set, simplify
from dtg.mapping import poly
from dtg.mapping.flows import InputFlow
from dtg.mapping.memory import LocalTensor
from dtg.pe.ir import FValue, IBin, If, Load, Stmt, Store
from dtg.pe.walk import store_ops


def _kept(flow: InputFlow, local: LocalTensor) -> isl.Set:
    """The arriving elements a PE keeps in ``local`` (parameters: the PE, the index)."""
    reaching = poly.bind_pe(flow.reaching().reverse())
    order = flow.order.reverse()
    with_index = order.bind_domain(poly.multi_id(order.get_space().domain(),
                                                 poly.index_names(flow.index_dims)))
    needed = poly.bind_pe(local.array.per_pe)
    arriving, with_index = poly.align_params(reaching, with_index)
    arriving = arriving.intersect(with_index)
    arriving, needed = poly.align_params(arriving, needed)
    return arriving.intersect(needed)


def keep_element(flow: InputFlow, local: LocalTensor, region: isl.Set) -> list[Stmt]:
    """A data task's store of the arriving element into ``local``, where this PE needs
    it (``region``: the constraints on the PE coordinates)."""
    kept = _kept(flow, local)
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
    are computed once per group): the guard on every wavelet, the store on the share
    of them the PE keeps (rounded up)."""
    cycles = 0
    for s in keep_element(flow, local, region):
        share = 1.0
        if isinstance(s, If):
            cycles += branch_cycles(s.cond, varying)
            body = s.then
            share = arrival_share(flow, _kept(flow, local).params())
        else:
            body = (s,)
        for store in body:
            assert isinstance(store, Store)
            cycles += ceil(share * costs().scalar_op * store_ops(
                store, lambda e: per_arrival_ops(e, varying)))
    return cycles


def arrival_share(flow: InputFlow, selected: isl.Set, among: isl.Set | None = None
                  ) -> float:
    """The largest share of a PE's arrivals of ``flow`` (or of the parameter values
    ``among``, such as its batches' starts) that lie in ``selected`` (parameters: the PE
    and the index), counted at the first and last PE of the flow's lines and of the PEs
    with some selected (lines may pass PEs with none, where the share is 0)."""
    arrivals = flow.arrival_context() if among is None else among
    arrivals, selected = poly.align_params(arrivals, selected)
    share = 0.0
    working = poly.pe_set(poly.project_onto_pe(selected)).intersect(flow.lines)
    corners = [flow.lines.lexmin(), flow.lines.lexmax()]
    if not working.is_empty():
        corners += [working.lexmin(), working.lexmax()]
    for corner in corners:
        pe = pe_condition_set(corner).align_params(arrivals.get_space())
        at, chosen = arrivals.intersect_params(pe), selected.intersect_params(pe)
        total = _count(at)
        if total:
            share = max(share, _count(chosen.intersect(at)) / total)
    return share


def _count(params: isl.Set) -> int:
    """The points of a bounded set of parameter values."""
    return int(isl.Set.from_params(params).count_val().to_python()) if not \
        params.is_empty() else 0
