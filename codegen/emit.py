"""Assemble the PE module: one program for the compute PEs, one per adapter line.

Everything is generated from isl objects parametric in ``PE_X``/``PE_Y`` (and the index
constants): guards, index arithmetic and loops come from isl's AST generator, SIMD
operands from the decisions of :mod:`codegen.simd`. The code never enumerates PEs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Literal

import islpy as isl

from codegen.batching import COUNT, ArrivalPlan, Batch
from codegen.blocks import block_exchange
from codegen.cleanup import drop_unread_ints
from codegen.configure import guard_configurations
from codegen.cost import elementwise_simd_pays
from codegen.hoist import hoist_invariants
from codegen.islast import (
    aff_expr,
    condition_of,
    normalize,
    pw_aff_expr,
    scan,
    substitute,
    substitute_stmts,
)
from codegen.peir import (
    Activate,
    Array,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FConst,
    FExpr,
    FNeg,
    For,
    FValue,
    IBin,
    IConst,
    IExpr,
    If,
    IntVar,
    IVar,
    Load,
    Not,
    PeModule,
    PeProgram,
    Recv,
    Route,
    Run,
    Send,
    SendEnd,
    SetInt,
    SimdConfig,
    SimdOperand,
    Stmt,
    Store,
    StreamIO,
    Task,
    rename_array,
    rename_config,
)
from codegen.routes import broadcast_routes, tree_routes
from codegen.simd import Operand, SimdDecision, flat_aff, flatten, row_major
from codegen.turns import TurnOrder, every_pe, turn_order
from lair.diagnostics import CompilerBug
from lair.graph import Binary, Const, Read, Unary, Value
from lair.lower import CTX, PolyStatement
from mapping import poly
from mapping.flows import (
    Exchange,
    InputFlow,
    OutputFlow,
    Region,
    ResidentReduction,
    TaskGraph,
    chain_length,
    unsupported,
)
from mapping.memory import LocalTensor, Memory
from mapping.mesh import ENTRY_PORT, FLOW_PORT, VERTICAL

OPPOSITE = {"N": "S", "S": "N", "E": "W", "W": "E"}
NEUTRAL = {"+=": 0.0, "max=": float("-inf")}


def emit(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision], *, name: str,
         reference: str | None, params: Sequence[tuple[str, int | str]] = (),
         simd: bool = True, simd_fill: bool = True,
         scalar_outputs: frozenset[str] | None = None,
         arrivals: ArrivalPlan | None = None) -> PeModule:
    """The PE module for a planned task graph; ``simd=False`` gives scalar code only,
    ``simd_fill`` uses SIMD for initialization, and output, combining and exchange tasks
    use it except those named in ``scalar_outputs`` (``"out:y"``, ``"combine:y"``,
    ``"exchange:y"``);
    ``arrivals`` names the dense streams whose wavelets are taken in batches."""
    streams = [StreamIO("input", f.tensor, f.kind, f.external_color, str(f.stream_relation))
               for f in tg.inputs if f.stream_relation is not None]
    streams += [StreamIO("output", s.tensor, s.kind, o.color, str(s.relation))
                for o in tg.outputs for s in [tg.mapping.stream(o.tensor)] if s is not None]
    programs = _adapter_programs(tg)
    programs = [guard_configurations(drop_unread_ints(hoist_invariants(p))) for p in programs]
    builder = _ComputeBuilder(tg, memory, decisions, simd, simd and simd_fill,
                              frozenset() if scalar_outputs is None else scalar_outputs,
                              arrivals or ArrivalPlan())
    compute = builder.build()
    programs.append(guard_configurations(drop_unread_ints(hoist_invariants(compute)),
                                         task_pes=builder.task_pes))
    return PeModule(name, tg.mapping.width, tg.mapping.height, reference, tuple(params),
                    tuple(streams), tuple(programs))


# ------------------------------------------------------------------------ helpers


def _and(a: Cond | None, b: Cond | None) -> Cond | None:
    if a is None:
        return b
    if b is None:
        return a
    return BoolOp("&&", a, b)


def _cases(cases: Sequence[tuple[Cond | None, Sequence[Stmt]]], *, exhaustive: bool
           ) -> tuple[Stmt, ...]:
    """Mutually exclusive cases as an if / else-if chain; when they cover every PE that
    gets here (``exhaustive``) the last needs no test."""
    cases = [(c, b) for c, b in cases if b]
    if not cases:
        return ()
    cond, body = cases[-1]
    tail: tuple[Stmt, ...] = tuple(body) if exhaustive or cond is None else (
        If(cond, tuple(body)),)
    for cond, body in reversed(cases[:-1]):
        if cond is None:
            return tuple(body)
        tail = (If(cond, tuple(body), tail),)
    return tail


def _guarded(cond: Cond | None, body: Sequence[Stmt]) -> tuple[Stmt, ...]:
    if not body:
        return ()
    return tuple(body) if cond is None else (If(cond, tuple(body)),)






def _position(side: str, region: Region) -> IExpr:
    """A PE's position along a line flowing towards ``side``, from the far end."""
    if side == "E":
        return IVar("PE_X")
    if side == "S":
        return IVar("PE_Y")
    if side == "W":
        return IBin("-", IConst(region.width - 1), IVar("PE_X"))
    return IBin("-", IConst(region.height - 1), IVar("PE_Y"))


def _value_expr(value: Value, trigger: str | None, load: dict[str, Load]) -> FExpr:
    match value:
        case Const(v):
            return FConst(v)
        case Read(tensor) if tensor == trigger:
            return FValue()
        case Read(tensor):
            return load[tensor]
        case Unary(_, operand):
            return FNeg(_value_expr(operand, trigger, load))
        case Binary(op, lhs, rhs):
            return FBin(op, _value_expr(lhs, trigger, load), _value_expr(rhs, trigger, load))
    raise TypeError(value)


