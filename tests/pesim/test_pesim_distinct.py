"""pesim never writes over what it reads: --report, --trace, --heatmap and --outputs may
not be (or resolve to) the module, its reference program, its mapping, --inputs or the
fabric configuration, nor one another; the run is refused before any work, nothing
written, exit status 1."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import main as codegen
from dtg.pesim.cli import main


@pytest.fixture
def files(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    """prog.lair and prog.map, compiled into out/prog.pe, and an inputs archive."""
    shutil.copy(EXAMPLES / "gemv" / "gemv.lair", tmp_path / "prog.lair")
    shutil.copy(EXAMPLES / "gemv" / "gemv.map", tmp_path / "prog.map")
    assert cli(codegen, tmp_path / "prog.lair", "-o", tmp_path / "out").status == 0
    np.savez(tmp_path / "in.npz", W=np.ones((32, 16), np.float16), x=np.ones(16, np.float16))
    (tmp_path / "fabric.toml").write_text("task_dispatch = 2\n")
    cli(main, "--version")  # (clears what the fixture printed)
    return tmp_path


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink()}


def refused(cli, directory: Path, *args: object) -> str:  # type: ignore[no-untyped-def]
    before = snapshot(directory)
    result = cli(main, *args, "-q")
    assert result.status == 1, result.out
    assert result.out == "" and "Traceback" not in result.err
    assert "name another file (nothing was written)" in result.err
    assert snapshot(directory) == before
    return str(result.err)


@pytest.mark.parametrize("option", ["--report", "--trace", "--heatmap", "--outputs"])
def test_no_output_onto_the_module_or_what_it_names(cli, files: Path, option: str) -> None:
    module = files / "out" / "prog.pe"
    err = refused(cli, files, files / "out", option, module)  # found in the directory
    assert err == (f"error: cannot write the {option.removeprefix('--')} to {module}: it is "
                   "the module; name another file (nothing was written)\n")
    # the reference program and the mapping, as the module's header names them
    reference = files / "prog.lair"
    assert f"to {reference}: it is the reference program" in refused(
        cli, files, files / "out", option, reference)
    assert f"to {files / 'prog.map'}: it is the mapping" in refused(
        cli, files, files / "out", option, files / "prog.map")
    relative = Path(os.path.relpath(reference))  # another spelling of the same file
    assert f"to {relative}: it is the same file as {reference}, the reference program" in \
        refused(cli, files, files / "out", option, relative)


def test_no_output_onto_inputs_or_settings(cli, files: Path) -> None:
    inputs, config = files / "in.npz", files / "fabric.toml"
    module = files / "out"
    assert f"the outputs to {inputs}: it is the inputs" in refused(
        cli, files, module, "--inputs", inputs, "--outputs", inputs)
    assert f"the report to {config}: it is the fabric configuration" in refused(
        cli, files, module, "--config", config, "--report", config)
    # a program pesim compiles, and the mapping beside it
    assert f"the trace to {files / 'prog.lair'}: it is the program" in refused(
        cli, files, files / "prog.lair", "--trace", files / "prog.lair")
    assert f"the heatmap to {files / 'prog.map'}: it is the mapping" in refused(
        cli, files, files / "prog.lair", "--heatmap", files / "prog.map")


def test_two_outputs_on_one_file(cli, files: Path) -> None:
    same = files / "r.json"
    err = refused(cli, files, files / "out", "--report", same, "--trace", same)
    assert f"cannot write the trace to {same}: it is the report" in err
    assert not same.exists()


def test_other_names_of_the_same_file(cli, files: Path) -> None:
    reference = files / "prog.lair"
    (files / "sub").mkdir()
    assert "it is the same file as" in refused(
        cli, files, files / "out", "--report", files / "sub" / ".." / "prog.lair")
    link = files / "link.lair"
    link.symlink_to(reference)
    assert "the reference program" in refused(
        cli, files, files / "out", "--reference", link, "--report", reference)
    os.link(files / "prog.map", files / "hard.json")
    assert "hard.json: it is the same file as" in refused(
        cli, files, files / "out", "--report", files / "hard.json")


def test_a_module_found_in_a_search_directory(cli, files: Path) -> None:
    moved = files / "moved"
    moved.mkdir()
    text = (files / "out" / "prog.pe").read_text()
    (moved / "prog.pe").write_text(text.replace('reference "../', 'reference "../../nowhere/'))
    err = refused(cli, files, moved, "-I", files, "--outputs", files / "prog.lair")
    assert "the reference program" in err


def test_distinct_outputs_are_written_and_named(cli, files: Path) -> None:
    names = [files / n for n in ("r.json", "y.npz", "t.json", "h.png")]
    result = cli(main, files / "out", "--inputs", files / "in.npz", "--report", names[0],
                 "--outputs", names[1], "--trace", names[2], "--heatmap", names[3])
    assert result.status == 0, result.err
    assert all(p.exists() for p in names)
    assert result.out.splitlines()[-4:] == [f"wrote {p}" for p in names]
