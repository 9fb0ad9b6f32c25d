"""Reference interpreter: run a checked LAIR graph on numpy arrays.

This is the oracle the simulator is checked against. Every operation rounds to the
element type of the statement's target, reductions accumulate in lexicographic order of
the statement's instances, and ``+=``/``max=`` start from their neutral element
(0 and -inf), as LAIR's initializing reductions do. For integer-valued data whose
partial results are representable, the results are exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from dtg.errors import DtgError
from dtg.lair.graph import Binary, Const, Graph, Read, Stmt, Unary, Value

CHUNK = 1 << 18  # instances evaluated per vectorized step; bounds memory on big domains


class InterpreterInputError(DtgError):
    """Input arrays that do not match the program's input tensors."""


def random_inputs(graph: Graph, seed: int = 0, *, low: int = -2, high: int = 2,
                  ) -> dict[str, np.ndarray]:
    """Integer-valued inputs in ``[low, high]`` (zeros included), in each tensor's type."""
    rng = np.random.default_rng(seed)
    return {t.name: _random_tensor(rng, t.shape, t.numpy_dtype, low, high)
            for t in graph.inputs}


RANDOM_CHUNK = 1 << 24
"""Elements of a random input drawn at once: a larger tensor is drawn in pieces of
this many, so that no int64 copy of a whole wafer-sized tensor is ever held (smaller
ones are drawn whole, as they always were, so their values stay what they were)."""


def _random_tensor(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, low: int,
                   high: int) -> np.ndarray:
    size = prod(shape)
    if size <= RANDOM_CHUNK:
        return rng.integers(low, high + 1, size=shape).astype(dtype)
    out = np.empty(size, dtype=dtype)
    for start in range(0, size, RANDOM_CHUNK):
        end = min(start + RANDOM_CHUNK, size)
        out[start:end] = rng.integers(low, high + 1, size=end - start)
    return out.reshape(shape)


