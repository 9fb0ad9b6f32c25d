"""The data-flow check of batches of whole groups (``codegen.groupbatch``), from what the
engines do rather than from how the planner built it.

A batch runs exactly the instances its groups' arrivals trigger (the groups sharing
the batch's fixed outer index values). And where the engines land an element is built
here again, independently: the groups a PE receives are checked to be a box of outer
index values (so the j-th end mark closes the group of the j-th tuple in lexicographic
order); the element's group rank in its batch comes from that box, its slot from its
index (dense: its distance from the group's first arrival there, the lexicographic
minimum; sparse: the index it carries); and this position must equal the landing map
the code addresses, element for element (isl ``is_equal``), with every slot inside its
group's ``size``.
"""

from __future__ import annotations

import islpy as isl

from dtg.codegen.batching import Batch
from dtg.mapping import poly
from dtg.mapping.flows import InputFlow, TaskGraph

_dt = isl.dim_type


def group_batch_problem(tg: TaskGraph, flow: InputFlow, batch: Batch) -> str | None:
    """What is wrong with ``batch``, or None."""
    assert batch.groups is not None
    found = _instances_problem(tg, flow, batch)
    return found if found is not None else _landing_problem(flow, batch)


def _instances_problem(tg: TaskGraph, flow: InputFlow, batch: Batch) -> str | None:
    free = [n for n in poly.index_names(flow.index_dims) if n not in batch.fixed]
    for task in batch.tasks:
        original = next(t for t in tg.tasks if t.name == task.name)
        assert original.instances is not None and task.instances is not None
        per_arrival = original.instances.intersect_params(flow.arrival_context().align_params(
            original.instances.get_space()))
        if batch.window:  # (every value of the window's dimension from its first)
            per_arrival = poly.over_values(per_arrival, batch.fixed[-1], batch.window)
        per_arrival = poly.project_out_params(per_arrival, free)
        if batch.window:  # (where windows start, from the arrivals, not from the plan)
            starts = _window_starts(flow, len(batch.fixed) - 1, batch.fixed[-1], batch.window)
            per_arrival, starts = poly.align_params(per_arrival, starts)
            per_arrival = per_arrival.intersect_params(starts)
        per_batch = task.instances.intersect_params(batch.context.align_params(
            task.instances.get_space()))
        per_batch = poly.project_out_params(per_batch, [poly.INDEX])  # (a function there)
        per_arrival, per_batch = poly.align_params(per_arrival, per_batch)
        if not per_arrival.is_equal(per_batch):
            differ = per_arrival.subtract(per_batch).union(per_batch.subtract(per_arrival))
            return (f"{task.name}: its batches of {batch.groups} groups run other instances "
                    f"than their arrivals ({differ})")
    return None


def _window_starts(flow: InputFlow, k: int, name: str, window: int) -> isl.Set:
    """``{ name : name = first + window * m, m >= 0 }`` over the PE: every window-th value
    of outer dimension ``k`` from the first a PE receives, as the engines count them."""
    n = flow.index_dims
    outer = poly.bind_pe(flow.arrivals()).project_out(_dt.set, n - 1, 1)
    first = outer.dim_min(k)
    context = poly.with_params(first.domain(), [name])
    at = poly.param_pw_aff(context, name)
    at, first = poly.align_params(at, first)
    offset = at.sub(first.intersect_domain(context.align_params(first.get_domain_space())))
    return offset.nonneg_set().intersect(offset.mod_val(
        isl.Val.int_from_si(isl.DEFAULT_CONTEXT, window)).zero_set())


