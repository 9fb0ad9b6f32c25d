"""Adapter lines (paper eq. (5)): PEs outside the compute region that spread a stream
entering at one point over the lines of PEs that need it, re-indexing each element."""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from dtg.codegen.cost import costs
from dtg.codegen.islast import (
    condition_of,
    normalize,
    pw_aff_expr,
    substitute,
    substitute_cond,
    substitute_stmts,
)
from dtg.codegen.stmtutil import and_cond, guarded
from dtg.mapping import poly
from dtg.mapping.flows import InputFlow, TaskGraph, unsupported
from dtg.mapping.mesh import ENTRY_PORT, FLOW_PORT, VERTICAL
from dtg.pe.ir import (
    COUNT,
    MAX_RING,
    MAX_SIMD_SIZE,
    SLOT,
    Array,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    FValue,
    IBin,
    IConst,
    IExpr,
    IntVar,
    ISel,
    IVar,
    PeProgram,
    Route,
    Run,
    Send,
    SendEnd,
    SetInt,
    SimdConfig,
    SimdOperand,
    Stmt,
    Task,
    move_array,
)
from dtg.pe.walk import cond_ops, iexpr_ops

OPPOSITE = {"N": "S", "S": "N", "E": "W", "W": "E"}


def adapter_programs(tg: TaskGraph, *, batched: bool = True) -> list[PeProgram]:
    """One program per adapter line: the spreading of each stream that needs it, and
    routes through the line for the other streams that cross it. With ``batched``, a
    line whose elements are one aligned window of the stream takes the stream in
    batches of that window and sends its own by one SIMD instruction."""
    programs = []
    for region in {f.adapter.region for f in tg.inputs if f.adapter is not None}:
        flows = [f for f in tg.inputs if f.adapter is not None and f.adapter.region == region]
        side = flows[0].adapter.side  # type: ignore[union-attr]
        routes: list[Route] = []
        ints: list[IntVar] = []
        arrays: list[Array] = []
        configs: list[SimdConfig] = []
        tasks: list[Task] = [Task("main", "main", ())]
        for flow in flows:
            r, i, t = _spread(flow)
            dtype = tg.model.graph.tensor(flow.tensor).dtype
            plan = adapter_window(flow, dtype) if batched else None
            variants = sum(len(c.variants) for c in configs)
            if plan is not None and variants + max(1, len(plan.parts)) <= costs(
                    ).max_simd_configs:
                i, t, arr, cfg = _batched_spread(flow, plan, dtype)
                arrays.append(arr)
                configs.append(cfg)
            routes.extend(r)
            ints.extend(i)
            tasks.extend(t)
        for other in tg.inputs:
            if other.adapter is None and other.side == side:
                routes.append(Route(other.color, ENTRY_PORT[side], (FLOW_PORT[side],)))
        for out in tg.outputs:
            if out.side == side:
                routes.append(Route(out.color, OPPOSITE[side], (side,)))
        name = "adapters_" + "_".join(f.name for f in flows)
        programs.append(PeProgram(name, (region.x0, region.y0), str(region.pes()),
                                  arrays=tuple(arrays), ints=tuple(ints),
                                  routes=tuple(routes), configs=tuple(configs),
                                  tasks=tuple(tasks)))
    return programs


@dataclass(frozen=True)
class SpreadBatches:
    """How an adapter line takes a stream in batches: each line sends down a window of
    ``length`` consecutive indices from ``first`` (a function of the line's position),
    re-indexed ``0 .. length-1``. Where the windows are aligned to multiples of their
    length from the stream's first index (``aligned``), a batch is a line's window or
    no part of it. Otherwise neighbouring windows overlap or straddle batches (a halo):
    batches of ``size`` wavelets land, and each sends its part of the line's window,
    one of ``parts`` sizes, by one SIMD instruction."""

    length: int  # the longest window's
    first: isl.PwAff
    last: isl.PwAff  # the window's last index
    size: int
    aligned: bool
    parts: tuple[int, ...] = ()
    cycles: int = 0  # predicted busy cycles of a line over the whole stream (halos)


