"""Batches of whole groups: a multi-dimensional stream's groups as one SIMD operand.

Within a group, batches (:mod:`codegen.batching`) take consecutive wavelets; but a stream
whose index has several dimensions still costs a task per group, and a control task per
end mark, which on short groups is most of the work: Listing 5's degenerate convolution
(groups of 2 wavelets) ran 32 data and 32 control tasks per PE for 64 multiply-adds.

A batch of ``G`` whole groups (``batch S land A groups G`` in the PE code) lands the k-th
wavelet of its j-th group at ``A[j * S + k]``. Its groups are those sharing the leading
``k`` outer index values (``index_0 .. index_{k-1}``, the batch's parameters, counted from
end marks as before); the outer index values after them and the innermost index range
over the batch. The groups a PE receives must form a box (they are counted by end marks
in lexicographic order), so the j-th group of a batch is the one whose trailing outer
values are the j-th of that box, and the landing position of element ``e`` is affine:

    sum over d >= k of (order_d(e) - lo_d) * stride_d  +  slot(e)

with ``slot`` the position in the group (dense: ``order(e) - first``, arrivals being
consecutive; sparse: the index the wavelet carries). Each task's instances are the union
of those of the batch's arrivals, and one SIMD decision covers them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil, prod

import islpy as isl

from dtg.codegen.cost import costs, dispatch
from dtg.codegen.simd import SimdDecision, decide
from dtg.lair.lower import CTX
from dtg.mapping import affine, poly
from dtg.mapping.flows import InputFlow, Task, TaskGraph
from dtg.mapping.memory import LocalTensor, Memory
from dtg.pe.ir import ELEMENT_BYTES

MAX_GROUP_SLOTS = 1024  # elements of a landing array of whole groups
# the end-mark control task a batch of whole groups saves per group: its dispatch and
# its counting (the group counter, a dense stream's position, the pending marks)
CONTROL_WORK = 3
# a batch's own counting: the group counter where a PE runs several batches (with one,
# it is dead code, left out), and the pending end marks and the test for the last where
# the program has several streams (else the test of the group counter for the last)
GROUP_COUNTER = 1
PENDING = 3
LAST_GROUP = 2


@dataclass(frozen=True)
class GroupLayout:
    """Where a batch of ``groups`` whole groups lands: ``slot`` elements per group, the
    leading outer index values ``fixed`` per batch, the position map ``land``."""

    slot: int
    groups: int
    fixed: tuple[str, ...]
    free: tuple[str, ...]  # the index parameters that range over a batch
    land: LocalTensor
    context: isl.Set  # parameters: the PE and ``fixed`` (and ``index`` with ``first``)
    batches: int  # the most batches a PE runs
    # where a group's first slot is a piecewise function of the PE (and ``fixed``): that
    # function, which the parameter ``index`` stands for in ``land`` and the decisions
    first: isl.PwAff | None = None
    # a window: the last of ``fixed`` is the first of ``window`` consecutive values of its
    # outer dimension that a batch takes (0: a batch takes one value of each of ``fixed``)
    window: int = 0


def layouts(tg: TaskGraph, flow: InputFlow, *, max_slots: int = MAX_GROUP_SLOTS
            ) -> list[GroupLayout] | str:
    """The ways to take ``flow`` in batches of whole groups, fewest groups first, or why
    there are none."""
    n = flow.index_dims
    if n < 2:
        return "the stream has one group"
    names = poly.index_names(n)
    arrivals = poly.bind_pe(flow.arrivals())
    outer = arrivals.project_out(isl.dim_type.set, n - 1, 1)
    rect = poly.rectangularity(outer)
    sizes = [poly.constant_value(rect.extent.get_at(d)) for d in range(n - 1)]
    if not rect.dense or any(s is None for s in sizes[1:]):
        return "the groups a PE receives do not form a box"
    volume = poly.constant_value(rect.extent.get_at(0))
    if not isinstance(flow.groups, int) or volume is None or \
            volume * prod(s or 0 for s in sizes[1:]) != flow.groups:
        return "the PEs receive different numbers of groups"
    slot = _slot(flow, arrivals)
    if isinstance(slot, str):
        return slot
    size, base = slot
    order = order_on_pe(flow)
    if isinstance(order, str):
        return order
    found: list[GroupLayout] = []
    why = f"no batch of whole groups fits {max_slots} elements"
    for k in range(n - 2, -1, -1):
        trailing = sizes[k:]
        groups = prod(s or 0 for s in trailing)
        window = 0
        if groups < 2:
            why = "a PE receives one group at a time"
            continue
        if groups * size > max_slots:
            why = f"no batch of whole groups fits {max_slots} elements"
            window = _window(sizes[k] or 0, groups // (sizes[k] or 1) * size, max_slots)
            if window < 2 or found:
                continue
            groups = groups // (sizes[k] or 1) * window
        fixed, free = names[:k + (window > 0)], names[k + (window > 0):]
        # (a window's own dimension varies within a batch)
        if not _depends_only_on(base, [*poly.PE_NAMES, *fixed[:len(fixed) - (window > 0)]]):
            why = "a group's first index depends on the values that vary in a batch"
            continue
        land = _landing(tg, flow, order, rect, sizes, k, size, base, groups,
                        window=names[k] if window else None)
        if isinstance(land, str):
            why = land
            continue
        landing, first = land
        context = poly.simplified(poly.project_out_params(flow.arrival_context(), free))
        if window:  # (the window's first values: every window-th from the PE's first)
            at = poly.param_pw_aff(context, names[k])
            low, at = poly.align_params(rect.minimum.get_at(k), at)
            starts = at.sub(low.intersect_domain(at.domain())).mod_val(
                isl.Val.int_from_si(CTX, window)).zero_set()
            context = poly.simplified(context.intersect(starts))
        if first is not None:  # (``index`` stands for it)
            context = poly.with_params(context, [poly.INDEX])
            at = poly.param_pw_aff(context, poly.INDEX)
            at, start = poly.align_params(at, first)
            context = context.intersect(at.eq_set(start.intersect_domain(
                context.align_params(start.get_domain_space())))).coalesce()
        found.append(GroupLayout(size, groups, fixed, free, landing, context,
                                 flow.groups // groups, first, window))
    return found or why


def _window(values: int, per_value: int, max_slots: int) -> int:
    """The most consecutive values of an outer dimension (of ``values``, dividing it)
    whose groups, ``per_value`` slots each, fit ``max_slots``; 0 if fewer than 2."""
    fits = [w for w in range(2, values) if values % w == 0 and w * per_value <= max_slots]
    return max(fits, default=0)


def instances(task: Task, flow: InputFlow, layout: GroupLayout) -> isl.Set:
    """The task's instances over a batch: those of its arrivals, over every value of the
    batch's free index parameters."""
    assert task.instances is not None
    ran = task.instances.intersect_params(flow.arrival_context().align_params(
        task.instances.get_space()))
    if layout.window:  # (the arrivals of every value in the batch's window)
        ran = poly.over_values(ran, layout.fixed[-1], layout.window)
    ran = poly.project_out_params(ran, layout.free)
    ran, context = poly.align_params(ran, layout.context)
    return ran.intersect_params(context).coalesce()


