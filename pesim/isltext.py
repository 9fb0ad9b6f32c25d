"""Reading and enumerating the isl texts of a PE module.

PE sets, stream relations and load/store sets are kept as strings in the IR; these
helpers read them with islpy, check their shape, and list their integer points (the
simulator instantiates per PE, so it needs concrete points). Load and store sets may
be written without a parameter prefix (``{ W[i, j] : i < 8 * PE_Y }``), ``PE_X`` and
``PE_Y`` being declared here, or as isl prints them (``[PE_X, PE_Y] -> { ... }``).
"""

from __future__ import annotations

import islpy as isl

from dtg.errors import SimulationError, SourceLoc
from dtg.lair.lower import least_point

PARAMS = ("PE_X", "PE_Y")
CTX = isl.DEFAULT_CONTEXT


class IslTextError(SimulationError):
    """isl text in a PE module that isl cannot read or that has the wrong shape."""


def read_set(text: str, what: str, loc: SourceLoc | None, example: str, *,
             pe_params: bool = False) -> isl.Set:
    prefixed = text.lstrip().startswith("[")
    source = f"[{', '.join(PARAMS)}] -> {text}" if pe_params and not prefixed else text
    try:
        result = isl.Set(source, context=CTX)
    except isl.Error:
        result = None
    if result is not None and prefixed:
        names = {result.get_dim_name(isl.dim_type.param, k)
                 for k in range(result.dim(isl.dim_type.param))}
        if not pe_params or not names <= set(PARAMS):
            result = None
    if result is None:
        allowed = " (the parameters PE_X and PE_Y may be used)" if pe_params else ""
        raise IslTextError(f"isl cannot read the {what}: {text}; expected an isl set such as "
                           f"{example}{allowed}", loc)
    return result


def read_map(text: str, what: str, loc: SourceLoc | None, example: str) -> isl.Map:
    try:
        return isl.Map(text, context=CTX)
    except isl.Error:
        raise IslTextError(f"isl cannot read the {what}: {text}; expected an isl relation such "
                           f"as {example}", loc) from None




def box(name: str, upper: tuple[int, ...], lower: tuple[int, ...] | None = None) -> isl.Set:
    """The integer box ``name[lower <= i < upper]`` (lower 0 by default)."""
    lower = lower or (0,) * len(upper)
    dims = [f"i{k}" for k in range(len(upper))]
    bounds = " and ".join(f"{lo} <= {d} < {hi}" for d, lo, hi in zip(dims, lower, upper,
                                                                       strict=True))
    return isl.Set(f"{{ {name}[{', '.join(dims)}]{' : ' + bounds if bounds else ''} }}",
                   context=CTX)


def mesh_ring(width: int, height: int) -> isl.Set:
    """The external PEs next to a side of the mesh ``PE[width, height]`` (no corners)."""
    return isl.Set(f"{{ PE[x, y] : (0 <= x < {width} and (y = -1 or y = {height})) or "
                   f"(0 <= y < {height} and (x = -1 or x = {width})) }}", context=CTX)


def outside(s: isl.Set, allowed: isl.Set) -> tuple[int, ...] | None:
    """A point of ``s`` outside ``allowed`` (the least), or None when ``s`` lies within
    it: a test by isl on the sets, so a huge ``s`` is never enumerated."""
    rest = s.subtract(allowed)
    if rest.is_empty():
        return None
    point = least_point(rest)
    return tuple(point.get_coordinate_val(isl.dim_type.set, k).to_python()
                 for k in range(s.dim(isl.dim_type.set)))


def shifted(s: isl.Set, offset: tuple[int, ...]) -> isl.Set:
    """``s`` translated by ``offset``."""
    dims = [f"i{k}" for k in range(len(offset))]
    name = s.get_tuple_name()
    moved = ", ".join(f"{d} + {o}" for d, o in zip(dims, offset, strict=True))
    return s.apply(isl.Map(f"{{ {name}[{', '.join(dims)}] -> {name}[{moved}] }}", context=CTX))


def fix_pe(s: isl.Set, x: int, y: int) -> isl.Set:
    """``s`` with ``PE_X = x`` and ``PE_Y = y``, the parameters projected out."""
    for name, value in zip(PARAMS, (x, y), strict=True):
        k = s.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            s = s.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(CTX, value))
    return s.project_out(isl.dim_type.param, 0, s.dim(isl.dim_type.param))


def check_pes(text: str, loc: SourceLoc | None, program: str) -> isl.Set:
    example = "{ PE[x, y] : 0 <= x <= 3 and 0 <= y <= 3 }"
    s = read_set(text, f"PE set of program {program}", loc, example)
    if (s.get_tuple_name() != "PE" or s.dim(isl.dim_type.set) != 2
            or s.dim(isl.dim_type.param) != 0):
        raise IslTextError(f"the PE set of program {program} must be a set PE[x, y] without "
                           f"parameters, e.g. {example}; got {text}", loc)
    if not s.is_bounded():
        raise IslTextError(f"the PE set of program {program} is unbounded: {s}", loc)
    return s


