"""Per-group invariants are computed once per group, with the same results."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dtg.codegen.driver import compile_file
from dtg.codegen.hoist import hoist_invariants
from dtg.pe.parser import parse_module_text
from dtg.pe.printer import module as print_module
from dtg.pe.printer import task as print_task
from dtg.pesim.sim import TensorInfo, simulate

TEXT = """
module hoisted
mesh PE[2, 1]
input A dense color 0 { A[i = 0:3, j = 0:5] -> [PE[j//3, -1] -> index[i, j mod 3]] }
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4][6] store B { B[i, j] : 0 <= i <= 3 and 3 * PE_X <= j <= 3 * PE_X + 2 };
  int g = 0;
  int n = 0;
  route 0: N -> RAMP;
  task got data color 0 {
    if ((g % 4) * 2 + PE_X * 0 >= 0 && g // 1 < 4) {
      a[(g * 3 + 2 * PE_X) // 3 - 2 * PE_X // 3][3 * PE_X + n] = value;
    }
    n += 1;
  }
  task next control color 0 {
    g += 1;
    n = 0;
  }
}
"""


def test_invariant_parts_move_to_main_and_the_control_task() -> None:
    module, _ = parse_module_text(TEXT, "<test>")
    program = module.programs[0]
    hoisted = hoist_invariants(program)
    text = print_module(dataclasses.replace(module, programs=(hoisted,)))
    data = next(t for t in hoisted.tasks if t.kind == "data")
    control = next(t for t in hoisted.tasks if t.kind == "control")
    main = next(t for t in hoisted.tasks if t.kind == "main")
    new = {v.name for v in hoisted.ints} - {v.name for v in program.ints}
    assert new and "//" not in "\n".join(print_task(data))
    assigned = {s.name for s in control.body if hasattr(s, "name")}
    in_main = {s.name for s in main.body if hasattr(s, "name")}
    # per group: the new ints but the parts that depend on the PE only (p...), which
    # main computes once
    per_pe = {n for n in new if n.startswith("p")}
    assert per_pe and new - per_pe <= assigned and not per_pe & assigned
    assert new <= in_main
    parse_module_text(text, "<hoisted>")  # still valid PE code

    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    results = []
    for p in (program, hoisted):
        m = dataclasses.replace(module, programs=(p,))
        results.append(simulate(m, {"A": a}, {"B": TensorInfo((4, 6), "float32")}))
    assert np.array_equal(results[0].outputs["B"], a)
    assert np.array_equal(results[1].outputs["B"], a)
    busy = [sum(pe.busy for pe in r.pes.values()) for r in results]
    assert busy[1] < busy[0]


def test_parts_computed_more_than_once_per_group_are_computed_once() -> None:
    from dtg.codegen.hoist import shared_parts
    from dtg.pe.ir import IBin, IConst, IVar, SetInt
    from dtg.pesim.expr import evaluate

    g = IVar("g")
    mod = IBin("%", g, IConst(8))
    sets = [SetInt("a", "=", IBin("+", IBin("//", mod, IConst(4)), IConst(1))),
            SetInt("b", "=", IBin("*", IConst(2), IBin("//", mod, IConst(4)))),
            SetInt("c", "=", IBin("-", IBin("%", mod, IConst(4)), mod))]
    temps, rewritten = shared_parts(sets, "s_")
    assert len(temps) == 2  # g % 8, then (g % 8) // 4
    for value in range(-9, 30):
        env: dict[str, int] = {"g": value}
        for t in temps:
            env[t.name] = evaluate(t.value, env)
        for old, new in zip(sets, rewritten, strict=True):
            assert evaluate(new.value, env) == evaluate(old.value, {"g": value})


def test_dense_batches_of_many_groups_read_pe_parts_from_main(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """conv2d_stream's image rows (12 groups, a batch each, batches of whole groups left
    out): ``5 * PE_Y`` and the like are computed once in main; the control task computes
    nothing new per group."""
    from conftest import ROOT

    from dtg.codegen import groupbatch
    from dtg.pe.printer import module as print_module
    from dtg.pesim.run import run_program

    monkeypatch.setattr(groupbatch, "layouts", lambda *_, **__: "left out by the test")
    path = ROOT / "benchmarks" / "kernels" / "conv2d_stream.lair"
    c = compile_file(path)
    assert c.module is not None
    compute = next(p for p in c.module.programs if p.name == "compute")
    on_x = next(t for t in compute.tasks if t.name == "on_X")
    end_x = next(t for t in compute.tasks if t.name == "end_X")
    main = next(t for t in compute.tasks if t.kind == "main")
    text = print_module(c.module)
    assert "h0_" in text and on_x.batch is not None
    assert all("h0_" not in str(s) for s in end_x.body)
    assert any("h0_" in str(s) for s in main.body)
    outcome = run_program(path, seed=5)
    assert outcome.comparison.verified and outcome.comparison.exact


def test_dense_batches_of_one_group_are_left_alone() -> None:
    """One batch per PE (residual_mv's x): main would pay more than the batch saves."""
    from conftest import ROOT

    c = compile_file(ROOT / "benchmarks" / "kernels" / "residual_mv.lair")
    assert c.module is not None
    compute = next(p for p in c.module.programs if p.name == "compute")
    assert not any(v.name.startswith("h") and v.name[1].isdigit() for v in compute.ints)
