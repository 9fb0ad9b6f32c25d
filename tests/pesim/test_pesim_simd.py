"""Every SIMD operation kind, strides, sequential semantics, and their cost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pesim_support import sim

from dtg.errors import SimulationError
from dtg.pesim.verify import ModuleError

SIMD = """
module ops
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 a[8] load A;
  array float16 b[8] load B;
  array float16 c[8] load C store Y_fmac;
  array float16 d[8] store Y_fmul;
  array float16 e[8] store Y_fadd;
  array float16 f[8] store Y_fsub;
  array float16 g[8] store Y_fmax;
  array float16 h[8] store Y_copy;
  array float16 k[8] store Y_fill;
  array float16 m[2][4] store Y_outer;
  array float16 acc[1] store Y_dot;
  array float32 s[8] load A store Y_shift;
  simd mac [8]: c[i0] += a[i0] * b[i0];
  simd mul [8]: d[i0] = a[i0] * b[i0];
  simd add [8]: e[i0] = a[i0] + b[i0];
  simd sub [8]: f[i0] = a[i0] - b[i0];
  simd mx [8]: g[i0] = max(a[i0], b[i0]);
  simd rev [8]: h[i0] = a[-1*i0];
  simd fil [8]: k[i0] = scalar;
  simd outer [2, 4]: m[4*i0 + i1] = a[i1] * b[i0];
  simd dot [8]: acc[0] += a[i0] * b[i0];
  simd spread [4]: s[2*i0] = s[i0];
  task main {
    run mac {c: 0, a: 0, b: 0};
    run mul {d: 0, a: 0, b: 0};
    run add {e: 0, a: 0, b: 0};
    run sub {f: 0, a: 0, b: 0};
    run mx {g: 0, a: 0, b: 0};
    run rev {h: 0, a: 7};
    run fil {k: 0} (0.5 * 3.0);
    run outer {m: 0, a: 0, b: 0};
    run dot {acc: 0, a: 0, b: 0};
    run spread {s: 0};
  }
}
"""

OUTPUTS = {name: ((8,), "float16") for name in
           ("Y_fmac", "Y_fmul", "Y_fadd", "Y_fsub", "Y_fmax", "Y_copy", "Y_fill")}
OUTPUTS["Y_outer"] = ((2, 4), "float16")
OUTPUTS["Y_dot"] = ((1,), "float16")


def test_more_configurations_than_the_engine_holds_are_rejected() -> None:
    a = np.ones(8, np.float16)
    with pytest.raises(ModuleError, match="sets up 10 SIMD configurations"):
        sim(SIMD, {"A": a, "B": a, "C": a}, OUTPUTS)


def test_every_simd_operation_against_numpy() -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(size=8).astype(np.float16)
    b = rng.normal(size=8).astype(np.float16)
    c = rng.normal(size=8).astype(np.float16)
    outputs = dict(OUTPUTS)
    outputs["Y_shift"] = ((8,), "float32")
    result = sim(SIMD, {"A": a, "B": b, "C": c}, outputs, max_simd_configs=10)
    y = result.outputs
    assert np.array_equal(y["Y_fmac"], c + a * b)
    assert np.array_equal(y["Y_fmul"], a * b)
    assert np.array_equal(y["Y_fadd"], a + b)
    assert np.array_equal(y["Y_fsub"], a - b)
    assert np.array_equal(y["Y_fmax"], np.maximum(a, b))
    assert np.array_equal(y["Y_copy"], a[::-1])
    assert np.array_equal(y["Y_fill"], np.full(8, np.float16(0.5) * np.float16(3.0)))
    assert np.array_equal(y["Y_outer"], np.outer(b[:2], a[:4]).astype(np.float16))
    dot = np.float16(0)
    for x, z in zip(a, b, strict=True):
        dot = np.float16(dot + np.float16(x * z))  # in domain order, rounding each step
    assert y["Y_dot"][0] == dot


def test_instructions_that_read_their_own_writes_run_in_order() -> None:
    a = np.arange(1, 9, dtype=np.float16)
    outputs = dict(OUTPUTS)
    outputs["Y_shift"] = ((8,), "float32")
    result = sim(SIMD, {"A": a, "B": a, "C": a}, outputs, max_simd_configs=10)
    # s[2k] = s[k] for k = 0..3 in order: s[4] reads s[2] after k = 1 wrote it
    assert result.outputs["Y_shift"].tolist() == [1, 2, 2, 4, 2, 6, 4, 8]


def test_simd_cost_adds_up() -> None:
    a = np.ones(8, np.float16)
    outputs = dict(OUTPUTS)
    outputs["Y_shift"] = ((8,), "float32")
    result = sim(SIMD, {"A": a, "B": a, "C": a}, outputs, max_simd_configs=10)
    configure = 10 * 8
    float16_runs = 9 * (4 + 2)  # eight elements each (outer: 2 x 4)
    scalar = 1  # the multiplication in the fill's scalar
    spread = 4 + 4  # float32 destination: one element per cycle
    assert result.cycles == configure + float16_runs + scalar + spread
    stats = result.pes[(0, 0)]
    assert stats.simd_instructions == 10
    assert stats.simd_ops == 9 * 8 + 4


def test_simd_in_and_out_on_one_pe_pair_chain() -> None:
    # a copy from fabric to fabric, float32 (no array operand): one element per cycle
    text = """
