"""Semantic analysis: turn a specialized LAIR module into a checked :class:`Graph`.

Each rule of the language (paper §4.1.1) has its own error with the position of the
offending text. Checks that need isl (bounds, injectivity) live in :mod:`lair.lower`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, cast

import networkx as nx

from dtg.errors import LairSemanticError, LimitError, SourceLoc
from dtg.lair import ast
from dtg.lair.graph import (
    DTYPES,
    AffineExpr,
    Binary,
    Const,
    Graph,
    Read,
    Role,
    Stmt,
    Tensor,
    TensorAccess,
    Unary,
    Value,
)
from dtg.lair.limits import MAX_INT, MAX_RANK, MAX_SIZE, counted
from dtg.lair.printer import format_expr
from dtg.lair.specialize import eval_constant

RESERVED = re.compile(r"^(PE|PE_X|PE_Y|index(_[0-9]+)?)$")


def _err(message: str, loc: SourceLoc | None, *notes: str) -> LairSemanticError:
    return LairSemanticError(message, loc, notes=notes)


@dataclass
class _TensorInfo:
    decl: ast.TensorDecl
    shape: tuple[int, ...]
    defined_by: str | None = None
    defined_at: SourceLoc | None = None
    readers: set[str] = field(default_factory=set)


def analyze(module: ast.Module) -> Graph:
    """Check a specialized module and build its statement graph in dependence order."""
    if not module.nodes:
        raise _err("no 'lair' node in file", SourceLoc(module.file, 1, 1))
    tensors: dict[str, _TensorInfo] = {}
    stmts: list[Stmt] = []
    node_names: dict[str, SourceLoc] = {}
    for node in module.nodes:
        if node.size_params or node.type_params:
            raise _err(f"node '{node.name}' is not specialized", node.loc)
        if node.name in node_names:
            raise _err(f"duplicate node '{node.name}'", node.loc,
                       f"first defined at {node_names[node.name]}")
        node_names[node.name] = node.loc
        stmts.extend(_check_node(node, tensors))
    names: dict[str, SourceLoc] = {}
    for stmt in stmts:
        if stmt.name in names:
            raise _err(f"duplicate statement name '{stmt.name}'", stmt.loc,
                       f"first used at {names[stmt.name]}; label statements with 'name: all ...'")
        names[stmt.name] = stmt.loc
    order = _dependence_order(stmts)
    graph_tensors = []
    for name, info in tensors.items():
        role: Role
        if info.defined_by is None:
            role = "input"
        elif info.readers:
            role = "internal"
        else:
            role = "output"
        graph_tensors.append(Tensor(name, info.decl.dtype, info.shape, role, info.decl.loc))
    graph = Graph(tuple(graph_tensors), tuple(order), module.file)
    graph.verify()
    return graph


def _check_node(node: ast.Node, tensors: dict[str, _TensorInfo]) -> list[Stmt]:
    local: dict[str, tuple[ast.TensorDecl, bool]] = {}  # name -> (decl, is_output)
    for decl, is_output in [(d, False) for d in node.inputs] + [(d, True) for d in node.outputs]:
        if decl.name in local:
            raise _err(f"tensor '{decl.name}' declared twice in node '{node.name}'", decl.loc,
                       f"first declared at {local[decl.name][0].loc}")
        _check_name(decl.name, "tensor", decl.loc)
        local[decl.name] = (decl, is_output)
        shape = _check_decl(decl)
        if decl.name in tensors:
            other = tensors[decl.name]
            if other.decl.dtype != decl.dtype or other.shape != shape:
                raise _err(
                    f"tensor '{decl.name}' declared as {decl.dtype}{list(shape)} here but as "
                    f"{other.decl.dtype}{list(other.shape)} elsewhere", decl.loc,
                    f"other declaration at {other.decl.loc}")
        else:
            tensors[decl.name] = _TensorInfo(decl, shape)
    stmts = []
    for k, statement in enumerate(node.body):
        name = statement.label or (node.name if len(node.body) == 1 else f"{node.name}_{k}")
        _check_name(name, "statement", statement.loc)
        stmts.append(_check_statement(statement, name, node, local, tensors))
    for decl, is_output in local.values():
        if is_output and tensors[decl.name].defined_by is None:
            raise _err(f"output '{decl.name}' of node '{node.name}' is never defined", decl.loc)
    return stmts


def _check_name(name: str, what: str, loc: SourceLoc) -> None:
    if RESERVED.match(name):
        raise _err(f"'{name}' is reserved for the PE and index space; choose another {what} "
                   "name", loc)


def _check_decl(decl: ast.TensorDecl) -> tuple[int, ...]:
    if decl.dtype not in DTYPES:
        raise _err(f"unknown type '{decl.dtype}' for tensor '{decl.name}'; expected "
                   f"{' or '.join(DTYPES)} or a type parameter", decl.loc)
    if len(decl.shape) > MAX_RANK:
        raise LimitError(f"tensor '{decl.name}' has {len(decl.shape)} dimensions, more than "
                         f"the limit of {MAX_RANK}", decl.loc)
    shape = []
    for k, dim in enumerate(decl.shape):
        what = f"dimension {k} of '{decl.name}'"
        value = _constant(dim, what)
        if value < 1:
            raise _err(f"{what} is {value}; expected a positive size", _where(dim, decl.loc))
        _check_size(value, what, _where(dim, decl.loc))
        shape.append(value)
    return tuple(shape)


def _check_size(value: int, what: str, loc: SourceLoc) -> None:
    if value > MAX_SIZE:
        raise LimitError(f"{what} is {value}, more than the limit of {MAX_SIZE} on sizes",
                         loc)


def _constant(expr: ast.Expr, what: str) -> int:
    try:
        return eval_constant(expr, {}, what)
    except LimitError:
        raise
    except Exception as exc:
        hint = "; write '//' for the integer division of sizes" if isinstance(
            expr, ast.BinOp) and expr.op == "/" else ""
        raise _err(f"expected an integer constant expression for {what}, got "
                   f"'{format_expr(expr)}'{hint}", getattr(expr, "loc", None)) from exc


def _where(expr: ast.Expr, fallback: SourceLoc) -> SourceLoc:
    loc = getattr(expr, "loc", None)
    return loc if isinstance(loc, SourceLoc) and loc.line > 0 else fallback


def _check_statement(stmt: ast.Statement, name: str, node: ast.Node,
                     local: dict[str, tuple[ast.TensorDecl, bool]],
                     tensors: dict[str, _TensorInfo]) -> Stmt:
    iterators: dict[str, SourceLoc] = {}
    for it in stmt.iterators:
        if it.name in iterators:
            raise _err(f"duplicate iterator '{it.name}'", it.loc,
                       f"first declared at {iterators[it.name]}")
        if it.name in local:
            raise _err(f"iterator '{it.name}' has the name of a tensor", it.loc)
        _check_name(it.name, "iterator", it.loc)
        iterators[it.name] = it.loc
    if len(stmt.extents) != len(stmt.iterators):
        raise _err(f"{counted(len(stmt.iterators), 'iterator')} but "
                   f"{counted(len(stmt.extents), 'extent')}; "
                   "expected one extent per iterator", stmt.loc)
    if len(stmt.iterators) > MAX_RANK:
        raise LimitError(f"statement '{name}' has {len(stmt.iterators)} iterators, more than "
                         f"the limit of {MAX_RANK}", stmt.loc)
    extents = []
    for it, ext in zip(stmt.iterators, stmt.extents, strict=True):
        extent = _constant(ext, f"the extent of '{it.name}'")
        if extent < 1:
            raise _err(f"the extent of '{it.name}' is {extent}; expected a positive size",
                       _where(ext, stmt.loc))
        _check_size(extent, f"the extent of '{it.name}'", _where(ext, stmt.loc))
        extents.append(extent)

    target = _resolve_access(stmt.target, iterators, local, tensors)
    _, is_output = local[target.tensor]
    if not is_output:
        raise _err(f"cannot define '{target.tensor}': it is an input of node '{node.name}'; "
                   "expected one of its outputs", stmt.target.loc)
    info = tensors[target.tensor]
    if info.defined_by is not None:
        raise _err(f"tensor '{target.tensor}' is defined twice (LAIR is single assignment)",
                   stmt.target.loc, f"first defined at {info.defined_at}")
    info.defined_by, info.defined_at = name, stmt.target.loc

    accesses: dict[str, TensorAccess] = {}
    value = _resolve_value(stmt.value, iterators, local, tensors, accesses)
    if target.tensor in accesses:
        kind = "reduction target" if stmt.op != "=" else "target"
        raise _err(f"{kind} '{target.tensor}' is also read in its statement; a LAIR statement "
                   "never reads the tensor it defines", accesses[target.tensor].loc)
    for tensor in accesses:
        tensors[tensor].readers.add(name)
    return Stmt(
        name=name,
        node=node.name,
        iterators=tuple(iterators),
        extents=tuple(extents),
        op=cast(Literal["=", "+=", "max="], stmt.op),
        target=target,
        reads=tuple(accesses.values()),
        value=value,
        loc=stmt.loc,
    )


def _lookup(name: str, loc: SourceLoc, local: dict[str, tuple[ast.TensorDecl, bool]]
            ) -> ast.TensorDecl:
    if name not in local:
        known = ", ".join(sorted(local)) or "none"
        raise _err(f"unknown tensor '{name}'; expected a tensor declared by this node "
                   f"({known})", loc)
    return local[name][0]


def _resolve_access(acc: ast.Access, iterators: dict[str, SourceLoc],
                    local: dict[str, tuple[ast.TensorDecl, bool]],
                    tensors: dict[str, _TensorInfo]) -> TensorAccess:
    _lookup(acc.tensor, acc.loc, local)
    rank = len(tensors[acc.tensor].shape)
    if len(acc.indices) != rank:
        raise _err(f"tensor '{acc.tensor}' has rank {rank} but is accessed with "
                   f"{len(acc.indices)} ind{'ex' if len(acc.indices) == 1 else 'ices'}", acc.loc)
    index = tuple(_affine(e, iterators, acc) for e in acc.indices)
    return TensorAccess(acc.tensor, index, acc.loc, format_expr(acc))


def _affine(expr: ast.Expr, iterators: dict[str, SourceLoc], acc: ast.Access) -> AffineExpr:
    """Affine form of an index expression; anything else is a 'non-affine index' error.
    Coefficients and constants must fit in 64 bits (isl takes them as C longs)."""
    result = _affine_form(expr, iterators, acc)
    if any(abs(v) > MAX_INT for v in (result.constant, *(c for _, c in result.terms))):
        raise LimitError(f"index '{format_expr(expr)}' of '{acc.tensor}' has a coefficient or "
                         f"constant beyond 64 bits (the limit is {MAX_INT})",
                         _where(expr, acc.loc))
    return result


def _affine_form(expr: ast.Expr, iterators: dict[str, SourceLoc], acc: ast.Access
                 ) -> AffineExpr:
    where = _where(expr, acc.loc)
    text = format_expr(expr)
    match expr:
        case ast.IntLit(value):
            return AffineExpr.make({}, value)
        case ast.FloatLit():
            raise _err(f"index '{text}' of '{acc.tensor}' is not an integer", where)
        case ast.Name(name):
            if name in iterators:
                return AffineExpr.make({name: 1})
            raise _err(f"unknown iterator '{name}' in index of '{acc.tensor}'; expected one of "
                       f"{', '.join(iterators) or 'no iterators'}", where)
        case ast.Neg(operand):
            inner = _affine(operand, iterators, acc)
            return AffineExpr.make({k: -v for k, v in inner.terms}, -inner.constant)
        case ast.BinOp("+" | "-" as op, lhs, rhs):
            a, b = _affine(lhs, iterators, acc), _affine(rhs, iterators, acc)
            sign = 1 if op == "+" else -1
            coeffs = dict(a.terms)
            for k, v in b.terms:
                coeffs[k] = coeffs.get(k, 0) + sign * v
            return AffineExpr.make(coeffs, a.constant + sign * b.constant)
        case ast.BinOp("*", lhs, rhs):
            a, b = _affine(lhs, iterators, acc), _affine(rhs, iterators, acc)
            if a.terms and b.terms:
                raise _err(f"non-affine index '{text}' of '{acc.tensor}': product of iterators; "
                           "LAIR indices are affine", where)
            scale, other = (a.constant, b) if not a.terms else (b.constant, a)
            return AffineExpr.make({k: scale * v for k, v in other.terms},
                                   scale * other.constant)
        case ast.BinOp("/" | "//" as op, _, _):
            raise _err(f"non-affine index '{text}' of '{acc.tensor}': division ('{op}'); "
                       "LAIR indices are affine", where)
        case ast.BinOp("%", _, _):
            raise _err(f"non-affine index '{text}' of '{acc.tensor}': modulo; "
                       "LAIR indices are affine", where)
        case ast.Access() | ast.Call():
            raise _err(f"non-affine index '{text}' of '{acc.tensor}': indices may use only "
                       "iterators and integer constants", where)
    raise _err(f"unsupported index '{text}'", where)


def _resolve_value(expr: ast.Expr, iterators: dict[str, SourceLoc],
                   local: dict[str, tuple[ast.TensorDecl, bool]],
                   tensors: dict[str, _TensorInfo],
                   accesses: dict[str, TensorAccess]) -> Value:
    def read(acc: ast.Access) -> Value:
        resolved = _resolve_access(acc, iterators, local, tensors)
        previous = accesses.get(resolved.tensor)
        if previous is not None and previous.index != resolved.index:
            raise _err(f"tensor '{acc.tensor}' is accessed as {resolved} here and as {previous} "
                       "before; a tensor is accessed through a single index expression in a "
                       "statement", acc.loc, f"first access at {previous.loc}")
        accesses.setdefault(resolved.tensor, resolved)
        return Read(resolved.tensor)

    def go(e: ast.Expr) -> Value:
        match e:
            case ast.IntLit(value):
                return Const(float(value))
            case ast.FloatLit(value):
                return Const(value)
            case ast.Name(name, loc):
                if name in iterators:
                    raise _err(f"iterator '{name}' used as a value; expected a tensor element "
                               "or a constant", loc)
                if name in local and not local[name][0].shape:
                    return read(ast.Access(name, (), loc))
                if name in local:
                    raise _err(f"tensor '{name}' used without indices; it has rank "
                               f"{len(tensors[name].shape)}", loc)
                _lookup(name, loc, local)
            case ast.Access():
                return read(e)
            case ast.Neg(operand):
                return Unary("neg", go(operand))
            case ast.BinOp("+" | "-" | "*" as op, lhs, rhs):
                return Binary(op, go(lhs), go(rhs))
            case ast.BinOp(op, _, _, loc):
                raise _err(f"operator '{op}' is not supported in LAIR values; expected +, -, * "
                           "or max(a, b)", loc)
            case ast.Call("max", args, loc):
                if len(args) != 2:
                    raise _err(f"max takes 2 arguments, got {len(args)}", loc)
                return Binary("max", go(args[0]), go(args[1]))
            case ast.Call(func, _, loc):
                raise _err(f"unknown function '{func}'; expected max(a, b)", loc)
        raise _err(f"unsupported expression '{format_expr(e)}'", getattr(e, "loc", None))

    return go(expr)


def _dependence_order(stmts: list[Stmt]) -> list[Stmt]:
    """Statements sorted so every tensor is defined before it is read (source order on ties)."""
    position = {s.name: k for k, s in enumerate(stmts)}
    definer = {s.target.tensor: s.name for s in stmts}
    deps: nx.DiGraph = nx.DiGraph()
    deps.add_nodes_from(position)
    for stmt in stmts:
        for read in stmt.reads:
            if read.tensor in definer:
                deps.add_edge(definer[read.tensor], stmt.name, tensor=read.tensor)
    try:
        order = list(nx.lexicographical_topological_sort(deps, key=position.__getitem__))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(deps)
        path = " -> ".join(f"{a} ({deps.edges[a, b]['tensor']})" for a, b in cycle)
        first = next(s for s in stmts if s.name == cycle[0][0])
        raise _err(f"cyclic data dependence between statements: {path} -> {cycle[0][0]}",
                   first.loc) from None
    by_name = {s.name: s for s in stmts}
    return [by_name[n] for n in order]
