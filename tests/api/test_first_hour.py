"""Issue 25, a user's first hour with dtg sweep, search and plot: no file of the user's
lost, no traceback, hang or memory blow-up on odd input, Ctrl-C ends cleanly."""

from __future__ import annotations

import re
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.cli import _rejoin_rectangle, _seconds, main
from dtg.errors import InputError
from dtg.plot import log_scale
from dtg.sweep import Stopped, points, read_rows, run_sweep

GEMV = EXAMPLES / "gemv" / "gemv.lair"
TILED = EXAMPLES / "gemv" / "gemv.tiled.map"
FIXED = EXAMPLES / "gemv" / "gemv.map"
CONV = EXAMPLES / "conv1d" / "conv1d.lair"


# -- never lose a user's file ---------------------------------------------------------

@pytest.mark.parametrize(("argv", "victim", "what"), [
    (["sweep", "{prog}", "--map", "{map}", "-o", "{map}"], "map", "a mapping"),
    (["sweep", "{prog}", "--map", "{map}", "-o", "{prog}"], "prog", "the program"),
    (["search", "{prog}", "--rectangle", "4x4", "-o", "{prog}"], "prog", "the program"),
    (["search", "{prog}", "--rectangle", "4x4", "--like", "{map}", "-o", "{map}"], "map",
     "the --like mapping"),
    (["plot", "{rows}", "-o", "{rows}"], "rows", "the sweep's rows"),
])
def test_an_output_onto_an_input_is_refused_before_any_work(
        tmp_path: Path, cli, argv: list[str], victim: str, what: str) -> None:  # type: ignore[no-untyped-def]
    files = {"prog": tmp_path / "gemv.lair", "map": tmp_path / "gemv.map",
             "rows": tmp_path / "rows.jsonl"}
    files["prog"].write_text(GEMV.read_text())
    files["map"].write_text(FIXED.read_text())
    files["rows"].write_text('{"program": "p", "status": "error", "verified": false, '
                             '"cycles": null, "bound": null, "error": "e"}\n')
    before = {k: p.read_bytes() for k, p in files.items()}
    result = cli(main, *(a.format(**{k: str(p) for k, p in files.items()}) for a in argv))
    assert result.status == 1
    assert result.err.startswith("error: cannot write ") and f"{files[victim]}: it is {what}" \
        in result.err and "nothing was written" in result.err
    assert {k: p.read_bytes() for k, p in files.items()} == before


# -- command-line values --------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "gemv", "--workers", "-1"], "argument --workers: expected a whole number from 0"),
    (["search", "gemv", "--rectangle", "4x4", "--workers", "-1"], "argument --workers"),
    (["sweep", "gemv", "--seed", "-1"], "argument --seed: expected an integer from 0 to "
                                         "9223372036854775807, got -1"),
    (["sweep", "gemv", "--seed", str(10**30)], "got 100000... (a number of 31 digits)"),
    (["search", "gemv", "--rectangle", "PE[" + "9" * 5000 + ", 4]"],
     "PE[999999... (a number of 5000 digits), 4] has more than 1048576 PEs"),
    (["search", "gemv", "--rectangle", "4x4", "--top", "0"], "argument --top"),
    (["search", "gemv", "--rectangle", "4x4", "--budget", "0"], "expected a positive time"),
    (["sweep", "gemv", "--scheduler", "junk"], "--scheduler junk: expected the address of a "
                                               "Dask scheduler, tcp://HOST:PORT"),
    (["sweep", "gemv", "--scheduler", "http://127.0.0.1:1"], "expected the address"),
    (["search", "gemv", "--rectangle", "4x4", "--scheduler", "inproc://nothing"],
     "expected the address"),
])
def test_bad_values_are_named_errors(cli, argv: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, *argv)
    assert result.status == 1, result.err
    assert message in result.err and "Traceback" not in result.err


@pytest.mark.parametrize(("text", "seconds"), [
    ("60s", 60), ("90", 90), ("1m", 60), ("90s", 90), ("2m30s", 150), ("1.5m", 90),
    ("1h", 3600)])
def test_budgets(text: str, seconds: float) -> None:
    assert _seconds(text) == seconds


def test_an_unquoted_rectangle_is_one_value() -> None:
    assert _rejoin_rectangle(["--rectangle", "PE[4,", "4]", "gemv"]) == \
        ["--rectangle", "PE[4, 4]", "gemv"]
    assert _rejoin_rectangle(["gemv", "--rectangle=PE[4,", "4]", "-q"]) == \
        ["gemv", "--rectangle=PE[4, 4]", "-q"]
    assert _rejoin_rectangle(["--rectangle", "4x4", "gemv"]) == ["--rectangle", "4x4", "gemv"]


