"""Exact cycle counts of small modules, derived by hand from the cost table of
docs/pecode.md (and its "Simulator decisions")."""

from __future__ import annotations

import numpy as np
import pytest
from pesim_support import build, sim


def passthrough(width: int, n: int) -> str:
    return f"""
module hops
mesh PE[{width}, 1]
input x dense color 0 {{ x[i = 0:{n - 1}] -> [PE[-1, 0] -> index[i]] }}
output y dense color 0 {{ y[i = 0:{n - 1}] -> [PE[{width}, 0] -> index[i]] }}
program pass origin PE[0, 0] pes {{ PE[x, y] : 0 <= x < {width} and y = 0 }}
{{
  route 0: W -> E;
}}
"""


@pytest.mark.parametrize("width", [1, 2, 5])
def test_one_wavelet_over_k_hops_takes_k_cycles(width: int) -> None:
    result = sim(passthrough(width, 1), {"x": np.array([3.0], np.float16)},
                 {"y": ((1,), "float16")})
    hops = width + 1  # source -> PE[0,0] -> ... -> PE[width-1,0] -> sink
    assert result.cycles == hops
    assert result.outputs["y"].tolist() == [3.0]


def test_a_stream_pipelines_one_wavelet_per_cycle() -> None:
    x = np.arange(1, 8, dtype=np.float16)
    result = sim(passthrough(3, 7), {"x": x}, {"y": ((7,), "float16")})
    assert result.cycles == 4 + 7 - 1
    assert np.array_equal(result.outputs["y"], x)
    # every link carried the 7 values and the end mark
    assert set(result.links.values()) == {8}
    assert len(result.links) == 4


def core_to_core(k: int) -> str:
    mid = (f"program mid origin PE[1, 0] pes {{ PE[x, 0] : 0 <= x < {k - 1} }}\n"
           "{\n  route 1: W -> E;\n}\n") if k > 1 else ""
    return f"""
module c2c
mesh PE[{k + 1}, 1]
program src origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  route 1: RAMP -> E;
  task main {{
    send(1, 2.5);
  }}
}}
{mid}
program dst origin PE[{k}, 0] pes {{ PE[0, 0] }}
{{
  array float32 a[1] store y;
  route 1: W -> RAMP;
  task got data color 1 {{
    a[0] = value;
  }}
}}
"""


@pytest.mark.parametrize("k", [1, 3])
def test_core_to_core_send_and_data_task(k: int) -> None:
    result = sim(core_to_core(k), {}, {"y": ((1,), "float32")})
    # send in cycle 0; in the core of PE[k, 0] in cycle k; dispatch 3; store 1
    assert result.cycles == k + 3 + 1
    assert result.outputs["y"].tolist() == [2.5]
    dst = result.pes[(k, 0)]
    assert (dst.busy, dst.scalar_ops, dst.tasks_run) == (4, 1, 1)
    assert result.pes[(0, 0)].wavelets_sent == 1


def simd_module(dtype: str, sizes: str, run: str) -> str:
    return f"""
module simd
mesh PE[1, 1]
program p origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  array {dtype} a[8] store y;
  simd f {sizes}: a[i0] = scalar;
  task main {{
    {run}
  }}
}}
"""


def test_simd_on_8_float16_elements_costs_4_plus_2() -> None:
    result = sim(simd_module("float16", "[8]", "run f {a: 0} (1.5);"), {},
                 {"y": ((8,), "float16")})
    assert result.cycles == 8 + 4 + 2  # configuration, start-up, ceil(8 / 4)
    assert result.outputs["y"].tolist() == [1.5] * 8
    stats = result.pes[(0, 0)]
    assert (stats.simd_ops, stats.simd_instructions, stats.scalar_ops) == (8, 1, 0)


def test_simd_on_8_float32_elements_costs_4_plus_8() -> None:
    result = sim(simd_module("float32", "[8]", "run f {a: 0} (1.5);"), {},
                 {"y": ((8,), "float32")})
    assert result.cycles == 8 + 4 + 8


