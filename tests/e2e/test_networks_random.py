"""Random networks (Hypothesis) from ONNX to a verified run on placed regions: dense
stacks of any depth and width, and small CNNs (a convolution with strides, pads and
groups, ReLU, an optional max-pool, a dense layer). Each is imported, placed on a wafer,
linked, simulated on the fast engine and compared with onnx.reference (exactly: the
weights and inputs are small integers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from dtg.cli import main as dtg_main

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes: list[onnx.NodeProto], x: tuple[int, ...], y: tuple[int, ...],
           weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        [numpy_helper.from_array(a, n) for n, a in weights.items()])
    model = helper.make_model(graph, opset_imports=OPSET)
    onnx.checker.check_model(model)
    return model


@st.composite
def dense_stacks(draw: st.DrawFn) -> onnx.ModelProto:
    sizes = draw(st.lists(st.integers(1, 24), min_size=2, max_size=5))
    batch = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    weights: dict[str, np.ndarray] = {}
    nodes = []
    x = "x"
    for k in range(len(sizes) - 1):
        n, m = sizes[k], sizes[k + 1]
        weights[f"W{k}"] = rng.integers(-1, 2, (m, n)).astype(np.float32)
        weights[f"b{k}"] = rng.integers(-1, 2, m).astype(np.float32)
        out = "y" if k == len(sizes) - 2 else f"h{k}"
        nodes.append(helper.make_node("Gemm", [x, f"W{k}", f"b{k}"], [out], name=f"fc{k}",
                                      transB=1))
        if out != "y":
            nodes.append(helper.make_node("Relu", [out], [f"a{k}"], name=f"relu{k}"))
            x = f"a{k}"
    return _model(nodes, (batch, sizes[0]), (batch, sizes[-1]), weights)


@st.composite
def small_cnns(draw: st.DrawFn) -> onnx.ModelProto:
    groups = draw(st.sampled_from([1, 1, 2]))
    c = groups * draw(st.integers(1, 2))
    m = groups * draw(st.integers(1, 2))
    k, s, p = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 1))
    h = draw(st.integers(max(k, 4), 9))
    side = (h + 2 * p - k) // s + 1
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    weights = {"W": rng.integers(-1, 2, (m, c // groups, k, k)).astype(np.float32),
               "B": rng.integers(-1, 2, m).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", strides=[s, s],
                              pads=[p] * 4, group=groups),
             helper.make_node("Relu", ["c"], ["r"], name="relu")]
    last = "r"
    if side >= 4 and draw(st.booleans()):
        pad = draw(st.integers(0, 1))  # (a padded pool reads -inf where nothing is defined)
        nodes.append(helper.make_node("MaxPool", ["r"], ["q"], name="pool", kernel_shape=[2, 2],
                                      strides=[2, 2], pads=[pad] * 4))
        last, side = "q", (side + 2 * pad - 2) // 2 + 1
    flat = m * side * side
    out = draw(st.integers(1, 6))
    weights["shape"] = np.array([1, flat], np.int64)
    weights["W2"] = rng.integers(-1, 2, (out, flat)).astype(np.float32)
    weights["b2"] = rng.integers(-1, 2, out).astype(np.float32)
    nodes += [helper.make_node("Reshape", [last, "shape"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "W2", "b2"], ["y"], name="fc", transB=1)]
    return _model(nodes, (1, c, h, h), (1, out), weights)


def _flows(model: onnx.ModelProto, tmp: Path, cli, wafer: str) -> None:  # type: ignore[no-untyped-def]
    onnx.save(model, tmp / "m.onnx")
    assert cli(dtg_main, "import", tmp / "m.onnx", "-o", tmp).status == 0
    placed = cli(dtg_main, "place", tmp / "m.lair", "--wafer", wafer)
    assert placed.status == 0, placed.err
    ran = cli(dtg_main, "run", tmp / "m.net", "--onnx", tmp / "m.onnx")
    assert ran.status == 0, ran.err + ran.out
    assert "outputs match onnx.reference: yes, exactly" in ran.out


SETTINGS = settings(max_examples=6, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(model=dense_stacks(), wafer=st.sampled_from(["PE[8, 8]", "PE[16, 12]", "PE[24, 24]"]))
def test_random_dense_stacks_run_as_onnx_computes(model: onnx.ModelProto, wafer: str,
                                                  tmp_path_factory, cli) -> None:  # type: ignore[no-untyped-def]
    _flows(model, tmp_path_factory.mktemp("dense"), cli, wafer)


@SETTINGS
@given(model=small_cnns())
def test_random_small_cnns_run_as_onnx_computes(model: onnx.ModelProto, tmp_path_factory,
                                                cli) -> None:  # type: ignore[no-untyped-def]
    _flows(model, tmp_path_factory.mktemp("cnn"), cli, "PE[32, 32]")


@pytest.mark.long
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.one_of(dense_stacks(), small_cnns()))
def test_many_random_networks_run_as_onnx_computes(model: onnx.ModelProto, tmp_path_factory,
                                                   cli) -> None:  # type: ignore[no-untyped-def]
    _flows(model, tmp_path_factory.mktemp("net"), cli, "PE[32, 32]")
