"""Print PE modules as the C-like text that pesim parses (``docs/pecode.md``)."""

from __future__ import annotations

import math

from dtg.pe.ir import (
    Activate,
    Array,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FConst,
    FExpr,
    FNeg,
    For,
    FValue,
    IBin,
    IConst,
    IExpr,
    If,
    INeg,
    ISel,
    IVar,
    Load,
    Not,
    PeModule,
    PeProgram,
    Recv,
    Route,
    Run,
    Send,
    SendEnd,
    SetInt,
    SimdConfig,
    SimdOperand,
    Stmt,
    Store,
    Task,
)

_IPREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def iexpr(e: IExpr, parent: int = 0, right: bool = False) -> str:
    match e:
        case IConst(v):
            text = str(v)
            return f"({text})" if v < 0 and parent >= 1 else text
        case IVar(name):
            return name
        case INeg(operand):
            text = "-" + iexpr(operand, 3)
            return f"({text})" if parent >= 1 else text
        case ISel(test, then, orelse):
            return f"select({cond(test)}, {iexpr(then)}, {iexpr(orelse)})"
        case IBin("min" | "max" as op, lhs, rhs):
            return f"{op}({iexpr(lhs)}, {iexpr(rhs)})"
        case IBin(op, lhs, rhs):
            prec = _IPREC[op]
            text = f"{iexpr(lhs, prec)} {op} {iexpr(rhs, prec, right=True)}"
            return f"({text})" if prec < parent or (prec == parent and right) else text
    raise TypeError(e)


def cond(c: Cond, parent: int = 0) -> str:
    match c:
        case BConst(v):
            return "true" if v else "false"
        case Cmp(op, lhs, rhs):
            return f"{iexpr(lhs)} {op} {iexpr(rhs)}"
        case Not(operand):
            return f"!({cond(operand)})"
        case BoolOp(op, lhs, rhs):
            prec = 1 if op == "||" else 2
            text = f"{cond(lhs, prec)} {op} {cond(rhs, prec + 1)}"
            return f"({text})" if prec < parent else text
    raise TypeError(c)


_FPREC = {"+": 1, "-": 1, "*": 2}


def fconst(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v))
    return text


def fexpr(e: FExpr, parent: int = 0, right: bool = False) -> str:
    match e:
        case FConst(v):
            text = fconst(v)
            return f"({text})" if text.startswith("-") and parent >= 1 else text
        case FValue():
            return "value"
        case Load(array, index):
            return array + ("".join(f"[{iexpr(i)}]" for i in index) if index else "[]")
        case Recv(color):
            return f"recv({color})"
        case FNeg(operand):
            text = "-" + fexpr(operand, 3)
            return f"({text})" if parent >= 1 else text
        case FBin("max", lhs, rhs):
            return f"max({fexpr(lhs)}, {fexpr(rhs)})"
        case FBin(op, lhs, rhs):
            prec = _FPREC[op]
            text = f"{fexpr(lhs, prec)} {op} {fexpr(rhs, prec, right=True)}"
            return f"({text})" if prec < parent or (prec == parent and right) else text
    raise TypeError(e)


def _block(body: tuple[Stmt, ...], indent: str) -> list[str]:
    lines: list[str] = []
    for s in body:
        lines.extend(stmt(s, indent))
    return lines


def stmt(s: Stmt, indent: str = "") -> list[str]:
    inner = indent + "  "
    match s:
        case Store(target, op, value):
            return [f"{indent}{fexpr(target)} {op} {fexpr(value)};"]
        case SetInt(name, op, value):
            return [f"{indent}{name} {op} {iexpr(value)};"]
        case For(var, lo, hi, body):
            return [f"{indent}for ({var} = {iexpr(lo)}; {var} <= {iexpr(hi)}; {var}++) {{",
                    *_block(body, inner), f"{indent}}}"]
        case If(c, then, orelse, static):
            lines = [f"{indent}if {'static ' if static else ''}({cond(c)}) {{",
                     *_block(then, inner)]
            if orelse:
                lines += [f"{indent}}} else {{", *_block(orelse, inner)]
            return [*lines, f"{indent}}}"]
        case Send(color, value, None):
            return [f"{indent}send({color}, {fexpr(value)});"]
        case Send(color, value, index):
            assert index is not None
            return [f"{indent}send({color}, {fexpr(value)}, {iexpr(index)});"]
        case SendEnd(color):
            return [f"{indent}send_end({color});"]
        case Activate(task):
            return [f"{indent}activate {task};"]
        case Run(config, bases, scalar, variant, length):
            text = f"run {config}"
            if variant is not None:
                text += f" variant({iexpr(variant)})"
            if length is not None:
                text += f" length({iexpr(length)})"
            bound = dict(s.arrays)
            text += " {" + ", ".join(
                f"{a}{f' -> {bound[a]}' if a in bound else ''}: {iexpr(b)}" for a, b in bases
            ) + "}"
            if scalar is not None:
                text += f" ({fexpr(scalar)})"
            return [f"{indent}{text};"]
    raise TypeError(s)


