"""print -> parse -> print is the identity, and parse gives back the IR that was printed."""

from __future__ import annotations

import keyword
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
)
from dtg.pe.parser import parse_module
from dtg.pe.printer import module as print_module

GEMV_PE = (Path(__file__).resolve().parents[2] / "examples" / "handwritten"
           / "gemv_checkerboard" / "gemv_checkerboard.pe")

KEYWORDS = {
    "module", "mesh", "reference", "input", "output", "sparse", "dense", "color", "program",
    "origin", "pes", "array", "float16", "float32", "offset", "load", "store", "int", "route",
    "if", "else", "simd", "scalar", "in", "out", "max", "min", "select", "task", "local", "data",
    "control", "for", "send", "send_end", "activate", "run", "variant", "true", "false",
    "inf", "value", "recv", "mapping", "batch", "land", "groups", "ring", "once", "static",
    "length",
}


def every_construct() -> PeModule:
    """A module with every IR construct (in the forms the printer writes unambiguously)."""
    i, n, px = IVar("i"), IVar("n"), IVar("PE_X")
    guard = BoolOp("||", BoolOp("&&", Cmp("<", IVar("PE_Y"), IConst(3)),
                                Cmp("==", IBin("%", px, IConst(2)), IConst(0))),
                   Not(Cmp(">=", IBin("//", px, IConst(2)), IConst(1))))
    body: tuple[Stmt, ...] = (
        For("i", IConst(0), IBin("min", IConst(7), IBin("max", n, ISel(
                Cmp(">", px, IConst(1)), IConst(-2), IBin("-", n, IConst(1))))), (
            Store(Load("acc", (i,)), "=", FConst(0.0)),
            Store(Load("w", (IBin("-", i, INeg(n)), IConst(1))), "+=",
                  FBin("*", FNeg(Load("acc", (i,))), FConst(-1.5))),
            Store(Load("acc", (i,)), "max=", FBin("max", FConst(float("-inf")), Recv(3))),
        )),
        If(BConst(True), (SetInt("n", "=", IBin("+", n, IConst(1))),),
           (SetInt("n", "+=", INeg(IBin("*", n, IConst(2)))),)),
        If(BConst(False), (SendEnd(5),)),
        If(Cmp("==", px, IConst(0)), (SetInt("n", "=", IConst(2)),),
           (SetInt("n", "=", IConst(3)),), True),
        Send(5, FBin("-", FValue(), FBin("+", FConst(2.5e-3), FConst(float("inf"))))),
        Send(5, FValue(), IBin("-", IVar("index"), IConst(-1))),
        Activate("later"),
        Run("mac", (("acc", IConst(0)), ("w", n)), FValue(), IBin("%", n, IConst(2))),
        Run("chain", (("acc", IConst(0)),)),
        Run("mac", (("acc", n), ("w", IConst(0))), FValue(), IConst(1), IBin("+", n, IConst(1))),
        Run("zero", (("acc", IConst(0)),), FConst(0.0)),
    )
    configs = (
        SimdConfig("mac", "fmac", ((8, 2), (4, 1)), SimdOperand("array", "acc", (1, 0)),
                   (SimdOperand("array", "w", (4, -1)), SimdOperand("scalar")),
                   (None, Cmp("<", IVar("PE_Y"), IConst(3)))),
        SimdConfig("chain", "fadd", ((8,),), SimdOperand("out", color=2),
                   (SimdOperand("array", "acc", (1,)), SimdOperand("in", color=1))),
        SimdConfig("zero", "fill", ((8,),), SimdOperand("array", "acc", (1,)),
                   (SimdOperand("scalar"),)),
        SimdConfig("big", "fmax", ((2, 3, 4, 5),), SimdOperand("array", "acc", (0, 0, 0, 1)),
                   (SimdOperand("array", "w", (1, 2, 3, 0)), SimdOperand("array", "acc",
                                                                        (0, 0, 0, 0)))),
        SimdConfig("cp", "copy", ((3,),), SimdOperand("array", "acc", (2,)),
                   (SimdOperand("array", "w", (1,)),)),
        SimdConfig("m", "fmul", ((3,),), SimdOperand("array", "acc", (1,)),
                   (SimdOperand("in", color=4), SimdOperand("scalar"))),
        SimdConfig("s", "fsub", ((3,),), SimdOperand("out", color=6),
                   (SimdOperand("in", color=4), SimdOperand("array", "w", (0,)))),
    )
    program = PeProgram(
        "pe", (0, 0), "{ PE[x, y] : 0 <= x <= 3 and 0 <= y <= 3 }",
        arrays=(
            Array("w", "float16", (8, 4), (IBin("*", IConst(8), IVar("PE_Y")),
                                           IBin("*", IConst(4), px)), "W"),
            Array("acc", "float32", (8,), (IBin("*", IConst(8), IVar("PE_Y")),),
                  store="y", store_set="{ y[i] : PE_X = 3 }", init=float("-inf")),
            Array("tmp", "float16", (2, 2, 2), load="T", load_set="{ T[a, b, c] : a = b }",
                  store="U"),
        ),
        ints=(IntVar("n", -3), IntVar("k")),
        routes=(Route(0, "N", ("RAMP", "S"), guard), Route(0, "N", ("RAMP",), Not(guard)),
                Route(5, "RAMP", ("E", "W")), Route(1, "W", ("RAMP",))),
        configs=configs,
        tasks=(
            Task("main", "main", (Run("zero", (("acc", IConst(0)),), FConst(0.0)),)),
            Task("on_x", "data", body, 0, True),
            Task("on_d", "data", (SetInt("k", "+=", IConst(1)),), 7),
            Task("on_b", "data", (SetInt("k", "+=", IBin("+", IVar("slot"), IVar("count"))),),
                 8, True, 4, "tmp", True, 2, 3),
            Task("done", "control", (SendEnd(5),), 0),
            Task("later", "local", ()),
        ),
    )
    other = PeProgram("edge", (4, 0), "{ PE[0, y] : 0 <= y <= 3 }",
                      routes=(Route(2, "W", ("E",)),))
    return PeModule(
        "every", 5, 4, "../../gemv/gemv.lair", (("M", 32), ("T", "float16")),
        (StreamIO("input", "x", "dense", 0, "{ x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]] }"),
         StreamIO("output", "y", "sparse", 2,
                  "{ y[i = 0:31] -> [PE[5, i//8] -> index[i//4, i mod 4]] }")),
        (program, other), "../../gemv/gemv.tiled.map", (("TI", 4),))