def _landing_problem(flow: InputFlow, batch: Batch) -> str | None:
    assert batch.groups is not None
    n = flow.index_dims
    k = len(batch.fixed) - (1 if batch.window else 0)  # (the first dimension a batch spans)
    ctx = isl.DEFAULT_CONTEXT
    arrivals = poly.bind_pe(flow.arrivals())  # index tuples reaching a PE (params PE)
    space = arrivals.get_space()
    ls = isl.LocalSpace.from_space(space)

    def var(d: int) -> isl.PwAff:
        return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, _dt.set, d))

    def on_tuples(value: isl.PwAff) -> isl.PwAff:
        """A function of the parameters (or of the outer values) on the index tuples."""
        return _lift(value, space)

    # the outer values a PE receives, per batch: a box whose trailing sizes multiply to G
    outer = arrivals.project_out(_dt.set, n - 1, 1)
    lo = [outer.dim_min(d) for d in range(n - 1)]
    hi = [outer.dim_max(d) for d in range(n - 1)]
    box = isl.Set.universe(outer.get_space())
    for d in range(n - 1):
        out_ls = isl.LocalSpace.from_space(outer.get_space())
        at = isl.PwAff.from_aff(isl.Aff.var_on_domain(out_ls, _dt.set, d))
        low, high = _lift(lo[d], at.get_domain_space()), _lift(hi[d], at.get_domain_space())
        at, low = poly.align_params(at, low)
        at, high = poly.align_params(at, high)
        box = box.intersect(at.ge_set(low)).intersect(at.le_set(high))
    outer, box = poly.align_params(outer, box)
    if not outer.is_equal(box.intersect_params(outer.params())):
        return (f"input '{flow.tensor}': the groups a PE receives are not a box of outer "
                "index values, so end marks do not count them in order")
    sizes = []
    for d in range(k, n - 1):
        size = poly.constant_value(hi[d].sub(lo[d]).add_constant_val(isl.Val.one(ctx)))
        if d == k and batch.window:
            # (the engines close a batch at every G-th end mark: windows must tile the
            # values a PE receives, or the last one would never close)
            if size is None or size % batch.window:
                return (f"input '{flow.tensor}': windows of {batch.window} values do not "
                        "divide the values of their dimension that a PE receives")
            sizes.append(batch.window)
            continue
        if size is None:
            return (f"input '{flow.tensor}': the groups of a batch vary in number between "
                    "PEs")
        sizes.append(size)
    total = 1
    for size in sizes:
        total *= size
    if total != batch.groups:
        return (f"input '{flow.tensor}': a batch spans {total} groups on a PE, not the "
                f"{batch.groups} its task declares")
    # the position the engines give: rank of the group in the batch times size, plus slot
    if flow.kind == "dense":
        by_outer = isl.Map.from_range(arrivals).move_dims(_dt.in_, 0, _dt.out, 0, n - 1)
        first = on_tuples(by_outer.lexmin_pw_multi_aff().get_pw_aff(0))
        slot = var(n - 1).sub(first)
    else:
        slot = var(n - 1)
        if flow.wire_offset is not None:
            slot = slot.sub(on_tuples(flow.wire_offset[-1]))
    rank = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
    stride = 1
    for d in range(n - 2, k - 1, -1):
        start = on_tuples(lo[d]) if not (d == k and batch.window) else on_tuples(
            poly.param_pw_aff(poly.with_params(arrivals.params(), [batch.fixed[-1]]),
                              batch.fixed[-1]))
        term = var(d).sub(start).scale_val(isl.Val.int_from_si(ctx, stride))
        rank, term = poly.align_params(rank, term)
        rank = rank.add(term)
        stride *= sizes[d - k]
    rank, slot = poly.align_params(rank, slot)
    bad_slot = slot.lt_set(slot.sub(slot)).union(
        slot.ge_set(slot.sub(slot).add_constant_val(isl.Val.int_from_si(ctx, batch.size))))
    if not bad_slot.intersect(arrivals.align_params(bad_slot.get_space())).is_empty():
        return (f"input '{flow.tensor}': a group has more than the {batch.size} slots its "
                "batches give it")
    position = rank.scale_val(isl.Val.int_from_si(ctx, batch.size)).add(slot)
    # elements -> index tuples of the batch's groups (fixed outer values as parameters)
    reaching = poly.bind_pe(flow.reaching().reverse())
    order = flow.order.intersect_domain(reaching.align_params(flow.order.get_space()))
    tuples = isl.Set.universe(order.get_space().range())
    for d, name in enumerate(batch.fixed):
        tuples = poly.with_params(tuples, [name])
        at = isl.PwAff.from_aff(isl.Aff.var_on_domain(
            isl.LocalSpace.from_space(tuples.get_space()), _dt.set, d))
        first = poly.param_pw_aff(tuples, name)
        if d == len(batch.fixed) - 1 and batch.window:  # (a window of values from it)
            tuples = tuples.intersect(at.ge_set(first)).intersect(at.lt_set(
                first.add_constant_val(isl.Val.int_from_si(ctx, batch.window))))
            continue
        tuples = tuples.intersect(at.eq_set(first))
    order, tuples = poly.align_params(order, tuples)
    order = order.intersect_range(tuples)
    engines = order.apply_range(isl.Map.from_pw_aff(position.align_params(
        order.get_space())))
    land = isl.Map.from_multi_aff(batch.land.to_local_bound)
    engines, land = poly.align_params(engines, land)
    land = land.intersect_domain(engines.domain())
    engines, context = poly.align_params(engines, batch.context)
    land, context = poly.align_params(land, context)
    engines = poly.project_out_params(engines.intersect_params(context), [poly.INDEX])
    land = poly.project_out_params(land.intersect_params(context), [poly.INDEX])
    engines, land = poly.align_params(engines, land)
    land = land.reset_tuple_id(_dt.out)
    engines = engines.reset_tuple_id(_dt.out)
    if not engines.is_equal(land):
        differ = engines.subtract(land)
        return (f"input '{flow.tensor}': its batches of {batch.groups} groups address an "
                f"element elsewhere than the engines land it (engines: {differ})")
    return None


def _lift(value: isl.PwAff, space: isl.Space) -> isl.PwAff:
    """``value``, a function of the parameters or of the leading dimensions of ``space``,
    as a function on ``space``."""
    value = value.align_params(space)
    space = space.align_params(value.get_space())
    domain = value.get_domain_space()
    m, n = domain.dim(_dt.set), space.dim(_dt.set)
    onto = isl.Space.map_from_domain_and_range(space, domain)
    if m == 0:
        return value.pullback_multi_aff(isl.MultiAff.zero(onto))
    keep = isl.MultiAff.project_out_map(space, _dt.set, m, n - m)
    return value.pullback_multi_aff(keep)