module relay
mesh PE[3, 1]
input x dense color 0 { x[i = 0:4] -> [PE[-1, 0] -> index[i]] }
output y dense color 3 { y[i = 0:4] -> [PE[3, 0] -> index[i]] }
program left origin PE[0, 0] pes { PE[0, 0] }
{
  route 0: W -> RAMP;
  route 1: RAMP -> E;
  simd fwd [5]: out(1) = in(0);
  task main {
    run fwd {};
  }
}
program mid origin PE[1, 0] pes { PE[0, 0] }
{
  array float16 bias[5] load B;
  route 1: W -> RAMP;
  route 3: RAMP -> E;
  simd add [5]: out(3) = in(1) + bias[i0];
  task main {
    run add {bias: 0};
  }
}
program right origin PE[2, 0] pes { PE[0, 0] }
{
  route 3: W -> E;
}
"""
    x = np.array([1, 2, 3, 4, 5], np.float16)
    bias = np.array([10, 20, 30, 40, 50], np.float16)
    result = sim(text, {"x": x, "B": bias}, {"y": ((5,), "float16")})
    assert np.array_equal(result.outputs["y"], x + bias)


GUARDED = """
module guarded
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4] offset [4 * PE_X] store Y;
  simd left [4]GUARD0: a[i0] = scalar;
  simd both [2]GUARD1 | [4]GUARD2: a[i0] = a[i0] + a[i0];
  task main {
    if (PE_X == 0) {
      run left {a: 0} (1.5);
    }
    run both variant(1 - PE_X) {a: 0};
    LATE
  }
}
"""
GUARDS = {"GUARD0": " if (PE_X == 0)", "GUARD1": " if (PE_X == 1)", "GUARD2": " if (PE_X == 0)",
          "LATE": ""}


def _guarded(**replace: str) -> str:
    text = GUARDED
    for key, value in {**GUARDS, **replace}.items():
        text = text.replace(key, value)
    return text


def test_a_pe_sets_up_only_the_variants_whose_guard_holds() -> None:
    outputs = {"Y": ((8,), "float32")}
    guarded = sim(_guarded(), {}, outputs)
    everywhere = sim(_guarded(GUARD0="", GUARD1="", GUARD2=""), {}, outputs)
    np.testing.assert_array_equal(guarded.outputs["Y"], [3, 3, 3, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(everywhere.outputs["Y"], guarded.outputs["Y"])
    config = 8  # cycles per variant set up
    # PE[0, 0] sets up 2 of the 3 variants, PE[1, 0] one
    assert everywhere.pes[(0, 0)].busy - guarded.pes[(0, 0)].busy == config
    assert everywhere.pes[(1, 0)].busy - guarded.pes[(1, 0)].busy == 2 * config


def test_the_configuration_budget_counts_per_pe() -> None:
    outputs = {"Y": ((8,), "float32")}
    sim(_guarded(), {}, outputs, max_simd_configs=2)
    with pytest.raises(ModuleError, match=r"PE\[0, 0\] \(program p\) sets up 3 SIMD"):
        sim(_guarded(GUARD0="", GUARD1="", GUARD2=""), {}, outputs, max_simd_configs=2)


def test_running_a_variant_the_pe_did_not_set_up_is_an_error() -> None:
    with pytest.raises(SimulationError, match="did not set up"):
        sim(_guarded(LATE="run left {a: 0} (0.0);"), {}, {"Y": ((8,), "float32")})


def test_a_simd_guard_may_use_only_the_pe_coordinates() -> None:
    with pytest.raises(ModuleError, match="guard of a variant of simd left uses 'n'"):
        sim(_guarded(GUARD0=" if (n == 0)").replace("{\n  array", "{\n  int n = 0;\n  array"),
            {}, {"Y": ((8,), "float32")})


def test_arrays_start_at_their_initial_value() -> None:
    text = """
