"""Imported ONNX models compiled onto PEs and simulated on both engines: the outputs of
the simulated PE code equal ONNX's reference implementation's (the models' weights and
inputs are integers, so exactly)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from onnx_models import cnn, mlp

from dtg.lair.onnx_import import import_onnx
from dtg.pesim.run import run_program

# Mappings of the imported programs onto 4 x 4 PEs: the MLP's batch rows on two PEs of a
# column, the CNN's layers on one PE (its batch is one image), everything resident.
MLP_MAP = """
rectangle { PE[4, 4] }
placement { fc1_acc[i0, i1, k0] -> PE[i0, 0]; fc1[i0, i1] -> PE[i0, 0];
            relu1[i0, i1] -> PE[i0, 0]; fc2_acc[i0, i1, k0] -> PE[i0, 0];
            fc2[i0, i1] -> PE[i0, 0] }
input x resident
input W1 resident
input t_b1 resident
input W2 resident
input t_b2 resident
output y resident
"""
CNN_MAP = """
rectangle { PE[2, 2] }
placement { conv1_pad[i0, i1, i2, i3] -> PE[0, 0];
            conv1_acc[n0, m0, o0, o1, c0, k0, k1] -> PE[0, 0]; conv1[i0, i1, i2, i3] -> PE[0, 0];
            relu1[i0, i1, i2, i3] -> PE[0, 0];
            pool1[n0, c0, o0, o1, k0, k1] -> PE[0, 0]; flat[i0, i1, i2] -> PE[0, 0];
            fc_acc[i0, i1, k0] -> PE[i1 // 5, 1]; fc[i0, i1] -> PE[i1 // 5, 1] }
input x resident
input bn__weights resident
input bn__bias resident
input W2 resident
input t_b2 resident
output y resident
"""


@pytest.mark.parametrize(("make", "mapping"), [(mlp, MLP_MAP), (cnn, CNN_MAP)],
                         ids=["mlp", "cnn"])
@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_an_imported_model_runs_on_pes_as_onnx_computes_it(
        tmp_path: Path, make, mapping: str, engine: str) -> None:  # type: ignore[no-untyped-def]
    m, feeds = make(np.random.default_rng(21))
    imported = import_onnx(m, name="model")
    lair = tmp_path / "model.lair"
    lair.write_text(imported.lair)
    lair.with_suffix(".map").write_text(mapping)
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **imported.inputs(feeds))
    outcome = run_program(lair, inputs_path=inputs, engine=engine)
    assert outcome.comparison.verified and outcome.comparison.exact
    want = ReferenceEvaluator(m).run(None, feeds)
    for name, expected in zip(imported.model_outputs, want, strict=True):
        np.testing.assert_array_equal(outcome.result.outputs[name], expected)
