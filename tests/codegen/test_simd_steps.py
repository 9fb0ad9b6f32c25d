"""A statement split into SIMD operations computes what the reference computes.

``op_steps`` turns a statement into operations that leave partial results in the
target; the property: run those operations elementwise as the simulator does and the
result equals the reference interpreter's on integer-valued data (a sum of terms added
into a ``+=`` target is reassociated, as reductions are; pesim compares exactly only
where every value is exact in its type).
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dtg.codegen.simd import TEMP, OpShape, op_steps, without_temporaries
from dtg.lair.graph import AffineExpr, Binary, Const, Read, Stmt, TensorAccess, Unary, Value
from dtg.lair.interp import _evaluate
from dtg.pesim.code import elementwise

TENSORS = ("a", "b", "c", "d")
N = 16
ITER = AffineExpr.make({"i": 1})

LEAVES: st.SearchStrategy[Value] = st.one_of(
    st.sampled_from(TENSORS).map(Read),
    st.sampled_from([0.0, 1.0, -2.0, 0.5, 3.0]).map(Const))
VALUES: st.SearchStrategy[Value] = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        inner.map(lambda v: Unary("neg", v)),
        st.builds(Binary, st.sampled_from(["+", "-", "*", "max"]), inner, inner)),
    max_leaves=6)


def _stmt(op: str, value: Value) -> Stmt:
    reads = tuple(TensorAccess(t, (ITER,)) for t in TENSORS)
    return Stmt("s", "s", ("i",), (N,), op, TensorAccess("y", (ITER,)), reads, value)  # type: ignore[arg-type]


def _run(steps: tuple[OpShape, ...], y: np.ndarray, arrays: dict[str, np.ndarray],
         trigger_value: np.float32) -> np.ndarray:
    """The steps elementwise, a temporary (``TEMP``) beside the target."""
    held = {"y": y.copy(), TEMP: np.full(N, np.nan, np.float32)}
    for step in steps:
        scalar = trigger_value if not isinstance(step.scalar, Const) else np.float32(
            step.scalar.value)
        srcs = [scalar if s is None else held[s] if s in held else arrays[s]
                for s in step.srcs]
        a, b = [*srcs, None, None][:2]
        held[step.dst] = np.asarray(elementwise(step.op)(held[step.dst], a, b),
                                    dtype=np.float32) * np.ones(N, np.float32)
    return held["y"]


MAX_AB = Binary("max", Read("a"), Read("b"))


@settings(max_examples=300, deadline=None)
@example(Binary("-", Read("c"), MAX_AB), "=", None, 1)
@example(Unary("neg", MAX_AB), "=", "a", 2)
@example(Binary("-", Binary("*", MAX_AB, Const(2.0)), Binary("*", Const(0.5), Read("c"))),
         "=", None, 3)
@example(Binary("max", Read("d"), Binary("*", Read("c"), MAX_AB)), "=", None, 4)
@example(Binary("*", Binary("*", Read("a"), Read("b")), Read("c")), "+=", None, 5)
@example(Binary("+", Read("a"), Const(-2.0)), "max=", "b", 6)
@example(Binary("max", Read("a"), Read("b")), "+=", None, 7)
@example(Binary("-", Read("a"), Binary("*", Read("b"), Read("c"))), "+=", None, 11)
@example(Binary("*", Binary("+", Read("a"), Read("b")), Binary("-", Read("a"), Read("c"))),
         "=", "b", 10)
@example(Binary("*", Binary("-", Read("a"), Read("b")), Binary("-", Read("a"), Read("b"))),
         "+=", "b", 8)
@example(Binary("*", Binary("-", Read("a"), Const(1.0)), Binary("-", Read("a"), Const(1.0))),
         "=", None, 9)
@given(VALUES, st.sampled_from(["=", "+=", "max="]), st.sampled_from([None, "a"]),
       st.integers(0, 2**32 - 1))
def test_split_statements_compute_the_reference(value: Value, op: str, trigger: str | None,
                                                seed: int) -> None:
    steps = op_steps(_stmt(op, value), trigger)
    if isinstance(steps, str):
        return
    rng = np.random.default_rng(seed)
    arrays = {t: rng.integers(-8, 9, N).astype(np.float32) for t in TENSORS}
    trigger_value = np.float32(rng.integers(-8, 9))
    if trigger is not None:  # the arriving value is the same for every instance
        arrays[trigger] = np.full(N, trigger_value, np.float32)
    y0 = rng.integers(-8, 9, N).astype(np.float32)
    expected = _evaluate(value, arrays, lambda t: slice(None), np.float32) * np.ones(
        N, np.float32)
    if op == "+=":
        expected = (y0 + expected).astype(np.float32)
    if op == "max=":
        expected = np.maximum(y0, expected)
    got = _run(steps, y0, arrays, trigger_value)
    np.testing.assert_array_equal(got, expected)


def test_relu_of_a_sum_is_two_operations() -> None:
    value = Binary("max", Binary("+", Read("a"), Read("b")), Const(0.0))
    steps = op_steps(_stmt("=", value), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.srcs) for s in steps] == [("fadd", ("a", "b")), ("fmax", ("y", None))]


def test_a_residual_after_the_relu_is_a_third() -> None:
    value = Binary("+", Binary("max", Binary("+", Read("a"), Read("b")), Const(0.0)), Read("c"))
    steps = op_steps(_stmt("=", value), None)
    assert not isinstance(steps, str)
    assert [s.op for s in steps] == ["fadd", "fmax", "fadd"]


def test_two_compound_operands_take_the_target_and_a_temporary() -> None:
    """``y = max(a + b, c - d)``: the first operand in the target, the second in a
    temporary; accumulated, both would need a temporary of their own (scalar)."""
    value = Binary("max", Binary("+", Read("a"), Read("b")), Binary("-", Read("c"), Read("d")))
    steps = op_steps(_stmt("=", value), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fadd", "y", ("a", "b")), ("fsub", TEMP, ("c", "d")), ("fmax", "y", ("y", TEMP))]
    assert isinstance(op_steps(_stmt("+=", value), None), str)


def test_a_subtracted_product_is_the_product_then_a_reversed_difference() -> None:
    """``z = c - a * b`` (no constant to negate): ``z = a * b``, ``z = c - z``."""
    value = Binary("-", Read("c"), Binary("*", Read("a"), Read("b")))
    steps = op_steps(_stmt("=", value), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.srcs) for s in steps] == [("fmul", ("a", "b")), ("fsub", ("c", "y"))]


def test_a_product_plus_an_operand_copies_the_operand_first() -> None:
    """``a * b + c`` as ``y = c; y += a * b`` (one rounded addition: it commutes), so an
    update in place can take the copy; with a third term the program's order stays."""
    steps = op_steps(_stmt("=", Binary("+", Binary("*", Read("a"), Read("b")), Read("c"))),
                     None)
    assert not isinstance(steps, str)
    assert [(s.op, s.srcs) for s in steps] == [("copy", ("c",)), ("fmac", ("a", "b"))]
    three = Binary("+", Binary("+", Binary("*", Read("a"), Read("b")), Read("c")), Read("a"))
    steps = op_steps(_stmt("=", three), None)
    assert not isinstance(steps, str)
    assert [s.op for s in steps] == ["fmul", "fadd", "fadd"]