MAX_PART_SIZES = 4  # SIMD variants a halo adapter sets up for its parts
MAX_WHOLE_STREAM = 64  # the longest stream an adapter lands as one batch
HALO_BATCHES = (8, 16, 32, 64)  # besides the window's length and its stride


def adapter_window(flow: InputFlow, dtype: str = "float32") -> SpreadBatches | None:
    """How the adapter line of ``flow`` takes it in batches, or None where it keeps one
    task per wavelet: not every line sends one window of consecutive indices re-indexed
    from 0, or (halos) no batch size keeps the parts' sizes few."""
    window = _line_window(flow)
    if window is None:
        return None
    length, first, last, aligned = window
    if aligned:
        # a batch per window, or the whole stream as one batch: with a batch per window
        # the stream waits on every adapter of the line for each batch's task
        own = SpreadBatches(length, first, last, length, True,
                            cycles=_aligned_cycles(flow, length, dtype))
        total = _stream_length(flow)
        whole = _halo_plan(flow, length, first, last, total, dtype) if length < total <= \
            MAX_WHOLE_STREAM else None
        return whole if whole is not None and whole.cycles < own.cycles else own
    if flow.kind != "dense":
        return None
    plans = [p for size in _halo_sizes(flow, length, first)
             if (p := _halo_plan(flow, length, first, last, size, dtype)) is not None]
    return min(plans, key=lambda p: (p.cycles, p.size), default=None)


