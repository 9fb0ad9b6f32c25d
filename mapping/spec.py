"""The mapping spec (paper §4.1.2): its syntax tree and parser.

A ``.map`` file gives the target rectangle, the placement of statement instances on
PEs, and for each input and output tensor how it enters or leaves the rectangle::

    rectangle { PE[4, 5] }
    placement { ff[i, j] -> PE[j//4, 1 + i//8] }
    input  x sparse { x[i = 0:15] -> [PE[0, -1] -> index[i]] }
    input  W resident
    output y dense  { y[i = 0:31] -> [PE[4, 1 + i//8] -> index[i mod 8]] }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from lair.ast import NOWHERE
from lair.diagnostics import DtgError, LimitError, MappingError, SourceLoc
from lair.limits import MAX_INPUT_BYTES, isl_text_problem, offset_loc
from lair.parser import read_source, syntax_error

Kind = Literal["sparse", "dense", "resident"]
Direction = Literal["input", "output"]

TERMINALS = {
    "DIRECTION": "'input' or 'output'",
    "KIND": "'sparse', 'dense' or 'resident'",
    "ISL": "isl text in braces",
    "NAME": "a tensor name",
    "$END": "end of file",
}


@dataclass(frozen=True)
class IslText:
    """isl text as written in the file, with the position of its opening brace."""

    text: str
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class TensorSpec:
    direction: Direction
    tensor: str
    kind: Kind
    relation: IslText | None
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class MappingSpec:
    rectangle: IslText
    placement: IslText
    tensors: tuple[TensorSpec, ...]
    file: str = field(default="<string>", compare=False)

    def spec(self, tensor: str) -> TensorSpec | None:
        for s in self.tensors:
            if s.tensor == tensor:
                return s
        return None


def format_spec(spec: MappingSpec) -> str:
    lines = [f"rectangle {spec.rectangle.text}", f"placement {spec.placement.text}"]
    for t in spec.tensors:
        rel = f" {t.relation.text}" if t.relation else ""
        lines.append(f"{t.direction} {t.tensor} {t.kind}{rel}")
    return "\n".join(lines) + "\n"


@cache
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "mapping.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


def parse_mapping_file(path: str | Path) -> MappingSpec:
    return parse_mapping(read_source(path), str(path))


def parse_mapping(text: str, file: str = "<string>") -> MappingSpec:
    """Parse a mapping spec; structure errors are reported here, meaning in validation."""
    if len(text) > MAX_INPUT_BYTES:
        raise LimitError(f"the mapping has {len(text)} characters, more than the limit of "
                         f"{MAX_INPUT_BYTES}", SourceLoc(file, 1, 1))
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(err, text, file, "mapping spec", _parser(), TERMINALS) from None
    try:
        entries = _ToSpec(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, DtgError):
            raise err.orig_exc from None
        raise
    rectangle: IslText | None = None
    placement: IslText | None = None
    tensors: dict[str, TensorSpec] = {}
    for kind, value in entries:
        if kind == "rectangle":
            if rectangle is not None:
                raise MappingError(f"second 'rectangle' entry (first at {rectangle.loc})",
                                   value.loc)
            rectangle = value
        elif kind == "placement":
            if placement is not None:
                raise MappingError(f"second 'placement' entry (first at {placement.loc})",
                                   value.loc)
            placement = value
        else:
            if value.tensor in tensors:
                raise MappingError(
                    f"second spec for tensor '{value.tensor}' "
                    f"(first at {tensors[value.tensor].loc})", value.loc)
            if value.kind == "resident" and value.relation is not None:
                raise MappingError(
                    f"resident tensor '{value.tensor}' takes no isl relation; expected "
                    "'sparse' or 'dense' for a streamed tensor", value.relation.loc)
            if value.kind != "resident" and value.relation is None:
                raise MappingError(
                    f"{value.kind} tensor '{value.tensor}' needs its relation, e.g. "
                    f"{{ {value.tensor}[i = 0:15] -> [PE[0, -1] -> index[i]] }}", value.loc)
            tensors[value.tensor] = value
    end = SourceLoc(file, 1, 1)
    if rectangle is None:
        raise MappingError("no 'rectangle' entry; expected e.g. 'rectangle { PE[4, 5] }'", end)
    if placement is None:
        raise MappingError("no 'placement' entry; expected e.g. "
                           "'placement { S[i, j] -> PE[j, i] }'", end)
    return MappingSpec(rectangle, placement, tuple(tensors.values()), file)


@v_args(meta=True)
class _ToSpec(Transformer[Token, Any]):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _isl(self, token: Token) -> IslText:
        loc = SourceLoc(self.file, token.line or 1, token.column or 1)
        problem = isl_text_problem(str(token))
        if problem is not None:
            raise LimitError(problem[0], offset_loc(loc, str(token), problem[1]))
        return IslText(str(token), loc)

    def start(self, meta: Any, entries: list[Any]) -> list[Any]:
        return entries

    def rectangle(self, meta: Any, children: list[Token]) -> tuple[str, IslText]:
        return ("rectangle", self._isl(children[0]))

    def placement(self, meta: Any, children: list[Token]) -> tuple[str, IslText]:
        return ("placement", self._isl(children[0]))

    def tensor_spec(self, meta: Any, children: list[Token]) -> tuple[str, TensorSpec]:
        direction, name, kind, *rest = children
        relation = self._isl(rest[0]) if rest else None
        loc = SourceLoc(self.file, direction.line or 1, direction.column or 1)
        spec = TensorSpec(str(direction), str(name), str(kind), relation, loc)  # type: ignore[arg-type]
        return ("tensor", spec)
