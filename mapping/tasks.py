"""Task graph construction (paper §4.2): regions, data flows, and the tasks that run them.

The mapping says where instances run and where tensors enter and leave the rectangle.
This module decides how data gets there: streamed inputs flow straight along a column
(or row) from the side they enter, or, when an element is needed in another column,
through a line of *adapter* PEs peeled off that side, which spread each element to the
column that needs it and re-index it (eq. (5)); reduction results flow along a row (or
column) towards the side they leave by (a reduction chain), or leave directly from the
PE next to that side. Everything is computed once with isl, parametric in the PE
coordinates, so the work does not grow with the rectangle.

A mapping that needs another pattern raises :class:`UnsupportedMappingError` naming the
tensor, the PEs and the flow it would need.
"""

from __future__ import annotations

import islpy as isl
import networkx as nx

from dtg.errors import UnsupportedMappingError
from dtg.lair.graph import Stmt, vanishes_with
from dtg.lair.lower import PolyModel
from dtg.mapping import poly
from dtg.mapping.exchanges import plan_exchanges
from dtg.mapping.flows import (
    Adapter,
    Colors,
    Exchange,
    InputFlow,
    OutputFlow,
    Region,
    ResidentReduction,
    Task,
    TaskGraph,
)
from dtg.mapping.inputs import MAX_SEGMENTS, plan_inputs, require_entry, side_of
from dtg.mapping.mesh import (
    FLOW_PORT,
    SIDE_NAMES,
    fmt,
    witness,
)
from dtg.mapping.outputs import output_flow
from dtg.mapping.reductions import resident_reduction
from dtg.mapping.validate import Mapping

__all__ = ["Adapter", "Exchange", "InputFlow", "OutputFlow", "Region", "ResidentReduction",
           "Task", "TaskGraph", "build_task_graph"]


_ALONG = {"row": "along its row", "column": "along its column",
          "region": "along its row and from there along every column"}


def build_task_graph(model: PolyModel, mapping: Mapping, *,
                     keep: frozenset[str] = frozenset(), split: bool = True,
                     segments: int = MAX_SEGMENTS, halos: bool = True) -> TaskGraph:
    """Plan every data flow and task of ``mapping`` for ``model`` (paper §4.2). The
    streamed tensors in ``keep`` are stored as they arrive, and the statements reading
    them run once they are complete, even where they could run per element.
    ``split=False``: multicast sources of one color stay one flow whatever their orders
    (fewer colors, :func:`mapping.inputs.tree_flows`) and straight streams stay whole;
    ``segments``: the most segments a straight stream's lines are cut into
    (:func:`mapping.inputs.line_segments`); ``halos``: tree streams cut into what PEs off
    their sources' lines read and the rest (:func:`mapping.inputs.halo_split`)."""
    _require_defined_outputs(model)
    colors = Colors()
    plan = plan_inputs(model, mapping, colors, split=split, segments=segments, halos=halos)
    compute, inputs = plan.compute, list(plan.flows)
    for stream in mapping.streams:
        if stream.direction == "output":
            require_entry(stream, side_of(stream, mapping.width, mapping.height), compute,
                          plan.adapter_regions, plan.peeled)
    sides = {s.tensor: side_of(s, mapping.width, mapping.height)
             for s in mapping.streams if s.direction == "output"}
    to_rel = compute.to_relative()
    placement = tuple((name, rel.apply_range(to_rel)) for name, rel in mapping.placement)
    outputs: list[OutputFlow] = []
    gathers: list[Exchange] = []
    completions: list[ResidentReduction] = []
    for stream in mapping.streams:
        if stream.direction == "output":
            out, moves, chains = output_flow(stream, sides[stream.tensor], model, mapping,
                                             compute, colors)
            outputs.append(out)
            gathers.extend(moves)
            completions.extend(chains)
    reductions: list[ResidentReduction] = []
    for tensor, direction in mapping.resident:
        if direction == "output":
            chains, reducing = resident_reduction(tensor, model, mapping, compute, colors)
            reductions.extend(chains)
            gathers.extend(reducing)
    exchanges, combines = plan_exchanges(model, mapping, dict(placement), compute, colors)
    exchanges += gathers
    combines += completions
    tasks, graph, buffered = _tasks(model, compute, placement, inputs, outputs,
                                    reductions + combines, mapping, keep)
    for ex in exchanges:
        tasks.append(Task(f"exchange_{ex.tensor}", "communication", compute.name,
                          compute.pes(),
                          detail=f"each PE in turn sends the complete elements of "
                                 f"{ex.tensor} it holds {_ALONG[ex.axis]}; the others keep "
                                 "those they read"))
    return TaskGraph(model, mapping, compute, plan.adapters, tuple(inputs), tuple(outputs),
                     tuple(reductions), placement, tuple(tasks), graph, buffered,
                     tuple(exchanges), tuple(combines), tuple(colors.taken))