def _aligned_cycles(flow: InputFlow, length: int, dtype: str) -> int:
    """Predicted busy cycles of a line over the stream with a batch per window: every
    batch dispatched, tested (and a sparse one's landing array cleared), one sent."""
    c = costs()
    total = _stream_length(flow)
    per_batch = c.task_dispatch + 3 * c.scalar_op + _clearing(flow, length, dtype)
    return total + -(-total // length) * per_batch + c.simd_startup + length + c.simd_config


def _clearing(flow: InputFlow, size: int, dtype: str) -> int:
    """Cycles a sparse batch's task spends clearing its landing array (pe docs; none
    where the whole stream is one window)."""
    if flow.kind != "sparse" or size >= _stream_length(flow):
        return 0
    c = costs()
    return c.simd_startup + -(-size // c.simd_width(dtype, "fill"))


def _line_window(flow: InputFlow) -> tuple[int, isl.PwAff, isl.PwAff, bool] | None:
    """Where every adapter of the line sends a window of consecutive indices from
    ``first(pos)`` to ``last(pos)`` re-indexed from 0: the longest window's length,
    ``first``, ``last`` and whether the windows have one length ``L`` and start at
    multiples of ``L`` counted from the stream's first index."""
    a = flow.adapter
    assert a is not None
    if flow.index_dims != 1:
        return None
    along = "PE_X" if a.side in VERTICAL else "PE_Y"
    target = a.target
    space = isl.Space.set_alloc(target.get_ctx(), 0, 1)
    elements = target.unbind_params(poly.multi_id(space, [poly.INDEX]))
    elements = poly.project_out_params(elements, [
        str(elements.get_dim_name(isl.dim_type.param, d))
        for d in range(elements.dim(isl.dim_type.param))
        if elements.get_dim_name(isl.dim_type.param, d) != along])
    if elements.is_empty():
        return None
    rect = poly.rectangularity(elements, index=())
    if not (rect.rectangular and rect.dense):
        return None
    first, last = rect.minimum.get_at(0), rect.maximum.get_at(0)
    length = int(poly.greatest(rect.extent.get_at(0)).to_python())
    base = a.index_base[0] if flow.kind == "dense" else 0
    ctx = first.get_ctx()
    aligned = first.add_constant_val(isl.Val.int_from_si(ctx, -base)).mod_val(
        isl.Val.int_from_si(ctx, length))
    if length < 2:
        return None
    even = rect.constant_size is not None and poly.constant_value(aligned) == 0
    # the index sent down must be the position in the window
    sent = poly.bind_order(flow.order).apply(flow.relation.range_factor_range())
    if not _is_function_of_params(sent):
        # (halos: an index goes down several lines, re-indexed by the line's offset)
        if flow.wire_offset is None:
            return None
        offset, first_at = poly.align_params(flow.wire_offset[-1], first)
        if not offset.intersect_domain(first_at.domain()).is_equal(first_at):
            return None
        return length, first, last, even
    new = sent.as_pw_multi_aff().get_pw_aff(sent.dim(isl.dim_type.set) - 1)
    new, where = poly.align_params(new, target)
    first_at, new = poly.align_params(first, new)
    where = where.align_params(new.get_domain_space())
    index = poly.param_pw_aff(where, poly.INDEX)
    position = index.sub(first_at.intersect_params(where))
    if not new.intersect_params(where).is_equal(position):
        return None
    return length, first, last, even


def _stream_length(flow: InputFlow) -> int:
    """The wavelets of a dense one-dimensional stream (its indices are consecutive), or
    the indices a sparse one's may take (from 0 to its last)."""
    last = poly.greatest(poly.param_pw_aff(poly.bind_order(flow.order).params(), poly.INDEX))
    return int(last.to_python()) - _index_base(flow) + 1


def _index_base(flow: InputFlow) -> int:
    """The first index of a dense stream; a sparse stream's windows count from 0."""
    a = flow.adapter
    assert a is not None
    return a.index_base[0] if flow.kind == "dense" else 0


def _halo_sizes(flow: InputFlow, length: int, first: isl.PwAff) -> list[int]:
    """Batch sizes worth trying: the window's length, the distance between the windows
    of neighbouring lines (where it is constant) and a few powers of two."""
    sizes = {length, *HALO_BATCHES}
    a = flow.adapter
    assert a is not None
    along = "PE_X" if a.side in VERTICAL else "PE_Y"
    pos = first.get_domain_space().find_dim_by_name(isl.dim_type.param, along)
    pieces = first.get_pieces()
    if pos >= 0 and len(pieces) == 1:
        step = pieces[0][1].get_coefficient_val(isl.dim_type.param, pos)
        if step.is_int():
            sizes.add(abs(int(step.to_python())))
    total = _stream_length(flow)
    return sorted(s for s in sizes if 2 <= s <= min(64, total))


def _halo_plan(flow: InputFlow, length: int, first: isl.PwAff, last: isl.PwAff, size: int,
               dtype: str) -> SpreadBatches | None:
    """Batches of ``size`` wavelets against windows that overlap or straddle them: the
    sizes of the parts a line sends (at most :data:`MAX_PART_SIZES`) and the line's
    predicted busy cycles over the stream."""
    a = flow.adapter
    assert a is not None
    parts = _halo_parts(flow, first, last, size)
    if parts is None:
        return None
    sizes = parts.sizes
    total = _stream_length(flow)
    batches = -(-total // size)
    own, part_size, offset = parts.expressions()
    # While the line's task runs, the stream waits: every batch tests whether it holds a
    # part of the window (a line has at most ceil(L / size) + 1), each sent by SIMD.
    c = costs()
    per_batch = c.task_dispatch + (1 + cond_ops(own)) * c.scalar_op + _clearing(flow, size,
                                                                              dtype)
    per_part = c.simd_startup + iexpr_ops(offset) * c.scalar_op
    if len(sizes) > 1:
        variant, sets = _variant_of(part_size, sizes, "v")
        per_part += c.simd_variant_select + (iexpr_ops(variant) + sum(
            1 + iexpr_ops(s.value) for s in sets if isinstance(s, SetInt))) * c.scalar_op
    sent = min(-(-length // size) + 1, batches)
    cycles = total + batches * per_batch + sent * per_part + length + \
        len(sizes) * c.simd_config
    return SpreadBatches(length, first, last, size, False, tuple(sizes), cycles)


@dataclass(frozen=True)
class _HaloParts:
    """The part of a line's window in the batch starting at position ``n`` (the line's
    counter): where it is not empty (``own``, parameters: the line's position and the
    counter), its size, and its first position in the landing array."""

    sizes: tuple[int, ...]
    batches: isl.Set  # every line of the adapter region (those without a window too)
    lines: isl.Set  # the lines with a window
    own: isl.Set
    size: isl.PwAff
    offset: isl.PwAff

    def expressions(self) -> tuple[Cond, IExpr, IExpr]:
        # (tested on every line of the span: a line inside it may have no window)
        cond = condition_of(self.own, self.batches)
        there = self.lines.intersect(self.own)
        return (BConst(True) if cond is None else cond,
                pw_aff_expr(self.size, there), pw_aff_expr(self.offset, there))


def _halo_parts(flow: InputFlow, first: isl.PwAff, last: isl.PwAff, size: int
                ) -> _HaloParts | None:
    """The parts of the line's window in batches of ``size`` wavelets, or None where
    they have more than :data:`MAX_PART_SIZES` sizes."""
    a = flow.adapter
    assert a is not None
    ctx = first.get_ctx()
    counter = f"n_{flow.name}"
    total = _stream_length(flow)
    base = _index_base(flow)

    def val(v: int) -> isl.Val:
        return isl.Val.int_from_si(ctx, v)

    context = poly.with_params(a.region.context(), [counter])
    first = first.align_params(context.get_space())
    last = last.align_params(context.get_space())
    n = poly.param_pw_aff(context, counter)
    zero = n.sub(n)
    on_grid = n.mod_val(val(size))
    batches = context.intersect(n.ge_set(zero)).intersect(
        n.le_set(zero.add_constant_val(val(total - 1)))).intersect(on_grid.eq_set(zero))
    lines = batches.intersect(first.domain()).intersect(last.domain())
    n = n.intersect_domain(lines)
    start = first.intersect_domain(lines).add_constant_val(val(-base))
    count = zero.intersect_domain(lines).add_constant_val(val(size)).min(
        zero.intersect_domain(lines).add_constant_val(val(total)).sub(n))
    lo = n.max(start)
    end = last.intersect_domain(lines).add_constant_val(val(1 - base))
    hi = n.add(count).min(end)
    part = hi.sub(lo)
    own = part.gt_set(part.sub(part))
    if own.is_empty():
        return None
    values = isl.Set.from_pw_aff(part.intersect_domain(own)).project_out_all_params()
    var = isl.Aff.var_on_domain(isl.LocalSpace.from_space(values.get_space()),
                                isl.dim_type.set, 0)
    if poly.greatest(isl.PwAff.from_aff(var).intersect_domain(values)).to_python() > \
            MAX_SIMD_SIZE:
        return None
    sizes = sorted(p[0] for p in poly.points(values, limit=MAX_SIMD_SIZE + 1))
    if len(sizes) > MAX_PART_SIZES:
        return None
    return _HaloParts(tuple(sizes), batches, lines, own, part.intersect_domain(own),
                      lo.sub(n).intersect_domain(own))


def _batched_spread(flow: InputFlow, plan: SpreadBatches, dtype: str
                    ) -> tuple[list[IntVar], list[Task], Array, SimdConfig]:
    """Batches land in the adapter; the line's part of each (aligned windows: the batch
    that is the line's window) is sent down by one SIMD instruction."""
    a = flow.adapter
    assert a is not None
    length, first = plan.length, plan.first
    context = a.region.context()
    land = f"land_{flow.name}"
    name = f"spread_{flow.name}_send"
    sparse = flow.kind == "sparse"
    length_along = a.region.width if a.side in VERTICAL else a.region.height
    lo, hi = a.span
    pos = IVar("PE_X" if a.side in VERTICAL else "PE_Y")
    in_span = None if (lo, hi) == (0, length_along - 1) else BoolOp(
        "&&", Cmp(">=", pos, IConst(lo)), Cmp("<=", pos, IConst(hi)))
    ints: list[IntVar] = []
    counter = f"n_{flow.name}"
    body: list[Stmt]
    if plan.aligned:
        config = SimdConfig(name, "copy", ((length,),),
                            SimdOperand("out", color=flow.color, indexed=sparse),
                            (SimdOperand("array", land, (1,)),))
        # (``first`` is defined on the lines with a window only: the others never send)
        windowed = first.domain().align_params(context.get_space())
        first_expr = pw_aff_expr(first, context.intersect(windowed))
        if sparse:  # a batch's ``index`` is its window's first index
            own: Cond = Cmp("==", IVar("index"), first_expr)
        else:  # a dense batch starts where the previous ones ended
            start = normalize(IBin("+", IConst(a.index_base[0]), IVar(counter)))
            own = Cmp("==", start, first_expr)
        has = condition_of(windowed, context)
        body = list(guarded(and_cond(and_cond(in_span, has), own),
                            [Run(name, ((land, IConst(0)),))]))
    else:
        config = SimdConfig(name, "copy", tuple((k,) for k in plan.parts),
                            SimdOperand("out", color=flow.color, indexed=sparse),
                            (SimdOperand("array", land, (1,)),))
        halo = _halo_parts(flow, first, plan.last, plan.size)
        assert halo is not None
        own, size, offset = halo.expressions()
        if sparse:  # (a sparse batch's window starts at ``index``, not at a counter)
            at: dict[str, IExpr] = {counter: IVar("index")}
            own, size, offset = (substitute_cond(own, at), substitute(size, at),
                                 substitute(offset, at))
        variant = None
        sent: list[Stmt] = []
        if len(plan.parts) > 1:
            variant, sent = _variant_of(size, plan.parts, f"v_{flow.name}")
            ints.extend(IntVar(s.name) for s in sent if isinstance(s, SetInt))
        sent.append(Run(name, ((land, offset),), variant=variant))
        body = list(guarded(and_cond(in_span, own), sent))
    if not sparse:
        ints.append(IntVar(counter))
        body.append(SetInt(counter, "+=", IVar(COUNT)))
    # (a sparse stream landed whole is one window: the image's zeros, never cleared)
    once = sparse and plan.size >= _stream_length(flow)
    ring = adapter_ring(plan.size, -(-_stream_length(flow) // plan.size))
    if ring > 1:  # (batch b lands at slot = (b mod ring) * size)
        body = list(move_array(tuple(body), land, lambda e: normalize(IBin("+", IVar(SLOT), e))))
    tasks = [Task(f"spread_{flow.name}", "data", tuple(body), a.in_color, sparse, plan.size,
                  land, once, ring=ring)]
    tasks.append(Task(f"end_{flow.name}", "control", guarded(in_span, [SendEnd(flow.color)]),
                      a.in_color))
    return ints, tasks, Array(land, dtype, (plan.size * ring,)), config


def adapter_ring(size: int, batches: int) -> int:
    """Landing slots for an adapter line's batches of ``size`` wavelets. Every line of
    the adapter takes the whole stream, and a wavelet moves on only when every line it
    is multicast to has room: with one slot, each line holds up the stream while it
    runs its task, and the lines' holds add up (a 262-element stream on 8 lines took
    76 cycles per batch of 32). A task tests its batch and may send a part of up to
    ``size`` elements (with its start-up and the tests, under ``size + 16`` cycles):
    enough slots land the batches behind it meanwhile, no more than the ``batches``.
    With two batches there is one hold to save and the slot arithmetic costs a cycle per
    send: one slot (a 66-element sum pooling on 4 lines: 173 cycles with one, 175 with
    two)."""
    if batches <= 2:
        return 1
    return min(MAX_RING, batches, 1 + -(-(size + 16) // size))


def _variant_of(size: IExpr, sizes: tuple[int, ...], name: str
                ) -> tuple[IExpr, list[Stmt]]:
    """The variant selecting a part of ``size`` elements among ``sizes`` (ascending):
    ``size - sizes[0]`` where they are consecutive, else a chain of selects on the size
    computed once."""
    if list(sizes) == list(range(sizes[0], sizes[0] + len(sizes))):
        return normalize(IBin("-", size, IConst(sizes[0]))), []
    chosen: IExpr = IConst(len(sizes) - 1)
    for k in range(len(sizes) - 2, -1, -1):
        chosen = ISel(Cmp("==", IVar(name), IConst(sizes[k])), IConst(k), chosen)
    return chosen, [SetInt(name, "=", size)]


def _is_function_of_params(s: isl.Set) -> bool:
    """Whether ``s`` has at most one point for every value of its parameters."""
    return bool(isl.Map.from_range(s).is_single_valued())


def _spread(flow: InputFlow) -> tuple[list[Route], list[IntVar], list[Task]]:
    """Routes, counters and tasks of adapters spreading ``flow`` (eq. (5))."""
    a = flow.adapter
    assert a is not None
    if flow.index_dims != 1:
        raise unsupported(flow.tensor,
            f"input '{flow.tensor}' has a {flow.index_dims}-dimensional index and needs "
            "adapters; adapters spread streams with a one-dimensional index only")
    along = "PE_X" if a.side in VERTICAL else "PE_Y"
    pos, (lo, hi), s = IVar(along), a.span, a.source
    forward = "E" if a.side in VERTICAL else "S"
    backward = OPPOSITE[forward]
    routes: list[Route] = []

    def at(cond: Cond, source: str, targets: list[str]) -> None:
        routes.append(Route(a.in_color, source, ("RAMP", *targets), cond))

    at(Cmp("==", pos, IConst(s)), ENTRY_PORT[a.side],
       ([forward] if hi > s else []) + ([backward] if lo < s else []))
    if hi > s + 1:
        at(BoolOp("&&", Cmp(">", pos, IConst(s)), Cmp("<", pos, IConst(hi))), backward,
           [forward])
    if hi > s:
        at(Cmp("==", pos, IConst(hi)), backward, [])
    if lo < s - 1:
        at(BoolOp("&&", Cmp("<", pos, IConst(s)), Cmp(">", pos, IConst(lo))), forward,
           [backward])
    if lo < s:
        at(Cmp("==", pos, IConst(lo)), forward, [])
    length = a.region.width if a.side in VERTICAL else a.region.height
    in_span = None if (lo, hi) == (0, length - 1) else BoolOp(
        "&&", Cmp(">=", pos, IConst(lo)), Cmp("<=", pos, IConst(hi)))
    routes.append(Route(flow.color, "RAMP", (FLOW_PORT[a.side],), in_span))

    context = a.region.context()
    index_range = poly.bind_order(flow.order).params()
    ctx = context.align_params(index_range.get_space()).intersect(
        index_range.align_params(context.get_space()))
    target = condition_of(a.target, ctx)
    assert flow.wire_offset is not None
    # The index sent down: index - offset(line). When each element goes down one line,
    # the new index is a function of the index alone (eq. (5): index mod 4), cheaper to
    # compute than through the line's offset.
    sent = poly.bind_order(flow.order).apply(flow.relation.range_factor_range())
    if _is_function_of_params(sent):
        new_index = pw_aff_expr(sent.as_pw_multi_aff().get_pw_aff(
            sent.dim(isl.dim_type.set) - 1), ctx)
    else:
        new_index = normalize(IBin("-", IVar("index"),
                                   pw_aff_expr(flow.wire_offset[-1], ctx)))
    ints: list[IntVar] = []
    body: list[Stmt]
    if flow.kind == "sparse":
        body = list(guarded(target, [Send(flow.color, FValue(), new_index)]))
    else:
        counter = f"n_{flow.name}"
        ints.append(IntVar(counter))
        index = IBin("+", IConst(a.index_base[0]), IVar(counter))
        body = list(substitute_stmts(guarded(target, [Send(flow.color, FValue())]),
                                     {"index": index}))
        body.append(SetInt(counter, "+=", IConst(1)))
    tasks = [
        Task(f"spread_{flow.name}", "data", tuple(body), a.in_color, flow.kind == "sparse"),
        # Adapters outside the span (the source's side of it) only pass the mark along.
        Task(f"end_{flow.name}", "control", guarded(in_span, [SendEnd(flow.color)]),
             a.in_color),
    ]
    return routes, ints, tasks
