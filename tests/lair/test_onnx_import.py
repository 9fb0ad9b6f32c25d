"""``dtg import``: ONNX models as LAIR programs, checked against ONNX's own reference
implementation (``onnx.reference.ReferenceEvaluator``, an oracle written elsewhere)
on random inputs: exactly where every value is an integer, else within float32's
rounding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import OPSET, cnn, ints, mlp, model

from dtg.cli import main
from dtg.errors import InputError
from dtg.lair.frontend import program_from_text
from dtg.lair.interp import run
from dtg.lair.onnx_import import import_onnx


def check(m: onnx.ModelProto, feeds: dict[str, np.ndarray], *, exact: bool = True) -> str:
    """Import ``m``, run the LAIR program with the reference interpreter, compare every
    output with ONNX's reference; return the program's text."""
    imported = import_onnx(m)
    program = program_from_text(imported.lair)
    got = run(program.graph, imported.inputs(feeds))
    want = ReferenceEvaluator(m).run(None, feeds)
    assert len(want) == len(imported.model_outputs)
    for name, expected in zip(imported.model_outputs, want, strict=True):
        if exact:
            np.testing.assert_array_equal(got[name], expected)
        else:
            np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-5)
    return imported.lair


def test_an_mlp_computes_what_onnx_computes() -> None:
    rng = np.random.default_rng(1)
    text = check(*mlp(rng))
    # one LAIR node per ONNX node, named after it
    assert [line.split("(")[0] for line in text.splitlines() if line.startswith("lair ")] == [
        "lair fc1", "lair relu1", "lair fc2"]


def test_a_cnn_with_batch_norm_folded_computes_what_onnx_computes() -> None:
    rng = np.random.default_rng(2)
    m, feeds = cnn(rng)
    text = check(m, feeds)
    assert "lair bn1" not in text and "bn__weights" in text  # folded into conv1's weights
    imported = import_onnx(m)
    scale = 2.0 / np.sqrt(3.0 + 1.0)
    w1 = numpy_helper.to_array(m.graph.initializer[0])
    np.testing.assert_array_equal(imported.initializers["bn__weights"], w1 * np.float32(scale))


def run_op(rng: np.random.Generator, op: str, inputs: dict[str, tuple[int, ...]],
           initializers: dict[str, np.ndarray] | None = None, *, exact: bool = True,
           extra: tuple[str, ...] = (), **attrs: Any) -> str:
    node = helper.make_node(op, [*inputs, *(initializers or {})], ["y"], name="n", **attrs)
    if extra:
        node = helper.make_node(op, [*inputs, *extra], ["y"], name="n", **attrs)
    m = model([node], inputs, {"y": None}, initializers or {})
    return check(m, {n: ints(rng, *s) for n, s in inputs.items()}, exact=exact)


@pytest.mark.parametrize(("op", "a", "b"), [
    ("Add", (2, 3, 4), (4,)), ("Add", (2, 3, 4), (3, 1)), ("Sub", (2, 1, 4), (1, 3, 1)),
    ("Mul", (5,), (5,)), ("Mul", (2, 3), (1,)), ("Add", (), (3,))])
def test_elementwise_with_broadcasting(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    run_op(np.random.default_rng(3), op, {"a": a, "b": b})


@pytest.mark.parametrize(("a", "b"), [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                                      ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5))])
def test_matmul(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    run_op(np.random.default_rng(4), "MatMul", {"a": a, "b": b})


@pytest.mark.parametrize("attrs", [{}, {"transA": 1}, {"transB": 1, "alpha": 2.0},
                                   {"beta": 0.5}, {"alpha": -1.0, "beta": 2.0}])
@pytest.mark.parametrize("c", [None, (5,), (3, 5), (1, 5), (3, 1)])
def test_gemm(attrs: dict[str, Any], c: tuple[int, ...] | None) -> None:
    rng = np.random.default_rng(5)
    a = (4, 3) if attrs.get("transA") else (3, 4)
    w = (5, 4) if attrs.get("transB") else (4, 5)
    inits = {"W": ints(rng, *w)}
    if c is not None:
        inits["C"] = ints(rng, *c)
    run_op(rng, "Gemm", {"a": a}, inits, **attrs)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_convolutions_against_onnx(data: st.DataObject) -> None:
    """Random 1-D and 2-D convolutions: strides, dilations, pads, groups, bias."""
    rank = data.draw(st.sampled_from([1, 2]))
    groups = data.draw(st.sampled_from([1, 2]))
    cg, mg = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    dilations = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [data.draw(st.integers(0, 2)) for _ in range(2 * rank)]
    size = [data.draw(st.integers(d * (k - 1) + 1, 7)) for k, d in zip(kernel, dilations,
                                                                       strict=True)]
    bias = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    inits = {"W": ints(rng, groups * mg, cg, *kernel)}
    if bias:
        inits["B"] = ints(rng, groups * mg)
    run_op(rng, "Conv", {"x": (2, groups * cg, *size)}, inits, group=groups,
           kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "dilations": [2, 2]}])
def test_max_pool(attrs: dict[str, Any]) -> None:
    run_op(np.random.default_rng(6), "MaxPool", {"x": (1, 2, 7, 7)}, **attrs)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3], "strides": [2], "pads": [0, 2]}])
def test_average_pool(attrs: dict[str, Any]) -> None:
    shape = (1, 2, 6) if len(attrs["kernel_shape"]) == 1 else (1, 2, 6, 6)
    run_op(np.random.default_rng(7), "AveragePool", {"x": shape}, exact=False, **attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op: str) -> None:
    run_op(np.random.default_rng(8), op, {"x": (2, 3, 4, 4)}, exact=op.endswith("MaxPool"))


@pytest.mark.parametrize(("shape", "target"), [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (2, 12)), ((24,), (2, 3, 4)), ((2, 12), (2, 3, 4)),
    ((1, 6, 1), (2, 3)), ((2, 3, 4), (2, -1)), ((2, 3, 4), (0, 12))])
def test_reshape_merges_and_splits(shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    run_op(np.random.default_rng(9), "Reshape", {"x": shape},
           {"s": np.array(target, np.int64)})


def test_flatten_and_transpose() -> None:
    rng = np.random.default_rng(10)
    run_op(rng, "Flatten", {"x": (2, 3, 4)}, axis=2)
    run_op(rng, "Flatten", {"x": (2, 3, 4)}, axis=0)
    run_op(rng, "Transpose", {"x": (2, 3, 4)}, perm=[2, 0, 1])
    run_op(rng, "Transpose", {"x": (2, 3)})


def test_leaky_relu_pad_squeeze_and_unsqueeze() -> None:
    rng = np.random.default_rng(14)
    run_op(rng, "LeakyRelu", {"x": (2, 3)}, alpha=0.5)
    run_op(rng, "Pad", {"x": (2, 3)}, {"p": np.array([1, 0, 2, 1], np.int64)})
    run_op(rng, "Squeeze", {"x": (2, 1, 3, 1)}, {"a": np.array([1, 3], np.int64)})
    run_op(rng, "Unsqueeze", {"x": (2, 3)}, {"a": np.array([0, 2], np.int64)})


def test_batch_norm_alone_and_folded_into_a_gemm() -> None:
    rng = np.random.default_rng(11)
    stats = {"s": np.full(3, 4.0, np.float32), "o": ints(rng, 3), "mu": ints(rng, 3),
             "v": np.full(3, 3.0, np.float32)}
    text = run_op(rng, "BatchNormalization", {"x": (2, 3, 2, 2)}, stats, epsilon=1.0)
    assert "n_scale" in text
    nodes = [helper.make_node("Gemm", ["x", "W", "C"], ["g"], name="fc", transB=1, beta=2.0),
             helper.make_node("BatchNormalization", ["g", "s", "o", "mu", "v"], ["y"],
                              name="bn", epsilon=1.0)]
    m = model(nodes, {"x": (2, 4)}, {"y": (2, 3)},
              {"W": ints(rng, 3, 4), "C": ints(rng, 3), **stats})
    text = check(m, {"x": ints(rng, 2, 4)})
    assert "lair bn" not in text


def test_a_graph_output_read_by_another_node_is_copied_out() -> None:
    rng = np.random.default_rng(12)
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="r"),
             helper.make_node("Add", ["h", "h"], ["y"], name="twice")]
    m = model(nodes, {"x": (4,)}, {"h": (4,), "y": (4,)}, {})
    text = check(m, {"x": ints(rng, 4)})
    assert "h_out" in text


def test_two_layers_sharing_weights_fold_their_batch_norms_apart() -> None:
    rng = np.random.default_rng(15)
    stats = {f"{k}{j}": v for j in (1, 2) for k, v in (
        ("s", np.full(2, float(j), np.float32)), ("o", ints(rng, 2)), ("mu", ints(rng, 2)),
        ("v", np.full(2, 3.0, np.float32)))}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c1"], name="conv1"),
             helper.make_node("BatchNormalization", ["c1", "s1", "o1", "mu1", "v1"], ["b1"],
                              name="bn1", epsilon=1.0),
             helper.make_node("Conv", ["x", "W"], ["c2"], name="conv2"),
             helper.make_node("BatchNormalization", ["c2", "s2", "o2", "mu2", "v2"], ["b2"],
                              name="bn2", epsilon=1.0)]
    m = model(nodes, {"x": (1, 1, 4, 4)}, {"b1": None, "b2": None},
              {"W": ints(rng, 2, 1, 3, 3), **stats})
    check(m, {"x": ints(rng, 1, 1, 4, 4)})


def test_a_layer_whose_output_is_a_model_output_keeps_its_batch_norm() -> None:
    rng = np.random.default_rng(17)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "s", "o", "mu", "v"], ["y"],
                              name="bn", epsilon=1.0)]
    m = model(nodes, {"x": (1, 1, 4, 4)}, {"c": None, "y": None},
              {"W": ints(rng, 2, 1, 3, 3), "s": np.full(2, 2.0, np.float32),
               "o": ints(rng, 2), "mu": ints(rng, 2), "v": np.full(2, 3.0, np.float32)})
    assert "lair bn" in check(m, {"x": ints(rng, 1, 1, 4, 4)})


def test_names_that_collide_with_made_ones_stay_apart() -> None:
    """An ONNX value called like an output's copy (``y_out``), a node called like
    another's statement label (``conv_acc``), and a product of a tensor with itself."""
    rng = np.random.default_rng(16)
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r"),
             helper.make_node("Add", ["y", "y"], ["y_out"], name="conv_acc"),
             helper.make_node("Conv", ["x4", "W", "B"], ["c"], name="conv"),
             helper.make_node("MatMul", ["sq", "sq"], ["p"], name="square")]
    m = model(nodes, {"x": (4,), "x4": (1, 1, 3, 3), "sq": (3, 3)},
              {"y": None, "y_out": None, "c": None, "p": None},
              {"W": ints(rng, 2, 1, 2, 2), "B": ints(rng, 2)})
    check(m, {"x": ints(rng, 4), "x4": ints(rng, 1, 1, 3, 3), "sq": ints(rng, 3, 3)})


