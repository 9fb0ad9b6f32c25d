"""dtg-codegen never writes over what it reads: an output that is, or resolves to, the
program, the mapping or the fabric configuration (by the same name, a symlink, ``..``
or a hard link), or the other output, is refused before any work, nothing written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import main


@pytest.fixture
def files(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "gemv" / "gemv.lair", tmp_path / "q.lair")
    shutil.copy(EXAMPLES / "gemv" / "gemv.map", tmp_path / "p.map")
    shutil.copy(EXAMPLES / "gemv" / "gemv.map", tmp_path / "q.map")  # beside the program
    (tmp_path / "fabric.toml").write_text("task_dispatch = 2\n")
    return tmp_path


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink()}


def refused(cli, directory: Path, *args: object) -> str:  # type: ignore[no-untyped-def]
    before = snapshot(directory)
    dirs = sorted(p for p in directory.rglob("*") if p.is_dir())
    result = cli(main, *args)
    assert result.status == 1, result.out
    assert result.out == "" and "Traceback" not in result.err
    assert "name another file (nothing was written)" in result.err
    assert snapshot(directory) == before  # not a byte changed, no file made
    assert sorted(p for p in directory.rglob("*") if p.is_dir()) == dirs
    return str(result.err)


def test_the_program_as_output(cli, files: Path) -> None:
    q = files / "q.lair"
    err = refused(cli, files, q, "-m", files / "p.map", "-o", q)
    assert err == (f"error: cannot write the output of --emit=code to {q}: it is the "
                   "program; name another file (nothing was written)\n")


def test_the_mapping_the_report_and_the_config_as_outputs(cli, files: Path) -> None:
    q, p, cfg = files / "q.lair", files / "p.map", files / "fabric.toml"
    assert f"to {p}: it is the mapping" in refused(cli, files, q, "-m", p, "-o", p)
    assert f"the report to {q}: it is the program" in refused(
        cli, files, q, "-m", p, "-o", files / "out", "--report", q)
    assert f"the report to {files / 'q.map'}: it is the mapping" in refused(
        cli, files, q, "--report", files / "q.map", "--emit=tasks")  # the one beside it
    assert f"to {cfg}: it is the fabric configuration" in refused(
        cli, files, q, "--config", cfg, "-o", cfg)


def test_the_report_and_the_output_on_one_file(cli, files: Path) -> None:
    out = files / "m.pe"
    err = refused(cli, files, files / "q.lair", "-o", out, "--report", out)
    assert f"cannot write the report to {out}: it is the output of --emit=code" in err


def test_the_same_file_by_another_name(cli, files: Path) -> None:
    q = files / "q.lair"
    (files / "sub").mkdir()
    dotted = files / "sub" / ".." / "q.lair"
    assert f"it is the same file as {q}, the program" in refused(cli, files, q, "-o", dotted)
    link = files / "link.lair"
    link.symlink_to(q)
    assert f"{q}: it is the same file as {link}, the program" in refused(
        cli, files, link, "-o", q)
    os.link(files / "p.map", files / "hard.map")
    assert "hard.map: it is the same file as" in refused(
        cli, files, q, "-m", files / "p.map", "-o", files / "hard.map")


def test_a_directory_not_made_yet_on_the_way(cli, files: Path) -> None:
    q = files / "q.lair"
    err = refused(cli, files, q, "-o", files / "new" / ".." / "q.lair")
    assert f"to {q}: it is the program" in err


def test_a_directory_whose_module_would_be_an_input(cli, files: Path) -> None:
    """``-o DIR`` writes DIR/q.pe: checked as that file."""
    out = files / "out"
    out.mkdir()
    os.link(files / "p.map", out / "q.pe")
    err = refused(cli, files, files / "q.lair", "-m", files / "p.map", "-o", out)
    assert f"to {out / 'q.pe'}: it is the same file as {files / 'p.map'}, the mapping" in err


def test_distinct_files_are_written(cli, files: Path) -> None:
    result = cli(main, files / "q.lair", "-o", files / "out", "--report", files / "r.json")
    assert result.status == 0, result.err
    assert (files / "out" / "q.pe").exists() and (files / "r.json").exists()
