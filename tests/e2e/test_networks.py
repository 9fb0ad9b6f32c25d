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
    assert report["run"]["engine"] == "fast"
    assert (tmp_path / "wafer.png").stat().st_size > 0


def test_a_plan_written_by_hand_links_the_same_network(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    model, _ = mlp(np.random.default_rng(5))
    onnx.save(model, tmp_path / "mlp.onnx")
    assert cli(dtg_main, "import", tmp_path / "mlp.onnx", "-o", tmp_path).status == 0
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
    model, _ = mlp(np.random.default_rng(5))
    onnx.save(model, tmp_path / "mlp.onnx")
    assert cli(dtg_main, "import", tmp_path / "mlp.onnx", "-o", tmp_path).status == 0
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
