"""The back end on the paper's running example: task graph, memory and SIMD, by meaning."""

from __future__ import annotations

import json
import textwrap
from functools import cache
from pathlib import Path

import islpy as isl
import pytest
from conftest import EXAMPLES, ROOT

from dtg.codegen.driver import compile_file, main
from dtg.codegen.pipeline import Compilation
from dtg.codegen.report import compile_report
from dtg.errors import UnsupportedMappingError
from dtg.lair.frontend import program_from_text
from dtg.mapping.spec import parse_mapping
from dtg.mapping.tasks import build_task_graph
from dtg.mapping.validate import validate_mapping
from dtg.pe.ir import SetInt
from dtg.pe.printer import module as print_module
from dtg.pe.printer import task as task_text
from dtg.pesim.run import run_program

PARAMS = "[PE_X, PE_Y, index]"


def same(a: isl.Set | isl.Map, b: isl.Set | isl.Map) -> bool:
    a, b = a.align_params(b.get_space()), b.align_params(a.get_space())
    return bool(a.is_equal(b))


@cache
def ff() -> Compilation:
    return compile_file(EXAMPLES / "fc" / "ff.lair")


def test_peeling_shifts_the_specs_as_eqs_5_6_and_10() -> None:
    tg = ff().tasks
    assert tg is not None
    assert (tg.compute.x0, tg.compute.y0, tg.compute.width, tg.compute.height) == (0, 1, 4, 4)
    x = tg.input_flow("x")
    y = tg.output_flow("y")
    assert x is not None and x.adapter is not None and y is not None
    assert same(x.relation, isl.Map("{ x[i = 0:15] -> [PE[i//4, -1] -> index[i mod 4]] }"))
    assert same(y.relation, isl.Map("{ y[i = 0:31] -> [PE[4, i//8] -> index[i mod 8]] }"))
    assert same(tg.placement_of("ff"), isl.Map("{ ff[i = 0:31, j = 0:15] -> PE[j//4, i//8] }"))
    assert y.chain


def test_compute_task_instances_are_eq_12() -> None:
    tg = ff().tasks
    assert tg is not None
    (task,) = [t for t in tg.tasks if t.kind == "compute"]
    assert task.trigger == "x" and task.instances is not None
    eq12 = isl.Set(f"{PARAMS} -> {{ ff[i = 0:31, j = index] : 0 <= index <= 15 and "
                   "PE_X = floor(index/4) and 8PE_Y <= i <= 7 + 8PE_Y }")
    assert same(task.instances, eq12)


def test_local_memory_of_y_is_eqs_7_to_9() -> None:
    memory = ff().memory
    assert memory is not None
    y = memory.of("y")
    assert y is not None and y.size == (8,) and y.bytes == 16
    assert same(y.array.per_pe, isl.Map("{ PE[0:3, i1 = 0:3] -> y[i = 0:31] : "
                                        "8i1 <= i <= 7 + 8i1 }"))
    assert same(isl.Map.from_multi_aff(y.array.to_local),
                isl.Map("{ [PE[i0, i1] -> y[i]] -> y_local[-8i1 + i] }"))
    assert same(isl.Map.from_multi_aff(y.array.to_local_bound),
                isl.Map("[PE_Y] -> { y[i] -> y_local[-8PE_Y + i] }"))


def test_simd_decision_for_ff_is_the_size_8_box() -> None:
    decisions = ff().decisions
    assert decisions is not None
    d = decisions["ff_on_x"]
    assert d.used and d.op == "fmac" and d.sizes == (8,)
    assert d.case == "compressed"  # eq. (18): the compression drops j = index
    assert d.compression is not None
    assert same(d.compression, isl.Map(f"{PARAMS} -> {{ [i0] -> ff[i0, index] }}"))
    assert d.dst is not None and d.dst.strides == (1,)
    assert d.srcs[0].array == "W_local" and d.srcs[0].strides == (4,)


