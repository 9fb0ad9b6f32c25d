"""Differential testing: compile a (program, mapping) pair with and without SIMD, simulate
both, compare with the reference interpreter, and classify how the pair ended.

Outcomes of one pair (:func:`classify`):

- ``verified``: both compilations are accepted and every simulated output equals the
  reference interpreter's (exactly: the inputs are random integers, seed fixed);
- ``rejected``: both are refused with a located
  :class:`~dtg.errors.UnsupportedMappingError` (a flow the compiler does not
  realize yet), a legal answer; ``reason`` groups the messages (first words, names and
  numbers blanked);

and the failures (:data:`FAILURES`), each a bug:

- ``mismatch``: the run finished but an output differs from the reference;
- ``internal``: anything but a user error while compiling (a traceback, a
  :class:`~dtg.errors.CodegenError`), or any error while verifying or simulating
  the code the compiler printed (deadlock, unconsumed wavelets, cycle limit);
- ``unlocated``: a user error without a position;
- ``inconsistent``: the SIMD and the scalar compilation disagree on accepting the pair;
- ``invalid``: the front end or mapping validation refused the pair (located); the
  generator only makes valid programs and well-formed mappings, so either it or the
  validation is wrong;
- ``timeout``: one run took longer than the time limit;
- ``engines``: the compiled engine (:mod:`pesim.fast`) reports another run than the simpy
  engine on the same module and inputs (any figure: cycles, a PE's statistics, a link's
  load, an output's bytes, the number of events), or fails where it does not;
- ``bound``: the run took fewer cycles than the mapping's lower bound (the bound is
  wrong).
"""

from __future__ import annotations

import re
import signal
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("verified", "rejected", "mismatch", "internal", "unlocated", "inconsistent",
            "invalid", "timeout", "engines", "bound")
FAILURES = frozenset(OUTCOMES[2:])
SEED = 0  # the inputs: pesim's default random integers
CYCLE_LIMIT = 5_000_000
TIMEOUT = 120.0  # seconds per compilation and simulation
LOCATED = re.compile(r"^[^\s:]+(?::\d+){2}: ")


@dataclass(frozen=True)
class Run:
    """How one compilation (SIMD or scalar) and its simulation ended."""

    outcome: str  # verified, rejected, or a failure
    reason: str = ""  # grouping key
    detail: str = ""  # the full message
    seconds: float = 0.0


@dataclass(frozen=True)
class Outcome:
    outcome: str
    reason: str
    detail: str
    simd: Run
    scalar: Run

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    @property
    def key(self) -> str:
        return f"{self.outcome}: {self.reason}" if self.reason else self.outcome


class Timeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`Timeout` after ``seconds`` (main thread only; no limit elsewhere)."""
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return
    try:
        old = signal.signal(signal.SIGALRM, _alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _alarm(signum: int, frame: object) -> None:
    raise Timeout


def reason_key(message: str, words: int = 9) -> str:
    """A short grouping key for a message: its first line without position, tensor and
    statement names, numbers or isl sets, cut to ``words`` words."""
    line = message.splitlines()[0] if message else ""
    line = LOCATED.sub("", line)
    line = re.sub(r"^(error|syntax error): ", "", line)
    line = re.sub(r"\{[^}]*\}", "{..}", line)
    line = re.sub(r"'[^']*'", "'_'", line)
    line = re.sub(r"\b[A-Za-z_]\w*\[[^\]]*\]", "_[..]", line)
    line = re.sub(r"\b([a-z]+)_\w+", r"\1_*", line)
    line = re.sub(r"-?\b\d+\b", "N", line)
    return " ".join(line.split()[:words]).rstrip(",;:")


def where(exc: BaseException) -> str:
    """The innermost frames of the project's code that raised ``exc``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename.startswith(str(ROOT)) and "/tests/" not in f.filename
              and "/.venv/" not in f.filename]
    return " <- ".join(f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}"
                       for f in reversed(frames[-2:]))


def _internal(exc: BaseException, stage: str, workdir: Path, start: float) -> Run:
    text = str(exc).replace(str(workdir) + "/", "")
    first = text.splitlines()[0] if text else ""
    if type(exc).__name__ == "DeadlockError":  # what the first PE waits for
        first = first.split(", but ", 1)[-1]
    detail = f"{stage}: {type(exc).__name__}: {text}\n{''.join(traceback.format_exception(exc))}"
    return Run("internal", f"{stage} {type(exc).__name__}: {reason_key(first, 7)} "
               f"[{where(exc)}]", detail, time.perf_counter() - start)


