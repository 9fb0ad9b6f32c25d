"""What every command shares: outputs never replace inputs, and the environment's
refusals (a closed pipe, an over-long or non-UTF-8 file name) end in a named error with
status 1, never in a traceback or an internal error."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dtg.errors import InputError
from dtg.lair.cli import run_guarded
from dtg.lair.files import check_distinct, write_atomically


def test_an_output_that_is_an_input_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "p.lair"
    program.write_text("x")
    with pytest.raises(InputError, match=r"cannot write the report to .*p\.lair: it is the "
                                         r"program"):
        check_distinct([(program, "the report")], [(program, "the program")])


@pytest.mark.parametrize("how", ["symlink", "hardlink", "dotdot"])
def test_the_same_file_by_another_name_is_refused(tmp_path: Path, how: str) -> None:
    program = tmp_path / "p.lair"
    program.write_text("x")
    (tmp_path / "sub").mkdir()
    other = tmp_path / "q.lair"
    if how == "symlink":
        other.symlink_to(program)
    elif how == "hardlink":
        os.link(program, other)
    else:
        other = tmp_path / "sub" / ".." / "p.lair"
    with pytest.raises(InputError, match="is the same file as"):
        check_distinct([(other, "the output")], [(program, "the program")])


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "new.json"  # (not there yet: compared by resolved path)
    with pytest.raises(InputError, match="it is the report"):
        check_distinct([(target, "the report"), (tmp_path / "." / "new.json", "the trace")])


def test_distinct_files_and_standard_streams_pass(tmp_path: Path) -> None:
    (tmp_path / "p.lair").write_text("x")
    check_distinct([(tmp_path / "out.pe", "the module"), ("-", "the output"), (None, "x")],
                   [(tmp_path / "p.lair", "the program"), ("-", "standard input")])


def test_a_long_target_name_is_written(tmp_path: Path) -> None:
    target = tmp_path / ("a" * 250 + ".pe")  # 253 bytes: the temporary file must fit too
    write_atomically(target, "text")
    assert target.read_text() == "text"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_text_naming_a_non_utf8_file_is_refused_whole(tmp_path: Path) -> None:
    target = tmp_path / "m.pe"
    name = os.fsdecode(b"g\xff.lair")
    with pytest.raises(InputError, match=r"not valid UTF-8, in the line 'reference "
                                         r"\"g\\udcff\.lair\"'"):
        write_atomically(target, f'module m\nreference "{name}"\n')
    assert list(tmp_path.iterdir()) == []


def _status(body, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    status = run_guarded(body)
    return status, capsys.readouterr().err


def test_a_refused_path_is_a_user_error(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    def body() -> None:
        (tmp_path / ("a" * 300)).exists()

    status, err = _status(body, capsys)
    assert status == 1
    assert err.startswith("error: cannot use ") and "File name too long" in err


def test_an_oserror_without_a_path_is_still_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    def body() -> None:
        raise OSError("something of ours")

    status, err = _status(body, capsys)
    assert status == 2 and err.startswith("internal error: OSError")


def test_messages_with_undecodable_names_print(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stderr", strict)

    def body() -> None:
        raise InputError(f"no such file: {os.fsdecode(b'g' + bytes([255]))}.lair")

    assert run_guarded(body) == 1
    strict.flush()
    assert strict.buffer.getvalue() == b"error: no such file: g\\udcff.lair\n"  # type: ignore[attr-defined]


def test_a_closed_pipe_is_a_named_error(tmp_path: Path) -> None:
    """``dtg-codegen -o - | true``: the reader is gone before the module is printed."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    script = ("import sys; from dtg.codegen.driver import main; "
              f"sys.exit(main([{str(examples / 'gemv' / 'gemv.lair')!r}, '-o', '-']))")
    reader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert reader.stdout is not None
    reader.stdout.close()  # as `| true` does
    _, err = reader.communicate(timeout=120)
    assert reader.returncode == 1, err
    assert err.decode().strip() == ("error: standard output was closed before everything was "
                                    "written to it (a pipe whose reader ended)")


def test_a_path_through_a_directory_not_made_yet_is_the_input(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.chdir(tmp_path)
    Path("q.lair").write_text("x")
    with pytest.raises(InputError, match=r"is the same file as q\.lair"):
        check_distinct([("new/../q.lair", "the output")], [("q.lair", "the program")])
