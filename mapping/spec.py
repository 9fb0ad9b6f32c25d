"""The mapping spec (paper §4.1.2): its syntax tree and parser.

A ``.map`` file gives the target rectangle, the placement of statement instances on
PEs, and for each input and output tensor how it enters or leaves the rectangle::

    rectangle { PE[4, 5] }
    placement { ff[i, j] -> PE[j//4, 1 + i//8] }
    input  x sparse { x[i = 0:15] -> [PE[0, -1] -> index[i]] }
    input  W resident
    output y dense  { y[i = 0:31] -> [PE[4, 1 + i//8] -> index[i mod 8]] }

A mapping may name the program's size parameters and declare its own with defaults
(``let TI = 8, TJ = 4``); :func:`bind_mapping` puts their values into the isl text, so
``placement { ff[i, j] -> PE[j//TJ, i//TI] }`` becomes affine once they are known. A
bound name stands for its value wherever it appears in the isl text except as a tuple
name, so it must not also be used as a variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from dtg.errors import (
    DtgError,
    LairSyntaxError,
    LimitError,
    MappingError,
    SourceLoc,
)
from dtg.lair.ast import NOWHERE
from dtg.lair.limits import MAX_INPUT_BYTES, isl_text_problem, offset_loc
from dtg.lair.parser import read_source, syntax_error

Kind = Literal["sparse", "dense", "resident"]
Direction = Literal["input", "output"]

TERMINALS = {
    "DIRECTION": "'input' or 'output'",
    "KIND": "'sparse', 'dense' or 'resident'",
    "ISL": "isl text in braces",
    "NAME": "a tensor or parameter name",
    "DIRECTION_ONLY": "'direction'",
    "INT": "an integer",
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
class MapParam:
    """A parameter the mapping declares, with its default value."""

    name: str
    default: int
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class MappingSpec:
    rectangle: IslText
    placement: IslText
    tensors: tuple[TensorSpec, ...]
    file: str = field(default="<string>", compare=False)
    params: tuple[MapParam, ...] = ()
    direction: bool = False  # the placement gives directions only (mapping/direction.py)

    def spec(self, tensor: str) -> TensorSpec | None:
        for s in self.tensors:
            if s.tensor == tensor:
                return s
        return None


def format_spec(spec: MappingSpec) -> str:
    lets = ", ".join(f"{p.name} = {p.default}" for p in spec.params)
    lines = [f"let {lets}"] if lets else []
    placement = "placement direction" if spec.direction else "placement"
    lines += [f"rectangle {spec.rectangle.text}", f"{placement} {spec.placement.text}"]
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
        if isinstance(err, UnexpectedToken) and str(err.token) == "lair":
            raise MappingError("this is a LAIR program, not a mapping spec; give it as the "
                               "program and its mapping with -m FILE.map",
                               SourceLoc(file, err.line, err.column)) from None
        unclosed = _unclosed_isl(err, text, file)
        if unclosed is not None:
            raise unclosed from None
        raise syntax_error(err, text, file, "mapping spec", _parser(), TERMINALS) from None
    try:
        entries = _ToSpec(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, DtgError):
            raise err.orig_exc from None
        raise
    rectangle: IslText | None = None
    placement: IslText | None = None
    direction = False
    tensors: dict[str, TensorSpec] = {}
    params: dict[str, MapParam] = {}
    for kind, value in entries:
        if kind == "let":
            for param in value:
                if param.name in params:
                    raise MappingError(f"parameter '{param.name}' is declared twice (first at "
                                       f"{params[param.name].loc})", param.loc)
                params[param.name] = param
        elif kind == "rectangle":
            if rectangle is not None:
                raise MappingError(f"second 'rectangle' entry (first at {rectangle.loc})",
                                   value.loc)
            rectangle = value
        elif kind == "placement":
            if placement is not None:
                raise MappingError(f"second 'placement' entry (first at {placement.loc})",
                                   value[0].loc)
            placement, direction = value
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
    return MappingSpec(rectangle, placement, tuple(tensors.values()), file,
                       tuple(params.values()), direction)


def _unclosed_isl(err: UnexpectedInput, text: str, file: str) -> LairSyntaxError | None:
    """The lexer stops at a '{' whose isl text has no '}' before the next '{' or the end
    of the file: say so there, rather than that '{' was unexpected."""
    if not isinstance(err, UnexpectedCharacters):
        return None
    pos = err.pos_in_stream
    if pos is None or pos >= len(text) or text[pos] != "{":
        return None
    after = re.compile(r"[^{}]*").match(text, pos + 1)
    stop = after.end() if after is not None else len(text)
    if stop < len(text) and text[stop] == "}":
        return None
    loc = SourceLoc(file, err.line, err.column)
    if stop < len(text):
        nxt = offset_loc(loc, text[pos:], stop - pos)
        why = f"the next '{{' is at {nxt.line}:{nxt.column}"
    else:
        end = offset_loc(loc, text[pos:], len(text) - pos)
        why = f"the file ends at {end.line}:{end.column}"
    return LairSyntaxError(f"'{{' opened here is never closed: {why}; expected '}}' at the "
                           "end of the isl text", loc)


TOKEN = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_']*)|(?P<number>[0-9]+)|(?P<op>//|->|\S)")
ISL_WORDS = frozenset({"and", "or", "not", "mod", "exists", "floor", "ceil", "min", "max",
                       "implies", "xor", "true", "false", "infty", "NaN", "rat", "div"})
"""Words of isl's syntax: not parameter names."""


