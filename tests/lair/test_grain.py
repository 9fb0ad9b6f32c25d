"""grain_of: the largest power of two dividing every value, also across chunks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtg.lair import interp


def brute_grain(values: list[float]) -> float:
    nonzero = [abs(v) for v in values if v != 0]
    if not nonzero:
        return math.inf
    grain = 2.0 ** 60
    while not all((v / grain).is_integer() for v in nonzero):
        grain /= 2
    return grain


@given(st.lists(st.integers(-2**20, 2**20).map(lambda k: k / 64), max_size=40),
       st.integers(1, 8))
def test_grain_matches_brute_force_whatever_the_chunks(values: list[float], chunk: int
                                                       ) -> None:
    saved = interp.CHUNK
    interp.CHUNK = chunk
    try:
        assert interp.grain_of(np.array(values, dtype=np.float64)) == brute_grain(values)
    finally:
        interp.CHUNK = saved


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_value_that_is_not_finite_has_no_grain(bad: float) -> None:
    assert interp.grain_of(np.array([1.0] * 9 + [bad])) == 0.0
    assert interp.grain_of(bad) == 0.0


def test_scalars_and_empty_arrays() -> None:
    assert interp.grain_of(3.0) == 1.0 and interp.grain_of(0.75) == 0.25
    assert interp.grain_of(np.zeros(0)) == math.inf and interp.grain_of(0.0) == math.inf
