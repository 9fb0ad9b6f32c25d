"""``pesim`` run in-process: success on the hand-written GEMV, clear errors otherwise.

Golden files in ``invalid/`` state their error on the first line:
``# CHECK: LINE:COL: KIND: MESSAGE`` -- the first line on stderr must be the file name
followed by this text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from pesim_support import GEMV_DIR, GEMV_PE

from dtg.lair.frontend import load_program
from dtg.lair.interp import random_inputs
from dtg.lair.interp import run as reference_run
from dtg.pesim.cli import main

INVALID = sorted((Path(__file__).parent / "invalid").glob("*.pe"))


def expected_error(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# CHECK: "), f"{path} lacks its CHECK line"
    return f"{path}:{first.removeprefix('# CHECK: ')}"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_malformed_module_reports_position_and_message(path: Path, cli) -> None:
    result = cli(main, path)
    assert result.status == 1
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.splitlines()[0] == expected_error(path)


def test_every_rule_has_a_golden_file() -> None:
    assert {p.stem for p in INVALID} >= {
        "syntax_missing_semicolon", "syntax_unexpected_end", "bad_color", "unknown_array",
        "duplicate_name", "too_many_configs", "simd_five_dimensions", "simd_size_too_large",
        "run_missing_base", "two_programs_on_one_pe", "pe_outside_mesh", "memory_too_large",
        "isl_pes_unreadable", "stream_wrong_tensor", "two_data_tasks_one_color",
    }


def test_hand_written_gemv_verifies(cli, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    outputs = tmp_path / "y.npz"
    result = cli(main, GEMV_DIR, "--report", report, "--outputs", outputs, "--seed", "5")
    assert result.status == 0, result.err
    assert result.err == ""
    assert "outputs match reference" in result.out
    data = json.loads(report.read_text())
    assert data["verified"] is True and data["exact"] is True
    assert data["max_abs_error"] == 0.0
    assert data["cycles"] == 108
    assert data["microseconds"] == pytest.approx(108 / 850)
    assert len(data["pes"]) == 16
    assert set(data["pes"]["0,0"]) >= {"busy", "simd_ops", "scalar_ops", "wavelets_sent",
                                       "stall_cycles"}
    assert data["links"]["3,0->4,0"] == {"wavelets": 8, "utilization": round(8 / 108, 6)}
    assert data["fabric"]["buffer_wavelets"] == 4
    assert data["events"] > 0 and data["wall_seconds"] > 0
    program = load_program(GEMV_DIR.parent.parent / "gemv" / "gemv.lair")
    expected = reference_run(program.graph, random_inputs(program.graph, 5))["y"]
    assert np.array_equal(np.load(outputs)["y"], expected)


def test_inputs_from_npz(cli, tmp_path: Path) -> None:
    program = load_program(GEMV_DIR.parent.parent / "gemv" / "gemv.lair")
    inputs = random_inputs(program.graph, 11)
    path = tmp_path / "in.npz"
    np.savez(path, **inputs)
    assert cli(main, GEMV_PE, "--inputs", path).status == 0


def test_non_integer_inputs_are_compared_with_tolerance(cli, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "in.npz"
    np.savez(path, W=rng.normal(size=(32, 16)), x=rng.normal(size=16))
    report = tmp_path / "r.json"
    result = cli(main, GEMV_PE, "--inputs", path, "--report", report)
    assert result.status == 0, result.err
    assert json.loads(report.read_text())["exact"] is False


@pytest.mark.parametrize("arrays, message", [
    ({"W": np.zeros((32, 16))}, "missing input tensor x"),
    ({"W": np.zeros((32, 16)), "x": np.zeros(16), "z": np.zeros(1)}, "unknown input tensor z"),
    ({"W": np.zeros((16, 32)), "x": np.zeros(16)}, "input 'W' has shape (16, 32), expected "
                                                   "(32, 16)"),
])
def test_wrong_npz_is_an_error(cli, tmp_path: Path, arrays: dict[str, np.ndarray],
                               message: str) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    result = cli(main, GEMV_PE, "--inputs", path)
    assert result.status == 1
    assert message in result.err
    assert "Traceback" not in result.err


def test_unreadable_npz_is_an_error(cli, tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    path.write_text("not an archive")
    result = cli(main, GEMV_PE, "--inputs", path)
    assert result.status == 1
    assert "is not an .npz archive" in result.err


@pytest.mark.parametrize("args, message", [
    (["missing.pe"], "no such file: missing.pe"),
    ([GEMV_PE, "--inputs", "missing.npz"], "no such file: missing.npz"),
    ([GEMV_PE, "--config", "missing.toml"], "no such file: missing.toml"),
    ([GEMV_PE, "--inputs", "x.npz", "--seed", "1"], "--inputs and --seed exclude each other"),
    (["missing.lair"], "no such file: missing.lair"),
    ([GEMV_PE, "--no-simd"], "--param, --no-simd and --arrival apply to a .lair program only"),
    ([GEMV_PE, "--param", "M=4"], "a module's parameters are on its 'reference' and 'mapping' "
                                  "lines"),
    (["x.lair", "--reference", "y.lair"], "a .lair program is its own reference"),
    ([GEMV_PE, "--reference", "missing.lair"], "no such file: missing.lair"),
    ([], "the following arguments are required"),
])
def test_usage_and_missing_files(cli, args: list[str], message: str) -> None:
    result = cli(main, *args)
    assert result.status == 1
    assert message in result.err
    assert "Traceback" not in result.err


def test_directory_needs_exactly_one_module(cli, tmp_path: Path) -> None:
    assert "found none" in cli(main, tmp_path).err
    (tmp_path / "a.pe").write_text("module a\nmesh PE[1, 1]\n")
    (tmp_path / "b.pe").write_text("module b\nmesh PE[1, 1]\n")
    result = cli(main, tmp_path)
    assert result.status == 1
    assert "must hold exactly one .pe module; found a.pe, b.pe" in result.err


def copy_gemv(tmp_path: Path, old: str, new: str) -> Path:
    """The hand-written GEMV beside its reference, with one edit."""
    target = tmp_path / "examples" / "handwritten" / "g"
    target.mkdir(parents=True)
    shutil.copytree(GEMV_DIR.parent.parent / "gemv", tmp_path / "examples" / "gemv")
    text = GEMV_PE.read_text()
    assert old in text
    (target / "g.pe").write_text(text.replace(old, new))
    return target / "g.pe"


def test_wrong_results_exit_1(cli, tmp_path: Path) -> None:
    path = copy_gemv(tmp_path, "n += 1;", "n += 0;")
    report = tmp_path / "r.json"
    result = cli(main, path, "--report", report)
    assert result.status == 1
    assert "the outputs differ from the reference: y[" in result.err
    assert json.loads(report.read_text())["verified"] is False


def test_deadlock_exit_1(cli, tmp_path: Path) -> None:
    path = copy_gemv(tmp_path, "run first {y_local: 0};", "")
    result = cli(main, path)
    assert result.status == 1
    first = result.err.splitlines()[0]
    assert first.startswith("error: deadlock at cycle ")
    assert "PE[1, 0] waits to receive on color 1 (in(1) of simd odd)" in first
    assert "output stream y at PE[4, 0] (color 2) received 0 of 8 values" in result.err


def test_lost_wavelet_exit_1(cli, tmp_path: Path) -> None:
    path = copy_gemv(tmp_path, "route 1: W -> RAMP if (PE_X % 2 == 1);", "")
    result = cli(main, path)
    assert result.status == 1
    assert ("a wavelet on color 1 goes from PE[0, 0] to PE[1, 0] (route from RAMP to E), but "
            "PE[1, 0] has no route for color 1 from W: a wavelet without a route") in result.err


def test_missing_reference_exit_1(cli, tmp_path: Path) -> None:
    path = tmp_path / "g.pe"
    path.write_text(GEMV_PE.read_text())
    result = cli(main, path)
    assert result.status == 1
    assert "the reference program ../../gemv/gemv.lair does not exist" in result.err


def test_config_file(cli, tmp_path: Path) -> None:
    config = tmp_path / "fabric.toml"
    config.write_text("task_dispatch = 10\n")
    report = tmp_path / "r.json"
    assert cli(main, GEMV_PE, "--config", config, "--report", report).status == 0
    data = json.loads(report.read_text())
    assert data["fabric"]["task_dispatch"] == 10
    assert data["cycles"] > 108
    config.write_text("task_dispach = 10\n")
    result = cli(main, GEMV_PE, "--config", config)
    assert result.status == 1
    assert "unknown setting task_dispach" in result.err


def test_each_file_written_is_named_after_the_table(cli, tmp_path: Path) -> None:
    report, outputs = tmp_path / "r.json", tmp_path / "y.npz"
    result = cli(main, GEMV_PE, "--report", report, "--outputs", outputs, "-q")
    assert result.status == 0, result.err
    lines = result.out.splitlines()
    assert lines[-2:] == [f"wrote {report}", f"wrote {outputs}"]
    assert lines[-3].startswith("└")  # the table's last line
    assert "wrote" not in cli(main, GEMV_PE, "-q").out
    broken = copy_gemv(tmp_path, "run first {y_local: 0};", "")  # a deadlock
    result = cli(main, broken, "--report", report, "-q")
    assert result.status == 1 and result.out == f"wrote {report}\n"
