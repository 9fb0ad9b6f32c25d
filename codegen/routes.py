"""Router configuration for a multicast tree, read off its parent relation.

A tree is given by ``{ PE -> PE }``: where each of its PEs receives the color from (a
neighbour, or the external source for the entry PE). A PE's input port faces its parent;
its output ports face the neighbours that have it as parent, plus ``RAMP`` where its
core reads the stream. Each distinct (input port, outputs) combination becomes one
guarded route, so the routes of a color partition the tree's PEs.
"""

from __future__ import annotations

import islpy as isl

from codegen.islast import condition_of
from codegen.peir import Route
from lair.diagnostics import CompilerBug
from mapping import poly
from mapping.mesh import PORT_TOWARDS, translate


def tree_routes(color: int, parent: isl.Map, ramp: isl.Set, context: isl.Set) -> list[Route]:
    """The routes of ``color`` on the PEs of the tree with ``parent`` (relative
    coordinates); ``ramp`` is the PEs whose core receives the stream."""
    children = parent.reverse()
    has_child = {port: children.intersect(translate(*step)).domain()
                 for step, port in PORT_TOWARDS.items()}
    outputs = [*has_child.items(), ("RAMP", ramp)]
    routes: list[Route] = []
    for step, port in PORT_TOWARDS.items():
        receiving = parent.intersect(translate(*step)).domain()
        if receiving.is_empty():
            continue
        # Split the PEs receiving through ``port`` by which outputs they have.
        pieces: list[tuple[isl.Set, tuple[str, ...]]] = [(receiving, ())]
        for name, where in outputs:
            split = []
            for pes, targets in pieces:
                for part, extra in ((pes.intersect(where), (name,)), (pes.subtract(where), ())):
                    if not part.is_empty():
                        split.append((part, targets + extra))
            pieces = split
        for pes, targets in pieces:
            if not targets:
                raise CompilerBug(f"multicast tree of color {color}: PEs {pes} receive the "
                                  "stream but neither use nor forward it")
            bound = pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))
            routes.append(Route(color, port, _ordered(targets), condition_of(bound, context)))
    return routes


def _ordered(targets: tuple[str, ...]) -> tuple[str, ...]:
    """``RAMP`` first, then the compass ports, as the other routes list them."""
    rank = {"RAMP": 0, "N": 1, "S": 2, "W": 3, "E": 4}
    return tuple(sorted(targets, key=rank.__getitem__))
