"""The static rules of a PE module, checked before anything runs.

:func:`verify_module` raises :class:`ModuleError` (a SimulationError) for the first
broken rule, naming the program, task or declaration and, for modules read from a file,
its position. Rules that depend on the PE (route guards, placement) are checked for every
PE of every program: the mesh is small enough to list, and a clash is reported with the
PE where it happens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from math import prod

import islpy as isl
import numpy as np

from dtg.errors import SimulationError, SourceLoc
from dtg.lair.limits import counted
from dtg.mapping.poly import points
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import (
    DTYPES,
    MAX_RING,
    MAX_SIMD_DIMS,
    MAX_SIMD_SIZE,
    PORTS,
    Activate,
    Array,
    FBin,
    FConst,
    FExpr,
    FNeg,
    For,
    FValue,
    IConst,
    IExpr,
    If,
    Load,
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
from dtg.pe.parser import Locations, stmt_key
from dtg.pe.walk import cond_iexprs, cond_names, iexpr_divisions, iexpr_names
from dtg.pesim.code import ConfigSetup
from dtg.pesim.expr import compile_cond
from dtg.pesim.isltext import (
    box,
    check_array_set,
    check_pes,
    check_stream,
    mesh_ring,
    outside,
    shifted,
)
from dtg.pesim.vector import cvalues

PE_PARAMS = ("PE_X", "PE_Y")
RESERVED = {"PE_X", "PE_Y", "index", "value", "scalar", "count", "slot"}
SRC_COUNT = {"fmac": 2, "fmul": 2, "fadd": 2, "fsub": 2, "fmax": 2, "copy": 1}


class ModuleError(SimulationError):
    """A PE module that breaks a static rule of the PE code."""


def pe_name(x: int, y: int) -> str:
    return f"PE[{x}, {y}]"


def placed_pes(program: PeProgram, width: int, height: int, loc: SourceLoc | None = None
               ) -> isl.Set:
    """The PEs running ``program`` (absolute coordinates) as an isl set; an error when
    one lies outside the mesh ``PE[width, height]``, found by an isl test, so that a huge
    PE set is never enumerated."""
    pes = shifted(check_pes(program.pes, loc, program.name), program.origin)
    stray = outside(pes, box("PE", (width, height)))
    if stray is not None:
        raise ModuleError(f"program {program.name} runs on {pe_name(*stray)}, outside the "
                          f"mesh PE[{width}, {height}] (columns 0..{width - 1}, rows "
                          f"0..{height - 1})", loc)
    return pes


def program_pes(program: PeProgram, width: int, height: int, loc: SourceLoc | None = None
                ) -> list[tuple[int, int]]:
    """Absolute coordinates of the PEs running ``program``, in lexicographic order."""
    return [(x, y) for x, y in points(placed_pes(program, width, height, loc))]


def pe_coordinates(program: PeProgram, width: int, height: int,
                   loc: SourceLoc | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The PEs running ``program`` as arrays of absolute coordinates, in the order of
    :func:`program_pes`: a box of PEs without listing it, other sets by isl."""
    pes = placed_pes(program, width, height, loc)
    if pes.is_empty():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo = [int(pes.dim_min_val(d).to_python()) for d in range(2)]
    hi = [int(pes.dim_max_val(d).to_python()) for d in range(2)]
    if pes.is_equal(box(pes.get_tuple_name(), (hi[0] + 1, hi[1] + 1), (lo[0], lo[1]))):
        x = np.repeat(np.arange(lo[0], hi[0] + 1, dtype=np.int64), hi[1] - lo[1] + 1)
        y = np.tile(np.arange(lo[1], hi[1] + 1, dtype=np.int64), hi[0] - lo[0] + 1)
        return x, y
    listed = np.array(points(pes), dtype=np.int64).reshape(-1, 2)
    return listed[:, 0].copy(), listed[:, 1].copy()


def adjacent(ext: tuple[int, int], width: int, height: int) -> tuple[tuple[int, int], str] | None:
    """The mesh PE next to an external PE and the port facing it (None: not adjacent)."""
    x, y = ext
    if 0 <= x < width and y == -1:
        return (x, 0), "N"
    if 0 <= x < width and y == height:
        return (x, height - 1), "S"
    if 0 <= y < height and x == -1:
        return (0, y), "W"
    if 0 <= y < height and x == width:
        return (width - 1, y), "E"
    return None


