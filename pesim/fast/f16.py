"""float16 arithmetic for the compiled engine, bit for bit as numpy computes it.

numba has no float16 type, so the compiled engine keeps float16 values as their bit
patterns (``uint16``) and computes through wider types: an operation on two float16
values is done exactly (or rounded once) in float64 and rounded to float16 to nearest,
ties to even, which is the correctly rounded result numpy gives too (numpy computes
in float32 and rounds; both are correct roundings of the same real number, since
float32's and float64's significands are wide enough that the first rounding never
decides the second). Converting a float64 (a scalar constant, a wavelet's value) to
float16 rounds once, directly, as numpy does (not through float32).
"""

from __future__ import annotations

import numpy as np

from dtg.pesim.fast.jit import compiled, inlined

_SIGN = np.uint64(1) << np.uint64(63)
_SIGNIFICAND = (np.uint64(1) << np.uint64(52)) - np.uint64(1)
_MAGNITUDE = _SIGN - np.uint64(1)
_SUBNORMAL_UNIT = 2.0 ** -24
# float64 exponents (biased) of the numbers that are normal float16s before rounding
_NORMAL_LOW, _NORMAL_HIGH = np.uint64(1023 - 14), np.uint64(1023 + 15)
_OVERFLOW = np.uint64(1023 + 16) << np.uint64(52)  # 2**16 (rounded: past the largest)


@inlined
def widen(h: np.uint16) -> float:
    """The float16 with bit pattern ``h`` as a float64 (exact)."""
    bits = np.uint32(h)
    exponent = (bits >> np.uint32(10)) & np.uint32(0x1F)
    if 0 < exponent < 0x1F:  # normal: the same number as a float32, rebiased
        single = np.uint32(((bits & np.uint32(0x8000)) << np.uint32(16))
                           | (((bits & np.uint32(0x7FFF)) + np.uint32(0x1C000)) << np.uint32(13)))
        return np.float64(single.view(np.float32))
    sign = -1.0 if bits & np.uint32(0x8000) else 1.0
    significand = np.int64(bits & np.uint32(0x3FF))
    if exponent == 0:
        return sign * significand * _SUBNORMAL_UNIT
    if significand == 0:
        return sign * np.inf
    # a NaN keeps its sign and payload (as numpy's float32 arithmetic does)
    nan = np.uint64((np.uint64(bits & np.uint32(0x8000)) << np.uint64(48))
                    | np.uint64(0x7FF0000000000000) | (np.uint64(significand) << np.uint64(42)))
    return nan.view(np.float64)


@compiled
def narrow(x: float) -> np.uint16:
    """``x`` rounded to float16 (to nearest, ties to even), as its bit pattern."""
    bits = np.float64(x).view(np.uint64)
    field = (bits >> np.uint64(52)) & np.uint64(0x7FF)
    if _NORMAL_LOW <= field <= _NORMAL_HIGH:
        # the common case: round the significand to 10 bits in place (a carry moves to
        # the exponent, past the largest finite float16 to infinity's pattern)
        magnitude = bits & _MAGNITUDE
        magnitude = np.uint64(magnitude + np.uint64((1 << 41) - 1)
                              + ((magnitude >> np.uint64(42)) & np.uint64(1)))
        h = (magnitude >> np.uint64(42)) - np.uint64((1023 - 15) << 10)
        if h > np.uint64(0x7C00):
            h = np.uint64(0x7C00)
        return np.uint16(((bits >> np.uint64(48)) & np.uint64(0x8000)) | h)
    sign = np.uint16(0x8000) if bits & _SIGN else np.uint16(0)
    exponent = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF))
    significand = np.int64(bits & _SIGNIFICAND)
    if exponent == 0x7FF:
        if significand == 0:
            return sign | np.uint16(0x7C00)
        payload = significand >> 42  # the top of the payload, as numpy keeps it
        return sign | np.uint16(0x7C00 | (payload if payload else 1))
    # x = m * 2**(e - 1075) with m = 2**52 + significand (0 < exponent): the float16 has
    # unit 2**-24 below 2**-14 (subnormals) and 2**(e' - 10) above
    if exponent == 0:
        return sign  # float64 subnormals are far below float16's smallest
    m = (np.int64(1) << 52) | significand
    unbiased = exponent - 1023
    if unbiased >= 16:
        return sign | np.uint16(0x7C00)
    # the number of low bits of m below the float16's unit
    shift = 52 - 10 + (-14 - unbiased if unbiased < -14 else 0)
    if shift > 53:
        return sign  # below half the smallest subnormal
    kept = m >> shift
    rest = m - (kept << shift)
    half = np.int64(1) << (shift - 1)
    if rest > half or (rest == half and kept & 1):
        kept += 1
    if unbiased < -14:
        return sign | np.uint16(kept)  # a subnormal (or, rounded up, the smallest normal)
    # kept holds the implicit bit at 2**10; a carry to 2**11 moves to the next exponent
    biased = unbiased + 15
    if kept >= 2048:
        kept >>= 1
        biased += 1
    if biased >= 31:
        return sign | np.uint16(0x7C00)
    return sign | np.uint16((biased << 10) | (kept - 1024))


@inlined
def rounded(x: float) -> float:
    """``x`` rounded to the nearest float16 (ties to even), as a float64: the value of
    ``widen(narrow(x))``, in a few integer operations where the result is normal."""
    bits = np.float64(x).view(np.uint64)
    biased = (bits >> np.uint64(52)) & np.uint64(0x7FF)
    if not _NORMAL_LOW <= biased <= _NORMAL_HIGH:
        return widen(narrow(x))
    magnitude = bits & _MAGNITUDE
    magnitude = np.uint64(magnitude + np.uint64((1 << 41) - 1)
                          + ((magnitude >> np.uint64(42)) & np.uint64(1)))
    magnitude &= ~np.uint64((1 << 42) - 1)
    if magnitude >= _OVERFLOW:
        return -np.inf if bits & _SIGN else np.inf
    result = np.uint64((bits & _SIGN) | magnitude)
    return result.view(np.float64)


@compiled
def add(a: np.uint16, b: np.uint16) -> np.uint16:
    return narrow(widen(a) + widen(b))


@compiled
def sub(a: np.uint16, b: np.uint16) -> np.uint16:
    return narrow(widen(a) - widen(b))


@compiled
def mul(a: np.uint16, b: np.uint16) -> np.uint16:
    return narrow(widen(a) * widen(b))


@compiled
def maximum(a: np.uint16, b: np.uint16) -> np.uint16:
    """``np.maximum``: a NaN operand wins (the first, when both are)."""
    x, y = widen(a), widen(b)
    if x != x:
        return a
    if y != y:
        return b
    if x == y:  # +0 and -0: numpy keeps the first
        return a
    return a if x > y else b