def _require_defined_outputs(model: PolyModel) -> None:
    """Every output element must be defined by some instance: the PEs produce only what
    the statements compute, so an element the program leaves at its initial value would
    be missing from the results."""
    for tensor in model.graph.outputs:
        pstmt = next(p for p in model.statements if p.stmt.target.tensor == tensor.name)
        shape = model.tensor_set(tensor.name)
        written = pstmt.write.range()
        shape, written = poly.align_params(shape, written)
        missing = shape.subtract(written)
        if missing.is_empty():
            continue
        raise UnsupportedMappingError(
            f"output '{tensor.name}': no instance of {pstmt.name} defines "
            f"{fmt(tensor.name, witness(missing))}; outputs the program defines only in "
            f"part are not supported (the PEs produce only computed elements): make the "
            f"statement define every element of '{tensor.name}', or declare the shape it "
            "defines",
            pstmt.stmt.loc, subject=tensor.name)


def _tasks(model: PolyModel, compute: Region, placement: tuple[tuple[str, isl.Map], ...],
           inputs: list[InputFlow], outputs: list[OutputFlow],
           reductions: list[ResidentReduction], mapping: Mapping,
           keep: frozenset[str] = frozenset()
           ) -> tuple[list[Task], nx.DiGraph, tuple[str, ...]]:
    """The tasks and their dependences; also which streamed tensors are kept in memory.

    A statement that reads one streamed tensor and otherwise only resident inputs runs
    per arriving element (a data task, §5.1). Every other statement runs over its local
    instances once its inputs are on the PE: streamed tensors it reads are stored as
    they arrive, internal tensors come from statements that ran before it on that PE.
    """
    tasks: list[Task] = []
    streamed: dict[str, list[InputFlow]] = {}
    for flow in inputs:
        streamed.setdefault(flow.tensor, []).append(flow)
    place = dict(placement)
    buffered: list[str] = []
    for flow in inputs:
        if flow.adapter is not None:
            a = flow.adapter
            tasks.append(Task(f"spread_{flow.name}", "communication", a.region.name,
                              a.region.pes(), trigger=flow.tensor, flow=flow.name,
                              detail=f"adapters send each element of {flow.tensor} down the "
                                     "line that needs it, re-indexed (eq. (5))"))
        how = (flow.plan if flow.members is not None else
               f"flows {SIDE_NAMES[FLOW_PORT[flow.side]]}wards along each line with a source")
        tasks.append(Task(f"broadcast_{flow.name}", "communication", compute.name, flow.lines,
                          trigger=flow.tensor, flow=flow.name,
                          detail=f"{flow.tensor} {how}, to the PEs that read it"))
    compute_tasks: list[Task] = []
    for pstmt in model.statements:
        stmt = pstmt.stmt
        triggers = [t for t, _ in pstmt.reads if t in streamed]
        others = [t for t, _ in pstmt.reads if t not in streamed]
        pes = place[stmt.name].range()
        if stmt.is_reduction:
            tasks.append(Task(f"init_{stmt.target.tensor}", "init", compute.name, pes,
                              statement=stmt.name,
                              detail=f"fill the local {stmt.target.tensor} with "
                                     f"{'0' if stmt.op == '+=' else '-inf'}"))
        if (len(triggers) == 1 and triggers[0] not in keep
                and all(mapping.is_resident(t) for t in others)
                and _runs_per_element(stmt, streamed[triggers[0]][0])):
            for flow in streamed[triggers[0]]:
                instances = poly.task_instances(pstmt.domain, place[stmt.name], flow.order,
                                                pstmt.read(flow.tensor))
                compute_tasks.append(Task(f"{stmt.name}_on_{flow.name}", "compute",
                                          compute.name, pes, statement=stmt.name,
                                          trigger=flow.tensor, instances=instances,
                                          flow=flow.name))
            continue
        buffered.extend(t for t in triggers if t not in buffered)
        waits = ", ".join(triggers + [t for t in others if not mapping.is_resident(t)])
        instances = poly.bind_placement(place[stmt.name], pstmt.domain)
        compute_tasks.append(Task(
            f"{stmt.name}_local", "compute", compute.name, pes, statement=stmt.name,
            instances=instances,
            detail=f"runs once {waits} are complete on the PE" if waits else
                   "runs on resident data at start"))
    for tensor in buffered:
        for flow in streamed[tensor]:
            tasks.append(Task(f"store_{flow.name}", "communication", compute.name,
                              flow.lines, trigger=tensor, flow=flow.name,
                              detail=f"arriving elements of {tensor} are kept in local memory "
                                     "for the statements that need all of them"))
    tasks.extend(compute_tasks)
    for out in outputs:
        detail = ("partial results combined along each line towards the "
                  f"{SIDE_NAMES[out.side]} side (reduction chain)" if out.chain else
                  f"sent from the PEs next to the {SIDE_NAMES[out.side]} side")
        tasks.append(Task(f"out_{out.tensor}", "communication", compute.name, out.senders,
                          trigger=None, detail=detail + ", in the order of eq. (6)"))
    for red in reductions:
        tasks.append(Task(f"combine_{red.tensor}", "communication", compute.name,
                          red.elements.domain(),
                          detail=f"partial results of {red.tensor} flow "
                                 f"{SIDE_NAMES[red.side]}wards along each group of PEs "
                                 "holding the same elements; the last PE keeps the total"))
    return tasks, _dependences(model, tasks), tuple(buffered)


