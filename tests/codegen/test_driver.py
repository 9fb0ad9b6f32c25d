"""The dtg-codegen command line: stages, defaults and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLE_PROGRAMS, EXAMPLES, ROOT

from dtg.codegen.driver import main
from dtg.codegen.pipeline import STAGES

COMPILED = EXAMPLE_PROGRAMS


@pytest.mark.parametrize("stage", ["ast", "isl", "mapping"])
@pytest.mark.parametrize("program", EXAMPLE_PROGRAMS, ids=lambda p: p.stem)
def test_front_end_stages_on_every_example(program: Path, stage: str, cli) -> None:
    result = cli(main, program, f"--emit={stage}")
    assert result.status == 0, result.err
    assert result.out and result.err == ""


@pytest.mark.parametrize("stage", STAGES[3:])
@pytest.mark.parametrize("program", COMPILED, ids=lambda p: p.stem)
def test_back_end_stages(program: Path, stage: str, cli) -> None:
    result = cli(main, program, f"--emit={stage}")
    assert result.status == 0, result.err
    assert result.out and result.err == ""


UNREALIZABLE_LAIR = """
lair n(): float16 W[256][256], float16 x[256] -> float16 y[256]
{ all (i, j) in (256, 256) y[i] += W[i][j] * x[j] }
"""
# All of W on one PE: 128 KiB of local memory, where a PE has 48 KiB.
UNREALIZABLE_MAP = """rectangle { PE[1, 1] }
placement { n[i, j] -> PE[0, 0] }
input x resident
input W resident
output y resident
"""


def test_unrealized_mappings_say_which_flow_they_need(tmp_path: Path, cli) -> None:
    (tmp_path / "n.lair").write_text(UNREALIZABLE_LAIR)
    (tmp_path / "n.map").write_text(UNREALIZABLE_MAP)
    result = cli(main, tmp_path / "n.lair")
    assert result.status == 1
    assert result.err.startswith(f"{tmp_path / 'n.map'}:2:11: error: the local arrays of each "
                                 "compute PE need 132096 bytes")
    assert "Traceback" not in result.err


def test_output_directory_and_report(tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "-o", out, "--report",
                 out / "report.json")
    assert result.status == 0, result.err
    assert (out / "gemv.pe").read_text().startswith("module gemv\n")
    assert (out / "report.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["gemv.pe", "report.json"]


def test_failed_compile_leaves_no_files(tmp_path: Path, cli) -> None:
    (tmp_path / "n.lair").write_text(UNREALIZABLE_LAIR)
    (tmp_path / "n.map").write_text(UNREALIZABLE_MAP)
    out = tmp_path / "out"
    result = cli(main, tmp_path / "n.lair", "-o", out, "--report", out / "r.json")
    assert result.status == 1
    assert not out.exists()


def test_emit_ast_prints_the_specialized_program(cli) -> None:
    result = cli(main, EXAMPLES / "fc" / "ff.lair", "--emit=ast", "--param", "M=64")
    assert result.status == 0
    assert "float16 W[64][16]" in result.out and "<T" not in result.out


def test_param_override_reaches_the_mapping_check(cli) -> None:
    result = cli(main, EXAMPLES / "fc" / "ff.lair", "--param", "M=64")
    assert result.status == 1
    assert "ff.map:3:11: error: ff[32, 0] is placed on PE[0, 5], outside the rectangle" \
        in result.err


@pytest.mark.parametrize(("argv", "message"), [
    (["missing.lair"], "error: no such file: missing.lair"),
    ([str(EXAMPLES / "fc" / "ff.lair"), "-m", "nowhere.map"], "error: no such file: nowhere.map"),
    ([str(EXAMPLES / "fc" / "ff.lair"), "--param", "M"], "malformed --param 'M'"),
    ([str(EXAMPLES / "fc" / "ff.lair"), "--emit=pe"], "invalid choice: 'pe'"),
    ([str(EXAMPLES)], "is a directory, expected a file"),
    ([], "the following arguments are required: program"),
])
def test_bad_command_lines_fail_cleanly(argv: list[str], message: str, cli) -> None:
    result = cli(main, *argv)
    assert result.status == 1
    assert message in result.err
    assert "Traceback" not in result.err


def test_console_script_never_prints_a_traceback(tmp_path: Path) -> None:
    noise = tmp_path / "noise.lair"
    noise.write_bytes(bytes(range(256)))
    proc = subprocess.run([sys.executable, "-m", "dtg.codegen.driver", str(noise)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 1
    assert proc.stderr == \
        f"{noise}:2:118: error: byte 0x80 is not UTF-8 text; expected a text file\n"
    assert "Traceback" not in proc.stderr
