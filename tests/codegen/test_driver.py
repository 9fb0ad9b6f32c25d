"""The dtg-codegen command line: stages, defaults and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLE_PROGRAMS, EXAMPLES, ROOT

from codegen.driver import STAGES, main


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("program", EXAMPLE_PROGRAMS, ids=lambda p: p.stem)
def test_every_stage_on_every_example(program: Path, stage: str, cli) -> None:
    result = cli(main, program, f"--emit={stage}")
    assert result.status == 0, result.err
    assert result.out and result.err == ""


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
    ([str(EXAMPLES / "fc" / "ff.lair"), "--emit=code"], "invalid choice: 'code'"),
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
    proc = subprocess.run([sys.executable, "-m", "codegen.driver", str(noise)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 1
    assert proc.stderr == \
        f"{noise}:2:118: error: byte 0x80 is not UTF-8 text; expected a text file\n"
    assert "Traceback" not in proc.stderr