def test_variant_selection_costs_and_selects() -> None:
    result = sim(simd_module("float16", "[8] | [4]", "run f variant(1) {a: 0} (1.5);"), {},
                 {"y": ((8,), "float16")})
    assert result.cycles == 2 * 8 + 2 + 4 + 1  # two variants configured, selection, [4]
    assert result.outputs["y"].tolist() == [1.5] * 4 + [0.0] * 4


def test_scalar_code_costs() -> None:
    text = """
module scalar
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[4] store y;
  array float32 b[2][3] store z;
  int n = 0;
  task main {
    for (i = 0; i <= 3; i++) {
      a[i] = 1.0 + 2.0;
    }
    if (PE_X == 0) {
      n = n + 1;
    }
    b[1][2] += 4.0;
  }
}
"""
    result = sim(text, {}, {"y": ((4,), "float32"), "z": ((2, 3), "float32")})
    loop = 2 + 4 * (3 + 1 + 1)  # setup; per iteration: overhead, add, store
    branch = 1 + 1 + (1 + 1)  # branch, comparison, assignment with one addition
    update = 1 + 3  # address of the second dimension; load, add, store
    assert result.cycles == loop + branch + update
    assert result.pes[(0, 0)].scalar_ops == loop + branch + update
    assert result.outputs["y"].tolist() == [3.0] * 4
    assert result.outputs["z"][1, 2] == 4.0


BACKPRESSURE = """
module back
mesh PE[2, 1]
program sender origin PE[0, 0] pes { PE[0, 0] }
{
  route 1: RAMP -> E;
  task main {
    SENDS
  }
}
program receiver origin PE[1, 0] pes { PE[0, 0] }
{
  array float32 a[13] store y;
  route 1: W -> RAMP;
  task main {
    for (i = 1; i <= 32; i++) {
    }
    for (k = 0; k <= 12; k++) {
      a[k] = recv(1);
    }
  }
}
""".replace("SENDS", " ".join(f"send(1, {k}.0);" for k in range(13)))


def test_backpressure_stalls_the_sender() -> None:
    result = sim(BACKPRESSURE, {}, {"y": ((13,), "float32")})
    # 12 wavelets fit: the sender's RAMP buffer, the receiver's W buffer and its core
    # queue (4 each). The 13th send (cycle 12) waits for the first recv: the receiver
    # idles 2 + 32 * 3 = 98 cycles, sets up its loop (2) and starts an iteration (3).
    first_recv = 98 + 2 + 3
    sender = result.pes[(0, 0)]
    assert sender.stall_cycles == first_recv - 12
    assert result.pes[(1, 0)].wait_cycles == 0
    assert result.cycles == 100 + 13 * (3 + 1 + 1)  # per iteration: overhead, recv, store
    assert result.outputs["y"].tolist() == [float(k) for k in range(13)]


def test_bigger_buffers_remove_the_stall() -> None:
    result = sim(BACKPRESSURE, {}, {"y": ((13,), "float32")}, buffer_wavelets=16)
    assert result.pes[(0, 0)].stall_cycles == 0
    assert result.cycles == 100 + 13 * 5


def test_fabric_operands_wait_for_their_wavelets() -> None:
    text = """
module fab
mesh PE[2, 1]
program a origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 u[6] load U;
  route 1: RAMP -> E;
  simd snd [6]: out(1) = u[i0];
  task main {
    run snd {u: 0};
  }
}
program b origin PE[1, 0] pes { PE[0, 0] }
{
  array float32 v[6] load V store y;
  route 1: W -> RAMP;
  simd rcv [6]: v[i0] = in(1) * v[i0];
  task main {
    run rcv {v: 0};
  }
}
"""
    u = np.arange(1, 7, dtype=np.float32)
    v = np.full(6, 2.0, np.float32)
    result = sim(text, {"U": u, "V": v}, {"y": ((6,), "float32")})
    # a: configured by cycle 8, start-up 4, then one element per cycle (float32): the
    # results enter the router in cycles 12..17 and reach b's core in 13..18. b computes
    # element k when its wavelet is there, in cycle 13 + k, and ends after the last one.
    assert result.cycles == 19
    assert result.pes[(1, 0)].wait_cycles == 6
    assert result.pes[(0, 0)].busy == 8 + 4 + 6
    assert np.array_equal(result.outputs["y"], u * v)


