"""The mapping's lower bound (codegen.bound) against brute force and the simulator."""

from __future__ import annotations

import textwrap

import islpy as isl
import numpy as np
import pytest
from conftest import EXAMPLES

from dtg.codegen.bound import element_ops, mapping_bound
from dtg.codegen.driver import compile_file
from dtg.lair.frontend import program_from_text
from dtg.lair.interp import random_inputs
from dtg.mapping import poly
from dtg.pesim.fabric import FabricConfig


@pytest.mark.parametrize("body, ops", [
    ("y[i][j] += W[i][j] * x[j]", 1),  # one multiply-add
    ("y[i][j] max= W[i][j] * x[j]", 2),
    ("y[i][j] = W[i][j] + x[j]", 1),
    ("y[i][j] = max(W[i][j] + x[j], 0)", 2),
    ("y[i][j] = W[i][j]", 1),  # a copy still moves an element
    ("y[i][j] += -W[i][j] * x[j] + 1", 3),  # neg, multiply-add, accumulate
    ("y[i][j] = W[i][j] + W[i][j] * x[j] + x[j] * x[j]", 1),  # x[j] * x[j] is hoisted
    ("y[i][j] += 2 * x[j] * W[i][j]", 1),  # 2 * x[j] is hoisted out of i
])
def test_element_operations_per_instance(body: str, ops: int) -> None:
    program = program_from_text(textwrap.dedent(f"""
        lair t(): float16 W[4][4], float16 x[4] -> float16 y[4][4]
        {{ all (i, j) in (4, 4) {body} }}"""))
    assert element_ops(program.graph.statements[0]) == ops


def _brute_compute(path: str, zero: dict[str, np.ndarray] | None = None) -> int:
    """Busiest PE's element operations over the SIMD width, instance by instance; with
    ``zero``, skipping the instances of a ``+=`` whose read of a tensor there is zero."""
    c = compile_file(EXAMPLES / path, stop="mapping")
    config = FabricConfig()
    work: dict[tuple[int, ...], float] = {}
    for pstmt in c.program.model.statements:
        width = config.widest(c.program.graph.tensor(pstmt.stmt.target.tensor).dtype)
        placed = c.mapping.placement_of(pstmt.name)
        for instance in poly.points(pstmt.domain):
            env = dict(zip(pstmt.stmt.iterators, instance, strict=True))
            if zero and pstmt.stmt.op == "+=" and any(
                    zero[r.tensor][tuple(ix.evaluate(env) for ix in r.index)] == 0
                    for r in pstmt.stmt.reads if r.tensor in zero):
                continue
            single = pstmt.domain
            for k, v in enumerate(instance):
                single = single.fix_val(isl.dim_type.set, k,
                                        isl.Val.int_from_si(single.get_ctx(), v))
            (pe,) = poly.points(single.apply(placed))
            work[pe] = work.get(pe, 0.0) + element_ops(pstmt.stmt) / width
    return int(-(-max(work.values()) // 1))


@pytest.mark.parametrize("path", ["gemv/gemv.lair", "fc/ff.lair", "conv1d/conv1d.lair",
                                  "movement/gemv_uneven.lair", "movement/mlp.lair"])
def test_compute_term_is_the_busiest_pe_by_brute_force(path: str) -> None:
    c = compile_file(EXAMPLES / path, stop="mapping")
    bound = mapping_bound(c.program.model, c.mapping)
    assert bound.as_dict()["compute"]["cycles"] == _brute_compute(path)


def test_zeros_of_a_sparse_stream_count_no_work_and_no_wavelet() -> None:
    """gemm streams A sparse: an instance of prod (P += A * B) with A's element zero
    needs no work, and the zero is not sent; the bound for those values knows."""
    c = compile_file(EXAMPLES / "polybench" / "gemm.lair", stop="mapping")
    inputs = random_inputs(c.program.graph, 3, low=-3, high=3)
    a = inputs["A"]
    assert (a == 0).any() and (a != 0).any()
    for values in (a, np.zeros_like(a)):
        b = mapping_bound(c.program.model, c.mapping, data={**inputs, "A": values}).as_dict()
        assert b["compute"]["cycles"] == _brute_compute("polybench/gemm.lair", {"A": values})
        # A[i][k] enters at PE[-1, i//5]: the nonzero ones of the busiest row block
        rows = [int(np.count_nonzero(values[5 * y:5 * y + 5])) for y in range(4)]
        assert b["injection"]["cycles"] == max(rows)
    every = mapping_bound(c.program.model, c.mapping).as_dict()
    assert every["compute"]["cycles"] == _brute_compute("polybench/gemm.lair")
    assert every["injection"]["cycles"] == 5 * 30


def test_gemv_and_conv2d_terms() -> None:
    gemv = compile_file(EXAMPLES / "gemv" / "gemv.lair", stop="mapping")
    b = mapping_bound(gemv.program.model, gemv.mapping).as_dict()
    # 8 x 4 multiply-adds per PE at width 4; x sends 4 and y receives 8 per external PE;
    # y[31] leaves PE[0, 3] for PE[4, 3]: 4 hops.
    assert (b["compute"]["cycles"], b["injection"]["cycles"], b["latency"]["cycles"]) == (
        8, 8, 4)
    # PE[0, 3]: x needs 4 hops to reach it, then 8 cycles of compute, then its y 4 hops east
    assert b["path"]["cycles"] == 16 and b["dominant"] == "path"
    assert b["path"]["where"].startswith("PE[0, 3]")
    conv = compile_file(EXAMPLES / "conv2d" / "conv2d.lair", stop="mapping")
    b = mapping_bound(conv.program.model, conv.mapping).as_dict()
    assert b["compute"]["cycles"] == 441  # 1764 / 4
    # PE[0, 1] is 2 hops from x's source; y stays resident
    assert b["path"]["cycles"] == 443 and b["dominant"] == "path"
