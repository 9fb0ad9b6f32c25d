"""The mapping's lower bound (codegen.bound) against brute force and the simulator."""

from __future__ import annotations

import textwrap
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from conftest import EXAMPLES

from dtg.codegen import bound as bound_module
from dtg.codegen.bound import count_pieces, element_cycles, element_ops, mapping_bound
from dtg.codegen.driver import compile_file
from dtg.lair.frontend import program_from_text
from dtg.lair.graph import Read
from dtg.lair.interp import random_inputs
from dtg.mapping import poly
from dtg.pe.fabric import PRESETS, FabricConfig
from dtg.pesim.run import run_program


@pytest.mark.parametrize("body, ops", [
    ("y[i][j] += W[i][j] * x[j]", 1),  # one multiply-add
    ("y[i][j] max= W[i][j] * x[j]", 2),
    ("y[i][j] = W[i][j] + x[j]", 1),
    ("y[i][j] = max(W[i][j] + x[j], 0)", 2),
    ("y[i][j] = W[i][j]", 1),  # a copy still moves an element
    ("y[i][j] += -W[i][j] * x[j] + 1", 3),  # neg, multiply-add, accumulate
    ("y[i][j] = W[i][j] + W[i][j] * x[j] + x[j] * x[j]", 1),  # x[j] * x[j] is hoisted
    ("y[i][j] += 2 * x[j] * W[i][j]", 1),  # 2 * x[j] is hoisted out of i
    ("y[i][j] += W[i][j] * x[j] + x[j] * W[i][j]", 2),  # two multiply-adds
    ("y[i][j] += 2 * W[i][j] + 3 * W[i][j]", 2),  # likewise, by constants
    ("y[i][j] += W[i][j] * x[j] - x[j] * W[i][j]", 3),  # the second apart, subtracted
])
def test_element_operations_per_instance(body: str, ops: int) -> None:
    program = program_from_text(textwrap.dedent(f"""
        lair t(): float16 W[4][4], float16 x[4] -> float16 y[4][4]
        {{ all (i, j) in (4, 4) {body} }}"""))
    assert element_ops(program.graph.statements[0]) == ops


FIXED = FabricConfig().simd_config + FabricConfig().simd_startup  # 8 + 4


