"""The SIMD cases of the paper's §5 on the convolution examples, compared by meaning."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from conftest import EXAMPLES

from dtg.codegen.configure import configurations_per_pe
from dtg.codegen.driver import compile_file
from dtg.codegen.pipeline import Compilation, compile_mapping
from dtg.errors import UnsupportedMappingError
from dtg.lair.frontend import load_program
from dtg.lair.graph import Const
from dtg.mapping.spec import parse_mapping_file
from dtg.mapping.validate import validate_mapping
from dtg.pesim.run import run_program


def same(a: isl.Set | isl.Map, b: isl.Set | isl.Map) -> bool:
    a, b = a.align_params(b.get_space()), b.align_params(a.get_space())
    return bool(a.is_equal(b))


def test_conv2d_compression_is_eq_28_with_a_box_hull() -> None:
    c = compile_file(EXAMPLES / "conv2d" / "conv2d.lair", arrival="per-wavelet")
    assert c.decisions is not None and c.memory is not None
    d = c.decisions["C_on_x"]
    assert d.used and d.case == "box_hull" and d.sizes == (3, 3)
    assert d.compression is not None
    eq28 = isl.Map("[PE_Y, index_0, index] -> "
                   "{ [i0, i1] -> C[PE_Y, index_0 - i0, index - i1, i0, i1] }")
    assert same(d.compression, eq28)
    y = c.memory.of("y")
    assert y is not None and y.size == (1, 18, 18)


def test_degenerate_compression_is_eq_33() -> None:
    c = compile_file(EXAMPLES / "conv2d_degenerate" / "conv2d_degenerate.lair",
                     arrival="per-wavelet")
    assert c.decisions is not None
    d = c.decisions["C_on_x"]
    assert d.used and d.sizes == (2, 1)
    assert d.compression is not None
    eq33 = isl.Map("[PE_Y, index_0, index_1, index] -> "
                   "{ [i0, i1] -> C[i0, index_0 - 4i1, index_1, index + 2PE_Y + 4i1] }")
    assert same(d.compression, eq33)


def test_size_enumeration_when_extras_would_overwrite_results() -> None:
    c = compile_file(EXAMPLES / "conv1d_filter_grad" / "conv1d_filter_grad.lair",
                     arrival="per-wavelet")
    assert c.decisions is not None and c.module is not None
    d = c.decisions["CG_on_x"]
    assert d.used and d.case == "enumerated"
    assert d.variants == ((1,), (2,), (3,))
    assert d.size_ids == (((0,), (1,)), ((1,), (2,)), ((2,), (3,)))
    (config,) = [cfg for p in c.module.programs for cfg in p.configs if cfg.name == "simd_CG_on_x"]
    assert config.variants == ((1,), (2,), (3,))


def _write(tmp: Path, lair: str, mapping: str) -> Path:
    (tmp / "p.lair").write_text(lair)
    (tmp / "p.map").write_text(mapping)
    return tmp / "p.lair"


def test_more_than_four_dimensions_get_outer_loops(tmp_path: Path) -> None:
    program = _write(tmp_path, """
        lair T(): float32 x[3], float32 W[2][2][2][2][2] -> float32 z[2][2][2][2][2]
        { all (a, b, c, d, e, n) in (2, 2, 2, 2, 2, 3)
            z[a][b][c][d][e] += x[n] * W[a][b][c][d][e] }
        """, """
        rectangle { PE[1, 1] }
        placement { T[a, b, c, d, e, n] -> PE[0, 0] }
        input x sparse { x[n = 0:2] -> [PE[0, -1] -> index[n]] }
        input W resident
        output z resident
        """)
    c = compile_file(program)
    assert c.decisions is not None
    d = c.decisions["T_on_x"]
    assert d.used and d.sizes == (2, 2, 2, 2) and d.outer_names == ("o0",)
    for simd in (True, False):
        assert run_program(program, simd=simd).comparison.verified


def test_too_many_configurations_fall_back_to_scalar() -> None:
    program = load_program(EXAMPLES / "gemv" / "gemv.lair")
    mapping = validate_mapping(parse_mapping_file(EXAMPLES / "gemv" / "gemv.map"),
                               program.model)

    def configs(c: Compilation) -> int:
        assert c.module is not None
        return sum(len(cfg.variants) for p in c.module.programs for cfg in p.configs)

    def per_pe(c: Compilation) -> int:
        assert c.module is not None
        return max(configurations_per_pe(p) for p in c.module.programs)

    # the three roles of the reduction chain (3) + the multiply-add (1); each PE sets up
    # one of the chain's roles (paper §5.4: only what it needs); the accumulator starts
    # at 0 in the program image, with no fill
    c = compile_mapping(program, mapping)
    assert (configs(c), per_pe(c)) == (4, 2)
    # With one, the outputs become scalar loops: the cost model predicts they save
    # less per configuration than the multiply-add, whose batches stay (they need no
    # more configurations than the per-wavelet instruction).
    c = compile_mapping(program, mapping, max_configs=1)
    assert c.decisions is not None and c.decisions["gemv_on_x"].used and configs(c) == 1
    assert c.arrivals is not None and c.arrivals.batches
    # With none, the compute task gives up SIMD too, and says why.
    c = compile_mapping(program, mapping, max_configs=0)
    assert c.decisions is not None
    d = c.decisions["gemv_on_x"]
    assert not d.used and "would need 1 SIMD configurations, more than the 0" in d.reason
    assert configs(c) == 0


def test_local_memory_overflow_is_reported(tmp_path: Path) -> None:
    program = _write(tmp_path, """
        lair g(): float16 W[256][128], float16 x[128] -> float16 y[256]
        { all (i, j) in (256, 128) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[1, 1] }
        placement { g[i, j] -> PE[0, 0] }
        input x sparse { x[j = 0:127] -> [PE[0, -1] -> index[j]] }
        input W resident
        output y resident
        """)
    with pytest.raises(UnsupportedMappingError) as err:
        compile_file(program)
    assert err.value.format() == (
        f"{tmp_path / 'p.map'}:3:19: error: the local arrays of each compute PE need 66048 "
        "bytes (W_local[256, 128] 65536 bytes, y_local[256] 512 bytes), more than the 49152 "
        "bytes a PE has; spread the work over more PEs (1.3x less data on each would fit) "
        "or stream 'W' instead of keeping it resident")


def test_strided_elements_that_overflow_are_explained(tmp_path: Path) -> None:
    """A cyclic placement gives each PE every 8th row and column: 32 x 32 elements of W
    in a box of 249 x 249, which is what the local array holds."""
    program = _write(tmp_path, """
        lair g(): float16 W[256][256], float16 x[256] -> float16 y[256]
        { all (i, j) in (256, 256) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[8, 8] }
        placement { g[i, j] -> PE[j mod 8, i mod 8] }
        input x sparse { x[j = 0:255] -> [PE[j mod 8, -1] -> index[j]] }
        input W resident
        output y resident
        """)
    with pytest.raises(UnsupportedMappingError) as err:
        compile_file(program)
    assert "'W' has 1024 elements on a PE but they spread over a box of 62001" in \
        err.value.format()


def test_sums_of_products_are_split_into_operations() -> None:
    from dtg.codegen.simd import OpShape, op_steps
    from dtg.lair.frontend import program_from_text

    graph = program_from_text("""
        lair u(): float32 W[4], float32 dW[4], float32 x[4], float32 s[4], float32 z[4],
                  float32 beta -> float32 Wn[4], float32 xo[4], float32 bad[4]
        {
          upd: all (i) in (4) Wn[i] = W[i] - 0.125 * dW[i]
          xn:  all (i) in (4) xo[i] = x[i] + beta * s[i] + z[i]
          no:  all (i) in (4) bad[i] = x[i] - s[i] * z[i]
        }
    """).graph
    assert op_steps(graph.statement("upd"), None) == (
        OpShape("copy", "Wn", ("W",), None), OpShape("fmac", "Wn", (None, "dW"), Const(-0.125)))
    assert op_steps(graph.statement("xn"), None) == (
        OpShape("copy", "xo", ("x",), None), OpShape("fmac", "xo", ("beta", "s"), None),
        OpShape("fadd", "xo", ("xo", "z"), None))
    # - s * z, no constant to negate: the product first, then the reversed difference
    assert op_steps(graph.statement("no"), None) == (
        OpShape("fmul", "bad", ("s", "z"), None), OpShape("fsub", "bad", ("x", "bad"), None))


def test_negated_first_terms_are_simd_operations() -> None:
    """``-d + 2x`` is ``2x - d`` (the same first partial sum, exactly), and ``-a - b`` is
    ``0 - a - b`` (``0 - a`` is ``-a`` exactly): SIMD operations, not scalar loops (a
    helper's ``E = -D + X * 2`` ran 15 times its bound)."""
    from dtg.codegen.simd import OpShape, op_steps
    from dtg.lair.frontend import program_from_text

    graph = program_from_text("""
        lair u(): float16 d[4], float16 x[4], float16 a[4], float16 b[4]
                  -> float16 e[4], float16 f[4]
        {
          ne: all (i) in (4) e[i] = -d[i] + x[i] * 2
          nn: all (i) in (4) f[i] = -a[i] - b[i]
        }
    """).graph
    assert op_steps(graph.statement("ne"), None) == (
        OpShape("fmul", "e", ("x", None), Const(2.0)), OpShape("fsub", "e", ("e", "d"), None))
    assert op_steps(graph.statement("nn"), None) == (
        OpShape("fill", "f", (None,), Const(0.0)), OpShape("fsub", "f", ("f", "a"), None),
        OpShape("fsub", "f", ("f", "b"), None))


def test_negated_terms_verify_on_both_engines(tmp_path: Path) -> None:
    from conftest import alike_on_both_engines, write_pair
    path = write_pair(tmp_path, """
        lair u(): float16 d[32], float16 x[32], float16 a[32], float16 b[32]
                  -> float16 e[32], float16 f[32]
        {
          ne: all (i) in (32) e[i] = -d[i] + x[i] * 2
          nn: all (i) in (32) f[i] = -a[i] - b[i]
        }
        """, """
        rectangle { PE[2, 1] }
        placement { ne[i] -> PE[i//16, 0]; nn[i] -> PE[i//16, 0] }
        input  d resident
        input  x resident
        input  a resident
        input  b resident
        output e resident
        output f resident
        """)
    alike_on_both_engines(path, simd=True)


def test_many_statements_give_up_simd_in_few_rounds(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """30 statements need 30 SIMD configurations on one PE, which holds 8: the compiler
    gives SIMD up for the excess in one round instead of re-emitting once per statement
    (which made a chain of 200 statements take minutes)."""
    import sys

    from dtg.codegen import pipeline
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from bench_statements import chain

    emitted = []
    real_emit = pipeline.emit

    def counting_emit(*args: object, **kwargs: object) -> object:
        emitted.append(1)
        return real_emit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "emit", counting_emit)
    lair, mapping = chain(30)
    (tmp_path / "c.lair").write_text(lair)
    (tmp_path / "c.map").write_text(mapping)
    outcome = run_program(tmp_path / "c.lair")
    assert outcome.comparison.verified
    assert len(emitted) <= 3
    decisions = [line for line in outcome.module.programs[0].configs]
    assert 0 < len(decisions) <= 8


def test_sizes_varying_in_two_dimensions_are_selected_per_pe() -> None:
    """Uneven tiles in both dimensions (a shorter last row and column of tiles): one
    batch instruction with a variant per combination of sizes, selected by one test per
    dimension, each PE setting up only its own."""
    c = compile_file(EXAMPLES / "movement" / "gemv_uneven.lair")
    assert c.arrivals is not None and c.module is not None
    (batch,) = c.arrivals.batches
    d = batch.decision("gemv_on_x")
    assert d.used and d.case == "enumerated" and not d.outer_names
    assert d.variants == ((6, 3), (6, 5), (8, 3), (8, 5))
    (program,) = c.module.programs
    assert configurations_per_pe(program) == 2  # the product's and the output's
    run = run_program(EXAMPLES / "movement" / "gemv_uneven.lair")
    assert run.comparison.verified