def _substitute(text: IslText, values: Mapping[str, int]) -> IslText:
    """``text`` with every bound name replaced by its value, except as a tuple name.

    A bound name where isl declares a variable (alone as an element of a relation's
    domain tuple, on the left of a range ``N = 0:7``, in an ``exists`` list) would
    silently become a constant:
    that is an error, as is a divisor that is not positive. Beside another term, the
    value is multiplied explicitly (``2 TI`` becomes ``2*8``). Values shorter than the
    name are padded, so that error columns still point at what was written."""
    tokens = [(m.start(), m.end(), m.lastgroup, m.group()) for m in TOKEN.finditer(text.text)]
    # a tuple followed by '->' is the domain of a relation: its lone names are variables
    domain: set[int] = set()  # token indices of the '[' of domain tuples
    pending: list[int] = []
    for k, token in enumerate(tokens):
        if token[3] in "[(":
            pending.append(k)
        elif token[3] in "])" and pending:
            opening = pending.pop()
            if k + 1 < len(tokens) and tokens[k + 1][3] == "->":
                domain.add(opening)
    parts: list[str] = []
    last = 0
    opened: list[tuple[str, int]] = []  # brackets that are open and where, innermost last
    declaring = -1  # depth of an 'exists (' list, until its ':'

    def loc(offset: int) -> SourceLoc:
        return offset_loc(text.loc, text.text, offset)

    for k, (start, end, kind, word) in enumerate(tokens):
        before = tokens[k - 1] if k else None
        after = tokens[k + 1] if k + 1 < len(tokens) else None
        if kind == "op":
            if word in "[({":
                opened.append((word, k))
                if word == "(" and before is not None and before[3] == "exists":
                    declaring = len(opened)
            elif word in "])}" and opened:
                opened.pop()
            elif word == ":" and declaring == len(opened):
                declaring = -1
            continue
        if kind != "name" or word not in values:
            continue
        if after is not None and after[3] == "[":
            continue  # a tuple name
        alone = (opened and opened[-1][1] in domain and before is not None
                 and before[3] in "[," and after is not None and after[3] in ",]")
        ranged = after is not None and after[3] == "=" and bool(opened) and opened[-1][0] == "["
        if alone or ranged or declaring == len(opened):
            raise MappingError(
                f"'{word}' is a parameter, but isl would read it here as a variable of its "
                f"own; rename the variable, or write ({word}) where its value is meant",
                loc(start))
        value = values[word]
        if before is not None and before[3] in ("//", "/", "mod") and value <= 0:
            raise MappingError(f"'{word}' = {value} divides here; a divisor must be positive",
                               loc(start))
        shown = str(value) if value >= 0 else f"({value})"
        if before is not None and (before[2] == "number" or before[3] == ")" or (
                before[2] == "name" and before[3] not in ISL_WORDS)):
            shown = "*" + shown
        if after is not None and (after[2] == "number" or after[3] == "(" or (
                after[2] == "name" and after[3] not in ISL_WORDS)):
            shown += "*"
        parts += [text.text[last:start], shown.ljust(len(word))]
        last = end
    if not parts:
        return text
    return IslText("".join(parts) + text.text[last:], text.loc)


def bind_mapping(spec: MappingSpec, values: Mapping[str, int]) -> MappingSpec:
    """The spec with the program's sizes and the mapping's own parameters (their
    defaults, overridden by ``values``) written into its isl text."""
    env = {p.name: p.default for p in spec.params}
    env.update(values)
    if not env:
        return spec
    tensors = tuple(replace(t, relation=None if t.relation is None
                            else _substitute(t.relation, env)) for t in spec.tensors)
    return replace(spec, rectangle=_substitute(spec.rectangle, env),
                   placement=_substitute(spec.placement, env), tensors=tensors)


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

    def let(self, meta: Any, children: list[MapParam]) -> tuple[str, list[MapParam]]:
        return ("let", children)

    def binding(self, meta: Any, children: list[Token]) -> MapParam:
        name, value = children
        loc = SourceLoc(self.file, name.line or 1, name.column or 1)
        if str(name) in ISL_WORDS:
            raise MappingError(f"'{name}' is a word of isl's syntax; a parameter needs "
                               "another name", loc)
        return MapParam(str(name), int(value), loc)

    def rectangle(self, meta: Any, children: list[Token]) -> tuple[str, IslText]:
        return ("rectangle", self._isl(children[0]))

    def placement(self, meta: Any, children: list[Token]) -> tuple[str, tuple[IslText, bool]]:
        return ("placement", (self._isl(children[-1]), len(children) == 2))

    def tensor_spec(self, meta: Any, children: list[Token]) -> tuple[str, TensorSpec]:
        direction, name, kind, *rest = children
        relation = self._isl(rest[0]) if rest else None
        loc = SourceLoc(self.file, direction.line or 1, direction.column or 1)
        spec = TensorSpec(str(direction), str(name), str(kind), relation, loc)  # type: ignore[arg-type]
        return ("tensor", spec)