def test_multicast_down_a_column() -> None:
    text = """
module bcast
mesh PE[1, 3]
input x dense color 0 { x[i = 0:3] -> [PE[0, -1] -> index[i]] }
program col origin PE[0, 0] pes { PE[0, y] : 0 <= y <= 2 }
{
  array float16 a[1][4] offset [PE_Y, 0] store y;
  int n = 0;
  route 0: N -> RAMP, S if (PE_Y < 2);
  route 0: N -> RAMP if (PE_Y == 2);
  task got data color 0 {
    a[0][n] = value;
    n += 1;
  }
}
"""
    x = np.array([1, -2, 3, 4], np.float16)
    result = sim(text, {"x": x}, {"y": ((3, 4), "float16")})
    assert np.array_equal(result.outputs["y"], np.stack([x, x, x]))
    # x[k] reaches the last PE in cycle 3 + k; each task: dispatch 3, store with a
    # 2-dimensional address 2, n += 1 1 -- so the core is the bottleneck
    assert result.cycles == 3 + 4 * 6
    assert result.links[((0, 0), (0, 1))] == 5  # 4 values and the end mark


def test_hop_latency_is_a_setting_and_links_stay_one_per_cycle() -> None:
    x = np.arange(1, 4, dtype=np.float16)
    result = sim(passthrough(2, 3), {"x": x}, {"y": ((3,), "float16")}, hop_cycles=3)
    assert result.cycles == 3 * 3 + 3 - 1  # three hops of 3 cycles, then one per cycle


def test_recv_inside_expressions_and_as_simd_scalar() -> None:
    text = """
module recv
mesh PE[2, 1]
program a origin PE[0, 0] pes { PE[0, 0] }
{
  route 1: RAMP -> E;
  task main {
    send(1, 2.0);
    send(1, 3.0);
    send(1, 4.0);
  }
}
program b origin PE[1, 0] pes { PE[0, 0] }
{
  array float32 v[4] store y;
  route 1: W -> RAMP;
  simd scale [4]: v[i0] = scalar;
  task main {
    v[0] = 1.0;
    run scale {v: 0} (recv(1) * -(recv(1)));
    v[3] += recv(1) - v[0];
  }
}
"""
    result = sim(text, {}, {"y": ((4,), "float32")})
    assert result.outputs["y"].tolist() == [-6.0, -6.0, -6.0, 4.0 + 6.0 - 6.0]
    # b: configuration 8, store 1, recv (9) 1, recv (10) 1, negation 1, product 1,
    # SIMD 4 + 4 (float32); then recv 1, load 1, subtraction 1, load + add + store 3
    assert result.cycles == 8 + 1 + 4 + 8 + 6


@pytest.mark.parametrize("example", ["gemv/gemv.lair", "fc/train.lair", "movement/mlp.lair"])
def test_the_per_task_profile_adds_up_to_each_pes_busy_cycles(example: str) -> None:
    from conftest import EXAMPLES

    from dtg.pesim.run import run_program

    result = run_program(EXAMPLES / example, seed=0).result
    for pe, stats in result.pes.items():
        assert sum(busy for _, busy in stats.tasks.values()) == stats.busy, pe
        assert sum(runs for name, (runs, _) in stats.tasks.items() if name != "main") == \
            stats.tasks_run, pe