def _pe_condition_set(pes: isl.Set) -> isl.Set:
    """A set of PEs as constraints on ``PE_X``/``PE_Y``."""
    return pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))


# ---------------------------------------------------------------------- adapters


def _adapter_programs(tg: TaskGraph) -> list[PeProgram]:
    """One program per adapter line: the spreading of each stream that needs it, and
    routes through the line for the other streams that cross it."""
    programs = []
    for region in {f.adapter.region for f in tg.inputs if f.adapter is not None}:
        flows = [f for f in tg.inputs if f.adapter is not None and f.adapter.region == region]
        side = flows[0].adapter.side  # type: ignore[union-attr]
        routes: list[Route] = []
        ints: list[IntVar] = []
        tasks: list[Task] = [Task("main", "main", ())]
        for flow in flows:
            r, i, t = _spread(flow)
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
                                  ints=tuple(ints), routes=tuple(routes), tasks=tuple(tasks)))
    return programs


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
        body = list(_guarded(target, [Send(flow.color, FValue(), new_index)]))
    else:
        counter = f"n_{flow.name}"
        ints.append(IntVar(counter))
        index = IBin("+", IConst(a.index_base[0]), IVar(counter))
        body = list(substitute_stmts(_guarded(target, [Send(flow.color, FValue())]),
                                     {"index": index}))
        body.append(SetInt(counter, "+=", IConst(1)))
    tasks = [
        Task(f"spread_{flow.name}", "data", tuple(body), a.in_color, flow.kind == "sparse"),
        # Adapters outside the span (the source's side of it) only pass the mark along.
        Task(f"end_{flow.name}", "control", _guarded(in_span, [SendEnd(flow.color)]),
             a.in_color),
    ]
    return routes, ints, tasks


# ------------------------------------------------------------------- compute PEs


