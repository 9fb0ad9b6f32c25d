"""What pesim and dtg-codegen write: whole files (atomic), never through a symlink, mode
0644; a failed run's report says so; any tensor name survives the trip through .npz."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES
from pesim_support import GEMV_PE
from test_pesim_cli import copy_gemv

from dtg.codegen.driver import main as codegen_main
from dtg.lair.files import write_atomically
from dtg.pesim.cli import main, write_outputs

LAIR_NAMED = """let N = 4
lair named<T=float16>(N):
  T file[N] -> T allow_pickle[N]
{
  all (i) in (N)
    allow_pickle[i] = file[i] + file[i]
}
"""
MAP_NAMED = """rectangle { PE[4, 1] }
placement { named[i] -> PE[i, 0] }
input file resident
output allow_pickle resident
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_report_and_outputs_are_written_whole_with_mode_0644(cli, tmp_path: Path) -> None:
    report, outputs = tmp_path / "r.json", tmp_path / "y.npz"
    assert cli(main, GEMV_PE, "--report", report, "--outputs", outputs).status == 0
    assert json.loads(report.read_text())["verified"] is True
    assert np.load(outputs)["y"].shape == (32,)
    assert mode(report) == mode(outputs) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "y.npz"]  # no temp files


@pytest.mark.parametrize("option", ["--report", "--outputs"])
def test_an_existing_symlink_is_refused(cli, tmp_path: Path, option: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link"
    link.symlink_to(victim)
    result = cli(main, GEMV_PE, option, link)
    assert result.status == 1
    assert f"error: cannot write the {'report' if option == '--report' else 'outputs'} " \
           f"{link}: it is a symbolic link" in result.err
    assert victim.read_text() == "keep me\n"
    assert link.is_symlink()


def test_a_directory_as_report_is_refused(cli, tmp_path: Path) -> None:
    result = cli(main, GEMV_PE, "--report", tmp_path)
    assert result.status == 1
    assert "it is a directory" in result.err


def test_a_failed_run_replaces_an_older_report(cli, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert cli(main, GEMV_PE, "--report", report).status == 0
    assert json.loads(report.read_text())["verified"] is True
    deadlock = copy_gemv(tmp_path, "run first {y_local: 0};", "")
    result = cli(main, deadlock, "--report", report)
    assert result.status == 1
    data = json.loads(report.read_text())
    assert data["verified"] is False
    assert data["error"].startswith("error: deadlock at cycle ")
    assert data["error"] == result.err.rstrip("\n")


def test_a_mismatch_report_carries_the_error(cli, tmp_path: Path) -> None:
    wrong = copy_gemv(tmp_path, "n += 1;", "n += 0;")
    report = tmp_path / "r.json"
    assert cli(main, wrong, "--report", report).status == 1
    data = json.loads(report.read_text())
    assert data["verified"] is False
    assert data["error"].startswith("the outputs differ from the reference: y[")
    assert data["cycles"] > 0


def test_a_module_error_still_writes_an_unverified_report(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pe"
    bad.write_text("module m\nmesh PE[1, 1]\nbogus\n")
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"verified": True}))
    assert cli(main, bad, "--report", report).status == 1
    data = json.loads(report.read_text())
    assert data["verified"] is False and f"{bad}:3:1: syntax error" in data["error"]


@pytest.mark.parametrize("names", [("file",), ("allow_pickle", "file", "y")])
def test_outputs_with_numpy_keyword_names_round_trip(tmp_path: Path,
                                                     names: tuple[str, ...]) -> None:
    arrays = {n: np.arange(4, dtype=np.float16) + k for k, n in enumerate(names)}
    path = tmp_path / "out.npz"
    write_outputs(path, arrays)
    with np.load(path) as data:
        assert sorted(data.files) == sorted(names)
        for n in names:
            assert data[n].dtype == np.float16
            assert np.array_equal(data[n], arrays[n])


def test_program_with_keyword_tensor_names_writes_its_outputs(cli, tmp_path: Path) -> None:
    program, mapping = tmp_path / "named.lair", tmp_path / "named.map"
    program.write_text(LAIR_NAMED)
    mapping.write_text(MAP_NAMED)
    outputs = tmp_path / "out.npz"
    result = cli(main, program, "--outputs", outputs)
    assert result.status == 0, result.err
    with np.load(outputs) as data:
        assert data.files == ["allow_pickle"]
        assert data["allow_pickle"].shape == (4,)


def test_a_failed_write_leaves_neither_file_nor_temporary(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    target.write_bytes(b"old")

    def fail(handle: object) -> None:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_atomically(target, fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_codegen_output_that_is_a_file_is_replaced(cli, tmp_path: Path) -> None:
    existing = tmp_path / "out"  # -o names a file when there is one (as compilers do)
    existing.write_text("a file\n")
    result = cli(codegen_main, EXAMPLES / "gemv" / "gemv.lair", "-o", existing)
    assert result.status == 0, result.err
    assert existing.read_text().startswith("module gemv\n")


def test_codegen_output_through_a_symlink_is_refused(cli, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.pe"
    target.write_text("a file\n")
    link = tmp_path / "out.pe"
    link.symlink_to(target)
    result = cli(codegen_main, EXAMPLES / "gemv" / "gemv.lair", "-o", link)
    assert result.status == 1
    assert "it is a symbolic link, which dtg does not follow" in result.err
    assert target.read_text() == "a file\n"


def test_codegen_writes_atomically_with_mode_0644(cli, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    result = cli(codegen_main, EXAMPLES / "gemv" / "gemv.lair", "-o", out, "--report", report)
    assert result.status == 0, result.err
    assert [p.name for p in out.iterdir()] == ["gemv.pe"]
    assert mode(out / "gemv.pe") == mode(report) == 0o644
    link = tmp_path / "link.json"
    link.symlink_to(report)
    result = cli(codegen_main, EXAMPLES / "gemv" / "gemv.lair", "-o", out, "--report", link)
    assert result.status == 1 and "symbolic link" in result.err
