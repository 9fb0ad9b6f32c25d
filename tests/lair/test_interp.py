"""The reference interpreter against direct numpy computations (exact on integer data)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.lair.frontend import load_program, program_from_text
from dtg.lair.interp import InterpreterInputError, random_inputs, run


def load(example: str, name: str | None = None):
    return load_program(EXAMPLES / example / f"{name or example}.lair").graph


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gemv_and_ff(seed: int) -> None:
    for graph in (load("gemv"), load("fc", "ff")):
        inputs = random_inputs(graph, seed)
        out = run(graph, inputs)
        W, x = inputs["W"].astype(np.float64), inputs["x"].astype(np.float64)
        np.testing.assert_array_equal(out["y"], (W @ x).astype(np.float16))
        assert out["y"].dtype == np.float16


def test_training_step() -> None:
    graph = load("fc", "train")
    inputs = random_inputs(graph, 7)
    out = run(graph, inputs)
    W, x, dy = (inputs[k].astype(np.float64) for k in ("W", "x", "dy"))
    dW = np.einsum("i,j->ij", dy, x)
    np.testing.assert_array_equal(out["y"], W @ x)
    np.testing.assert_array_equal(out["dW"], dW)
    np.testing.assert_array_equal(out["dx"], W.T @ dy)
    np.testing.assert_array_equal(out["Wn"], W - 0.125 * dW)


def test_conv1d() -> None:
    graph = load("conv1d")
    inputs = random_inputs(graph, 3)
    x, W = inputs["x"].astype(np.float64), inputs["W"].astype(np.float64)
    expected = np.zeros((2, 14))
    for k in range(2):
        for w in range(14):
            expected[k, w] = sum(x[w + rw] * W[k, rw] for rw in range(3))
    np.testing.assert_array_equal(run(graph, inputs)["y"], expected)


def test_conv1d_tiled() -> None:
    graph = load("conv1d_tiled")
    inputs = random_inputs(graph, 5)
    x, W = inputs["x"].astype(np.float64), inputs["W"].astype(np.float64)
    expected = np.stack([np.convolve(x, W[k][::-1], mode="valid") for k in range(4)])
    assert expected.shape == (4, 30)
    np.testing.assert_array_equal(run(graph, inputs)["y"], expected)


def test_conv2d() -> None:
    graph = load("conv2d")
    inputs = random_inputs(graph, 4)
    x, W = inputs["x"].astype(np.float64), inputs["W"].astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3))  # [w, h, rw, rh]
    expected = np.einsum("whab,kab->kwh", windows, W)
    np.testing.assert_array_equal(run(graph, inputs)["y"], expected)


def test_conv2d_degenerate() -> None:
    graph = load("conv2d_degenerate")
    inputs = random_inputs(graph, 5)
    x, f = inputs["x"].astype(np.float64), inputs["filter"].astype(np.float64)
    np.testing.assert_array_equal(run(graph, inputs)["y"], np.einsum("hwc,ck->hwk", x, f))


def test_max_reduction_elementwise_and_scalar() -> None:
    text = """
    lair pool(): float32 x[8], float32 s -> float32 m[4]
    { all (i, r) in (4, 2) m[i] max= x[2 * i + r] }
    lair scale(): float32 m[4], float32 s -> float32 z[4]
    { all (i) in (4) z[i] = max(s * m[i], -m[i]) - 1 }
    """
    graph = program_from_text(text).graph
    x = np.array([1, -5, 3, 2, -4, -2, 0, 7], dtype=np.float32)
    out = run(graph, {"x": x, "s": np.float32(2)})
    m = x.reshape(4, 2).max(axis=1)
    np.testing.assert_array_equal(out["m"], m)
    np.testing.assert_array_equal(out["z"], np.maximum(2 * m, -m) - 1)


def test_float16_rounding_follows_the_declared_precision() -> None:
    text = "lair n(): float16 x[2] -> float16 y[1] { all (i, j) in (1, 2) y[i] += x[j] }"
    graph = program_from_text(text).graph
    out = run(graph, {"x": np.array([2048, 1], dtype=np.float16)})
    assert out["y"][0] == np.float16(2048)  # 2049 is not a float16


def test_bad_inputs_are_reported() -> None:
    graph = load("gemv")
    good = random_inputs(graph)
    with pytest.raises(InterpreterInputError, match="missing input tensor x"):
        run(graph, {"W": good["W"]})
    shape = r"input 'x' has shape \(15,\), expected \(16,\)"
    with pytest.raises(InterpreterInputError, match=shape):
        run(graph, {**good, "x": np.zeros(15)})
    with pytest.raises(InterpreterInputError, match="unknown input tensor z"):
        run(graph, {**good, "z": np.zeros(1)})


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(2, 9), st.integers(0, 2**16))
def test_random_1d_convolutions(filters: int, width: int, n: int, seed: int) -> None:
    if width > n:
        width = n
    out_n = n - width + 1
    text = (f"lair C(): float32 x[{n}], float32 W[{filters}][{width}] -> "
            f"float32 y[{filters}][{out_n}]"
            f"{{ all (k, w, r) in ({filters}, {out_n}, {width}) y[k][w] += x[w + r] * W[k][r] }}")
    graph = program_from_text(text).graph
    inputs = random_inputs(graph, seed, low=-9, high=9)
    x, W = inputs["x"].astype(np.float64), inputs["W"].astype(np.float64)
    expected = np.array([[x[w:w + width] @ W[k] for w in range(out_n)] for k in range(filters)])
    np.testing.assert_array_equal(run(graph, inputs)["y"], expected)


def test_conv1d_filter_gradient() -> None:
    graph = load("conv1d_filter_grad")
    inputs = random_inputs(graph, 6)
    x, dy = inputs["x"].astype(np.float64), inputs["dy"].astype(np.float64)
    expected = np.array([[sum(x[w + r] * dy[k, w] for w in range(14)) for r in range(3)]
                         for k in range(2)])
    np.testing.assert_array_equal(run(graph, inputs)["dW"], expected)


def test_maxpool() -> None:
    graph = load("maxpool")
    inputs = random_inputs(graph, 8, low=-9, high=9)
    x = inputs["x"].astype(np.float64)
    expected = x.reshape(4, 4, 2, 4, 2).max(axis=(2, 4))
    np.testing.assert_array_equal(run(graph, inputs)["y"], expected)


@pytest.mark.parametrize("name", ["gemv_one_entry", "gemv_out_north", "gemv_two_sides",
                                  "gemv_uneven", "skewed_sum"])
def test_movement_gemvs(name: str) -> None:
    graph = load("movement", name)
    inputs = random_inputs(graph, 5)
    W, x = inputs["W"].astype(np.float64), inputs["x"].astype(np.float64)
    np.testing.assert_array_equal(run(graph, inputs)["y"], W @ x)


def test_movement_mlp_grid_sum_and_scores() -> None:
    graph = load("movement", "mlp")
    inputs = random_inputs(graph, 6)
    W1, x, W2 = (inputs[k].astype(np.float64) for k in ("W1", "x", "W2"))
    np.testing.assert_array_equal(run(graph, inputs)["y"], W2 @ np.maximum(W1 @ x, 0))
    graph = load("movement", "grid_sum")
    inputs = random_inputs(graph, 6)
    A, B = inputs["A"].astype(np.float64), inputs["B"].astype(np.float64)
    np.testing.assert_array_equal(run(graph, inputs)["s"], (A * B).sum(axis=0))
    graph = load("movement", "scores_east")
    inputs = random_inputs(graph, 6)
    Q, K = inputs["Q"].astype(np.float64), inputs["K"].astype(np.float64)
    np.testing.assert_array_equal(run(graph, inputs)["S"], Q @ K.T)


def test_every_example_is_covered_here() -> None:
    from conftest import EXAMPLE_PROGRAMS

    covered = {"gemv", "ff", "train", "conv1d", "conv1d_tiled", "conv2d", "conv2d_degenerate",
               "conv1d_filter_grad", "maxpool",  # PolyBench: tests/e2e/test_polybench.py
               "gemv_one_entry", "gemv_out_north", "gemv_two_sides", "gemv_uneven",
               "skewed_sum", "mlp", "grid_sum", "scores_east"}
    assert {p.stem for p in EXAMPLE_PROGRAMS if p.parent.name != "polybench"} <= covered