def run_once(lair: Path, mapping: Path, *, simd: bool, seed: int = SEED,
             timeout: float | None = TIMEOUT, arrival: str = "always") -> Run:
    """Compile ``lair`` with ``mapping``, print, parse and verify the PE module, simulate
    it and compare with the reference, as ``pesim PROG.lair -m MAP`` does (``arrival``:
    ``always`` or ``always-groups``, which prefers batches of whole groups)."""
    from dtg.codegen.driver import compile_file
    from dtg.errors import (
        CodegenError,
        DtgError,
        SimulationError,
        UnsupportedMappingError,
    )
    from dtg.pe.fabric import FabricConfig
    from dtg.pe.parser import parse_module_text
    from dtg.pe.printer import module as print_module
    from dtg.pesim.run import make_inputs, run_module
    from dtg.pesim.verify import verify_module

    workdir = lair.parent
    start = time.perf_counter()
    try:
        with time_limit(timeout):
            # batches wherever possible: the cost model's choice aside, every batch the
            # compiler can make is tried
            compiled = compile_file(lair, str(mapping), simd=simd, arrival=arrival)
    except Timeout:
        return Run("timeout", "compile", f"compilation took more than {timeout} s",
                   time.perf_counter() - start)
    except (CodegenError, SimulationError) as exc:
        return _internal(exc, "compile", workdir, start)
    except DtgError as exc:
        text = exc.format().replace(str(workdir) + "/", "")
        seconds = time.perf_counter() - start
        if exc.loc is None and not LOCATED.match(exc.message):
            return Run("unlocated", reason_key(exc.message), text, seconds)
        if isinstance(exc, UnsupportedMappingError):
            return Run("rejected", reason_key(exc.message), text, seconds)
        return Run("invalid", f"{type(exc).__name__}: {reason_key(exc.message)}", text,
                   seconds)
    except Exception as exc:
        return _internal(exc, "compile", workdir, start)
    config = FabricConfig(cycle_limit=CYCLE_LIMIT)
    stage = "verify"
    try:
        with time_limit(timeout):
            assert compiled.module is not None
            module, locations = parse_module_text(print_module(compiled.module), "<prog.pe>")
            verify_module(module, config, locations=locations)
            stage = "simulate"
            inputs = make_inputs(compiled.program, seed=seed)
            result = run_module(module, compiled.program, inputs, config=config,
                                reference=lair.resolve(), engine="simpy")
    except Timeout:
        return Run("timeout", stage, f"{stage} took more than {timeout} s",
                   time.perf_counter() - start)
    except Exception as exc:
        return _internal(exc, stage, workdir, start)
    differs = other_engine(module, compiled.program, inputs, config, result.result)
    seconds = time.perf_counter() - start
    if differs is not None:
        return Run("engines", differs.split(":", 1)[0], differs, seconds)
    if not result.comparison.verified:
        mismatch = result.comparison.mismatch or ""
        return Run("mismatch", triage(compiled.program, module, config, lair, mismatch),
                   mismatch, seconds)
    if result.bound is not None and result.result.cycles < result.bound.cycles:
        return Run("bound", result.bound.dominant.name,
                   f"{result.result.cycles} cycles, below the mapping's bound of "
                   f"{result.bound.describe()}", seconds)
    return Run("verified", seconds=seconds)


def other_engine(module: Any, program: Any, inputs: Any, config: Any, simpy: Any
                 ) -> str | None:
    """The same run on the compiled engine; what differs from the simpy engine's run
    (None: nothing)."""
    from run_pins import summary

    from dtg.pesim.run import run_module

    try:
        fast = run_module(module, program, inputs, config=config, engine="fast").result
    except Exception as exc:
        return f"the fast engine failed: {type(exc).__name__}: {exc}"
    if fast.engine != "fast":
        return f"the fast engine did not run: {fast.engine_note}"
    want, got = summary(simpy), summary(fast)
    if (want, simpy.events) != (got, fast.events):
        return f"the fast engine's run differs: simpy {want}, {simpy.events} events; " \
               f"fast {got}, {fast.events} events"
    return None


def triage(program: Any, module: Any, config: Any, lair: Path, mismatch: str) -> str:
    """A grouping key for a mismatch: whether the run also fails on inputs without zeros
    (zeros are not sent on sparse streams), and how the first wrong output is defined."""
    import numpy as np

    from dtg.pesim.run import run_module

    rng = np.random.default_rng(SEED)
    nonzero = {t.name: (rng.integers(1, 3, size=t.shape) * rng.choice([-1, 1], size=t.shape))
               .astype(t.numpy_dtype) for t in program.graph.inputs}
    try:
        again = run_module(module, program, nonzero, config=config, reference=lair.resolve())
        zeros = "only with zero inputs" if again.comparison.verified else "also without zeros"
    except Exception as exc:
        zeros = f"without zeros: {type(exc).__name__}"
    name = mismatch.split("[", 1)[0].split(" ", 1)[0]
    op = re.search(rf"\b{re.escape(name)}\[[^\n]*?\]\s*(\+=|max=|=)", lair.read_text())
    return f"{zeros}; output defined by '{op.group(1) if op else '?'}'"