def test_every_construct_round_trips_to_the_same_ir() -> None:
    module = every_construct()
    text = print_module(module)
    parsed = parse_module(text)
    assert parsed == module
    assert print_module(parsed) == text


def test_hand_written_gemv_round_trips() -> None:
    module = parse_module(GEMV_PE.read_text())
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    assert parse_module(text) == module


# ------------------------------------------------------------------ random modules

names = st.text(string.ascii_lowercase, min_size=1, max_size=1).flatmap(
    lambda first: st.text(string.ascii_lowercase + string.digits + "_", max_size=5).map(
        lambda rest: first + rest)).filter(
    lambda s: s not in KEYWORDS and not keyword.iskeyword(s))
colors = st.integers(0, 23)
ints = st.integers(-1000, 1000)


IEXPRS: st.SearchStrategy[IExpr] = st.recursive(
    st.one_of(ints.map(IConst), names.map(IVar),
              st.sampled_from([IVar("PE_X"), IVar("PE_Y"), IVar("index")])),
    lambda inner: st.one_of(
        st.builds(IBin, st.sampled_from(["+", "-", "*", "//", "%", "min", "max"]), inner, inner),
        st.builds(INeg, inner),
        st.builds(ISel, st.deferred(lambda: CONDS), inner, inner)),
    max_leaves=4)

CONDS: st.SearchStrategy[Cond] = st.recursive(
    st.one_of(st.builds(Cmp, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), IEXPRS,
                        IEXPRS),
              st.booleans().map(BConst)),
    lambda inner: st.one_of(st.builds(BoolOp, st.sampled_from(["&&", "||"]), inner, inner),
                            st.builds(Not, inner)),
    max_leaves=3)

FLOATS = st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, 1e-7, 3e20]))
LOADS = st.builds(Load, names, st.lists(IEXPRS, min_size=1, max_size=2).map(tuple))

FEXPRS: st.SearchStrategy[FExpr] = st.recursive(
    st.one_of(FLOATS.map(FConst), st.just(FValue()), LOADS, colors.map(Recv)),
    lambda inner: st.one_of(st.builds(FBin, st.sampled_from(["+", "-", "*", "max"]), inner,
                                      inner),
                            st.builds(FNeg, inner)),
    max_leaves=4)

STMTS: st.SearchStrategy[Stmt] = st.recursive(
    st.one_of(
        st.builds(Store, LOADS, st.sampled_from(["=", "+=", "max="]), FEXPRS),
        st.builds(SetInt, names, st.sampled_from(["=", "+="]), IEXPRS),
        st.builds(Send, colors, FEXPRS, st.one_of(st.none(), IEXPRS)),
        st.builds(SendEnd, colors),
        st.builds(Activate, names),
        st.builds(Run, names, st.lists(st.tuples(names, IEXPRS), max_size=2).map(tuple),
                  st.one_of(st.none(), FEXPRS), st.one_of(st.none(), IEXPRS)),
    ),
    lambda inner: st.one_of(
        st.builds(For, names, IEXPRS, IEXPRS, st.lists(inner, max_size=2).map(tuple)),
        st.builds(If, CONDS, st.lists(inner, max_size=2).map(tuple),
                  st.lists(inner, max_size=2).map(tuple))),
    max_leaves=4)


