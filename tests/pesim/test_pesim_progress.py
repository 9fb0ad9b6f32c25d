"""Progress reports during a run, and Ctrl-C: the run stops where it is and reports
what it measured, marked incomplete, without a traceback."""

from __future__ import annotations

import io
import json
import os
import pty
import signal
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from rich.console import Console

from dtg.pesim.progress import Progress, ProgressBar
from dtg.pesim.run import run_file
from dtg.pesim.sim import _Run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_pesim import checkerboard_gemv  # noqa: E402

REFERENCE = ROOT / "examples" / "gemv" / "gemv.lair"


def gemv_module(tmp_path: Path, m: int, pes: int) -> Path:
    path = tmp_path / "gemv.pe"
    path.write_text(checkerboard_gemv(m, m, pes, pes, REFERENCE))
    return path


def test_the_watcher_sees_cycles_and_inputs_advance(tmp_path: Path) -> None:
    seen: list[Progress] = []
    outcome = run_file(gemv_module(tmp_path, 256, 8), watch=seen.append)
    assert outcome.comparison.verified and outcome.result.complete
    assert len(seen) == outcome.result.events // _Run.WATCH_EVERY >= 2
    assert [p.events for p in seen] == sorted(p.events for p in seen)
    assert all(a.cycle <= b.cycle and a.injected <= b.injected for a, b in pairwise(seen))
    total = 256 + 8  # x's values and an end mark per column
    assert all(p.total == total and 0 < p.injected <= total for p in seen)
    assert all(p.cycle <= outcome.result.end for p in seen)


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_ctrl_c_in_the_event_loop_ends_the_run_with_partial_figures(tmp_path: Path,
                                                                    engine: str) -> None:
    def interrupt(p: Progress) -> None:
        raise KeyboardInterrupt

    # (the compiled engine is watched between slices of events: a larger run)
    m, pes = (256, 8) if engine == "simpy" else (1024, 32)
    outcome = run_file(gemv_module(tmp_path, m, pes), watch=interrupt, engine=engine)
    result = outcome.result
    assert result.engine == engine
    assert not result.complete and result.outputs == {}
    if engine == "simpy":
        assert result.events == _Run.WATCH_EVERY
    else:
        assert 0 < result.events < 140_736  # of the whole run's
    assert 0 < result.end < 600  # the whole run takes 614 (638) cycles
    assert sum(s.busy for s in result.pes.values()) > 0
    assert not outcome.comparison.verified and not outcome.comparison.compared
    assert outcome.comparison.mode == f"not compared: interrupted at cycle {result.end}"


def test_an_interrupted_run_reports_no_comparison_and_no_ratio(
        cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A compiled GEMV (8 x 8 PEs, 7248 events), which has its bound, stopped by Ctrl-C."""
    from dtg.codegen.driver import main as codegen
    from dtg.pesim.report import build_report, print_summary

    assert cli(codegen, REFERENCE, "-m", REFERENCE.with_name("gemv.tiled.map"), "--param",
               "M=256", "--param", "N=256", "--param", "TI=32", "--param", "TJ=32", "-o",
               tmp_path).status == 0

    def interrupt(p: Progress) -> None:
        raise KeyboardInterrupt

    outcome = run_file(tmp_path / "gemv.pe", watch=interrupt)
    end = outcome.result.end
    report = build_report(outcome)
    assert outcome.bound is not None and report["bound"]["cycles"] == outcome.bound.cycles
    assert report["compared"] is False and report["verified"] is False
    assert report["exact"] is None and report["max_abs_error"] is None
    assert report["cycles_over_bound"] is None and report["complete"] is False
    assert report["comparison"] == f"not compared: interrupted at cycle {end}"
    out = io.StringIO()
    print_summary(report, Console(file=out, width=200))
    text = out.getvalue()
    assert text.count("not compared") == 1 and f"not compared: interrupted at cycle {end}" in text
    assert "max abs error" not in text and "within tolerance" not in text
    assert "no cycles / bound (interrupted)" in text


def test_the_bar_appears_only_after_a_second() -> None:
    out = io.StringIO()
    with ProgressBar(Console(file=out, force_terminal=True, width=120)) as bar:
        bar.update(Progress(10, 4096, 0.5, 3, 10))
        assert bar.bar is None
        bar.update(Progress(20, 8192, 1.5, 6, 10))
        assert bar.bar is not None
        bar.bar.refresh()
        assert "60% of inputs in" in out.getvalue() and "cycle 20" in out.getvalue()
        bar.update(Progress(30, 12288, 2.5, 10, 10))  # every input is in: the bar pulses
        bar.bar.refresh()
        assert "100%" not in out.getvalue() and "inputs in cycle 30" in out.getvalue()


def test_sigint_stops_pesim_with_a_partial_report(tmp_path: Path) -> None:
    """A run long enough to interrupt (64 x 64 PEs, several seconds), interrupted once its
    progress bar shows that it is in the event loop (standard error is a terminal), so
    that the test does not depend on the machine's speed."""
    module = gemv_module(tmp_path, 2048, 64)
    report = tmp_path / "r.json"
    outputs = tmp_path / "out.npz"
    leader, follower = pty.openpty()
    # (Ctrl-C reaches the run as it would from a terminal, even where the tests run as a
    # background job, which starts with SIGINT ignored and would pass that on)
    proc = subprocess.Popen([sys.executable, "-m", "dtg.pesim.cli", str(module), "--report",
                             str(report), "--outputs", str(outputs), "--engine", "simpy"],
                            stdout=subprocess.PIPE, stderr=follower, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(follower)
    shown = b""
    while b"inputs in" not in shown:  # the bar: simulated cycle, share of inputs sent
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the run ended (the terminal closed) before any bar
            chunk = b""
        if not chunk:
            pytest.fail(f"the run ended before it could be interrupted: {shown!r}")
        shown += chunk
    proc.send_signal(signal.SIGINT)
    while True:  # (drain the terminal so the run never blocks writing to it)
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    proc.communicate(timeout=60)
    os.close(leader)
    err = shown.decode(errors="replace")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted: stopped by Ctrl-C" in err
    data = json.loads(report.read_text())
    assert data["complete"] is False and data["verified"] is False
    assert data["compared"] is False and data["exact"] is None
    assert data["cycles"] > 0 and "interrupted" in data["error"]
    assert not outputs.exists()


def test_ctrl_c_before_the_event_loop_still_replaces_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted while loading or setting up: status 130, no traceback, and the report
    says so (an older report of the same file must not survive)."""
    from dtg.pesim import cli

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    report = tmp_path / "r.json"
    report.write_text('{"verified": true}\n')
    monkeypatch.setattr(cli, "simulate_args", interrupted)
    assert cli.main([str(gemv_module(tmp_path, 64, 4)), "--report", str(report)]) == 130
    err = capsys.readouterr().err
    assert "interrupted: stopped by Ctrl-C" in err and "Traceback" not in err
    data = json.loads(report.read_text())
    assert data["verified"] is False and "interrupted by Ctrl-C" in data["error"]
