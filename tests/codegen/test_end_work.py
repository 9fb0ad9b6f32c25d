"""The work after a PE's last end mark runs in the task that counts it (codegen/emit.py,
``FUSE_END_WORK``): a stream's only batch closed by its end mark, the last of several
streams. One dispatch fewer, the same results: checked on both engines, with sparse
inputs that leave whole groups empty, against the same code with the end work in tasks of
its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from dtg.codegen import emit
from dtg.codegen.driver import compile_file
from dtg.pesim.run import make_inputs, run_module

KERNELS = ROOT / "benchmarks" / "kernels"


def _run(path: Path, engine: str, inputs: dict[str, np.ndarray] | None = None
         ) -> tuple[set[str], int]:
    c = compile_file(path)
    assert c.module is not None
    (program,) = [p for p in c.module.programs if p.name == "compute"]
    data = inputs if inputs is not None else make_inputs(c.program)
    run = run_module(c.module, c.program, data, engine=engine)
    assert run.comparison.verified and run.comparison.exact
    return {t.name for t in program.tasks}, run.result.cycles


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize(("kernel", "fused", "unfused"), [
    # one dense stream, one batch per PE: no control task
    ("gemv_t", {"main", "on_x"}, {"main", "on_x", "end_x"}),
    # a sparse stream whose indices fit one window
    ("gemv_sparse_entry", {"main", "on_x"}, {"main", "on_x", "end_x"}),
    # two streams: the last to end finishes, no local task
    ("ew_add_streams", {"main", "on_x", "on_y"},
     {"main", "on_x", "end_x", "on_y", "end_y", "finish"}),
])
def test_the_end_work_runs_in_the_counting_task(kernel: str, fused: set[str],
                                                unfused: set[str], engine: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = KERNELS / f"{kernel}.lair"
    tasks, cycles = _run(path, engine)
    assert tasks == fused
    monkeypatch.setattr(emit, "FUSE_END_WORK", False)
    tasks_apart, cycles_apart = _run(path, engine)
    assert tasks_apart == unfused
    assert cycles < cycles_apart


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_sparse_stream_with_empty_groups_ends_right(engine: str) -> None:
    """A PE whose every element of a sparse stream is zero gets an end mark alone: it
    closes an empty batch, whose task still finishes (the sums there are the others')."""
    path = KERNELS / "gemv_sparse_entry.lair"
    c = compile_file(path)
    inputs = make_inputs(c.program)
    sparse = {f.tensor for f in c.tasks.inputs if f.kind == "sparse"} if c.tasks else set()
    assert sparse
    for name in sparse:
        inputs[name] = inputs[name].copy()
        inputs[name][: inputs[name].shape[0] // 2] = 0
    _run(path, engine, inputs)


TWO = """
# x reaches every column, y only the first two: those count two end marks, the others one
lair sc<T=float16>():
  T x[32] -> T p[32]
{
  all (i) in (32) p[i] = x[i] * 2.0
}
lair fin<T=float16>():
  T p[32] -> T r[32]
{
  all (i) in (32) r[i] = p[i] + 1.0
}
lair sy<T=float16>():
  T y[16], T p[32] -> T s[16]
{
  all (i) in (16) s[i] = y[i] * p[i]
}
"""

TWO_MAP = """
rectangle { PE[4, 1] }
placement { sc[i] -> PE[i//8, 0]; fin[i] -> PE[i//8, 0]; sy[i] -> PE[i//8, 0] }
input  x dense { x[i = 0:31] -> [PE[i//8, -1] -> index[i mod 8]] }
input  y dense { y[i = 0:15] -> [PE[i//8, 1] -> index[i mod 8]] }
output r resident
output s resident
"""


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_where_one_stream_alone_reaches_a_pe_its_mark_ends_the_wait(tmp_path: Path,
                                                                     engine: str) -> None:
    from dtg.pe.printer import task as task_text

    (tmp_path / "two.lair").write_text(TWO)
    (tmp_path / "two.map").write_text(TWO_MAP)
    c = compile_file(tmp_path / "two.lair")
    assert c.module is not None
    (program,) = [p for p in c.module.programs if p.name == "compute"]
    on_x = "\n".join(task_text(next(t for t in program.tasks if t.name == "on_x")))
    on_y = "\n".join(task_text(next(t for t in program.tasks if t.name == "on_y")))
    # columns 2 and 3 finish at x's mark, the others count it; y reaches only those, whose
    # test of the column is settled away there
    alone, counted = on_x.split("} else {")
    assert "if static (PE_X >= 2) {" in alone and "pending" not in alone
    assert "pending += -1;" in counted and "run simd_sy_local" in counted
    assert "static" not in on_y and "run simd_sy_local" in on_y
    for seed in (0, 3):
        run = run_module(c.module, c.program, make_inputs(c.program, seed=seed), engine=engine)
        assert run.comparison.verified and run.comparison.exact
