"""Parse LAIR text into :mod:`lair.ast` trees, with readable syntax errors."""

from __future__ import annotations

import difflib
import re
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

from dtg.errors import DtgError, InputError, LairSyntaxError, LimitError, SourceLoc
from dtg.lair import ast
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
                 table: dict[str, str] | None = None, noun: str | None = None,
                 blocks: bool = False) -> LairSyntaxError:
    """A :class:`LairSyntaxError` that names the position, the culprit and the alternatives.

    An unexpected first token means the file is not a ``noun`` at all (a program given as
    a mapping, say): the message then says so without quoting the file. A word close to
    a keyword the grammar would have taken there gets a suggestion; with ``blocks``, a
    '{' whose '}' is missing is reported where it opens."""
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
    unclosed = _unclosed_brace(err, expected, lark, file) if blocks else None
    if unclosed is not None:
        token = getattr(err, "token", None)
        if isinstance(token, Token) and token.type != "$END":
            why = f"{describe_token(token)} at {line}:{column} starts the next item"
        else:
            end_line, end_column = _end_position(text)
            why = f"the file ends at {end_line}:{end_column}"
        return LairSyntaxError(f"'{{' opened here is never closed: {why}; expected '}}' "
                               "after the block's last statement", unclosed)
    if isinstance(err, UnexpectedEOF) or (
            isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        line, column = _end_position(text)
        return LairSyntaxError(f"unexpected end of file in {what}{alternatives}",
                               SourceLoc(file, line, column))
    if isinstance(err, UnexpectedToken):
        culprit = describe_token(err.token)
        start, end = _word_around(text, err.token.start_pos)
        split = end > start and start < (err.token.start_pos or 0)
        accepted = _accepts_at(lark, text, start) if split else None
        if accepted is not None:  # the lexer split a word: 'inn' as the keyword 'in' and 'n'
            culprit = f"'{abbreviate(text[start:end])}'"
            loc = SourceLoc(file, text.count("\n", 0, start) + 1,
                            start - text.rfind("\n", 0, start))
            expected = accepted
            alternatives = (f"; expected {describe_expected(expected, lark, table)}"
                            if expected else "")
        hint = _misspelled_keyword(err, expected, text, lark)
        if _at_start(err):
            return LairSyntaxError(
                f"this file does not start like a {noun or what}{alternatives}{hint}", loc)
        return LairSyntaxError(f"unexpected {culprit} in {what}{alternatives}{hint}", loc)
    return LairSyntaxError(f"cannot parse {what}", loc)


def keywords(names: Iterable[str], lark: Lark) -> set[str]:
    """The words among terminals ``names``: literal keywords (``'all'``) and the
    alternatives of word-list patterns (``DIRECTION: "input" | "output"``)."""
    patterns = {t.name: t.pattern for t in lark.terminals}
    words: set[str] = set()
    for name in names:
        pattern = patterns.get(name)
        if pattern is None:
            continue
        if pattern.type == "str" and pattern.value.isidentifier():
            words.add(pattern.value)
        elif pattern.type == "re":
            listed = re.fullmatch(r"\(\?:(\w+(?:\|\w+)*)\)", pattern.value)
            if listed is not None:
                words.update(listed.group(1).split("|"))
    return words


def _misspelled_keyword(err: UnexpectedToken, expected: set[str], text: str, lark: Lark
                        ) -> str:
    """"; did you mean 'all'?" when the unexpected word, or the word just before the
    unexpected token, is close to a keyword the grammar would have accepted in its place
    (``al (i) in (N)`` reads ``al`` as a label and stops at ``(``); else ""."""
    token = err.token
    every = keywords((t.name for t in lark.terminals), lark)  # a keyword is no misspelling
    start, end = _word_around(text, token.start_pos)
    if end > start:
        if text[start:end] in every:
            return ""
        close = difflib.get_close_matches(text[start:end], sorted(keywords(expected, lark)),
                                          n=1)
        return f"; did you mean '{close[0]}'?" if close else ""
    history = getattr(err, "token_history", None) or []
    before = history[-1] if history else None
    if not isinstance(before, Token):
        return ""
    start, end = _word_around(text, before.start_pos)
    word = text[start:end]
    there = _accepts_at(lark, text, start) if word and word not in every else None
    if not there:
        return ""
    close = difflib.get_close_matches(word, sorted(keywords(there, lark) - {word}), n=1)
    return f"; did you mean '{close[0]}' instead of '{word}'?" if close else ""


def _accepts_at(lark: Lark, text: str, offset: int) -> set[str] | None:
    """The terminals the parser accepts after ``text[:offset]`` (None if that fails)."""
    try:
        prefix = lark.parse_interactive(text[:offset])
        prefix.exhaust_lexer()
        return set(prefix.accepts())
    except UnexpectedInput:
        return None


def _word_around(text: str, pos: int | None) -> tuple[int, int]:
    """The start and end of the identifier that covers offset ``pos`` (empty if none)."""
    if pos is None or pos >= len(text) or not (text[pos].isalnum() or text[pos] == "_"):
        return 0, 0
    start = end = pos
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    if text[start].isdigit():
        return 0, 0
    return start, end


def _unclosed_brace(err: UnexpectedInput, expected: set[str], lark: Lark, file: str
                    ) -> SourceLoc | None:
    """Where the innermost open '{' is, when the parser needed its '}' and met the end of
    the file or the start of a new top-level item instead; else None."""
    closing = {t.name for t in lark.terminals
               if t.pattern.type == "str" and t.pattern.value == "}"}
    if not closing & expected:
        return None
    token = getattr(err, "token", None)
    at_end = isinstance(err, UnexpectedEOF) or (
        isinstance(token, Token) and token.type == "$END")
    if not at_end and (not isinstance(token, Token) or token.type not in _item_starts(lark)):
        return None
    interactive = getattr(err, "interactive_parser", None)
    stack = getattr(getattr(interactive, "parser_state", None), "value_stack", None) or []
    for value in reversed(stack):
        if isinstance(value, Token) and str(value) == "{" and value.line is not None:
            return SourceLoc(file, value.line, value.column or 1)
    return None


def _item_starts(lark: Lark) -> frozenset[str]:
    """Terminals a file may start with, other than names: what begins a top-level item."""
    starts = lark.parse_interactive("").accepts()
    names = {t.name for t in lark.terminals if t.pattern.type == "re"}
    return frozenset(starts - names - {"$END"})


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
        unindexed = _unindexed_target(err, file)
        if unindexed is not None:
            raise unindexed from None
        raise syntax_error(err, text, file, "LAIR", _parser(), noun="LAIR program",
                           blocks=True) from None
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


def _unindexed_target(err: UnexpectedInput, file: str) -> LairSyntaxError | None:
    """A statement that assigns to a bare name (``s += x[i]``): LAIR defines tensor
    elements, so a target always has an index and a rank-0 tensor cannot be one."""
    if not isinstance(err, UnexpectedToken) or err.token.type != "ASSIGN":
        return None
    history = getattr(err, "token_history", None) or []
    name = history[-1] if history else None
    if not isinstance(name, Token) or name.type != "NAME" or "LSQB" not in _acceptable(err):
        return None
    return LairSyntaxError(
        f"the target '{name}' has no index; a statement defines tensor elements, as in "
        f"{name}[i] {err.token} ..., so a rank-0 tensor (a scalar) cannot be a target: "
        f"declare it with one element, {name}[1], and define {name}[0]",
        SourceLoc(file, name.line or 1, name.column or 1))


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
