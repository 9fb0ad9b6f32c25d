"""Adapter lines (paper eq. (5)): PEs outside the compute region that spread a stream
entering at one point over the lines of PEs that need it, re-indexing each element."""

from __future__ import annotations

import islpy as isl

from dtg.codegen.islast import condition_of, normalize, pw_aff_expr, substitute_stmts
from dtg.codegen.stmtutil import and_cond, guarded
from dtg.mapping import poly
from dtg.mapping.flows import InputFlow, TaskGraph, unsupported
from dtg.mapping.mesh import ENTRY_PORT, FLOW_PORT, VERTICAL
from dtg.pe.ir import (
    COUNT,
    Array,
    BoolOp,
    Cmp,
    Cond,
    FValue,
    IBin,
    IConst,
    IntVar,
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
)

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
            window = adapter_window(flow) if batched else None
            if window is not None:
                dtype = tg.model.graph.tensor(flow.tensor).dtype
                i, t, arr, cfg = _batched_spread(flow, window, dtype)
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


def adapter_window(flow: InputFlow) -> tuple[int, isl.PwAff] | None:
    """Where every adapter of the line sends a window of ``L`` consecutive indices that
    starts at ``first(pos)``, a multiple of ``L`` counted from the stream's first index,
    and re-indexes them ``0 .. L-1``: ``L`` and ``first``; else None."""
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
    if not (rect.rectangular and rect.dense and rect.constant_size is not None):
        return None
    (length,) = rect.constant_size
    first = rect.minimum.get_at(0)
    base = a.index_base[0] if flow.kind == "dense" else 0
    ctx = first.get_ctx()
    aligned = first.add_constant_val(isl.Val.int_from_si(ctx, -base)).mod_val(
        isl.Val.int_from_si(ctx, length))
    if length < 2 or poly.constant_value(aligned) != 0:
        return None
    # the index sent down must be the position in the window
    sent = poly.bind_order(flow.order).apply(flow.relation.range_factor_range())
    if not _is_function_of_params(sent):
        return None
    new = sent.as_pw_multi_aff().get_pw_aff(sent.dim(isl.dim_type.set) - 1)
    new, where = poly.align_params(new, target)
    first_at, new = poly.align_params(first, new)
    where = where.align_params(new.get_domain_space())
    index = poly.param_pw_aff(where, poly.INDEX)
    position = index.sub(first_at.intersect_params(where))
    if not new.intersect_params(where).is_equal(position):
        return None
    return length, first


def _batched_spread(flow: InputFlow, window: tuple[int, isl.PwAff], dtype: str
                    ) -> tuple[list[IntVar], list[Task], Array, SimdConfig]:
    """Batches of the window's length land in the adapter; the batch that is the line's
    window is sent down by one SIMD instruction (the other batches only pass)."""
    a = flow.adapter
    assert a is not None
    length, first = window
    context = a.region.context()
    land = f"land_{flow.name}"
    name = f"spread_{flow.name}_send"
    sparse = flow.kind == "sparse"
    config = SimdConfig(name, "copy", ((length,),),
                        SimdOperand("out", color=flow.color, indexed=sparse),
                        (SimdOperand("array", land, (1,)),))
    length_along = a.region.width if a.side in VERTICAL else a.region.height
    lo, hi = a.span
    pos = IVar("PE_X" if a.side in VERTICAL else "PE_Y")
    in_span = None if (lo, hi) == (0, length_along - 1) else BoolOp(
        "&&", Cmp(">=", pos, IConst(lo)), Cmp("<=", pos, IConst(hi)))
    # (``first`` is defined on the span's lines only: the others never send)
    first_expr = pw_aff_expr(first, context.intersect(first.domain().align_params(
        context.get_space())))
    ints: list[IntVar] = []
    if sparse:  # a batch's ``index`` is its window's first index
        own: Cond = Cmp("==", IVar("index"), first_expr)
    else:  # a dense batch starts where the previous ones ended
        counter = f"n_{flow.name}"
        ints.append(IntVar(counter))
        start = normalize(IBin("+", IConst(a.index_base[0]), IVar(counter)))
        own = Cmp("==", start, first_expr)
    body: list[Stmt] = list(guarded(and_cond(in_span, own), [Run(name, ((land, IConst(0)),))]))
    if not sparse:
        body.append(SetInt(counter, "+=", IVar(COUNT)))
    tasks = [Task(f"spread_{flow.name}", "data", tuple(body), a.in_color, sparse, length,
                  land)]
    tasks.append(Task(f"end_{flow.name}", "control", guarded(in_span, [SendEnd(flow.color)]),
                      a.in_color))
    return ints, tasks, Array(land, dtype, (length,)), config


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