def array_bytes(array: Array) -> int:
    return array.bytes


def verify_module(module: PeModule, config: FabricConfig | None = None, *,
                  locations: Locations | None = None) -> None:
    """Check every static rule of ``module``; raise :class:`ModuleError` on the first break."""
    _Verifier(module, config or FabricConfig(), locations or {}).run()


class _Verifier:
    def __init__(self, module: PeModule, config: FabricConfig, locs: Locations):
        self.module = module
        self.config = config
        self.locs = locs

    def fail(self, message: str, *key: str) -> SimulationError:
        loc: SourceLoc | None = None
        # fall back from a statement to its task, from a clause to its declaration
        for k in range(len(key), 0, -1):
            loc = self.locs.get(tuple(key[:k]))
            if loc is not None:
                break
        return ModuleError(message, loc)

    def run(self) -> None:
        m = self.module
        if m.width < 1 or m.height < 1:
            raise self.fail(f"the mesh PE[{m.width}, {m.height}] is empty; expected positive "
                            "numbers of columns and rows", "module")
        names = Counter(k for k, _ in m.params)
        for name, count in names.items():
            if count > 1:
                raise self.fail(f"parameter {name} is given {count} times on the reference "
                                "line", "reference")
        self.streams()
        self.placement()
        seen: set[str] = set()
        for program in m.programs:
            if program.name in seen:
                raise self.fail(f"two programs are called {program.name}", "program",
                                program.name)
            seen.add(program.name)
            self.program(program)

    # -------------------------------------------------------------------- streams

    def streams(self) -> None:
        m = self.module
        ends: dict[tuple[str, int, tuple[int, int]], str] = {}
        # An input may arrive in parts (on several colors or sides); the parts' elements
        # are disjoint, so every element is injected once.
        parts: dict[tuple[str, str], isl.Set] = {}
        for k, s in enumerate(m.streams):
            key = ("stream", str(k))
            if s.direction not in ("input", "output") or s.kind not in ("sparse", "dense"):
                raise self.fail(f"stream {s.tensor}: direction must be input or output and kind "
                                "sparse or dense", "stream_head", str(k))
            self.color(s.color, f"{s.direction} stream {s.tensor}", "stream_head", str(k))
            rel = check_stream(s.relation, s.tensor, self.locs.get(key))
            seen = parts.get((s.direction, s.tensor))
            if seen is not None and s.direction == "output":
                raise self.fail(f"output stream {s.tensor} is declared twice", *key)
            if seen is not None and not seen.intersect(rel.domain()).is_empty():
                raise self.fail(f"input stream {s.tensor} is declared in parts that share "
                                f"elements ({seen.intersect(rel.domain())}); each element "
                                "must arrive once", *key)
            parts[(s.direction, s.tensor)] = rel.domain() if seen is None else seen.union(
                rel.domain())
            externals = rel.range_factor_domain().range()
            stray = outside(externals, mesh_ring(m.width, m.height))  # before listing them
            if stray is not None:
                ext_pe = (stray[0], stray[1])
                where = "arrives from" if s.direction == "input" else "goes to"
                if 0 <= ext_pe[0] < m.width and 0 <= ext_pe[1] < m.height:
                    raise self.fail(f"{s.direction} stream {s.tensor} {where} {pe_name(*ext_pe)}, "
                                    f"inside the mesh PE[{m.width}, {m.height}]; external PEs "
                                    "lie outside it", *key)
                raise self.fail(f"{s.direction} stream {s.tensor} {where} "
                                f"{pe_name(*ext_pe)}, which is not next to the mesh "
                                f"(columns 0..{m.width - 1}, rows 0..{m.height - 1})", *key)
            for ext in points(externals):
                ext_pe = (ext[0], ext[1])
                end = (s.direction, s.color, ext_pe)
                if end in ends:
                    raise self.fail(f"{s.direction} streams {ends[end]} and {s.tensor} both use "
                                    f"color {s.color} at {pe_name(*ext_pe)}; their wavelets "
                                    "could not be told apart", *key)
                ends[end] = s.tensor

    # ------------------------------------------------------------------ placement

    def placement(self) -> None:
        """No PE runs two programs: the first PE (in order) of a program that an earlier
        one runs too, found by isl without listing the PEs."""
        m = self.module
        earlier: list[tuple[str, isl.Set]] = []
        for program in m.programs:
            loc = self.locs.get(("pes", program.name))
            pes = placed_pes(program, m.width, m.height, loc)
            taken = [(name, pes.intersect(other)) for name, other in earlier
                     if name != program.name]
            clashes = [(tuple(points(common.lexmin())[0]), name) for name, common in taken
                       if not common.is_empty()]
            if clashes:
                pe, name = min(clashes)
                raise self.fail(f"{pe_name(*pe)} runs two programs, {name} and "
                                f"{program.name}; every PE runs at most one",
                                "pes", program.name)
            earlier.append((program.name, pes))

    # -------------------------------------------------------------------- program

    def color(self, color: int | None, what: str, *key: str) -> None:
        if color is None or not 0 <= color < self.config.colors:
            raise self.fail(f"{what} uses color {color}; colors are 0..{self.config.colors - 1}",
                            *key)

    def program(self, p: PeProgram) -> None:
        pn = p.name
        names: dict[str, str] = {}
        for a in p.arrays:
            self.declare(names, a.name, "array", ("array", pn, a.name), pn)
            self.array(p, a)
        for v in p.ints:
            self.declare(names, v.name, "int", ("int", pn, v.name), pn)
        total = sum(array_bytes(a) for a in p.arrays)
        if total > self.config.memory_bytes:
            sizes = ", ".join(f"{a.name}: {array_bytes(a)}" for a in p.arrays)
            raise self.fail(f"the arrays of program {pn} need {total} bytes ({sizes}); a PE has "
                            f"{self.config.memory_bytes} bytes of local memory", "program", pn)
        for k, r in enumerate(p.routes):
            self.route(p, r, k)
        self.route_clashes(p)
        self.tasks(p)
        data_colors = {t.color for t in p.tasks if t.kind == "data"}
        configs: dict[str, SimdConfig] = {}
        count = 0
        for c in p.configs:
            if c.name in configs:
                raise self.fail(f"program {pn} has two SIMD configurations called {c.name}",
                                "simd", pn, c.name)
            configs[c.name] = c
            self.simd(p, c, data_colors)
            count += len(c.variants)
        if count > self.config.max_simd_configs:
            self.config_budget(p)
        for t in p.tasks:
            scope = set(PE_PARAMS) | {v.name for v in p.ints}
            if t.kind == "data" and t.sparse and t.groups is None:
                scope.add("index")  # (a batch of whole groups has no first index)
            if t.batch is not None:
                scope.update(("count", "slot"))
            self.block(p, t, t.body, (), scope, data_colors, configs)

    def declare(self, names: dict[str, str], name: str, kind: str, key: tuple[str, ...],
                pn: str) -> None:
        if name in RESERVED:
            raise self.fail(f"'{name}' is reserved in PE code; choose another name for the "
                            f"{kind}", *key)
        if name in names:
            raise self.fail(f"program {pn} declares '{name}' twice (as {names[name]} and as "
                            f"{kind})", *key)
        names[name] = kind

    def array(self, p: PeProgram, a: Array) -> None:
        key = ("array", p.name, a.name)
        if a.dtype not in DTYPES:
            raise self.fail(f"array {a.name} has type {a.dtype}; expected "
                            f"{' or '.join(DTYPES)}", *key)
        if a.shape and min(a.shape) < 1:  # shape () is a scalar
            raise self.fail(f"array {a.name} has shape {list(a.shape)}; every dimension needs "
                            "a positive size", *key)
        if a.offset and len(a.offset) != len(a.shape):
            raise self.fail(f"array {a.name} has rank {len(a.shape)} but {len(a.offset)} offset "
                            "expressions", *key)
        for e in a.offset:
            self.iexpr(e, set(PE_PARAMS), f"the offset of array {a.name}", *key)
        if a.load_set is not None and a.load is None:
            raise self.fail(f"array {a.name} has a load set but no tensor to load", *key)
        if a.store_set is not None and a.store is None:
            raise self.fail(f"array {a.name} has a store set but no tensor to store", *key)
        if a.load is not None and a.load_set is not None:
            check_array_set(a.load_set, a.load, len(a.shape), f"load set of array {a.name}",
                            self.locs.get(("load", p.name, a.name)) or self.locs.get(key))
        if a.store is not None and a.store_set is not None:
            check_array_set(a.store_set, a.store, len(a.shape), f"store set of array {a.name}",
                            self.locs.get(("store", p.name, a.name)) or self.locs.get(key))

    def route(self, p: PeProgram, r: Route, k: int) -> None:
        key = ("route", p.name, str(k))
        self.color(r.color, f"route {k} of program {p.name}", *key)
        if r.source not in PORTS:
            raise self.fail(f"route source port {r.source} is not one of {', '.join(PORTS)}",
                            *key)
        if not r.targets:
            raise self.fail("a route needs at least one target port", *key)
        for t in r.targets:
            if t not in PORTS:
                raise self.fail(f"route target port {t} is not one of {', '.join(PORTS)}", *key)
        twice = [t for t, n in Counter(r.targets).items() if n > 1]
        if twice:
            raise self.fail(f"route target port {twice[0]} is listed twice", *key)
        if r.guard is not None:
            names = {n for e in cond_iexprs(r.guard) for n in iexpr_names(e)}
            unknown = sorted(names - set(PE_PARAMS))
            if unknown:
                raise self.fail(f"route guard uses '{unknown[0]}'; a guard may use only PE_X "
                                "and PE_Y", *key)
            for e in cond_iexprs(r.guard):
                self.iexpr(e, set(PE_PARAMS), "a route guard", *key)

    def route_clashes(self, p: PeProgram) -> None:
        """Two routes with the same color and source port on one PE would be ambiguous
        (found for all PEs at once; the first PE with a clash is then looked at)."""
        if not p.routes:
            return
        guards = [compile_cond(r.guard) if r.guard is not None else None for r in p.routes]
        ox, oy = p.origin
        xs, ys = pe_coordinates(p, self.module.width, self.module.height)
        coords = {"PE_X": xs - ox, "PE_Y": ys - oy}
        holding: dict[tuple[int, str], np.ndarray] = {}
        for r in p.routes:
            holds = (np.ones(xs.size, dtype=np.int64) if r.guard is None
                     else cvalues(r.guard, coords, xs.size).astype(np.int64))
            key = (r.color, r.source)
            holding[key] = holding[key] + holds if key in holding else holds
        clash = np.zeros(xs.size, dtype=bool)
        for count in holding.values():
            clash |= count > 1
        if not clash.any():
            return
        first = int(np.argmax(clash))
        for x, y in [(int(xs[first]), int(ys[first]))]:
            env = {"PE_X": x - ox, "PE_Y": y - oy}
            seen: dict[tuple[int, str], int] = {}
            for k, (r, g) in enumerate(zip(p.routes, guards, strict=True)):
                if g is not None and not g(env):
                    continue
                if (r.color, r.source) in seen:
                    raise self.fail(
                        f"{pe_name(x, y)} (program {p.name}) has two routes for color {r.color} "
                        f"from {r.source} (routes {seen[(r.color, r.source)]} and {k}); guard "
                        "them so that at most one applies", "route", p.name, str(k))
                seen[(r.color, r.source)] = k

    def tasks(self, p: PeProgram) -> None:
        names: set[str] = set()
        bound: dict[tuple[str, int], str] = {}
        mains = []
        for t in p.tasks:
            key = ("task", p.name, t.name)
            if t.name in names:
                raise self.fail(f"program {p.name} has two tasks called {t.name}", *key)
            names.add(t.name)
            if t.kind not in ("main", "data", "control", "local"):
                raise self.fail(f"task {t.name} has unknown kind {t.kind}", *key)
            if t.kind in ("data", "control"):
                self.color(t.color, f"{t.kind} task {t.name}", *key)
                assert t.color is not None
                if (t.kind, t.color) in bound:
                    raise self.fail(f"tasks {bound[(t.kind, t.color)]} and {t.name} are both "
                                    f"{t.kind} tasks of color {t.color}; a color triggers at "
                                    f"most one {t.kind} task", *key)
                bound[(t.kind, t.color)] = t.name
            elif t.color is not None:
                raise self.fail(f"{t.kind} task {t.name} cannot be bound to a color", *key)
            if t.sparse and t.kind != "data":
                raise self.fail(f"only data tasks can be sparse; {t.name} is a {t.kind} task",
                                *key)
            if t.batch is not None:
                self.batch(p, t, key)
            if t.kind == "main":
                mains.append(t.name)
            if t.kind == "local" and any(isinstance(st, Activate) and st.task == t.name
                                         for st in t.body):
                raise self.fail(f"local task {t.name} activates itself unconditionally, so "
                                "it would run forever; guard the activation with a "
                                "condition that becomes false", *key)
        if len(mains) > 1:
            raise self.fail(f"program {p.name} has {len(mains)} main tasks ({', '.join(mains)}); "
                            "expected at most one", "task", p.name, mains[1])

    def batch(self, p: PeProgram, t: Task, key: tuple[str, ...]) -> None:
        """A batched data task lands its wavelets in an array of the program."""
        assert t.batch is not None
        if t.kind != "data":
            raise self.fail(f"task {t.name}: only data tasks can take wavelets in batches",
                            *key)
        if t.batch < 1:
            raise self.fail(f"task {t.name}: a batch holds at least 1 wavelet, not {t.batch}",
                            *key)
        land = next((a for a in p.arrays if a.name == t.land), None)
        if land is None:
            raise self.fail(f"task {t.name} lands its wavelets in '{t.land}', which is not an "
                            f"array of program {p.name}", *key)
        if t.groups is not None and t.groups < 1:
            raise self.fail(f"task {t.name}: a batch holds at least 1 group, not {t.groups}",
                            *key)
        if not 1 <= t.ring <= MAX_RING:
            raise self.fail(f"task {t.name}: a landing ring holds 1 to {MAX_RING} batches, "
                            f"not {t.ring}", *key)
        slots = t.slot_size * t.ring
        if prod(land.shape) < slots:
            what = f"{t.groups} groups of up to {t.batch}" if t.groups is not None else \
                f"{t.batch}"
            ring = f", {t.ring} at a time," if t.ring > 1 else ""
            raise self.fail(f"task {t.name} lands batches of {what} wavelets{ring} in "
                            f"'{land.name}', which holds "
                            f"{counted(prod(land.shape), 'element')}", *key)
        control = next((c for c in p.tasks if c.kind == "control" and c.color == t.color),
                       None)
        if t.groups is not None and control is not None:
            raise self.fail(f"task {t.name} takes whole groups in batches, so the end marks "
                            f"of color {t.color} close its batches and trigger no control "
                            f"task; drop control task {control.name} (count groups in "
                            f"{t.name})", *key)
        if t.once and not t.sparse:
            raise self.fail(f"task {t.name}: 'once' is for sparse batches (a dense batch "
                            "clears nothing); drop it", *key)
        if t.once and (land.load is not None or land.init not in (None, 0)):
            raise self.fail(f"task {t.name}: a 'once' batch relies on its landing array "
                            f"starting at 0, but '{land.name}' starts "
                            + ("loaded" if land.load is not None else f"at {land.init}"), *key)

    def config_budget(self, p: PeProgram) -> None:
        """No PE sets up more SIMD configurations (size variants counted) than it has."""
        setup = ConfigSetup(p)
        ox, oy = p.origin
        for x, y in program_pes(p, self.module.width, self.module.height):
            count = setup.count({"PE_X": x - ox, "PE_Y": y - oy})
            if count > self.config.max_simd_configs:
                raise self.fail(f"{pe_name(x, y)} (program {p.name}) sets up {count} SIMD "
                                "configurations (counting size variants); a PE has at most "
                                f"{self.config.max_simd_configs}", "program", p.name)

    def simd(self, p: PeProgram, c: SimdConfig, data_colors: set[int | None]) -> None:
        key = ("simd", p.name, c.name)
        arrays = {a.name: a for a in p.arrays}
        if not c.variants:
            raise self.fail(f"simd {c.name} has no sizes", *key)
        if c.guards and len(c.guards) != len(c.variants):
            raise self.fail(f"simd {c.name} has {len(c.guards)} guards for {len(c.variants)} "
                            "size variants; expected one per variant", *key)
        for g in c.guards:
            if g is None:
                continue
            unknown = sorted({n for e in cond_iexprs(g) for n in iexpr_names(e)}
                             - set(PE_PARAMS))
            if unknown:
                raise self.fail(f"the guard of a variant of simd {c.name} uses '{unknown[0]}'; "
                                "a guard may use only PE_X and PE_Y", *key)
            for e in cond_iexprs(g):
                self.iexpr(e, set(PE_PARAMS), "a SIMD guard", *key)
        ndims = len(c.variants[0])
        for sizes in c.variants:
            if len(sizes) != ndims:
                raise self.fail(f"the size variants of simd {c.name} differ in rank", *key)
            if not 1 <= len(sizes) <= MAX_SIMD_DIMS:
                raise self.fail(f"simd {c.name} has a {len(sizes)}-dimensional domain; the SIMD "
                                f"engine supports 1 to {MAX_SIMD_DIMS} dimensions", *key)
            for n in sizes:
                if not 1 <= n <= MAX_SIMD_SIZE:
                    raise self.fail(f"simd {c.name} has size {n}; sizes are 1..{MAX_SIMD_SIZE}",
                                    *key)
        if c.op not in (*SRC_COUNT, "fill"):
            raise self.fail(f"simd {c.name} has unknown operation {c.op}", *key)
        if c.op == "fill":
            if c.srcs and (len(c.srcs) != 1 or c.srcs[0].kind != "scalar"):
                raise self.fail(f"simd {c.name} is a fill: its only source is 'scalar'", *key)
        elif len(c.srcs) != SRC_COUNT[c.op]:
            raise self.fail(f"simd {c.name} ({c.op}) needs {SRC_COUNT[c.op]} source operands, "
                            f"has {len(c.srcs)}", *key)
        if c.dst.kind not in ("array", "out"):
            raise self.fail(f"simd {c.name} writes to '{c.dst.kind}'; the destination is an "
                            "array or out(c)", *key)
        if c.op == "fmac" and c.dst.kind != "array":
            raise self.fail(f"simd {c.name} accumulates (+=) into out({c.dst.color}); an "
                            "accumulating destination must be an array", *key)
        colors: set[int] = set()
        for role, o in [("destination", c.dst), *(("source", s) for s in c.srcs)]:
            if role == "source" and o.kind == "out":
                raise self.fail(f"simd {c.name} reads from out({o.color}); sources are arrays, "
                                "scalar or in(c)", *key)
            self.operand(c, o, ndims, arrays, key)
            if o.kind == "in":
                if o.color in data_colors:
                    raise self.fail(f"simd {c.name} reads in({o.color}), but color {o.color} "
                                    "triggers a data task; in(c) reads colors bound to no "
                                    "task", *key)
                if o.color in colors:
                    raise self.fail(f"simd {c.name} reads in({o.color}) twice", *key)
                colors.add(o.color)  # type: ignore[arg-type]

    def operand(self, c: SimdConfig, o: SimdOperand, ndims: int, arrays: dict[str, Array],
                key: tuple[str, ...]) -> None:
        if o.kind in ("in", "out"):
            self.color(o.color, f"simd {c.name} operand {o.kind}", *key)
            return
        if o.kind == "scalar":
            return
        if o.kind != "array" or o.array is None:
            raise self.fail(f"simd {c.name} has a malformed operand {o}", *key)
        if o.array not in arrays:
            raise self.fail(f"simd {c.name} uses unknown array {o.array}", *key)
        if len(o.strides) != ndims:
            raise self.fail(f"simd {c.name} operand {o.array} has {len(o.strides)} strides for "
                            f"a {ndims}-dimensional domain", *key)

    # ----------------------------------------------------------------- statements

    def block(self, p: PeProgram, t: Task, body: Iterable[Stmt], path: tuple[int, ...],
              scope: set[str], data_colors: set[int | None], configs: dict[str, SimdConfig]
              ) -> None:
        for k, s in enumerate(body):
            self.stmt(p, t, s, (*path, k), scope, data_colors, configs)

    def stmt(self, p: PeProgram, t: Task, s: Stmt, path: tuple[int, ...], scope: set[str],
             data_colors: set[int | None], configs: dict[str, SimdConfig]) -> None:
        key = stmt_key(p.name, t.name, path)
        where = f"task {t.name}"
        ints = {v.name for v in p.ints}

        def fx(e: FExpr) -> None:
            self.fexpr(p, t, e, scope, data_colors, key)

        def ix(e: IExpr) -> None:
            self.iexpr(e, scope, where, *key)

        match s:
            case Store(target, _, value):
                self.load(p, t, target, scope, key)
                fx(value)
            case SetInt(name, _, value):
                if name not in ints:
                    raise self.fail(f"{where} assigns to '{name}', which is not an int of "
                                    f"program {p.name}", *key)
                ix(value)
            case For(var, lo, hi, body):
                ix(lo)
                ix(hi)
                if var in scope or var in {a.name for a in p.arrays} or var in RESERVED:
                    raise self.fail(f"{where}: loop variable '{var}' hides another name; choose "
                                    "a fresh name", *key)
                self.block(p, t, body, path, scope | {var}, data_colors, configs)
            case If(cond, then, orelse, static):
                for e in cond_iexprs(cond):
                    ix(e)
                other = sorted(set(cond_names(cond)) - {"PE_X", "PE_Y"})
                if static and other:
                    raise self.fail(f"{where}: 'if static' may test only PE_X and PE_Y (it "
                                    "is settled when the code is placed on a PE), not "
                                    f"{', '.join(other)}: test those with a plain 'if'", *key)
                self.block(p, t, then + orelse, path, scope, data_colors, configs)
            case Send(color, value, index):
                self.color(color, f"a send in {where}", *key)
                fx(value)
                if index is not None:
                    ix(index)
            case SendEnd(color):
                self.color(color, f"a send_end in {where}", *key)
            case Activate(task):
                kinds = {x.name: x.kind for x in p.tasks}
                if task not in kinds:
                    raise self.fail(f"{where} activates unknown task {task}", *key)
                if kinds[task] != "local":
                    raise self.fail(f"{where} activates {task}, a {kinds[task]} task; only "
                                    "local tasks can be activated", *key)
            case Run():
                self.run_stmt(p, t, s, scope, data_colors, configs, key)
            case _:
                raise self.fail(f"{where} has an unknown statement {s!r}", *key)

    def run_stmt(self, p: PeProgram, t: Task, s: Run, scope: set[str],
            data_colors: set[int | None], configs: dict[str, SimdConfig],
            key: tuple[str, ...]) -> None:
        where = f"task {t.name}"
        c = configs.get(s.config)
        if c is None:
            raise self.fail(f"{where} runs unknown SIMD configuration {s.config}", *key)
        wanted_set = {o.array for o in (c.dst, *c.srcs) if o.kind == "array" and o.array}
        given = [name for name, _ in s.bases]
        twice = [n for n, k in Counter(given).items() if k > 1]
        if twice:
            raise self.fail(f"{where}: run {s.config} gives the base of {twice[0]} twice", *key)
        if set(given) != wanted_set:
            missing = sorted(wanted_set - set(given))
            extra = sorted(set(given) - wanted_set)
            detail = (f"lacks the base of {', '.join(missing)}" if missing
                      else f"gives a base for {', '.join(extra)}, which it does not use")
            raise self.fail(f"{where}: run {s.config} {detail}; expected bases for "
                            f"{', '.join(sorted(wanted_set)) or 'no arrays'}", *key)
        for _, e in s.bases:
            self.iexpr(e, scope, where, *key)
        self.run_arrays(p, c, s, where, key)
        uses_scalar = any(o.kind == "scalar" for o in c.srcs) or c.op == "fill"
        if uses_scalar and s.scalar is None:
            raise self.fail(f"{where}: run {s.config} needs a scalar operand, e.g. "
                            f"run {s.config} {{...}} (value);", *key)
        if not uses_scalar and s.scalar is not None:
            raise self.fail(f"{where}: run {s.config} gives a scalar, but simd {c.name} has no "
                            "scalar operand", *key)
        if s.scalar is not None:
            self.fexpr(p, t, s.scalar, scope, data_colors, key)
        if len(c.variants) > 1 and s.variant is None:
            raise self.fail(f"{where}: simd {c.name} has {len(c.variants)} size variants; "
                            f"select one with run {c.name} variant(e) {{...}}", *key)
        if s.variant is not None:
            self.iexpr(s.variant, scope, where, *key)
        if s.length is not None:
            self.iexpr(s.length, scope, where, *key)

    def run_arrays(self, p: PeProgram, c: SimdConfig, s: Run, where: str,
                   key: tuple[str, ...]) -> None:
        """A run's bindings of the configuration's array operands to other arrays: each
        an operand of it, bound once, to a declared array of the same type, and
        no two operands on one array (elements are flat offsets from the base, so the
        shapes may differ: the engines check every element lies inside its array)."""
        arrays = {a.name: a for a in p.arrays}
        operands = {o.array for o in (c.dst, *c.srcs) if o.kind == "array" and o.array}
        bound = [o for o, _ in s.arrays]
        for o, k in Counter(bound).items():
            if k > 1:
                raise self.fail(f"{where}: run {s.config} binds {o} twice", *key)
        for o, a in s.arrays:
            if o not in operands:
                raise self.fail(f"{where}: run {s.config} binds {o} -> {a}, but simd "
                                f"{c.name} has no operand on {o}; its arrays are "
                                f"{', '.join(sorted(operands)) or 'none'}", *key)
            if a not in arrays:
                raise self.fail(f"{where}: run {s.config} binds {o} to unknown array {a}",
                                *key)
            mine, theirs = arrays[o], arrays[a]
            if mine.dtype != theirs.dtype:
                raise self.fail(f"{where}: run {s.config} binds {o} ({mine.dtype}) to {a} "
                                f"({theirs.dtype}); a bound array has the operand's type",
                                *key)
        actual = [s.array(o) for o in sorted(operands)]
        if len(set(actual)) != len(actual):
            pairs = ", ".join(f"{o} -> {s.array(o)}" for o in sorted(operands))
            raise self.fail(f"{where}: run {s.config} puts two operands of simd {c.name} on "
                            f"one array ({pairs}); a configuration's distinct arrays stay "
                            "distinct", *key)

    def load(self, p: PeProgram, t: Task, ref: Load, scope: set[str], key: tuple[str, ...]
             ) -> None:
        arrays = {a.name: a for a in p.arrays}
        a = arrays.get(ref.array)
        if a is None:
            raise self.fail(f"task {t.name} uses unknown array {ref.array}", *key)
        if len(ref.index) != len(a.shape):
            raise self.fail(f"task {t.name} indexes {ref.array} with {len(ref.index)} "
                            f"subscripts; it has rank {len(a.shape)}", *key)
        for e in ref.index:
            self.iexpr(e, scope, f"task {t.name}", *key)

    def fexpr(self, p: PeProgram, t: Task, e: FExpr, scope: set[str],
              data_colors: set[int | None], key: tuple[str, ...]) -> None:
        match e:
            case FConst(v):
                if v != v:
                    raise self.fail(f"task {t.name} uses the constant NaN, which PE code cannot "
                                    "write", *key)
            case FValue():
                if t.kind != "data":
                    raise self.fail(f"task {t.name} reads 'value', but only data tasks receive "
                                    "a wavelet value", *key)
                if t.batch is not None:
                    raise self.fail(f"task {t.name} reads 'value', but a batched task finds "
                                    f"its wavelets' values in '{t.land}'", *key)
            case Load():
                self.load(p, t, e, scope, key)
            case Recv(color):
                self.color(color, f"a recv in task {t.name}", *key)
                if color in data_colors:
                    raise self.fail(f"task {t.name} calls recv({color}), but color {color} "
                                    "triggers a data task; recv reads colors bound to no task",
                                    *key)
            case FBin(_, lhs, rhs):
                self.fexpr(p, t, lhs, scope, data_colors, key)
                self.fexpr(p, t, rhs, scope, data_colors, key)
            case FNeg(operand):
                self.fexpr(p, t, operand, scope, data_colors, key)
            case _:
                raise self.fail(f"task {t.name} has an unknown expression {e!r}", *key)

    def iexpr(self, e: IExpr, scope: set[str], where: str, *key: str) -> None:
        for name in iexpr_names(e):
            if name not in scope:
                hint = ("; 'index' exists only in sparse data tasks" if name.startswith("index")
                        else f"; '{name}' exists only in batched data tasks"
                        if name in ("count", "slot") else "")
                raise self.fail(f"{where} uses unknown integer '{name}'{hint}", *key)
        for div in iexpr_divisions(e):
            if not isinstance(div.rhs, IConst) or div.rhs.value <= 0:
                raise self.fail(f"{where}: '{div.op}' needs a positive constant on its right",
                                *key)