def test_help_names_the_command(cli) -> None:  # type: ignore[no-untyped-def]
    for verb, words in (("compile", "usage: dtg compile"), ("simulate", "usage: dtg simulate"),
                        ("sweep", "Exit status 1 when any point failed"),
                        ("plot", "a logarithmic axis")):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        out = cli(main, "examples").out  # (flushes what --help printed into the capture)
        assert words in " ".join(out.split()), verb


# -- schedulers that are not Dask ------------------------------------------------------

@pytest.fixture
def not_dask() -> Iterator[dict[str, int]]:
    """Two TCP services on the loopback: one answers garbage, one never answers."""
    servers, held = [], []

    def serve(listener: socket.socket, garbage: bool) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            if garbage:
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + b"\xff" * 64)

    ports = {}
    for name, garbage in (("garbage", True), ("silent", False)):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        servers.append(listener)
        ports[name] = listener.getsockname()[1]
        threading.Thread(target=serve, args=(listener, garbage), daemon=True).start()
    yield ports
    for s in servers + held:
        s.close()


def test_a_service_that_is_not_dask_is_a_named_error(not_dask: dict[str, int]) -> None:
    todo = points(GEMV, [None], {})
    with pytest.raises(InputError, match=r"what answered there is not a Dask scheduler"):
        run_sweep(todo, scheduler=f"tcp://127.0.0.1:{not_dask['garbage']}", connect_seconds=1)
    # (a silent service: Dask gives up within its timeout, or on a loaded machine its
    # connection attempt outlives the wait; either is said as such)
    with pytest.raises(InputError, match=r"no Dask scheduler answered there within 1 s|"
                                         r"cannot reach a Dask scheduler there \(Timed out"):
        run_sweep(todo, scheduler=f"tcp://127.0.0.1:{not_dask['silent']}", connect_seconds=1)


# -- sweeps ----------------------------------------------------------------------------

