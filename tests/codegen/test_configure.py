"""Each SIMD variant is set up only where the code can run it (paper §5.4)."""

from __future__ import annotations

import islpy as isl

from dtg.codegen.configure import configurations_per_pe, guard_configurations, program_pes
from dtg.codegen.scancheck import cond_set
from dtg.pe.ir import PeProgram
from dtg.pe.parser import parse_module

TEXT = """
module m
mesh PE[4, 3]
program p origin PE[0, 0] pes { PE[x, y] : 0 <= x <= 3 and 0 <= y <= 2 }
{
  array float32 a[8];
  int n = 0;
  simd fill [8]: a[i0] = scalar;
  simd left [4]: a[i0] = scalar;
  simd sized [1] | [2] | [3]: a[i0] = a[i0] + a[i0];
  simd counted [2] | [4]: a[i0] = a[i0] + a[i0];
  simd inner [8]: a[i0] = scalar;
  simd never [8]: a[i0] = scalar;
  task main {
    run fill {a: 0} (0.0);
    if (PE_X == 0 && PE_Y >= 1) {
      run left {a: 0} (1.0);
    } else {
      if (n > 2) {
        run sized variant(PE_Y) {a: 0};
      }
    }
    run counted variant(n % 2) {a: 0};
    for (c0 = PE_X; c0 <= 1; c0++) {
      run inner {a: 0} (2.0);
    }
  }
}
"""


def _program() -> PeProgram:
    return guard_configurations(parse_module(TEXT).programs[0])


def _where(program: PeProgram, config: str, variant: int) -> isl.Set:
    pes = program_pes(program)
    c = next(c for c in program.configs if c.name == config)
    g = c.guard(variant)
    return pes if g is None else cond_set(g, pes.get_space()).intersect(pes)


def _pes(text: str) -> isl.Set:
    return isl.Set(text)


def test_guards_follow_conditions_on_the_pe_coordinates() -> None:
    p = _program()
    assert _where(p, "fill", 0).is_equal(program_pes(p))
    assert _where(p, "left", 0).is_equal(_pes("[PE_X, PE_Y] -> { : PE_X = 0 and 1 <= PE_Y <= 2 }"))
    # the else branch, whatever n is; variant(PE_Y) picks one size per row
    for k in range(3):
        expected = _pes(f"[PE_X, PE_Y] -> {{ : PE_Y = {k} and 0 <= PE_X <= 3 "
                        f"and not (PE_X = 0 and PE_Y >= 1) }}")
        assert _where(p, "sized", k).is_equal(expected), k
    # a variant chosen by a program variable: every PE may need either
    assert _where(p, "counted", 0).is_equal(program_pes(p))
    assert _where(p, "counted", 1).is_equal(program_pes(p))
    # a loop whose bounds depend on the PE only runs where it is not empty
    assert _where(p, "inner", 0).is_equal(_pes("[PE_X, PE_Y] -> { : 0 <= PE_X <= 1 and "
                                                "0 <= PE_Y <= 2 }"))
    assert _where(p, "never", 0).is_empty()


def test_configurations_per_pe_is_the_largest_count_on_any_pe() -> None:
    p = _program()
    # PE[1, 0]: fill, sized[0], counted (2), inner
    assert configurations_per_pe(p) == 5
    unguarded = parse_module(TEXT).programs[0]
    assert configurations_per_pe(unguarded) == 1 + 1 + 3 + 2 + 1 + 1
