"""Colors shared by routes that never meet.

The planner gives every route its own color. When that needs more than the fabric has,
routes whose PEs (and external PEs) are disjoint share one: two colors conflict when
some router carries both, when an external PE uses both, or when one has a data task
in a program where the other is read with ``recv`` / ``in(c)`` (a data-task color
cannot be received), or when their data tasks differ in kind (sparse or dense). The
conflict graph is colored greedily; tasks of colors that now coincide are merged into
one task per program, each part guarded by the PEs where its old color arrives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import islpy as isl
import networkx as nx

from dtg.codegen.islast import condition_of
from dtg.codegen.scancheck import cond_set
from dtg.lair.lower import CTX
from dtg.mapping import poly
from dtg.mapping.mesh import pe_space, translate
from dtg.pe.ir import If, PeModule, PeProgram, Recv, SimdOperand, Stmt, Task


def colors_used(module: PeModule) -> set[int]:
    found: set[int] = set()
    _walk(module, lambda value: found.add(value))
    return found


def share_colors(module: PeModule, limit: int) -> PeModule | None:
    """``module`` with at most ``limit`` colors where routes that never meet share them;
    the module itself when it already fits; None when the conflicts need more."""
    used = sorted(colors_used(module))
    if len(used) <= limit and max(used, default=-1) < limit:
        return module
    footprint = {c: isl.Set.empty(pe_space()) for c in used}
    local: dict[tuple[str, int], isl.Set] = {}  # (program, color) -> its PEs (relative)
    tasks: dict[tuple[str, int], list[Task]] = {}
    received: set[tuple[str, int]] = set()
    for program in module.programs:
        pes = isl.Set(program.pes)
        to_absolute = translate(*program.origin)
        for route in program.routes:
            where = pes if route.guard is None else pes.intersect(poly.pe_set(cond_set(
                route.guard, _pe_params())))
            key = (program.name, route.color)
            local[key] = local[key].union(where) if key in local else where
            footprint[route.color] = footprint[route.color].union(where.apply(to_absolute))
        for task in program.tasks:
            if task.color is not None:
                tasks.setdefault((program.name, task.color), []).append(task)
        for c in _received(program):
            received.add((program.name, c))
    for stream in module.streams:
        ext = isl.Map(stream.relation).range_factor_domain().range().set_tuple_name("PE")
        footprint[stream.color] = footprint[stream.color].union(ext)
    graph: nx.Graph = nx.Graph()
    graph.add_nodes_from(used)
    for k, a in enumerate(used):
        for b in used[k + 1:]:
            if _conflict(a, b, module.programs, footprint, tasks, received):
                graph.add_edge(a, b)
    coloring = nx.greedy_color(graph, strategy="largest_first")
    if max(coloring.values(), default=-1) >= limit:
        return None
    programs = tuple(_merged(p, coloring, local) for p in module.programs)
    merged = dataclasses.replace(module, programs=programs)
    return _recolored(merged, coloring)


def _pe_params() -> isl.Space:
    space = isl.Space.params_alloc(CTX, 2)
    for k, name in enumerate(poly.PE_NAMES):
        space = space.set_dim_name(isl.dim_type.param, k, name)
    return space


def _conflict(a: int, b: int, programs: Iterable[PeProgram], footprint: dict[int, isl.Set],
              tasks: dict[tuple[str, int], list[Task]], received: set[tuple[str, int]]
              ) -> bool:
    if not footprint[a].intersect(footprint[b]).is_empty():
        return True
    for program in programs:
        ta, tb = tasks.get((program.name, a), []), tasks.get((program.name, b), [])
        data_a = [t for t in ta if t.kind == "data"]
        data_b = [t for t in tb if t.kind == "data"]
        if (data_a and (program.name, b) in received) or (data_b and (program.name, a) in received):
            return True
        if data_a and data_b and data_a[0].sparse != data_b[0].sparse:
            return True
        if any(t.batch is not None for t in (*data_a, *data_b)):
            return True  # a batched task lands its own color's wavelets
    return False


def _received(program: PeProgram) -> set[int]:
    """Colors a program reads with ``recv`` or as a SIMD ``in(c)`` operand."""
    found: set[int] = set()

    def visit(node: Any) -> None:
        if isinstance(node, Recv) or (isinstance(node, SimdOperand) and node.kind == "in"):
            assert node.color is not None
            found.add(node.color)

    _visit(program, visit)
    return found


def _merged(program: PeProgram, coloring: dict[int, int],
            local: dict[tuple[str, int], isl.Set]) -> PeProgram:
    """One data and one control task per new color: the old colors' tasks, each guarded
    by the PEs where its color arrives."""
    groups: dict[tuple[str, int], list[Task]] = {}
    for task in program.tasks:
        if task.color is not None:
            groups.setdefault((task.kind, coloring[task.color]), []).append(task)
    if all(len(g) == 1 for g in groups.values()):
        return program
    pes = isl.Set(program.pes)
    context = pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))
    result: list[Task] = []
    done: set[int] = set()
    for task in program.tasks:
        if task.color is None:
            result.append(task)
            continue
        group = groups[(task.kind, coloring[task.color])]
        if len(group) == 1:
            result.append(task)
            continue
        if id(group) in done:
            continue
        done.add(id(group))
        body: list[Stmt] = []
        for part in group:
            assert part.color is not None
            where = local.get((program.name, part.color), isl.Set.empty(pe_space()))
            guard = condition_of(where.bind(poly.multi_id(pe_space(), poly.PE_NAMES)),
                                 context)
            body.extend(part.body if guard is None else (If(guard, part.body),))
        result.append(dataclasses.replace(task, name="_".join(t.name for t in group),
                                          body=tuple(body)))
    return dataclasses.replace(program, tasks=tuple(result))


def _recolored(module: PeModule, coloring: dict[int, int]) -> PeModule:
    return _rebuild(module, lambda c: coloring[c])


# ------------------------------------------------------------ walking the IR


def _visit(node: Any, visit: Callable[[Any], None]) -> None:
    visit(node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            _visit(getattr(node, f.name), visit)
    elif isinstance(node, tuple):
        for item in node:
            _visit(item, visit)


def _walk(node: Any, found: Callable[[int], None]) -> None:
    def visit(n: Any) -> None:
        if dataclasses.is_dataclass(n) and not isinstance(n, type):
            for f in dataclasses.fields(n):
                if f.name == "color" and isinstance(getattr(n, f.name), int):
                    found(getattr(n, f.name))

    _visit(node, visit)


def _rebuild(node: Any, color: Callable[[int], int]) -> Any:
    """``node`` with every ``color`` field mapped by ``color``."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if f.name == "color" and isinstance(value, int):
                changes[f.name] = color(value)
            else:
                rebuilt = _rebuild(value, color)
                if rebuilt is not value:
                    changes[f.name] = rebuilt
        return dataclasses.replace(node, **changes) if changes else node
    if isinstance(node, tuple):
        items = tuple(_rebuild(item, color) for item in node)
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    return node
