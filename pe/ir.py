"""The PE program IR: what ``dtg-codegen`` emits and ``pesim`` executes.

A :class:`PeModule` holds the I/O of the whole rectangle (which tensors enter and
leave, on which colors, in which order) and one :class:`PeProgram` per class of PEs
that run the same code. Programs are parametric in ``PE_X``/``PE_Y``, the PE's
coordinates relative to the program's origin. The text form is printed by
:mod:`pe.printer` and parsed by :mod:`pe.parser`; ``docs/pecode.md`` describes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import prod
from typing import Literal

DTYPES = ("float16", "float32")
PORTS = ("N", "S", "E", "W", "RAMP")
MAX_SIMD_DIMS = 4
COUNT = "count"  # a batched task's number of wavelets in its batch
SLOT = "slot"  # a batched task's first element of its batch's part of the landing array
MAX_RING = 32  # landing slots of a batched task
MAX_SIMD_SIZE = 65535
MAX_SIMD_CONFIGS = 8
COLORS = 24
LOCAL_MEMORY_BYTES = 48 * 1024
ELEMENT_BYTES = {"float16": 2, "float32": 4}

# ---------------------------------------------------------------- integer expressions


@dataclass(frozen=True)
class IConst:
    value: int


@dataclass(frozen=True)
class IVar:
    """``PE_X``, ``PE_Y``, ``index``, ``index_<k>``, a loop variable or a program ``int``."""

    name: str


@dataclass(frozen=True)
class IBin:
    """Integer arithmetic; ``//`` and ``%`` round towards minus infinity (as in isl)."""

    op: Literal["+", "-", "*", "//", "%", "min", "max"]
    lhs: IExpr
    rhs: IExpr


@dataclass(frozen=True)
class INeg:
    operand: IExpr


@dataclass(frozen=True)
class ISel:
    """``select(cond, then, orelse)``: isl's AST generator writes a value that differs
    between the pieces of a set this way."""

    cond: Cond
    then: IExpr
    orelse: IExpr


IExpr = IConst | IVar | IBin | INeg | ISel


@dataclass(frozen=True)
class Cmp:
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    lhs: IExpr
    rhs: IExpr


@dataclass(frozen=True)
class BoolOp:
    op: Literal["&&", "||"]
    lhs: Cond
    rhs: Cond


@dataclass(frozen=True)
class Not:
    operand: Cond


@dataclass(frozen=True)
class BConst:
    value: bool


Cond = Cmp | BoolOp | Not | BConst

# ------------------------------------------------------------------ value expressions


@dataclass(frozen=True)
class FConst:
    value: float


@dataclass(frozen=True)
class FValue:
    """The value carried by the wavelet that triggered the current data task."""


@dataclass(frozen=True)
class Load:
    """An element of a local array, ``a[i][j]``."""

    array: str
    index: tuple[IExpr, ...]


@dataclass(frozen=True)
class Recv:
    """The next wavelet's value on a color delivered to the core (blocks until it arrives)."""

    color: int


@dataclass(frozen=True)
class FBin:
    op: Literal["+", "-", "*", "max"]
    lhs: FExpr
    rhs: FExpr


@dataclass(frozen=True)
class FNeg:
    operand: FExpr


FExpr = FConst | FValue | Load | Recv | FBin | FNeg

# ------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Store:
    """``a[i] = v;``, ``a[i] += v;`` or ``a[i] max= v;``."""

    target: Load
    op: Literal["=", "+=", "max="]
    value: FExpr


@dataclass(frozen=True)
class SetInt:
    """``n = e;`` or ``n += e;`` on a program-level ``int``."""

    name: str
    op: Literal["=", "+="]
    value: IExpr


@dataclass(frozen=True)
class For:
    """``for (v = lo; v <= hi; v++) { body }``; bounds are evaluated once on entry."""

    var: str
    lo: IExpr
    hi: IExpr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class If:
    """A branch. ``static``: its condition reads only ``PE_X`` and ``PE_Y``, so it is
    settled when the code is placed on a PE (each PE gets the code of its own branch, as
    CSL places code per PE with comptime parameters) and costs nothing at run time."""

    cond: Cond
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    static: bool = False


