"""The pytest plugin: a researcher's own test file gets dtg's fixtures without a conftest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RESEARCHER_TEST = '''
def test_gemv_example(dtg_example, dtg_simulate, dtg_compile):
    gemv = dtg_example("gemv")
    r = dtg_simulate(dtg_compile(gemv.program, gemv.mapping))
    assert r.verified and r.cycles > 0


def test_every_example_is_listed(dtg_examples):
    assert any(e.name == "fc/train" for e in dtg_examples)


def test_a_failing_mapping_fails(dtg_example, dtg_compile):
    r = dtg_compile(dtg_example("gemv").program, dtg_example("gemv").mapping)
    assert r.module is None  # must fail: the module exists
'''


def test_fixtures_in_a_throwaway_suite(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(RESEARCHER_TEST)
    # a file called mapping.py beside the researcher's tests must not shadow dtg's
    (tmp_path / "mapping.py").write_text("raise RuntimeError('not dtg')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=300)
    assert "1 failed, 2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "assert r.module is None" in proc.stdout