def test_an_indexed_simd_output_sends_index_and_end_marks() -> None:
    """``out(c, index, end)``: each element carries its innermost coordinate, and an end
    mark closes each row (a sparse stream's group), taking one cycle's slot of its own."""
    text = """
module sparse_out
mesh PE[1, 1]
output y sparse color 1 { y[i = 0:1, j = 0:2] -> [PE[1, 0] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 u[2][3] load U;
  route 1: RAMP -> E;
  simd snd [2, 3]: out(1, index, end) = u[3*i0 + i1];
  task main {
    run snd {u: 0};
  }
}
"""
    u = np.array([[1, 0, 3], [4, 5, 0]], np.float32)  # zeros may be sent: they stay 0
    result = sim(text, {"U": u}, {"y": ((2, 3), "float32")})
    assert np.array_equal(result.outputs["y"], u)
    # configured by cycle 8, start-up 4; float32 one element per cycle: row 0 in cycles
    # 12..14 and its end mark, whose slot (15) shifts row 1 to 16..18, then its end mark
    assert result.pes[(0, 0)].busy == 8 + 4 + 6 + 2
    assert result.cycles == 19 + 1  # the last end mark reaches the sink one hop later
    assert result.pes[(0, 0)].wavelets_sent == 8
    assert result.links[((0, 0), (1, 0))] == 8


def op_module(op: str) -> str:
    """Eight float32 elements, by an addition or by a multiply-add."""
    body = "a[i0] = b[i0] + b[i0]" if op == "fadd" else "a[i0] += b[i0] * b[i0]"
    return f"""
module ops
mesh PE[1, 1]
program p origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  array float32 a[8] store y;
  array float32 b[8] init 2.0;
  simd f [8]: {body};
  task main {{
    run f {{a: 0, b: 0}};
  }}
}}
"""


@pytest.mark.parametrize("fabric, op, cycles", [
    ("paper", "fadd", 8 + 4 + 8), ("paper", "fmac", 8 + 4 + 8),
    ("wse2", "fadd", 8 + 4 + 4), ("wse2", "fmac", 8 + 4 + 8),
    ("wse3", "fadd", 8 + 4 + 2), ("wse3", "fmac", 8 + 4 + 8),
])
def test_float32_widths_depend_on_the_operation(fabric: str, op: str, cycles: int) -> None:
    """WSE-2 and WSE-3 add float32 2 and 4 wide but multiply-add one at a time."""
    from dataclasses import asdict

    from dtg.pe.fabric import preset

    result = sim(op_module(op), {}, {"y": ((8,), "float32")}, **asdict(preset(fabric)))
    assert result.cycles == cycles
    assert result.outputs["y"].tolist() == [4.0] * 8


def roles(static: str) -> str:
    """Two PEs telling their roles apart by a test of PE_X: ``static`` is '' or 'static'."""
    return f"""
module roles
mesh PE[2, 1]
program p origin PE[0, 0] pes {{ PE[x, 0] : 0 <= x <= 1 }}
{{
  array float32 a[1] offset [PE_X] store y;
  task main {{
    if {static} (PE_X % 2 == 0) {{
      a[0] = 1.0;
    }} else {{
      a[0] = 2.0;
    }}
  }}
}}
"""


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_static_test_of_the_pe_costs_nothing(engine: str) -> None:
    from dtg.pesim.engines import simulate
    from dtg.pesim.sim import TensorInfo

    runs = {}
    for static in ("", "static"):
        module = build(roles(static))
        runs[static] = simulate(module, {}, {"y": TensorInfo((2,), "float32")}, engine=engine)
        assert runs[static].outputs["y"].tolist() == [1.0, 2.0]
    # a plain test: the branch (1) and its two operations (%, ==); a store (1) either way
    assert [runs[""].pes[(x, 0)].busy for x in (0, 1)] == [4, 4]
    assert [runs["static"].pes[(x, 0)].busy for x in (0, 1)] == [1, 1]