@dataclass(frozen=True)
class Send:
    """Send a wavelet on a color: a value (dense) or a (value, index) pair (sparse)."""

    color: int
    value: FExpr
    index: IExpr | None = None


@dataclass(frozen=True)
class SendEnd:
    """Send an end-of-sequence mark on a color."""

    color: int


@dataclass(frozen=True)
class Activate:
    task: str


@dataclass(frozen=True)
class Run:
    """Invoke a SIMD configuration: base offsets of its array operands, an optional scalar,
    for a configuration with several size variants, the variant to select, and
    optionally a ``length``: the instruction covers only the first ``length`` values of
    its outermost dimension larger than 1 (:func:`cut_dimension`; a DSD length set at
    run time, as CSL's ``@set_dsd_length``), from 1 to the variant's size there.

    ``bases`` are keyed by the configuration's array operands. ``arrays`` binds some of
    them to other arrays of the same type for this run (``{h_local -> a_local: 8}``), as
    a CSL program points a DSD at another base address: one configuration serves
    instructions that differ only in the arrays they read and write."""

    config: str
    bases: tuple[tuple[str, IExpr], ...]
    scalar: FExpr | None = None
    variant: IExpr | None = None
    length: IExpr | None = None
    arrays: tuple[tuple[str, str], ...] = ()

    def array(self, operand: str) -> str:
        """The array the configuration's array operand ``operand`` is on in this run."""
        return next((a for o, a in self.arrays if o == operand), operand)


Stmt = Store | SetInt | For | If | Send | SendEnd | Activate | Run


def cut_dimension(sizes: tuple[int, ...]) -> int:
    """The dimension a ``run ... length(e)`` cuts: the outermost one larger than 1 (the
    dimensions before it have one value, so the cut keeps a prefix of the elements in
    domain order, as a length does on a 1-D DSD); the first when all are 1."""
    return next((d for d, n in enumerate(sizes) if n > 1), 0)

# ------------------------------------------------------------------------ declarations