def _runs_per_element(stmt: Stmt, flow: InputFlow) -> bool:
    """Whether ``stmt`` can run as each element of ``flow`` arrives. A sparse stream does
    not send zeros, so only statements for which a zero element contributes nothing (a sum
    or a definition whose value vanishes with it) may skip them; the others wait for the
    whole tensor in local memory, where the unsent elements are 0."""
    if flow.kind == "dense":
        return True
    return stmt.op in ("+=", "=") and vanishes_with(stmt.value, flow.tensor)


def _dependences(model: PolyModel, tasks: list[Task]) -> nx.DiGraph:
    """Edges from each task to the tasks that need what it produces."""
    graph: nx.DiGraph = nx.DiGraph()
    for t in tasks:
        graph.add_node(t.name, task=t)
    producer = {model.statement(t.statement).stmt.target.tensor: t.name
                for t in tasks if t.kind == "compute" and t.statement}
    for t in tasks:
        if t.kind == "compute" and t.statement:
            stmt = model.statement(t.statement).stmt
            for other in tasks:
                if other.kind == "init" and other.statement == t.statement:
                    graph.add_edge(other.name, t.name)
                if other.kind == "communication" and other.trigger is not None and (
                        other.trigger == t.trigger or (t.trigger is None and any(
                            r.tensor == other.trigger for r in stmt.reads))):
                    graph.add_edge(other.name, t.name)
            for read in stmt.reads:
                if read.tensor in producer:
                    graph.add_edge(producer[read.tensor], t.name)
        if t.name.startswith(("out_", "combine_")):
            tensor = t.name.split("_", 1)[1]
            if tensor in producer:
                graph.add_edge(producer[tensor], t.name)
    return graph
