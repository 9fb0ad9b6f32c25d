"""dtg sweep on a local Dask cluster, dtg plot, and the dtg command's other verbs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.cli import main
from dtg.sweep import points, read_rows, run_point, run_sweep

GEMV = EXAMPLES / "gemv" / "gemv.lair"
TILED = EXAMPLES / "gemv" / "gemv.tiled.map"
FIXED = EXAMPLES / "gemv" / "gemv.map"


def test_points_cross_only_what_each_mapping_declares() -> None:
    todo = points(GEMV, [TILED, FIXED], {"TI": [4, 8], "M": [32, 64]}, simd=(True, False))
    tiled = [p for p in todo if p.mapping == str(TILED)]
    fixed = [p for p in todo if p.mapping == str(FIXED)]
    assert len(tiled) == 2 * 2 * 2 and len(fixed) == 2 * 2  # M is the program's
    assert {tuple(p.params) for p in fixed} == {("M",)}
    assert [p.index for p in todo] == list(range(len(todo)))


def test_a_parameter_nobody_declares_is_an_error() -> None:
    with pytest.raises(Exception, match="neither the program nor any mapping of the sweep"):
        points(GEMV, [FIXED], {"TI": [4]})


def test_a_failing_point_is_recorded_not_fatal() -> None:
    todo = points(GEMV, [TILED], {"TI": [8, 5]})
    rows = run_sweep(todo, workers=0)
    assert [r["status"] for r in rows] == ["verified", "error"]
    assert "outside the rectangle" in rows[1]["error"]
    assert rows[0]["cycles"] == run_point(todo[0])["cycles"]


def test_sweep_on_a_local_cluster_and_its_picture(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    rows_path = tmp_path / "rows.jsonl"
    result = cli(main, "sweep", GEMV, "--map", TILED, "--map", FIXED, "--param", "TI=4,16",
                 "--workers", "2", "-o", rows_path, "-q")
    assert result.status == 0, result.err
    rows = read_rows(rows_path)
    assert len(rows) == 3 and all(r["verified"] for r in rows)
    assert [r.get("param.TI") for r in rows] == [4, 16, None]
    assert {"cycles", "bound", "ratio", "compile_ms", "sim_seconds"} <= set(rows[0])
    # the same point in this process gives the same figures
    assert rows[1]["cycles"] == run_point(points(GEMV, [TILED], {"TI": [16]})[0])["cycles"]
    picture = tmp_path / "sweep.png"
    assert cli(main, "plot", rows_path, "-o", picture).status == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_rows(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "rows.csv"
    assert cli(main, "sweep", GEMV, "--workers", "0", "-o", out, "-q").status == 0
    header, row = out.read_text().splitlines()[:2]
    assert header.startswith("index,program,mapping,simd,fabric,seed,status,verified,cycles")
    assert ",verified,True," in row


def test_plot_of_a_file_that_is_not_rows(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "rows.jsonl"
    good = ('{"program": "p", "status": "error", "verified": false, "cycles": null, '
            '"bound": null, "error": "e"}')
    bad.write_text(good + "\nnot json\n")
    result = cli(main, "plot", bad, "-o", tmp_path / "p.png")
    assert result.status == 1
    assert result.err.startswith(f"{bad}:2:1: error: not a sweep row")


def test_delegating_verbs_and_version(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli(main, "--version").out.startswith("dtg (dtg) ")
    assert cli(main, "compile", GEMV).out.startswith("module gemv\n")
    assert cli(main, "simulate", GEMV, "-q").status == 0
    listing = cli(main, "examples")
    assert listing.status == 0 and "polybench/gemm.large" in listing.out
    nothing = cli(main)
    assert nothing.status == 1 and "expected a command" in nothing.err


def test_rows_are_json_lines(tmp_path: Path) -> None:
    rows = run_sweep(points(GEMV, [None], {}), workers=0)
    from dtg.sweep import write_rows

    text = write_rows(tmp_path / "r.jsonl", rows)
    assert [json.loads(line) for line in text.splitlines()] == rows


def test_a_dead_worker_does_not_end_the_sweep() -> None:
    # (distributed's defaults loaded first: leaving the config block below would
    # otherwise remove the whole 'distributed' section it created)
    import dask
    import distributed  # noqa: F401
    from sweep_support import dies_on_the_second

    todo = points(GEMV, [TILED], {"TI": [4, 8, 16]})
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        rows = run_sweep(todo, workers=1, run=dies_on_the_second)
    # every point has its row; the one that killed its worker, and any that were on that
    # worker then (Dask retries them elsewhere unless allowed-failures is 0), are errors
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert rows[1]["status"] == "error"
    for r in rows:
        assert r["status"] == "verified" or "the worker running this point failed: " \
            "KilledWorker" in r["error"]


def test_an_unreachable_scheduler_is_a_user_error() -> None:
    from dtg.errors import InputError

    with pytest.raises(InputError, match=re.escape("--scheduler tcp://127.0.0.1:9: cannot "
                                                   "reach a Dask scheduler there")):
        run_sweep(points(GEMV, [None], {}), scheduler="tcp://127.0.0.1:9", connect_seconds=1)


def test_rows_into_a_missing_directory_fail_before_the_sweep(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, "sweep", GEMV, "-o", tmp_path / "nodir" / "rows.jsonl", "-q")
    assert result.status == 1
    assert "the directory" in result.err and "does not exist" in result.err


@pytest.mark.parametrize("line", ['[1, 2]', '{"cycles": 5}', '{"program": "p", "status": "x", '
                                  '"verified": true, "cycles": "5", "bound": null, "error": null}'])
def test_rows_that_are_json_but_not_rows(tmp_path: Path, cli, line: str) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "rows.jsonl"
    bad.write_text(line + "\n")
    result = cli(main, "plot", bad, "-o", tmp_path / "p.png")
    assert result.status == 1
    assert result.err.startswith(f"{bad}:1:1: error: not a sweep row")


def test_a_directory_does_not_hide_an_example(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "gemv").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli(main, "sweep", "gemv", "--workers", "0", "-q").status == 0