module init
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 m[4] init -inf store Y;
  array float32 z[2] store Z;
  task main {
    m[1] max= 2.0;
  }
}
"""
    result = sim(text, {}, {"Y": ((4,), "float32"), "Z": ((2,), "float32")})
    np.testing.assert_array_equal(result.outputs["Y"], [-np.inf, 2, -np.inf, -np.inf])
    np.testing.assert_array_equal(result.outputs["Z"], [0, 0])
    assert result.pes[(0, 0)].busy < 10  # no fill: the values are in the program image


REDUCTION = """
module reduce
mesh PE[1, 1]
program p origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  array {t} w[4][{n}] load W;
  array {t} x[{n}] load X;
  array {t} y[4] load Y store Out;
  simd rows [4, {n}]: y[i0] += w[{n}*i0 + i1] * x[i1];
  simd cols [{n}, 4]: y[i1] += w[i0 + {n}*i1] * x[i0];
  task main {{
    run rows {{y: 0, w: 0, x: 0}};
    run cols {{y: 0, w: 0, x: 0}};
  }}
}}
"""


@given(st.sampled_from(["float16", "float32"]), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_reductions_round_each_addition_in_domain_order(dtype: str, n: int, seed: int) -> None:
    """A multiply-add into repeated destinations, with values that round: the same bits
    as adding element by element in domain order."""
    rng = np.random.default_rng(seed)
    t = np.float16 if dtype == "float16" else np.float32
    w, x, y = (rng.normal(size=shape).astype(t) * t(3) for shape in [(4, n), (n,), (4,)])
    expected = y.copy()
    for order in ("r", "s"):
        for a in range(n if order == "s" else 4):
            for b in range(4 if order == "s" else n):
                i, j = (b, a) if order == "s" else (a, b)
                expected[i] = expected[i] + w[i, j] * x[j]
    result = sim(REDUCTION.format(t=dtype, n=n), {"W": w, "X": x, "Y": y},
                 {"Out": ((4,), dtype)})
    assert result.outputs["Out"].tobytes() == expected.tobytes()


BOUND = """
module bound
mesh PE[1, 1]
input X dense color 0 { X[i = 0:7] -> [PE[0, -1] -> index[i]] }
output Z dense color 1 { Z[i = 0:7] -> [PE[1, 0] -> index[i]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 a[8] load A;
  array float16 b[8] load B;
  array float16 c[8] store C;
  array float16 d[2][4] store D;
  array float16 e[8] store E;
  route 0: N -> RAMP;
  route 1: RAMP -> E;
  simd add [4]: c[i0] = a[i0] + b[i0];
  simd send [8]: out(1) = c[i0] + in(0);
  task main {
    run add {c: 0, a: 0, b: 0};
    run add {c -> d: 4, a -> b: 4, b -> a: 4};
    run add {c -> e: 0, a: 4, b: 0};
    run send {c -> e: 0};
  }
}
"""
BOUND_OUTPUTS = {"C": ((8,), "float16"), "D": ((2, 4), "float16"), "E": ((8,), "float16"),
                 "Z": ((8,), "float16")}


def bound_inputs() -> dict[str, np.ndarray]:
    return {"A": np.arange(8, dtype=np.float16), "B": 10 * np.arange(8, dtype=np.float16),
            "X": 100 * np.arange(8, dtype=np.float16)}


def test_a_run_binds_a_configuration_to_other_arrays() -> None:
    """One configuration, four instructions: its operands bound per run to other arrays
    (swapped, of another shape, fabric operands kept), each a whole instruction."""
    result = sim(BOUND, bound_inputs(), BOUND_OUTPUTS)
    a, b, x = (bound_inputs()[k] for k in "ABX")
    y = result.outputs
    assert np.array_equal(y["C"], np.concatenate([a[:4] + b[:4], np.zeros(4, np.float16)]))
    assert np.array_equal(y["D"], np.stack([np.zeros(4, np.float16), b[4:] + a[4:]]))
    e = np.concatenate([a[4:] + b[:4], np.zeros(4, np.float16)])
    assert np.array_equal(y["E"], e)
    assert np.array_equal(y["Z"], e + x)
    # one configuration set up per config, not per binding: 2 x 8 cycles before main
    # (a run pays one scalar operation per array it binds: 3, 2 and 1 of them)
    assert result.pes[(0, 0)].busy == 2 * 8 + 3 * (4 + 4 // 4) + (4 + 8 // 4) + 3 + 1 + 1


def test_a_bound_run_outside_its_array_names_the_array() -> None:
    text = BOUND.replace("{c -> d: 4,", "{c -> d: 6,")
    with pytest.raises(SimulationError, match=r"simd add \[4\] with base 6 accesses d at "
                       r"flat index 8, outside the array d\[2\]\[4\] \(8 elements\)"):
        sim(text, bound_inputs(), BOUND_OUTPUTS)
