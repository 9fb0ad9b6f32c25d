"""The data-flow check: before the module is written, derive with isl what the planned
tasks will do on each PE and compare it with the program's meaning.

Everything is parametric in the PE coordinates (relations ``PE -> ...`` over the compute
region), so the check costs the same for 4 PEs as for 400,000. It re-derives the plan's
consequences from the task graph and the memory plan rather than trusting the planner:

- every instance of every statement runs exactly once, on the PE the placement gives,
  and a task triggered by an arriving element runs exactly the instances reading it;
- every element a statement reads is on its PE, in its local array, with its final
  value: an input (loaded, or kept as it streamed past), or an internal element after
  all its contributions (never a partial result of a reduction spread over PEs);
- every output element is written, and leaves (or stays resident) exactly once, from a
  PE that holds its total;
- the extra instances of a box-hull SIMD instruction write only array positions that
  hold no element anything else uses, and read only inside the arrays.

A difference is a bug of the compiler, not of the input: :class:`DataFlowError`, an
internal error naming the statement, tensor, element and PE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from math import prod

import islpy as isl

from dtg.codegen.batching import COUNT, ArrivalPlan, Batch
from dtg.codegen.groupcheck import group_batch_problem
from dtg.codegen.scancheck import ScanError, quasi_affine
from dtg.codegen.simd import (
    Operand,
    SimdDecision,
    flat_aff,
    outer_to_params,
    row_major,
    split_outer,
    zero_box,
)
from dtg.errors import CompilerBug
from dtg.lair.graph import vanishes_with
from dtg.lair.lower import CTX, PolyStatement, least_point, point_coordinates
from dtg.mapping import poly
from dtg.mapping.flows import (
    Exchange,
    InputFlow,
    OutputFlow,
    ResidentReduction,
    Task,
    TaskGraph,
    axis_line,
)
from dtg.mapping.memory import Memory
from dtg.mapping.mesh import same_line
from dtg.mapping.validate import PE
from dtg.pe.ir import IExpr, cut_dimension


class DataFlowError(CompilerBug):
    """The planned tasks would compute something other than the program."""


def check_data_flow(tg: TaskGraph, memory: Memory,
                    decisions: Mapping[str, SimdDecision] | None = None,
                    arrivals: ArrivalPlan | None = None) -> None:
    """Raise :class:`DataFlowError` at the first difference between what the plan does
    and what the program means; return quietly when there is none."""
    check = _Check(tg, memory)
    for flow in tg.inputs:
        if flow.kind == "dense":
            check.consecutive(flow)
    for task in tg.tasks:
        if task.kind == "compute" and task.statement is not None:
            check.instances(task)
            check.operands(task)
    check.once_each()
    for tensor in tg.model.graph.outputs:
        check.output(tensor.name)
    for name, decision in (decisions or {}).items():
        if decision.used:
            check.simd_operands(name, decision)
        if decision.used and decision.extra_instances is not None:
            check.extras(name, decision)
    for batch in (arrivals.batches if arrivals is not None else ()):
        check_batch(tg, memory, batch)


def check_batch(tg: TaskGraph, memory: Memory, batch: Batch) -> None:
    """A batched task runs, over all batches of a PE, exactly the instances its
    per-arrival task runs over all arrivals, and its SIMD instructions pass the checks
    of per-arrival ones with the landing array standing for the stream."""
    flow = tg.input_flow(batch.flow)
    assert flow is not None
    outer = poly.index_names(flow.index_dims)[:-1]
    if batch.groups is not None:
        problem = group_batch_problem(tg, flow, batch)
        if problem is not None:
            raise _Check(tg, memory).fail(problem)
    for task in (batch.tasks if batch.groups is None else ()):
        original = next(t for t in tg.tasks if t.name == task.name)
        assert original.instances is not None and task.instances is not None
        per_arrival = original.instances.intersect_params(flow.arrival_context().align_params(
            original.instances.get_space()))
        per_arrival = poly.project_out_params(per_arrival, [poly.INDEX])
        per_batch = task.instances.intersect_params(batch.context.align_params(
            task.instances.get_space()))
        per_batch = poly.project_out_params(per_batch, [poly.INDEX, COUNT])
        per_arrival, per_batch = poly.align_params(per_arrival, per_batch)
        if not per_arrival.is_equal(per_batch):
            differ = per_arrival.subtract(per_batch).union(per_batch.subtract(per_arrival))
            raise _Check(tg, memory).fail(
                f"{task.name}: its batches of {batch.size} run other instances than its "
                f"arrivals ({differ}, outer index values {', '.join(outer) or 'none'})")
    view_tasks = tuple(next((b for b in batch.tasks if b.name == t.name), t) for t in tg.tasks)
    check = _Check(replace(tg, tasks=view_tasks), Memory((batch.land, *memory.arrays)))
    for name, decision in batch.decisions:
        check.simd_operands(name, decision)
        if decision.extra_instances is not None:
            check.extras(name, decision)


class _Check:
    def __init__(self, tg: TaskGraph, memory: Memory):
        self.tg, self.memory = tg, memory
        self.order = [t.name for t in tg.tasks]
        # statement -> (task, S[i] -> PE it runs on) of the tasks that run it per arrival
        self.ran: dict[str, list[tuple[str, isl.Map]]] = {}

    # ------------------------------------------------------------- messages

    def fail(self, what: str, rel: isl.Map | None = None) -> DataFlowError:
        """The error, with a witness ``PE[x, y]`` and element of ``rel`` (PE -> element)."""
        where = ""
        if rel is not None and not rel.is_empty():
            n_pe = int(rel.dim(isl.dim_type.in_))
            n_el = int(rel.dim(isl.dim_type.out))
            point = point_coordinates(least_point(rel.wrap()), n_pe + n_el)
            pe, element = point[:n_pe], point[n_pe:]
            name = rel.get_tuple_name(isl.dim_type.out) if rel.has_tuple_name(
                isl.dim_type.out) else ""
            if n_pe == 2:
                c = self.tg.compute
                pe = (pe[0] + c.x0, pe[1] + c.y0)
            where = (f" (for example {name}[{', '.join(map(str, element))}] on "
                     f"{PE}[{', '.join(map(str, pe))}])")
        return DataFlowError(f"data-flow check: {what}{where}; the plan would compute "
                             "something other than the program, so no code is written")

    # ------------------------------------------------------------ instances

    def placed(self, pstmt: PolyStatement) -> isl.Map:
        """``S[i] -> PE[x, y]`` (relative) for every instance of the statement."""
        rel = self.tg.placement_of(pstmt.name)
        rel, domain = poly.align_params(rel, pstmt.domain)
        return rel.intersect_domain(domain)

    def instances(self, task: Task) -> None:
        assert task.statement is not None and task.instances is not None
        pstmt = self.tg.model.statement(task.statement)
        placed = self.placed(pstmt)
        if task.trigger is None:
            expected = poly.bind_placement(placed)
            got, expected = poly.align_params(task.instances, expected)
            if not got.is_equal(expected):
                raise self.fail(f"task {task.name} does not run exactly the instances of "
                                f"{pstmt.name} the placement puts on each PE",
                                _by_pe(got.subtract(expected).union(expected.subtract(got))))
            return
        flow = self.tg.flow_of(task)
        assert flow is not None
        stmt = pstmt.stmt
        if flow.kind == "sparse" and not (stmt.op in ("+=", "=")
                                          and vanishes_with(stmt.value, flow.tensor)):
            raise self.fail(f"{pstmt.name} runs per element of the sparse stream "
                            f"'{flow.tensor}', whose zeros are not sent, but a zero element "
                            "changes its result")
        k = flow.index_dims
        at = _at_space(k)
        runs = task.instances.unbind_params_insert_domain(
            poly.multi_id(at, (*poly.PE_NAMES, *poly.index_names(k))))  # at -> S
        arrivals = _arrivals(flow)  # at[PE, index] -> element
        runs = runs.intersect_domain(arrivals.domain())
        by_instance = runs.reverse()
        ran = by_instance.apply_range(_at_to_pe(k))
        if not ran.is_subset(placed):
            raise self.fail(f"task {task.name} runs instances of {pstmt.name} away from their "
                            f"PE as '{flow.tensor}' arrives", ran.subtract(placed).reverse())
        self.ran.setdefault(pstmt.name, []).append((task.name, ran))
        if not by_instance.is_single_valued():
            raise self.fail(f"task {task.name} runs an instance of {pstmt.name} more than once")
        reads = runs.apply_range(pstmt.read(flow.tensor))
        arriving, reads = poly.align_params(arrivals, reads)
        if not reads.is_subset(arriving):
            raise self.fail(f"task {task.name} runs an instance of {pstmt.name} on the arrival "
                            f"of another element of '{flow.tensor}' than the one it reads",
                            _pe_part(reads.subtract(arriving)))

    def consecutive(self, flow: InputFlow) -> None:
        """Receivers of a dense stream number its elements by counting from the least
        index: the indices reaching a PE must be consecutive."""
        gaps = poly.index_gaps(flow.arrivals())
        if not gaps.is_empty():
            raise self.fail(f"the dense stream '{flow.tensor}' reaches a PE with indices that "
                            "are not consecutive, so counting its wavelets gives wrong "
                            "indices", _split_pe(gaps))

    # ------------------------------------------------------------- operands

    def operands(self, task: Task) -> None:
        assert task.statement is not None
        pstmt = self.tg.model.statement(task.statement)
        placed = self.placed(pstmt)
        target = pstmt.stmt.target.tensor
        for tensor, access in [*pstmt.reads, (target, pstmt.write)]:
            if tensor == task.trigger:
                continue
            used = poly.elements_per_pe(placed, access)  # PE -> element
            self.in_array(tensor, used, f"{pstmt.name} accesses elements of '{tensor}'")
            if tensor == target:
                continue
            flows = self.tg.input_flows(tensor)
            role = self.tg.model.graph.tensor(tensor).role
            if flows:
                self.buffered(pstmt.name, tensor, flows, used)
            elif role == "internal":
                self.internal(pstmt.name, task, tensor, used)

    def once_each(self) -> None:
        """The tasks running a statement per arrival (one per flow of its stream) run
        every instance on its PE, and no instance in two of them."""
        for statement, runs in self.ran.items():
            placed = self.placed(self.tg.model.statement(statement))
            ran = runs[0][1]
            for k, (name, rel) in enumerate(runs[1:], 1):
                for other, seen in runs[:k]:
                    both = seen.intersect(rel)
                    if not both.is_empty():
                        raise self.fail(f"tasks {other} and {name} both run instances of "
                                        f"{statement}", both.reverse())
                ran = ran.union(rel)
            if not ran.is_equal(placed):
                who = (f"task {runs[0][0]} does" if len(runs) == 1 else
                       f"tasks {', '.join(n for n, _ in runs)} do")
                raise self.fail(f"{who} not run every instance of {statement} on its PE",
                                placed.subtract(ran).reverse())

    def buffered(self, statement: str, tensor: str, flows: Sequence[InputFlow],
                 used: isl.Map) -> None:
        if tensor not in self.tg.buffered:
            raise self.fail(f"{statement} reads the streamed '{tensor}' from memory, but "
                            "nothing keeps it there", used)
        reached = flows[0].reaching()
        for flow in flows[1:]:
            reached = reached.union(flow.reaching())
        reached = reached.reverse()
        used, reached = poly.align_params(used, reached)
        if not used.is_subset(reached):
            raise self.fail(f"{statement} reads elements of '{tensor}' that never reach "
                            "its PE", used.subtract(reached))

    def writers(self, tensor: str) -> tuple[isl.Map, PolyStatement]:
        """``element -> PE`` of every PE that writes (part of) each element, and the
        statement that defines the tensor."""
        producer = next(p for p in self.tg.model.statements
                        if p.stmt.target.tensor == tensor)
        return poly.elements_per_pe(self.placed(producer), producer.write).reverse(), producer

    def completed(self, tensor: str, writers: isl.Map) -> isl.Map:
        """``PE -> element``: where each element of ``tensor`` is complete, its partial
        results combined (by chains or a reducing exchange, checked here)."""
        several = _several_valued(writers)
        complete = writers.subtract_domain(several).reverse()
        if several.is_empty():
            return complete
        chains = [c for c in (*self.tg.reductions, *self.tg.combines) if c.tensor == tensor]
        reducing = [ex for ex in self.tg.exchanges if ex.tensor == tensor and ex.reduce]
        if chains:
            held = writers
            for chain in chains:
                held = self.chained(tensor, chain, held)
            totals, several = poly.align_params(held, several)
            totals = totals.intersect_domain(several)
            if not (totals.is_single_valued() and totals.domain().is_equal(several)):
                raise self.fail(f"the chains combining '{tensor}' do not leave each total on "
                                "exactly one PE", totals)
            kept = held.reverse()
        elif reducing:
            kept = self.reduced(tensor, reducing, writers, several)
        else:
            return complete
        kept, several = poly.align_params(kept, several)
        kept, complete = poly.align_params(kept.intersect_range(several), complete)
        return complete.union(kept)

    def chained(self, tensor: str, chain: ResidentReduction, writers: isl.Map) -> isl.Map:
        """A combining chain sums the partial results ``writers`` (element -> PEs): each
        PE but a segment's last passes the elements of its block to the next PE along
        the side, which holds them too (its partial result or the neutral value), and
        counts one further in the segment (it receives on the other color); every writer
        of an element with several holds it in its block. Returns ``element -> PE`` of
        where the chain leaves each element of its blocks (the last PEs holding it)."""
        block = chain.elements
        self.in_array(tensor, block, f"a PE of the chain combining '{tensor}' passes on "
                                     "elements")
        holders, last = poly.align_params(block.domain(), poly.pe_set(chain.last))
        inner = holders.subtract(last)
        along = 1 if chain.side in ("S", "N") else 0
        step = (_unit_step(along, -1 if chain.side in ("N", "W") else 1) if chain.step is None
                else chain.step)
        step, inner = poly.align_params(step, inner)
        step = step.intersect_domain(inner)
        if not step.is_single_valued():
            raise self.fail(f"a PE of the chain combining '{tensor}' passes its partial "
                            "results to several PEs", step)
        step, block = poly.align_params(step, block)
        if not step.range().is_subset(holders):
            raise self.fail(f"a PE of the chain combining '{tensor}' passes its partial "
                            "results to a PE outside the chain", step.subtract_range(holders))
        passed = block.intersect_domain(inner)
        if not passed.is_subset(step.apply_range(block)):
            raise self.fail(f"a PE of the chain combining '{tensor}' passes on elements the "
                            "next PE does not hold", passed.subtract(step.apply_range(block)))
        pos = isl.Id("chain_position", context=CTX)
        at = poly.pe_set(chain.position.bind_id(pos)).intersect(inner)
        one = isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(
            chain.position.get_domain_space()))).add_constant_val(isl.Val.int_from_si(CTX, 1))
        after = poly.pe_set(chain.position.sub(one).bind_id(pos))
        moved, after = poly.align_params(at.apply(step), after)
        if not moved.is_subset(after):
            raise self.fail(f"the positions along the chain combining '{tensor}' do not "
                            "count up by one from PE to PE")
        first = poly.pe_set(chain.position.zero_set())
        first, holders = poly.align_params(first, holders)
        if not first.intersect(holders).is_equal(holders.subtract(step.range())):
            raise self.fail(f"the chain combining '{tensor}' does not start each segment "
                            "exactly where no PE passes results to it")
        several = _several_valued(writers)
        shared, block = poly.align_params(writers.intersect_domain(several), block)
        if not shared.is_subset(block.reverse()):
            raise self.fail(f"a writer of '{tensor}' does not pass its partial results "
                            "along the chain", shared.subtract(block.reverse()))
        return block.intersect_domain(last).reverse()

    def available(self, tensor: str, writers: isl.Map) -> isl.Map:
        """``PE -> element``: where each element is complete (:meth:`completed`) or
        brought complete by the tensor's sharing exchange (checked to send complete
        elements only)."""
        complete = self.completed(tensor, writers)
        share = next((ex for ex in self.tg.exchanges if ex.tensor == tensor and not ex.reduce),
                     None)
        if share is None:
            return complete
        sent, complete = poly.align_params(share.produced, complete)
        if not sent.is_subset(complete):
            raise self.fail(f"the exchange of '{tensor}' sends elements that are not "
                            "complete", sent.subtract(complete))
        delivered, sent = poly.align_params(share.needed, sent)
        delivered, complete = poly.align_params(delivered.intersect_range(sent.range()),
                                                complete)
        return complete.union(delivered)

    def reduced(self, tensor: str, exchanges: list[Exchange], writers: isl.Map,
                several: isl.Set) -> isl.Map:
        """Reducing exchanges, one after the other: in each, every sender sends its
        partial results to the one PE of its line (of the exchange's axis) keeping each
        of them, which holds a partial result too and adds them up; the senders hold
        none after it. Once all have run, each element is held by one PE. Returns
        ``PE -> element`` of those holders."""
        held = writers  # element -> the PEs holding a partial result of it
        for ex in exchanges:
            keeper, sender = ex.needed.reverse(), ex.produced.reverse()
            held, keeper = poly.align_params(held, keeper)
            held, sender = poly.align_params(held, sender)
            if not (keeper.is_subset(held) and sender.is_subset(held)
                    and keeper.intersect(sender).is_empty()):
                raise self.fail(f"the partial results of '{tensor}' are sent or summed by PEs "
                                "not holding them", keeper.union(sender).subtract(held))
            line = axis_line(ex.axis)
            line, sender = poly.align_params(line, sender)
            to_keeper = sender.domain_map().apply_range(keeper).intersect(
                sender.range_map().apply_range(line))  # [element -> sender] -> keepers
            if not (to_keeper.is_single_valued()
                    and to_keeper.domain().is_equal(sender.wrap())):
                raise self.fail(f"a partial result of '{tensor}' is not sent to exactly one "
                                "PE of its line keeping it", sender)
            held = held.subtract(sender)
        totals, several = poly.align_params(held, several)
        totals = totals.intersect_domain(several)
        if not (totals.is_single_valued() and totals.domain().is_equal(several)):
            raise self.fail(f"the partial results of '{tensor}' are not summed on exactly "
                            "one PE per element", totals)
        return totals.reverse()

    def internal(self, statement: str, task: Task, tensor: str, used: isl.Map) -> None:
        writers, producer = self.writers(tensor)
        writers, used = poly.align_params(writers, used)
        available = self.available(tensor, writers)
        used, available = poly.align_params(used, available)
        missing = used.intersect_range(writers.domain()).subtract(available)
        if not missing.is_empty():
            several = _several_valued(writers)
            local = writers.reverse()
            missing, local = poly.align_params(missing, local)
            partial = missing.intersect_range(several).intersect(local)
            if not partial.is_empty():
                raise self.fail(f"{statement} reads '{tensor}', whose elements have partial "
                                "results on several PEs, before they are combined", partial)
            raise self.fail(f"{statement} reads elements of '{tensor}' computed on another "
                            "PE, and nothing delivers them", missing)
        producing = next(t for t in self.tg.tasks
                         if t.kind == "compute" and t.statement == producer.name)
        if producing.trigger is None and self.order.index(producing.name) > self.order.index(
                task.name):
            raise self.fail(f"{statement} runs before {producer.name}, which defines the "
                            f"'{tensor}' it reads", used)
        if producer.stmt.op == "max=":
            unwritten = used.subtract_range(writers.domain())
            pes = writers.range()
            unwritten, pes = poly.align_params(unwritten, pes)
            far = unwritten.subtract_domain(pes)
            array = self.memory.of(tensor)
            if not far.is_empty() and array is not None and not array.resident_input:
                # (the tensor's local array starts at -inf in the program image of every
                # PE that holds it, readers too: elements it holds but no instance
                # defines are read as -inf there)
                held = array.array.per_pe
                far, held = poly.align_params(far, held)
                far = far.subtract(held)
            if not far.is_empty():
                raise self.fail(f"{statement} reads elements of '{tensor}' that no instance "
                                "defines (their value is -inf) on a PE that never fills it",
                                far)

    # --------------------------------------------------------------- outputs

    def output(self, tensor: str) -> None:
        writers, _ = self.writers(tensor)
        shape = self.tg.model.tensor_set(tensor)
        shape, written = poly.align_params(shape, writers.domain())
        if not shape.is_subset(written):
            missing = shape.subtract(written)
            raise self.fail(f"output '{tensor}' has elements no instance defines, which no PE "
                            f"would produce", isl.Map.from_range(missing))
        several = _several_valued(writers)
        flow = self.tg.output_flow(tensor)
        moved = any(ex.tensor == tensor for ex in self.tg.exchanges) or any(
            c.tensor == tensor for c in self.tg.combines)
        if flow is not None and moved and flow.chain:
            self.chained_totals(tensor, flow, writers)
            return
        if flow is not None and moved:
            self.gathered(tensor, flow, writers, several)
            return
        if flow is not None:
            line = flow.relation.range_factor_domain().apply_range(same_line(flow.side))
            writers, line = poly.align_params(writers, line)
            if not writers.is_subset(line):
                raise self.fail(f"output '{tensor}' is computed on PEs outside the line it "
                                "leaves along", writers.subtract(line).reverse())
            if flow.chain:
                full = line.intersect_range(flow.senders)
                if not writers.is_subset(full):
                    raise self.fail(f"output '{tensor}' leaves through a chain along its "
                                    "lines, but PEs outside the chain compute parts of it",
                                    writers.subtract(full).reverse())
                self.chain_reads(tensor, flow.sent_by().intersect_domain(flow.senders))
            elif not several.is_empty():
                raise self.fail(f"output '{tensor}' leaves from one PE per element, but it "
                                "has partial results on several PEs",
                                writers.intersect_domain(several).reverse())
            return
        if several.is_empty():
            return
        complete = self.completed(tensor, writers).reverse()
        complete, written = poly.align_params(complete, writers.domain())
        if not (complete.is_single_valued() and complete.domain().is_equal(written)):
            raise self.fail(f"resident output '{tensor}': its totals are not kept by exactly "
                            "one PE per element", complete.union(
                                writers.intersect_domain(several).subtract(complete)))

    def gathered(self, tensor: str, flow: OutputFlow, writers: isl.Map, several: isl.Set
                 ) -> None:
        """An output computed away from the line of its external PE: the PE next to the
        side sends each element once, holding it complete (computed there, kept there
        by a combination, or brought there by the exchange)."""
        held = self.available(tensor, writers)  # PE -> element
        sent = flow.sent_by().intersect_domain(flow.senders)
        held, sent = poly.align_params(held, sent)
        if not sent.is_subset(held):
            raise self.fail(f"output '{tensor}' is sent by a PE that does not hold it complete",
                            sent.subtract(held))
        shape = self.tg.model.tensor_set(tensor)
        once = sent.reverse()
        shape, once = poly.align_params(shape, once)
        if not (once.is_single_valued() and once.domain().is_equal(shape)):
            raise self.fail(f"output '{tensor}' does not leave exactly once per element",
                            once.reverse())
        self.in_array(tensor, sent, f"the PEs sending output '{tensor}' read elements")

    def chained_totals(self, tensor: str, flow: OutputFlow, writers: isl.Map) -> None:
        """An output whose totals, combined first, lie in its exit lines and leave by a
        chain along them: each element complete on exactly one PE of its line, which no
        other PE of the line writes (they pass it on, adding the neutral value)."""
        held = self.available(tensor, writers).reverse()  # element -> PE
        line = flow.relation.range_factor_domain().apply_range(
            same_line(flow.side)).intersect_range(flow.senders)
        shape = self.tg.model.tensor_set(tensor)
        held, line = poly.align_params(held, line)
        shape, held = poly.align_params(shape, held)
        if not (held.is_single_valued() and held.domain().is_equal(shape)) or \
                not held.is_subset(line):
            raise self.fail(f"output '{tensor}' leaves through a chain along its lines, but "
                            "its totals are not each on one PE of the element's line", held)
        writers, held = poly.align_params(writers, held)
        extra = writers.intersect(line).subtract(held)
        if not extra.is_empty():
            raise self.fail(f"output '{tensor}' leaves through a chain of its totals, but "
                            "other PEs of the line write parts of them", extra)
        self.chain_reads(tensor, flow.sent_by().intersect_domain(flow.senders))

    def chain_reads(self, tensor: str, sent: isl.Map) -> None:
        """Every PE of an output chain reads the elements of its line from its local
        array: its partial result, or the neutral value where it computes none."""
        self.in_array(tensor, sent, f"a PE of the chain of output '{tensor}' reads elements")

    def in_array(self, tensor: str, used: isl.Map, what: str) -> None:
        """The elements ``used`` (PE -> element) lie in each PE's local array of
        ``tensor``."""
        local = self.memory.of(tensor)
        if local is None:
            raise self.fail(f"{what} from memory, but it has no local array", used)
        box = poly.box_map(local.array.box)
        used, box = poly.align_params(used, box)
        if not used.is_subset(box):
            raise self.fail(f"{what} outside its local array {local.name}",
                            used.subtract(box))

    # ------------------------------------------------------------------ SIMD

    def simd_operands(self, task_name: str, d: SimdDecision) -> None:
        """Each array operand of a SIMD instruction addresses, for every proper instance
        of its box, the local element the instance accesses: ``base + sum(stride *
        (c - origin))`` in the compressed coordinates ``c`` equals the row-major position
        of the access (the strides and base printed into the PE code)."""
        task = next(t for t in self.tg.tasks if t.name == task_name)
        assert task.statement is not None and d.compression is not None
        assert d.compressed is not None and d.offset is not None
        pstmt = self.tg.model.statement(task.statement)
        inner = split_outer(d.compressed, d.outer_names)[0]
        self.simd_box(task_name, d, inner)
        steps = [(d.dst, d.srcs), *((dst, srcs) for _, dst, srcs, _ in d.more)]
        for dst, srcs in steps:
            for operand in (dst, *srcs):
                if operand is None or operand.kind != "array" or operand.tensor is None:
                    continue
                self.simd_operand(task_name, pstmt, d, inner, operand)

    def simd_box(self, task_name: str, d: SimdDecision, inner: isl.Set) -> None:
        """The box a SIMD instruction runs, ``origin + [0, size)``, holds every proper
        instance (with the largest size of an enumerated case); beyond them it runs only
        the extra instances of a box hull."""
        assert d.offset is not None and d.sizes is not None
        sizes = max(d.variants, key=prod) if d.variants else d.sizes
        space = inner.get_space()
        origin = isl.MultiPwAff.from_multi_aff(d.offset) if isinstance(
            d.offset, isl.MultiAff) else d.offset
        box = isl.Set.universe(space)
        ls = isl.LocalSpace.from_space(space)
        for k, size in enumerate(sizes):
            coord = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, k))
            shift = coord.sub(_on_domain(origin.get_at(k), space))
            zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
            box = box.intersect(shift.ge_set(zero)).intersect(
                shift.le_set(zero.add_constant_val(isl.Val.int_from_si(CTX, size - 1))))
        inner_a, box = poly.align_params(inner, box)
        if not inner_a.is_subset(box):
            raise self.fail(f"{task_name}: its SIMD instruction's box misses instances "
                            f"({inner_a.subtract(box)})")
        if d.case == "enumerated":
            if d.by_length:
                self.simd_length(task_name, d, inner_a)
            else:
                self.simd_variant(task_name, d, inner_a)
            return
        runs_extra = box.intersect_params(inner_a.params()).subtract(inner_a)
        extra = d.extra_instances
        if extra is None:
            if not runs_extra.is_empty():
                raise self.fail(f"{task_name}: its SIMD instruction runs instances the task "
                                f"does not have ({runs_extra})")
            return
        extra, runs_extra = poly.align_params(extra, runs_extra)
        if not runs_extra.is_subset(extra):
            raise self.fail(f"{task_name}: its SIMD instruction runs instances outside the "
                            "task that were not checked as box-hull extras")

    def parameter_function(self, task_name: str, what: str, e: IExpr, params: isl.Set
                           ) -> isl.PwAff:
        """A SIMD ``variant`` or ``length`` expression as a function of the parameters."""
        try:
            return quasi_affine(e, [], params.get_space())
        except ScanError as err:
            raise self.fail(f"{task_name}: its SIMD {what} expression is not quasi-affine "
                            f"({err})") from err

    def simd_variant(self, task_name: str, d: SimdDecision, inner: isl.Set) -> None:
        """Where an enumerated instruction's variant expression selects variant ``k``,
        the instances' box has exactly variant ``k``'s size (so the box holds them all and
        nothing else)."""
        assert d.variant is not None
        params = inner.params()
        selected = self.parameter_function(task_name, "variant", d.variant, params)
        covered = isl.Set.empty(params.get_space())
        for k, sizes in enumerate(d.variants):
            where = selected.eq_set(_constant(params.get_space(), k)).intersect(params)
            covered = covered.union(where)
            for dim, size in enumerate(sizes):
                extent = _extent(inner, dim)
                exact = extent.eq_set(_constant(extent.get_domain_space(), size))
                where_a, exact = poly.align_params(where, exact)
                if not where_a.is_subset(exact):
                    raise self.fail(f"{task_name}: its SIMD variant expression selects size "
                                    f"{list(sizes)} where the instances have another size "
                                    f"({where_a.subtract(exact)})")
        if not params.is_subset(covered):
            raise self.fail(f"{task_name}: its SIMD variant expression selects no variant "
                            f"for some invocations ({params.subtract(covered)})")

    def simd_length(self, task_name: str, d: SimdDecision, inner: isl.Set) -> None:
        """Where an instruction is cut to a run-time length, the length expression is the
        extent of the instances' dimension the length cuts (``pe.ir.cut_dimension``) and
        the other dimensions have the configuration's sizes (so the cut box holds them all
        and nothing else)."""
        assert d.length is not None
        params = inner.params()
        length = self.parameter_function(task_name, "length", d.length, params)
        (sizes,) = d.variants
        cut = cut_dimension(sizes)
        for dim, size in enumerate(sizes):
            extent = _extent(inner, dim)
            want = length if dim == cut else _constant(extent.get_domain_space(), size)
            extent, want = poly.align_params(extent, want)
            exact = extent.eq_set(want)
            if dim == cut:  # (a length within the configuration's size)
                exact = exact.intersect(want.le_set(_constant(want.get_domain_space(), size)))
            params_a, exact = poly.align_params(params, exact)
            if not params_a.is_subset(exact):
                raise self.fail(f"{task_name}: its SIMD length expression gives another "
                                f"extent than the instances' in dimension {dim} "
                                f"({params_a.subtract(exact)})")

    def simd_operand(self, task_name: str, pstmt: PolyStatement, d: SimdDecision,
                     inner: isl.Set, operand: Operand) -> None:
        assert d.compression is not None and operand.tensor is not None
        assert operand.base is not None and d.offset is not None
        local = self.memory.of(operand.tensor)
        if local is None:
            raise self.fail(f"{task_name}: SIMD operand '{operand.tensor}' has no local array")
        access = outer_to_params(d.compression.apply_range(
            pstmt.access_function(operand.tensor)), d.outer_names)
        access, to_local = poly.align_params(access, local.to_local_bound)
        positions = access.apply_range(isl.Map.from_multi_aff(to_local))  # c -> local
        strides = row_major(local.size)
        flat = isl.Map.from_aff(flat_aff(positions.get_space().range(), strides))
        actual = positions.apply_range(flat)  # c -> [flat position]
        space = actual.get_space().domain()
        origin = isl.MultiPwAff.from_multi_aff(d.offset) if isinstance(
            d.offset, isl.MultiAff) else d.offset
        base = quasi_affine(operand.base, [], space.params())
        expected = _on_domain(base, space)
        ls = isl.LocalSpace.from_space(space)
        for k, stride in enumerate(operand.strides):
            if stride:
                coord = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, k))
                shift = coord.sub(_on_domain(origin.get_at(k), space))
                expected = expected.add(shift.scale_val(isl.Val.int_from_si(CTX, stride)))
        wanted = isl.Map.from_pw_aff(expected)
        wanted, actual = poly.align_params(wanted, actual)
        inner, actual = poly.align_params(inner, actual)
        wanted = wanted.intersect_domain(inner.align_params(wanted.get_space()))
        actual = actual.intersect_domain(inner)
        if not actual.is_equal(wanted):
            raise self.fail(f"{task_name}: a SIMD operand addresses other elements of "
                            f"{local.name} than its instances access")

    # ---------------------------------------------------------------- extras

    def extras(self, task_name: str, d: SimdDecision) -> None:
        """Extra instances (in the compressed space of the decision, outer loops as
        parameters) write only array positions no proper access uses, and read inside
        the arrays."""
        task = next(t for t in self.tg.tasks if t.name == task_name)
        assert task.statement is not None and d.extra_instances is not None
        assert d.compression is not None
        pstmt = self.tg.model.statement(task.statement)
        extra = d.extra_instances
        project = (*poly.index_params(extra), *d.outer_names)
        target = pstmt.stmt.target.tensor
        for tensor, _ in [(target, pstmt.write), *pstmt.reads]:
            if tensor == task.trigger:
                continue
            local = self.memory.of(tensor)
            if local is None:
                raise self.fail(f"{task_name}: '{tensor}' has no local array")
            access = outer_to_params(d.compression.apply_range(pstmt.access_function(tensor)),
                                     d.outer_names)
            # (in local coordinates before the index constants go: a landing array's
            # position depends on the batch's first index)
            access, to_local = poly.align_params(access, local.to_local_bound)
            positions = poly.accessed_elements(
                extra, access.apply_range(isl.Map.from_multi_aff(to_local)), project)
            bounds = zero_box(local.name, local.size)
            positions, bounds = poly.align_params(positions, bounds)
            if not positions.is_subset(bounds):
                raise self.fail(f"{task_name}: the extra instances of its box-hull SIMD "
                                f"instruction access {local.name} out of bounds")
            if tensor != target:
                continue
            used = poly.bind_pe(local.array.per_pe)
            flow = self.tg.output_flow(tensor)
            if flow is not None and flow.chain:  # a chain also sends what a PE did not write
                sent = poly.bind_pe(flow.sent_by().intersect_domain(flow.senders))
                used, sent = poly.align_params(used, sent)
                used = used.union(sent)
            used, to_local = poly.align_params(used, local.to_local_bound)
            proper = used.apply(isl.Map.from_multi_aff(to_local))
            positions, proper = poly.align_params(positions, proper)
            if not positions.intersect(proper).is_empty():
                raise self.fail(f"{task_name}: the extra instances of its box-hull SIMD "
                                f"instruction overwrite elements of '{tensor}' that proper "
                                "instances use")


# ------------------------------------------------------------------ isl helpers


def _extent(s: isl.Set, dim: int) -> isl.PwAff:
    """``max - min + 1`` of dimension ``dim`` of ``s``, a function of its parameters."""
    return s.dim_max(dim).sub(s.dim_min(dim)).add_constant_val(isl.Val.int_from_si(CTX, 1))


def _constant(space: isl.Space, value: int) -> isl.PwAff:
    """The constant ``value`` on the parameter space ``space``."""
    return isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))
                              .set_constant_val(isl.Val.int_from_si(CTX, value)))


def _at_space(k: int) -> isl.Space:
    """``at[x, y, v...]``: a PE and the index of the element it receives."""
    return isl.Space.set_alloc(CTX, 0, 2 + k).set_tuple_name(isl.dim_type.set, "at")


def _at_to_pe(k: int) -> isl.Map:
    at = _at_space(k)
    ident = isl.Map.identity(at.map_from_set())
    return ident.project_out(isl.dim_type.out, 2, k).set_tuple_name(isl.dim_type.out, PE)


def _arrivals(flow: InputFlow) -> isl.Map:
    """``at[x, y, v] -> t[e]``: element ``e`` reaches PE ``(x, y)`` with original index
    ``v`` (the index its tasks are written in)."""
    reaching = flow.reaching()  # t[e] -> PE[x, y]
    order = flow.order  # t[e] -> index[v]
    reaching, order = poly.align_params(reaching, order)
    both = reaching.flat_range_product(order).set_tuple_name(isl.dim_type.out, "at")
    return both.reverse()


def _by_pe(instances: isl.Set) -> isl.Map:
    """A bound instance set (params PE_X, PE_Y) as ``PE -> S[i]``, for a witness."""
    pe = isl.Space.set_alloc(CTX, 0, 2).set_tuple_name(isl.dim_type.set, PE)
    return instances.unbind_params_insert_domain(poly.multi_id(pe, poly.PE_NAMES))


def _pe_part(rel: isl.Map) -> isl.Map:
    """``at[x, y, v] -> e`` as ``PE[x, y] -> e`` (index dropped), for a witness."""
    k = int(rel.dim(isl.dim_type.in_)) - 2
    return rel.reverse().apply_range(_at_to_pe(k)).reverse()


def _split_pe(points: isl.Set) -> isl.Map:
    """Flat points ``(x, y, v...)`` as ``PE[x, y] -> index[v...]``, for a witness."""
    n = int(points.dim(isl.dim_type.set))
    rel = isl.Map.from_domain(points).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, 2,
                                                n - 2)
    return rel.set_tuple_name(isl.dim_type.in_, PE).set_tuple_name(isl.dim_type.out, "index")


def _unit_step(along: int, by: int = 1) -> isl.Map:
    """``PE[x, y] -> PE[x + by, y]`` (``along`` 0) or ``PE[x, y + by]`` (1)."""
    space = isl.Space.map_from_domain_and_range(*(2 * (isl.Space.set_alloc(
        CTX, 0, 2).set_tuple_name(isl.dim_type.set, PE),)))
    ma = isl.MultiAff.identity(space)
    ma = ma.set_aff(along, ma.get_aff(along).add_constant_val(isl.Val.int_from_si(CTX, by)))
    return isl.Map.from_multi_aff(ma)


def _several_valued(rel: isl.Map) -> isl.Set:
    """The domain points that ``rel`` maps to more than one value."""
    return rel.lexmax().subtract(rel.lexmin()).domain()


def _on_domain(value: isl.PwAff, space: isl.Space) -> isl.PwAff:
    """A function of the parameters as a function on the set space ``space``."""
    value = value.align_params(space)
    n = int(space.dim(isl.dim_type.set))
    spread = value.insert_dims(isl.dim_type.in_, 0, n)
    if space.has_tuple_id(isl.dim_type.set):
        spread = spread.set_tuple_id(isl.dim_type.in_, space.get_tuple_id(isl.dim_type.set))
    return spread
