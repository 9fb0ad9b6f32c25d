"""Input and output streams, resident load/store, and scalar arithmetic semantics."""

from __future__ import annotations

import numpy as np
import pytest
from pesim_support import sim

SPARSE_IN = """
module sparse_in
mesh PE[1, 1]
input A STREAM_KIND color 0 { A[i = 0:2, j = 0:3] -> [PE[0, -1] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[3][4] store B;
  int row = 0;
  int n = 0;
  route 0: N -> RAMP;
  task got data color 0 TASK_KIND {
    a[row][COLUMN] = value;
    n += 1;
  }
  task next control color 0 {
    row += 1;
    n = 0;
  }
}
"""

A = np.array([[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, -4]], np.float32)


def test_sparse_stream_skips_zeros_and_marks_each_row() -> None:
    text = SPARSE_IN.replace("STREAM_KIND", "sparse").replace("TASK_KIND", "sparse")
    result = sim(text.replace("COLUMN", "index"), {"A": A}, {"B": ((3, 4), "float32")})
    assert np.array_equal(result.outputs["B"], A)
    nonzero = int(np.count_nonzero(A))
    # one data task per nonzero, one control task per row (the empty row included)
    assert result.pes[(0, 0)].tasks_run == nonzero + 3
    assert result.links[((0, -1), (0, 0))] == nonzero + 3


def test_dense_stream_sends_zeros_and_marks_each_row() -> None:
    text = SPARSE_IN.replace("STREAM_KIND", "dense").replace("TASK_KIND", "")
    result = sim(text.replace("COLUMN", "n"), {"A": A}, {"B": ((3, 4), "float32")})
    assert np.array_equal(result.outputs["B"], A)
    assert result.pes[(0, 0)].tasks_run == 12 + 3
    assert result.links[((0, -1), (0, 0))] == 12 + 3


def test_source_sends_in_index_order_not_element_order() -> None:
    text = """
module order
mesh PE[1, 1]
input x dense color 0 { x[i = 0:3] -> [PE[-1, 0] -> index[3 - i]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 a[4] store y;
  int n = 0;
  route 0: W -> RAMP;
  task got data color 0 {
    a[n] = value;
    n += 1;
  }
}
"""
    x = np.array([1, 2, 3, 4], np.float16)
    result = sim(text, {"x": x}, {"y": ((4,), "float16")})
    assert result.outputs["y"].tolist() == [4.0, 3.0, 2.0, 1.0]


def test_sparse_output_places_values_by_index_and_group() -> None:
    text = """
module sparse_out
mesh PE[1, 1]
output y sparse color 2 { y[i = 0:1, j = 0:3] -> [PE[1, 0] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  route 2: RAMP -> E;
  task main {
    send(2, 5.0, 1);
    send(2, 7.0, 3);
    send_end(2);
    send(2, 1.0, 0);
    send_end(2);
  }
}
"""
    result = sim(text, {}, {"y": ((2, 4), "float16")})
    assert result.outputs["y"].tolist() == [[0, 5, 0, 7], [1, 0, 0, 0]]
    assert result.cycles == 5  # five sends; the last end mark reaches the sink one hop later


def test_dense_output_of_several_external_pes() -> None:
    text = """
module rows
mesh PE[1, 2]
output y dense color 1 { y[i = 0:5] -> [PE[1, i//3] -> index[i mod 3]] }
program p origin PE[0, 0] pes { PE[0, y] : 0 <= y <= 1 }
{
  route 1: RAMP -> E;
  task main {
    for (k = 0; k <= 2; k++) {
      send(1, 10.0 * (2.0 + 1.0));
    }
  }
}
"""
    result = sim(text, {}, {"y": ((6,), "float32")})
    assert result.outputs["y"].tolist() == [30.0] * 6


RESIDENT = """
module resident
mesh PE[2, 2]
program p origin PE[0, 0] pes { PE[x, y] : 0 <= x <= 1 and 0 <= y <= 1 }
{
  array float16 w[3][4] offset [2 * PE_Y, 3 * PE_X] LOAD STORE;
}
"""


def test_resident_load_and_store_with_offsets() -> None:
    w = np.arange(24, dtype=np.float16).reshape(4, 6)
    text = RESIDENT.replace("LOAD", "load W").replace(
        "STORE", "store Z { Z[i, j] : i < 2 * PE_Y + 2 and j < 3 * PE_X + 3 }")
    result = sim(text, {"W": w}, {"Z": ((4, 6), "float16")})
    assert np.array_equal(result.outputs["Z"], w)


def test_load_set_restricts_the_loaded_elements() -> None:
    w = np.arange(1, 25, dtype=np.float16).reshape(4, 6)
    text = RESIDENT.replace("LOAD", "load W { W[i, j] : j <= 3 * PE_X + 1 }").replace(
        "STORE", "store Z { Z[i, j] : i < 2 * PE_Y + 2 and j < 3 * PE_X + 3 }")
    result = sim(text, {"W": w}, {"Z": ((4, 6), "float16")})
    expected = w.copy()
    expected[:, [2, 5]] = 0
    assert np.array_equal(result.outputs["Z"], expected)


def test_overlapping_stores_are_an_error() -> None:
    w = np.ones((4, 6), np.float16)
    text = RESIDENT.replace("LOAD", "load W").replace("STORE", "store Z")
    with pytest.raises(Exception, match="gets elements from both"):
        sim(text, {"W": w}, {"Z": ((4, 6), "float16")})


def test_missing_output_elements_are_an_error() -> None:
    text = RESIDENT.replace("LOAD", "").replace(
        "STORE", "store Z { Z[i, j] : i < 2 * PE_Y + 2 and j < 3 * PE_X + 2 }")
    with pytest.raises(Exception, match=r"element Z\[0, 2\] is neither stored nor streamed"):
        sim(text, {}, {"Z": ((4, 6), "float16")})


SCALAR = """
module arith
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array TYPE a[8] store y;
  int n = -7;
  task main {
    a[0] = 2048.0 + 1.0;
    a[1] = 0.1 * 3.0;
    a[n % 4 + 1] = 5.0;
    a[n // 4 + 5] = 6.0;
    a[max(n, 5)] = max(-inf, 1.5);
    a[min(n, 6) + 13] = -(2.0 - 3.0);
    a[7] = 1.0;
    a[7] max= 3.0;
  }
}
"""


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_scalar_arithmetic_rounds_like_the_reference(dtype: str) -> None:
    result = sim(SCALAR.replace("TYPE", dtype), {}, {"y": ((8,), dtype)})
    t = np.dtype(dtype).type
    y = result.outputs["y"]
    assert y[0] == t(t(2048.0) + t(1.0))  # 2048 in float16, 2049 in float32
    assert y[1] == t(t(0.1) * t(3.0))
    assert y[2] == 5.0  # -7 % 4 == 1 (modulo rounds towards minus infinity)
    assert y[3] == 6.0  # -7 // 4 == -2
    assert y[5] == 1.5
    assert y[6] == 1.0
    assert y[7] == 3.0
    assert (y[0] == 2048.0) == (dtype == "float16")
