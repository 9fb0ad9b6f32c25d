"""The compiled engine's float16 arithmetic against numpy's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.pesim.fast import f16

ALL = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def _bits(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float16).view(np.uint16)


def _nan(bits: int) -> bool:
    return (bits & 0x7C00) == 0x7C00 and (bits & 0x3FF) != 0


def _same(got: int, want: int, *operands: int) -> bool:
    """Equal bit patterns, NaNs included (sign and payload), except that which of two
    NaN operands an operation passes on is numpy's build's business (its vector and
    scalar loops differ): then any NaN will do."""
    if len(operands) == 2 and all(_nan(x) for x in operands):
        return _nan(got) and _nan(want)
    return got == want


def test_widening_is_exact_on_every_pattern() -> None:
    want = ALL.view(np.float16).astype(np.float64)
    got = np.array([f16.widen(h) for h in ALL])
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))  # NaNs included


def test_narrowing_every_float16_gives_it_back() -> None:
    values = ALL.view(np.float16).astype(np.float64)
    got = np.array([f16.narrow(x) for x in values], dtype=np.uint16)
    assert np.array_equal(got, ALL)  # NaNs keep their sign and payload


def _boundaries() -> np.ndarray:
    """Every halfway point between neighbouring float16s and the float64s on either
    side of it, where rounding decides."""
    lo = ALL[(ALL & 0x7C00) != 0x7C00].view(np.float16).astype(np.float64)
    lo = np.sort(lo[lo >= 0])
    mid = (lo[:-1] + lo[1:]) / 2
    return np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                           -mid, [65520.0, 65519.99, 2.0 ** -25, 2.0 ** -26, 1e-300,
                                  np.inf, -np.inf, 1e300]])


def test_narrowing_rounds_as_numpy_at_every_boundary() -> None:
    xs = _boundaries()
    got = np.array([f16.narrow(x) for x in xs], dtype=np.uint16)
    want = _bits(xs)
    assert np.array_equal(got, want), xs[got != want][:5]


def test_rounding_in_place_is_widening_the_narrowed() -> None:
    xs = np.concatenate([_boundaries(), ALL.view(np.float16).astype(np.float64)])
    got = np.array([f16.rounded(x) for x in xs])
    want = np.array([f16.widen(f16.narrow(x)) for x in xs])
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_narrowing_any_float64(x: float) -> None:
    assert _same(int(f16.narrow(x)), int(_bits(np.array([x]))[0]))


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_rounding_any_float64(x: float) -> None:
    with np.errstate(over="ignore"):
        want = np.float64(np.float16(x))
    got = f16.rounded(x)
    assert got == want or (got != got and want != want)
    assert np.signbit(got) == np.signbit(want)


@settings(max_examples=3000, deadline=None)
@given(st.floats(width=32, allow_nan=False))
def test_narrowing_any_float32(x: float) -> None:
    x32 = np.float32(x)
    with np.errstate(over="ignore"):
        want = int(np.float16(x32).view(np.uint16))
    assert int(f16.narrow(np.float64(x32))) == want


OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}


@pytest.mark.parametrize("name", sorted(OPS))
def test_operations_on_random_pairs(name: str) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 16, 200_000, dtype=np.uint32).astype(np.uint16)
    b = rng.integers(0, 1 << 16, 200_000, dtype=np.uint32).astype(np.uint16)
    with np.errstate(all="ignore"):
        want = OPS[name](a.view(np.float16), b.view(np.float16)).view(np.uint16)
    fn = getattr(f16, name)
    got = np.array([fn(x, y) for x, y in zip(a, b, strict=True)], dtype=np.uint16)
    bad = [k for k in range(a.size)
           if not _same(int(got[k]), int(want[k]), int(a[k]), int(b[k]))]
    assert not bad, [(hex(a[k]), hex(b[k]), hex(got[k]), hex(want[k])) for k in bad[:5]]


def test_signed_zeros_in_maximum_keep_the_first() -> None:
    zero, minus = np.uint16(0), np.uint16(0x8000)
    assert f16.maximum(zero, minus) == zero and f16.maximum(minus, zero) == minus


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_maximum_of_signed_zeros_and_nans_as_numpy(dtype: type) -> None:
    """The compiled engine's ``max`` (values held in float64) against numpy's loops of
    each type, which differ in which of two equal zeros they give."""
    from dtg.pesim.fast.lower import DTYPE_CODE
    from dtg.pesim.fast.steps import maximum

    code = DTYPE_CODE[np.dtype(dtype).name]
    values = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
    for a in values:
        for b in values:
            want = np.maximum(np.array([a], dtype=dtype), np.array([b], dtype=dtype))[0]
            got = maximum(a, b, code)
            if np.isnan(want):
                assert np.isnan(got), (a, b)
            else:
                assert got == want and np.signbit(got) == np.signbit(want), (a, b, got, want)