def test_a_window_starting_in_the_padding_is_refused() -> None:
    """ceil_mode with pads: ONNX infers a 4 x 4 output for a 5 x 5 input (k 2, s 2, pad
    1), whose last windows start in the padding; its reference computes 3 x 3."""
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)],
              {"x": (1, 1, 5, 5)}, {"y": None}, {})
    with pytest.raises(InputError, match=r"node 'pool' \(MaxPool\): its last window along "
                                         "spatial dimension 0 starts in the padding"):
        import_onnx(m)


def test_an_unsupported_operator_names_the_node_and_what_is_supported() -> None:
    m = model([helper.make_node("Softmax", ["x"], ["y"], name="probs")], {"x": (2, 3)},
              {"y": (2, 3)}, {})
    with pytest.raises(InputError, match=r"node 'probs' \(Softmax\): the operator Softmax is "
                                         r"not supported; supported: Add, AveragePool"):
        import_onnx(m)


def test_a_dynamic_shape_is_refused_with_the_dimension_named() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             ["batch", 4])])
    m = helper.make_model(graph, opset_imports=OPSET)
    with pytest.raises(InputError, match="input 'x': dimension 0 is 'batch', not a number; "
                                         "dynamic shapes are not supported"):
        import_onnx(m)


def test_a_reshape_without_affine_index_is_refused() -> None:
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"], name="mix")], {"x": (2, 3)},
              {"y": (3, 2)}, {"s": np.array([3, 2], np.int64)})
    with pytest.raises(InputError, match=r"node 'mix' \(Reshape\): reshaping \[2, 3\] to "
                                         r"\[3, 2\] mixes dimensions"):
        import_onnx(m)


