"""The example networks as ONNX models, built with ``onnx.helper`` (nothing downloaded).

    python examples/networks/models.py OUT_DIR [mlp|lenet|ff ...]

writes ``OUT_DIR/NAME.onnx`` for each (all three by default). Weights and biases are
small random integers (seeded), so that simulated outputs can be compared exactly with
``onnx.reference``. docs/networks.md takes each from ONNX to a simulated wafer.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-1, 2, size=shape).astype(np.float32)


def _model(name: str, nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, ...]],
           outputs: dict[str, tuple[int, ...]], weights: dict[str, np.ndarray]
           ) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in weights.items()])
    model = helper.make_model(graph, opset_imports=OPSET)
    onnx.checker.check_model(model)
    return model


def _dense(rng: np.random.Generator, sizes: list[int], weights: dict[str, np.ndarray],
           first: str, last: str, prefix: str = "fc") -> list[onnx.NodeProto]:
    """Gemm layers ``sizes[0] -> sizes[1] -> ...`` with a ReLU after each but the last."""
    nodes = []
    x = first
    for k, (n, m) in enumerate(itertools.pairwise(sizes), start=1):
        weights[f"W{prefix}{k}"], weights[f"b{prefix}{k}"] = _ints(rng, m, n), _ints(rng, m)
        out = last if k == len(sizes) - 1 else f"{prefix}{k}_out"
        nodes.append(helper.make_node("Gemm", [x, f"W{prefix}{k}", f"b{prefix}{k}"], [out],
                                      name=f"{prefix}{k}", transB=1))
        if k < len(sizes) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"{prefix}{k}_act"],
                                          name=f"relu{prefix}{k}"))
            x = f"{prefix}{k}_act"
    return nodes


def mlp(batch: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A 4-layer perceptron, 784 -> 512 -> 512 -> 10, for ``batch`` samples."""
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    nodes = _dense(rng, [784, 512, 512, 10], weights, "x", "y")
    return _model("mlp", nodes, {"x": (batch, 784)}, {"y": (batch, 10)}, weights)


def lenet(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """LeNet-5-like: conv 5x5 (6, padded) - ReLU - max-pool - conv 5x5 (16) - ReLU -
    max-pool - 400 -> 120 -> 84 -> 10, on 28 x 28 images."""
    rng = np.random.default_rng(seed)
    weights = {"Wc1": _ints(rng, 6, 1, 5, 5), "bc1": _ints(rng, 6),
               "Wc2": _ints(rng, 16, 6, 5, 5), "bc2": _ints(rng, 16),
               "shape": np.array([batch, 400], np.int64)}
    nodes = [
        helper.make_node("Conv", ["x", "Wc1", "bc1"], ["c1"], name="conv1", pads=[2, 2, 2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "Wc2", "bc2"], ["c2"], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "shape"], ["flat"], name="flatten")]
    nodes += _dense(rng, [400, 120, 84, 10], weights, "flat", "y")
    return _model("lenet", nodes, {"x": (batch, 1, 28, 28)}, {"y": (batch, 10)}, weights)


def ff(batch: int = 8, seed: int = 0) -> onnx.ModelProto:
    """A transformer's feed-forward block, 1024 -> 4096 -> ReLU -> 1024, for ``batch``
    tokens."""
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    nodes = _dense(rng, [1024, 4096, 1024], weights, "x", "y", prefix="ff")
    return _model("ff", nodes, {"x": (batch, 1024)}, {"y": (batch, 1024)}, weights)


MODELS = {"mlp": mlp, "lenet": lenet, "ff": ff}


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 1
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or list(MODELS):
        if name not in MODELS:
            print(f"unknown model {name!r}; choose from {', '.join(MODELS)}", file=sys.stderr)
            return 1
        path = out / f"{name}.onnx"
        onnx.save(MODELS[name](), path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
