"""dtg-codegen behaves as compilers do: --version, -o FILE|DIR|-, - for standard input,
--report with every --emit, files written under the user's umask."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, flat

from dtg.codegen.driver import main
from dtg.codegen.pipeline import STAGES
from dtg.lair.cli import REPORT_SCHEMA_VERSION

GEMV = EXAMPLES / "gemv" / "gemv.lair"
GEMV_MAP = EXAMPLES / "gemv" / "gemv.map"


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, "--version")
    assert result.status == 0
    assert result.out.startswith("dtg-codegen (dtg) ")


def test_output_to_a_file_twice(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "mine.pe"
    for _ in range(2):  # the second time it exists: replaced, not an error
        result = cli(main, GEMV, "-o", target)
        assert result.status == 0, result.err
        assert result.out == f"wrote {target} " + result.out.split(" ", 2)[2]
    assert target.read_text().startswith("module gemv\n")


def test_output_to_a_new_directory(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, GEMV, "-o", tmp_path / "new" / "dir")
    assert result.status == 0, result.err
    written = tmp_path / "new" / "dir" / "gemv.pe"
    assert 'reference "../../' in written.read_text()


def test_output_dash_is_standard_output(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    result = cli(main, GEMV, "-o", "-")
    assert result.status == 0 and result.out.startswith("module gemv\n")
    assert list(tmp_path.iterdir()) == []


def test_other_stages_go_to_their_own_file(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli(main, GEMV, "--emit=tasks", "-o", tmp_path).status == 0
    assert (tmp_path / "gemv.tasks.txt").read_text().strip()


def test_program_from_standard_input(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "stdin", io.StringIO(GEMV.read_text()))
    result = cli(main, "-", "-m", GEMV_MAP)
    assert result.status == 0, result.err
    assert result.out.startswith("module stdin\n") and "reference" not in result.out


def test_standard_input_needs_a_mapping(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, "-")
    assert result.status == 1
    assert "needs its mapping: -m FILE.map" in result.err


@pytest.mark.parametrize("stage", STAGES)
def test_report_with_every_stage(stage: str, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.json"
    result = cli(main, GEMV, f"--emit={stage}", "--param", "M=64", "-m",
                 EXAMPLES / "gemv" / "gemv.tiled.map", "--report", report)
    assert result.status == 0, result.err
    r = json.loads(report.read_text())
    assert r["schema_version"] == REPORT_SCHEMA_VERSION and r["stage"] == stage
    assert r["params"] == {"M": 64} and r["mapping"].endswith("gemv.tiled.map")
    assert r["tensors"]["y"] == {"role": "output", "shape": [64], "dtype": "float16"}
    if stage == "code":
        assert r["memory_bytes_per_pe"] > 0


def test_identical_compiles_give_identical_reports(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli(main, GEMV, "--report", a).status == 0
    assert cli(main, GEMV, "--report", b).status == 0
    assert a.read_bytes() == b.read_bytes()


def test_files_follow_the_umask(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0o027)
    try:
        assert cli(main, GEMV, "-o", tmp_path / "m.pe").status == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.pe").stat().st_mode) == 0o640


def test_directories_as_output(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    dotted = tmp_path / "out.d"
    dotted.mkdir()
    assert cli(main, GEMV, "-o", dotted).status == 0
    assert (dotted / "gemv.pe").exists()
    link = tmp_path / "linkdir"
    link.symlink_to(dotted)
    assert cli(main, GEMV, "--emit=simd", "-o", link).status == 0
    assert (dotted / "gemv.simd.txt").exists()
    assert cli(main, GEMV, "-o", f"{tmp_path / 'new.d'}{os.sep}").status == 0
    assert (tmp_path / "new.d" / "gemv.pe").exists()


def test_report_into_a_missing_directory_fails_first(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, GEMV, "-o", tmp_path / "made", "--report", tmp_path / "no" / "r.json")
    assert result.status == 1
    assert "the directory" in result.err and "does not exist" in result.err
    assert list(tmp_path.iterdir()) == []


def test_early_stages_need_no_mapping_unless_it_binds_a_parameter(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    program = tmp_path / "g.lair"
    program.write_text(GEMV.read_text())
    (tmp_path / "g.map").write_text("this is not a mapping\n")
    assert cli(main, program, "--emit=ast", "--param", "M=8").status == 0
    result = cli(main, program, "--emit=ast", "--param", "TI=8")
    assert result.status == 1 and result.err.startswith(f"{tmp_path / 'g.map'}:1:1:")


def test_a_module_on_standard_output_names_its_files_from_here(
        tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Where a shell redirection puts it: the working directory (and pesim - reads them
    from there)."""
    from dtg.pesim.cli import main as pesim

    monkeypatch.chdir(tmp_path)
    result = cli(main, GEMV, "-o", "-")
    assert result.status == 0, result.err
    lines = result.out.splitlines()
    assert lines[2] == f'reference "{os.path.relpath(GEMV, tmp_path)}"'
    assert lines[3] == f'mapping "{os.path.relpath(GEMV_MAP, tmp_path)}"'
    monkeypatch.setattr(sys, "stdin", io.StringIO(result.out))
    result = cli(pesim, "-", "-q")
    assert result.status == 0, result.err
    assert "cycles / bound" in flat(result.out)


def test_the_reference_line_holds_the_programs_parameters_only(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, GEMV, "-m", EXAMPLES / "gemv" / "gemv.tiled.map", "--param", "TJ=2",
                 "--param", "N=32", "--param", "TI=16", "-o", tmp_path)
    assert result.status == 0, result.err
    lines = (tmp_path / "gemv.pe").read_text().splitlines()
    assert lines[2].endswith('gemv.lair" N=32')
    assert lines[3].endswith('gemv.tiled.map" TJ=2 TI=16')
