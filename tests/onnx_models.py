"""Small ONNX models built with ``onnx.helper`` for the import tests (nothing downloaded):
integer-valued weights, so that every value is exact in float32."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-2, 3, size=shape).astype(np.float32)


def model(nodes: list[Any], inputs: dict[str, tuple[int, ...]], outputs: dict[str, Any],
          initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A model of ``nodes``; ``outputs`` maps names to shapes (or None: inferred)."""
    graph = helper.make_graph(
        nodes, "m",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    m = helper.make_model(graph, opset_imports=OPSET)
    if any(s is None for s in outputs.values()):  # (the outputs' shapes as ONNX infers them)
        g = onnx.shape_inference.infer_shapes(m).graph
        inferred = {vi.name: vi for vi in (*g.value_info, *g.output)}
        for out in m.graph.output:
            if outputs[out.name] is None:
                out.CopyFrom(inferred[out.name])
    onnx.checker.check_model(m)
    return m


def mlp(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Gemm, Relu, Gemm: 8 -> 16 -> 4, a batch of 2."""
    w = {"W1": ints(rng, 16, 8), "b1": ints(rng, 16), "W2": ints(rng, 4, 16), "b2": ints(rng, 4)}
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["hr"], name="relu1"),
             helper.make_node("Gemm", ["hr", "W2", "b2"], ["y"], name="fc2", transB=1)]
    return model(nodes, {"x": (2, 8)}, {"y": (2, 4)}, w), {"x": ints(rng, 2, 8)}


def cnn(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv (padded) with batch norm, Relu, MaxPool, Reshape, Gemm on a 6 x 6 image."""
    w = {"W1": ints(rng, 4, 1, 3, 3), "B1": ints(rng, 4), "sc": np.full(4, 2.0, np.float32),
         "bi": ints(rng, 4), "mu": ints(rng, 4), "va": np.full(4, 3.0, np.float32),
         "W2": ints(rng, 10, 36), "b2": ints(rng, 10), "shape": np.array([1, -1], np.int64)}
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "sc", "bi", "mu", "va"], ["bn"],
                         name="bn1", epsilon=1.0),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Reshape", ["p1", "shape"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "W2", "b2"], ["y"], name="fc", transB=1)]
    return model(nodes, {"x": (1, 1, 6, 6)}, {"y": (1, 10)}, w), {"x": ints(rng, 1, 1, 6, 6)}
