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

from dtg.lair.diagnostics import DtgError, SpecializationError
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
        raise SpecializationError(f"--param {unknown[0]}: neither the program nor any mapping "
                                  f"of the sweep has a parameter named '{unknown[0]}'")
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


def run_sweep(todo: Sequence[Point], *, scheduler: str | None = None,
              workers: int | None = None, on_row: Callable[[Row], None] | None = None,
              run: Callable[[Point], Row] = run_point, connect_seconds: float = 10
              ) -> list[Row]:
    """Run every point on Dask: on the cluster at ``scheduler``, else on a local cluster
    of ``workers`` processes (default: one per core); ``workers=0`` runs them here, one
    after another. Rows come back in the points' order; ``on_row`` sees each as it
    finishes. Ctrl-C stops the sweep; the rows finished so far are then kept in the
    ``KeyboardInterrupt``'s ``rows`` attribute. A point whose worker dies gets an
    error row. ``run`` is what runs a point (for tests); ``connect_seconds`` how long to
    try reaching ``scheduler``."""
    rows: list[Row] = []

    def done(row: Row) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    try:
        if workers == 0 and scheduler is None:
            for point in todo:
                done(run(point))
        else:
            _on_dask(todo, scheduler, workers, done, run, connect_seconds)
    except KeyboardInterrupt as stop:
        stop.rows = sorted(rows, key=lambda r: r["index"])  # type: ignore[attr-defined]
        raise
    return sorted(rows, key=lambda r: r["index"])


def _on_dask(todo: Sequence[Point], scheduler: str | None, workers: int | None,
             done: Callable[[Row], None], run: Callable[[Point], Row],
             connect_seconds: float) -> None:
    from dask.distributed import Client, LocalCluster, as_completed

    from dtg.lair.diagnostics import InputError

    cluster = client = None
    try:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout=f"{connect_seconds}s")
            except OSError as exc:
                raise InputError(f"--scheduler {scheduler}: cannot reach a Dask scheduler "
                                 f"there ({exc})") from None
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=40)
            client = Client(cluster)
        futures = client.map(run, list(todo), pure=False)
        point_of = {f.key: p for f, p in zip(futures, todo, strict=True)}
        for future in as_completed(futures):
            try:
                done(future.result())
            except Exception as exc:  # the worker died (killed, out of memory): its row
                done(failed_row(point_of[future.key], f"the worker running this point "
                                f"failed: {type(exc).__name__}: {exc}"))
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


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
    """Rows written by :func:`write_rows` (JSON lines)."""
    from dtg.lair.diagnostics import InputError, SourceLoc
    from dtg.lair.parser import read_source

    rows = []
    for number, line in enumerate(read_source(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"not a sweep row (JSON lines, as dtg sweep -o writes): "
                             f"{err.msg}", SourceLoc(str(path), number, err.colno)) from None
        problem = _row_problem(row)
        if problem is not None:
            raise InputError(f"not a sweep row (JSON lines, as dtg sweep -o writes): {problem}",
                             SourceLoc(str(path), number, 1))
        rows.append(row)
    return rows


ROW_TYPES: dict[str, tuple[type, ...]] = {
    "program": (str,), "status": (str,), "verified": (bool,), "cycles": (int, type(None)),
    "bound": (int, type(None)), "error": (str, type(None)),
}


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    for key, types in ROW_TYPES.items():
        if key not in row:
            return f"no '{key}'"
        if not isinstance(row[key], types) or (isinstance(row[key], bool) and bool not in types):
            return f"'{key}' is {json.dumps(row[key])[:40]}"
    return None