def test_an_accumulated_product_of_three_goes_through_a_temporary() -> None:
    """``y += a * b * c``: the product of two into a temporary, the third multiplied in
    as the accumulation (one multiply-add); ``max=`` of a sum takes the sum first."""
    value = Binary("*", Binary("*", Read("a"), Read("b")), Read("c"))
    steps = op_steps(_stmt("+=", value), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fmul", TEMP, ("a", "b")), ("fmac", "y", (TEMP, "c"))]
    steps = op_steps(_stmt("max=", Binary("+", Read("a"), Read("b"))), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fadd", TEMP, ("a", "b")), ("fmax", "y", ("y", TEMP))]


def test_without_temporaries_an_accumulated_chain_says_why_it_is_scalar() -> None:
    value = Binary("*", Binary("*", Read("a"), Read("b")), Const(0.5))
    with without_temporaries():
        reason = op_steps(_stmt("+=", value), None)
    assert isinstance(reason, str) and "temporary array" in reason
    assert not isinstance(op_steps(_stmt("+=", value), None), str)


def test_a_square_of_a_difference_is_its_difference_then_a_multiply_add() -> None:
    """``v += (c - m) * (c - m)`` (a variance): the difference into a temporary, then
    the temporary times itself accumulated; as ``=``, the target holds it."""
    diff = Binary("-", Read("c"), Read("d"))
    steps = op_steps(_stmt("+=", Binary("*", diff, diff)), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fsub", TEMP, ("c", "d")), ("fmac", "y", (TEMP, TEMP))]
    steps = op_steps(_stmt("=", Binary("*", diff, diff)), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fsub", "y", ("c", "d")), ("fmul", "y", ("y", "y"))]


def test_an_accumulated_subtracted_product_goes_through_a_temporary() -> None:
    """``y += a * b - c * d``: a multiply-add, then the second product apart and
    subtracted (no constant to negate it by)."""
    value = Binary("-", Binary("*", Read("a"), Read("b")), Binary("*", Read("c"), Read("d")))
    steps = op_steps(_stmt("+=", value), None)
    assert not isinstance(steps, str)
    assert [(s.op, s.dst, s.srcs) for s in steps] == [
        ("fmac", "y", ("a", "b")), ("fmul", TEMP, ("c", "d")), ("fsub", "y", ("y", TEMP))]