def check_inputs(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Validate names and shapes; return arrays converted to the declared types."""
    expected = {t.name: t for t in graph.inputs}
    missing = sorted(set(expected) - set(inputs))
    if missing:
        raise InterpreterInputError(
            f"missing input tensor{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"expected {', '.join(sorted(expected))}")
    unknown = sorted(set(inputs) - set(expected))
    if unknown:
        raise InterpreterInputError(
            f"unknown input tensor{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"expected {', '.join(sorted(expected))}")
    arrays = {}
    for name, tensor in expected.items():
        array = np.asarray(inputs[name])
        if array.shape != tensor.shape:
            raise InterpreterInputError(
                f"input '{name}' has shape {array.shape}, expected {tensor.shape}")
        if not np.issubdtype(array.dtype, np.number):
            raise InterpreterInputError(f"input '{name}' has non-numeric type {array.dtype}")
        arrays[name] = array.astype(tensor.numpy_dtype, copy=False)  # (a view when it is)
    return arrays


def run(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Compute every output and internal tensor of ``graph``. Values that overflow their
    type become infinite, as on the PEs, without numpy's warnings (the comparison says
    which outputs hold such values)."""
    values: dict[str, np.ndarray] = dict(check_inputs(graph, inputs))
    with np.errstate(over="ignore", invalid="ignore"):
        for stmt in graph.statements:
            values[stmt.target.tensor] = _run_statement(graph, stmt, values)
    return {t.name: values[t.name] for t in graph.tensors if t.role != "input"}


def _run_statement(graph: Graph, stmt: Stmt, values: Mapping[str, np.ndarray]) -> np.ndarray:
    target = graph.tensor(stmt.target.tensor)
    dtype = target.numpy_dtype
    neutral = {"=": 0.0, "+=": 0.0, "max=": -np.inf}[stmt.op]
    out = np.full(target.shape, neutral, dtype=dtype)
    total = prod(stmt.extents)
    for start in range(0, total, CHUNK):
        flat = np.arange(start, min(start + CHUNK, total))
        coords = np.unravel_index(flat, stmt.extents)
        env = dict(zip(stmt.iterators, coords, strict=True))

        def index(tensor: str, env: dict[str, Any] = env, n: int = flat.size
                  ) -> tuple[Any, ...]:
            return tuple(np.broadcast_to(e.evaluate(env), (n,))
                         for e in stmt.access(tensor).index)

        result = _evaluate(stmt.value, values, index, dtype)
        result = np.broadcast_to(np.asarray(result, dtype=dtype), flat.shape)
        _scatter(out, index(stmt.target.tensor), result, stmt.op)
    return out


def _scatter(out: np.ndarray, where: tuple[Any, ...], values: np.ndarray, op: str) -> None:
    """Store (``=``) or accumulate (``+=``, ``max=``) ``values`` into ``out[where]``; a
    rank-0 target (no index) scatters into a one-element view."""
    dest = out
    if not where:
        dest, where = out.reshape(1), (np.zeros(values.shape, dtype=np.intp),)
    if op == "=":
        dest[where] = values
    elif op == "+=":
        np.add.at(dest, where, values)
    else:
        np.maximum.at(dest, where, values)


def _evaluate(value: Value, values: Mapping[str, np.ndarray], index: Any, dtype: Any) -> Any:
    match value:
        case Const(v):
            return dtype(v)
        case Read(tensor):
            return values[tensor][index(tensor)].astype(dtype)
        case Unary("neg", operand):
            return -_evaluate(operand, values, index, dtype)
        case Binary(op, lhs, rhs):
            a = _evaluate(lhs, values, index, dtype)
            b = _evaluate(rhs, values, index, dtype)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            return np.maximum(a, b)
    raise TypeError(value)


@dataclass(frozen=True)
class Bound:
    """What :func:`magnitude_bounds` knows of a computed tensor."""

    elements: np.ndarray  # per element: a bound on |value| and on |every partial sum|
    peak: float  # the largest magnitude any value of its statement can take
    grain: float  # every value is a multiple of it (0: unknown, e.g. non-finite data)


def grain_of(data: Any) -> float:
    """The largest power of two of which every value in ``data`` is a multiple (inf when
    all are zero, 0 when one is not finite)."""
    flat = np.asarray(data).ravel()
    grain = math.inf
    for start in range(0, max(flat.size, 1), CHUNK):  # in chunks: inputs may be huge
        values = np.abs(flat[start:start + CHUNK].astype(np.float64))
        if not bool(np.all(np.isfinite(values))):
            return 0.0
        values = values[values != 0]
        if not values.size:
            continue
        mantissa, exponent = np.frexp(values)
        digits = (mantissa * 2.0 ** 53).astype(np.int64)  # exact: 53-bit mantissas
        lowest = (digits & -digits).astype(np.float64)
        grain = min(grain, float(np.min(np.ldexp(lowest, exponent - 53))))
    return grain


def _times(a: float, b: float) -> float:
    return 0.0 if a == 0 or b == 0 else a * b


def magnitude_bounds(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, Bound]:
    """For every computed tensor: a bound on the magnitude of each element and of its
    partial sums, the largest magnitude any value of its statement can take (operands,
    intermediate results, partial reductions) whatever the order of evaluation, and a
    power of two of which all those values are multiples.

    Computed in float64 on absolute values: ``|a ± b| <= |a| + |b|``, ``|a * b| = |a||b|``,
    ``|max(a, b)| <= max(|a|, |b|)``, and a reduction's partial sums are bounded by the sum
    of the magnitudes of its terms; grains multiply under ``*`` and take the minimum
    otherwise. When ``peak / grain`` stays within :data:`EXACT_STEPS` of the statement's
    type (and the grain within its normal range), every value is exact, in any order."""
    checked = check_inputs(graph, inputs)
    # an input's magnitudes in its own type (exact for floats; no float64 copy of a
    # huge tensor), widened where they are read
    bounds: dict[str, np.ndarray] = {name: np.abs(a) for name, a in checked.items()}
    grains = {name: grain_of(a) for name, a in checked.items()}
    result: dict[str, Bound] = {}
    for stmt in graph.statements:
        target = graph.tensor(stmt.target.tensor)
        out = np.zeros(target.shape, dtype=np.float64)
        peak = 0.0
        total = prod(stmt.extents)
        for start in range(0, total, CHUNK):
            flat = np.arange(start, min(start + CHUNK, total))
            coords = np.unravel_index(flat, stmt.extents)
            env = dict(zip(stmt.iterators, coords, strict=True))

            def index(tensor: str, env: dict[str, Any] = env, n: int = flat.size,
                      stmt: Stmt = stmt) -> tuple[Any, ...]:
                return tuple(np.broadcast_to(e.evaluate(env), (n,))
                             for e in stmt.access(tensor).index)

            value, inner = _bound(stmt.value, bounds, index)
            peak = max(peak, inner)
            value = np.broadcast_to(np.asarray(value, dtype=np.float64), flat.shape)
            _scatter(out, index(stmt.target.tensor), value, stmt.op)
        if out.size:
            peak = max(peak, float(out.max()))
        bounds[stmt.target.tensor] = out
        grains[stmt.target.tensor] = _grain(stmt.value, grains)
        result[stmt.target.tensor] = Bound(out, peak, grains[stmt.target.tensor])
    return result


def _grain(value: Value, grains: Mapping[str, float]) -> float:
    match value:
        case Const(v):
            return grain_of(v)
        case Read(tensor):
            return grains[tensor]
        case Unary(_, operand):
            return _grain(operand, grains)
        case Binary(op, lhs, rhs):
            a, b = _grain(lhs, grains), _grain(rhs, grains)
            return _times(a, b) if op == "*" else min(a, b)
    raise TypeError(value)


def _bound(value: Value, bounds: Mapping[str, np.ndarray], index: Any) -> tuple[Any, float]:
    """The magnitude bound of ``value`` and the largest bound of any of its parts."""
    match value:
        case Const(v):
            return abs(float(v)), abs(float(v))
        case Read(tensor):
            b = bounds[tensor][index(tensor)].astype(np.float64)
            return b, float(b.max()) if b.size else 0.0
        case Unary(_, operand):
            return _bound(operand, bounds, index)
        case Binary(op, lhs, rhs):
            a, peak_a = _bound(lhs, bounds, index)
            b, peak_b = _bound(rhs, bounds, index)
            r = a * b if op == "*" else np.maximum(a, b) if op == "max" else a + b
            top = float(np.max(r)) if np.size(r) else 0.0
            return r, max(peak_a, peak_b, top)
    raise TypeError(value)


EXACT_STEPS = {"float16": 2.0 ** 11, "float32": 2.0 ** 24}
"""Up to how many multiples of a power of two each type holds exactly (its significand)."""

SMALLEST_NORMAL = {"float16": 2.0 ** -14, "float32": 2.0 ** -126}
"""Below it a type loses significand bits (subnormal numbers)."""
