"""Whole networks on the wafer: an ONNX model imported, its layers placed on regions,
linked into one module, simulated on the fast engine and verified against the LAIR
interpreter and onnx.reference (exactly: integer weights and inputs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import cnn, mlp

from dtg.cli import main as dtg_main


@pytest.mark.parametrize("build, wafer", [(mlp, "PE[16, 16]"), (cnn, "PE[24, 24]")],
                         ids=["mlp", "cnn"])
def test_an_onnx_model_imports_places_runs_and_matches_onnx(
        tmp_path: Path, cli, build, wafer: str) -> None:  # type: ignore[no-untyped-def]
    model, _ = build(np.random.default_rng(3))
    onnx.save(model, tmp_path / "model.onnx")
    assert cli(dtg_main, "import", tmp_path / "model.onnx", "-o", tmp_path).status == 0
    placed = cli(dtg_main, "place", tmp_path / "model.lair", "--wafer", wafer)
    assert placed.status == 0, placed.err
    assert (tmp_path / "model.net").exists() and (tmp_path / "model.map").exists()
    ran = cli(dtg_main, "run", tmp_path / "model.net", "--onnx", tmp_path / "model.onnx",
              "--report", tmp_path / "report.json", "--heatmap", tmp_path / "wafer.png",
              "--seed", "4")
    assert ran.status == 0, ran.err
    assert "outputs match onnx.reference: yes, exactly" in ran.out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verified"] and report["onnx_verified"]
    layers = [row["layer"] for row in report["layers"]]
    assert report["slowest_layer"] in layers and len(layers) >= 2
    assert all(row["busy"] >= row["bound"] > 0 for row in report["layers"])
    assert report["samples"]["latency"] > 0
    said = " ".join(ran.out.split())
    count = report["samples"]["samples"]
    assert (f"{count} samples: the first one's outputs complete" if count > 1 else
            "1 sample: its outputs complete") in said
    assert report["run"]["engine"] == "fast"
    assert (tmp_path / "wafer.png").stat().st_size > 0


def _import_mlp(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """``mlp.onnx`` (a small perceptron) and its import, ``mlp.lair`` and ``mlp.npz``."""
    model, _ = mlp(np.random.default_rng(5))
    onnx.save(model, tmp_path / "mlp.onnx")
    assert cli(dtg_main, "import", tmp_path / "mlp.onnx", "-o", tmp_path).status == 0


def test_a_plan_written_by_hand_links_the_same_network(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _import_mlp(tmp_path, cli)
    plan = tmp_path / "mlp.net"
    plan.write_text("# layers with a gap of free PEs between them\n"
                    "wafer PE[12, 12]\nstream x\n"
                    "layer first: fc1, relu1 at PE[0:8, 0:4] in west out south\n"
                    "layer second: fc2 at PE[0:8, 6:8] in north out east\n")
    placed = cli(dtg_main, "place", tmp_path / "mlp.lair", "--plan", plan)
    assert placed.status == 0, placed.err
    ran = cli(dtg_main, "run", plan, "--onnx", tmp_path / "mlp.onnx")
    assert ran.status == 0, ran.err
    assert "outputs match the LAIR interpreter: yes" in ran.out


def test_bad_plans_and_missing_files_are_errors_with_a_place(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _import_mlp(tmp_path, cli)
    plan = tmp_path / "bad.net"
    plan.write_text("wafer PE[8, 8]\nstream x\n"
                    "layer first: fc1, relu1 at PE[0:8, 0:4] in west out south\n"
                    "layer second: fc2 at PE[0:8, 2:6] in north out east\n")
    bad = cli(dtg_main, "place", tmp_path / "mlp.lair", "--plan", plan, "-o", tmp_path / "o")
    assert bad.status == 1
    assert f"{plan}:4:7: error: layer 'second' at PE[0:8, 2:6] overlaps layer 'first'" in bad.err
    assert not (tmp_path / "o" / "mlp.map").exists()
    missing = cli(dtg_main, "run", plan)
    assert missing.status == 1 and "bad.lair (the program) does not exist" in missing.err
    no_wafer = cli(dtg_main, "place", tmp_path / "mlp.lair")
    assert no_wafer.status == 1 and "give the wafer" in no_wafer.err


def test_the_python_api_places_links_and_runs_a_network() -> None:
    """dtg.place / dtg.link as docs/api.md shows them; the outputs equal onnx.reference's
    and each output element's arrival cycle is recorded."""
    from onnx.reference import ReferenceEvaluator

    import dtg

    model, feeds = mlp(np.random.default_rng(8))
    imported = dtg.import_onnx(model)
    plan = dtg.place(imported.lair, (12, 12), streams=imported.model_inputs)
    assert isinstance(plan, dtg.NetworkPlan) and len(plan.layers) == 2
    c = dtg.compile(imported.lair, dtg.link(imported.lair, plan))
    r = dtg.simulate(c, inputs=imported.inputs(feeds), engine="fast")
    assert r.verified and r.exact
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    assert np.array_equal(r.outputs[imported.names["y"]], want)
    arrived = r.outcome.result.output_cycles[imported.names["y"]]
    assert arrived.shape == want.shape
    assert arrived.min() > 0 and arrived.max() <= r.outcome.result.end