def operand(op: SimdOperand) -> str:
    match op.kind:
        case "scalar":
            return "scalar"
        case "in":
            return f"in({op.color})"
        case "out":
            return f"out({op.color}{', index' if op.indexed else ''}{', end' if op.ends else ''})"
    terms = [f"{s}*i{k}" if s != 1 else f"i{k}" for k, s in enumerate(op.strides) if s]
    return f"{op.array}[{' + '.join(terms) if terms else '0'}]"


def simd_config(c: SimdConfig) -> str:
    sizes = " | ".join("[" + ", ".join(map(str, v)) + "]" + (
        f" if ({cond(g)})" if (g := c.guard(k)) is not None else "")
        for k, v in enumerate(c.variants))
    d = operand(c.dst)
    a = [operand(s) for s in c.srcs]
    body = {
        "fmac": lambda: f"{d} += {a[0]} * {a[1]}",
        "fmul": lambda: f"{d} = {a[0]} * {a[1]}",
        "fadd": lambda: f"{d} = {a[0]} + {a[1]}",
        "fsub": lambda: f"{d} = {a[0]} - {a[1]}",
        "fmax": lambda: f"{d} = max({a[0]}, {a[1]})",
        "copy": lambda: f"{d} = {a[0]}",
        "fill": lambda: f"{d} = scalar",
    }[c.op]()
    return f"simd {c.name} {sizes}: {body};"


def array(a: Array) -> str:
    text = f"array {a.dtype} {a.name}" + ("".join(f"[{n}]" for n in a.shape) or "[]")
    if a.offset:
        text += " offset [" + ", ".join(iexpr(o) for o in a.offset) + "]"
    if a.init is not None:
        text += f" init {fexpr(FConst(a.init))}"
    if a.load:
        text += f" load {a.load}" + (f" {a.load_set}" if a.load_set else "")
    if a.store:
        text += f" store {a.store}" + (f" {a.store_set}" if a.store_set else "")
    return text + ";"


def route(r: Route) -> str:
    text = f"route {r.color}: {r.source} -> {', '.join(r.targets)}"
    if r.guard is not None:
        text += f" if ({cond(r.guard)})"
    return text + ";"


def task(t: Task, indent: str = "  ") -> list[str]:
    head = {"main": "", "local": " local"}.get(t.kind)
    if head is None:
        head = f" {t.kind} color {t.color}" + (" sparse" if t.sparse else "")
        if t.batch is not None:
            head += f" batch {t.batch} land {t.land}" + (
                f" groups {t.groups}" if t.groups is not None else "") + (
                f" ring {t.ring}" if t.ring != 1 else "") + (" once" if t.once else "")
    return [f"{indent}task {t.name}{head} {{", *_block(t.body, indent + "  "), f"{indent}}}"]


def program(p: PeProgram) -> str:
    lines = [f"program {p.name} origin PE[{p.origin[0]}, {p.origin[1]}] pes {p.pes}", "{"]
    lines += [f"  {array(a)}" for a in p.arrays]
    lines += [f"  int {v.name} = {v.init};" for v in p.ints]
    lines += [f"  {route(r)}" for r in p.routes]
    lines += [f"  {simd_config(c)}" for c in p.configs]
    for t in p.tasks:
        lines += task(t)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _header(keyword: str, path: str | None, params: tuple[tuple[str, int | str], ...]
            ) -> str:
    """``reference "PATH" K=V ...`` or ``mapping ...``; without a path (a program read
    from standard input) the parameters alone."""
    where = "" if path is None else f' "{path}"'
    return keyword + where + "".join(f" {k}={v}" for k, v in params)


def module(m: PeModule) -> str:
    lines = [f"module {m.name}", f"mesh PE[{m.width}, {m.height}]"]
    if m.reference is not None or m.params:
        lines.append(_header("reference", m.reference, m.params))
    if m.mapping is not None or m.mapping_params:
        lines.append(_header("mapping", m.mapping, m.mapping_params))
    for s in m.streams:
        lines.append(f"{s.direction} {s.tensor} {s.kind} color {s.color} {s.relation}")
    return "\n".join(lines) + "\n\n" + "\n".join(program(p) for p in m.programs)