@dataclass(frozen=True)
class Array:
    """A local array. Element ``a[l]`` holds global element ``tensor[l + offset]``.

    ``load`` names an input tensor copied in before ``main`` (every element of the box
    that lies inside the tensor, or only those of ``load_set`` when given); ``store``
    names an output tensor whose elements in ``store_set`` are read back after the run.
    Elements not loaded start at ``init`` (0 unless given): a static initializer, part
    of the program image like the loaded elements, as CSL's ``@zeros``/``@constants``.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: tuple[IExpr, ...] = ()
    load: str | None = None
    load_set: str | None = None
    store: str | None = None
    store_set: str | None = None
    init: float | None = None

    @property
    def bytes(self) -> int:
        """Bytes of local memory the array takes."""
        return prod(self.shape) * ELEMENT_BYTES[self.dtype]


@dataclass(frozen=True)
class IntVar:
    name: str
    init: int = 0


@dataclass(frozen=True)
class Route:
    """Wavelets of ``color`` arriving from ``source`` go to every port of ``targets``."""

    color: int
    source: str
    targets: tuple[str, ...]
    guard: Cond | None = None


@dataclass(frozen=True)
class SimdOperand:
    """``array[stride · i]`` (base given at invocation), ``scalar``, ``in(c)`` or ``out(c)``.

    ``out(c, index)`` (``indexed``) sends each element as a sparse wavelet whose index
    is the element's innermost domain coordinate; ``out(c, index, end)`` (``ends``) also
    sends an end mark after each row of the innermost dimension: a sparse stream's
    groups, as scalar code sends them."""

    kind: Literal["array", "scalar", "in", "out"]
    array: str | None = None
    strides: tuple[int, ...] = ()
    color: int | None = None
    indexed: bool = False
    ends: bool = False


@dataclass(frozen=True)
class SimdConfig:
    """One SIMD configuration (or a family of size variants), set up before ``main``.

    ``op`` is fmac (dst += a*b), fmul, fadd, fsub, fmax (dst = a op b), copy (dst = a)
    or fill (dst = scalar). Every variant shares the operand strides.

    ``guards`` (one per variant, or empty) say on which PEs a variant is set up: a PE
    pays for and may run only the variants whose guard holds on it (paper §5.4: each PE
    sets up only the sizes it needs). None, or no guards, means every PE.
    """

    name: str
    op: Literal["fmac", "fmul", "fadd", "fsub", "fmax", "copy", "fill"]
    variants: tuple[tuple[int, ...], ...]
    dst: SimdOperand
    srcs: tuple[SimdOperand, ...]
    guards: tuple[Cond | None, ...] = ()

    def guard(self, variant: int) -> Cond | None:
        return self.guards[variant] if self.guards else None


TaskKind = Literal["main", "data", "control", "local"]


@dataclass(frozen=True)
class Task:
    """``main`` runs first; ``data`` tasks run per wavelet on ``color`` (with ``value``
    and, when ``sparse``, ``index``); ``control`` tasks run per end-of-sequence mark on
    ``color``; ``local`` tasks run when activated.

    A dense data task with ``batch`` runs once per batch of up to ``batch`` wavelets,
    landed in order in the array ``land`` while the core does other work; ``count``
    is the number of wavelets of the batch (fewer than ``batch`` where an end mark
    ends it). One dispatch and one SIMD instruction then serve many arrivals. A sparse
    batched task with ``once`` sees at most one window per PE in the whole run: its
    landing array starts as the program image's zeros and is never cleared.

    With ``groups`` G, a batch is G whole groups of the stream (its G-th end mark closes
    it; its end marks trigger no control task): the k-th wavelet of its j-th group (on a
    sparse color, the one carrying index k) lands at ``land[j * batch + k]``, so a
    multi-dimensional stream's groups are one SIMD operand instead of one task each.

    With ``ring`` N > 1, the landing array holds N batches, batch b landing at
    ``slot = (b mod N) * S`` (``S`` = ``batch`` times ``groups``): the next batches land
    while the core runs the task of an earlier one, as a CSL fabric-input DSD fills a
    second buffer, and only batch b + N waits for batch b's task to end. ``once`` then
    allows N batches, each in its own slot, none cleared."""

    name: str
    kind: TaskKind
    body: tuple[Stmt, ...]
    color: int | None = None
    sparse: bool = False
    batch: int | None = None
    land: str | None = None
    once: bool = False
    groups: int | None = None
    ring: int = 1

    @property
    def slot_size(self) -> int:
        """Elements of the landing array one batch takes."""
        assert self.batch is not None
        return self.batch * (self.groups or 1)


@dataclass(frozen=True)
class PeProgram:
    """The code of one class of PEs: ``pes`` is an isl set ``{ PE[x, y] : ... }`` in
    coordinates relative to ``origin``; inside the program these are ``PE_X``, ``PE_Y``."""

    name: str
    origin: tuple[int, int]
    pes: str
    arrays: tuple[Array, ...] = ()
    ints: tuple[IntVar, ...] = ()
    routes: tuple[Route, ...] = ()
    configs: tuple[SimdConfig, ...] = ()
    tasks: tuple[Task, ...] = ()

    @property
    def memory_bytes(self) -> int:
        """Bytes of local arrays each of its PEs allocates."""
        return sum(DTYPE_BYTES[a.dtype] * prod(a.shape) for a in self.arrays)


DTYPE_BYTES = {"float16": 2, "float32": 4}


@dataclass(frozen=True)
class StreamIO:
    """A tensor entering (input) or leaving (output) the rectangle on ``color``;
    ``relation`` is the mapping's isl text ``{ t[...] -> [PE[x, y] -> index[...]] }``
    in absolute coordinates."""

    direction: Literal["input", "output"]
    tensor: str
    kind: Literal["sparse", "dense"]
    color: int
    relation: str


@dataclass(frozen=True)
class PeModule:
    """Everything pesim needs: the mesh, the I/O streams and the programs; and where
    they came from (``docs/pecode.md``, "Header"): the reference program with the
    values of its parameters (``reference``, ``params``), and the mapping with the
    values of its own (``mapping``, ``mapping_params``), which the bound is derived
    from. Paths are relative to the module's directory."""

    name: str
    width: int
    height: int
    reference: str | None = None
    params: tuple[tuple[str, int | str], ...] = ()
    streams: tuple[StreamIO, ...] = ()
    programs: tuple[PeProgram, ...] = field(default=())
    mapping: str | None = None
    mapping_params: tuple[tuple[str, int], ...] = ()


