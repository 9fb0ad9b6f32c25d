"""Pairs the random differential tests once found wrong (shrunk by hand or by
Hypothesis), with what they must give now: ``verified`` with and without SIMD, or the
located error in ``NAME.expected``. A change that breaks one shows here first."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtg.errors import DtgError
from dtg.pesim.run import run_program

HERE = Path(__file__).parent / "regressions"
CASES = sorted(p.stem for p in HERE.glob("*.lair"))


def outcome(path: Path, *, simd: bool) -> str:
    try:
        result = run_program(path, simd=simd)
    except DtgError as err:
        return err.format().replace(str(HERE) + "/", "")
    return "verified" if result.comparison.verified else f"mismatch: {result.comparison.mismatch}"


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", CASES)
def test_regression(name: str, simd: bool) -> None:
    expected = (HERE / f"{name}.expected").read_text().strip()
    assert outcome(HERE / f"{name}.lair", simd=simd) == expected
