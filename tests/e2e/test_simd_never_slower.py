"""SIMD is never chosen slower than scalar code (issue 27's check).

The examples' cycles with and without SIMD are pinned (and each pin is checked against
the simulator by ``test_examples_run``), so comparing the pins compares the code. The
kernels of ``benchmarks/kernels/`` (written as a new user would) are compiled and
simulated both ways here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from dtg.pesim.run import run_program

PINS = json.loads((Path(__file__).parent / "pinned_cycles.json").read_text())
KERNELS = sorted((ROOT / "benchmarks" / "kernels").glob("*.lair"))


@pytest.mark.parametrize("name", sorted(PINS))
def test_pinned_simd_code_is_not_slower_than_scalar(name: str) -> None:
    pins = PINS[name]
    assert pins["simd"] <= pins["scalar"], pins


@pytest.mark.long
@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_kernel_simd_code_is_not_slower_than_scalar(path: Path) -> None:
    simd = run_program(path)
    scalar = run_program(path, simd=False)
    assert simd.comparison.verified and scalar.comparison.verified
    assert simd.result.cycles <= scalar.result.cycles, (simd.result.cycles,
                                                        scalar.result.cycles)
    # (and the mapping's bound is a lower bound of both)
    assert simd.bound is not None and scalar.result.cycles >= simd.result.cycles >= \
        simd.bound.cycles, simd.bound.describe()
