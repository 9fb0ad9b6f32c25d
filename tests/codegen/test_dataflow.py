"""The data-flow check (codegen/dataflow.py): it accepts every plan the compiler makes for
the examples, and it catches plans that compute something else, whether the planner
made them (the bugs it was written for, re-opened by patching the planner's guard) or
a plan was altered after the fact."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import islpy as isl
import pytest
from conftest import EXAMPLES

from dtg.codegen.dataflow import DataFlowError, check_data_flow
from dtg.codegen.driver import compile_file
from dtg.codegen.pipeline import Compilation, compile_mapping
from dtg.errors import UnsupportedMappingError
from dtg.lair.frontend import program_from_text
from dtg.mapping import exchanges, inputs, poly, tasks
from dtg.mapping.spec import parse_mapping
from dtg.mapping.validate import validate_mapping
from dtg.pesim.run import run_program

FC_BIAS_RELU = """
lair fc<T=float16>():
  T W[32][16], T x[16] -> T y[32]
{
  all (i, j) in (32, 16) y[i] += W[i][j] * x[j]
}
lair bias<T=float16>():
  T y[32], T b[32] -> T z[32]
{
  all (i) in (32) z[i] = y[i] + b[i]
}
lair relu<T=float16>():
  T z[32] -> T r[32]
{
  all (i) in (32) r[i] = max(z[i], 0)
}
"""
FC_BIAS_RELU_MAP = """
rectangle { PE[4, 4] }
placement { fc[i, j] -> PE[j//4, i//8]; bias[i] -> PE[3, i//8]; relu[i] -> PE[3, i//8] }
input  x dense { x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]] }
input  W resident
input  b resident
output r dense { r[i = 0:31] -> [PE[4, i//8] -> index[i mod 8]] }
"""
SPARSE_ADD = ("""
lair ew<T=float16>(): T a[8], T b[8] -> T c[8]
{ all (i) in (8) c[i] = a[i] + b[i] }
""", """
rectangle { PE[2, 1] }
placement { ew[i] -> PE[i//4, 0] }
input  a sparse { a[i = 0:7] -> [PE[i//4, -1] -> index[i mod 4]] }
input  b resident
output c resident
""")
SPARSE_MAX_POOL = ("""
lair pool<T=float16>(): T x[8] -> T y[4]
{ all (i, r) in (4, 2) y[i] max= x[2*i + r] }
""", """
rectangle { PE[1, 1] }
placement { pool[i, r] -> PE[0, 0] }
input  x sparse { x[i = 0:7] -> [PE[0, -1] -> index[i]] }
output y resident
""")
GEMV = (EXAMPLES / "gemv" / "gemv.lair").read_text()
# GEMV on rows 0-1 of a 4 x 4 rectangle: rows 2 and 3 run nothing.
IDLE_ROWS = """
rectangle { PE[4, 4] }
placement { gemv[i, j] -> PE[j//4, i//16] }
input  x dense { x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]] }
input  W resident
output y dense { y[i = 0:31] -> [PE[4, i//16] -> index[i mod 16]] }
"""
# GEMV on columns 0-1: columns 2 and 3 only pass the partial sums on to the east.
IDLE_COLUMNS = """
rectangle { PE[4, 4] }
placement { gemv[i, j] -> PE[j//8, i//8] }
input  x dense { x[j = 0:15] -> [PE[j//8, -1] -> index[j mod 8]] }
input  W resident
output y dense { y[i = 0:31] -> [PE[4, i//8] -> index[i mod 8]] }
"""
PARTIAL_OUTPUT = ("""
lair part<T=float16>(): T a[4] -> T c[5]
{ all (i) in (4) c[i] = a[i] * 2 }
""", """
rectangle { PE[1, 1] }
placement { part[i] -> PE[0, 0] }
input  a resident
output c resident
""")


def plan(lair: str, mapping: str, *, stop: str = "code", simd: bool = True) -> Compilation:
    program = program_from_text(textwrap.dedent(lair), file="prog.lair")
    spec = parse_mapping(textwrap.dedent(mapping), "prog.map")
    return compile_mapping(program, validate_mapping(spec, program.model), stop=stop,
                           simd=simd)


def write(tmp_path: Path, lair: str, mapping: str) -> Path:
    (tmp_path / "prog.lair").write_text(textwrap.dedent(lair))
    (tmp_path / "prog.map").write_text(textwrap.dedent(mapping))
    return tmp_path / "prog.lair"


EXAMPLE_FILES = sorted(p for p in EXAMPLES.glob("*/*.lair") if p.with_suffix(".map").exists())


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_every_example_plan_passes_the_check(path: Path) -> None:
    result = compile_file(path)
    assert result.tasks is not None and result.memory is not None
    check_data_flow(result.tasks, result.memory, result.decisions)


# ------------------------------------------------ the bugs it was written for


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("axis", ["row", "column"])
def test_fc_bias_relu_on_the_partial_sums_line_end_verifies(
        tmp_path: Path, axis: str, simd: bool) -> None:
    """The totals of y are combined along each row (column) onto its east (south) end
    PE, where bias and ReLU read them."""
    mapping = FC_BIAS_RELU_MAP if axis == "row" else """
        rectangle { PE[4, 4] }
        placement { fc[i, j] -> PE[i//8, j//4]; bias[i] -> PE[i//8, 3];
                    relu[i] -> PE[i//8, 3] }
        input  x dense { x[j = 0:15] -> [PE[-1, j//4] -> index[j mod 4]] }
        input  W resident
        input  b resident
        output r dense { r[i = 0:31] -> [PE[i//8, 4] -> index[i mod 8]] }
        """
    path = write(tmp_path, FC_BIAS_RELU, mapping)
    result = plan(FC_BIAS_RELU, mapping, stop="tasks")
    assert result.tasks is not None and [c.tensor for c in result.tasks.combines] == ["y"]
    for seed in (0, 1):
        outcome = run_program(path, simd=simd, seed=seed)
        assert outcome.comparison.verified, outcome.comparison.mismatch


def test_fc_bias_relu_at_the_line_start_combines_westwards(tmp_path: Path) -> None:
    """The bias runs at the west end of each row: the chain flows west, so the totals
    end where they are read (once they were kept at the east end and sent back)."""
    mapping = (FC_BIAS_RELU_MAP.replace("bias[i] -> PE[3, i//8]; relu[i] -> PE[3, i//8]",
                                        "bias[i] -> PE[0, i//8]; relu[i] -> PE[0, i//8]")
               .replace("PE[4, i//8]", "PE[-1, i//8]"))
    path = write(tmp_path, FC_BIAS_RELU, mapping)
    for simd in (True, False):
        outcome = run_program(path, simd=simd)
        assert outcome.comparison.verified, outcome.comparison.mismatch
    result = compile_file(path)
    assert result.tasks is not None
    assert result.tasks.exchanges == ()
    assert [c.side for c in result.tasks.combines] == ["W"]


def test_the_check_catches_bias_on_partial_sums_without_the_planner_guard(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchanges, "combine_partials",
                        lambda tensor, produced, *args, **kwargs: ([], [], produced))
    with pytest.raises(DataFlowError, match=r"bias reads 'y', whose elements have partial "
                       r"results on several PEs.*y\[0\] on PE\[3, 0\]"):
        plan(FC_BIAS_RELU, FC_BIAS_RELU_MAP)


def test_the_check_catches_tasks_that_skip_unsent_zeros(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "_runs_per_element", lambda stmt, flow: True)
    for lair, mapping in (SPARSE_ADD, SPARSE_MAX_POOL):
        with pytest.raises(DataFlowError, match="whose zeros are not sent, but a zero "
                                                "element changes its result"):
            plan(lair, mapping)


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("case", ["sparse_add", "sparse_max_pool", "idle_rows",
                                  "idle_columns"])
def test_fixed_cases_verify(tmp_path: Path, case: str, simd: bool) -> None:
    lair, mapping = {"sparse_add": SPARSE_ADD, "sparse_max_pool": SPARSE_MAX_POOL,
                     "idle_rows": (GEMV, IDLE_ROWS),
                     "idle_columns": (GEMV, IDLE_COLUMNS)}[case]
    for seed in (0, 1, 2):  # random integer inputs, zeros included
        outcome = run_program(write(tmp_path, lair, mapping), simd=simd, seed=seed)
        assert outcome.comparison.verified, outcome.comparison.mismatch


def test_sparse_elementwise_waits_for_the_whole_tensor() -> None:
    result = plan(*SPARSE_ADD, stop="tasks")
    assert result.tasks is not None
    assert result.tasks.buffered == ("a",)
    assert [t.name for t in result.tasks.tasks if t.kind == "compute"] == ["ew_local"]


def test_sparse_product_still_runs_per_element() -> None:
    result = plan(SPARSE_ADD[0].replace("a[i] + b[i]", "a[i] * b[i]"), SPARSE_ADD[1],
                  stop="tasks")
    assert result.tasks is not None
    assert [t.name for t in result.tasks.tasks if t.kind == "compute"] == ["ew_on_a"]


def test_partly_defined_output_is_rejected_at_its_statement() -> None:
    with pytest.raises(UnsupportedMappingError) as err:
        plan(*PARTIAL_OUTPUT)
    assert err.value.format().startswith(
        "prog.lair:3:3: error: output 'c': no instance of part defines c[4]")


# ------------------------------------------------------ altered plans


def gemv() -> Compilation:
    return compile_file(EXAMPLES / "gemv" / "gemv.lair")


def test_a_task_missing_instances_is_caught() -> None:
    result = gemv()
    assert result.tasks is not None and result.memory is not None
    tg = result.tasks
    task = next(t for t in tg.tasks if t.kind == "compute")
    assert task.instances is not None
    fewer = task.instances.intersect(isl.Set("[PE_X, PE_Y, index] -> { gemv[i, j] : i > 0 }"))
    altered = replace(tg, tasks=tuple(replace(t, instances=fewer) if t is task else t
                                      for t in tg.tasks))
    with pytest.raises(DataFlowError, match=r"does not run every instance of gemv.*"
                                            r"gemv\[0, 0\] on PE\[0, 0\]"):
        check_data_flow(altered, result.memory)


def test_a_task_reading_the_wrong_element_is_caught() -> None:
    result = gemv()
    assert result.tasks is not None and result.memory is not None
    tg = result.tasks
    task = next(t for t in tg.tasks if t.kind == "compute")
    assert task.instances is not None
    # Run on index v the instances of element v + 1 (and the last on index 0).
    shift = isl.Set("[PE_X, PE_Y, index] -> { gemv[i, j] : "
                    "(j mod 4 = index + 1) or (j mod 4 = 0 and index = 3) }")
    shifted = poly.bind_placement(tg.placement_of("gemv"), tg.model.statement("gemv").domain)
    shifted, shift = poly.align_params(shifted, shift)
    altered = replace(tg, tasks=tuple(replace(t, instances=shifted.intersect(shift))
                                      if t is task else t for t in tg.tasks))
    with pytest.raises(DataFlowError, match="on the arrival of another element of 'x'"):
        check_data_flow(altered, result.memory)


def test_a_local_array_too_small_is_caught() -> None:
    result = gemv()
    assert result.tasks is not None and result.memory is not None
    w = result.memory.of("W")
    assert w is not None
    small = replace(w, array=replace(w.array, box=replace(w.array.box, size=(8, 3))))
    memory = replace(result.memory, arrays=tuple(small if a is w else a
                                                for a in result.memory.arrays))
    with pytest.raises(DataFlowError, match=r"accesses elements of 'W' outside its local "
                                            r"array W_local.*W\[0, 3\] on PE\[0, 0\]"):
        check_data_flow(result.tasks, memory)


def test_a_missing_exchange_is_caught() -> None:
    result = plan("""
        lair mm(): float32 A[8][6], float32 B[6][8], float32 C[8][4]
          -> float32 E[8][4], float32 T[8][8]
        {
          ab: all (i, j, k) in (8, 8, 6) T[i][j] += A[i][k] * B[k][j]
          tc: all (i, l, j) in (8, 4, 8) E[i][l] += T[i][j] * C[j][l]
        }""", """
        rectangle { PE[2, 2] }
        placement { ab[i, j, k] -> PE[j//4, i//4]; tc[i, l, j] -> PE[l//2, i//4] }
        input A resident
        input B resident
        input C resident
        output E resident
    """)
    assert result.tasks is not None and result.memory is not None
    assert [ex.tensor for ex in result.tasks.exchanges] == ["T"]
    altered = replace(result.tasks, exchanges=())
    with pytest.raises(DataFlowError, match="tc reads elements of 'T' computed on another "
                                            "PE, and nothing delivers them"):
        check_data_flow(altered, result.memory)


def test_a_dropped_reduction_chain_is_caught() -> None:
    result = gemv()
    assert result.tasks is not None and result.memory is not None
    tg = result.tasks
    out = tg.outputs[0]
    assert out.chain
    altered = replace(tg, outputs=(replace(out, chain=False),))
    with pytest.raises(DataFlowError, match="leaves from one PE per element, but it has "
                                            "partial results on several PEs"):
        check_data_flow(altered, result.memory)


def skewed_sum() -> Compilation:
    return compile_file(EXAMPLES / "movement" / "skewed_sum.lair")


def test_a_banded_chain_passing_only_its_own_partials_is_caught() -> None:
    """A skewed band's PEs hold different elements: a chain whose blocks were each PE's
    own partial results would drop the elements the next PE does not compute."""
    result = skewed_sum()
    assert result.tasks is not None and result.memory is not None
    (red,) = result.tasks.reductions
    writers = result.tasks.model.statements[0]
    own = poly.elements_per_pe(result.tasks.placement_of(writers.name), writers.write,
                               writers.domain)
    altered = replace(result.tasks, reductions=(replace(red, elements=own),))
    with pytest.raises(DataFlowError, match="passes on elements the next PE does not hold"):
        check_data_flow(altered, result.memory)


def test_chain_positions_that_do_not_count_up_are_caught() -> None:
    result = skewed_sum()
    assert result.tasks is not None and result.memory is not None
    (red,) = result.tasks.reductions
    doubled = red.position.add(red.position)
    altered = replace(result.tasks, reductions=(replace(red, position=doubled),))
    with pytest.raises(DataFlowError, match="do not count up by one"):
        check_data_flow(altered, result.memory)


def test_a_chain_ending_early_is_caught() -> None:
    """Every PE a segment of its own (first and last): each keeps its own sums, none
    is a total."""
    result = skewed_sum()
    assert result.tasks is not None and result.memory is not None
    (red,) = result.tasks.reductions
    everyone = red.last.universe(red.last.get_space())
    first = red.position.sub(red.position)
    altered = replace(result.tasks, reductions=(replace(red, last=everyone, position=first),))
    with pytest.raises(DataFlowError, match="leave each total on exactly one PE"):
        check_data_flow(altered, result.memory)


# W enters dense from PE[1, 1] with indices 0, 1, 8, 9, ...: they skip 2 to 7.
GAPPED_DENSE = ("""
    lair prog(): float16 W[12][10], float16 x[10] -> float16 y[12]
    { S0: all (i, j) in (12, 10) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[1, 2] }
    placement { S0[i, j] -> PE[0, j//8] }
    input W dense { W[e0, e1] -> [PE[1, e1//8] -> index[8*(e0) + e1 mod 8]] :
                    0 <= e0 <= 11 and 0 <= e1 <= 9 }
    input x resident
    output y dense { y[e0] -> [PE[0, -1] -> index[e0]] : 0 <= e0 <= 11 }
    """)


def test_dense_stream_with_gaps_is_rejected_at_the_stream() -> None:
    with pytest.raises(UnsupportedMappingError) as err:
        plan(*GAPPED_DENSE)
    assert err.value.format().startswith(
        "prog.map:4:1: error: dense input 'W': the indices PE[1, 1] sends skip index[2]; a "
        "dense wavelet carries no index")


def test_the_check_catches_dense_streams_with_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "require_consecutive", lambda stream, tensor: None)
    with pytest.raises(DataFlowError, match="dense stream 'W' reaches a PE with indices that "
                                            r"are not consecutive.*index\[2\] on PE\[0, 1\]"):
        plan(*GAPPED_DENSE)


@pytest.mark.parametrize("change", ["stride", "base"])
def test_a_simd_operand_with_a_wrong_address_is_caught(change: str) -> None:
    from dtg.pe.ir import IBin, IConst

    result = gemv()
    assert result.tasks is not None and result.memory is not None
    assert result.decisions is not None
    name, decision = next((n, d) for n, d in result.decisions.items() if d.used)
    check_data_flow(result.tasks, result.memory, result.decisions)
    src = next(o for o in decision.srcs if o.kind == "array")
    assert src.base is not None
    wrong = (replace(src, strides=tuple(2 * s + 1 for s in src.strides)) if change == "stride"
             else replace(src, base=IBin("+", src.base, IConst(1))))
    altered = replace(decision, srcs=tuple(wrong if o is src else o for o in decision.srcs))
    with pytest.raises(DataFlowError, match="a SIMD operand addresses other elements of W_local"):
        check_data_flow(result.tasks, result.memory, {**result.decisions, name: altered})


def test_a_simd_box_that_misses_instances_is_caught() -> None:
    result = gemv()
    assert result.tasks is not None and result.memory is not None
    assert result.decisions is not None
    name, decision = next((n, d) for n, d in result.decisions.items() if d.used)
    assert decision.sizes is not None
    smaller = tuple(max(1, s - 1) for s in decision.sizes)
    altered = replace(decision, sizes=smaller, variants=(smaller,))
    with pytest.raises(DataFlowError, match="its SIMD instruction's box misses instances"):
        check_data_flow(result.tasks, result.memory, {**result.decisions, name: altered})


def test_box_hull_rejects_a_stride_isl_reports_wrongly() -> None:
    """isl 0.27 gives i0 stride 5 on this set, yet i0 takes 0, 1, 5 and 6: the box
    built on that stride missed i0 = 0 and the SIMD sums came out wrong."""
    from dtg.mapping import poly

    inner = isl.Set("[index, PE_Y] -> { [i0, i1] : 0 <= PE_Y <= 1 and 0 <= i1 <= 1 and "
                    "index - 21PE_Y - 3i0 <= 2i1 <= 1 + index - 21PE_Y - 3i0 and "
                    "-1 + 5index - 105PE_Y - 14i0 <= 10i1 <= 5index - 105PE_Y - 14i0 }")
    box = poly.set_box_hull(inner)
    assert box is not None
    hull = poly.box_set(box, inner.params())
    hull, inner = poly.align_params(hull, inner)
    assert inner.is_subset(hull)
