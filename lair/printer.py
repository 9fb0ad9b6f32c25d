"""Print LAIR syntax trees back as LAIR text that parses to an equal tree."""

from __future__ import annotations

from dtg.lair import ast

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}


def format_expr(expr: ast.Expr, parent: int = 0, right: bool = False) -> str:
    """Print with the fewest parentheses that keep the tree's shape."""
    match expr:
        case ast.IntLit(value):
            return str(value)
        case ast.FloatLit(value):
            return repr(float(value))
        case ast.Name(name):
            return name
        case ast.Access(tensor, indices):
            return tensor + "".join(f"[{format_expr(i)}]" for i in indices)
        case ast.Call(func, args):
            return f"{func}({', '.join(format_expr(a) for a in args)})"
        case ast.Neg(operand):
            text = "-" + format_expr(operand, 3)
            return f"({text})" if parent >= 3 else text
        case ast.BinOp(op, lhs, rhs):
            prec = _PRECEDENCE[op]
            text = f"{format_expr(lhs, prec)} {op} {format_expr(rhs, prec, right=True)}"
            needs = prec < parent or (prec == parent and right)
            return f"({text})" if needs else text
    raise TypeError(f"not a LAIR expression: {expr!r}")


def format_decl(decl: ast.TensorDecl) -> str:
    return f"{decl.dtype} {decl.name}" + "".join(f"[{format_expr(d)}]" for d in decl.shape)


def format_statement(stmt: ast.Statement, indent: str = "  ") -> str:
    label = f"{stmt.label}: " if stmt.label else ""
    iterators = ", ".join(i.name for i in stmt.iterators)
    extents = ", ".join(format_expr(e) for e in stmt.extents)
    return (
        f"{indent}{label}all ({iterators}) in ({extents})\n"
        f"{indent}  {format_expr(stmt.target)} {stmt.op} {format_expr(stmt.value)}"
    )


def format_node(node: ast.Node) -> str:
    tparams = ""
    if node.type_params:
        tparams = "<" + ", ".join(
            p.name + (f"={p.default}" if p.default else "") for p in node.type_params
        ) + ">"
    sizes = ", ".join(p.name for p in node.size_params)
    inputs = ", ".join(format_decl(d) for d in node.inputs)
    outputs = ", ".join(format_decl(d) for d in node.outputs)
    body = "\n".join(format_statement(s) for s in node.body)
    return f"lair {node.name}{tparams}({sizes}):\n  {inputs} -> {outputs}\n{{\n{body}\n}}\n"


def format_module(module: ast.Module) -> str:
    parts = []
    if module.lets:
        lets = (f"let {b.name} = {format_expr(b.value)}" for b in module.lets)
        parts.append("\n".join(lets) + "\n")
    parts.extend(format_node(n) for n in module.nodes)
    return "\n".join(parts)
