"""Sweeps: compile and simulate the cross product of mappings, parameter values and
fabrics, on a Dask cluster (a local one by default), one JSON line per point.

Every point is compiled, simulated and checked against the reference interpreter in a
worker; a point that fails records its error and the sweep goes on. Rows are flat
(``param.TI`` for a parameter), so ``pandas.read_json(path, lines=True)`` or a CSV
reader takes them as they are.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtg.errors import DtgError, SpecializationError
from dtg.lair.specialize import Binding

Row = dict[str, Any]


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep."""

    index: int
    program: str
    mapping: str | None  # a .map path, or a mapping's text (dtg.compile takes both)
    params: dict[str, Binding] = field(default_factory=dict)
    simd: bool = True
    fabric: str = "paper"
    seed: int = 0


def points(program: str | Path, mappings: Sequence[str | Path | None],
           values: Mapping[str, Sequence[Binding]], *, simd: Sequence[bool] = (True,),
           fabrics: Sequence[str] = ("paper",), seed: int = 0) -> list[Point]:
    """The cross product, in a fixed order: mappings, then parameters in the order
    given (the last varies fastest), then SIMD, then fabrics. A mapping is crossed only
    with the parameters it or the program declares (comparing ``a.map`` with parameter
    ``TI`` against a fixed ``b.map`` runs ``b.map`` once); a parameter nobody declares
    is an error."""
    from dtg.codegen.driver import default_mapping_path
    from dtg.lair.parser import parse_file
    from dtg.mapping.binding import program_parameters
    from dtg.mapping.spec import parse_mapping_file

    theirs = program_parameters(parse_file(program))
    maps = list(mappings) or [None]
    declared = {m: {p.name for p in parse_mapping_file(
        default_mapping_path(program) if m is None else m).params} for m in maps}
    unknown = [n for n in values if n not in theirs and not any(n in d for d in declared.values())]
    if unknown:
        raise SpecializationError(f"unknown parameter '{unknown[0]}' (given by --param or "
                                  "params=): neither the program nor any mapping of the sweep "
                                  f"has a parameter of that name")
    found: list[Point] = []
    for mapping in maps:
        names = [n for n in values if n in theirs or n in declared[mapping]]
        for combo, use_simd, fabric in itertools.product(
                itertools.product(*(values[n] for n in names)), simd, fabrics):
            found.append(Point(len(found), str(Path(program).resolve()),
                               None if mapping is None else str(Path(mapping).resolve()),
                               dict(zip(names, combo, strict=True)), use_simd, fabric, seed))
    return found


def failed_row(point: Point, error: str | None = None) -> Row:
    """The row of a point with nothing measured (yet): status error."""
    row: Row = {"index": point.index, "program": point.program, "mapping": point.mapping}
    row.update({f"param.{k}": v for k, v in point.params.items()})
    row.update({"simd": point.simd, "fabric": point.fabric, "seed": point.seed,
                "status": "error", "verified": False, "cycles": None, "bound": None,
                "ratio": None, "pes": None, "compile_ms": None, "sim_seconds": None,
                "error": error})
    return row


