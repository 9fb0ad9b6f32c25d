"""Router configuration for a multicast tree, read off its parent relation.

A tree is given by ``{ PE -> PE }``: where each of its PEs receives the color from (a
neighbour, or the external source for the entry PE). A PE's input port faces its parent;
its output ports face the neighbours that have it as parent, plus ``RAMP`` where its
core reads the stream. Each distinct (input port, outputs) combination becomes one
guarded route, so the routes of a color partition the tree's PEs.
"""

from __future__ import annotations

import islpy as isl

from dtg.codegen.islast import condition_of
from dtg.errors import CompilerBug
from dtg.mapping import poly
from dtg.mapping.mesh import PORT_TOWARDS, pe_box, translate
from dtg.pe.ir import Route


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
        for pes, targets in _split(receiving, outputs):
            if not targets:
                raise CompilerBug(f"multicast tree of color {color}: PEs {pes} receive the "
                                  "stream but neither use nor forward it")
            routes.append(_route(color, port, pes, targets, context))
    return routes


def broadcast_routes(color: int, width: int, height: int, context: isl.Set) -> list[Route]:
    """Routes that carry a wavelet any PE of a ``width`` x ``height`` region sends to
    every other PE: along the sender's row both ways, and from each PE of that row along
    its column both ways (one fixed configuration serves every sender)."""
    pes = pe_box(0, width - 1, 0, height - 1)
    has = {port: pes.intersect(pe_box(0, width - 1, 0, height - 1).apply(translate(
        *(-d for d in step)))) for step, port in PORT_TOWARDS.items()}
    # A wavelet moving along the row keeps going and turns into the column; one moving
    # along a column keeps going; the sender's own wavelet starts all four ways.
    onward = {"RAMP": ("W", "E", "N", "S"), "W": ("E", "N", "S"), "E": ("W", "N", "S"),
              "N": ("S",), "S": ("N",)}
    routes: list[Route] = []
    for port, ahead in onward.items():
        receiving = pes if port == "RAMP" else has[port]
        outputs = [(p, has[p]) for p in ahead] + ([] if port == "RAMP" else [("RAMP", pes)])
        routes.extend(_route(color, port, part, targets, context)
                      for part, targets in _split(receiving, outputs) if targets)
    return routes


def _split(pes: isl.Set, outputs: list[tuple[str, isl.Set]]
           ) -> list[tuple[isl.Set, tuple[str, ...]]]:
    """``pes`` split by which of the ``outputs`` (port, PEs having it) apply."""
    pieces: list[tuple[isl.Set, tuple[str, ...]]] = [(pes, ())] if not pes.is_empty() else []
    for name, where in outputs:
        split = []
        for part, targets in pieces:
            for piece, extra in ((part.intersect(where), (name,)),
                                 (part.subtract(where), ())):
                if not piece.is_empty():
                    split.append((piece, targets + extra))
        pieces = split
    return pieces


def _route(color: int, port: str, pes: isl.Set, targets: tuple[str, ...],
           context: isl.Set) -> Route:
    bound = pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))
    return Route(color, port, _ordered(targets), condition_of(bound, context))


def _ordered(targets: tuple[str, ...]) -> tuple[str, ...]:
    """``RAMP`` first, then the compass ports, as the other routes list them."""
    rank = {"RAMP": 0, "N": 1, "S": 2, "W": 3, "E": 4}
    return tuple(sorted(targets, key=rank.__getitem__))