@dataclass
class _ComputeBuilder:
    tg: TaskGraph
    memory: Memory
    decisions: dict[str, SimdDecision]
    simd: bool
    simd_fill: bool
    scalar_outputs: frozenset[str]  # "out:T", "combine:T", "exchange:T" done by scalar loops
    arrivals: ArrivalPlan
    configs: list[SimdConfig] = field(default_factory=list)
    extra_tasks: list[Task] = field(default_factory=list)
    extra_arrays: list[Array] = field(default_factory=list)
    ints: list[IntVar] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    inits: dict[str, float] = field(default_factory=dict)  # array -> initial value
    task_pes: dict[str, isl.Set] = field(default_factory=dict)  # where a task can run
    landed_in_place: set[str] = field(default_factory=set)  # landing arrays not needed

    @property
    def region(self) -> Region:
        return self.tg.compute

    def _simd_out(self, kind: str, tensor: str) -> bool:
        """Whether the ``kind`` (out, combine, exchange) tasks of ``tensor`` use SIMD."""
        return self.simd and f"{kind}:{tensor}" not in self.scalar_outputs

    def build(self) -> PeProgram:
        tasks: list[Task] = []
        main: list[Stmt] = list(self._init())
        finish = self._finish()
        flows = self.tg.inputs
        # With one stream that ends with one mark on each PE it reaches, that mark is the
        # moment the PE's work is done: finish in its control task, with no counting (and
        # in main on the PEs the stream does not reach).
        direct = len(flows) == 1 and isinstance(flows[0].groups, int) and (
            flows[0].groups == 1)
        if direct:
            self._input_routes(flows[0])
            tasks.extend(self._flow_tasks(flows[0], finish, counted=False))
            context = self.region.context()
            reached = _pe_condition_set(flows[0].lines)
            elsewhere = condition_of(context.subtract(reached.intersect(context)), context)
            if finish and not (isinstance(elsewhere, BConst) and not elsewhere.value):
                main.extend(_guarded(elsewhere, finish))
        else:
            if flows:
                self.ints.append(IntVar("pending"))
            for flow in flows:
                self._input_routes(flow)
                reach = condition_of(_pe_condition_set(flow.lines), self.region.context())
                groups = IConst(flow.groups) if isinstance(flow.groups, int) else pw_aff_expr(
                    flow.groups, self.region.context())
                main.extend(_guarded(reach, [SetInt("pending", "+=", groups)]))
                tasks.extend(self._flow_tasks(flow, [Activate("finish")] if finish else [],
                                              counted=True))
            if finish and flows:
                main.append(If(Cmp("==", IVar("pending"), IConst(0)), (Activate("finish"),)))
                tasks.append(Task("finish", "local", tuple(finish)))
            elif finish:
                main.extend(finish)
        tasks.insert(0, Task("main", "main", tuple(main)))
        tasks.extend(self.extra_tasks)
        arrays = tuple(self._array(a) for a in self.memory.arrays) + tuple(
            Array(b.land.name, b.land.dtype, b.land.size) for b in self.arrivals.batches
            if b.land.name not in self.landed_in_place) + tuple(
            self.extra_arrays)
        return PeProgram("compute", (self.region.x0, self.region.y0), str(self.region.pes()),
                         arrays, tuple(self.ints), tuple(self.routes), tuple(self.configs),
                         tuple(tasks))

    # -------------------------------------------------------------- arrays

    def _array(self, local: LocalTensor) -> Array:
        offset = local.offset_aff()
        context = self.region.context()
        exprs = tuple(aff_expr(offset.get_at(d), context) for d in range(offset.dim(
            isl.dim_type.out)))
        store, store_set = None, None
        if local.resident_output:
            store = local.tensor
            written = self._written(local.tensor)
            for red in self.tg.reductions:
                if red.tensor == local.tensor and written is not None:
                    written, keeps = poly.align_params(written, red.last)
                    written = written.intersect_params(keeps).coalesce()  # the totals only
            for ex in self.tg.exchanges:
                if ex.tensor == local.tensor and ex.reduce and written is not None:
                    # partial results are summed where kept: store the totals only
                    totals, several = poly.bind_pe(ex.needed), ex.needed.range()
                    written, several = poly.align_params(written, several)
                    written, totals = poly.align_params(written.subtract(several), totals)
                    written = written.union(totals).coalesce()
            store_set = str(written) if written is not None else None
        return Array(local.name, local.dtype, local.size, exprs,
                     local.tensor if local.resident_input else None, None, store, store_set,
                     self.inits.get(local.name))

    def _written(self, tensor: str) -> isl.Set | None:
        result: isl.Set | None = None
        for pstmt in self.tg.model.statements:
            if pstmt.stmt.target.tensor != tensor:
                continue
            per_pe = poly.elements_per_pe(self.tg.placement_of(pstmt.name), pstmt.write,
                                          pstmt.domain)
            elements = poly.bind_pe(per_pe)
            result = elements if result is None else result.union(elements)
        return result

    # ---------------------------------------------------------------- init

    def _init(self) -> list[Stmt]:
        body: list[Stmt] = []
        for pstmt in self.tg.model.statements:
            if not pstmt.stmt.is_reduction:
                continue
            local = self.memory.of(pstmt.stmt.target.tensor)
            if local is None:
                continue
            neutral = FConst(NEUTRAL[pstmt.stmt.op])
            size = local.size
            if not local.resident_input:
                # a static initializer: in the program image, like loaded elements
                if neutral.value != 0.0:
                    self.inits[local.name] = neutral.value
                continue
            if self.simd_fill and 0 < len(size) <= 4 and elementwise_simd_pays(
                    size, local.dtype, ops=0):
                name = f"fill_{local.name}"
                self.configs.append(SimdConfig(
                    name, "fill", (size,), SimdOperand("array", local.name, row_major(size)),
                    (SimdOperand("scalar"),)))
                body.append(Run(name, ((local.name, IConst(0)),), neutral))
            else:
                loops: Stmt = Store(Load(local.name, tuple(IVar(f"i{d}") for d in range(
                    len(size)))), "=", neutral)
                for d in reversed(range(len(size))):
                    loops = For(f"i{d}", IConst(0), IConst(size[d] - 1), (loops,))
                body.append(loops)
        return body

    # -------------------------------------------------------------- compute

    def _compute(self, task_name: str) -> list[Stmt]:
        task = next(t for t in self.tg.tasks if t.name == task_name)
        assert task.statement is not None and task.instances is not None
        pstmt = self.tg.model.statement(task.statement)
        flow = self.tg.flow_of(task)
        context = flow.arrival_context() if flow else self.region.context()
        decision = self.decisions.get(task.name)
        if self.simd and decision is not None and decision.used:
            return self._simd(task.name, decision, task.instances, context)
        return list(self._scalar(pstmt, task.instances, task.trigger, context))

    def _batched(self, batch: Batch, task_name: str) -> list[Stmt]:
        """A task's work for a batch of arrivals: SIMD over the batch's window."""
        task = batch.task(task_name)
        assert task.instances is not None
        return self._simd(task_name, batch.decision(task_name), task.instances, batch.context)

    def _simd(self, task_name: str, decision: SimdDecision, instances: isl.Set,
              context: isl.Set) -> list[Stmt]:
        """The instructions of a SIMD decision where the task has instances, inside the
        scalar loops over its outer dimensions."""
        guard = condition_of(instances.params(), context)
        runs = self._runs(task_name, decision)
        if decision.outer is None:
            return list(_guarded(guard, runs))
        names = decision.outer_names

        def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            return list(substitute_stmts(runs, dict(zip(names, coords, strict=True))))

        return list(_guarded(guard, scan(decision.outer, context, body)))

    def _runs(self, task_name: str, d: SimdDecision) -> tuple[Run, ...]:
        """One configuration and invocation per operation of the decision."""
        assert d.dst is not None and d.op is not None and d.sizes is not None
        steps = ((d.op, d.dst, d.srcs, d.scalar), *d.more)
        runs = []
        for k, (op, dst, srcs, scalar_value) in enumerate(steps):
            name = f"simd_{task_name}" + (f"_{k}" if len(steps) > 1 else "")
            operands = tuple(_simd_operand(o) for o in srcs)
            if op == "fill":
                operands = (SimdOperand("scalar"),)
            self.configs.append(SimdConfig(name, op, d.variants or (d.sizes,),  # type: ignore[arg-type]
                                           _simd_operand(dst), operands))
            bases: dict[str, IExpr] = {}
            for o in (dst, *srcs):
                if o.kind == "array" and o.array is not None and o.base is not None:
                    bases.setdefault(o.array, o.base)
            scalar = None
            if scalar_value is not None:
                scalar = _value_expr(scalar_value, None, {}) if isinstance(
                    scalar_value, Const) else FValue()
            runs.append(Run(name, tuple(bases.items()), scalar, d.variant))
        return tuple(runs)

    def _scalar(self, pstmt: PolyStatement, instances: isl.Set, trigger: str | None,
                context: isl.Set) -> tuple[Stmt, ...]:
        stmt = pstmt.stmt
        offsets: dict[str, tuple[IExpr, ...]] = {}
        for local in self.memory.arrays:
            if local.tensor not in (stmt.target.tensor, *(r.tensor for r in stmt.reads)):
                continue
            off = local.offset_aff()
            offsets[local.tensor] = tuple(aff_expr(off.get_at(d), self.region.context())
                                          for d in range(off.dim(isl.dim_type.out)))

        def local_load(tensor: str, env: dict[str, IExpr]) -> Load:
            local = self.memory.of(tensor)
            if local is None:
                raise CompilerBug(f"'{tensor}' has no local array on the compute PEs")
            access = stmt.access(tensor)
            index = []
            for expr, off in zip(access.index, offsets[tensor], strict=True):
                value: IExpr = IConst(expr.constant)
                for var, coeff in expr.terms:
                    value = IBin("+", value, IBin("*", IConst(coeff), env[var]))
                index.append(IBin("-", value, off))
            return Load(local.name, tuple(_simplify(i) for i in index))

        def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            env = dict(zip(stmt.iterators, coords, strict=True))
            loads = {t.tensor: local_load(t.tensor, env) for t in stmt.reads
                     if t.tensor != trigger}
            value = _value_expr(stmt.value, trigger, loads)
            return [Store(local_load(stmt.target.tensor, env), stmt.op, value)]

        return scan(instances, context, body)

    # --------------------------------------------------------------- inputs

    def _input_routes(self, flow: InputFlow) -> None:
        if flow.parent is not None:
            self.routes.extend(tree_routes(flow.color, flow.parent, flow.lines,
                                           self.region.context()))
            return
        port_in, port_on = ENTRY_PORT[flow.side], FLOW_PORT[flow.side]
        context = self.region.context()
        reach = _pe_condition_set(flow.lines)
        last = {"N": ("PE_Y", self.region.height - 1), "S": ("PE_Y", 0),
                "W": ("PE_X", self.region.width - 1), "E": ("PE_X", 0)}[flow.side]
        in_line = condition_of(reach, context)
        is_last = Cmp("==", IVar(last[0]), IConst(last[1]))
        not_last = Cmp("!=", IVar(last[0]), IConst(last[1]))
        self.routes.append(Route(flow.color, port_in, ("RAMP", port_on), _and(in_line, not_last)))
        self.routes.append(Route(flow.color, port_in, ("RAMP",), _and(in_line, is_last)))

    def _flow_tasks(self, flow: InputFlow, done: Sequence[Stmt], *, counted: bool
                    ) -> list[Task]:
        """The data task of a stream and the control task of its end marks; ``done`` runs
        when the PE has seen all the end marks it waits for."""
        body: list[Stmt] = []
        batch = self.arrivals.of(flow.name) if self.simd else None
        land = batch.land.name if batch is not None else None
        configs_before = len(self.configs)
        in_place = batch is not None and self._lands_in_place(batch, flow)
        if batch is not None and batch.keep is not None and not in_place:
            body.extend(self._batched_keep(batch, flow))
        elif flow.tensor in self.tg.buffered and batch is None:
            body.extend(self._keep(flow))
        for t in self.tg.tasks:
            if t.kind == "compute" and t.flow == flow.name:
                body.extend(self._compute(t.name) if batch is None else self._batched(
                    batch, t.name))
        if in_place:  # the batch lands in the tensor's own array: read it there
            assert batch is not None and land is not None
            local = self.memory.of(flow.tensor)
            assert local is not None
            body = list(rename_array(tuple(body), land, local.name))
            self.configs[configs_before:] = [rename_config(c, land, local.name)
                                             for c in self.configs[configs_before:]]
            land = local.name
            self.landed_in_place.add(batch.land.name)
        env: dict[str, IExpr] = {}
        context = self.region.context()
        group_vars: list[Stmt] = []
        if flow.index_dims > 1:
            env.update(self._outer_index(flow, context))
            group_vars.append(SetInt(f"g_{flow.name}", "+=", IConst(1)))
        if flow.kind == "dense":
            # A dense wavelet carries no index: count arrivals within the current group
            # (the groups are counted by end marks) from the group's first index.
            counter = f"n_{flow.name}"
            self.ints.append(IntVar(counter))
            arrivals = poly.bind_pe(flow.arrivals())
            outer = poly.index_names(flow.index_dims)[:-1]
            if outer:
                arrivals = poly.bind_leading(arrivals, outer)
                group_vars.append(SetInt(counter, "=", IConst(0)))
            # (in a context without the innermost index, which the expression defines:
            # where every arrival at a PE has one index, isl would write it as 'index')
            known = poly.project_out_params(flow.arrival_context(), [poly.index_names(
                flow.index_dims)[-1]])
            first = pw_aff_expr(arrivals.dim_min(0), known)
            env["index"] = IBin("+", substitute(first, env), IVar(counter))
        elif flow.wire_offset is not None:
            env["index"] = IBin("+", IVar("index"), pw_aff_expr(flow.wire_offset[-1], context))
        data = list(substitute_stmts(tuple(body), env)) if env else body
        if flow.kind == "dense":
            data.append(SetInt(f"n_{flow.name}", "+=", IConst(1) if batch is None else IVar(
                COUNT)))
        control: list[Stmt] = list(group_vars)
        if counted:
            control.append(SetInt("pending", "+=", IConst(-1)))
            if done:
                control.append(If(Cmp("==", IVar("pending"), IConst(0)), tuple(done)))
        else:
            control.extend(done)
        reached = _pe_condition_set(flow.lines)
        self.task_pes[f"on_{flow.name}"] = self.task_pes[f"end_{flow.name}"] = reached
        return [Task(f"on_{flow.name}", "data", tuple(data), flow.color, flow.kind == "sparse",
                     batch.size if batch else None, land),
                Task(f"end_{flow.name}", "control", tuple(control), flow.color)]

    def _lands_in_place(self, batch: Batch, flow: InputFlow) -> bool:
        """Whether every batch's wavelets go, as they land, exactly where the PE keeps
        them: the kept box is the whole window, at the start of the tensor's array."""
        keep = batch.keep
        local = self.memory.of(flow.tensor)
        return keep is not None and local is not None and keep.sizes == (batch.size,) and \
            keep.dst_strides == (1,) and keep.src_strides == (1,) and \
            keep.dst_base == IConst(0) and keep.src_base == IConst(0) and \
            prod(local.size) >= batch.size and local.dtype == batch.land.dtype

    def _batched_keep(self, batch: Batch, flow: InputFlow) -> list[Stmt]:
        """Copy the batch's kept elements from the landing array into place."""
        keep = batch.keep
        local = self.memory.of(flow.tensor)
        assert keep is not None and local is not None
        name = f"keep_{flow.name}"
        self.configs.append(SimdConfig(
            name, "copy", (keep.sizes,), SimdOperand("array", local.name, keep.dst_strides),
            (SimdOperand("array", batch.land.name, keep.src_strides),)))
        run = Run(name, ((local.name, keep.dst_base), (batch.land.name, keep.src_base)))
        return list(_guarded(condition_of(keep.elements.params(), batch.context), [run]))

    def _keep(self, flow: InputFlow) -> list[Stmt]:
        """Store the arriving element in the local array, where this PE needs it."""
        local = self.memory.of(flow.tensor)
        if local is None:
            raise CompilerBug(f"'{flow.tensor}' is kept in memory but has no local array")
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
        index = tuple(_simplify(IBin("-", pw_aff_expr(element.get_pw_aff(d), context),
                                     aff_expr(offset.get_at(d), self.region.context())))
                      for d in range(offset.dim(isl.dim_type.out)))
        return list(_guarded(where, [Store(Load(local.name, index), "=", FValue())]))

    def _outer_index(self, flow: InputFlow, context: isl.Set) -> dict[str, IExpr]:
        """Outer index values from the count of end marks (lexicographic group order)."""
        counter = f"g_{flow.name}"
        self.ints.append(IntVar(counter))
        arrivals = flow.arrivals()
        n = flow.index_dims
        outer = arrivals.project_out(isl.dim_type.out, n - 1, 1)
        per_pe = poly.bind_pe(outer)
        rect = poly.rectangularity(per_pe)
        # The k-th end mark ends the group of the k-th outer tuple in lexicographic order:
        # its digits need the sizes of every outer dimension but the outermost.
        inner = [poly.constant_value(rect.size.get_at(d)) for d in range(1, n - 1)]
        if not rect.dense or any(size is None for size in inner):
            raise unsupported(flow.tensor,
                f"input '{flow.tensor}': the outer index values reaching a PE do not form a "
                "box (whose size may vary only in the outermost dimension), so they cannot be "
                "counted from end marks")
        sizes = (0, *(size or 0 for size in inner))
        names = poly.index_names(n)[:-1]
        env: dict[str, IExpr] = {}
        stride = 1
        for d in reversed(range(n - 1)):
            lo = pw_aff_expr(rect.minimum.get_at(d), context)
            digit: IExpr = IBin("//", IVar(counter), IConst(stride)) if stride > 1 else IVar(
                counter)
            if d > 0:
                digit = IBin("%", digit, IConst(sizes[d]))
            env[names[d]] = IBin("+", lo, digit)
            stride *= sizes[d]
        return env

    # -------------------------------------------------------------- outputs

    def _finish(self) -> list[Stmt]:
        """What a PE does once all its inputs are there: the statements that need whole
        tensors, in dependence order, then the outputs. An internal tensor shared with
        other PEs splits this into steps: the exchange runs between them (a local task
        ``turn_T`` per exchange, ``step_k`` for what follows it)."""
        exchanged: dict[str, list[Exchange]] = {}
        for ex in self.tg.exchanges:
            exchanged.setdefault(ex.tensor, []).append(ex)
        combined: dict[str, list[ResidentReduction]] = {}
        for red in self.tg.combines:
            combined.setdefault(red.tensor, []).append(red)
        steps: list[list[Stmt]] = [[]]
        order: list[Exchange] = []

        def complete(tensor: str) -> None:
            """Before the first use of ``tensor``: its partial results combined, then its
            exchanges, each ending a step."""
            for red in combined.pop(tensor, []):
                steps[-1].extend(self._combine(red))
            for ex in exchanged.pop(tensor, []):
                order.append(ex)
                steps.append([])

        for t in self.tg.tasks:
            if t.kind != "compute" or t.trigger is not None or t.statement is None:
                continue
            stmt = self.tg.model.statement(t.statement).stmt
            for read in stmt.reads:
                complete(read.tensor)
            steps[-1].extend(self._compute(t.name))
        for out in self.tg.outputs:  # completed and gathered next to the side first
            complete(out.tensor)
            steps[-1].extend(self._output(out))
        for red in self.tg.reductions:
            steps[-1].extend(self._combine(red))
        for tensor in list(exchanged):  # resident outputs summed where they are kept
            complete(tensor)
        if not order:
            return steps[0]
        self.ints.append(IntVar("phase"))
        for k, ex in enumerate(order, start=1):
            steps[k - 1].extend([SetInt("phase", "=", IConst(k)),
                                 Activate(f"turn_{_exchange_name(ex)}")])
        for k, ex in enumerate(order, start=1):
            self._exchange(ex, k, steps[k])
        return steps[0]

    def _exchange(self, ex: Exchange, k: int, after: list[Stmt]) -> None:
        """Routes and tasks sharing ``ex`` along lines: each PE sends its elements when the
        PEs before it in its line have sent theirs (one at a time, so no PE waits on a
        neighbour that waits on it); ``after`` runs once all of them have arrived."""
        local = self.memory.of(ex.tensor)
        if local is None:
            raise CompilerBug(f"internal tensor '{ex.tensor}' has no local array")
        t = _exchange_name(ex)
        got, sent = f"got_{t}", f"sent_{t}"
        self.ints.extend([IntVar(got), IntVar(sent)])
        c = ex.color
        context = self.region.context()
        if ex.axis == "region":
            self.routes += broadcast_routes(c, self.region.width, self.region.height, context)
        else:
            row = ex.axis == "row"
            pos = IVar("PE_X" if row else "PE_Y")
            length = self.region.width if row else self.region.height
            back, fwd = ("W", "E") if row else ("N", "S")
            first = Cmp("==", pos, IConst(0))
            last = Cmp("==", pos, IConst(length - 1))
            inner = BoolOp("&&", Cmp(">", pos, IConst(0)), Cmp("<", pos, IConst(length - 1)))
            self.routes += [
                Route(c, "RAMP", (fwd,), first), Route(c, "RAMP", (back,), last),
                Route(c, "RAMP", (back, fwd), inner),
                Route(c, back, ("RAMP", fwd), Not(last)), Route(c, back, ("RAMP",), last),
                Route(c, fwd, ("RAMP", back), Not(first)), Route(c, fwd, ("RAMP",), first),
            ]
        turns = turn_order(ex, self.region)
        block = None
        if self._simd_out("exchange", ex.tensor):
            block = block_exchange(ex, local, self.region, name=t, got=got, turns=turns)
            if block is None and not turns.every:  # blocks kept in part: every PE's turn
                block = block_exchange(ex, local, self.region, name=t, got=got,
                                       turns=every_pe(self.region, ex.axis))
                turns = every_pe(self.region, ex.axis) if block is not None else turns
        if block is not None:
            self.configs.extend(block.configs)
            self.extra_arrays.append(block.land)
            self._turns(ex, k, after, turns,
                        (*block.send, SendEnd(c), SetInt(sent, "=", IConst(1))),
                        Task(f"share_{t}", "data", block.receive, c, False, block.size,
                             block.land.name))
            return
        shape = self.tg.model.graph.tensor(ex.tensor).shape
        strides = row_major(shape)
        offset = local.offset_aff()
        offsets = [aff_expr(offset.get_at(d), context) for d in range(len(shape))]
        # Receive: element (index // stride) % size, kept where it falls in the array.
        element = [_simplify(IBin("%", IBin("//", IVar("index"), IConst(st)), IConst(n))
                             if d else IBin("//", IVar("index"), IConst(st)))
                   for d, (st, n) in enumerate(zip(strides, shape, strict=True))]
        where = [_simplify(IBin("-", e, o)) for e, o in zip(element, offsets, strict=True)]
        if ex.reduce:  # add partial results into the totals this PE keeps
            names = [f"e{d}" for d in range(len(shape))]
            keeps = poly.bind_leading(poly.bind_pe(ex.needed), names).params()
            op: Literal["+=", "max="] = "max=" if self._reduction_op(
                ex.tensor) == "fmax" else "+="
            add = (Store(Load(local.name, tuple(where)), op, FValue()),)
            keep = substitute_stmts(_guarded(condition_of(keeps, context), add),
                                    dict(zip(names, element, strict=True)))
        else:
            inside: Cond | None = None
            for w, n in zip(where, local.size, strict=True):
                bound = BoolOp("&&", Cmp(">=", w, IConst(0)), Cmp("<", w, IConst(n)))
                inside = _and(inside, bound)
            keep = _guarded(inside, [Store(Load(local.name, tuple(where)), "=", FValue())])

        # Send: the elements this PE computed, with their flat index.
        produced = poly.bind_pe(ex.produced).set_tuple_name(ex.tensor)

        def send(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            flat: IExpr = IConst(0)
            for coord, st in zip(coords, strides, strict=True):
                flat = IBin("+", flat, IBin("*", IConst(st), coord))
            index = tuple(_simplify(IBin("-", coord, o))
                          for coord, o in zip(coords, offsets, strict=True))
            return [Send(c, Load(local.name, index), _simplify(flat))]

        sending = (*scan(produced, context, send), SendEnd(c), SetInt(sent, "=", IConst(1)))
        self._turns(ex, k, after, turns, sending, Task(f"share_{t}", "data", keep, c, True))

    def _turns(self, ex: Exchange, k: int, after: Sequence[Stmt], turns: TurnOrder,
               sending: Sequence[Stmt], share: Task) -> None:
        """The tasks taking turns: a sender sends once all senders before it in its line
        have (it has received that many end marks); ``after`` runs once a PE has every
        other sender's end mark (and sent its own)."""
        t = _exchange_name(ex)
        got, sent, c = f"got_{t}", f"sent_{t}", ex.color
        phase_k = Cmp("==", IVar("phase"), IConst(k))
        mine = BoolOp("&&", Cmp("==", IVar(sent), IConst(0)), Cmp("==", IVar(got),
                                                                    _simplify(turns.rank)))
        holder = turns.holder
        turn = (If(phase_k, (
            If(mine if holder is None else BoolOp("&&", holder, mine), tuple(sending)),
            If(Cmp("==", _simplify(IBin("+", IVar(got), IVar(sent))), _simplify(turns.count)),
               (SetInt("phase", "=", IConst(-k)), Activate(f"step_{t}"))),
        )),)
        self.extra_tasks += [
            share,
            Task(f"end_{t}", "control", (SetInt(got, "+=", IConst(1)), Activate(f"turn_{t}")),
                 c),
            Task(f"turn_{t}", "local", turn),
            Task(f"step_{t}", "local", tuple(after)),
        ]

    def _combine(self, red: ResidentReduction) -> list[Stmt]:
        """Pass partial results along each segment; the last PE adds them into its array."""
        local = self.memory.of(red.tensor)
        if local is None:
            raise CompilerBug(f"'{red.tensor}' has partial results but no local array")
        context = self.region.context()
        held = poly.bind_pe(red.elements)
        held, to_local = poly.align_params(held, isl.Map.from_multi_aff(local.to_local_bound))
        positions = held.apply(to_local)
        rect = poly.rectangularity(positions, index=())
        # One SIMD configuration needs the same box on every PE; uneven tiles (a smaller
        # last tile) and other shapes combine in scalar loops over the held elements.
        uniform = rect.rectangular and rect.constant_size is not None
        sizes = rect.constant_size if rect.constant_size is not None else ()
        strides = row_major(local.size)
        flat = flat_aff(positions.get_space(), strides)
        base: IExpr = IConst(0)
        if uniform:
            base = pw_aff_expr(isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
                rect.minimum.align_params(flat.get_space())), context)
        pos = red.position
        zero = pos.zero_set()
        even = pos.mod_val(isl.Val.int_from_si(CTX, 2)).zero_set()
        holders = pos.domain()  # only the PEs holding partial results take part
        holders, even = poly.align_params(holders, even)
        even = even.intersect(holders)
        odd = holders.subtract(even)
        zero = zero.intersect(holders.align_params(zero.get_space()))
        last = red.last
        first_c, second_c = red.colors
        port_out, port_in = red.side, OPPOSITE[red.side]

        def cond(*parts: isl.Set, minus: tuple[isl.Set, ...] = ()) -> tuple[bool, Cond | None]:
            result = self.region.context()
            for part in parts:
                result, part = poly.align_params(result, part)
                result = result.intersect(part)
            for part in minus:
                result, part = poly.align_params(result, part)
                result = result.subtract(part)
            return (not result.is_empty(), condition_of(result, context))

        sends_even = cond(even, minus=(last,))
        sends_odd = cond(odd, minus=(last,))
        gets_even = cond(even, minus=(zero,))
        gets_odd = cond(odd)
        if sends_even[0]:
            self.routes.append(Route(first_c, "RAMP", (port_out,), sends_even[1]))
        if sends_odd[0]:
            self.routes.append(Route(second_c, "RAMP", (port_out,), sends_odd[1]))
        if gets_odd[0]:
            self.routes.append(Route(first_c, port_in, ("RAMP",), gets_odd[1]))
        if gets_even[0]:
            self.routes.append(Route(second_c, port_in, ("RAMP",), gets_even[1]))
        op = self._reduction_op(red.tensor)
        roles = [  # (exists, condition, destination color or None, source color or None)
            (*cond(zero, minus=(last,)), first_c, None),
            (*cond(even, minus=(last, zero)), first_c, second_c),
            (*cond(odd, minus=(last,)), second_c, first_c),
            (*cond(even, last, minus=(zero,)), None, second_c),
            (*cond(odd, last), None, first_c),
        ]
        cases: list[tuple[Cond | None, Sequence[Stmt]]] = []
        for exists, when, send_color, recv_color in roles:
            if not exists:
                continue
            if self._simd_out("combine", red.tensor) and uniform and len(sizes) <= 4 and \
                    elementwise_simd_pays(sizes, local.dtype, ops=3):
                name = f"combine_{red.tensor}_{len(self.configs)}"
                array = SimdOperand("array", local.name, strides)
                srcs: tuple[SimdOperand, ...] = (array,)
                if recv_color is not None:
                    srcs = (array, SimdOperand("in", color=recv_color))
                dst = SimdOperand("out", color=send_color) if send_color is not None else array
                kind = "copy" if recv_color is None else op
                self.configs.append(SimdConfig(name, kind, (sizes,), dst, srcs))  # type: ignore[arg-type]
                cases.append((when, [Run(name, ((local.name, base),))]))
                continue

            def body(_: str, coords: Sequence[IExpr], send_color: int | None = send_color,
                     recv_color: int | None = recv_color) -> list[Stmt]:
                element = Load(local.name, tuple(_simplify(c) for c in coords))
                if recv_color is None:
                    assert send_color is not None
                    return [Send(send_color, element)]
                combined = FBin("max" if op == "fmax" else "+", element, Recv(recv_color))
                if send_color is None:
                    return [Store(element, "=", combined)]
                return [Send(send_color, combined)]

            cases.append((when, scan(positions.set_tuple_name("held"), context, body)))
        return list(_cases(cases, exhaustive=False))

    def _output(self, out: OutputFlow) -> list[Stmt]:
        local = self.memory.of(out.tensor)
        if local is None:
            raise CompilerBug(f"output '{out.tensor}' has no local array")
        context = self.region.context()
        order = out.relation.range_factor_range()
        elements = poly.bind_pe(out.sent_by())  # elements sent by this PE, over PE_X, PE_Y
        k_to_t = order.reverse().intersect_range(elements)
        to_local = isl.Map.from_multi_aff(local.array.to_local_bound)
        k_to_t, to_local = poly.align_params(k_to_t, to_local)
        k_to_local = k_to_t.apply_range(to_local)
        indices = k_to_local.domain()
        bounds = isl.Set.universe(k_to_local.get_space().range())
        for d, size in enumerate(local.size):
            bounds = bounds.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(CTX, 0))
            bounds = bounds.upper_bound_val(isl.dim_type.set, d,
                                            isl.Val.int_from_si(CTX, size - 1))
        if not k_to_local.range().is_subset(bounds):
            raise unsupported(out.tensor,
                f"output '{out.tensor}': the PEs of its lines that compute no part of an "
                "element would send it from outside their local array; place the instances "
                "so that every PE of a line the output leaves along computes the same "
                "elements, or only the PE next to the side")
        rect = poly.rectangularity(indices, index=())
        pma = k_to_local.as_pw_multi_aff()
        n = int(indices.dim(isl.dim_type.set))
        # One SIMD configuration needs the same box of elements on every PE, read at
        # base + sum(stride * k): one affine piece (a grown array can make the position
        # floor(k / 6) * 66 + k mod 6; uneven tiles have smaller last boxes). Otherwise
        # scalar loops send the elements.
        linear = pma.n_piece() == 1 and rect.rectangular and rect.constant_size is not None
        sizes = rect.constant_size if rect.constant_size is not None else (1,) * n
        strides: tuple[int, ...] = (0,) * n
        base: IExpr = IConst(0)
        if linear:
            pieces: list[isl.MultiAff] = []
            pma.foreach_piece(lambda _s, ma: pieces.append(ma))
            flat = flatten(pieces[0], local.size)
            strides = tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                            for k in range(n))
            linear = not any(flat.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
                             for d in range(flat.dim(isl.dim_type.div)))
        if linear:
            base = pw_aff_expr(isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
                rect.minimum.align_params(flat.get_space())), context)
        pos = _position(out.side, self.region)
        length = chain_length(out.side, self.region)
        send_port, recv_port = out.side, OPPOSITE[out.side]
        first, second = out.chain_colors
        reduction = self._reduction_op(out.tensor)
        senders = condition_of(_pe_condition_set(out.senders), context)
        # (when, send color, recv color, sends (value, index) pairs)
        roles: list[tuple[Cond | None, int, int | None, bool]] = []
        sparse = out.kind == "sparse"
        if not out.chain:
            self.routes.append(Route(first, "RAMP", (send_port,), senders))
            roles.append((senders, first, None, sparse))
        else:
            even = Cmp("==", IBin("%", pos, IConst(2)), IConst(0))
            odd = Cmp("==", IBin("%", pos, IConst(2)), IConst(1))
            self.routes.append(Route(first, "RAMP", (send_port,), _and(senders, even)))
            self.routes.append(Route(second, "RAMP", (send_port,), _and(senders, odd)))
            if length > 1:
                self.routes.append(Route(first, recv_port, ("RAMP",), _and(senders, odd)))
            if length > 2:
                self.routes.append(Route(second, recv_port, ("RAMP",), _and(
                    senders, BoolOp("&&", even, Cmp(">", pos, IConst(0))))))
            # An if / else-if chain: the second case is reached only when pos > 0.
            if sparse:  # the last PE sends (value, index) pairs out of the rectangle
                colors = (first, second)
                roles.append((Cmp("==", pos, IConst(length - 1)), colors[(length - 1) % 2],
                              colors[(length - 2) % 2] if length > 1 else None, True))
            roles.append((Cmp("==", pos, IConst(0)), first, None, False))
            if length > 2:
                roles.append((even, first, second, False))
            roles.append((odd, second, first, False))
        cases: list[tuple[Cond | None, Sequence[Stmt]]] = []
        for when, send_color, recv_color, pairs in roles:
            if pairs:
                closing = (SendEnd(send_color),) if n == 1 else ()  # (else per group)
                cases.append((when, (*self._scalar_send(
                    k_to_local, context, local, send_color, recv_color, reduction,
                    with_index=True), *closing)))
            elif self._simd_out("out", out.tensor) and n <= 4 and linear and \
                    elementwise_simd_pays(sizes, local.dtype, ops=3):
                op = "copy" if recv_color is None else reduction
                name = f"out_{out.tensor}_{len(cases)}"
                srcs: tuple[SimdOperand, ...] = (SimdOperand("array", local.name, strides),)
                if recv_color is not None:
                    srcs = (*srcs, SimdOperand("in", color=recv_color))
                self.configs.append(SimdConfig(name, op, (sizes,),  # type: ignore[arg-type]
                                               SimdOperand("out", color=send_color), srcs))
                cases.append((when, [Run(name, ((local.name, base),))]))
            else:
                cases.append((when, self._scalar_send(
                    k_to_local, context, local, send_color, recv_color, reduction)))
        if out.chain:  # only the lines the output leaves along take part
            return list(_guarded(senders, _cases(cases, exhaustive=True)))
        return list(_cases(cases, exhaustive=False))

    def _reduction_op(self, tensor: str) -> str:
        definer = self.tg.model.graph.definer(tensor)
        return "fmax" if definer is not None and definer.op == "max=" else "fadd"

    def _scalar_send(self, k_to_local: isl.Map, context: isl.Set, local: LocalTensor,
                     send_color: int, recv_color: int | None, reduction: str, *,
                     with_index: bool = False) -> tuple[Stmt, ...]:
        """Loops sending, in the stream's index order ``k``, the element at local position
        ``k_to_local(k)`` (the loops visit the pairs (k, position), so the position may
        be any quasi-affine, piecewise function of ``k``)."""
        indices = k_to_local.domain()
        n = int(indices.dim(isl.dim_type.set))
        names = [f"k{d}" for d in range(n)]
        # A multi-dimensional sparse index: the wavelet carries the innermost index and an
        # end mark closes each group of outer index values, after its last element.
        group_end: IExpr | None = None
        if with_index and n > 1:
            inner = poly.bind_leading(indices, names[:-1])
            group_end = pw_aff_expr(inner.dim_max(0), inner.params())

        def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            k, position = coords[:n], coords[n:]
            element: FExpr = Load(local.name, tuple(_simplify(c) for c in position))
            if recv_color is not None:
                element = FBin("max" if reduction == "fmax" else "+", element, Recv(recv_color))
            sends: list[Stmt] = [Send(send_color, element, k[-1] if with_index else None)]
            if group_end is not None:
                last = _simplify(substitute(group_end, dict(zip(names, k, strict=True))))
                sends.append(If(Cmp("==", k[-1], last), (SendEnd(send_color),)))
            return sends

        pairs = k_to_local.wrap().flatten().set_tuple_name("out")
        return scan(pairs, context, body)


