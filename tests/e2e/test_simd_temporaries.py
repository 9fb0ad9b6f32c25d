"""Accumulations whose value is more than one operation take a SIMD temporary (issue 27):
``r += a * w * c``, a scaled GEMM ``y += x * w * 0.5``, ``y max= a + b``, ``z +=
max(a, b)`` and a variance ``v += (x - m) * (x - m)`` ran in scalar loops, 6 to 26 times
their bound; now the value goes into a
scratch array the size of the instruction's box and is accumulated from there (the last
multiplication fused). A box too large for a temporary is taken a row at a time, and
where the temporaries would not fit the PE the compiler drops them.

Each verified exactly on both engines, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg
import dtg.codegen.pipeline
from dtg.pesim.run import run_program

DOT3 = ("""
    lair t(): float32 a[16][64], float32 b[64], float32 c[16][64] -> float32 y[16]
    { all (i, j) in (16, 64) y[i] += a[i][j] * b[j] * c[i][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { t[i, j] -> PE[j//16, i//4] }
    input  a dense { a[i = 0:15, j = 0:63] -> [PE[-1, i//4] -> index[i mod 4, j]] }
    input  b resident
    input  c resident
    output y dense { y[i = 0:15] -> [PE[-1, i//4] -> index[i mod 4]] }
    """)

SCALED_GEMM = ("""
    lair t(): float16 x[16][16], float16 w[16][16] -> float16 y[16][16]
    { all (i, j, k) in (16, 16, 16) y[i][j] += x[i][k] * w[k][j] * 0.5 }
    """, """
    rectangle { PE[4, 4] }
    placement { t[i, j, k] -> PE[j//4, i//4] }
    input  x dense { x[i = 0:15, k = 0:15] -> [PE[-1, i//4] -> index[i mod 4, k]] }
    input  w resident
    output y dense { y[i = 0:15, j = 0:15] -> [PE[4, i//4] -> index[i mod 4, j]] }
    """)

MAX_AND_SUM = ("""
    lair t(): float32 a[16][64], float32 b[64] -> float32 y[16], float32 z[16]
    {
      A: all (i, j) in (16, 64) y[i] max= a[i][j] + b[j]
      B: all (i, j) in (16, 64) z[i] += max(a[i][j], b[j])
    }
    """, """
    rectangle { PE[4, 4] }
    placement { A[i, j] -> PE[j//16, i//4]; B[i, j] -> PE[j//16, i//4] }
    input  a dense { a[i = 0:15, j = 0:63] -> [PE[-1, i//4] -> index[i mod 4, j]] }
    input  b resident
    output y dense { y[i = 0:15] -> [PE[-1, i//4] -> index[i mod 4]] }
    output z dense { z[i = 0:15] -> [PE[4, i//4] -> index[i mod 4]] }
    """)

# A variance and a square: a compound operand times itself.
VARIANCE = ("""
    lair t(): float32 x[16][64], float32 m[16] -> float32 v[16], float32 q[16][64]
    {
      A: all (i, j) in (16, 64) v[i] += (x[i][j] - m[i]) * (x[i][j] - m[i])
      B: all (i, j) in (16, 64) q[i][j] = (x[i][j] + 1.0) * (x[i][j] + 1.0)
    }
    """, """
    rectangle { PE[4, 4] }
    placement { A[i, j] -> PE[j//16, i//4]; B[i, j] -> PE[j//16, i//4] }
    input  x dense { x[i = 0:15, j = 0:63] -> [PE[-1, i//4] -> index[i mod 4, j]] }
    input  m resident
    output v dense { v[i = 0:15] -> [PE[-1, i//4] -> index[i mod 4]] }
    output q resident
    """)

# A subtracted product with no constant to negate, accumulated; and two compound operands.
SUBTRACTED = ("""
    lair t(): float32 A[16][64], float32 B[16][64], float32 x[64], float32 z[64]
      -> float32 y[16], float32 q[16][64]
    {
      S: all (i, j) in (16, 64) y[i] += A[i][j] * x[j] - B[i][j] * z[j]
      Q: all (i, j) in (16, 64) q[i][j] = (A[i][j] + B[i][j]) * (A[i][j] - x[j])
    }
    """, """
    rectangle { PE[4, 4] }
    placement { S[i, j] -> PE[j//16, i//4]; Q[i, j] -> PE[j//16, i//4] }
    input  A dense { A[i = 0:15, j = 0:63] -> [PE[-1, i//4] -> index[i mod 4, j]] }
    input  B resident
    input  x resident
    input  z resident
    output y dense { y[i = 0:15] -> [PE[-1, i//4] -> index[i mod 4]] }
    output q resident
    """)

# A whole box of 32 x 32 x 32 on one PE: its temporary would be 32,768 elements, so the
# instruction takes a row of it (1,024) inside a scalar loop.
LARGE_BOX = ("""
    lair t(): float16 x[32][32], float16 w[32][32] -> float16 y[32][32]
    { all (i, j, k) in (32, 32, 32) y[i][j] += x[i][k] * w[k][j] * 0.5 }
    """, """
    rectangle { PE[1, 1] }
    placement { t[i, j, k] -> PE[0, 0] }
    input  x resident
    input  w resident
    output y dense { y[i = 0:31, j = 0:31] -> [PE[1, 0] -> index[i, j]] }
    """)

PAIRS = {"dot3": DOT3, "scaled_gemm": SCALED_GEMM, "max_and_sum": MAX_AND_SUM,
         "variance": VARIANCE, "subtracted": SUBTRACTED, "large_box": LARGE_BOX}


def _temporaries(path: Path) -> list[tuple[str, int]]:
    compiled = dtg.compile(path)
    assert compiled.module is not None
    return [(a.name, a.shape[0]) for p in compiled.module.programs for a in p.arrays
            if a.name.startswith("temp_")]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_an_accumulated_compound_value_runs_simd_through_a_temporary(
        tmp_path: Path, name: str) -> None:
    path = write_pair(tmp_path, *PAIRS[name])
    temps = _temporaries(path)
    assert temps and all(size <= 2048 for _, size in temps), temps
    simd = run_program(path, seed=3).result.cycles
    scalar = run_program(path, seed=3, simd=False).result.cycles
    assert simd < scalar / 2, (simd, scalar)


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_temporaries_verify_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


def test_temporaries_that_would_not_fit_the_pe_are_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the module's arrays with the temporaries exceed a PE's memory, the compiler
    decides again without them (the statement's SIMD is given up, not the mapping)."""
    path = write_pair(tmp_path, *LARGE_BOX)
    assert len(_temporaries(path)) == 1
    compiled = dtg.compile(path)
    assert compiled.module is not None
    used = sum(a.bytes for p in compiled.module.programs for a in p.arrays)
    monkeypatch.setattr(dtg.codegen.pipeline, "LOCAL_MEMORY_BYTES", used - 1)
    assert _temporaries(path) == []
    outcome = run_program(path, seed=2)
    assert outcome.comparison.verified and outcome.comparison.exact



VALUES = ["a[i][j] * b[j] * c[i][j]", "a[i][j] * b[j] - c[i][j] * b[j]",
          "(a[i][j] - b[j]) * (a[i][j] - b[j])", "max(a[i][j], c[i][j])",
          "a[i][j] * c[i][j] * 0.5"]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(VALUES), st.sampled_from(["+=", "max="]),
       st.sampled_from([(2, 2), (4, 1), (1, 4)]), st.sampled_from(["stream", "resident"]),
       st.sampled_from([True, False]), st.integers(0, 3))
def test_random_compound_accumulations_compute_the_program(
        value: str, op: str, mesh: tuple[int, int], entry: str, simd: bool,
        seed: int) -> None:
    """Compound accumulations on random meshes, with ``a`` streamed or resident, SIMD on
    and off: the simulated outputs equal the reference's exactly."""
    import tempfile

    w, h = mesh
    stream = (f"input  a dense {{ a[i = 0:7, j = 0:15] -> [PE[-1, i//{8 // h}] -> "
              f"index[i mod {8 // h}, j]] }}" if entry == "stream" and w == 1 else
              "input  a resident")
    lair = ("lair t(): float32 a[8][16], float32 b[16], float32 c[8][16] -> float32 y[8]\n"
            f"{{ all (i, j) in (8, 16) y[i] {op} {value} }}\n")
    mapping = (f"rectangle {{ PE[{w}, {h}] }}\n"
               f"placement {{ t[i, j] -> PE[j//{16 // w}, i//{8 // h}] }}\n"
               f"{stream}\ninput  b resident\ninput  c resident\noutput y resident\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_pair(Path(tmp), lair, mapping)
        outcome = run_program(path, simd=simd, seed=seed)
        assert outcome.comparison.verified and outcome.comparison.exact, (lair, mapping)