# ------------------------------------------------------------------------- renaming


def _map_arrays(stmts: tuple[Stmt, ...], load: Callable[[Load], Load],
                base: Callable[[str, str, IExpr], tuple[str, IExpr]],
                rename: Callable[[str], str] = lambda a: a) -> tuple[Stmt, ...]:
    """``stmts`` with every element access rewritten by ``load``, every SIMD operand
    (its array in the run, the configuration's operand name, base offset) by ``base``
    (to the operand's new name and base) and every array a run binds by ``rename``."""
    def fexpr(e: FExpr) -> FExpr:
        match e:
            case Load():
                return load(e)
            case FBin(op, lhs, rhs):
                return FBin(op, fexpr(lhs), fexpr(rhs))
            case FNeg(operand):
                return FNeg(fexpr(operand))
        return e

    def stmt(s: Stmt) -> Stmt:
        match s:
            case Store(target, op, value):
                return Store(load(target), op, fexpr(value))
            case Send(color, value, index):
                return Send(color, fexpr(value), index)
            case Run(_, bases, scalar):
                return replace(s, bases=tuple(base(s.array(a), a, b) for a, b in bases),
                               scalar=None if scalar is None else fexpr(scalar),
                               arrays=tuple((rename(o), rename(a)) for o, a in s.arrays
                                            if rename(o) != rename(a)))
            case If(cond, then, orelse, static):
                return If(cond, _map_arrays(then, load, base, rename),
                          _map_arrays(orelse, load, base, rename), static)
            case For(var, lo, hi, body):
                return For(var, lo, hi, _map_arrays(body, load, base, rename))
        return s

    return tuple(stmt(s) for s in stmts)


def rename_array(stmts: tuple[Stmt, ...], old: str, new: str) -> tuple[Stmt, ...]:
    """``stmts`` with the array ``old`` (loads, stores, SIMD bases and bindings) called
    ``new``."""
    return _map_arrays(
        stmts, lambda e: Load(new, e.index) if e.array == old else e,
        lambda _, o, b: (new if o == old else o, b),
        lambda a: new if a == old else a)


def move_array(stmts: tuple[Stmt, ...], name: str, move: Callable[[IExpr], IExpr]
               ) -> tuple[Stmt, ...]:
    """``stmts`` with every access to the one-dimensional array ``name`` (loads, stores,
    SIMD bases) at ``move`` of its offset."""
    def load(e: Load) -> Load:
        if e.array != name:
            return e
        assert len(e.index) == 1, f"{name} is not one-dimensional"
        return Load(name, (move(e.index[0]),))

    return _map_arrays(stmts, load, lambda a, o, b: (o, move(b) if a == name else b))


def rename_config(c: SimdConfig, old: str, new: str) -> SimdConfig:
    """``c`` with its operands on the array ``old`` on ``new``."""
    def operand(o: SimdOperand) -> SimdOperand:
        return replace(o, array=new) if o.kind == "array" and o.array == old else o

    return replace(c, dst=operand(c.dst), srcs=tuple(operand(o) for o in c.srcs))


def bind_config(c: SimdConfig, run: Run) -> SimdConfig:
    """``c`` on the arrays ``run`` binds its operands to (the configuration a run with
    bindings executes)."""
    def operand(o: SimdOperand) -> SimdOperand:
        return replace(o, array=run.array(o.array)) if o.kind == "array" and o.array else o

    return replace(c, dst=operand(c.dst), srcs=tuple(operand(o) for o in c.srcs))
