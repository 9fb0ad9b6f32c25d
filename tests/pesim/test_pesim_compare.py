"""Exact comparison only where every value is exact in any order; a tolerance elsewhere.

Integer inputs once meant exact comparison, so big integers gave false mismatches such
as ``y[3] = 2800.0, expected 2798.0`` (float16 holds every integer only up to 2048).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pesim_support import GEMV_PE

from dtg.lair.frontend import load_program
from dtg.lair.interp import grain_of, magnitude_bounds
from dtg.pesim.cli import main
from dtg.pesim.run import compare, run_file

GEMV = GEMV_PE.parent.parent.parent / "gemv" / "gemv.lair"


def big_integers(path: Path, low: int = 20, high: int = 40, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    np.savez(path, W=rng.integers(low, high, size=(32, 16)).astype(np.float16),
             x=rng.integers(low, high, size=16).astype(np.float16))


def test_big_integers_are_compared_within_tolerance(cli, tmp_path: Path) -> None:
    inputs, report = tmp_path / "in.npz", tmp_path / "r.json"
    big_integers(inputs)
    result = cli(main, GEMV_PE, "--inputs", inputs, "--report", report)
    assert result.status == 0, result.err
    data = json.loads(report.read_text())
    assert data["verified"] is True and data["exact"] is False
    assert data["comparison"].startswith("within tolerance: values computed for y reach ")
    assert "in steps of 1, more than float16 holds exactly (2048 steps)" in data["comparison"]
    assert "within tolerance" in result.out
    # the simulated sums really are rounded differently: exact equality would fail
    outcome = run_file(GEMV_PE, inputs_path=inputs)
    strict = compare(outcome.expected, outcome.result.outputs, exact=True)
    assert not strict.verified and strict.mismatch is not None


def test_small_integers_stay_exact(cli, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert cli(main, GEMV_PE, "--report", report).status == 0
    data = json.loads(report.read_text())
    assert data["exact"] is True
    assert data["comparison"] == ("exact: every value is exact in its type, in any order of "
                                  "evaluation")


def test_a_real_mismatch_is_still_found_within_tolerance(tmp_path: Path) -> None:
    inputs = tmp_path / "in.npz"
    big_integers(inputs)
    outcome = run_file(GEMV_PE, inputs_path=inputs)
    wrong = {"y": outcome.result.outputs["y"].copy()}
    wrong["y"][5] *= 1.05
    found = compare(outcome.expected, wrong, exact=False,
                    bounds={"y": magnitude_bounds(load_program(GEMV).graph,
                                                  outcome.inputs)["y"].elements})
    assert not found.verified and found.mismatch is not None
    assert found.mismatch.startswith("y[5] = ")


def test_cancelling_sums_are_judged_by_their_magnitude_bound() -> None:
    want = {"y": np.array([1.0], dtype=np.float16)}
    got = {"y": np.array([9.0], dtype=np.float16)}  # off by 8 in a sum of terms near 4000
    bounds = {"y": np.array([4000.0])}
    assert compare(want, got, exact=False, bounds=bounds).verified
    assert not compare(want, got, exact=False).verified
    assert not compare(want, got, exact=False, bounds={"y": np.array([100.0])}).verified


@pytest.mark.parametrize("data, grain", [
    ([0.0], math.inf), ([3.0, 6.0], 1.0), ([4.0, 8.0], 4.0), ([0.125, 1.0], 0.125),
    ([1.5, -2.0], 0.5), ([float("nan")], 0.0), ([1.0, float("inf")], 0.0),
    ([0.1], 2.0 ** -55),
])
def test_grain_is_the_largest_power_of_two_dividing_every_value(data: list[float],
                                                                grain: float) -> None:
    assert grain_of(np.array(data)) == grain


def test_bounds_cover_every_partial_sum() -> None:
    graph = load_program(GEMV).graph
    w = np.full((32, 16), 3.0)
    w[:, 8:] = -3.0  # the sums cancel, their partial sums do not
    bound = magnitude_bounds(graph, {"W": w, "x": np.full(16, 2.0)})["y"]
    assert np.all(bound.elements == 16 * 6.0)
    assert bound.peak == 96.0 and bound.grain == 2.0  # multiples of 3 * 2


def test_outputs_the_reference_overflows_are_named_without_numpy_warnings() -> None:
    """float16 overflows to inf in the reference as on the PEs: the outputs match, and
    the comparison says which hold inf or nan (once numpy's RuntimeWarnings were
    printed, and the match read as if the numbers were the program's)."""
    import warnings

    from dtg.lair.frontend import program_from_text
    from dtg.lair.interp import run

    graph = program_from_text("""
        lair sq(): float16 x[4] -> float16 y[4]
        { all (i) in (4) y[i] += x[i] * x[i] }
        """).graph
    x = np.array([300, 2, 400, 3], dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a RuntimeWarning would fail the test)
        y = run(graph, {"x": x})["y"]
        assert int(np.count_nonzero(np.isinf(y))) == 2
        comparison = compare({"y": y}, {"y": y.copy()}, exact=False)
    assert comparison.verified
    assert "the reference overflows: y has 2 of 4 elements inf or nan (float16)" in \
        comparison.reason
    differs = compare({"y": y}, {"y": np.array([300, 4, 1, 9], dtype=np.float16)},
                      exact=False)
    assert not differs.verified
