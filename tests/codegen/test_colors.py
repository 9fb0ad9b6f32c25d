"""Colors shared by routes that never meet (codegen.colors): forced on compiled examples
with a smaller fabric, the module still verifies statically and computes the program."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.codegen.colors import colors_used, share_colors
from dtg.codegen.driver import compile_file
from dtg.pe.parser import parse_module_text
from dtg.pe.printer import module as print_module
from dtg.pesim.run import make_inputs, run_module
from dtg.pesim.verify import verify_module

# Examples where some routes never meet (the others' colors all meet somewhere).
CASES = ["movement/gemv_two_sides", "movement/gemv_out_north", "fc/ff", "fc/train"]


def test_a_module_that_fits_is_left_alone() -> None:
    module = compile_file(EXAMPLES / "gemv" / "gemv.lair").module
    assert module is not None
    assert share_colors(module, 24) is module


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("case", CASES)
def test_shared_colors_compute_the_same(case: str, simd: bool) -> None:
    # per wavelet: a batched task lands its own color, so its color is never shared
    path = EXAMPLES / f"{case}.lair"
    compiled = compile_file(path, simd=simd, arrival="per-wavelet")
    assert compiled.module is not None
    used = len(colors_used(compiled.module))
    shared = None
    for limit in range(1, used):  # the fewest colors the conflict graph allows
        shared = share_colors(compiled.module, limit)
        if shared is not None:
            break
    assert shared is not None and len(colors_used(shared)) < used
    text = print_module(shared)
    module, locations = parse_module_text(text, f"<{Path(case).name}.pe>")
    verify_module(module, None, locations=locations)
    for seed in (0, 1):
        inputs = make_inputs(compiled.program, seed=seed)
        outcome = run_module(module, compiled.program, inputs)
        assert outcome.comparison.verified, outcome.comparison.mismatch


def test_batched_colors_are_not_shared() -> None:
    """A batched task lands its own color's wavelets, so its color is never merged with
    another: the two-sided GEMV's colors can be shared per wavelet, not with batches."""
    path = EXAMPLES / "movement/gemv_two_sides.lair"
    per_wavelet = compile_file(path, arrival="per-wavelet").module
    batched = compile_file(path)
    assert per_wavelet is not None and batched.module is not None
    assert batched.arrivals is not None and len(batched.arrivals.batches) == 2
    used = len(colors_used(batched.module))
    assert len(colors_used(per_wavelet)) == used
    assert any(share_colors(per_wavelet, limit) is not None for limit in range(1, used))
    assert all(share_colors(batched.module, limit) is None for limit in range(1, used))