def decisions(tg: TaskGraph, memory: Memory, flow: InputFlow, tasks: tuple[Task, ...],
              layout: GroupLayout) -> list[tuple[Task, SimdDecision]] | str:
    """Each task's instances over a batch and its SIMD decision, or why none."""
    view = Memory((layout.land, *memory.arrays))
    made: list[tuple[Task, SimdDecision]] = []
    for task in tasks:
        assert task.statement is not None
        ran = instances(task, flow, layout)
        ran, context = poly.align_params(ran, layout.context)
        d = decide(tg.model.statement(task.statement), ran, None, view, context, varying=())
        if not d.used:
            return f"no SIMD instruction for {task.name} ({d.reason})"
        if d.extensions:
            return f"{task.name}'s box hull would need larger arrays"
        made.append((replace(task, instances=ran, trigger=None), d))
    return made


def clearing(layout: GroupLayout, sparse: bool, once: bool) -> int:
    """Cycles a sparse batch spends clearing its slots (none for ``once``)."""
    if not sparse or once:
        return 0
    width = costs().simd_width(layout.land.dtype, "fill")
    return costs().simd_startup + ceil(layout.slot * layout.groups / width)


def batch_cycles(layout: GroupLayout, work: int, *, sparse: bool, once: bool, period: int,
                 streams: int) -> tuple[int, int]:
    """Predicted cycles from a PE's first arrival to the end of its work, and its busy
    cycles: each batch lands at one wavelet (or end mark) per ``period`` while the core
    runs the previous one (``streams``: input streams of the program, whose end marks
    a PE counts when there are several)."""
    per_batch = dispatch() + work + clearing(layout, sparse, once) + (
        counting(layout.batches, streams))
    arriving = layout.groups * (layout.slot + 1) * period
    busy = layout.batches * per_batch
    return max(arriving + busy, layout.batches * arriving + per_batch), busy


def counting(batches: int, streams: int) -> int:
    """What a batch of whole groups spends counting (see :data:`GROUP_COUNTER`)."""
    if batches > 1:
        return GROUP_COUNTER + (PENDING if streams > 1 else LAST_GROUP)
    return PENDING if streams > 1 else 0


def control_cycles(flow: InputFlow, groups: int) -> int:
    """What the end marks' control tasks cost a PE that takes its stream per group."""
    return groups * (dispatch() + CONTROL_WORK) if flow.index_dims > 1 else 0


# ------------------------------------------------------------------ helpers