@pytest.fixture
def placed(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    """An MLP imported and placed in ``tmp_path``: mlp.lair, .npz, .net, .map, .onnx."""
    _import_mlp(tmp_path, cli)
    assert cli(dtg_main, "place", tmp_path / "mlp.lair", "--wafer", "PE[12, 12]").status == 0
    return tmp_path


@pytest.mark.parametrize("option, target, what", [
    ("--heatmap", "mlp.lair", "the program"), ("--report", "mlp.net", "the plan"),
    ("--report", "mlp.map", "the mapping"), ("--heatmap", "mlp.npz", "the weights"),
    ("--report", "mlp.onnx", "the model")])
def test_dtg_run_never_writes_over_what_it_reads(placed: Path, cli, option: str, target: str,  # type: ignore[no-untyped-def]
                                                 what: str) -> None:
    before = (placed / target).read_bytes()
    ran = cli(dtg_main, "run", placed / "mlp.net", "--onnx", placed / "mlp.onnx", option,
              placed / target)
    assert ran.status == 1 and f"it is {what}" in ran.err
    assert (placed / target).read_bytes() == before


def test_dtg_run_refuses_a_mapping_linked_from_another_plan(placed: Path, cli) -> None:  # type: ignore[no-untyped-def]
    plan = placed / "mlp.net"
    plan.write_text(plan.read_text().replace("at PE[", "at PE[", 1).replace(
        "wafer PE[12, 12]", "wafer PE[13, 12]"))  # (the same layout: still the same mapping)
    assert cli(dtg_main, "run", plan).status == 0
    other = placed / "other.net"
    other.write_text("wafer PE[12, 12]\nstream x\n"
                     "layer first: fc1, relu1 at PE[0:8, 0:4] in west out south\n"
                     "layer second: fc2 at PE[0:8, 6:8] in north out east\n")
    stale = cli(dtg_main, "run", other, "--program", placed / "mlp.lair", "-m",
                placed / "mlp.map")
    assert stale.status == 1 and "is not the mapping of" in stale.err


def test_dtg_run_says_what_is_missing_or_mismatched(placed: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other, _ = cnn(np.random.default_rng(1))
    onnx.save(other, tmp_path / "cnn.onnx")
    wrong = cli(dtg_main, "run", placed / "mlp.net", "--onnx", tmp_path / "cnn.onnx")
    assert wrong.status == 1 and "is not this network's" in wrong.err
    np.savez(tmp_path / "w.npz", W1=np.zeros((16, 8), np.float32))
    weights = cli(dtg_main, "run", placed / "mlp.net", "--inputs", tmp_path / "w.npz")
    assert weights.status == 1 and "W1 is not streamed in" in weights.err
    (placed / "mlp.npz").rename(tmp_path / "away.npz")
    no_weights = cli(dtg_main, "run", placed / "mlp.net")
    assert no_weights.status == 1 and "mlp.npz (the weights" in no_weights.err


def test_dtg_place_writes_both_files_or_neither(placed: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "elsewhere"
    (out / "mlp.map").mkdir(parents=True)
    failed = cli(dtg_main, "place", placed / "mlp.lair", "--wafer", "PE[12, 12]", "-o", out)
    assert failed.status == 1 and "is a directory" in failed.err
    assert not (out / "mlp.net").exists()


def test_an_input_only_a_later_layer_reads_is_resident_or_refused_in_a_plan(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from onnx import TensorProto, helper, numpy_helper

    w = np.ones((4, 8), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", "V"], ["g"], name="mm2"),
             helper.make_node("Add", ["g", "z"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "late", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 4)),
                        helper.make_tensor_value_info("z", TensorProto.FLOAT, (2, 3))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 3))],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.ones((8, 3),
                                                                          np.float32), "V")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "late.onnx")
    assert cli(dtg_main, "import", tmp_path / "late.onnx", "-o", tmp_path).status == 0
    assert cli(dtg_main, "place", tmp_path / "late.lair", "--wafer", "PE[16, 16]").status == 0
    assert "stream x\n" in (tmp_path / "late.net").read_text()  # (z resident)
    ran = cli(dtg_main, "run", tmp_path / "late.net", "--onnx", tmp_path / "late.onnx")
    assert ran.status == 0, ran.err
    plan = tmp_path / "late.net"
    plan.write_text(plan.read_text().replace("stream x", "stream x, z"))
    refused = cli(dtg_main, "place", tmp_path / "late.lair", "--plan", plan)
    assert refused.status == 1
    assert f"{plan}:" in refused.err and "'z' is streamed in, but the first layer" in refused.err


def test_a_padded_max_pool_on_regions_reads_minus_infinity_at_its_border(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The padded copy's border is never written (it is -inf); the PEs that read it hold
    the copy's local array, which starts at -inf, though they write none of it."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 2, 4, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 2, 3, 3))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "pool.onnx")
    assert cli(dtg_main, "import", tmp_path / "pool.onnx", "-o", tmp_path).status == 0
    assert cli(dtg_main, "place", tmp_path / "pool.lair", "--wafer", "PE[16, 16]",
               "--stream", "x").status == 0
    ran = cli(dtg_main, "run", tmp_path / "pool.net", "--onnx", tmp_path / "pool.onnx")
    assert ran.status == 0, ran.err
    assert "outputs match onnx.reference: yes, exactly" in ran.out
