"""Each SIMD variant is set up only where the code can run it (paper §5.4)."""

from __future__ import annotations

import islpy as isl

from dtg.codegen.configure import (
    configurations_per_pe,
    guard_configurations,
    program_pes,
    share_configurations,
)
from dtg.codegen.scancheck import cond_set
from dtg.pe.ir import IConst, If, PeProgram, Run
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


SHARED = """
module m
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float16 a[8];
  array float16 b[8];
  array float16 c[8];
  array float16 d[8];
  array float32 f[8];
  array float32 g[8];
  simd add_ab [4]: c[i0] = a[i0] + b[i0];
  simd add_dc [4]: a[i0] = d[i0] + c[i0];
  simd add_ff [4]: f[i0] = g[i0] + g[i0];
  simd add_32 [4]: f[i0] = g[i0] + f[i0];
  simd twice [4]: c[i0] = c[i0] + a[i0];
  simd other [4]: c[i0] = a[i0] + b[2*i0];
  task main {
    run add_ab {c: 0, a: 0, b: 4};
    if (PE_X == 1) {
      run add_dc {a: 4, d: 0, c: 2};
    }
    run add_ff {f: 0, g: 4};
    run add_32 {f: 0, g: 0};
    run twice {c: 1, a: 3};
    run other {c: 0, a: 0, b: 0};
  }
}
"""


def test_configurations_differing_only_in_their_arrays_are_one() -> None:
    """add_dc is add_ab on other arrays (bound per run, the bases following the
    operands); add_32 is not add_ff (two operands on one array there), twice and other
    differ in shape, and float32 operands are not float16 ones."""
    program = share_configurations(parse_module(SHARED).programs[0])
    assert [c.name for c in program.configs] == ["add_ab", "add_ff", "add_32", "twice",
                                                 "other"]
    runs = [s for s in program.tasks[0].body if isinstance(s, Run)]
    inner = program.tasks[0].body[1]
    assert isinstance(inner, If)
    (bound,) = inner.then
    assert bound == Run("add_ab", (("c", IConst(4)), ("a", IConst(0)), ("b", IConst(2))),
                        arrays=(("c", "a"), ("a", "d"), ("b", "c")))
    assert runs[0] == Run("add_ab", (("c", IConst(0)), ("a", IConst(0)), ("b", IConst(4))))
    guarded = guard_configurations(program)
    assert configurations_per_pe(guarded) == 5


def test_configurations_are_shared_only_where_the_budget_binds() -> None:
    """mlp3 needs more than 8 configurations on a PE: its exchanged vectors' copies and
    two layers' multiply-adds share theirs, bound per run, and it computes the program.
    gemv_8x8 fits: nothing is bound (a bound run costs a scalar operation)."""
    from conftest import ROOT

    from dtg.codegen.driver import compile_file
    from dtg.pesim.run import run_program

    kernels = ROOT / "benchmarks" / "kernels"
    shared = compile_file(kernels / "mlp3.lair").module
    alone = compile_file(kernels / "gemv_8x8.lair").module
    assert shared is not None and alone is not None

    def bound(program: PeProgram) -> list[Run]:
        found: list[Run] = []

        def walk(body: tuple[object, ...]) -> None:
            for s in body:
                if isinstance(s, Run) and s.arrays:
                    found.append(s)
                elif isinstance(s, If):
                    walk(s.then)
                    walk(s.orelse)
        for task in program.tasks:
            walk(task.body)
        return found

    assert len([r for p in shared.programs for r in bound(p)]) >= 3
    assert max(configurations_per_pe(p) for p in shared.programs) <= 8
    assert not [r for p in alone.programs for r in bound(p)]
    outcome = run_program(kernels / "mlp3.lair", seed=2)
    assert outcome.comparison.verified


def test_what_the_budget_gives_up_is_weighed_without_sharing(monkeypatch) -> None:
    """With 4 configurations a PE, mlp3 shares and still gives up SIMD: what to give up
    is weighed on the configurations each use has alone (a shared one frees nothing
    until all its uses are given up), so sharing ends no slower than not sharing."""
    from pathlib import Path

    import dtg
    import dtg.codegen.emit as emit
    from dtg.pe.fabric import FabricConfig

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels" / "mlp3.lair"
    fabric = FabricConfig(max_simd_configs=4)
    shared = dtg.compile(path, simd=True, fabric=fabric)
    monkeypatch.setattr(emit, "share_configurations", lambda p: p)
    alone = dtg.compile(path, simd=True, fabric=fabric)
    with_sharing = dtg.simulate(shared, engine="simpy")
    without = dtg.simulate(alone, engine="simpy")
    assert with_sharing.verified and without.verified
    assert with_sharing.cycles <= without.cycles


PADDED_STRIDED = ("""
    let C = 3, K = 4, H = 32
    lair pad(C, H): float32 x[C][H][H] -> float32 xp[C][H + 2][H + 2]
    { all (c, i, j) in (C, H, H) xp[c][i + 1][j + 1] = x[c][i][j] }
    lair conv(C, K, H): float32 xp[C][H + 2][H + 2], float32 W[K][C][3][3]
                        -> float32 y[K][H//2][H//2]
    { all (k, oi, oj, c, p, q) in (K, H//2, H//2, C, 3, 3)
        y[k][oi][oj] += xp[c][2*oi + p][2*oj + q] * W[k][c][p][q] }
    """, """
    rectangle { PE[8, 8] }
    placement { pad[c, i, j] -> PE[j//4, i//4]; conv[k, oi, oj, c, p, q] -> PE[oj//2, oi//2] }
    input  x dense { x[c = 0:2, i = 0:31, j = 0:31] -> [PE[j//4, -1] -> index[c, i, j mod 4]] }
    input  W resident
    output y dense { y[k = 0:3, oi = 0:15, oj = 0:15] -> [PE[oj//2, 8] -> index[k, oi, oj mod 2]] }
    """)


def test_a_halo_in_two_phases_frees_configurations_for_the_output(tmp_path) -> None:
    """A padded stride-2 convolution needs one configuration more than a PE has: its
    halo's corner part relayed by the PEs beside (two phases, 4 configurations for 6)
    costs a few cycles, where giving up the output chain's SIMD cost 1,400 (an
    independently written kernel: 2,809 -> 1,381 cycles)."""
    from conftest import write_pair

    import dtg
    from dtg.pesim.run import run_program

    path = write_pair(tmp_path, *PADDED_STRIDED)
    compiled = dtg.compile(path)
    assert compiled.module is not None
    configs = {c.name for p in compiled.module.programs for c in p.configs}
    assert any(name.startswith("out_y") for name in configs)  # (the chain by SIMD)
    assert max(configurations_per_pe(p) for p in compiled.module.programs) <= 8
    simd = run_program(path, seed=3)
    assert simd.comparison.verified and simd.comparison.exact
    scalar = run_program(path, seed=3, simd=False)
    assert simd.result.cycles < scalar.result.cycles