def _slot(flow: InputFlow, arrivals: isl.Set) -> tuple[int, isl.PwAff] | str:
    """Slots per group and what a wavelet's slot is counted from: a dense group's first
    index (a function of the PE and the outer index values), or a sparse stream's wire
    offset (the index the wavelet carries is its slot)."""
    n = flow.index_dims
    ctx = arrivals.get_ctx()
    if flow.kind == "dense":
        bound = poly.bind_leading(arrivals, poly.index_names(n)[:-1])
        first, last = bound.dim_min(0), bound.dim_max(0)
        length = poly.greatest(last.sub(first).add_constant_val(isl.Val.one(ctx)))
        if not length.is_int():
            return "a group's length on a PE is unbounded"
        return int(length.to_python()), first.gist_params(bound.params())
    inner = arrivals.project_out(isl.dim_type.set, 0, n - 1)
    lo, hi = inner.dim_min(0), inner.dim_max(0)
    if flow.wire_offset is not None:
        shift = flow.wire_offset[-1]
        lo, shift = poly.align_params(lo, shift)
        hi, shift = poly.align_params(hi, shift)
        lo, hi = lo.sub(shift), hi.sub(shift)
        base = shift
    else:
        base = isl.PwAff.val_on_domain(isl.Set.universe(lo.get_domain_space()),
                                       isl.Val.zero(ctx))
    least = poly.greatest(lo.neg())
    if not least.is_int() or least.is_pos():
        return "a sparse wavelet may carry a negative index"
    most = poly.greatest(hi)
    if not most.is_int():
        return "a group's indices on a PE are unbounded"
    return int(most.to_python()) + 1, base


def order_on_pe(flow: InputFlow) -> isl.MultiAff | str:
    """The stream's order on the elements reaching a PE, as one quasi-affine function."""
    order = flow.order_on_pe()
    return "the stream's order is piecewise on a PE" if order is None else order


def _param_on(space: isl.Space, name: str) -> isl.Aff:
    """The parameter ``name`` as a function on the set space ``space``."""
    space = poly.with_params(isl.Set.universe(space), [name]).get_space()
    return isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.param,
                                 space.find_dim_by_name(isl.dim_type.param, name))


def _depends_only_on(value: isl.PwAff, names: list[str]) -> bool:
    space = value.get_space()
    for pos in range(space.dim(isl.dim_type.param)):
        name = space.get_dim_name(isl.dim_type.param, pos)
        if name not in names and value.involves_dims(isl.dim_type.param, pos, 1):
            return False
    return True


def _landing(tg: TaskGraph, flow: InputFlow, order: isl.MultiAff, rect: poly.Rectangularity,
             sizes: list[int | None], k: int, slot: int, base: isl.PwAff, groups: int, *,
             window: str | None = None) -> tuple[LocalTensor, isl.PwAff | None] | str:
    """The landing array of a batch of whole groups: element ``e`` at its group's rank in
    the batch times ``slot``, plus its slot in the group; and, where the group's first
    slot is counted from a piecewise function of the PE, that function (the parameter
    ``index`` stands for it). ``window``: the batch takes a window of values of dimension
    ``k``, from the value of the parameter of that name."""
    n = flow.index_dims
    reaching = poly.bind_pe(flow.reaching().reverse())
    domain = order.get_domain_space()
    context = poly.bind_pe(flow.arrivals()).params()

    def lifted(value: isl.PwAff) -> isl.Aff | None:
        """A function of the parameters as one on the elements."""
        value, known = poly.align_params(value, context)
        aff = affine.one_piece(value.gist_params(known))
        return None if aff is None else affine.lift(aff, domain)

    at = order.get_at(n - 1)
    start = lifted(base)
    first: isl.PwAff | None = None
    if start is None:
        first = base
        at = poly.with_params(at, [poly.INDEX])
        space = at.get_domain_space()
        start = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.param,
                                      space.find_dim_by_name(isl.dim_type.param, poly.INDEX))
    at, start = poly.align_params(at, start)
    position = at.sub(start)
    stride = slot
    for d in range(n - 2, k - 1, -1):
        lo = lifted(rect.minimum.get_at(d)) if window is None or d > k else _param_on(
            domain, window)
        if lo is None:
            return "the groups' box on a PE starts piecewise"
        term, lo = poly.align_params(order.get_at(d), lo)
        term = term.sub(lo).scale_val(isl.Val.int_from_si(term.get_ctx(), stride))
        position, term = poly.align_params(position, term)
        position = position.add(term)
        stride *= sizes[d] or 0
    made = affine.affine_on(position.gist(reaching.align_params(
        position.get_domain_space())), reaching)
    if made is None:
        return "an element's position in its batch is not affine on a PE"
    position = made.gist(reaching.align_params(made.get_domain_space()))
    name = f"land_{flow.name}"
    ma = isl.MultiAff.from_aff(position).set_tuple_name(isl.dim_type.out, name)
    tensor = tg.model.graph.tensor(flow.tensor)
    box = poly.FixedSizeBox(ma, (slot * groups,))
    array = poly.LocalArray(name, flow.reaching().reverse(), box, ma, ma)
    return LocalTensor(flow.tensor, array, tensor.dtype,
                       slot * groups * ELEMENT_BYTES[tensor.dtype], False, False), first