def _least(simd: float, scalar: float, copies: float = 0.0, *, fixed: bool = True) -> int:
    """A PE's least compute: its arithmetic with one SIMD configuration and start-up
    (without them in the path term), or scalar (one operation per element operation),
    whichever is less; copies count nothing."""
    overhead = FIXED if fixed else 0
    return int(-(-(min(scalar, overhead + simd) if simd else 0.0) // 1))


def _brute_compute(path: str, zero: dict[str, np.ndarray] | None = None) -> int:
    """Busiest PE's least compute (:func:`_least`), instance by instance; with ``zero``,
    skipping the instances of a ``+=`` whose read of a tensor there is zero."""
    c = compile_file(EXAMPLES / path, stop="mapping")
    config = FabricConfig()
    work: dict[tuple[int, ...], list[float]] = {}  # SIMD, scalar, copies
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
            per = work.setdefault(pe, [0.0, 0.0, 0.0])
            if _free(c, pstmt.stmt):
                per[2] += element_ops(pstmt.stmt) / width
            else:
                per[0] += element_ops(pstmt.stmt) / width
                per[1] += element_ops(pstmt.stmt)
    return max(_least(*per) for per in work.values())


def _free(c: object, stmt: object) -> bool:
    """A copy from a streamed input, to a streamed output, or at the same index."""
    from dtg.lair.graph import Read
    if stmt.op != "=" or not isinstance(stmt.value, Read):  # type: ignore[attr-defined]
        return False
    directions = {s.tensor: s.direction for s in c.mapping.streams}  # type: ignore[attr-defined]
    source, target = stmt.value.tensor, stmt.target  # type: ignore[attr-defined]
    return directions.get(source) == "input" or directions.get(target.tensor) == "output" \
        or stmt.access(source).index == target.index  # type: ignore[attr-defined]


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
    # 8 x 4 multiply-adds per PE at width 4 (8 cycles), one configuration and start-up
    # (12; 32 scalar operations would take more); x sends 4 and y receives 8 per external
    # PE; y[31] leaves PE[0, 3] for PE[4, 3]: 4 hops.
    assert (b["compute"]["cycles"], b["injection"]["cycles"], b["latency"]["cycles"]) == (
        20, 8, 4)
    # PE[0, 3]: x needs 4 hops to reach it, then 8 cycles of multiply-adds (the set-up
    # may pass while x travels), then its y 4 hops
    assert b["path"]["cycles"] == 16 and b["dominant"] == "compute"
    assert b["path"]["where"].startswith("PE[0, 3]")
    conv = compile_file(EXAMPLES / "conv2d" / "conv2d.lair", stop="mapping")
    b = mapping_bound(conv.program.model, conv.mapping).as_dict()
    assert b["compute"]["cycles"] == 441 + 12  # 1764 / 4
    # PE[0, 1] is 2 hops from x's source; y stays resident
    assert b["path"]["cycles"] == 443 and b["dominant"] == "compute"


SHARED_INPUT_LINK = ("""
    lair add(): float16 a[16], float16 b[16] -> float16 c[16]
    { all (i) in (16) c[i] = a[i] + b[i] }
    """, """
    rectangle { PE[1, 1] }
    placement { add[i] -> PE[0, 0] }
    input  a dense { a[i = 0:15] -> [PE[0, -1] -> index[i]] }
    input  b dense { b[i = 0:15] -> [PE[0, -1] -> index[i]] }
    output c dense { c[i = 0:15] -> [PE[1, 0] -> index[i]] }
    """, ((0, -1), (0, 0)), "input a 16 + b 16 at PE[0, -1]")
SHARED_OUTPUT_LINK = ("""
    lair two(): float16 a[16] -> float16 c[16], float16 d[16]
    {
      S1: all (i) in (16) c[i] = a[i] + 1
      S2: all (i) in (16) d[i] = a[i] * 2
    }
    """, """
    rectangle { PE[1, 1] }
    placement { S1[i] -> PE[0, 0]; S2[i] -> PE[0, 0] }
    input  a dense { a[i = 0:15] -> [PE[0, -1] -> index[i]] }
    output c dense { c[i = 0:15] -> [PE[1, 0] -> index[i]] }
    output d dense { d[i = 0:15] -> [PE[1, 0] -> index[i]] }
    """, ((0, 0), (1, 0)), "output c 16 + d 16 at PE[1, 0]")


@pytest.mark.parametrize("lair, mapping, link, where", [SHARED_INPUT_LINK, SHARED_OUTPUT_LINK],
                         ids=["two inputs", "two outputs"])
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_streams_through_one_external_pe_share_its_link(
        tmp_path: Path, lair: str, mapping: str, link: tuple[tuple[int, int], tuple[int, int]],
        where: str, simd: bool) -> None:
    """Two streams of 16 through one external PE put 32 wavelets on its link: the
    injection term counts them together, and the simulated run carries them all there
    (plus end marks) and takes at least as long."""
    (tmp_path / "p.lair").write_text(textwrap.dedent(lair))
    (tmp_path / "p.map").write_text(textwrap.dedent(mapping))
    c = compile_file(tmp_path / "p.lair", stop="mapping")
    injection = mapping_bound(c.program.model, c.mapping).as_dict()["injection"]
    assert injection == {"cycles": 32, "where": where}
    outcome = run_program(tmp_path / "p.lair", simd=simd)
    assert outcome.comparison.verified
    assert outcome.result.links[link] >= 32
    assert outcome.bound is not None and outcome.bound.cycles >= 32
    assert outcome.result.cycles >= outcome.bound.cycles, outcome.bound.describe()


def test_an_input_and_an_output_through_one_pe_use_two_links(tmp_path: Path) -> None:
    """A link carries one direction: what enters from PE[1, 0] and what leaves to it do
    not add up."""
    (tmp_path / "p.lair").write_text(textwrap.dedent("""
        lair twice(): float16 a[16] -> float16 c[16]
        { all (i) in (16) c[i] = 2 * a[i] }
        """))
    (tmp_path / "p.map").write_text(textwrap.dedent("""
        rectangle { PE[1, 1] }
        placement { twice[i] -> PE[0, 0] }
        input  a dense { a[i = 0:15] -> [PE[1, 0] -> index[i]] }
        output c dense { c[i = 0:15] -> [PE[1, 0] -> index[i]] }
        """))
    c = compile_file(tmp_path / "p.lair", stop="mapping")
    injection = mapping_bound(c.program.model, c.mapping).as_dict()["injection"]
    assert injection == {"cycles": 16, "where": "input a at PE[1, 0]"}
    outcome = run_program(tmp_path / "p.lair")
    assert outcome.comparison.verified
    assert outcome.result.links[((1, 0), (0, 0))] >= 16
    assert outcome.result.links[((0, 0), (1, 0))] >= 16
    assert outcome.bound is not None
    assert outcome.result.cycles >= outcome.bound.cycles, outcome.bound.describe()


def _brute_per_pe(path: str) -> tuple[dict[tuple[int, ...], dict[str, float]], object]:
    """Each PE's SIMD cycles per statement, instance by instance."""
    c = compile_file(EXAMPLES / path, stop="mapping")
    config = FabricConfig()
    work: dict[tuple[int, ...], dict[str, float]] = {}
    for pstmt in c.program.model.statements:
        dtype = c.program.graph.tensor(pstmt.stmt.target.tensor).dtype
        cycles = element_cycles(pstmt.stmt, dtype, config)
        placed = c.mapping.placement_of(pstmt.name).intersect_domain(pstmt.domain)
        for pair in poly.points(placed.wrap()):
            per = work.setdefault(pair[-2:], {})
            per[pstmt.name] = per.get(pstmt.name, 0.0) + cycles
    return work, c


@pytest.mark.parametrize("path", ["gemv/gemv.lair", "movement/gemv_uneven.lair",
                                  "movement/gemv_two_sides.lair", "movement/mlp.lair",
                                  "movement/skewed_sum.lair", "fc/train.lair",
                                  "polybench/mvt.lair"])
def test_path_term_is_the_longest_pe_by_brute_force(path: str) -> None:
    """The bound finds the longest path over sets of PEs with equal work, by isl: the
    same as trying every PE with every external PE."""
    work, c = _brute_per_pe(path)
    streams = {s.tensor: s for s in c.mapping.streams}
    ends = {t: [pair[-2:] for pair in poly.points(s.external_pes.wrap())]
            for t, s in streams.items()}

    def hops(pe: tuple[int, ...], tensor: str) -> int:
        return min(abs(pe[0] - x) + abs(pe[1] - y) for x, y in ends[tensor])

    longest = 0
    for pe, per_stmt in work.items():
        starts, finishes = [], []
        for name in per_stmt:
            stmt = c.program.model.statement(name).stmt
            inputs = [r.tensor for r in stmt.reads if r.tensor in streams
                      and streams[r.tensor].direction == "input"]
            starts.append(max((hops(pe, t) for t in inputs), default=0))
            out = streams.get(stmt.target.tensor)
            finishes.append(hops(pe, stmt.target.tensor)
                            if out is not None and out.direction == "output" else 0)
        longest = max(longest, min(starts) + _pe_least(c, per_stmt, fixed=False) +
                      min(finishes))
    assert mapping_bound(c.program.model, c.mapping).as_dict()["path"]["cycles"] == longest


def _brute_ramp(c: object, values: dict[str, np.ndarray] | None = None) -> int:
    """The most streamed-input elements any PE reads, but for copies to a streamed
    output, instance by instance (a sparse stream's nonzero ones, given ``values``)."""
    model, mapping = c.program.model, c.mapping  # type: ignore[attr-defined]
    read: dict[tuple[int, ...], set[tuple[str, tuple[int, ...]]]] = {}
    inputs = {s.tensor: s for s in mapping.streams if s.direction == "input"}
    outputs = {s.tensor for s in mapping.streams if s.direction == "output"}
    for pstmt in model.statements:
        stmt = pstmt.stmt
        if stmt.op == "=" and isinstance(stmt.value, Read) and stmt.target.tensor in outputs:
            continue  # (a copy to a streamed output may pass the core by)
        placed = mapping.placement_of(pstmt.name).intersect_domain(pstmt.domain)
        for tensor in {r.tensor for r in pstmt.stmt.reads if r.tensor in inputs}:
            access = pstmt.access(tensor).intersect_domain(pstmt.domain)
            pairs = placed.reverse().apply_range(access)  # PE -> element
            for pair in poly.points(pairs.wrap()):
                element = tuple(pair[2:])
                if values is not None and inputs[tensor].kind == "sparse" and \
                        values[tensor][element] == 0:
                    continue
                read.setdefault(tuple(pair[:2]), set()).add((tensor, element))
    return max((len(e) for e in read.values()), default=0)


@pytest.mark.parametrize("path", ["gemv/gemv.lair", "movement/gemv_two_sides.lair",
                                  "movement/mlp.lair", "movement/skewed_sum.lair",
                                  "conv2d/conv2d.lair", "conv2d_degenerate/conv2d_degenerate.lair",
                                  "polybench/gemm.lair", "fc/train.lair"])
def test_ramp_term_is_the_most_elements_a_pe_reads_by_brute_force(path: str) -> None:
    c = compile_file(EXAMPLES / path, stop="mapping")
    assert mapping_bound(c.program.model, c.mapping).as_dict()["ramp"]["cycles"] == \
        _brute_ramp(c)


LITTLE_WORK = ("""
    lair small(): float16 a[4], float16 b[4] -> float16 c[4], float16 d[4]
    {
      S1: all (i) in (4) c[i] = a[i] * b[i]
      S2: all (i) in (4) d[i] = a[i]
    }
    """, """
    rectangle { PE[1, 1] }
    placement { S1[i] -> PE[0, 0]; S2[i] -> PE[0, 0] }
    input  a resident
    input  b resident
    output c resident
    output d resident
    """)


def test_little_arithmetic_counts_scalar_and_copies_count_nothing(tmp_path: Path
                                                                       ) -> None:
    """Four products and four copies at the same index: one SIMD configuration and
    start-up (12 + 1) cost more than four scalar multiplications, so the least compute
    is 4; the copies add nothing (a copy at the same index may share its source's
    array)."""
    path = tmp_path / "small.lair"
    path.write_text(textwrap.dedent(LITTLE_WORK[0]))
    path.with_suffix(".map").write_text(textwrap.dedent(LITTLE_WORK[1]))
    c = compile_file(path, stop="mapping")
    b = mapping_bound(c.program.model, c.mapping).as_dict()
    assert b["compute"]["cycles"] == 4
    outcome = run_program(path, seed=1)
    assert outcome.comparison.verified and outcome.result.cycles >= 4


def test_ramp_term_counts_a_sparse_streams_nonzero_elements() -> None:
    c = compile_file(EXAMPLES / "conv2d_degenerate" / "conv2d_degenerate.lair", stop="mapping")
    inputs = random_inputs(c.program.graph, 5, low=-2, high=2)
    assert (inputs["x"] == 0).any()
    b = mapping_bound(c.program.model, c.mapping, data=inputs).as_dict()
    assert b["ramp"]["cycles"] == _brute_ramp(c, inputs) < _brute_ramp(c)


TWO_STREAMS = ("""
    lair dot(): float16 a[64], float16 b[64] -> float16 s[1]
    { all (i) in (64) s[0] += a[i] * b[i] }
    """, """
    rectangle { PE[4, 1] }
    placement { dot[i] -> PE[i//16, 0] }
    input  a dense { a[i = 0:63] -> [PE[i//16, -1] -> index[i mod 16]] }
    input  b dense { b[i = 0:63] -> [PE[i//16, 1] -> index[i mod 16]] }
    output s dense { s[k = 0:0] -> [PE[4, 0] -> index[k]] }
    """)


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_two_streams_into_one_core_share_its_ramp(tmp_path: Path, simd: bool) -> None:
    """a and b enter each PE from two sides, 16 elements each over links of their own;
    both go down one ramp into the core: 32 cycles at least, more than either link."""
    path = tmp_path / "dot.lair"
    path.write_text(textwrap.dedent(TWO_STREAMS[0]))
    path.with_suffix(".map").write_text(textwrap.dedent(TWO_STREAMS[1]))
    outcome = run_program(path, seed=1, simd=simd)
    assert outcome.comparison.verified
    b = outcome.bound
    assert b is not None
    terms = b.as_dict()
    assert terms["injection"]["cycles"] == 16 and terms["ramp"]["cycles"] == 32
    assert terms["dominant"] == "ramp" and terms["ramp"]["where"] == "a 16 + b 16 into PE[0, 0]"
    assert outcome.result.cycles >= b.cycles


def _pe_least(c: object, per_stmt: dict[str, float], *, fixed: bool = True) -> int:
    """:func:`_least` of a PE's SIMD cycles per statement."""
    model = c.program.model  # type: ignore[attr-defined]
    graph = c.program.graph  # type: ignore[attr-defined]
    simd = scalar = copies = 0.0
    for name, cycles in per_stmt.items():
        stmt = model.statement(name).stmt
        if _free(c, stmt):
            copies += cycles
            continue
        dtype = graph.tensor(stmt.target.tensor).dtype
        simd += cycles
        scalar += cycles * element_ops(stmt) / element_cycles(stmt, dtype, FabricConfig())
    return _least(simd, scalar, copies, fixed=fixed)


def test_a_huge_mesh_is_counted_by_tiles_not_by_pes() -> None:
    """gemv with N = 65,536 on PE[16384, 4]: every PE holds an 8 x 4 tile, so isl gives
    one set of PEs with equal work and the bound never lists the PEs (issue 25: the
    compile report took minutes, and N = 10^6 grew without bound)."""
    c = compile_file(EXAMPLES / "gemv" / "gemv.lair", str(EXAMPLES / "gemv" / "gemv.tiled.map"),
                     {"N": 65536}, stop="mapping")
    assert (c.mapping.width, c.mapping.height) == (16384, 4)
    (pstmt,) = c.program.model.statements
    placed = c.mapping.placement_of(pstmt.name).intersect_domain(pstmt.domain)
    pieces = count_pieces(placed.reverse())
    assert pieces is not None and [count for _, count in pieces] == [32]
    b = mapping_bound(c.program.model, c.mapping).as_dict()
    # 32 multiply-adds at width 4, one configuration and start-up
    assert b["compute"] == {"cycles": 8 + 12, "where": "PE[0, 0]"}
    assert b["injection"] == {"cycles": 8, "where": "output y at PE[16384, 0]"}
    assert b["latency"] == {"cycles": 16384, "where": "output y: 16384 hops"}
    # PE[0, 3]: x needs 4 hops, then 8 cycles of compute, then y travels 16384 hops east
    assert b["path"]["cycles"] == 4 + 8 + 16384
    assert b["path"]["where"].startswith("PE[0, 3]: 4 cycles for the first input")


def test_pes_counted_one_by_one_stop_at_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A skewed placement (instances of a PE are not a box) is counted PE by PE; past
    the budget only the first PEs count, which still gives a lower bound."""
    work, c = _brute_per_pe("movement/skewed_sum.lair")
    full = mapping_bound(c.program.model, c.mapping).as_dict()["compute"]["cycles"]
    assert full == max(_pe_least(c, w) for w in work.values())
    monkeypatch.setattr(bound_module, "MAX_LISTED_PES", 1)
    sampled = mapping_bound(c.program.model, c.mapping).as_dict()["compute"]
    first = min(work)
    assert sampled["where"] == f"PE[{first[0]}, {first[1]}]"
    assert sampled["cycles"] == _pe_least(c, work[first]) <= full


def test_zeros_too_many_to_list_count_no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the instances the bound may list to find the zeros' skipped work, that
    statement's work is not counted: the bound stays a lower bound (never above the
    count with the zeros known)."""
    c = compile_file(EXAMPLES / "polybench" / "gemm.lair", stop="mapping")
    inputs = random_inputs(c.program.graph, 3, low=-3, high=3)
    known = mapping_bound(c.program.model, c.mapping, data=inputs).as_dict()
    monkeypatch.setattr(bound_module, "NONVANISHING_LIMIT", 10)
    unlisted = mapping_bound(c.program.model, c.mapping, data=inputs).as_dict()
    assert unlisted["compute"]["cycles"] < known["compute"]["cycles"]
    assert unlisted["injection"] == known["injection"]


def test_zeros_are_counted_where_only_the_instances_fit_the_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sum pooling tiled over PEs: each instance's PE and element are functions of it
    (floors of its iterators), so the instances, not the bounding box of instance, PE
    and element together (2,048 times larger here), decide whether they can be listed
    to find the zeros' skipped work."""
    (tmp_path / "p.lair").write_text(textwrap.dedent("""\
        lair pool(): float32 x[2][16][16] -> float32 y[2][8][8]
        { all (c, i, j, a, b) in (2, 8, 8, 2, 2) y[c][i][j] += x[c][2 * i + a][2 * j + b] }
        """))
    (tmp_path / "p.map").write_text(textwrap.dedent("""\
        rectangle { PE[2, 2] }
        placement { pool[c, i, j, a, b] -> PE[j//4, i//4] }
        input  x sparse { x[c = 0:1, r = 0:15, q = 0:15] -> [PE[q//8, -1] -> index[c, r, q mod 8]] }
        output y resident
        """))
    c = compile_file(tmp_path / "p.lair", stop="mapping")
    inputs = random_inputs(c.program.graph, 5, low=-2, high=2)
    x = inputs["x"]
    assert (x == 0).any() and (x != 0).any()
    known = mapping_bound(c.program.model, c.mapping, data=inputs).as_dict()["compute"]
    # (each PE reads an 8 x 8 block of every channel once: its nonzero elements' additions)
    busiest = max(int(np.count_nonzero(x[:, 8 * py:8 * py + 8, 8 * px:8 * px + 8]))
                  for px in range(2) for py in range(2))
    assert known["cycles"] == min(busiest, FabricConfig().simd_config
                                  + FabricConfig().simd_startup
                                  + -(-busiest // FabricConfig().widest("float32")))
    monkeypatch.setattr(bound_module, "NONVANISHING_LIMIT", 512)
    listed = mapping_bound(c.program.model, c.mapping, data=inputs).as_dict()["compute"]
    assert listed == known


# Internal tensors crossing the mesh: an activation computed on the east half and read
# on the west half, and a transpose between two placements.
CROSSING = {
    "halves": ("""
        lair act(): float16 x[8][16] -> float16 u[8][16]
        { all (i, j) in (8, 16) u[i][j] = x[i][j] * 2 }
        lair use(): float16 u[8][16] -> float16 y[8][16]
        { all (i, j) in (8, 16) y[i][j] = u[i][j] + 1 }
        """, """
        rectangle { PE[4, 2] }
        placement { act[i, j] -> PE[2 + j//8, i//4]; use[i, j] -> PE[j//8, i//4] }
        input  x resident
        output y dense { y[i = 0:7, j = 0:15] -> [PE[-1, i//4] -> index[i mod 4, j]] }
        """),
    "transpose": ("""
        lair scale(): float16 A[8][8] -> float16 T[8][8]
        { all (i, j) in (8, 8) T[i][j] = A[i][j] * 2 }
        lair addt(): float16 T[8][8] -> float16 B[8][8]
        { all (j, i) in (8, 8) B[j][i] = T[i][j] + 1 }
        """, """
        rectangle { PE[2, 2] }
        placement { scale[i, j] -> PE[j//4, i//4]; addt[j, i] -> PE[i//4, j//4] }
        input  A resident
        output B resident
        """),
}


def _brute_cut(c: object) -> int:
    """Over every line between two columns or rows and both ways: the elements whose
    writers all lie on one side and a reader (or a streamed output's external PE) on
    the other, over the line's links; element by element."""
    model, mapping = c.program.model, c.mapping  # type: ignore[attr-defined]
    best = 0
    for tensor in model.graph.tensors:
        if model.graph.definer(tensor.name) is None:
            continue
        writers: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        readers: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        for write, table in ((True, writers), (False, readers)):
            rel = bound_module.accessing_pes(model, mapping, tensor.name, write=write)
            for p in poly.points(rel.wrap()):
                n = len(p) - 2
                table.setdefault(tuple(p[:n]), set()).add(tuple(p[n:]))
        for stream in mapping.streams:
            if stream.tensor == tensor.name and stream.direction == "output":
                for p in poly.points(stream.external_pes.wrap()):
                    n = len(p) - 2
                    readers.setdefault(tuple(p[:n]), set()).add(tuple(p[n:]))
        for axis, lines, links in ((0, mapping.width, mapping.height),
                                   (1, mapping.height, mapping.width)):
            for line in range(lines - 1):
                for low in (True, False):
                    count = sum(1 for e, ws in writers.items()
                                if all((w[axis] <= line) == low for w in ws)
                                and any((r[axis] <= line) != low for r in readers.get(e, ())))
                    best = max(best, -(-count // links))
    return best


@pytest.mark.parametrize("name", sorted(CROSSING))
def test_cut_term_counts_what_must_cross_by_brute_force(tmp_path: Path, name: str) -> None:
    from conftest import write_pair

    path = write_pair(tmp_path, *CROSSING[name])
    c = compile_file(path)
    cut = mapping_bound(c.program.model, c.mapping).as_dict()["cut"]["cycles"]
    assert cut == _brute_cut(c) > 0
    outcome = run_program(path, seed=1)
    assert outcome.comparison.verified and outcome.result.cycles >= cut


@pytest.mark.parametrize("path", ["movement/mlp.lair", "polybench/3mm.lair",
                                  "movement/skewed_sum.lair", "fc/train.lair"])
def test_cut_term_of_examples_by_brute_force(path: str) -> None:
    c = compile_file(EXAMPLES / path)
    assert mapping_bound(c.program.model, c.mapping).as_dict()["cut"]["cycles"] == \
        _brute_cut(c)


@pytest.mark.parametrize("fabric", ["paper", "wse2", "wse3"])
@pytest.mark.parametrize("value", ["A[i][j] * x[j] + B[i][j] * z[j]",
                                   "2 * A[i][j] + 3 * B[i][j]",
                                   "A[i][j] * x[j] - B[i][j] * z[j]"])
def test_a_sum_of_products_accumulated_runs_no_faster_than_its_bound(
        tmp_path: Path, value: str, fabric: str) -> None:
    """A helper's ``y += A x + B z`` on one PE ran 536 cycles against a bound of 768: the
    bound counted an addition besides the two multiply-adds, which carry the
    accumulation between them. On every fabric preset the run is at or above it."""
    (tmp_path / "p.lair").write_text(
        "lair sp(): float32 A[4][64], float32 B[4][64], float32 x[64], float32 z[64] "
        f"-> float32 y[4]\n{{ all (i, j) in (4, 64) y[i] += {value} }}\n")
    (tmp_path / "p.map").write_text(
        "rectangle { PE[1, 1] }\nplacement { sp[i, j] -> PE[0, 0] }\n"
        "input A resident\ninput B resident\ninput x resident\ninput z resident\n"
        "output y resident\n")
    outcome = run_program(tmp_path / "p.lair", config=PRESETS[fabric])
    assert outcome.comparison.verified and outcome.bound is not None
    assert outcome.bound.cycles <= outcome.result.cycles <= 1.2 * outcome.bound.cycles
