"""Specialize parametric LAIR nodes to integer sizes and concrete element types.

Bindings come from ``let`` lines in the file and from the command line
(``--param M=32``); the command line wins. After specialization no node has size or
type parameters left, which is the form the compiler works on (paper §4.1.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from dtg.errors import LimitError, SourceLoc, SpecializationError
from dtg.lair import ast
from dtg.lair.graph import DTYPES
from dtg.lair.limits import MAX_INT, abbreviate, literal_value, number_text

Binding = int | str


def given(name: str) -> str:
    """A parameter as the user gave it, in words that fit the command line (``--param``)
    and the Python API (``params=``) alike."""
    return f"parameter '{name}' (given by --param or params=)"


def binding_value(name: str, value: object) -> Binding:
    """A value given for parameter ``name``: an integer or a type name as is, the text of
    an integer as that integer (as ``--param`` reads it); anything else is an error."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isidentifier():
        return value
    if isinstance(value, str) and "=" not in value:
        try:
            return parse_param(f"{name}={value}")[1]
        except LimitError:
            raise
        except SpecializationError:
            pass
    raise SpecializationError(f"{given(name)} is {abbreviate(repr(value), 40)}; expected an "
                              "integer size or a type name (float16, float32)")


def parse_param(text: str) -> tuple[str, Binding]:
    """Parse a command-line ``NAME=VALUE`` (an integer size or a type name)."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name.isidentifier() or not value:
        raise SpecializationError(
            f"malformed --param {abbreviate(text, 60)!r}; expected NAME=VALUE, e.g. --param M=32")
    digits = value.removeprefix("-").removeprefix("+")
    if digits.isascii() and digits.isdigit():
        number = literal_value(digits)
        if number is None:
            raise LimitError(f"{given(name)} is {number_text(value)}, which does not fit in "
                             f"64 bits; the limit is {MAX_INT}")
        return name, -number if value.startswith("-") else number
    if value.isidentifier():
        return name, value
    if len(value) <= 40:  # Python's other integer spellings, e.g. 1_000
        try:
            return name, _bounded(int(value), given(name), None)
        except ValueError:
            pass
    raise SpecializationError(
        f"malformed --param {abbreviate(text, 60)!r}: {abbreviate(value, 40)!r} is neither "
        "an integer nor a type name")


def eval_constant(expr: ast.Expr, env: Mapping[str, Binding], what: str) -> int:
    """Evaluate an integer constant expression (literals, bound names, + - * // %).

    Every intermediate value must fit in 64 bits (:data:`MAX_INT`), which also keeps the
    work small: no product of huge numbers is ever computed."""
    match expr:
        case ast.IntLit(value, loc):
            return _bounded(value, what, loc)
        case ast.Name(name, loc):
            bound = env.get(name)
            if bound is None:
                raise SpecializationError(f"unknown name '{name}' in {what}", loc)
            if not isinstance(bound, int):
                raise SpecializationError(
                    f"'{name}' is the type {bound}, expected an integer in {what}", loc)
            return _bounded(bound, what, loc)
        case ast.Neg(operand, loc):
            return _bounded(-eval_constant(operand, env, what), what, loc)
        case ast.BinOp(op, lhs, rhs, loc) if op in ("+", "-", "*", "//", "%"):
            a, b = eval_constant(lhs, env, what), eval_constant(rhs, env, what)
            if op in ("//", "%") and b == 0:
                raise SpecializationError(f"division by zero in {what}", loc)
            return _bounded({"+": a + b, "-": a - b, "*": a * b,
                             "//": a // b if b else 0, "%": a % b if b else 0}[op], what, loc)
        case ast.BinOp("/", _, _, loc):
            raise SpecializationError(
                f"expected an integer constant expression in {what}: '/' divides values; "
                "write '//' for the integer division of sizes", loc)
    raise SpecializationError(
        f"expected an integer constant expression in {what}", getattr(expr, "loc", None))


def _bounded(value: int, what: str, loc: SourceLoc | None) -> int:
    if abs(value) > MAX_INT:
        raise LimitError(f"{what} reaches {number_text(str(value))}, which does not fit in 64 "
                         f"bits; the limit is {MAX_INT}", loc)
    return value


def file_bindings(module: ast.Module) -> dict[str, tuple[Binding, SourceLoc]]:
    """Evaluate the ``let`` lines in order; later lines may use earlier ones."""
    env: dict[str, Binding] = {}
    out: dict[str, tuple[Binding, SourceLoc]] = {}
    for let in module.lets:
        if let.name in out:
            raise SpecializationError(
                f"'{let.name}' is bound twice (first at {out[let.name][1]})", let.loc)
        value: Binding
        if isinstance(let.value, ast.Name) and let.value.name in DTYPES:
            value = let.value.name
        else:
            value = eval_constant(let.value, env, f"the binding of '{let.name}'")
        env[let.name] = value
        out[let.name] = (value, let.loc)
    return out


def specialize(module: ast.Module, overrides: Mapping[str, Binding] | None = None) -> ast.Module:
    """Return the module with every node's parameters substituted by their values."""
    overrides = {name: binding_value(name, value) for name, value in (overrides or {}).items()}
    declared = {p.name for n in module.nodes for p in n.size_params}
    declared |= {p.name for n in module.nodes for p in n.type_params}
    lets = file_bindings(module)
    for name in overrides:
        if name not in declared and name not in lets:
            raise SpecializationError(
                f"unknown {given(name)}: no node declares it"
                + (f" (parameters: {', '.join(sorted(declared))})" if declared else ""))
    env: dict[str, Binding] = {k: v for k, (v, _) in lets.items()}
    env.update(overrides)
    nodes = tuple(_specialize_node(node, env) for node in module.nodes)
    return replace(module, lets=(), nodes=nodes)


def _specialize_node(node: ast.Node, env: Mapping[str, Binding]) -> ast.Node:
    sizes: dict[str, int] = {}
    seen: set[str] = set()
    for param in node.size_params:
        if param.name in seen:
            raise SpecializationError(
                f"duplicate parameter '{param.name}' of node '{node.name}'", param.loc)
        seen.add(param.name)
        value = env.get(param.name)
        if value is None:
            raise SpecializationError(
                f"size parameter '{param.name}' of node '{node.name}' has no value; give it "
                f"with 'let {param.name} = ...' in the file, --param {param.name}=... or "
                f"params={{'{param.name}': ...}}",
                param.loc)
        if not isinstance(value, int):
            raise SpecializationError(
                f"size parameter '{param.name}' of node '{node.name}' is bound to the type "
                f"{value}; expected an integer", param.loc)
        sizes[param.name] = value
    types: dict[str, str] = {}
    for tparam in node.type_params:
        if tparam.name in seen:
            raise SpecializationError(
                f"duplicate parameter '{tparam.name}' of node '{node.name}'", tparam.loc)
        seen.add(tparam.name)
        bound = env.get(tparam.name, tparam.default)
        if bound is None:
            raise SpecializationError(
                f"type parameter '{tparam.name}' of node '{node.name}' has no value and no "
                f"default; give it with --param {tparam.name}=float16 or "
                f"params={{'{tparam.name}': 'float16'}}", tparam.loc)
        if not isinstance(bound, str):
            raise SpecializationError(
                f"type parameter '{tparam.name}' of node '{node.name}' is bound to {bound}; "
                f"expected a type ({' or '.join(DTYPES)})", tparam.loc)
        types[tparam.name] = bound

    def subst(expr: ast.Expr) -> ast.Expr:
        match expr:
            case ast.Name(name, loc) if name in sizes:
                return ast.IntLit(sizes[name], loc)
            case ast.Access(tensor, indices, loc):
                return ast.Access(tensor, tuple(map(subst, indices)), loc)
            case ast.BinOp(op, lhs, rhs, loc):
                return ast.BinOp(op, subst(lhs), subst(rhs), loc)
            case ast.Neg(operand, loc):
                return ast.Neg(subst(operand), loc)
            case ast.Call(func, args, loc):
                return ast.Call(func, tuple(map(subst, args)), loc)
        return expr

    def decl(d: ast.TensorDecl) -> ast.TensorDecl:
        return replace(d, dtype=types.get(d.dtype, d.dtype), shape=tuple(map(subst, d.shape)))

    def stmt(s: ast.Statement) -> ast.Statement:
        for it in s.iterators:
            if it.name in sizes or it.name in types:
                raise SpecializationError(
                    f"iterator '{it.name}' has the name of a parameter of node '{node.name}'; "
                    "expected a fresh name", it.loc)
        target = subst(s.target)
        assert isinstance(target, ast.Access)
        return replace(s, extents=tuple(map(subst, s.extents)), target=target,
                       value=subst(s.value))

    return replace(
        node,
        type_params=(),
        size_params=(),
        inputs=tuple(map(decl, node.inputs)),
        outputs=tuple(map(decl, node.outputs)),
        body=tuple(map(stmt, node.body)),
    )
