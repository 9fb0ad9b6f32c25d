"""Runs that go wrong: deadlocks, runaway programs, bad accesses, lost wavelets; and
the guarantees that make results comparable (determinism, trigger order)."""

from __future__ import annotations

import numpy as np
import pytest
from pesim_support import GEMV_PE, sim

from dtg.errors import SimulationError
from dtg.pesim.code import CycleLimitError
from dtg.pesim.run import run_file
from dtg.pesim.sim import DeadlockError


def one_pe(body: str, decls: str = "", tasks: str = "") -> str:
    return f"""
module t
mesh PE[1, 1]
program p origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  array float32 a[8] store y;
  {decls}
  task main {{
    {body}
  }}
  {tasks}
}}
"""


Y = {"y": ((8,), "float32")}


def test_deadlock_names_the_waiting_pe_and_color() -> None:
    text = one_pe("a[0] = recv(3);", "route 3: W -> RAMP;")
    with pytest.raises(DeadlockError) as err:
        sim(text, {}, Y)
    message = err.value.format()
    assert "deadlock" in message
    assert "PE[0, 0] waits to receive on color 3 (recv)" in message


def test_mutual_wait_is_a_deadlock_not_a_hang() -> None:
    text = """
module ring
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[1] store y { y[i] : i = PE_X };
  route 1: RAMP -> E if (PE_X == 0);
  route 1: W -> RAMP if (PE_X == 1);
  route 2: RAMP -> W if (PE_X == 1);
  route 2: E -> RAMP if (PE_X == 0);
  task main {
    if (PE_X == 0) {
      a[0] = recv(2);
      send(1, a[0]);
    } else {
      a[0] = recv(1);
      send(2, a[0]);
    }
  }
}
"""
    with pytest.raises(DeadlockError) as err:
        sim(text, {}, {"y": ((2,), "float32")})
    notes = "\n".join(err.value.notes)
    assert "PE[0, 0] task main waits to receive on color 2" in notes
    assert "PE[1, 0] task main waits to receive on color 1" in notes


def test_incomplete_output_stream_is_reported() -> None:
    text = """
module short
mesh PE[1, 1]
output y dense color 1 { y[i = 0:1] -> [PE[1, 0] -> index[i]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  route 1: RAMP -> E;
  task main {
    send(1, 1.0);
  }
}
"""
    with pytest.raises(DeadlockError, match=r"received 1 of 2 values"):
        sim(text, {}, {"y": ((2,), "float32")})


def test_unread_wavelets_are_reported() -> None:
    text = one_pe("send(4, 1.0);", "route 4: RAMP -> RAMP;")
    with pytest.raises(DeadlockError, match="leaves 1 wavelet on color 4 unread"):
        sim(text, {}, Y)


def test_cycle_limit_stops_a_runaway_loop() -> None:
    text = one_pe("for (i = 0; i <= 1000000000; i++) { a[0] += 1.0; }")
    with pytest.raises(CycleLimitError, match="cycle limit of 10000 cycles"):
        sim(text, {}, Y, cycle_limit=10_000)


def test_cycle_limit_stops_endless_activation() -> None:
    text = one_pe("activate again;",
                  tasks="task again local { if (PE_X == 0) { activate again; } }")
    with pytest.raises(CycleLimitError, match="cycle limit of 500 cycles"):
        sim(text, {}, Y, cycle_limit=500)


def test_out_of_bounds_access_names_pe_task_array_and_index() -> None:
    text = one_pe("for (i = 0; i <= 8; i++) { a[i] = 1.0; }")
    with pytest.raises(SimulationError) as err:
        sim(text, {}, Y)
    assert str(err.value) == ("error: PE[0, 0] task main: access a[8] is outside the array "
                              "a[8]")


def test_out_of_bounds_simd_names_the_flat_index() -> None:
    text = one_pe("run fill {a: 1} (2.0);", "simd fill [8]: a[i0] = scalar;")
    with pytest.raises(SimulationError, match=r"accesses a at flat index 8, outside the array"):
        sim(text, {}, Y)


def test_send_without_route_is_an_error() -> None:
    with pytest.raises(SimulationError, match="no route for color 4 from RAMP"):
        sim(one_pe("send(4, 1.0);"), {}, Y)


def test_wavelet_to_a_pe_without_route_is_an_error() -> None:
    text = """
module lost
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  route 1: RAMP -> E;
  task main {
    send(1, 1.0);
  }
}
"""
    with pytest.raises(SimulationError, match=r"PE\[1, 0\] runs no program: a wavelet without"):
        sim(text)


def test_wavelet_leaving_the_mesh_needs_a_sink() -> None:
    with pytest.raises(SimulationError, match="no output stream collects color 1"):
        sim(one_pe("send(1, 1.0);", "route 1: RAMP -> N;"), {}, Y)


def test_input_stream_needs_a_route_where_it_enters() -> None:
    text = """
module noentry
mesh PE[1, 1]
input x dense color 0 { x[i = 0:1] -> [PE[0, -1] -> index[i]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  route 0: W -> RAMP;
}
"""
    with pytest.raises(SimulationError, match=r"has no route for color 0 from N"):
        sim(text, {"x": np.zeros(2, np.float16)})


def test_tasks_run_in_trigger_order() -> None:
    text = one_pe("activate first; activate second;", "int n = 0;", """
  task first local { a[n] = 1.0; n += 1; }
  task second local { a[n] = 2.0; n += 1; activate first; }
""")
    result = sim(text, {}, Y)
    assert result.outputs["y"][:3].tolist() == [1.0, 2.0, 1.0]
    assert result.pes[(0, 0)].tasks_run == 3


def test_same_run_twice_gives_the_same_cycles_and_outputs() -> None:
    first, second = run_file(GEMV_PE, seed=3), run_file(GEMV_PE, seed=3)
    assert first.result.cycles == second.result.cycles
    assert first.result.events == second.result.events
    assert first.result.pes == second.result.pes
    assert first.result.links == second.result.links
    assert np.array_equal(first.result.outputs["y"], second.result.outputs["y"])


def test_variant_out_of_range_is_an_error() -> None:
    text = one_pe("run f variant(2) {a: 0} (1.0);", "simd f [8] | [4]: a[i0] = scalar;")
    with pytest.raises(SimulationError, match=r"run f selects variant 2; simd f has variants "
                                              r"0\.\.1"):
        sim(text, {}, Y)


def test_sparse_task_needs_an_index() -> None:
    text = """
module noindex
mesh PE[1, 1]
input x dense color 0 { x[i = 0:1] -> [PE[0, -1] -> index[i]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 a[2] store y;
  route 0: N -> RAMP;
  task got data color 0 sparse {
    a[index] = value;
  }
}
"""
    with pytest.raises(SimulationError, match="sparse data task got received a wavelet "
                                              "without an index on color 0"):
        sim(text, {"x": np.ones(2, np.float16)}, {"y": ((2,), "float16")})