def check_array_set(text: str, tensor: str, rank: int, what: str, loc: SourceLoc | None
                    ) -> isl.Set:
    """A load or store set ``{ T[...] : ... }`` over ``PE_X``, ``PE_Y``."""
    dims = ", ".join(f"i{k}" for k in range(rank))
    example = f"{{ {tensor}[{dims}] : ... }}"
    s = read_set(text, what, loc, example, pe_params=True)
    if s.get_tuple_name() != tensor or s.dim(isl.dim_type.set) != rank:
        raise IslTextError(f"the {what} must be a set of elements {tensor}[{dims}] "
                           f"(rank {rank}); got {text}", loc)
    return s


def check_stream(text: str, tensor: str, loc: SourceLoc | None) -> isl.Map:
    """A stream relation ``{ t[...] -> [PE[x, y] -> index[...]] }`` (absolute coordinates)."""
    example = f"{{ {tensor}[i = 0:15] -> [PE[0, -1] -> index[i]] }}"
    rel = read_map(text, f"relation of stream {tensor}", loc, example)
    expected = f"expected {{ {tensor}[...] -> [PE[x, y] -> index[...]] }}"
    if rel.get_tuple_name(isl.dim_type.in_) != tensor:
        raise IslTextError(f"the relation of stream {tensor} maps elements of "
                           f"'{rel.get_tuple_name(isl.dim_type.in_)}'; {expected}", loc)
    if rel.dim(isl.dim_type.param) != 0:
        raise IslTextError(f"the relation of stream {tensor} must not have parameters", loc)
    if not rel.range_is_wrapping():
        raise IslTextError(f"the relation of stream {tensor} does not name an external PE; "
                           f"{expected}", loc)
    pes, order = rel.range_factor_domain(), rel.range_factor_range()
    if pes.get_tuple_name(isl.dim_type.out) != "PE" or pes.dim(isl.dim_type.out) != 2:
        raise IslTextError(f"the relation of stream {tensor} must go to PE[x, y]; {expected}",
                           loc)
    if order.get_tuple_name(isl.dim_type.out) != "index" or order.dim(isl.dim_type.out) < 1:
        raise IslTextError(f"the relation of stream {tensor} must give an index[...] of at "
                           f"least one dimension; {expected}", loc)
    if not rel.wrap().is_bounded():
        raise IslTextError(f"the relation of stream {tensor} is unbounded: {rel}", loc)
    if not rel.is_single_valued():
        twice = rel.lexmax().subtract(rel.lexmin()).domain()
        raise IslTextError(f"the relation of stream {tensor} gives {_first(twice)} more than "
                           "one (PE, index) pair; expected one", loc)
    if not rel.is_injective():
        rev = rel.reverse()
        key = rev.lexmax().subtract(rev.lexmin()).domain()
        raise IslTextError(f"the relation of stream {tensor} gives two elements the same "
                           f"(PE, index) pair {_first(key)}; each pair must name one element",
                           loc)
    return rel


def _first(s: isl.Set) -> str:
    return str(isl.Set.from_point(least_point(s)))


class Halfspaces:
    """A set ``{ T[i...] : ... }`` over ``PE_X``, ``PE_Y`` that is one conjunction of
    affine constraints without existential variables, as coefficient rows over
    ``(PE_X, PE_Y, i..., 1)``: whether a box lies in it is then a test of its corners
    (an affine function is smallest at a corner of a box), with no isl call per PE."""

    def __init__(self, inequality_rows: list[list[int]], equality_rows: list[list[int]]):
        self.inequality_rows, self.equality_rows = inequality_rows, equality_rows

    @staticmethod
    def of(s: isl.Set) -> Halfspaces | None:
        """The constraints of ``s``, or None when it is a union or has divisions."""
        pieces = s.get_basic_sets()
        if len(pieces) != 1 or pieces[0].dim(isl.dim_type.div):
            return None
        rank = s.dim(isl.dim_type.set)
        params = [s.find_dim_by_name(isl.dim_type.param, name) for name in PARAMS]
        rows: dict[bool, list[list[int]]] = {True: [], False: []}

        def record(c: isl.Constraint) -> None:
            row = [0 if k < 0 else c.get_coefficient_val(isl.dim_type.param, k).to_python()
                   for k in params]
            row += [c.get_coefficient_val(isl.dim_type.set, d).to_python() for d in range(rank)]
            row.append(c.get_constant_val().to_python())
            rows[c.is_equality()].append(row)

        pieces[0].foreach_constraint(record)
        return Halfspaces(rows[False], rows[True])

    def contains_box(self, pe: tuple[int, int], low: list[int], high: list[int]) -> bool:
        """Whether every point of ``low <= i <= high`` (high inclusive) is in the set at
        ``PE_X, PE_Y = pe``: each inequality's smallest value over the box (taken at the
        corner its coefficients point away from) is at least 0, each equality's smallest
        and largest are 0."""
        x, y = pe
        for row in self.inequality_rows:
            least = row[0] * x + row[1] * y + row[-1]
            for a, lo, hi in zip(row[2:-1], low, high, strict=True):
                least += a * (lo if a >= 0 else hi)
            if least < 0:
                return False
        for row in self.equality_rows:
            least = most = row[0] * x + row[1] * y + row[-1]
            for a, lo, hi in zip(row[2:-1], low, high, strict=True):
                least += a * (lo if a >= 0 else hi)
                most += a * (hi if a >= 0 else lo)
            if least != 0 or most != 0:
                return False
        return True
