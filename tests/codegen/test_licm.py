"""Loop-invariant arithmetic is computed once before its loop, with the same results and
fewer cycles; nothing a loop assigns moves out of it."""

from __future__ import annotations

import dataclasses

import numpy as np

import dtg
from dtg.codegen.licm import hoist_loop_invariants
from dtg.pe.parser import parse_module_text
from dtg.pe.printer import module as print_module
from dtg.pesim.sim import TensorInfo, simulate

TEXT = """
module nest
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4][8] offset [0, 8 * PE_X] store y
    { y[i, j] : 0 <= i <= 3 and 8 * PE_X <= j <= 8 * PE_X + 7 };
  int n = 0;
  task main {
    for (c0 = 8 * (PE_X % 2) + 2; c0 <= 8 * (PE_X % 2) + 5; c0++) {
      n = c0 % 3;
      for (c1 = 8 * PE_X - 8 * (PE_X % 2); c1 <= 8 * PE_X - 8 * (PE_X % 2) + 7; c1++) {
        a[c0 - 8 * (PE_X % 2) - 2][(c1 - 8 * PE_X + 8 * (PE_X % 2) + n) % 8] +=
          2.0 * a[0][c1 - 8 * PE_X + 8 * (PE_X % 2)] + 1.0;
      }
    }
  }
}
"""


def run(module: object) -> tuple[np.ndarray, int]:
    result = simulate(module, {}, {"y": TensorInfo((4, 16), "float32")})  # type: ignore[arg-type]
    return result.outputs["y"], sum(p.busy for p in result.pes.values())


def test_invariant_parts_move_before_their_loop() -> None:
    module, _ = parse_module_text(TEXT, "<test>")
    program = hoist_loop_invariants(module.programs[0])
    hoisted = dataclasses.replace(module, programs=(program,))
    text = print_module(hoisted)
    inner = text[text.index("for (c1"):].split("}")[0]
    assert "PE_X" not in inner  # the PE's offsets are read from ints
    assert "c1 + n + " in inner  # (n is assigned in the outer loop: it stays in there)
    (want, busy), (got, busy_hoisted) = run(module), run(hoisted)
    assert np.array_equal(got, want)
    assert busy_hoisted < busy
    again, _ = parse_module_text(text, "<printed>")
    assert print_module(again) == text  # what it writes is PE code like any other


def test_a_program_without_loops_is_left_as_it_is() -> None:
    module, _ = parse_module_text(TEXT.replace(
        "for (c0", "if (PE_X == 7) { } for (c0"), "<test>")
    program = module.programs[0]
    flat = dataclasses.replace(program, tasks=tuple(
        dataclasses.replace(t, body=t.body[:1]) for t in program.tasks))
    assert hoist_loop_invariants(flat) is flat


def test_grid_sums_scalar_loops_read_their_offsets_from_ints() -> None:
    """The column sums' local arrays start at ``8 * (PE_X % 2) ...`` (isl's box): the
    loop nest computes that once, not in each of its 128 iterations."""
    example = dtg.example("movement/grid_sum")
    assert example.program is not None
    c = dtg.compile(example.program, simd=False)
    text = dtg.module_text(c)
    nest = text[text.index("for (c1"):]
    assert "%" not in nest.split("}")[0]
    assert dtg.simulate(c).verified
