"""Where the compiled engine's code is cached: per version of its sources, in the
user's cache directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dtg.pesim.fast import jit


def test_the_cache_is_in_the_directory_the_user_names(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    monkeypatch.setenv("DTG_CACHE_DIR", str(tmp_path))
    where = jit.cache_directory()
    assert where.parent == tmp_path / "numba" and len(where.name) == 16


def test_numba_is_told_the_directory_on_import(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["DTG_CACHE_DIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", "import numba, dtg.pesim.fast.jit as j; "
                          "print(numba.config.CACHE_DIR == str(j.cache_directory()))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_the_digest_covers_every_compiled_module_and_what_it_imports() -> None:
    """A module with numba code, or one such a module imports from the engine, left out
    of the digest would let a stale cache run old code."""
    import re

    here = Path(jit.__file__).parent
    compiled = set(jit.COMPILED)
    for path in here.glob("*.py"):
        text = path.read_text()
        if re.search(r"^@(compiled|internal|inlined)\b|intrinsic\(", text, re.MULTILINE):
            assert path.stem in compiled, path.name
    for name in compiled:
        imported = re.findall(r"^from dtg\.pesim\.fast(?:\.(\w+))? import ([\w, ]+)",
                              (here / f"{name}.py").read_text(), re.MULTILINE)
        for module, names in imported:
            for used in ([module] if module else [n.strip() for n in names.split(",")]):
                assert used in compiled, f"{name}.py imports {used}"


def test_nothing_is_started_when_the_engine_is_compiled() -> None:
    from dtg.pesim.fast import warm

    assert jit.is_cached()  # (the test run compiled it first: tests/conftest.py)
    warm.start()
    assert warm._started is None


@pytest.mark.long
def test_a_first_run_compiles_in_a_process_beside_it(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """A new cache directory (a new install): the compile runs in another process, and
    once it is waited for the engine is cached there."""
    from dtg.pesim.fast import warm

    monkeypatch.setenv("DTG_CACHE_DIR", str(tmp_path))
    assert not jit.is_cached()
    warm.start()
    assert warm._started is not None
    warm.wait()
    assert jit.is_cached()