def combine(simd: Run, scalar: Run) -> Outcome:
    """One outcome for the pair from its two runs."""
    for run, mode in ((simd, "simd"), (scalar, "scalar")):
        if run.outcome in FAILURES:
            other = scalar if run is simd else simd
            detail = f"[{mode}] {run.detail}"
            if other.outcome in FAILURES and other.outcome != run.outcome:
                detail += f"\n[{'scalar' if run is simd else 'simd'}] {other.outcome}: " \
                          f"{other.detail}"
            both = other.outcome == run.outcome
            return Outcome(run.outcome, run.reason + ("" if both else f" ({mode} only)"),
                           detail, simd, scalar)
    if simd.outcome != scalar.outcome:
        rejected = simd if simd.outcome == "rejected" else scalar
        mode = "simd" if rejected is simd else "scalar"
        return Outcome("inconsistent", f"{mode} rejects: {rejected.reason}",
                       f"[{mode}] {rejected.detail}", simd, scalar)
    if simd.outcome == "rejected":
        return Outcome("rejected", simd.reason, simd.detail, simd, scalar)
    return Outcome("verified", "", "", simd, scalar)


def classify(lair_text: str, map_text: str, *, seed: int = SEED,
             timeout: float | None = TIMEOUT) -> Outcome:
    """Write the pair to a temporary directory and run it both ways."""
    with tempfile.TemporaryDirectory(prefix="dtg-random-") as tmp:
        lair, mapping = Path(tmp) / "prog.lair", Path(tmp) / "prog.map"
        lair.write_text(lair_text)
        mapping.write_text(map_text)
        # (half the pairs, by their text, prefer batches of whole groups)
        arrival = "always-groups" if zlib.crc32((lair_text + map_text).encode()) % 2 \
            else "always"
        runs = [run_once(lair, mapping, simd=simd, seed=seed, timeout=timeout,
                         arrival=arrival) for simd in (True, False)]
    return combine(*runs)


def write_failure(directory: Path, lair_text: str, map_text: str, description: str,
                  outcome: Outcome) -> None:
    """``prog.lair``, ``prog.map`` and ``outcome.txt`` of one pair in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "prog.lair").write_text(lair_text)
    (directory / "prog.map").write_text(map_text)
    (directory / "outcome.txt").write_text(
        f"{outcome.key}\n{description}\n\n{outcome.detail}\n\n"
        f"simd: {outcome.simd.outcome} {outcome.simd.reason}\n"
        f"scalar: {outcome.scalar.outcome} {outcome.scalar.reason}\n"
        "rerun: .venv/bin/pesim prog.lair -m prog.map [--no-simd]\n")


# ------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Shrunk:
    """A failure Hypothesis shrank: its group key, the pair and the message."""

    key: str
    text: str

    def part(self, name: str) -> str:
        """``prog.lair``, ``prog.map`` or ``outcome`` of the message."""
        return self.text.split(f"--- {name}\n", 1)[-1].split("\n--- ", 1)[0].rstrip() + "\n"


def _failure_type(key: str, types: dict[str, type[AssertionError]]) -> type[AssertionError]:
    """One exception class per failure group, so Hypothesis shrinks each separately."""
    name = "".join(c if c.isalnum() else "_" for c in key)[:80]
    return types.setdefault(name, type(f"Failure_{name}", (AssertionError,), {}))


def hypothesis_batch(examples: int, seed: int, *, shrink: bool = False,
                     draw_only: bool = False, only: str | None = None,
                     callback: Callable[[str, str, str, Outcome | None], None] | None = None
                     ) -> list[Shrunk]:
    """Draw ``examples`` pairs from :func:`strategies.pairs` with Hypothesis, seeded;
    classify each (unless ``draw_only``) and pass it to ``callback``. With ``shrink``,
    each kind of failure is raised (only the failures whose key is ``only``, when given),
    so Hypothesis shrinks it to a minimal pair; the shrunk failures are returned."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from strategies import pairs

    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    types: dict[str, type[AssertionError]] = {}

    @hypothesis_seed(seed)
    @settings(max_examples=examples, database=None, deadline=None, phases=phases,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                     HealthCheck.data_too_large],
              report_multiple_bugs=True, print_blob=False)
    @given(pairs())
    def run(pair: tuple[str, str, str]) -> None:
        lair, mapping, description = pair
        outcome = None if draw_only else classify(lair, mapping)
        if callback is not None:
            callback(lair, mapping, description, outcome)
        if shrink and outcome is not None and outcome.failed and only in (None, outcome.key):
            raise _failure_type(outcome.key, types)(
                f"{outcome.key}\n# {description}\n--- prog.lair\n{lair}\n--- prog.map\n"
                f"{mapping}\n--- outcome\n{outcome.detail}")

    try:
        run()
    except BaseException as exc:  # Hypothesis reports the shrunk failures
        if not shrink:
            raise
        errors = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else [exc]
        shrunk = []
        for error in errors:
            if not isinstance(error, AssertionError):
                raise
            text = str(error)
            shrunk.append(Shrunk(text.split("\n", 1)[0], text))
        return shrunk
    return []