def test_failed_points_make_the_sweep_fail(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    rows = tmp_path / "rows.jsonl"
    result = cli(main, "sweep", GEMV, "--map", TILED, "--param", "TI=8,5,7", "--workers", "0",
                 "-q", "-o", rows)
    assert result.status == 1
    assert "error: 2 of 3 points failed (listed above)" in result.err
    assert f"wrote {rows} (3 rows)" in result.out
    assert [r["status"] for r in read_rows(rows)] == ["verified", "error", "error"]


def test_plot_reads_the_csv_a_sweep_writes(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    table, lines = tmp_path / "rows.csv", tmp_path / "rows.jsonl"
    for out in (table, lines):
        result = cli(main, "sweep", GEMV, "--map", TILED, "--param", "TI=4,16", "--workers",
                     "0", "-q", "-o", out)
        assert result.status == 0, result.err
    keep = ("program", "status", "verified", "cycles", "bound", "param.TI", "seed", "simd")
    assert [{k: r[k] for k in keep} for r in read_rows(table)] == \
        [{k: r[k] for k in keep} for r in read_rows(lines)]
    picture = tmp_path / "p.png"
    result = cli(main, "plot", table, "-o", picture, "--title", "$x^$")
    assert result.status == 0, result.err
    assert picture.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("row", "message"), [
    ('{"program": "p", "status": "verified", "verified": true, "cycles": 1e300, "bound": null, '
     '"error": null}', "'cycles' is 1e+300"),
    ('{"program": "p", "status": "verified", "verified": true, "cycles": ' + "9" * 5001 +
     ', "bound": null, "error": null}', "integer string conversion"),
    ('{"program": "p", "status": "verified", "verified": true, "cycles": ' + "9" * 300 +
     ', "bound": null, "error": null}', "'cycles' is a number of about 300 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_rows_beyond_reason_are_named_errors(tmp_path: Path, cli, row: str, message: str) -> None:  # type: ignore[no-untyped-def]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(row + "\n")
    result = cli(main, "plot", rows, "-o", tmp_path / "p.png")
    assert result.status == 1
    assert result.err.startswith(f"{rows}:1:1: error: not a sweep row") and message in result.err
    assert not (tmp_path / "p.png").exists()


def test_the_axis_is_logarithmic_when_values_span_orders_of_magnitude() -> None:
    assert log_scale([44, 866, 16]) and not log_scale([44, 69, 16])
    assert not log_scale([])


def _ctrl_c_when(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """Ctrl-C the first time the sweep's progress bar is told ``method``: before the
    first point (add_task) or after it (update)."""
    from rich.progress import Progress

    original = getattr(Progress, method)
    pressed = []

    def press(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, *args, **kwargs)
        if not pressed:
            pressed.append(True)
            signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(Progress, method, press)


def test_ctrl_c_before_any_point_writes_nothing(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _ctrl_c_when(monkeypatch, "add_task")
    rows = tmp_path / "rows.jsonl"
    result = cli(main, "sweep", GEMV, "--map", TILED, "--param", "TI=4,8", "--workers", "0",
                 "-q", "-o", rows)
    assert result.status == 130
    assert result.err == "interrupted: stopped by Ctrl-C after 0 of 2 points; nothing was " \
                         "written\n"
    assert not rows.exists()


def test_ctrl_c_keeps_the_rows_done(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _ctrl_c_when(monkeypatch, "update")
    rows = tmp_path / "rows.jsonl"
    result = cli(main, "sweep", GEMV, "--map", TILED, "--param", "TI=4,8,16", "--workers", "0",
                 "-q", "-o", rows)
    assert result.status == 130
    assert result.err == (f"interrupted: stopped by Ctrl-C after 1 of 3 points; their rows "
                          f"were written to {rows}\n")
    assert [r["param.TI"] for r in read_rows(rows)] == [4]


def test_a_sweep_on_dask_stops_when_cancelled() -> None:
    seen: list[object] = []
    with pytest.raises(Stopped) as stop:
        run_sweep(points(GEMV, [TILED], {"TI": [4, 8, 16, 32]}), workers=1,
                  on_row=seen.append, cancelled=lambda: bool(seen))
    assert stop.value.why == "cancelled" and 1 <= len(stop.value.rows) < 4


def test_a_point_past_the_deadline_is_abandoned() -> None:
    import time

    from sweep_support import never_ends

    with pytest.raises(Stopped) as stop:
        run_sweep(points(GEMV, [None], {}), workers=0, run=never_ends,
                  deadline=time.monotonic() + 0.5)
    assert stop.value.why == "deadline" and stop.value.rows == []


# -- search ------------------------------------------------------------------------------

def test_ctrl_c_during_a_search(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import dtg.mapsearch

    original = dtg.mapsearch.compile_mapping
    calls = []

    def compile_then_press(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(dtg.mapsearch, "compile_mapping", compile_then_press)
    out = tmp_path / "best.map"
    result = cli(main, "search", GEMV, "--rectangle", "PE[4,", "4]", "--limit", "2", "-q",
                 "-o", out)
    assert result.status == 130
    assert result.err == "interrupted: stopped by Ctrl-C; nothing was written\n"
    assert re.search(r"compiled 2 of the first 2 in rank order, simulated 0 .*; stopped by "
                     r"Ctrl-C", result.out)
    assert not out.exists()


def test_a_spent_budget_stops_the_search_where_it_is() -> None:
    from dtg.mapsearch import search

    result = search(GEMV, 4, 4, budget=1e-6)
    assert result.out_of_time == ["enumeration"] and result.considered == 0
    assert result.best is None and result.compiled == result.simulated == 0


def test_the_counts_follow_the_funnel() -> None:
    from dtg.mapsearch import search

    result = search(CONV, 1, 2, budget=3600, top=3, limit=6)
    assert result.considered == 6 and not result.out_of_time
    assert result.simulated <= result.compiled == 3 <= result.tried <= result.tilings
    assert result.pruned == result.unfit + result.tried - result.compiled
    assert len(result.ranked) == result.simulated
    assert "considered 6 candidate mappings" in result.summary()



def test_a_search_without_a_best_says_why() -> None:
    from dtg.cli import _nothing_found
    from dtg.mapsearch import SearchResult

    slow = SearchResult("p", (64, 64), compiled=5, out_of_time=["simulation"])
    assert _nothing_found(slow, 5) == ("none of the 5 candidates compiled finished its "
                                       "simulation within the budget of 5 s; try a larger "
                                       "--budget (e.g. 20s) or a smaller rectangle")
    assert "e.g. 4m" in _nothing_found(slow, 60)
    assert _nothing_found(SearchResult("p", (4, 4)), 60) == \
        "no candidate mapping compiled; try another rectangle"


def test_a_second_ctrl_c_ends_the_search_at_once(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The second Ctrl-C raises where it lands; inside isl's callbacks islpy makes that an
    isl error, which is still the interruption, not an internal error."""
    import dtg.mapsearch

    def pressed_twice(*args, **kwargs):  # type: ignore[no-untyped-def]
        signal.raise_signal(signal.SIGINT)
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError("call to isl_set_foreach_point failed") from None

    monkeypatch.setattr(dtg.mapsearch, "compile_mapping", pressed_twice)
    result = cli(main, "search", GEMV, "--rectangle", "4x4", "--limit", "1", "-q")
    assert result.status == 130 and result.err == "interrupted: stopped by Ctrl-C\n"