def _exchange_name(ex: Exchange) -> str:
    """Names the tasks and counters of an exchange (a tensor may have two: its partial
    results summed, then its totals shared)."""
    return f"{ex.tensor}_sum" if ex.reduce else ex.tensor


def _simd_operand(o: Operand) -> SimdOperand:
    if o.kind == "scalar":
        return SimdOperand("scalar")
    return SimdOperand("array", o.array, o.strides)


def _simplify(e: IExpr) -> IExpr:
    """Fold constants and collect affine terms: generated code should read well."""
    return normalize(_fold(e))


def _fold(e: IExpr) -> IExpr:
    match e:
        case IBin(op, lhs, rhs):
            a, b = _fold(lhs), _fold(rhs)
            if isinstance(a, IConst) and isinstance(b, IConst) and op in ("+", "-", "*"):
                return IConst({"+": a.value + b.value, "-": a.value - b.value,
                               "*": a.value * b.value}[op])
            if op == "+" and isinstance(a, IConst) and a.value == 0:
                return b
            if op in ("+", "-") and isinstance(b, IConst) and b.value == 0:
                return a
            if op == "*" and isinstance(a, IConst) and a.value == 1:
                return b
            if op in ("*", "//") and isinstance(b, IConst) and b.value == 1:
                return a
            if op == "%" and isinstance(b, IConst) and b.value == 1:
                return IConst(0)
            return IBin(op, a, b)
    return e
