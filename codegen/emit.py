"""Assemble the PE module: one program for the compute PEs, one per adapter line.

Everything is generated from isl objects parametric in ``PE_X``/``PE_Y`` (and the index
constants): guards, index arithmetic and loops come from isl's AST generator, SIMD
operands from the decisions of :mod:`codegen.simd`. The code never enumerates PEs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from math import prod

import islpy as isl

from dtg.codegen.adapters import OPPOSITE, adapter_programs
from dtg.codegen.batching import (
    COUNT,
    ArrivalPlan,
    Batch,
    batch_window,
    in_first_window,
    lands_in_place,
)
from dtg.codegen.cleanup import (
    drop_unread_ints,
    drop_unrun_configs,
    merge_adjacent_ifs,
    settle_pe_branches,
)
from dtg.codegen.configure import guard_configurations, share_configurations
from dtg.codegen.cost import elementwise_simd_pays
from dtg.codegen.gathering import Gathering
from dtg.codegen.hoist import hoist_invariants
from dtg.codegen.islast import (
    aff_expr,
    condition_of,
    normalize,
    pw_aff_expr,
    scan,
    substitute,
    substitute_stmts,
)
from dtg.codegen.keeping import keep_element
from dtg.codegen.licm import hoist_loop_invariants
from dtg.codegen.routes import tree_routes
from dtg.codegen.scalarcode import scalar_code, value_expr
from dtg.codegen.sharing import Sharing, exchange_name
from dtg.codegen.simd import TEMP, Operand, SimdDecision, row_major
from dtg.codegen.splitting import split_outer_loop
from dtg.codegen.stmtutil import guarded, pe_condition_set
from dtg.errors import CompilerBug
from dtg.lair.graph import Const, Value
from dtg.lair.lower import PolyStatement
from dtg.mapping import poly
from dtg.mapping.flows import (
    Exchange,
    InputFlow,
    OutputFlow,
    ResidentReduction,
    TaskGraph,
    unsupported,
)
from dtg.mapping.memory import LocalTensor, Memory
from dtg.mapping.mesh import ENTRY_PORT, FLOW_PORT, inward, translate
from dtg.pe.ir import (
    SLOT,
    Activate,
    Array,
    BConst,
    Cmp,
    FConst,
    For,
    FValue,
    IBin,
    IConst,
    IExpr,
    If,
    IntVar,
    ISel,
    IVar,
    Load,
    PeModule,
    PeProgram,
    Route,
    Run,
    SetInt,
    SimdConfig,
    SimdOperand,
    Stmt,
    Store,
    StreamIO,
    Task,
    move_array,
    rename_array,
    rename_config,
)

NEUTRAL = {"+=": 0.0, "max=": float("-inf")}
Step = tuple[str, Operand, tuple[Operand, ...], Value | None]
# Whether the work that follows a PE's last end mark runs in the task that counts it (a
# stream's only batch, the last of several streams) rather than a task of its own: one
# dispatch fewer. Off, every data task does its stream's work alone, which is what the
# cost model predicts per stream (tests measure the predictions so).
FUSE_END_WORK = True


def emit(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision], *, name: str,
         reference: str | None, params: Sequence[tuple[str, int | str]] = (),
         simd: bool = True, simd_fill: bool = True,
         scalar_outputs: frozenset[str] | None = None,
         arrivals: ArrivalPlan | None = None, share: bool = False,
         choices: dict[str, tuple[int, float]] | None = None) -> PeModule:
    """The PE module for a planned task graph; ``simd=False`` gives scalar code only,
    ``simd_fill`` uses SIMD for initialization, and output, combining and exchange tasks
    use it except those named in ``scalar_outputs`` (``"out:y"``, ``"combine:y"``,
    ``"exchange:y"``);
    ``arrivals`` names the dense streams whose wavelets are taken in batches; with
    ``share``, instructions that differ only in their arrays share one configuration
    (:func:`share_configurations`); ``choices`` receives what giving up each halo for
    the block turns would free and cost (``"halo:T"``: configurations, cycles)."""
    shared = share_configurations if share else _unchanged
    streams = [StreamIO("input", f.tensor, f.kind, f.external_color, str(f.stream_relation))
               for f in tg.inputs if f.stream_relation is not None]
    streams += [StreamIO("output", s.tensor, s.kind, o.color, str(s.relation))
                for o in tg.outputs for s in [tg.mapping.stream(o.tensor)] if s is not None]
    programs = adapter_programs(tg, batched=simd and (arrivals is None or arrivals.batched))
    # (guards first: they read the variant expressions hoisting moves into variables)
    programs = [drop_unrun_configs(drop_unread_ints(merge_adjacent_ifs(_hoisted(
        settle_pe_branches(guard_configurations(shared(p))))))) for p in programs]
    builder = _ComputeBuilder(tg, memory, decisions, simd, simd and simd_fill,
                              frozenset() if scalar_outputs is None else scalar_outputs,
                              arrivals or ArrivalPlan())
    compute = builder.build()
    if choices is not None:
        choices.update(builder.halo_choices)
    programs.append(drop_unrun_configs(drop_unread_ints(merge_adjacent_ifs(_hoisted(
        settle_pe_branches(guard_configurations(shared(compute),
                                                task_pes=builder.task_pes),
                           task_pes=builder.task_pes))))))
    return PeModule(name, tg.mapping.width, tg.mapping.height, reference, tuple(params),
                    tuple(streams), tuple(programs))


def _unchanged(program: PeProgram) -> PeProgram:
    return program


def _hoisted(program: PeProgram) -> PeProgram:
    """Invariant arithmetic out of data tasks (per group) and out of loops."""
    return hoist_loop_invariants(hoist_invariants(program))


# ------------------------------------------------------------------- compute PEs


@dataclass
class _ComputeBuilder(Sharing, Gathering):
    """Builds the compute PEs' program."""

    def build(self) -> PeProgram:
        tasks: list[Task] = []
        main: list[Stmt] = list(self._init())
        flows = self.tg.inputs
        early = self._early_outputs()
        finish = self._finish(skip={out.tensor for _, out in early})
        # With one stream that ends with the same number of marks on each PE it reaches,
        # the last mark is the moment the PE's work is done: finish in its control task
        # (when its group counter says so), with no counting (and in main on the PEs the
        # stream does not reach).
        direct = len(flows) == 1 and isinstance(flows[0].groups, int) and (
            flows[0].groups == 1 or flows[0].index_dims > 1)
        if direct:
            self._input_routes(flows[0])
            tasks.extend(self._flow_tasks(flows[0], finish, counted=False))
            context = self.region.context()
            reached = pe_condition_set(flows[0].lines)
            elsewhere = condition_of(context.subtract(reached.intersect(context)), context)
            if finish and not (isinstance(elsewhere, BConst) and not elsewhere.value):
                main.extend(guarded(elsewhere, finish))
        else:
            late: list[Stmt] = []
            idle = False  # (some PE no flow reaches: it finishes at once)
            if flows:
                pending, idle = self._pending(flows)
                if isinstance(pending, IConst):  # (the same on every PE: in the image)
                    self.ints.append(IntVar("pending", pending.value))
                else:
                    self.ints.append(IntVar("pending"))
                    main.append(SetInt("pending", "=", pending))
            # Without exchanges, nothing but the streams' own tasks can be queued once the
            # last mark is counted: finishing right there is what activating a task
            # would do, without its dispatch.
            inline = FUSE_END_WORK and not self.extra_tasks and not idle
            for flow in flows:
                self._input_routes(flow)
                ended = [s for f, out in early if f is flow for s in self._output(out)]
                if ended:
                    context = self.region.context()
                    reached = pe_condition_set(flow.lines)
                    elsewhere = condition_of(context.subtract(reached.intersect(context)),
                                             context)
                    if not (isinstance(elsewhere, BConst) and not elsewhere.value):
                        late.extend(guarded(elsewhere, ended))
                tasks.extend(self._flow_tasks(
                    flow, finish if inline else [Activate("finish")] if finish else [],
                    counted=True, ended=ended))
            if finish and not flows:
                main.extend(finish)
            elif finish and not inline:
                if idle:
                    main.append(If(Cmp("==", IVar("pending"), IConst(0)),
                                   (Activate("finish"),)))
                tasks.append(Task("finish", "local", tuple(finish)))
            main.extend(late)  # (last: it may wait for a neighbour's partial results)
        tasks.insert(0, Task("main", "main", tuple(main)))
        tasks.extend(self.extra_tasks)
        arrays = _merged(self._array(a) for a in self.memory.arrays) + tuple(
            Array(b.land.name, b.land.dtype, (prod(b.land.size) * b.ring,))
            for b in self.arrivals.batches
            if b.land.name not in self.landed_in_place) + tuple(
            self.extra_arrays)
        return PeProgram("compute", (self.region.x0, self.region.y0), str(self.region.pes()),
                         arrays, tuple(self.ints), tuple(self.routes), tuple(self.configs),
                         tuple(tasks))

    def _pending(self, flows: Sequence[InputFlow]) -> tuple[IExpr, bool]:
        """The end marks a PE waits for before its work is done: the sum over the flows
        that reach it of their groups, as one piecewise expression of the PE (isl's
        tests, not a guarded addition per flow); and whether it is 0 on some PE."""
        context = self.region.context()
        zero = isl.PwAff.val_on_domain(context, isl.Val.zero(context.get_ctx()))
        total = zero
        for flow in flows:
            lines = pe_condition_set(flow.lines)
            lines, there = poly.align_params(lines, context)
            lines = lines.intersect(there)
            if isinstance(flow.groups, int):
                groups = isl.PwAff.val_on_domain(
                    lines, isl.Val.int_from_si(context.get_ctx(), flow.groups))
            else:
                groups = flow.groups.align_params(lines.get_space()).intersect_domain(lines)
            rest = zero.align_params(lines.get_space()).intersect_domain(
                there.subtract(lines))
            groups, total = poly.align_params(groups.union_add(rest), total)
            total = total.add(groups)
        total = total.coalesce()
        idle = not total.eq_set(zero.align_params(total.get_space())).is_empty()
        return pw_aff_expr(total, context), idle

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
            chains = [red for red in self.tg.reductions if red.tensor == local.tensor]
            if chains and written is not None:
                # the totals only, where the last chain keeps them
                final = chains[-1]
                totals, keeps = poly.align_params(poly.bind_pe(final.elements), final.last)
                written = totals.intersect_params(keeps).coalesce()
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
            return list(guarded(guard, runs))
        names = decision.outer_names

        def visit(outer: isl.Set, runs: tuple[Run, ...]) -> list[Stmt]:
            def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
                return list(substitute_stmts(runs, dict(zip(names, coords, strict=True))))
            return list(scan(outer, context, body))

        pieces = split_outer_loop(decision, context)
        if pieces is None:
            return list(guarded(guard, visit(decision.outer, runs)))
        loops: list[Stmt] = []
        for piece in pieces:
            loops += visit(piece.outer, tuple(replace(
                run, bases=tuple((a, piece.bases[a]) for a, _ in run.bases),
                length=piece.length if run.length is not None else None) for run in runs))
        return list(guarded(guard, loops))

    def _runs(self, task_name: str, d: SimdDecision) -> tuple[Run, ...]:
        """One configuration and invocation per operation of the decision."""
        assert d.dst is not None and d.op is not None and d.sizes is not None
        steps = ((d.op, d.dst, d.srcs, d.scalar), *d.more)
        if any(o.array == TEMP for _, dst, srcs, _ in steps for o in (dst, *srcs)):
            steps = self._temporary(task_name, d, steps)
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
                scalar = value_expr(scalar_value, None, {}) if isinstance(
                    scalar_value, Const) else FValue()
            runs.append(Run(name, tuple(bases.items()), scalar, d.variant,
                            d.length if d.by_length else None))
        return tuple(runs)

    def _temporary(self, task_name: str, d: SimdDecision, steps: Sequence[Step]
                   ) -> tuple[Step, ...]:
        """``steps`` with their temporary (codegen.simd.TEMP) an array of the task's own,
        declared once: the instruction's largest box, in the statement's type."""
        name = f"temp_{task_name}"
        task = next(t for t in self.tg.tasks if t.name == task_name)
        assert task.statement is not None and d.sizes is not None
        target = self.tg.model.statement(task.statement).stmt.target.tensor
        sizes = d.variants or (d.sizes,)
        needed = prod(max(v[k] for v in sizes) for k in range(len(sizes[0])))
        # (one array a task: as large as the largest box any of its instructions takes)
        known = [a for a in self.extra_arrays if a.name == name]
        if not known or known[0].shape[0] < needed:
            self.extra_arrays[:] = [a for a in self.extra_arrays if a.name != name]
            self.extra_arrays.append(
                Array(name, self.tg.model.graph.tensor(target).dtype, (needed,)))

        def named(o: Operand) -> Operand:
            return replace(o, array=name) if o.array == TEMP else o

        return tuple((op, named(dst), tuple(named(o) for o in srcs), scalar)
                     for op, dst, srcs, scalar in steps)

    def _scalar(self, pstmt: PolyStatement, instances: isl.Set, trigger: str | None,
                context: isl.Set) -> tuple[Stmt, ...]:
        return scalar_code(pstmt, instances, trigger, context, self.memory,
                           self.region.context())

    # --------------------------------------------------------------- inputs

    def _input_routes(self, flow: InputFlow) -> None:
        if flow.parent is not None:
            self.routes.extend(tree_routes(flow.color, flow.parent, flow.lines,
                                           self.region.context()))
            return
        port_in, port_on = ENTRY_PORT[flow.side], FLOW_PORT[flow.side]
        context = self.region.context()
        # the last PE of each line: the stream ends there (a line ends at its farthest PE
        # that needs an element, mapping.inputs)
        dx, dy = inward(flow.side)
        goes_on = flow.lines.intersect(flow.lines.apply(translate(-dx, -dy)))
        last = pe_condition_set(flow.lines.subtract(goes_on))
        on = pe_condition_set(goes_on)
        if not goes_on.is_empty():
            self.routes.append(Route(flow.color, port_in, ("RAMP", port_on),
                                     condition_of(on, context)))
        self.routes.append(Route(flow.color, port_in, ("RAMP",), condition_of(last, context)))

    def _flow_tasks(self, flow: InputFlow, done: Sequence[Stmt], *, counted: bool,
                    ended: Sequence[Stmt] = ()) -> list[Task]:
        """The data task of a stream and the control task of its end marks; ``done`` runs
        when the PE has seen all the end marks it waits for, ``ended`` (a stream with one
        group per PE) when this stream's mark came."""
        body: list[Stmt] = []
        batch = self.arrivals.of(flow.name) if self.simd else None
        land = batch.land.name if batch is not None else None
        configs_before = len(self.configs)
        in_place = batch is not None and self._lands_in_place(batch, flow)
        if batch is not None and batch.keep is not None and not in_place:
            body.extend(self._batched_keep(batch, flow))
        elif flow.tensor in self.tg.buffered and batch is None:
            body.extend(self._keep(flow))
        work: list[Stmt] = []
        for t in self.tg.tasks:
            if t.kind == "compute" and t.flow == flow.name:
                work.extend(self._compute(t.name) if batch is None else self._batched(
                    batch, t.name))
        if work and batch is not None and batch.groups is not None and flow.kind == "sparse":
            # (whole groups with nothing sent: zeros, which contribute nothing, as a
            # window with nothing sent is not opened)
            work = [If(Cmp(">", IVar(COUNT), IConst(0)), tuple(work))]
        body.extend(work)
        if batch is not None and batch.ring > 1 and not in_place:
            # the batch's part of its landing ring
            body = list(move_array(tuple(body), batch.land.name,
                                   lambda at: normalize(IBin("+", at, IVar(SLOT)))))
        if in_place:  # the batch lands in the tensor's own array: read it there
            assert batch is not None and land is not None
            local = self.memory.of(flow.tensor)
            assert local is not None
            body = list(rename_array(tuple(body), land, local.name))
            self.configs[configs_before:] = [rename_config(c, land, local.name)
                                             for c in self.configs[configs_before:]]
            land = local.name
            self.landed_in_place.add(batch.land.name)
        if batch is not None and batch.groups is not None:
            return self._group_task(flow, batch, body, land, done, counted=counted)
        if FUSE_END_WORK and batch is not None and (counted or done or ended) and \
                self._whole_group(flow, batch):
            return self._whole_task(flow, batch, body, land, done, counted=counted,
                                    ended=ended)
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
        control: list[Stmt] = [*group_vars, *ended]
        if counted:
            control.extend(self._last_mark(flow, done))
        elif isinstance(flow.groups, int) and flow.groups > 1:  # after the last group
            control.extend(guarded(Cmp("==", IVar(f"g_{flow.name}"), IConst(flow.groups)),
                                   done))
        else:
            control.extend(done)
        reached = pe_condition_set(flow.lines)
        self.task_pes[f"on_{flow.name}"] = self.task_pes[f"end_{flow.name}"] = reached
        return [Task(f"on_{flow.name}", "data", tuple(data), flow.color, flow.kind == "sparse",
                     batch.size if batch else None, land, batch is not None and batch.once,
                     ring=batch.ring if batch is not None and not in_place else 1),
                Task(f"end_{flow.name}", "control", tuple(control), flow.color)]

    def _group_task(self, flow: InputFlow, batch: Batch, body: list[Stmt], land: str | None,
                    done: Sequence[Stmt], *, counted: bool) -> list[Task]:
        """The data task of a stream taken in batches of whole groups: it counts the
        groups itself (its end marks trigger no control task), the batch's leading outer
        index values from that count. What follows the last batch runs in the same task,
        as it would in the control task of the last end mark (in a local task of its own
        without :data:`FUSE_END_WORK`)."""
        assert batch.groups is not None
        env = self._outer_index(flow, self.region.context())
        if batch.first is not None:  # (the first slot's index, a function of the PE)
            known = poly.project_out_params(flow.arrival_context(), [
                n for n in poly.index_names(flow.index_dims) if n not in batch.fixed])
            env["index"] = substitute(pw_aff_expr(batch.first, known), env)
        data = list(substitute_stmts(tuple(body), env))
        data.append(SetInt(f"g_{flow.name}", "+=", IConst(batch.groups)))
        tasks: list[Task] = []
        if counted:
            data.append(SetInt("pending", "+=", IConst(-batch.groups)))
            if done:
                data.append(If(Cmp("==", IVar("pending"), IConst(0)), tuple(done)))
        elif done:
            last = Cmp("==", IVar(f"g_{flow.name}"), IConst(flow.groups)) if isinstance(
                flow.groups, int) and flow.groups > batch.groups else None
            if FUSE_END_WORK:  # (as a control task would run it: nothing else is queued)
                data.extend(guarded(last, done))
            else:
                name = f"after_{flow.name}"
                tasks.append(Task(name, "local", tuple(done)))
                data.extend(guarded(last, [Activate(name)]))
        self.task_pes[f"on_{flow.name}"] = pe_condition_set(flow.lines)
        return [Task(f"on_{flow.name}", "data", tuple(data), flow.color, flow.kind == "sparse",
                     batch.size, land, batch.once, batch.groups, batch.ring), *tasks]

    def _whole_group(self, flow: InputFlow, batch: Batch) -> bool:
        """Whether ``batch`` takes the only group of a one-dimensional stream whole on
        every PE it reaches (dense: each gets at least one wavelet, at most
        ``batch.size``; sparse: every index it carries lies in ``0 .. batch.size - 1``):
        then the end mark may trigger the batch (a batch of one whole group) and what
        its control task would do follows in the same task, one dispatch instead of two."""
        if flow.index_dims != 1 or not isinstance(flow.groups, int) or flow.groups != 1:
            return False
        window = batch_window(flow)
        if window is None or window[2] > batch.size:
            return False
        if flow.kind == "sparse" and not in_first_window(flow, window[0], window[1],
                                                         batch.size):
            return False
        reached = poly.bind_pe(flow.arrivals()).params()
        lines = pe_condition_set(flow.lines)
        lines, reached = poly.align_params(lines, reached)
        return bool(lines.is_subset(reached))

    def _whole_task(self, flow: InputFlow, batch: Batch, body: list[Stmt], land: str | None,
                    done: Sequence[Stmt], *, counted: bool, ended: Sequence[Stmt]
                    ) -> list[Task]:
        """The data task of a stream whose only group on a PE is one batch (see
        :meth:`_whole_group`): the batch, then what the group's end mark would trigger."""
        env: dict[str, IExpr]
        if flow.kind == "sparse":  # (the batch's window is the first: it starts at 0)
            env = {"index": IConst(0) if flow.wire_offset is None else
                   pw_aff_expr(flow.wire_offset[-1], self.region.context())}
        else:
            arrivals = poly.bind_pe(flow.arrivals())
            known = poly.project_out_params(flow.arrival_context(), poly.index_names(1))
            env = {"index": pw_aff_expr(arrivals.dim_min(0), known)}
        data = [*substitute_stmts(tuple(body), env), *ended]
        if counted:
            data.extend(self._last_mark(flow, done))
        else:
            data.extend(done)
        self.task_pes[f"on_{flow.name}"] = pe_condition_set(flow.lines)
        return [Task(f"on_{flow.name}", "data", tuple(data), flow.color,
                     flow.kind == "sparse", batch.size, land, flow.kind == "sparse", 1)]

    def _last_mark(self, flow: InputFlow, done: Sequence[Stmt]) -> list[Stmt]:
        """A stream's end mark counted among those its PE waits for, ``done`` after the
        last; on the PEs no other stream reaches, a stream of one group ends the wait by
        itself: ``done`` at once, without counting (a test of the PE alone is free)."""
        count: list[Stmt] = [SetInt("pending", "+=", IConst(-1))]
        if done:
            count.append(If(Cmp("==", IVar("pending"), IConst(0)), tuple(done)))
        if not done or not isinstance(flow.groups, int) or flow.groups != 1:
            return count
        lines = pe_condition_set(flow.lines)
        alone = lines
        for other in self.tg.inputs:
            if other is not flow:
                theirs, alone = poly.align_params(pe_condition_set(other.lines), alone)
                alone = alone.subtract(theirs)
        alone, lines = poly.align_params(alone, lines)
        if alone.is_empty():
            return count
        if alone.is_equal(lines):
            return list(done)
        return [If(condition_of(alone, lines) or BConst(True), tuple(done), tuple(count))]

    def _lands_in_place(self, batch: Batch, flow: InputFlow) -> bool:
        return lands_in_place(batch, self.memory.of(flow.tensor))

    def _batched_keep(self, batch: Batch, flow: InputFlow) -> list[Stmt]:
        """Copy the batch's kept elements from the landing array into place."""
        keep = batch.keep
        local = self.memory.of(flow.tensor)
        assert keep is not None and local is not None
        name = f"keep_{flow.name}"
        self.configs.append(SimdConfig(
            name, "copy", keep.variants or (keep.sizes,),
            SimdOperand("array", local.name, keep.dst_strides),
            (SimdOperand("array", batch.land.name, keep.src_strides),)))
        run = Run(name, ((local.name, keep.dst_base), (batch.land.name, keep.src_base)),
                  variant=keep.variant, length=keep.length)
        return list(guarded(condition_of(keep.elements.params(), batch.context), [run]))

    def _keep(self, flow: InputFlow) -> list[Stmt]:
        """Store the arriving element in the local array, where this PE needs it."""
        local = self.memory.of(flow.tensor)
        if local is None:
            raise CompilerBug(f"'{flow.tensor}' is kept in memory but has no local array")
        return keep_element(flow, local, self.region.context())

    def _outer_index(self, flow: InputFlow, context: isl.Set) -> dict[str, IExpr]:
        """Outer index values from the count of end marks (lexicographic group order)."""
        counter = f"g_{flow.name}"
        self.ints.append(IntVar(counter))
        arrivals = flow.arrivals()
        n = flow.index_dims
        outer = arrivals.project_out(isl.dim_type.out, n - 1, 1)
        per_pe = poly.bind_pe(outer)
        rect = poly.rectangularity(per_pe, index=())
        if not rect.dense:
            raise unsupported(flow.tensor,
                f"input '{flow.tensor}': the outer index values reaching a PE do not form a "
                "box, so they cannot be counted from end marks")
        # The k-th end mark ends the group of the k-th outer tuple in lexicographic order:
        # its digits need the sizes of every outer dimension but the outermost: where
        # sources send boxes of different sizes, one set of digits per piece of the PEs
        # on which they are constant (the PE code's '%' takes constants).
        names = poly.index_names(n)[:-1]
        lows = [pw_aff_expr(rect.minimum.get_at(d), context) for d in range(n - 1)]
        pieces = _size_pieces(rect, n - 1)
        if pieces is None:
            raise unsupported(flow.tensor,
                f"input '{flow.tensor}': the boxes of outer index values reaching the PEs "
                f"take more than {MAX_SIZE_PIECES} sizes, so their groups cannot be counted "
                "from end marks; tile the stream's outer dimensions evenly (or into at most "
                f"{MAX_SIZE_PIECES} sizes), or make '{flow.tensor}' resident")
        env: dict[str, IExpr] = {}
        for where, sizes in reversed(pieces):
            digits: dict[str, IExpr] = {}
            stride = 1
            for d in reversed(range(n - 1)):
                digit: IExpr = IBin("//", IVar(counter), IConst(stride)) if stride > 1 \
                    else IVar(counter)
                if d > 0:
                    digit = IBin("%", digit, IConst(sizes[d]))
                digits[names[d]] = IBin("+", lows[d], digit)
                stride *= sizes[d]
            cond = condition_of(where, context) if len(pieces) > 1 else None
            for name, digit in digits.items():
                env[name] = digit if cond is None or name not in env else normalize(
                    ISel(cond, digit, env[name]))
        return env

    # -------------------------------------------------------------- outputs

    def _early_outputs(self) -> list[tuple[InputFlow, OutputFlow]]:
        """Streamed outputs whose elements are final when one input stream has ended on
        a PE (every statement writing one runs per arrival of that stream, one group per
        PE, and nothing combines, exchanges or reads it): they leave then, while the
        other streams still arrive, instead of after all of them. A PE waiting in a chain
        for its neighbour's partial results waits on the neighbour towards the start of
        the chain, which sends them before anything else that waits; so that these waits
        cannot form a cycle, no two early outputs leave by opposite sides."""
        if len(self.tg.inputs) < 2:
            return []
        busy = {r.tensor for r in self.tg.reductions} | {r.tensor for r in self.tg.combines} \
            | {e.tensor for e in self.tg.exchanges}
        read = {r.tensor for t in self.tg.tasks if t.statement
                for r in self.tg.model.statement(t.statement).stmt.reads}
        early: list[tuple[InputFlow, OutputFlow]] = []
        for out in self.tg.outputs:
            if out.tensor in busy or out.tensor in read or any(
                    OPPOSITE[out.side] == o.side for _, o in early):
                continue
            writers = [t for t in self.tg.tasks if t.kind == "compute" and t.statement and
                       self.tg.model.statement(t.statement).stmt.target.tensor == out.tensor]
            flows = {t.flow for t in writers}
            if not writers or len(flows) != 1 or None in flows:
                continue
            (name,) = flows
            flow = next(f for f in self.tg.inputs if f.name == name)
            if isinstance(flow.groups, int) and flow.groups == 1:
                early.append((flow, out))
        return early

    def _finish(self, *, skip: frozenset[str] | set[str] = frozenset()) -> list[Stmt]:
        """What a PE does once all its inputs are there: the statements that need whole
        tensors, in dependence order, then the outputs (but ``skip``, sent earlier). An
        internal tensor shared with other PEs splits this into steps: the exchange runs
        between them (a local task ``turn_T`` per exchange, ``step_k`` for what follows
        it)."""
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
            if out.tensor in skip:
                continue
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
                                 Activate(f"turn_{exchange_name(ex)}")])
        for k, ex in enumerate(order, start=1):
            self._exchange(ex, k, steps[k])
        return steps[0]

