"""Fuzzing the three front ends: LAIR programs, mapping specs and PE modules.

Inputs are random bytes and token-level mutations of every example (``.lair``, ``.map``,
and the PE modules the compiler makes of the examples). Each runs in a worker process
(forked, so no start-up cost) through the file-level entry points, as the command-line
drivers use them, and ends in one of four outcomes:

- ``clean``: a :class:`~dtg.errors.DtgError`, what a user should see;
- ``accepted``: no error;
- ``internal``: any other exception, or the worker dying (a crash in C): a bug;
- ``hang``: still running after the time limit (the worker is killed and replaced).

Input ``k`` of a run depends only on the seed and ``k`` (:func:`make_case`), so one bad
input can be regenerated with ``benchmarks/fuzz.py --seed S --only K``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import random
import re
import resource
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

Kind = Literal["lair", "map", "pe"]
KINDS: tuple[Kind, ...] = ("lair", "map", "pe")
SUFFIX = {"lair": ".lair", "map": ".map", "pe": ".pe"}
Outcome = Literal["clean", "accepted", "internal", "hang"]
OUTCOMES: tuple[Outcome, ...] = ("clean", "accepted", "internal", "hang")


@dataclass(frozen=True)
class Seed:
    """An example input; a mapping names the program (and sizes) it is validated against."""

    kind: Kind
    name: str
    text: str
    program: str | None = None
    params: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Case:
    """One fuzz input: the bytes of a file of ``kind`` and how they were made."""

    index: int
    kind: Kind
    data: bytes
    origin: str
    program: str | None = None
    params: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Result:
    index: int
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Summary:
    counts: Counter[str] = field(default_factory=Counter)
    bad: list[tuple[Case, Result]] = field(default_factory=list)
    by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    slowest: tuple[float, int] = (0.0, -1)

    def add(self, case: Case, result: Result) -> None:
        self.counts[result.outcome] += 1
        self.by_kind.setdefault(case.kind, Counter())[result.outcome] += 1
        if result.outcome in ("internal", "hang"):
            self.bad.append((case, result))
        if result.seconds > self.slowest[0]:
            self.slowest = (result.seconds, case.index)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# ------------------------------------------------------------------------- corpus


def example_params(path: Path) -> tuple[tuple[str, int], ...]:
    """The sizes the example at ``path`` (a mapping, or a program without one) is
    compiled with (``examples/params.toml``, through the catalog)."""
    from dtg.catalog import examples

    for e in examples():
        if path.resolve() in {p.resolve() for p in (e.mapping, e.program) if p is not None}:
            return tuple(e.params.items())
    return ()


def program_of(mapping: Path) -> Path:
    return mapping.with_name(mapping.name.split(".")[0] + ".lair")


@cache
def corpus() -> tuple[Seed, ...]:
    """Every example program and mapping, and the PE modules compiled from them (with and
    without SIMD) plus the hand-written one."""
    from dtg.codegen.driver import compile_file
    from dtg.pe import printer as peprint

    seeds: list[Seed] = []
    for path in sorted(EXAMPLES.rglob("*.lair")):
        seeds.append(Seed("lair", str(path.relative_to(ROOT)), path.read_text(), str(path),
                          example_params(path)))
    for path in sorted(EXAMPLES.rglob("*.map")):
        program, params = program_of(path), example_params(path)
        if not program.exists():
            continue
        seeds.append(Seed("map", str(path.relative_to(ROOT)), path.read_text(), str(program),
                          params))
        for simd in (True, False):
            compiled = compile_file(program, str(path), dict(params), simd=simd)
            assert compiled.module is not None
            name = f"{path.relative_to(ROOT)} ({'simd' if simd else 'scalar'}).pe"
            seeds.append(Seed("pe", name, peprint.module(compiled.module)))
    for path in sorted(EXAMPLES.rglob("*.pe")):
        seeds.append(Seed("pe", str(path.relative_to(ROOT)), path.read_text()))
    return tuple(seeds)


# ---------------------------------------------------------------------- mutations

TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|//|->|\+=|max=|<=|>="
                   r"|==|!=|&&|\|\||\+\+|/\*|\*/|.", re.S)
HUGE = "9" * 5000
NUMBERS = ["0", "1", "-1", "2", "3", "4", "7", "8", "16", "255", "65536", "2147483647",
           "2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
           "18446744073709551616", "100000000000000000000000000000", HUGE, "0" * 5000 + "1",
           "1.0", "0.5", "1e308", "1e999", "-0.0", ".5", "1.5e-40"]
WORDS = [
    # LAIR
    "lair", "let", "all", "in", "max", "float16", "float32", "T", "M", "N", "i", "j", "k",
    "x", "y", "W", "+=", "max=", "=", "//", "%", "/", "*", "+", "-", "(", ")", "[", "]",
    "{", "}", "<", ">", ",", ";", ":", "->", "#", "/*", "*/",
    # mappings and isl
    "rectangle", "placement", "input", "output", "sparse", "dense", "resident", "PE",
    "index", "mod", "and", "or", "not", "exists", "floor", "ceil", "min", "true", "false",
    "0:15", "=", "<=", ">=", "!=", "|",
    # PE code
    "module", "mesh", "reference", "program", "origin", "pes", "array", "int", "route",
    "simd", "task", "data", "control", "color", "local", "if", "else", "for", "send",
    "send_end", "activate", "run", "variant", "recv", "value", "inf", "scalar", "offset",
    "load", "store", "RAMP", "N", "S", "E", "W", "PE_X", "PE_Y", "&&", "||", "!", "==",
    "++", "i0", "i1", "i2", "i3", "out", "in",
]
REPEATS = [2, 3, 10, 100, 250, 450, 3000]


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _solid(toks: list[str]) -> list[int]:
    """Positions of the tokens that are not whitespace."""
    return [k for k, t in enumerate(toks) if not t.isspace()] or [0]


def _token(rng: random.Random, toks: list[str]) -> str:
    choice = rng.random()
    if choice < 0.35 and toks:
        return rng.choice(toks)
    if choice < 0.6:
        return rng.choice(NUMBERS)
    return rng.choice(WORDS)


def mutate(text: str, rng: random.Random, others: list[str]) -> str:
    """A few token-level edits of ``text``: deletions, duplications, replacements,
    insertions, swaps, long repetitions (deep nesting, long chains), boundary numbers,
    wrapping in many brackets, splices from other examples, truncation, odd characters."""
    toks = tokens(text) or [""]
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 6, 10])):
        pos = rng.choice(_solid(toks))
        op = rng.randrange(12)
        if op == 0 and len(toks) > 1:
            del toks[pos]
        elif op == 1:
            toks.insert(pos, toks[pos])
        elif op == 2:
            toks[pos] = _token(rng, toks)
        elif op == 3:
            toks.insert(pos, rng.choice([" ", ""]) + _token(rng, toks) + " ")
        elif op == 4:
            other = rng.choice(_solid(toks))
            toks[pos], toks[other] = toks[other], toks[pos]
        elif op == 5:
            span = toks[pos:pos + rng.randint(1, 4)]
            toks[pos:pos] = span * rng.choice(REPEATS)
        elif op == 6:
            numbers = [k for k, t in enumerate(toks) if t[:1].isdigit()]
            if numbers:
                toks[rng.choice(numbers)] = rng.choice(NUMBERS)
        elif op == 7:
            end = min(len(toks), pos + rng.randint(1, 8))
            opening, closing = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("-", ""),
                                           ("!(", ")"), ("max(", ", 0)")])
            n = rng.choice(REPEATS)
            toks[pos:end] = [opening * n, *toks[pos:end], closing * n]
        elif op == 8 and others:
            donor = tokens(rng.choice(others))
            start = rng.randrange(len(donor) or 1)
            toks[pos:pos] = donor[start:start + rng.randint(1, 40)]
        elif op == 9:
            del toks[pos + 1:]
        elif op == 10:
            toks.insert(pos, "".join(chr(rng.choice([0, 7, 9, 10, 13, 0x7F, 0xA0, 0xFEFF,
                                                     0x2028, 0x1F600, rng.randrange(32, 127)]))
                                     for _ in range(rng.randint(1, 3))))
        else:
            toks.insert(pos, rng.choice(["#", "/*", "*/", "\n", "{", "}", "[", "]", ";"]))
    return "".join(toks)


def tweak_numbers(text: str, rng: random.Random) -> str:
    """One to three numbers of ``text`` nudged (off by one, doubled, zero, negated, or a
    boundary value): inputs that mostly still parse, to exercise the semantic checks."""
    toks = tokens(text)
    numbers = [k for k, t in enumerate(toks) if t.isdigit()]
    original = {k: int(toks[k]) for k in numbers}
    for _ in range(rng.randint(1, 3)):
        if not numbers:
            break
        k = rng.choice(numbers)
        value = original[k]
        toks[k] = str(rng.choice([value + 1, max(value - 1, 0), 2 * value, 0, value + 7,
                                  value * 1000, rng.choice([1, 2, 3, 4, 8, 16, 2**31, 2**63])]))
        if rng.random() < 0.2:
            toks[k] = "-" + toks[k]
    return "".join(toks)


def random_bytes(rng: random.Random) -> bytes:
    """Bytes of three flavours: anything, printable ASCII, and words of the languages."""
    n = rng.choice([0, 1, 2, 8, 64, 512, 4096])
    flavour = rng.randrange(3)
    if flavour == 0:
        return bytes(rng.randrange(256) for _ in range(n))
    if flavour == 1:
        return bytes(rng.randrange(32, 127) for _ in range(n))
    return " ".join(rng.choice(WORDS + NUMBERS[:-3]) for _ in range(n // 4)).encode()


def make_case(seed: int, index: int, seeds: tuple[Seed, ...] | None = None) -> Case:
    """Input ``index`` of the run with ``seed``: the same every time."""
    seeds = corpus() if seeds is None else seeds
    rng = random.Random(seed * 1_000_003 + index)
    kind = rng.choice(KINDS)
    pool = [s for s in seeds if s.kind == kind]
    base = rng.choice(pool)
    if rng.random() < 0.1:
        # random bytes; mappings are still validated against an example's program
        return Case(index, kind, random_bytes(rng), "random bytes", base.program, base.params)
    if rng.random() < 0.25:
        text = tweak_numbers(base.text, rng)
    else:
        text = mutate(base.text, rng, [s.text for s in pool if s is not base])
    return Case(index, kind, text.encode("utf-8", "surrogatepass"), f"mutation of {base.name}",
                base.program, base.params)


# ---------------------------------------------------------------------- targets


@cache
def _program(path: str, params: tuple[tuple[str, int], ...]) -> Any:
    from dtg.lair.frontend import load_program

    return load_program(path, dict(params))


def check(case: Case, path: Path, backend: bool = False) -> None:
    """Run the front end of ``case.kind`` on the file at ``path`` (raises what it raises).

    LAIR: parse, specialize, check, lower, and print and parse again. Mappings: parse and
    validate against the example's program (``backend``: then compile to PE code and parse
    and verify that). PE modules: parse and verify (the static checks)."""
    from dtg.errors import DtgError
    from dtg.lair.frontend import load_program
    from dtg.lair.parser import parse
    from dtg.lair.printer import format_module
    from dtg.mapping.spec import parse_mapping_file
    from dtg.pe.parser import parse_module_file, parse_module_text
    from dtg.pesim.verify import verify_module

    if case.kind == "lair":
        program = load_program(path, dict(case.params))
        printed = format_module(program.specialized)
        try:
            parse(printed, "<printed>")
        except DtgError as err:
            raise AssertionError(f"the printed program does not parse: {err}") from None
    elif case.kind == "map":
        assert case.program is not None
        from dtg.codegen.driver import load_both
        from dtg.lair.parser import parse_file

        # (mappings may have parameters of their own, bound as dtg-codegen binds them)
        program, bound = load_both(parse_file(case.program), parse_mapping_file(path),
                                   dict(case.params))
        assert bound is not None
        mapping = bound
        if backend:
            from dtg.codegen.pipeline import compile_mapping
            from dtg.pe import printer as peprint

            compiled = compile_mapping(program, mapping)
            assert compiled.module is not None
            module, locations = parse_module_text(peprint.module(compiled.module), "<compiled>")
            verify_module(module, locations=locations)
    else:
        module, locations = parse_module_file(path)
        verify_module(module, locations=locations)


def run_case(case: Case, workdir: Path, backend: bool = False) -> Result:
    """Classify one input, in this process (no time limit: see :func:`run_cases`)."""
    from dtg.errors import DtgError
    from dtg.mapping.poly import UnboundedSetError

    path = workdir / f"input{SUFFIX[case.kind]}"
    path.write_bytes(case.data)
    start = time.perf_counter()
    try:
        check(case, path, backend)
    except UnboundedSetError as exc:  # validation let an unbounded set through: a bug
        return Result(case.index, "internal", describe(exc), time.perf_counter() - start)
    except DtgError:
        return Result(case.index, "clean", seconds=time.perf_counter() - start)
    except Exception as exc:  # everything else is what we look for
        return Result(case.index, "internal", describe(exc), time.perf_counter() - start)
    return Result(case.index, "accepted", seconds=time.perf_counter() - start)


def describe(exc: Exception) -> str:
    """The exception and the innermost frames of our code: a signature for grouping."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename.startswith(str(ROOT)) and "/tests/fuzz/" not in f.filename]
    where = " <- ".join(f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}"
                        for f in reversed(frames[-3:]))
    message = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {message} [{where}]"


