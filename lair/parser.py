"""Parse LAIR text into :mod:`lair.ast` trees, with readable syntax errors."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from dtg.lair import ast
from dtg.lair.diagnostics import DtgError, InputError, LairSyntaxError, LimitError, SourceLoc
from dtg.lair.files import stat_input
from dtg.lair.limits import (
    MAX_INPUT_BYTES,
    MAX_INT,
    MAX_NESTING,
    abbreviate,
    literal_value,
    number_text,
    rule_names,
    too_deep,
    tree_loc,
)

# Friendly names for the grammar's pattern terminals; literal terminals print as quoted text.
TERMINAL_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "ASSIGN": "an assignment ('=', '+=' or 'max=')",
    "$END": "end of file",
}


def describe_expected(names: Iterable[str], lark: Lark, table: dict[str, str] | None = None
                      ) -> str:
    """Turn lark terminal names into an English list ("a name or '('")."""
    table = TERMINAL_NAMES if table is None else table
    patterns = {t.name: t.pattern for t in lark.terminals}
    words = set()
    for name in names:
        if name in table:
            words.add(table[name])
        elif name in patterns and patterns[name].type == "str":
            words.add(f"'{patterns[name].value}'")
        else:
            words.add(name.lower())
    ordered = sorted(words)
    if not ordered:
        return "nothing"
    if len(ordered) == 1:
        return ordered[0]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    return f"'{abbreviate(str(token))}'"


def syntax_error(err: UnexpectedInput, text: str, file: str, what: str, lark: Lark,
                 table: dict[str, str] | None = None, noun: str | None = None
                 ) -> LairSyntaxError:
    """A :class:`LairSyntaxError` that names the position, the culprit and the alternatives.

    An unexpected first token means the file is not a ``noun`` at all (a program given as
    a mapping, say): the message then says so without quoting the file."""
    line = getattr(err, "line", None)
    column = getattr(err, "column", None)
    if not isinstance(line, int) or line < 1:
        line, column = _end_position(text)
    loc = SourceLoc(file, line, column if isinstance(column, int) else 1)
    expected = _acceptable(err)
    alternatives = f"; expected {describe_expected(expected, lark, table)}" if expected else ""
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        char = text[pos] if pos is not None and pos < len(text) else "?"
        return LairSyntaxError(f"unexpected character {char!r} in {what}{alternatives}", loc)
    if isinstance(err, UnexpectedEOF) or (
            isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        line, column = _end_position(text)
        return LairSyntaxError(f"unexpected end of file in {what}{alternatives}",
                               SourceLoc(file, line, column))
    if isinstance(err, UnexpectedToken):
        if _at_start(err):
            return LairSyntaxError(
                f"this file does not start like a {noun or what}{alternatives}", loc)
        return LairSyntaxError(
            f"unexpected {describe_token(err.token)} in {what}{alternatives}", loc)
    return LairSyntaxError(f"cannot parse {what}", loc)


def _at_start(err: UnexpectedToken) -> bool:
    """Whether the parser stopped before consuming any token."""
    interactive = getattr(err, "interactive_parser", None)
    state = getattr(interactive, "parser_state", None)
    stack = getattr(state, "state_stack", None)
    return isinstance(stack, list) and len(stack) == 1


def _acceptable(err: UnexpectedInput) -> set[str]:
    """Terminals the parser would have accepted where it stopped."""
    interactive = getattr(err, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except Exception:  # lark may fail to simulate on odd states; fall back below
            pass
    accepts = getattr(err, "accepts", None) or getattr(err, "expected", None)
    return set(accepts or ())


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


@cache
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "lair.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def read_source(path: str | Path) -> str:
    """Read a text file within the input budget (:data:`MAX_INPUT_BYTES`), reporting
    missing, special, oversized and non-UTF-8 files as :class:`InputError`.

    The size is checked before reading and the read is bounded, so ``/dev/zero`` or a
    huge file costs nothing; FIFOs and devices are refused before they are opened (an
    open FIFO would block)."""
    path = Path(path)
    info = stat_input(path)
    if not stat.S_ISREG(info.st_mode):
        raise InputError("not a regular file (a device, pipe or socket); expected a text file",
                         SourceLoc(str(path), 1, 1))
    if info.st_size > MAX_INPUT_BYTES:
        raise _too_large(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_INPUT_BYTES:  # the file grew after stat
        raise _too_large(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        raise InputError(
            f"byte 0x{data[exc.start]:02x} is not UTF-8 text; expected a text file",
            SourceLoc(str(path), line, column),
        ) from None
    if "\x00" in text:
        before = text[: text.index("\x00")]
        line = before.count("\n") + 1
        raise InputError("NUL character in input; expected a text file",
                         SourceLoc(str(path), line, len(before) - (before.rfind("\n") + 1) + 1))
    return text


def _too_large(path: Path) -> InputError:
    return InputError(f"the file is larger than {MAX_INPUT_BYTES >> 20} MiB, the limit for input "
                      "files", SourceLoc(str(path), 1, 1))


def parse_file(path: str | Path) -> ast.Module:
    return parse(read_source(path), str(path))


# Rules that nest expressions (and so the recursion of every later stage).
NESTING_RULES = rule_names(["add", "sub", "mul", "floordiv", "div", "mod", "neg", "call",
                            "access", "dim"])


def parse(text: str, file: str = "<string>") -> ast.Module:
    """Parse LAIR source text; raises :class:`LairSyntaxError` with position on bad input."""
    if len(text) > MAX_INPUT_BYTES:
        raise LimitError(f"the program has {len(text)} characters, more than the limit of "
                         f"{MAX_INPUT_BYTES}", SourceLoc(file, 1, 1))
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(err, text, file, "LAIR", _parser(), noun="LAIR program") from None
    check_nesting(tree, file, NESTING_RULES, "expression")
    try:
        module: ast.Module = _ToAst(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, DtgError):
            raise err.orig_exc from None
        raise
    if not module.nodes:
        raise LairSyntaxError("no 'lair' node in file; expected at least one node",
                              SourceLoc(file, 1, 1))
    return module


def check_nesting(tree: Tree[Any], file: str, counts: Callable[[str], bool], what: str,
                  hint: str = "split it into several statements") -> None:
    """Refuse trees nested beyond :data:`MAX_NESTING`, which later stages walk
    recursively; the error points at the first construct too deep."""
    deep = too_deep(tree, counts)
    if deep is not None:
        raise LimitError(f"{what} nested more than {MAX_NESTING} levels deep, the limit; "
                         f"{hint}", tree_loc(deep, file))


def int_literal(token: Token, file: str) -> int:
    """The value of an INT token, or a located error beyond :data:`MAX_INT`."""
    value = literal_value(str(token))
    if value is None:
        raise LimitError(f"integer literal {number_text(str(token))} is larger than {MAX_INT}, "
                         "the largest integer dtg takes (64 bits)",
                         SourceLoc(file, token.line or 1, token.column or 1))
    return value


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive[Token, Any]):
    """Builds AST nodes bottom-up; every node gets the position where its text starts."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _loc(self, meta: Any) -> SourceLoc:
        if getattr(meta, "empty", False):
            return SourceLoc(self.file, 1, 1)
        return SourceLoc(self.file, meta.line, meta.column)

    def _tok(self, token: Token) -> SourceLoc:
        return SourceLoc(self.file, token.line or 1, token.column or 1)

    def start(self, meta: Any, items: list[Any]) -> ast.Module:
        lets: list[ast.Let] = []
        for item in items:
            if isinstance(item, list):
                lets.extend(item)
        nodes = tuple(i for i in items if isinstance(i, ast.Node))
        return ast.Module(tuple(lets), nodes, self.file)

    def let(self, meta: Any, bindings: list[ast.Let]) -> list[ast.Let]:
        return bindings

    def binding(self, meta: Any, children: list[Any]) -> ast.Let:
        name, value = children
        return ast.Let(str(name), value, self._tok(name))

    def node(self, meta: Any, children: list[Any]) -> ast.Node:
        name, type_params, sizes, inputs, outputs, *body = children
        return ast.Node(str(name), tuple(type_params or ()), sizes, inputs, outputs, tuple(body),
                        self._tok(name))

    def size_params(self, meta: Any, names: list[Token | None]) -> tuple[ast.Ident, ...]:
        return tuple(ast.Ident(str(n), self._tok(n)) for n in names if n is not None)

    def type_params(self, meta: Any, params: list[ast.TypeParam]) -> list[ast.TypeParam]:
        return params

    def type_param(self, meta: Any, children: list[Any]) -> ast.TypeParam:
        name, default = children
        return ast.TypeParam(str(name), None if default is None else str(default), self._tok(name))

    def decls(self, meta: Any, decls: list[ast.TensorDecl]) -> tuple[ast.TensorDecl, ...]:
        return tuple(decls)

    def decl(self, meta: Any, children: list[Any]) -> ast.TensorDecl:
        dtype, name, *dims = children
        return ast.TensorDecl(str(dtype), str(name), tuple(dims), self._tok(name))

    def dim(self, meta: Any, children: list[Any]) -> ast.Expr:
        return children[0]

    def statement(self, meta: Any, children: list[Any]) -> ast.Statement:
        label, *rest = children
        iterators: list[ast.Ident] = []
        while isinstance(rest[0], Token) and rest[0].type == "NAME":
            iterators.append(ast.Ident(str(rest[0]), self._tok(rest[0])))
            rest = rest[1:]
        *extents, target, op, value = rest
        return ast.Statement(
            None if label is None else str(label),
            tuple(iterators),
            tuple(extents),
            target,
            str(op),
            value,
            self._tok(label) if label is not None else self._loc(meta),
        )

    def access(self, meta: Any, children: list[Any]) -> ast.Access:
        name, *indices = children
        return ast.Access(str(name), tuple(indices), self._tok(name))

    def int_lit(self, meta: Any, children: list[Token]) -> ast.IntLit:
        return ast.IntLit(int_literal(children[0], self.file), self._tok(children[0]))

    def float_lit(self, meta: Any, children: list[Token]) -> ast.FloatLit:
        return ast.FloatLit(float(children[0]), self._tok(children[0]))

    def name(self, meta: Any, children: list[Token]) -> ast.Name:
        return ast.Name(str(children[0]), self._tok(children[0]))

    def call(self, meta: Any, children: list[Any]) -> ast.Call:
        name, *args = children
        return ast.Call(str(name), tuple(args), self._tok(name))

    def neg(self, meta: Any, children: list[Any]) -> ast.Neg:
        return ast.Neg(children[0], self._loc(meta))

    def _bin(self, op: str, meta: Any, children: list[Any]) -> ast.BinOp:
        return ast.BinOp(op, children[0], children[1], self._loc(meta))

    def add(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("+", meta, c)

    def sub(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("-", meta, c)

    def mul(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("*", meta, c)

    def div(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("/", meta, c)

    def floordiv(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("//", meta, c)

    def mod(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return self._bin("%", meta, c)
