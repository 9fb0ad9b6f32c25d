"""pesim's conventions: --version, a report that says how the run was asked for (also
when it failed), a moved module finding its reference program."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import EXAMPLES
from pesim_support import GEMV_PE

from dtg.lair.cli import REPORT_SCHEMA_VERSION
from dtg.pesim.cli import main


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, "--version")
    assert result.status == 0 and result.out.startswith("pesim (dtg) ")


def test_report_says_how_the_run_was_asked_for(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.json"
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "-m", EXAMPLES / "gemv" / "gemv.tiled.map",
                 "--param", "TI=16", "--seed", "3", "--fabric", "wse2", "--report", report, "-q")
    assert result.status == 0, result.err
    r = json.loads(report.read_text())
    assert r["schema_version"] == REPORT_SCHEMA_VERSION and r["tool"] == "pesim"
    assert (r["params"], r["seed"], r["fabric_preset"]) == ({"TI": 16}, 3, "wse2")
    assert r["mapping"].endswith("gemv.tiled.map") and r["failed"] is False
    # W_local 16 x 4 and y_local 16, float16, on each compute PE
    assert r["memory_bytes_per_pe"] >= 2 * (16 * 4 + 16)
    assert all(pe["memory_bytes"] >= 0 for pe in r["pes"].values())


def test_failed_run_writes_a_failed_report(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "g.pe"
    module.write_text(GEMV_PE.read_text().replace("run first {y_local: 0};", ""))
    report = tmp_path / "r.json"
    result = cli(main, module, "--report", report, "-I", GEMV_PE.parents[2] / "gemv")
    assert result.status == 1
    r = json.loads(report.read_text())
    assert r["failed"] is True and r["error"].startswith("error: deadlock at cycle")
    assert r["schema_version"] == REPORT_SCHEMA_VERSION and r["seed"] == 0


def test_moved_module_finds_its_reference(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    moved = tmp_path / "g.pe"
    moved.write_text(GEMV_PE.read_text())  # says reference "../../gemv/gemv.lair"
    result = cli(main, moved, "-q")
    assert result.status == 1
    assert "name the directory that holds it with -I DIR or $DTG_PATH" in result.err
    assert cli(main, moved, "-q", "-I", EXAMPLES / "gemv").status == 0
    monkeypatch.setenv("DTG_PATH", str(EXAMPLES))  # not there: gemv.lair is in EXAMPLES/gemv
    assert cli(main, moved, "-q", "-I", tmp_path).status == 1
    monkeypatch.setenv("DTG_PATH", str(EXAMPLES / "gemv"))
    assert cli(main, moved, "-q").status == 0


def test_a_picture_into_a_missing_directory_fails_before_anything_is_written(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    report, outputs = tmp_path / "r.json", tmp_path / "o.npz"
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "--report", report, "--outputs", outputs,
                 "--heatmap", tmp_path / "no" / "h.png", "-q")
    assert result.status == 1 and "does not exist" in result.err
    assert not report.exists() and not outputs.exists()


def test_a_failed_run_still_writes_its_trace(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "g.pe"
    module.write_text(GEMV_PE.read_text().replace("run first {y_local: 0};", ""))
    trace = tmp_path / "t.json"
    result = cli(main, module, "--trace", trace, "-I", GEMV_PE.parents[2] / "gemv", "-q")
    assert result.status == 1 and "deadlock" in result.err
    assert "note: the trace up to cycle" in result.err and str(trace) in result.err
    events = json.loads(trace.read_text())["traceEvents"]
    waits = [e for e in events if e.get("cat") == "wait"]
    assert waits and all(e["dur"] >= 0 for e in waits)  # the PEs left waiting