# ---------------------------------------------------------------------- workers

MEMORY_HEADROOM = 3 << 30  # bytes of address space a worker may add to what it inherits


def _serve(conn: multiprocessing.connection.Connection, backend: bool) -> None:
    """A worker: classify the cases it is sent until the pipe closes."""
    try:
        with open("/proc/self/statm") as statm:
            inherited = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = inherited + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="dtg-fuzz-") as tmp:
        while True:
            try:
                case = conn.recv()
            except EOFError:
                return
            conn.send(run_case(case, Path(tmp), backend))


class _Worker:
    def __init__(self, ctx: Any, backend: bool):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, backend), daemon=True)
        self.process.start()
        child.close()
        self.case: Case | None = None
        self.started = 0.0

    def submit(self, case: Case) -> None:
        self.case, self.started = case, time.monotonic()
        self.conn.send(case)

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def run_cases(cases: Iterable[Case], *, jobs: int = 1, timeout: float = 10.0,
              backend: bool = False, progress: Callable[[Summary], None] | None = None
              ) -> Summary:
    """Run every case in ``jobs`` forked workers, each case within ``timeout`` seconds of
    wall time; a worker that overruns or dies is replaced."""
    corpus()  # build before forking, so the workers share it
    ctx = multiprocessing.get_context("fork")
    summary = Summary()
    pending: Iterator[Case] = iter(cases)
    workers = [_Worker(ctx, backend) for _ in range(max(1, jobs))]
    exhausted = False
    try:
        while True:
            for worker in workers:
                if worker.case is None and not exhausted:
                    case = next(pending, None)
                    if case is None:
                        exhausted = True
                    else:
                        worker.submit(case)
            busy = [w for w in workers if w.case is not None]
            if not busy:
                return summary
            now = time.monotonic()
            wait = max(0.0, min(w.started + timeout for w in busy) - now)
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=wait)
            for k, worker in enumerate(workers):
                case = worker.case
                if case is None:
                    continue
                result: Result | None = None
                if worker.conn in ready:
                    try:
                        result = worker.conn.recv()
                    except (EOFError, OSError):
                        worker.process.join()
                        status = worker.process.exitcode
                        result = Result(case.index, "internal",
                                        f"the worker died (exit status {status})",
                                        time.monotonic() - worker.started)
                elif time.monotonic() - worker.started > timeout:
                    result = Result(case.index, "hang", f"over {timeout:g} s",
                                    time.monotonic() - worker.started)
                if result is None:
                    continue
                worker.case = None
                summary.add(case, result)
                if progress is not None:
                    progress(summary)
                if result.outcome == "hang" or result.detail.startswith("the worker died"):
                    worker.stop()
                    workers[k] = _Worker(ctx, backend)
    finally:
        for worker in workers:
            worker.stop()


def cases(seed: int, count: int, start: int = 0) -> Iterator[Case]:
    seeds = corpus()
    for index in range(start, start + count):
        yield make_case(seed, index, seeds)
