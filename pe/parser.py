"""Parse PE-module text (``docs/pecode.md``) into :class:`pe.ir.PeModule`.

The parser checks syntax only; :func:`pesim.verify.verify_module` checks meaning. So that
its messages can point into the file, parsing also returns a :data:`Locations` table that
names every declaration, task and statement by a key (see :func:`stmt_key`).
isl texts stay strings; the verifier reads them with islpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import UnexpectedInput, VisitError

from dtg.errors import DtgError, LimitError, SimulationError, SourceLoc
from dtg.lair.limits import (
    MAX_INPUT_BYTES,
    MAX_PE_BLOCKS,
    MAX_PE_NESTING,
    MAX_PES,
    isl_text_problem,
    offset_loc,
    too_deep,
    tree_loc,
)
from dtg.lair.parser import int_literal, read_source, syntax_error
from dtg.pe.ir import (
    MAX_SIMD_DIMS,
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
    IntVar,
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
    StreamIO,
    Task,
    TaskKind,
)

Locations = dict[tuple[str, ...], SourceLoc]

TERMINALS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number with '.' or an exponent (e.g. 0.0)",
    "ISL": "isl text in braces",
    "STRING": "a quoted path",
    "MAX_ASSIGN": "'max='",
    "$END": "end of file",
}


class PeSyntaxError(SimulationError):
    """PE-module text that does not follow the grammar."""

    kind = "syntax error"


def stmt_key(program: str, task: str, path: tuple[int, ...]) -> tuple[str, ...]:
    """Key of a statement in :data:`Locations`: its position path in the task body
    (``(2, 0)`` is the first statement of the body of the task's third statement; for an
    ``if``, the else branch continues the numbering after the then branch)."""
    return ("stmt", program, task, ".".join(map(str, path)))


@cache
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "pe.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def parse_module_file(path: str | Path) -> tuple[PeModule, Locations]:
    return parse_module_text(read_source(path), str(path))


def parse_module(text: str, file: str = "<string>") -> PeModule:
    """Parse PE-module text; raises :class:`PeSyntaxError` (a DtgError) with a position."""
    return parse_module_text(text, file)[0]


def parse_module_text(text: str, file: str = "<string>") -> tuple[PeModule, Locations]:
    """Parse PE-module text into the module and the source position of its parts."""
    if len(text) > MAX_INPUT_BYTES:
        raise LimitError(f"the PE module has {len(text)} characters, more than the limit of "
                         f"{MAX_INPUT_BYTES}", SourceLoc(file, 1, 1))
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        error = syntax_error(err, text, file, "PE module", _parser(), TERMINALS)
        raise PeSyntaxError(error.message, error.loc) from None
    _check_budget(tree, file)
    builder = _ToIr(file)
    try:
        module: PeModule = builder.transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, DtgError):
            raise err.orig_exc from None
        raise
    return module, builder.finish(module)


# Rules whose nesting the verifier and the simulator follow recursively: expressions,
# conditions and the bodies of loops and conditionals.
_NESTING = frozenset([
    "iadd", "isub", "imul", "ifloordiv", "imod", "imin", "imax", "ineg", "isel",
    "c_or", "c_and", "c_not", "c_cmp",
    "fadd_e", "fsub_e", "fmul_e", "fmax_e", "fneg", "fload", "lvalue",
    "for_stmt", "if_stmt",
])
_BLOCKS = frozenset(["for_stmt", "if_stmt"])


def _check_budget(tree: Tree[Token], file: str) -> None:
    """Refuse, with the position of the culprit, what is beyond :mod:`lair.limits`:
    nesting deeper than :data:`MAX_PE_NESTING` (:data:`MAX_PE_BLOCKS` for blocks),
    integers beyond 64 bits, isl texts too long or too deep, and a mesh of more than
    :data:`MAX_PES` PEs. Iterative: the tree may be arbitrarily deep."""
    deep = too_deep(tree, lambda rule: rule in _BLOCKS, MAX_PE_BLOCKS)
    if deep is not None:
        raise LimitError(f"loops and conditionals nested more than {MAX_PE_BLOCKS} levels deep, "
                         "the limit", tree_loc(deep, file))
    deep = too_deep(tree, lambda rule: rule in _NESTING, MAX_PE_NESTING)
    if deep is not None:
        raise LimitError(f"expressions and blocks nested more than {MAX_PE_NESTING} levels "
                         "deep, the limit", tree_loc(deep, file))
    for token in tree.scan_values(lambda v: isinstance(v, Token)):
        if token.type == "INT":
            int_literal(token, file)
        elif token.type == "ISL":
            problem = isl_text_problem(str(token))
            if problem is not None:
                start = SourceLoc(file, token.line or 1, token.column or 1)
                raise LimitError(problem[0], offset_loc(start, str(token), problem[1]))
    mesh = [c for c in tree.children[1:3] if isinstance(c, Token)]
    width, height = (int_literal(c, file) for c in mesh)
    if width * height > MAX_PES:
        raise LimitError(f"the mesh PE[{width}, {height}] has {width * height} PEs, more than "
                         f"the limit of {MAX_PES}",
                         SourceLoc(file, mesh[0].line or 1, mesh[0].column or 1))


@dataclass(frozen=True)
class _Operand:
    """A SIMD operand before the domain's rank is known (strides are filled in later)."""

    kind: str
    loc: SourceLoc
    array: str | None = None
    terms: tuple[tuple[str, int, SourceLoc], ...] = ()
    color: int | None = None
    indexed: bool = False
    ends: bool = False


