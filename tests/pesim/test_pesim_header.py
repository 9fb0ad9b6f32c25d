"""A compiled module carries what its run needs: its reference program with the program's
parameters, its mapping with the mapping's own, so that ``pesim MODULE`` verifies it
and gives its bound; a module read from standard input and one whose mapping is gone."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, flat
from pesim_support import GEMV_PE

from dtg.codegen.driver import main as codegen
from dtg.pe.parser import parse_module
from dtg.pe.printer import module as print_module
from dtg.pesim.cli import main

GEMV = EXAMPLES / "gemv" / "gemv.lair"
TILED = EXAMPLES / "gemv" / "gemv.tiled.map"


def compiled(cli, tmp_path: Path, *args: object) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    result = cli(codegen, *args, "-o", out)
    assert result.status == 0, result.err
    return next(out.glob("*.pe"))


def report_of(cli, *args: object) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """The report of a run that verified (written beside the tests' files)."""
    path = Path(str(args[0])).resolve().parent / "report.json"
    result = cli(main, *args, "--report", path, "-q")
    assert result.status == 0, result.err
    data: dict = json.loads(path.read_text())  # type: ignore[type-arg]
    path.unlink()
    return data


def test_a_module_compiled_with_mapping_parameters_verifies(cli, tmp_path: Path) -> None:
    module = compiled(cli, tmp_path, GEMV, "-m", TILED, "--param", "TI=4", "--param", "M=64")
    lines = module.read_text().splitlines()
    assert lines[2].startswith('reference "') and lines[2].endswith('gemv.lair" M=64')
    assert lines[3].startswith('mapping "') and lines[3].endswith('gemv.tiled.map" TI=4')
    report = report_of(cli, module.parent)
    assert report["verified"] and report["bound"] is not None
    # the same bound as when pesim compiles the program itself
    direct = tmp_path / "direct.json"
    assert cli(main, GEMV, "-m", TILED, "--param", "TI=4", "--param", "M=64", "--report",
               direct, "-q").status == 0
    assert report["bound"] == json.loads(direct.read_text())["bound"]
    assert report["mapping_file"] == str(TILED.resolve())


def test_the_readme_first_command_gives_the_bound(cli, tmp_path: Path) -> None:
    module = compiled(cli, tmp_path, GEMV)
    result = cli(main, module.parent)
    assert result.status == 0, result.err
    assert "cycles / bound 2.30" in flat(result.out) and "n/a" not in result.out
    report = report_of(cli, module.parent)
    assert report["bound"]["cycles"] == 20 and report["cycles_over_bound"] == 2.3
    assert report["bound_note"] is None


def test_a_moved_module_finds_its_mapping_or_says_why_it_has_no_bound(
        cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    module = compiled(cli, tmp_path, GEMV)
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(module, moved)
    text = (moved / module.name).read_text()
    (moved / module.name).write_text(text.replace('mapping "', 'mapping "elsewhere/'))
    (tmp_path / "programs").mkdir()
    shutil.copy(GEMV, tmp_path / "programs")
    result = cli(main, moved, "-I", tmp_path / "programs")
    assert result.status == 0, result.err
    assert "n/a: the module's mapping elsewhere/" in flat(result.out)
    report = report_of(cli, moved, "-I", tmp_path / "programs")
    assert report["bound"] is None and report["cycles_over_bound"] is None
    assert "was not found (looked for " in report["bound_note"]
    assert "name its directory with -I DIR or the file with -m MAP" in report["bound_note"]
    # found by name in a search directory, or named outright
    assert report_of(cli, moved, "-I", EXAMPLES / "gemv")["bound"]["cycles"] == 20
    named = report_of(cli, moved, "-I", tmp_path / "programs", "-m", EXAMPLES / "gemv" / "gemv.map")
    assert named["bound"]["cycles"] == 20


def test_a_mapping_that_no_longer_fits_leaves_the_run_without_bound(
        cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(GEMV, tmp_path / "g.lair")
    shutil.copy(EXAMPLES / "gemv" / "gemv.map", tmp_path / "g.map")
    module = compiled(cli, tmp_path, tmp_path / "g.lair")
    (tmp_path / "g.map").write_text(TILED.read_text())  # 4 x 4 as well: the same rectangle
    assert report_of(cli, module)["bound"]["cycles"] == 20
    (tmp_path / "g.map").write_text(TILED.read_text().replace("TI = 8", "TI = 4"))
    report = report_of(cli, module)
    assert report["verified"] and report["bound"] is None
    assert "places the program on PE[4, 8], but the module's mesh is PE[4, 4]" in \
        report["bound_note"]
    (tmp_path / "g.map").write_text("rectangle {\n")
    report = report_of(cli, module)
    assert report["verified"] and report["bound_note"].startswith(
        f"the mapping {tmp_path / 'g.map'} does not fit: {tmp_path / 'g.map'}:")


def test_a_direction_only_mapping_records_its_tiling(cli, tmp_path: Path) -> None:
    program = EXAMPLES / "fc" / "train.lair"
    mapping = EXAMPLES / "fc" / "train.direction.map"
    module = compiled(cli, tmp_path, program, "-m", mapping)
    assert module.read_text().splitlines()[3].endswith(
        'train.direction.map" TX=4 TY=8 OX=0 OY=1')
    direct = tmp_path / "direct.json"
    assert cli(main, program, "-m", mapping, "--report", direct, "-q").status == 0
    assert report_of(cli, module)["bound"] == json.loads(direct.read_text())["bound"]
    text = module.read_text()
    module.write_text(text.replace(" TX=4 TY=8 OX=0 OY=1", ""))
    assert "does not record a tiling" in report_of(cli, module)["bound_note"]


def test_a_hand_written_module_says_it_names_no_mapping(cli, tmp_path: Path) -> None:
    result = cli(main, GEMV_PE, "-q")
    assert result.status == 0, result.err
    assert "n/a: the module names no mapping" in flat(result.out)


def test_mapping_parameters_on_the_reference_line_are_a_located_error(
        cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    module = compiled(cli, tmp_path, GEMV, "-m", TILED, "--param", "TI=4")
    text = module.read_text().splitlines()
    text[2] += " TI=4"  # as modules were written before the 'mapping' line
    module.write_text("\n".join(text) + "\n")
    result = cli(main, module)
    assert result.status == 1
    assert result.err.startswith(f"{module}:3:1: error: the reference line binds 'TI', which ")
    assert "does not declare (its parameters: M, N, T); a parameter of the mapping goes on " \
           "the 'mapping' line" in result.err


def test_header_lines_round_trip() -> None:
    for header in ('reference "../p.lair" M=32 T=float16\nmapping "p.map" TI=4\n',
                   'reference M=32\nmapping "p.map"\n', 'mapping TI=4\n', 'reference "p.lair"\n',
                   ''):
        text = f"module m\nmesh PE[1, 1]\n{header}\n"
        assert print_module(parse_module(text)) == text


def test_a_mapping_parameter_takes_an_integer() -> None:
    with pytest.raises(Exception, match=r"<string>:3:1: syntax error: the mapping's parameter TI "
                                        r"takes an integer, not 'float16'"):
        parse_module('module m\nmesh PE[1, 1]\nmapping "p.map" TI=float16\n')


# ------------------------------------------------------------------ standard input


def test_a_module_from_standard_input_with_its_reference_named(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cat prog.lair | dtg-codegen - -m p.map -o - | pesim - --reference prog.lair"""
    monkeypatch.chdir(tmp_path)
    shutil.copy(GEMV, "prog.lair")
    shutil.copy(TILED, "p.map")
    monkeypatch.setattr(sys, "stdin", io.StringIO(Path("prog.lair").read_text()))
    result = cli(codegen, "-", "-m", "p.map", "-o", "-", "--param", "TI=4")
    assert result.status == 0, result.err
    text = result.out
    assert text.splitlines()[2:4] == ['mapping "p.map" TI=4', 'input x dense color 0 ' +
                                      text.splitlines()[3].split("color 0 ", 1)[1]]
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    result = cli(main, "-", "--reference", "prog.lair", "--report", "r.json")
    assert result.status == 0, result.err
    report = json.loads(Path("r.json").read_text())
    assert report["verified"] and report["module_file"] is None
    assert report["reference"] == str(tmp_path / "prog.lair")
    assert report["bound"] is not None and report["mapping_file"] == str(tmp_path / "p.map")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    result = cli(main, "-")
    assert result.status == 1
    assert result.err.startswith("error: <stdin>: module stdin names no reference program")
    assert "name it with --reference PROG.lair" in result.err


def test_a_module_compiled_from_standard_input_keeps_the_program_parameters(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(GEMV.read_text()))
    result = cli(codegen, "-", "-m", TILED, "--param", "M=64", "-o", "m.pe")
    assert result.status == 0, result.err
    assert Path("m.pe").read_text().splitlines()[2] == "reference M=64"
    result = cli(main, "m.pe", "--reference", GEMV, "-q")
    assert result.status == 0, result.err
    assert "cycles / bound" in flat(result.out)
    assert cli(main, "m.pe", "-q").err.startswith(
        "error: m.pe: module stdin names no reference program (it was compiled from standard "
        "input)")


def test_an_empty_or_binary_standard_input_is_an_error(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    result = cli(main, "-")
    assert result.status == 1 and result.err.startswith("<stdin>:")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"module \xff\n")))
    result = cli(main, "-")
    assert result.status == 1
    assert "the PE module on standard input is not UTF-8 text" in result.err