def test_the_command_writes_the_program_and_weights(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(13)
    m, feeds = mlp(rng)
    path = tmp_path / "tiny mlp.onnx"
    onnx.save(m, str(path))
    result = cli(main, "import", path, "-o", tmp_path / "out")
    assert result.status == 0, result.err
    lair, npz = tmp_path / "out" / "tiny_mlp.lair", tmp_path / "out" / "tiny_mlp.npz"
    assert result.out.splitlines()[0] == f"wrote {lair}"
    weights = dict(np.load(npz))
    assert sorted(weights) == ["W1", "W2", "t_b1", "t_b2"]
    program = program_from_text(lair.read_text())
    got = run(program.graph, {**weights, "x": feeds["x"]})
    np.testing.assert_array_equal(got["y"], ReferenceEvaluator(m).run(None, feeds)[0])


def test_a_refused_model_writes_nothing(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    m = model([helper.make_node("Softmax", ["x"], ["y"], name="probs")], {"x": (2, 3)},
              {"y": (2, 3)}, {})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    result = cli(main, "import", path, "-o", tmp_path / "out")
    assert result.status == 1 and "Traceback" not in result.err
    assert "node 'probs' (Softmax)" in result.err
    assert not (tmp_path / "out").exists()
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    result = cli(main, "import", garbage, "-o", tmp_path / "out")
    assert result.status == 1 and "not an ONNX model" in result.err
    assert not (tmp_path / "out").exists()


def test_a_failed_second_write_leaves_neither_file(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import dtg.cli as dtg_cli

    real = dtg_cli.write_atomically

    def failing(path, content, what="the file"):  # type: ignore[no-untyped-def]
        if str(path).endswith(".npz"):
            raise InputError(f"cannot write {what} {path}: disk full")
        return real(path, content, what)

    monkeypatch.setattr(dtg_cli, "write_atomically", failing)
    m, _ = mlp(np.random.default_rng(18))
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    result = cli(main, "import", path, "-o", tmp_path / "out")
    assert result.status == 1 and "disk full" in result.err and "wrote" not in result.out
    assert not (tmp_path / "out").exists()