@dataclass(frozen=True)
class _Kind:
    kind: TaskKind
    color: int | None = None
    sparse: bool = False
    batch: tuple[int, str, int | None, int, bool] | None = None


@v_args(meta=True)
class _ToIr(Transformer_NonRecursive[Token, Any]):
    """Builds IR bottom-up and records where each part starts."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file
        self.locs: Locations = {}
        self.stmt_locs: dict[int, SourceLoc] = {}
        self.clause_locs: dict[int, tuple[SourceLoc | None, SourceLoc | None]] = {}

    # ------------------------------------------------------------------ positions

    def _loc(self, meta: Any) -> SourceLoc:
        if getattr(meta, "empty", False):
            return SourceLoc(self.file, 1, 1)
        return SourceLoc(self.file, meta.line, meta.column)

    def _tok(self, token: Token) -> SourceLoc:
        return SourceLoc(self.file, token.line or 1, token.column or 1)

    def _int(self, token: Token) -> int:
        return int_literal(token, self.file)

    def _stmt(self, stmt: Stmt, meta: Any) -> Stmt:
        self.stmt_locs[id(stmt)] = self._loc(meta)
        return stmt

    def finish(self, module: PeModule) -> Locations:
        """Turn statement positions (recorded by object) into keyed positions."""
        for program in module.programs:
            for task in program.tasks:
                for path, stmt in _walk(task.body, ()):
                    loc = self.stmt_locs.get(id(stmt))
                    if loc is not None:
                        self.locs[stmt_key(program.name, task.name, path)] = loc
        return self.locs

    # --------------------------------------------------------------------- module

    def start(self, meta: Any, children: list[Any]) -> PeModule:
        name, width, height, reference, mapping, *rest = children
        streams = tuple(c for c in rest if isinstance(c, StreamIO))
        programs = tuple(c for c in rest if isinstance(c, PeProgram))
        self.locs[("module",)] = self._tok(name)
        ref, params = reference if reference is not None else (None, ())
        where, values = mapping if mapping is not None else (None, ())
        return PeModule(str(name), self._int(width), self._int(height), ref, params, streams,
                        programs, where, values)

    def reference(self, meta: Any, children: list[Any]
                  ) -> tuple[str | None, tuple[Any, ...]]:
        path, *params = children
        self.locs[("reference",)] = self._loc(meta)
        return (None if path is None else str(path)[1:-1]), tuple(params)

    def mapping(self, meta: Any, children: list[Any]) -> tuple[str | None, tuple[Any, ...]]:
        path, *params = children
        self.locs[("mapping",)] = self._loc(meta)
        for key, value in params:
            if not isinstance(value, int):
                raise PeSyntaxError(f"the mapping's parameter {key} takes an integer, not "
                                    f"{value!r}", self._loc(meta))
        return (None if path is None else str(path)[1:-1]), tuple(params)

    def int_param(self, meta: Any, children: list[Any]) -> tuple[str, int]:
        return str(children[0]), self._int(children[1])

    def name_param(self, meta: Any, children: list[Token]) -> tuple[str, str]:
        return str(children[0]), str(children[1])

    def stream(self, meta: Any, children: list[Any]) -> StreamIO:
        direction, name, kind, color, isl = children
        index = sum(1 for k in self.locs if k[0] == "stream")
        self.locs[("stream", str(index))] = self._tok(isl)
        self.locs[("stream_head", str(index))] = self._loc(meta)
        return StreamIO(str(direction.children[0]), str(name),  # type: ignore[arg-type]
                        str(kind.children[0]), self._int(color), str(isl))  # type: ignore[arg-type]

    # -------------------------------------------------------------------- program

    def program(self, meta: Any, children: list[Any]) -> PeProgram:
        name, x, y, pes, *items = children
        pname = str(name)
        self.locs[("program", pname)] = self._tok(name)
        self.locs[("pes", pname)] = self._tok(pes)
        arrays: list[Array] = []
        ints: list[IntVar] = []
        routes: list[Route] = []
        configs: list[SimdConfig] = []
        tasks: list[Task] = []
        for item, loc in items:
            match item:
                case Array():
                    self._keep(("array", pname, item.name), loc)
                    load_loc, store_loc = self.clause_locs.pop(id(item))
                    if load_loc is not None:
                        self._keep(("load", pname, item.name), load_loc)
                    if store_loc is not None:
                        self._keep(("store", pname, item.name), store_loc)
                    arrays.append(item)
                case IntVar():
                    self._keep(("int", pname, item.name), loc)
                    ints.append(item)
                case Route():
                    self.locs[("route", pname, str(len(routes)))] = loc
                    routes.append(item)
                case SimdConfig():
                    self._keep(("simd", pname, item.name), loc)
                    configs.append(item)
                case Task():
                    self._keep(("task", pname, item.name), loc)
                    tasks.append(item)
        return PeProgram(pname, (x, y), str(pes), tuple(arrays), tuple(ints), tuple(routes),
                         tuple(configs), tuple(tasks))

    def _keep(self, key: tuple[str, ...], loc: SourceLoc) -> None:
        """Record the first position of a name (the verifier reports the duplicates)."""
        self.locs.setdefault(key, loc)

    def pos_int(self, meta: Any, children: list[Token]) -> int:
        return self._int(children[0])

    def neg_int(self, meta: Any, children: list[Token]) -> int:
        return -self._int(children[0])

    def array(self, meta: Any, children: list[Any]) -> tuple[Array, SourceLoc]:
        dtype, name, shape, offset, init, load, store = children
        load_name, load_set, load_loc = load if load is not None else (None, None, None)
        store_name, store_set, store_loc = store if store is not None else (None, None, None)
        array = Array(str(name), str(dtype.children[0]), shape, tuple(offset or ()),
                      load_name, load_set, store_name, store_set, init)
        self.clause_locs[id(array)] = (load_loc, store_loc)
        return array, self._tok(name)

    def init(self, meta: Any, children: list[FExpr]) -> float:
        value = children[0]
        if not isinstance(value, FConst):
            raise PeSyntaxError("an array's initial value is a constant such as 0.0 or -inf",
                                self._loc(meta))
        return value.value

    def dims(self, meta: Any, children: list[Token]) -> tuple[int, ...]:
        return tuple(self._int(c) for c in children)

    def offset(self, meta: Any, children: list[IExpr | None]) -> tuple[IExpr, ...]:
        return tuple(c for c in children if c is not None)

    def load(self, meta: Any, children: list[Any]) -> tuple[str, str | None, SourceLoc]:
        name, isl = children
        return str(name), None if isl is None else str(isl), self._tok(isl or name)

    def store(self, meta: Any, children: list[Any]) -> tuple[str, str | None, SourceLoc]:
        return self.load(meta, children)

    def int_decl(self, meta: Any, children: list[Any]) -> tuple[IntVar, SourceLoc]:
        name, init = children
        return IntVar(str(name), init), self._tok(name)

    def route(self, meta: Any, children: list[Any]) -> tuple[Route, SourceLoc]:
        color, source, *targets, guard = children
        return Route(self._int(color), source, tuple(targets), guard), self._loc(meta)

    def guard(self, meta: Any, children: list[Cond]) -> Cond:
        return children[0]

    def port(self, meta: Any, children: list[Token]) -> str:
        return str(children[0])

    # ----------------------------------------------------------------------- SIMD

    def simd(self, meta: Any, children: list[Any]) -> tuple[SimdConfig, SourceLoc]:
        name, *rest = children
        variants = tuple(sizes for sizes, _ in rest[:-1])
        guards = tuple(guard for _, guard in rest[:-1])
        if all(g is None for g in guards):
            guards = ()
        op, operands = rest[-1]
        ranks = {len(v) for v in variants}
        if len(ranks) != 1:
            raise PeSyntaxError(
                f"the size variants of simd {name} have different numbers of dimensions "
                f"({', '.join(str(len(v)) for v in variants)}); every variant needs the same",
                self._tok(name))
        ndims = ranks.pop()
        if ndims > MAX_SIMD_DIMS:
            raise PeSyntaxError(f"simd {name} has a {ndims}-dimensional domain; the SIMD "
                                f"engine supports 1 to {MAX_SIMD_DIMS} dimensions",
                                self._tok(name))
        built = [self._operand(o, ndims, str(name)) for o in operands]
        if op == "copy" and built[1].kind == "scalar":
            op = "fill"
        return (SimdConfig(str(name), op, variants, built[0], tuple(built[1:]), guards),
                self._tok(name))

    def variant_sizes(self, meta: Any, children: list[Any]
                      ) -> tuple[tuple[int, ...], Cond | None]:
        return children[0], children[1]

    def _operand(self, op: _Operand, ndims: int, config: str) -> SimdOperand:
        if op.kind != "array":
            return SimdOperand(op.kind, color=op.color,  # type: ignore[arg-type]
                               indexed=op.indexed, ends=op.ends)
        strides = [0] * ndims
        seen: set[str] = set()
        for dim, stride, loc in op.terms:
            if dim == "":
                if stride != 0:
                    raise PeSyntaxError(
                        f"constant {stride} in the index of SIMD operand {op.array}; the index "
                        "is a linear form in i0..i3, constant offsets go in the run's base",
                        loc)
                continue
            if dim in seen:
                raise PeSyntaxError(f"{dim} appears twice in the index of SIMD operand "
                                    f"{op.array}; expected each dimension once", loc)
            seen.add(dim)
            k = _dim_number(dim)
            if k is None or k >= ndims:
                dims = ", ".join(f"i{d}" for d in range(ndims))
                raise PeSyntaxError(
                    f"'{dim}' is not a dimension of the {ndims}-dimensional domain of simd "
                    f"{config}; expected {dims}", loc)
            strides[k] = stride
        return SimdOperand("array", op.array, tuple(strides))

    def sizes(self, meta: Any, children: list[Token]) -> tuple[int, ...]:
        return tuple(self._int(c) for c in children)

    def _body(op: str) -> Any:  # type: ignore[misc]
        def build(self: _ToIr, meta: Any, children: list[_Operand]
                  ) -> tuple[str, list[_Operand]]:
            return op, children
        return build

    fmac = _body("fmac")
    fmul = _body("fmul")
    fadd = _body("fadd")
    fsub = _body("fsub")
    fmax = _body("fmax")
    copy = _body("copy")

    def array_operand(self, meta: Any, children: list[Any]) -> _Operand:
        name, terms = children
        return _Operand("array", self._tok(name), str(name), terms)

    def scalar_operand(self, meta: Any, children: list[Any]) -> _Operand:
        return _Operand("scalar", self._loc(meta))

    def in_operand(self, meta: Any, children: list[Token]) -> _Operand:
        return _Operand("in", self._loc(meta), color=self._int(children[0]))

    def out_operand(self, meta: Any, children: list[Token]) -> _Operand:
        return _Operand("out", self._loc(meta), color=self._int(children[0]))

    def out_indexed_operand(self, meta: Any, children: list[Token]) -> _Operand:
        return _Operand("out", self._loc(meta), color=self._int(children[0]), indexed=True)

    def out_indexed_ends_operand(self, meta: Any, children: list[Token]) -> _Operand:
        return _Operand("out", self._loc(meta), color=self._int(children[0]), indexed=True,
                        ends=True)

    def linear(self, meta: Any, children: list[Any]) -> tuple[Any, ...]:
        return tuple(children)

    def scaled_dim(self, meta: Any, children: list[Token]) -> tuple[str, int, SourceLoc]:
        return str(children[1]), self._int(children[0]), self._tok(children[1])

    def neg_scaled_dim(self, meta: Any, children: list[Token]) -> tuple[str, int, SourceLoc]:
        return str(children[1]), -self._int(children[0]), self._tok(children[1])

    def unit_dim(self, meta: Any, children: list[Token]) -> tuple[str, int, SourceLoc]:
        return str(children[0]), 1, self._tok(children[0])

    def const_term(self, meta: Any, children: list[Token]) -> tuple[str, int, SourceLoc]:
        return "", self._int(children[0]), self._tok(children[0])

    # ---------------------------------------------------------------------- tasks

    def task(self, meta: Any, children: list[Any]) -> tuple[Task, SourceLoc]:
        name, kind, *body = children
        batch, land, groups, ring, once = kind.batch if kind.batch is not None else (
            None, None, None, 1, False)
        return Task(str(name), kind.kind, tuple(body), kind.color, kind.sparse, batch, land,
                    once, groups, ring), self._tok(name)

    def main_kind(self, meta: Any, children: list[Any]) -> _Kind:
        return _Kind("main")

    def local_kind(self, meta: Any, children: list[Any]) -> _Kind:
        return _Kind("local")

    def data_kind(self, meta: Any, children: list[Any]) -> _Kind:
        return _Kind("data", self._int(children[0]), children[1] is not None, children[2])

    def control_kind(self, meta: Any, children: list[Any]) -> _Kind:
        return _Kind("control", self._int(children[0]))

    def sparse(self, meta: Any, children: list[Any]) -> bool:
        return True

    def batch(self, meta: Any, children: list[Any]
              ) -> tuple[int, str, int | None, int, bool]:
        ring = 1 if children[3] is None else children[3]
        return (self._int(children[0]), str(children[1]), children[2], ring,
                children[4] is not None)

    def groups(self, meta: Any, children: list[Any]) -> int:
        return self._int(children[0])

    def ring(self, meta: Any, children: list[Any]) -> int:
        return self._int(children[0])

    def once(self, meta: Any, children: list[Any]) -> bool:
        return True

    # ----------------------------------------------------------------- statements

    def store_set(self, meta: Any, children: list[Any]) -> Stmt:
        return self._stmt(Store(children[0], "=", children[1]), meta)

    def store_add(self, meta: Any, children: list[Any]) -> Stmt:
        return self._stmt(Store(children[0], "+=", children[1]), meta)

    def store_max(self, meta: Any, children: list[Any]) -> Stmt:
        return self._stmt(Store(children[0], "max=", children[2]), meta)

    def lvalue(self, meta: Any, children: list[Any]) -> Load:
        name, *index = children
        return Load(str(name), tuple(index))

    def int_set(self, meta: Any, children: list[Any]) -> Stmt:
        return self._stmt(SetInt(str(children[0]), "=", children[1]), meta)

    def int_add(self, meta: Any, children: list[Any]) -> Stmt:
        return self._stmt(SetInt(str(children[0]), "+=", children[1]), meta)

    def for_stmt(self, meta: Any, children: list[Any]) -> Stmt:
        var, lo, var2, hi, var3, body = children
        for other in (var2, var3):
            if str(other) != str(var):
                raise PeSyntaxError(
                    f"the loop uses '{other}' where its variable '{var}' was expected; "
                    f"write for ({var} = ...; {var} <= ...; {var}++)", self._tok(other))
        return self._stmt(For(str(var), lo, hi, body), meta)

    def if_stmt(self, meta: Any, children: list[Any]) -> Stmt:
        static, cond, then, orelse = children
        return self._stmt(If(cond, then, orelse or (), static is not None), meta)

    def block(self, meta: Any, children: list[Stmt]) -> tuple[Stmt, ...]:
        return tuple(children)

    def send_stmt(self, meta: Any, children: list[Any]) -> Stmt:
        color, value, index = children
        return self._stmt(Send(self._int(color), value, index), meta)

    def send_end_stmt(self, meta: Any, children: list[Token]) -> Stmt:
        return self._stmt(SendEnd(self._int(children[0])), meta)

    def activate_stmt(self, meta: Any, children: list[Token]) -> Stmt:
        return self._stmt(Activate(str(children[0])), meta)

    def run_stmt(self, meta: Any, children: list[Any]) -> Stmt:
        name, variant, length, bases, scalar = children
        arrays = tuple((operand, str(array)) for operand, array, _ in bases
                       if array is not None)
        return self._stmt(Run(str(name), tuple((operand, e) for operand, _, e in bases),
                              scalar, variant, length, arrays), meta)

    def variant(self, meta: Any, children: list[IExpr]) -> IExpr:
        return children[0]

    def length(self, meta: Any, children: list[IExpr]) -> IExpr:
        return children[0]

    def bases(self, meta: Any, children: list[Any]
              ) -> tuple[tuple[str, str | None, IExpr], ...]:
        return tuple(c for c in children if c is not None)

    def base(self, meta: Any, children: list[Any]) -> tuple[str, str | None, IExpr]:
        operand, array, e = children
        return str(operand), None if array is None else str(array), e

    def run_scalar(self, meta: Any, children: list[FExpr]) -> FExpr:
        return children[0]

    # ---------------------------------------------------------------- expressions

    def iconst(self, meta: Any, children: list[Token]) -> IExpr:
        return IConst(self._int(children[0]))

    def ivar(self, meta: Any, children: list[Token]) -> IExpr:
        return IVar(str(children[0]))

    def ineg(self, meta: Any, children: list[IExpr]) -> IExpr:
        operand = children[0]
        if isinstance(operand, IConst) and operand.value > 0:
            return IConst(-operand.value)  # '-3' is the constant -3, as the printer writes it
        return INeg(operand)

    def _ibin(op: str) -> Any:  # type: ignore[misc]
        def build(self: _ToIr, meta: Any, children: list[IExpr]) -> IExpr:
            return IBin(op, children[0], children[1])  # type: ignore[arg-type]
        return build

    iadd = _ibin("+")
    isub = _ibin("-")
    imul = _ibin("*")
    ifloordiv = _ibin("//")
    imod = _ibin("%")
    def isel(self, meta: Any, children: list[Any]) -> IExpr:
        return ISel(children[0], children[1], children[2])

    imin = _ibin("min")
    imax = _ibin("max")

    def c_or(self, meta: Any, children: list[Cond]) -> Cond:
        return BoolOp("||", children[0], children[1])

    def c_and(self, meta: Any, children: list[Cond]) -> Cond:
        return BoolOp("&&", children[0], children[1])

    def c_cmp(self, meta: Any, children: list[Any]) -> Cond:
        lhs, op, rhs = children
        return Cmp(str(op.children[0]), lhs, rhs)  # type: ignore[arg-type]

    def c_not(self, meta: Any, children: list[Cond]) -> Cond:
        return Not(children[0])

    def c_true(self, meta: Any, children: list[Any]) -> Cond:
        return BConst(True)

    def c_false(self, meta: Any, children: list[Any]) -> Cond:
        return BConst(False)

    def fconst(self, meta: Any, children: list[Token]) -> FExpr:
        return FConst(float(children[0]))

    def finf(self, meta: Any, children: list[Any]) -> FExpr:
        return FConst(float("inf"))

    def fvalue(self, meta: Any, children: list[Any]) -> FExpr:
        return FValue()

    def fload(self, meta: Any, children: list[Any]) -> FExpr:
        name, *index = children
        return Load(str(name), tuple(index))

    def frecv(self, meta: Any, children: list[Token]) -> FExpr:
        return Recv(self._int(children[0]))

    def fneg(self, meta: Any, children: list[FExpr]) -> FExpr:
        operand = children[0]
        if isinstance(operand, FConst) and operand.value > 0:
            return FConst(-operand.value)  # '-1.5' is the constant -1.5, as printed
        return FNeg(operand)

    def _fbin(op: str) -> Any:  # type: ignore[misc]
        def build(self: _ToIr, meta: Any, children: list[FExpr]) -> FExpr:
            return FBin(op, children[0], children[1])  # type: ignore[arg-type]
        return build

    fadd_e = _fbin("+")
    fsub_e = _fbin("-")
    fmul_e = _fbin("*")
    fmax_e = _fbin("max")


def _dim_number(name: str) -> int | None:
    if len(name) == 2 and name[0] == "i" and name[1] in "0123":
        return int(name[1])
    return None


def _walk(body: tuple[Stmt, ...], prefix: tuple[int, ...]
          ) -> Iterator[tuple[tuple[int, ...], Stmt]]:
    """Every statement with its path (see :func:`stmt_key`)."""
    for k, stmt in enumerate(body):
        path = (*prefix, k)
        yield path, stmt
        match stmt:
            case For(body=inner):
                yield from _walk(inner, path)
            case If(then=then, orelse=orelse):
                yield from _walk(then + orelse, path)


walk_statements = _walk