def run_point(point: Point) -> Row:
    """Compile and simulate one point; every outcome, failures included, as a row."""
    from dtg.api import compile as compile_program
    from dtg.api import simulate

    row = failed_row(point)
    t0 = time.perf_counter()
    try:
        c = compile_program(point.program, point.mapping, params=point.params, simd=point.simd,
                            fabric=point.fabric)
        row["compile_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        t1 = time.perf_counter()
        r = simulate(c, seed=point.seed)
        row["sim_seconds"] = round(time.perf_counter() - t1, 4)
    except DtgError as err:
        row["error"] = err.format()
        return row
    except Exception as exc:  # a bug of ours: recorded, the sweep goes on
        row["error"] = f"internal error: {type(exc).__name__}: {exc}"
        return row
    row.update({"status": "verified" if r.verified else "mismatch", "verified": r.verified,
                "cycles": r.cycles, "bound": None if r.bound is None else r.bound.cycles,
                "ratio": None if r.ratio is None else round(r.ratio, 4), "pes": len(r.pes),
                "error": None if r.verified else f"outputs differ: {r.mismatch}"})
    return row


class Stopped(KeyboardInterrupt):
    """A sweep stopped before its end, by Ctrl-C (``cancelled``) or its deadline; ``rows``
    holds the rows finished, in the points' order."""

    def __init__(self, rows: list[Row], why: str) -> None:
        super().__init__(why)
        self.rows = rows
        self.why = why


def run_sweep(todo: Sequence[Point], *, scheduler: str | None = None,
              workers: int | None = None, on_row: Callable[[Row], None] | None = None,
              run: Callable[[Point], Row] = run_point, connect_seconds: float = 10,
              deadline: float | None = None, cancelled: Callable[[], bool] | None = None
              ) -> list[Row]:
    """Run every point on Dask: on the cluster at ``scheduler``, else on a local cluster
    of ``workers`` processes (default: one per core); ``workers=0`` runs them here, one
    after another. Rows come back in the points' order; ``on_row`` sees each as it
    finishes. A point whose worker dies gets an error row. ``run`` is what runs a point
    (for tests); ``connect_seconds`` how long to try reaching ``scheduler``.

    The sweep stops early, raising :class:`Stopped` with the rows finished, when
    ``cancelled()`` says so (a Ctrl-C the caller caught) or at ``deadline`` (a
    ``time.monotonic()`` value); with either, ``workers=0`` runs each point in a forked
    process, so that a point is abandoned at once rather than waited for. A
    ``KeyboardInterrupt`` raised meanwhile is a :class:`Stopped` too."""
    rows: list[Row] = []

    def done(row: Row) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    def stop() -> str | None:
        if cancelled is not None and cancelled():
            return "cancelled"
        if deadline is not None and time.monotonic() >= deadline:
            return "deadline"
        return None

    def ordered() -> list[Row]:
        return sorted(rows, key=lambda r: r["index"])

    try:
        if workers == 0 and scheduler is None:
            for point in todo:
                why = stop()
                if why is not None:
                    raise Stopped(ordered(), why)
                if deadline is None and cancelled is None:
                    done(run(point))
                    continue
                row = _in_child(run, point, stop)
                if row is None:
                    raise Stopped(ordered(), stop() or "cancelled")
                done(row)
        else:
            _on_dask(todo, scheduler, workers, done, run, connect_seconds, stop)
            why = stop() if len(rows) < len(todo) else None
            if why is not None:
                raise Stopped(ordered(), why)
    except Stopped:
        raise
    except KeyboardInterrupt:
        raise Stopped(ordered(), "cancelled") from None
    return ordered()


def _in_child(run: Callable[[Point], Row], point: Point, stop: Callable[[], str | None]
              ) -> Row | None:
    """``run(point)`` in a forked process, or None when ``stop()`` says so first (the
    process is then killed). The child ignores Ctrl-C: the parent decides."""
    import multiprocessing
    import signal

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:  # (SIGINT blocked until the child ignores it)
        child = context.Process(target=_child, args=(run, point, send), daemon=True)
        child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    send.close()
    try:
        while True:
            if receive.poll(0.05):
                try:
                    row: Row = receive.recv()
                except EOFError:  # it died before it answered
                    child.join()
                    return failed_row(point, f"the process running this point ended with "
                                             f"status {child.exitcode} before it finished")
                return row
            if stop() is not None:
                return None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


def _child(run: Callable[[Point], Row], point: Point, send: Any) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        row = run(point)
    except BaseException as exc:  # (run_point records its errors; a test's run may not)
        row = failed_row(point, f"internal error: {type(exc).__name__}: {exc}")
    send.send(row)
    send.close()


SCHEMES = ("tcp", "tls", "ws", "wss")


def _connect(scheduler: str, seconds: float) -> Any:
    """A Dask client of the scheduler at ``scheduler``, or a named error within about
    ``seconds``: a malformed address, nothing there, or a service that is not a Dask
    scheduler (one that answers garbage or never answers)."""
    import re
    import threading

    from dask.distributed import Client

    from dtg.errors import InputError

    m = re.fullmatch(r"(?:([a-z]+)://)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})/?",
                     scheduler)
    if m is None or (m.group(1) or "tcp") not in SCHEMES or not 0 < int(m.group(3)) < 65536:
        raise InputError(f"--scheduler {scheduler}: expected the address of a Dask scheduler, "
                         f"tcp://HOST:PORT (or {', '.join(s + '://' for s in SCHEMES[1:])})")
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["client"] = Client(scheduler, timeout=f"{seconds}s")
        except BaseException as exc:  # (reported below; MemoryError: garbage as a length)
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="dtg-connect", daemon=True)
    thread.start()
    thread.join(seconds + 10)  # (a refused connection ends at the timeout; a loaded
    # machine may take a few seconds more to say so)
    if thread.is_alive():
        raise InputError(f"--scheduler {scheduler}: no Dask scheduler answered there within "
                         f"{seconds:g} s (a service that is not Dask's?)")
    error = outcome.get("error")
    if isinstance(error, (OSError, TimeoutError)):
        raise InputError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there "
                         f"({error})")
    if error is not None:
        raise InputError(f"--scheduler {scheduler}: what answered there is not a Dask "
                         f"scheduler ({type(error).__name__}: {str(error)[:120]})")
    return outcome["client"]


