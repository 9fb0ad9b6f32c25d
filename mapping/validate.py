"""Check a mapping spec against a LAIR program and build the isl view of the mapping.

Each rule has its own message with the position of the entry in the ``.map`` file and,
where isl finds a violation, one concrete witness (an instance, a PE, an element).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import islpy as isl

from dtg.errors import LimitError, MappingError, SourceLoc
from dtg.lair.limits import (
    MAX_COORD,
    MAX_PES,
    MAX_RANK,
    counted,
    isl_text_problem,
    number_text,
    offset_loc,
)
from dtg.lair.lower import CTX, PolyModel, box_set, least_point, named_set_space, point_coordinates
from dtg.mapping.spec import Direction, IslText, MappingSpec, TensorSpec

PE = "PE"
INDEX = "index"


@dataclass(frozen=True)
class Stream:
    """A tensor that enters or leaves the rectangle as a stream of wavelets."""

    tensor: str
    direction: Direction
    kind: Literal["sparse", "dense"]
    relation: isl.Map  # tensor[...] -> [PE[x, y] -> index[...]]

    @property
    def order(self) -> isl.Map:
        """``tensor -> index``: the index (sparse) or arrival order (dense) of each element."""
        return self.relation.range_factor_range()

    @property
    def external_pes(self) -> isl.Map:
        """``tensor -> PE``: the PE outside the rectangle each element comes from / goes to."""
        return self.relation.range_factor_domain()

    @property
    def index_dims(self) -> int:
        return int(self.order.dim(isl.dim_type.out))


@dataclass(frozen=True)
class Mapping:
    """A validated mapping: rectangle size, placement restricted to the instances, tensors."""

    width: int
    height: int
    placement: tuple[tuple[str, isl.Map], ...]  # statement -> { S[...] -> PE[x, y] }
    streams: tuple[Stream, ...]
    resident: tuple[tuple[str, Direction], ...]
    file: str = "<string>"
    locs: tuple[tuple[str, SourceLoc], ...] = ()  # entry of each tensor, and "placement"

    def loc_of(self, subject: str) -> SourceLoc | None:
        """Where the mapping file speaks of a tensor (or, for a statement, the placement)."""
        locs = dict(self.locs)
        return locs.get(subject, locs.get("placement"))

    def rectangle(self) -> isl.Set:
        return box_set(PE, ["x", "y"], [self.width, self.height])

    def placement_of(self, statement: str) -> isl.Map:
        return dict(self.placement)[statement]

    def stream(self, tensor: str) -> Stream | None:
        for s in self.streams:
            if s.tensor == tensor:
                return s
        return None

    def is_resident(self, tensor: str) -> bool:
        return any(t == tensor for t, _ in self.resident)

    def format(self) -> str:
        lines = [f"rectangle {self.width} x {self.height} (columns x rows): {self.rectangle()}"]
        lines += [f"placement {name}: {rel}" for name, rel in self.placement]
        lines += [f"{s.direction} {s.tensor} {s.kind}: {s.relation}" for s in self.streams]
        lines += [f"{d} {t} resident" for t, d in self.resident]
        return "\n".join(lines) + "\n"


def _parse(cls: type, text: IslText, what: str, hint: str = ""
           ) -> isl.Map | isl.Set | isl.UnionMap:
    problem = isl_text_problem(text.text)  # parse_mapping checks too; specs may be built
    if problem is not None:
        raise LimitError(problem[0], offset_loc(text.loc, text.text, problem[1]))
    try:
        return cls(text.text)
    except isl.Error:
        kind = {isl.Set: "set", isl.Map: "relation", isl.UnionMap: "union map"}[cls]
        factor = _PARENTHESIZED_FACTOR.search(text.text)
        if factor is not None:  # (the one form writers meet that isl's grammar lacks)
            raise MappingError(
                f"isl cannot read the {what}: it reads a product as a plain constant times "
                f"an expression, not '{factor.group().strip()}' with a factor in "
                "parentheses; write the constant first and plainly, as "
                "'-128*(i mod 2)' for '(i mod 2)*(-128)'",
                offset_loc(text.loc, text.text,
                           factor.start() + factor.group().index("*"))) from None
        raise MappingError(f"isl cannot read the {what}; expected an isl {kind} such as "
                           f"{_EXAMPLES[what]}{hint}", text.loc) from None


# ``x*(c)``, ``x * (y)`` or ``(c)*x``: products isl's parser does not take
_PARENTHESIZED_FACTOR = re.compile(
    r"(?:\)|\b[A-Za-z_]\w*)\s*\*\s*\(|\(\s*-?\s*\d+\s*\)\s*\*")


_EXAMPLES = {
    "rectangle": "{ PE[4, 5] }",
    "placement": "{ S[i, j] -> PE[j//4, i//8] }",
    "tensor relation": "{ x[i = 0:15] -> [PE[0, -1] -> index[i]] }",
}


def _rank0_hint(name: str, shape: isl.Set) -> str:
    """For a rank-0 tensor: how its one element is written in isl."""
    if shape.dim(isl.dim_type.set) != 0:
        return ""
    return (f" ('{name}' is rank 0, a scalar: its one element is {name}[], as in "
            f"{{ {name}[] -> [PE[0, -1] -> index[0]] }})")


_SINGLE_SLASH = re.compile(r"(?<!/)/(?!/)")
_LEFT = re.compile(r"([A-Za-z_]\w*|\d+)\s*$")
_RIGHT = re.compile(r"\s*([A-Za-z_]\w*|\d+)")


def _division_hint(text: IslText) -> str:
    """isl reads ``j/4`` as exact division, so a placement or stream written with '/'
    for '//' is defined only where the divisor divides: name the likely cause."""
    depth = 0
    floors: list[int] = []  # paren depths of open floor( and ceil(
    for k, char in enumerate(text.text):
        if char == "(":
            depth += 1
            if re.search(r"\b(floor|ceil)\s*$", text.text[:k]):
                floors.append(depth)
        elif char == ")":
            if floors and floors[-1] == depth:
                floors.pop()
            depth -= 1
        elif char == "/" and _SINGLE_SLASH.match(text.text, k) and not floors:
            at = offset_loc(text.loc, text.text, k)
            left, right = _LEFT.search(text.text[:k]), _RIGHT.match(text.text, k + 1)
            a, b = (left.group(1), right.group(1)) if left and right else ("a", "b")
            return (f"; the '/' at {at.line}:{at.column} divides exactly in isl ({a}/{b} is "
                    f"defined only where {b} divides {a}): for the integer quotient write "
                    f"{a}//{b} or floor({a}/{b})")
    return ""


def _fmt(name: str, coords: Sequence[object]) -> str:
    return f"{name}[{', '.join(map(str, coords))}]"


def _sample(s: isl.Set) -> tuple[int, ...]:
    """The lexicographically smallest point: a witness that reads naturally and is stable.
    Only for bounded sets of small numbers (statement instances, tensor elements)."""
    return point_coordinates(least_point(s), int(s.dim(isl.dim_type.set)))


def _pe_space() -> isl.Space:
    return named_set_space(PE, ["x", "y"])


def _same_tuples(space: isl.Space, expected: isl.Space) -> bool:
    """Same tuple names and sizes, with no nesting where ``expected`` has none."""
    return bool(space.has_equal_tuples(expected))


def _window(space: isl.Space, bound: int = MAX_COORD) -> isl.Set:
    """Every point of ``space`` whose coordinates lie within ``[-bound, bound]``."""
    box = isl.Set.universe(space)
    for k in range(box.dim(isl.dim_type.set)):
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, -bound))
        box = box.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, bound))
    return box


def _coords_text(point: isl.Point) -> tuple[str, ...]:
    n = int(point.get_space().dim(isl.dim_type.set))
    return tuple(number_text(point.get_coordinate_val(isl.dim_type.set, k).to_str())
                 for k in range(n))


def _witness(s: isl.Set) -> tuple[str, ...]:
    """A point of the non-empty ``s`` for a message, as text: the lexicographic minimum of
    its part in the smallest of a few windows around 0 that meets it (stable, and lexmin
    needs a bounded set), else any point. Safe on unbounded sets and on huge numbers."""
    for bound in (1 << 4, 1 << 16, MAX_COORD):
        near = s.intersect(_window(s.get_space(), bound))
        if not near.is_empty():
            return _coords_text(least_point(near))
    return _coords_text(s.sample_point())


def _multi_valued(rel: isl.Map) -> isl.Set:
    """The domain elements that ``rel`` maps to two or more elements (also when it maps
    them to infinitely many, where ``lexmax`` has no answer)."""
    pairs = rel.range_product(rel)
    same = isl.Map.identity(rel.get_space().range().map_from_set()).wrap()
    return pairs.subtract_range(same).domain()


def validate_mapping(spec: MappingSpec, model: PolyModel) -> Mapping:
    """Check every rule of the mapping spec against ``model``; raise :class:`MappingError`."""
    width, height = rectangle_size(spec.rectangle)
    rect = box_set(PE, ["x", "y"], [width, height])
    placement = _placement(spec.placement, model, rect)
    streams: list[Stream] = []
    resident: list[tuple[str, Direction]] = []
    graph = model.graph
    for tspec in spec.tensors:
        try:
            tensor = graph.tensor(tspec.tensor)
        except KeyError:
            known = ", ".join(t.name for t in graph.tensors if t.role != "internal")
            raise MappingError(f"spec for unknown tensor '{tspec.tensor}'; the program's "
                               f"inputs and outputs are {known}", tspec.loc) from None
        if tensor.role == "internal":
            raise MappingError(
                f"'{tspec.tensor}' is internal to the program (defined by "
                f"{graph.definer(tspec.tensor).name} and read by another statement); it "  # type: ignore[union-attr]
                "takes no spec", tspec.loc)
        if tensor.role != tspec.direction:
            raise MappingError(
                f"'{tspec.tensor}' is an {tensor.role} of the program but has an "
                f"'{tspec.direction}' spec", tspec.loc)
        if tspec.kind == "resident":
            resident.append((tspec.tensor, tspec.direction))
        else:
            streams.append(_stream(tspec, model, rect, width, height))
    for tensor in graph.tensors:
        if tensor.role != "internal" and spec.spec(tensor.name) is None:
            raise MappingError(
                f"no spec for {tensor.role} tensor '{tensor.name}'; expected e.g. "
                f"'{tensor.role} {tensor.name} resident' or a sparse/dense stream",
                SourceLoc(spec.file, 1, 1))
    locs = (("placement", spec.placement.loc), *((t.tensor, t.loc) for t in spec.tensors))
    return Mapping(width, height, placement, tuple(streams), tuple(resident), spec.file, locs)


def rectangle_size(text: IslText) -> tuple[int, int]:
    """Columns and rows of the rectangle ``{ PE[w, h] }``."""
    rect = _parse(isl.Set, text, "rectangle")
    assert isinstance(rect, isl.Set)
    single = "the rectangle must be a single point PE[columns, rows], e.g. { PE[4, 5] }"
    if (not _same_tuples(rect.get_space(), _pe_space())
            or rect.dim(isl.dim_type.param) != 0):
        raise MappingError(single, text.loc)
    if rect.is_empty():
        raise MappingError(f"the rectangle {text.text} is the empty set; {single}", text.loc)
    if not rect.is_singleton():
        raise MappingError(single, text.loc)
    one = isl.Val.int_from_si(CTX, 1)
    positive = isl.Set.universe(rect.get_space()).lower_bound_val(
        isl.dim_type.set, 0, one).lower_bound_val(isl.dim_type.set, 1, one)
    if not rect.is_subset(positive):
        raise MappingError(f"the rectangle {_fmt(PE, _witness(rect))} is empty; expected "
                           "positive numbers of columns and rows", text.loc)
    if not rect.is_subset(_pe_box(1, MAX_PES, 1, MAX_PES)):
        raise LimitError(f"the rectangle {_fmt(PE, _witness(rect))} has more than {MAX_PES} "
                         "PEs, the limit", text.loc)
    width, height = _sample(rect)
    if width * height > MAX_PES:
        raise LimitError(f"the rectangle {_fmt(PE, (width, height))} has {width * height} PEs, "
                         f"more than the limit of {MAX_PES}", text.loc)
    return width, height


def statement_pieces(union: isl.UnionMap, model: PolyModel, text: IslText, what: str,
                     range_ok: Callable[[isl.Space], bool], range_wanted: str
                     ) -> dict[str, isl.Map]:
    """``union``, a relation from statement instances (a placement, or a placement's
    directions), by statement: each names a statement of ``model`` with a plain tuple of
    its iterators and has a range ``range_ok`` accepts (else ``range_wanted`` says what
    it must be); every statement has one."""
    if union.dim(isl.dim_type.param) != 0:
        raise MappingError(f"the {what} must not have parameters", text.loc)
    statements = {s.name: s for s in model.statements}
    pieces: dict[str, isl.Map] = {}
    maps = union.get_map_list()
    for rel in (maps.get_at(k) for k in range(maps.n_map())):
        name = rel.get_tuple_name(isl.dim_type.in_)
        if name not in statements:
            raise MappingError(f"the {what} names unknown statement '{name}'; statements "
                               f"are {', '.join(statements)}", text.loc)
        if not range_ok(rel.get_space().range()):
            raise MappingError(f"the {what} of '{name}' {range_wanted}", text.loc)
        domain = statements[name].domain
        if rel.dim(isl.dim_type.in_) != domain.dim(isl.dim_type.set):
            raise MappingError(
                f"the {what} gives '{name}' "
                f"{counted(rel.dim(isl.dim_type.in_), 'dimension')}; it has "
                f"{domain.dim(isl.dim_type.set)}", text.loc)
        if not _same_tuples(rel.get_space().domain(), domain.get_space()):
            raise MappingError(f"the {what} must place instances {name}[...] with one "
                               "plain tuple of iterators, not a nested one", text.loc)
        pieces[name] = pieces[name].union(rel) if name in pieces else rel
    for stmt in model.statements:
        if stmt.name not in pieces:
            raise MappingError(f"the {what} does not place statement '{stmt.name}'",
                               text.loc)
    return pieces


def _placement(text: IslText, model: PolyModel, rect: isl.Set) -> tuple[tuple[str, isl.Map], ...]:
    union = _parse(isl.UnionMap, text, "placement")
    assert isinstance(union, isl.UnionMap)
    pieces = statement_pieces(union, model, text, "placement",
                              lambda space: _same_tuples(space, _pe_space()),
                              "must map to PE[x, y]")
    result = []
    for stmt in model.statements:
        rel = pieces[stmt.name].intersect_domain(stmt.domain)
        unplaced = stmt.domain.subtract(rel.domain())
        if not unplaced.is_empty():
            raise MappingError(f"the placement is not defined on every instance: "
                               f"{_fmt(stmt.name, _sample(unplaced))} has no PE"
                               f"{_division_hint(text)}", text.loc)
        if not rel.is_single_valued():
            inst = _sample(_multi_valued(rel))
            at = isl.Set.from_point(_point(stmt.domain.get_space(), inst))
            image = rel.intersect_domain(at).range()
            if not image.is_bounded():
                raise MappingError(f"the placement is not a function: {_fmt(stmt.name, inst)} "
                                   "is placed on infinitely many PEs", text.loc)
            pes = [_witness(image.lexmin()), _witness(image.lexmax())]
            raise MappingError(f"the placement is not a function: {_fmt(stmt.name, inst)} is "
                               f"placed on {_fmt(PE, pes[0])} and {_fmt(PE, pes[1])}", text.loc)
        outside = rel.subtract_range(rect)
        if not outside.is_empty():
            inst = _sample(outside.domain())
            at = isl.Set.from_point(_point(stmt.domain.get_space(), inst))
            pe = _witness(outside.intersect_domain(at).range())
            raise MappingError(f"{_fmt(stmt.name, inst)} is placed on {_fmt(PE, pe)}, outside "
                               f"the rectangle {rect}", text.loc)
        result.append((stmt.name, rel))
    return tuple(result)


def _point(space: isl.Space, coords: tuple[int, ...]) -> isl.Point:
    point = isl.Point.zero(space)
    for k, value in enumerate(coords):
        point = point.set_coordinate_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, value))
    return point


def border_ring(width: int, height: int) -> isl.Set:
    """The PEs just outside the rectangle, next to one of its sides (corners excluded)."""
    north = _pe_box(0, width - 1, -1, -1)
    south = _pe_box(0, width - 1, height, height)
    west = _pe_box(-1, -1, 0, height - 1)
    east = _pe_box(width, width, 0, height - 1)
    return north.union(south).union(west).union(east)


def _pe_box(x0: int, x1: int, y0: int, y1: int) -> isl.Set:
    box = isl.Set.universe(box_set(PE, ["x", "y"], [1, 1]).get_space())
    for dim, (lo, hi) in enumerate([(x0, x1), (y0, y1)]):
        box = box.lower_bound_val(isl.dim_type.set, dim, isl.Val.int_from_si(CTX, lo))
        box = box.upper_bound_val(isl.dim_type.set, dim, isl.Val.int_from_si(CTX, hi))
    return box


def _stream(tspec: TensorSpec, model: PolyModel, rect: isl.Set, width: int, height: int
            ) -> Stream:
    assert tspec.relation is not None and tspec.kind != "resident"
    loc = tspec.relation.loc
    name = tspec.tensor
    shape = model.tensor_set(name)
    rel = _parse(isl.Map, tspec.relation, "tensor relation", _rank0_hint(name, shape))
    assert isinstance(rel, isl.Map)
    if rel.get_tuple_name(isl.dim_type.in_) != name:
        source = rel.get_tuple_name(isl.dim_type.in_)
        source = "an unnamed tuple" if source is None else f"'{source}'"
        elements = f"{name}[]" if shape.dim(isl.dim_type.set) == 0 else f"{name}[...]"
        raise MappingError(f"the relation for '{name}' maps elements of {source}; expected "
                           f"{elements}{_rank0_hint(name, shape)}", loc)
    if rel.dim(isl.dim_type.in_) != shape.dim(isl.dim_type.set):
        raise MappingError(f"the relation for '{name}' has "
                           f"{counted(rel.dim(isl.dim_type.in_), 'dimension')}; '{name}' has "
                           f"rank {shape.dim(isl.dim_type.set)}{_rank0_hint(name, shape)}", loc)
    if rel.dim(isl.dim_type.param) != 0:
        raise MappingError(f"the relation for '{name}' must not have parameters", loc)
    expected = f"expected {{ {name}[...] -> [PE[x, y] -> index[...]] }}"
    if not _same_tuples(rel.get_space().domain(), shape.get_space()):
        raise MappingError(f"the relation for '{name}' must map elements {name}[...] with one "
                           f"plain tuple of indices, not a nested one; {expected}", loc)
    if not rel.range_is_wrapping() or rel.get_tuple_name(isl.dim_type.out):
        raise MappingError(f"the relation for '{name}' does not name an external PE; {expected}",
                           loc)
    pes, order = rel.range_factor_domain(), rel.range_factor_range()
    if not _same_tuples(pes.get_space().range(), _pe_space()):
        raise MappingError(f"the relation for '{name}' must go to PE[x, y]; {expected}", loc)
    if (order.get_tuple_name(isl.dim_type.out) != INDEX or order.dim(isl.dim_type.out) < 1
            or order.get_space().range().is_wrapping()):
        raise MappingError(f"the relation for '{name}' must give one plain index[...] of at "
                           f"least one dimension; {expected}", loc)
    if order.dim(isl.dim_type.out) > MAX_RANK:
        raise LimitError(f"the relation for '{name}' gives an index of "
                         f"{order.dim(isl.dim_type.out)} dimensions, more than the limit of "
                         f"{MAX_RANK}", loc)
    rel = rel.coalesce()
    beyond = rel.domain().subtract(shape)
    if not beyond.is_empty():
        raise MappingError(f"the relation for '{name}' names {_fmt(name, _witness(beyond))}, "
                           f"outside the shape of '{name}'", loc)
    uncovered = shape.subtract(rel.domain())
    if not uncovered.is_empty():
        raise MappingError(f"the relation for '{name}' does not cover every element: "
                           f"{_fmt(name, _sample(uncovered))} has no (PE, index)"
                           f"{_division_hint(tspec.relation)}", loc)
    if not rel.is_single_valued():
        twice = _sample(_multi_valued(rel))
        many = "more than one (PE, index) pair" if rel.wrap().is_bounded() else (
            "infinitely many (PE, index) pairs")
        raise MappingError(f"the relation for '{name}' gives {_fmt(name, twice)} {many}; "
                           "expected one", loc)
    indices = order.intersect_domain(shape).range()
    if not indices.is_subset(_window(indices.get_space())):
        raise LimitError(f"the relation for '{name}' gives the index "
                         f"{_fmt(INDEX, _witness(indices.subtract(_window(indices.get_space()))))}"
                         f"; indices lie within -{MAX_COORD}..{MAX_COORD}", loc)
    if not rel.is_injective():
        rev = rel.reverse()
        key = rev.lexmax().subtract(rev.lexmin()).domain().sample_point()
        coords = _coords_text(key)
        pe, idx = coords[:2], coords[2:]
        elems = rev.intersect_domain(isl.Set.from_point(key))
        first, last = _sample(elems.lexmin().range()), _sample(elems.lexmax().range())
        raise MappingError(
            f"the relation for '{name}' gives {_fmt(name, first)} and {_fmt(name, last)} the same "
            f"pair ({_fmt(PE, pe)}, {_fmt(INDEX, idx)}); each pair must name one element", loc)
    ext = pes.range()
    inside = ext.intersect(rect)
    if not inside.is_empty():
        raise MappingError(f"'{name}' {'arrives from' if tspec.direction == 'input' else 'goes to'}"
                           f" {_fmt(PE, _witness(inside))}, inside the rectangle; external PEs "
                           "lie outside it", loc)
    far = ext.subtract(border_ring(width, height))
    if not far.is_empty():
        raise MappingError(f"'{name}' {'arrives from' if tspec.direction == 'input' else 'goes to'}"
                           f" {_fmt(PE, _witness(far))}, which is not next to the rectangle "
                           f"(columns 0..{width - 1}, rows 0..{height - 1})", loc)
    return Stream(name, tspec.direction, tspec.kind, rel)