def _size_pieces(rect: poly.Rectangularity, n: int
                 ) -> list[tuple[isl.Set, tuple[int, ...]]] | None:
    """The sizes of the first ``n`` dimensions of ``rect``'s box but the outermost (0 in
    its place), each the same on a piece of the PEs: the pieces (parameters) with their
    sizes; None where the sizes take more than :data:`MAX_SIZE_PIECES` values."""
    if n <= 1:
        return [(rect.context.params(), (0,) * n)]
    inner = rect.sizes.project_out(isl.dim_type.set, 0, 1).project_out(
        isl.dim_type.set, n - 1, int(rect.sizes.dim(isl.dim_type.set)) - n)
    try:  # (the limit bounds the sizes' bounding box, 6 to 18: more than the count)
        values = poly.points(inner.project_out_all_params(), limit=1 << 12)
    except poly.TooManyPointsError:
        return None
    if not 0 < len(values) <= MAX_SIZE_PIECES:
        return None
    pieces = []
    for value in values:
        at = inner
        for d, v in enumerate(value):
            at = at.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(at.get_ctx(), v))
        pieces.append((at.params(), (0, *value)))
    return pieces


MAX_SIZE_PIECES = 8  # sizes of the outer index values' box a stream's receivers may have


def _simd_operand(o: Operand) -> SimdOperand:
    if o.kind == "scalar":
        return SimdOperand("scalar")
    return SimdOperand("array", o.array, o.strides)


def _merged(arrays: Iterable[Array]) -> tuple[Array, ...]:
    """One declaration per array: a tensor computed in place in an input's array
    (codegen.inplace) shares it, the input loaded, the result stored."""
    merged: dict[str, Array] = {}
    for a in arrays:
        seen = merged.get(a.name)
        if seen is None:
            merged[a.name] = a
            continue
        if seen.shape != a.shape or seen.dtype != a.dtype:  # (inplace checks the layouts)
            raise CompilerBug(f"two tensors share array {a.name} with different shapes")
        merged[a.name] = replace(seen, load=seen.load or a.load,
                                 load_set=seen.load_set or a.load_set,
                                 store=seen.store or a.store,
                                 store_set=seen.store_set or a.store_set,
                                 init=seen.init if seen.init is not None else a.init)
    return tuple(merged.values())