def test_report_json_loads_back_by_meaning(tmp_path: Path, cli) -> None:
    report = tmp_path / "ff.json"
    # (the paper's per-wavelet code: eq. (12) is one wavelet's instances)
    assert cli(main, EXAMPLES / "fc" / "ff.lair", "--emit=simd", "--arrival=per-wavelet",
               "--report", report).status == 0
    data = json.loads(report.read_text())
    (task,) = [t for t in data["tasks"] if t["kind"] == "compute"]
    assert task["simd"]["used"] and task["simd"]["sizes"] == [8]
    assert task["simd"]["case"] in ("base", "compressed")
    eq12 = isl.Set(f"{PARAMS} -> {{ ff[i = 0:31, j = index] : 0 <= index <= 15 and "
                   "PE_X = floor(index/4) and 8PE_Y <= i <= 7 + 8PE_Y }")
    assert same(isl.Set(task["instances"]), eq12)
    (y,) = [m for m in data["memory"] if m["tensor"] == "y"]
    assert y["size"] == [8] and y["bytes"] == 16
    assert same(isl.Map(y["offset"]), isl.Map("[PE_Y] -> { y[i] -> y_local[-8PE_Y + i] }"))
    assert {t["kind"] for t in data["tasks"]} == {"compute", "communication", "init"}
    assert "compile_seconds" not in data  # (identical compiles give identical reports)
    assert "memory_bytes_per_pe" not in data  # (known with the code: landing arrays too)
    assert compile_report(ff())["memory"] == data["memory"]
    (x,) = data["flows"]["inputs"]
    assert (x["tensor"], x["side"], x["route"]) == ("x", "N", "adapters")
    # 32 x 16 multiply-adds on 4 x 4 compute PEs: 32 per PE at width 4, with one SIMD
    # configuration and start-up (8 + 4); x enters at one PE.
    assert data["bound"]["compute"] == {"cycles": 20, "where": "PE[0, 1]"}  # row 0: adapters
    assert data["bound"]["injection"]["cycles"] == 16
    # PE[0, 4]: x's first element needs 5 hops, then 8 cycles (the SIMD set-up may pass
    # while x travels), then y 4 hops east
    assert data["bound"]["path"]["cycles"] == 17
    assert data["bound"]["dominant"] == "compute" and data["bound"]["cycles"] == 20


def test_report_says_which_tree_the_planner_chose(tmp_path: Path, cli) -> None:
    report = tmp_path / "r.json"
    path = EXAMPLES / "movement" / "gemv_one_entry.lair"
    assert cli(main, path, "--emit=simd", "--report", report).status == 0
    (x,) = json.loads(report.read_text())["flows"]["inputs"]
    assert x["route"].startswith("multicast trees along the row first, then the columns")
    assert x["route"].endswith("column first), 1 color")


def test_no_simd_records_the_reason() -> None:
    c = compile_file(EXAMPLES / "fc" / "ff.lair", simd=False)
    assert c.decisions is not None
    assert not c.decisions["ff_on_x"].used
    assert "--no-simd" in c.decisions["ff_on_x"].reason


def test_convolution_uses_the_box_hull_with_extra_instances() -> None:
    c = compile_file(EXAMPLES / "conv1d" / "conv1d.lair")
    assert c.decisions is not None and c.memory is not None
    d = c.decisions["C_on_x"]
    assert d.used and d.case == "box_hull" and d.sizes == (3,)
    assert d.compression is not None and d.offset is not None
    assert same(d.compression, isl.Map(f"{PARAMS} -> {{ [i0] -> C[PE_Y, index - i0, i0] }}"))
    assert same(isl.Set.from_multi_pw_aff(d.offset), isl.Set("{ [0] }"))
    known = isl.Set("[PE_X, PE_Y, index] -> { : PE_X = 0 and 0 <= PE_Y <= 1 and "
                    "0 <= index <= 15 }")
    eq36 = isl.Set("[index] -> { [1 + index:2]; [0:-14 + index] }")
    assert d.extra_instances is not None
    extra, eq36 = d.extra_instances.align_params(known.get_space()), eq36.align_params(
        known.get_space())
    assert same(extra.intersect_params(known), eq36.intersect_params(known))
    y = c.memory.of("y")
    assert y is not None and y.size == (1, 18)  # Example 5.9
    assert same(isl.Map.from_multi_aff(y.to_local_bound),
                isl.Map("[PE_Y] -> { y[i0, i1] -> y_local[i0 - PE_Y, i1 + 2] }"))