def _on_dask(todo: Sequence[Point], scheduler: str | None, workers: int | None,
             done: Callable[[Row], None], run: Callable[[Point], Row],
             connect_seconds: float, stop: Callable[[], str | None]) -> None:
    import signal
    import threading

    from dask.distributed import LocalCluster

    cluster = client = None
    try:
        if scheduler is not None:
            client = _connect(scheduler, connect_seconds)
        else:
            # the workers inherit Ctrl-C ignored (across exec, as a blocked signal is
            # not): this process alone stops the sweep. (While the cluster starts, a few
            # seconds, Ctrl-C is ignored here too.)
            main = threading.current_thread() is threading.main_thread()
            ignored = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
            try:
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       silence_logs=50)
            finally:
                if main:
                    signal.signal(signal.SIGINT, ignored)
            client = cluster.get_client()
        futures = client.map(run, list(todo), pure=False)
        point_of = {f.key: p for f, p in zip(futures, todo, strict=True)}
        pending = list(futures)
        while pending:
            if stop() is not None:
                client.cancel(pending)
                return
            finished = [f for f in pending if f.done()]
            if not finished:
                time.sleep(0.05)
                continue
            pending = [f for f in pending if not f.done()]
            for future in finished:
                try:
                    done(future.result())
                except Exception as exc:  # the worker died (killed, out of memory): its row
                    done(failed_row(point_of[future.key], f"the worker running this point "
                                    f"failed: {type(exc).__name__}: {exc}"))
    finally:
        _close(client, cluster)


def _close(client: Any, cluster: Any) -> None:
    """Close quietly: what was cancelled is no news."""
    import contextlib
    import logging

    quiet = [logging.getLogger(n) for n in ("distributed", "distributed.client",
                                            "distributed.scheduler", "tornado")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    try:
        with contextlib.suppress(Exception):
            if client is not None:
                client.close()
        with contextlib.suppress(Exception):
            if cluster is not None:
                cluster.close()
    finally:
        for log, level in zip(quiet, levels, strict=True):
            log.setLevel(level)


def write_rows(path: str | Path, rows: Iterable[Row]) -> str:
    """The rows as JSON lines (or CSV for a ``.csv`` path), as the text to write."""
    rows = list(rows)
    if Path(path).suffix != ".csv":
        return "".join(json.dumps(r) + "\n" for r in rows)
    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def read_rows(path: str | Path) -> list[Row]:
    """Rows written by :func:`write_rows`: JSON lines, or CSV for a ``.csv`` path."""
    from dtg.errors import InputError, SourceLoc
    from dtg.lair.parser import read_source

    text = read_source(path)
    if Path(path).suffix == ".csv":
        return _csv_rows(path, text)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"not a sweep row (JSON lines, as dtg sweep -o writes): "
                             f"{err.msg}", SourceLoc(str(path), number, err.colno)) from None
        except (ValueError, RecursionError) as err:  # a huge number, a deep nesting
            what = ("nested too deeply" if isinstance(err, RecursionError)
                    else str(err).split(";")[0])
            raise InputError(f"not a sweep row (JSON lines, as dtg sweep -o writes): {what}",
                             SourceLoc(str(path), number, 1)) from None
        problem = _row_problem(row)
        if problem is not None:
            raise InputError(f"not a sweep row (JSON lines, as dtg sweep -o writes): {problem}",
                             SourceLoc(str(path), number, 1))
        rows.append(row)
    return rows


def _csv_rows(path: str | Path, text: str) -> list[Row]:
    """Rows of a CSV table as :func:`write_rows` writes it: empty cells are None, the
    known columns get their types back, parameters are numbers where they look so."""
    from dtg.errors import InputError, SourceLoc

    reader = csv.DictReader(io.StringIO(text))
    rows = []
    try:
        for raw in reader:
            number = reader.line_num
            row: Row = {k: _cell(k, v) for k, v in raw.items() if k is not None}
            problem = _row_problem(row) if None not in raw else "more cells than columns"
            if problem is not None:
                raise InputError(f"not a sweep row (a CSV table, as dtg sweep -o rows.csv "
                                 f"writes): {problem}", SourceLoc(str(path), number, 1))
            rows.append(row)
    except csv.Error as err:
        raise InputError(f"not a sweep table (CSV): {err}",
                         SourceLoc(str(path), reader.line_num, 1)) from None
    return rows


TEXT_COLUMNS = frozenset({"program", "mapping", "fabric", "status", "error"})


def _cell(key: str, value: str | None) -> Any:
    import re

    if value is None or value == "":
        return None
    if key in TEXT_COLUMNS:
        return value
    if value in ("True", "False"):
        return value == "True"
    if re.fullmatch(r"-?\d{1,19}", value):
        return int(value)
    if re.fullmatch(r"-?\d{1,30}(\.\d{0,30})?([eE][-+]?\d{1,3})?", value):
        return float(value)
    return value


ROW_TYPES: dict[str, tuple[type, ...]] = {
    "program": (str,), "status": (str,), "verified": (bool,), "cycles": (int, type(None)),
    "bound": (int, type(None)), "error": (str, type(None)),
}


def _row_problem(row: Any) -> str | None:
    from dtg.lair.limits import MAX_INT

    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    for key, types in ROW_TYPES.items():
        if key not in row:
            return f"no '{key}'"
        value = row[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"'{key}' is {_shown(value)}"
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_INT:
            return f"'{key}' is {_shown(value)}, expected a count of cycles (0 to {MAX_INT})"
    return None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of about {int(value.bit_length() * 0.30103)} digits"
    try:
        return json.dumps(value)[:40]
    except (ValueError, RecursionError):
        return type(value).__name__
