"""Choosing the engine: ``--engine`` / ``engine=``; ``auto`` by mesh size; a run the
compiled engine cannot do runs on the simpy engine with a note saying why, never with
other figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES

import dtg
from dtg.errors import InputError
from dtg.pesim import engines
from dtg.pesim.cli import main as pesim_main
from dtg.pesim.fast import engine as fast_engine
from dtg.pesim.fast.lower import Unsupported

GEMV = EXAMPLES / "gemv" / "gemv.lair"


@pytest.fixture(scope="module")
def gemv() -> dtg.Compilation:
    return dtg.compile(GEMV)


def figures(result: dtg.Result) -> dict:
    report = result.report()
    return {k: report[k] for k in ("cycles", "pes", "links", "totals", "verified", "exact")}


def test_both_engines_report_the_same_run(gemv: dtg.Compilation) -> None:
    simpy = dtg.simulate(gemv, engine="simpy")
    fast = dtg.simulate(gemv, engine="fast")
    assert simpy.report()["engine"] == "simpy" and fast.report()["engine"] == "fast"
    assert fast.report()["engine_note"] is None
    assert figures(simpy) == figures(fast)


def test_auto_runs_a_small_mesh_on_the_simpy_engine(gemv: dtg.Compilation) -> None:
    assert gemv.module is not None
    assert gemv.module.width * gemv.module.height < engines.AUTO_FAST_PES
    report = dtg.simulate(gemv).report()
    assert report["engine"] == "simpy" and report["engine_note"] is None


def test_a_trace_runs_on_the_fast_engine(gemv: dtg.Compilation) -> None:
    result = dtg.simulate(gemv, engine="fast", trace=True)
    report = result.report()
    assert report["engine"] == "fast" and report["engine_note"] is None
    assert result.trace is not None


def test_what_the_fast_engine_lacks_falls_back_with_a_note(
        gemv: dtg.Compilation, monkeypatch: pytest.MonkeyPatch) -> None:
    def lacking(*args: object, **kwargs: object) -> None:
        raise Unsupported("statement Frobnicate")

    monkeypatch.setattr(fast_engine, "simulate", lacking)
    report = dtg.simulate(gemv, engine="fast").report()
    assert report["engine"] == "simpy"
    assert report["engine_note"] == ("ran on the simpy engine: the fast engine does not run "
                                     "statement Frobnicate yet")
    assert report["verified"]


def test_without_numba_the_fast_engine_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    assert "numba is not installed" in (engines.fast_unavailable() or "")
    assert not engines.needs_compiling()


def test_an_unknown_engine_is_refused(gemv: dtg.Compilation) -> None:
    with pytest.raises(InputError, match="unknown engine 'numba': choose one of auto, fast, "
                                         "simpy"):
        dtg.simulate(gemv, engine="numba")


def test_the_cli_names_the_engine(cli, tmp_path: Path) -> None:
    fast = cli(pesim_main, GEMV, "--engine", "fast", "--report", tmp_path / "r.json")
    assert fast.status == 0, fast.err
    assert "(fast engine)" in fast.out
    bad = cli(pesim_main, GEMV, "--engine", "numba")
    assert bad.status == 1 and "invalid choice: 'numba'" in bad.err