def _unsupported(lair: str, mapping: str) -> str:
    program = program_from_text(textwrap.dedent(lair))
    with pytest.raises(UnsupportedMappingError) as info:
        build_task_graph(program.model, validate_mapping(parse_mapping(mapping), program.model))
    return info.value.message


ROW = "lair n(): float16 W[4][4], float16 x[4] -> float16 y[4] " \
      "{ all (i, j) in (4, 4) y[i] += W[i][j] * x[j] }"




def test_uneven_tiles_send_outputs_by_simd_with_a_size_per_pe() -> None:
    """gemv_uneven: y has 30 rows on 4 PE rows of 8, so the last row's PEs hold 6. The
    chain's instructions get a size variant per PE class, set up only where used, and
    no element is sent by scalar code."""
    c = compile_file(EXAMPLES / "movement" / "gemv_uneven.lair")
    assert c.module is not None
    (program,) = c.module.programs
    outs = [k for k in program.configs if k.name.startswith("out_y")]
    assert outs and all(k.variants == ((6,), (8,)) and k.guards for k in outs)
    assert "send(" not in print_module(c.module)


def test_block_exchange_kept_in_parts_takes_only_the_holders_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The MLP's hidden vector is held by one column of 4 x 4 PEs and read in parts
    along the first row: with turns (exchanges without them off), 4 turns (the holders'), not
    16, with blocks sent by SIMD."""
    import dtg.codegen.sharing

    monkeypatch.setattr(dtg.codegen.sharing, "direct_exchange", lambda *a, **k: None)
    monkeypatch.setattr(dtg.codegen.sharing, "halo_exchange", lambda *a, **k: None)
    c = compile_file(EXAMPLES / "movement" / "mlp.lair")
    assert c.module is not None
    text = print_module(c.module)
    assert "got_a + sent_a == 4" in text and "== 16" not in text
    assert "task share_a data color" in text and "batch 8 land land_a" in text


def test_the_mlp_hidden_vector_goes_straight_to_its_readers() -> None:
    """Block ``y`` of the hidden vector, held by ``PE[0, y]``, is read by ``PE[y, 0]``
    only: each holder sends it at once along its row and up that column (no turns)."""
    c = compile_file(EXAMPLES / "movement" / "mlp.lair")
    assert c.module is not None
    text = print_module(c.module)
    assert "== 4" not in text and "task share_a data color" in text
    assert "route 2: S -> RAMP" in text


def test_the_end_marks_a_pe_waits_for_are_one_expression_of_the_pe() -> None:
    """x reaches each column's product and, on the last column, each row's residual
    add: the PEs of the last column but its bottom one wait for two streams' end marks,
    the others for one. main sets that count once (isl's test on the PE), where it
    added each stream's marks under its own condition before (residual_mv 157 -> 142
    cycles)."""
    path = ROOT / "benchmarks" / "kernels" / "residual_mv.lair"
    c = compile_file(path)
    assert c.module is not None
    (program,) = [p for p in c.module.programs if p.name == "compute"]
    main = next(t for t in program.tasks if t.kind == "main")
    counts = [s for s in main.body if isinstance(s, SetInt) and s.name == "pending"]
    assert len(counts) == 1 and counts[0].op == "="
    assert all(not isinstance(s, SetInt) for s in main.body if s is not counts[0])
    outcome = run_program(path, seed=2)
    assert outcome.comparison.verified and outcome.comparison.exact


def test_a_chain_whose_totals_are_read_on_tests_its_last_pe_early() -> None:
    """Bias and ReLU run on the last PE of each row after the partial sums meet there:
    its role is tested right after the chain's first (it was the last of four tests)."""
    path = ROOT / "benchmarks" / "kernels" / "mv_bias_relu.lair"
    c = compile_file(path)
    assert c.module is not None
    (program,) = [p for p in c.module.programs if p.name == "compute"]
    # (x arrives in one batch per PE: its end mark closes it, and the task finishes)
    end = "\n".join(task_text(next(t for t in program.tasks if t.name == "on_x")))
    tests = [line.strip() for line in end.splitlines() if line.strip().startswith("if ")]
    # (settled where the code is placed: the order no longer costs, but reads as the roles)
    assert tests[:2] == ["if static (PE_X == 0) {", "if static (PE_X == 3) {"], tests
    outcome = run_program(path, seed=4)
    assert outcome.comparison.verified and outcome.comparison.exact
