"""Reference interpreter: run a checked LAIR graph on numpy arrays.

This is the oracle the simulator is checked against. Every operation rounds to the
element type of the statement's target, reductions accumulate in lexicographic order of
the statement's instances, and ``+=``/``max=`` start from their neutral element
(0 and -inf), as LAIR's initializing reductions do. For integer-valued data whose
partial results are representable, the results are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any

import numpy as np

from lair.diagnostics import DtgError
from lair.graph import Binary, Const, Graph, Read, Stmt, Unary, Value

CHUNK = 1 << 18  # instances evaluated per vectorized step; bounds memory on big domains


class InterpreterInputError(DtgError):
    """Input arrays that do not match the program's input tensors."""


def random_inputs(graph: Graph, seed: int = 0, *, low: int = -2, high: int = 2,
                  ) -> dict[str, np.ndarray]:
    """Integer-valued inputs in ``[low, high]`` (zeros included), in each tensor's type."""
    rng = np.random.default_rng(seed)
    return {
        t.name: rng.integers(low, high + 1, size=t.shape).astype(t.numpy_dtype)
        for t in graph.inputs
    }


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
        arrays[name] = array.astype(tensor.numpy_dtype)
    return arrays


def run(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Compute every output and internal tensor of ``graph``."""
    values: dict[str, np.ndarray] = dict(check_inputs(graph, inputs))
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
        where = index(stmt.target.tensor)
        dest = out
        if not where:  # rank-0 target: scatter into a one-element view
            dest, where = out.reshape(1), (np.zeros(flat.shape, dtype=np.intp),)
        if stmt.op == "=":
            dest[where] = result
        elif stmt.op == "+=":
            np.add.at(dest, where, result)
        else:
            np.maximum.at(dest, where, result)
    return out


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