@st.composite
def simd_configs(draw: st.DrawFn) -> SimdConfig:
    ndims = draw(st.integers(1, 4))
    variants = tuple(draw(st.lists(st.tuples(*[st.integers(1, 65535)] * ndims), min_size=1,
                                   max_size=3)))
    strides = st.tuples(*[st.integers(-9, 9)] * ndims)

    def arrays() -> st.SearchStrategy[SimdOperand]:
        return st.builds(SimdOperand, st.just("array"), names, strides)

    source = st.one_of(arrays(), st.just(SimdOperand("scalar")),
                       colors.map(lambda c: SimdOperand("in", color=c)))
    dst = draw(st.one_of(arrays(), colors.map(lambda c: SimdOperand("out", color=c))))
    op = draw(st.sampled_from(["fmac", "fmul", "fadd", "fsub", "fmax", "copy", "fill"]))
    if op == "fill":
        srcs: tuple[SimdOperand, ...] = (SimdOperand("scalar"),)
    elif op == "copy":
        srcs = (draw(st.one_of(arrays(), colors.map(lambda c: SimdOperand("in", color=c)))),)
    else:
        srcs = (draw(source), draw(source))
    guards: tuple[Cond | None, ...] = ()
    if draw(st.booleans()):
        guards = tuple(draw(st.lists(st.one_of(st.none(), CONDS), min_size=len(variants),
                                     max_size=len(variants))))
        if all(g is None for g in guards):
            guards = ()
    return SimdConfig(draw(names), op, variants, dst, srcs, guards)


@st.composite
def tasks(draw: st.DrawFn) -> Task:
    kind = draw(st.sampled_from(["main", "data", "control", "local"]))
    color = draw(colors) if kind in ("data", "control") else None
    sparse = kind == "data" and draw(st.booleans())
    batch = draw(st.one_of(st.none(), st.integers(1, 64))) if kind == "data" else None
    if batch is None:
        return Task(draw(names), kind, tuple(draw(st.lists(STMTS, max_size=3))), color,
                    sparse)
    return Task(draw(names), kind, tuple(draw(st.lists(STMTS, max_size=3))), color, sparse,
                batch, draw(names), draw(st.booleans()),
                draw(st.one_of(st.none(), st.integers(1, 8))), draw(st.integers(1, 8)))


@st.composite
def programs(draw: st.DrawFn) -> PeProgram:
    array = st.builds(
        Array, names, st.sampled_from(["float16", "float32"]),
        st.lists(st.integers(1, 64), min_size=1, max_size=3).map(tuple),
        st.lists(IEXPRS, max_size=2).map(tuple),
        st.one_of(st.none(), names), st.just(None), st.one_of(st.none(), names), st.just(None),
        st.one_of(st.none(), st.sampled_from([0.0, 1.5, -2.0, float("inf"), float("-inf")])))
    route = st.builds(Route, colors, st.sampled_from(["N", "S", "E", "W", "RAMP"]),
                      st.lists(st.sampled_from(["N", "S", "E", "W", "RAMP"]), min_size=1,
                               max_size=3, unique=True).map(tuple),
                      st.one_of(st.none(), CONDS))
    return PeProgram(
        draw(names), draw(st.tuples(st.integers(-3, 9), st.integers(-3, 9))),
        "{ PE[x, y] : 0 <= x <= 1 and y = 0 }",
        tuple(draw(st.lists(array, max_size=3))),
        tuple(draw(st.lists(st.builds(IntVar, names, ints), max_size=2))),
        tuple(draw(st.lists(route, max_size=3))),
        tuple(draw(st.lists(simd_configs(), max_size=2))),
        tuple(draw(st.lists(tasks(), max_size=3))))


modules = st.builds(
    PeModule, names, st.integers(1, 64), st.integers(1, 64),
    st.one_of(st.none(), st.just("../x/y.lair")),
    st.lists(st.tuples(names, st.one_of(st.integers(0, 99), names)), max_size=2).map(tuple),
    st.lists(st.builds(StreamIO, st.sampled_from(["input", "output"]), names,
                       st.sampled_from(["sparse", "dense"]), colors,
                       st.just("{ x[i = 0:3] -> [PE[0, -1] -> index[i]] }")),
             max_size=2).map(tuple),
    st.lists(programs(), max_size=2).map(tuple),
    st.one_of(st.none(), st.just("../x/y.map")),
    st.lists(st.tuples(names, st.integers(0, 99)), max_size=2).map(tuple))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules)
def test_print_parse_print_is_the_identity(module: PeModule) -> None:
    text = print_module(module)
    assert print_module(parse_module(text)) == text
