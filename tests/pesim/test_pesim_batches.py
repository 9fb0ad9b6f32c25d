"""Batched data tasks: wavelets land in an array, one task per batch (``count`` of them)."""

from __future__ import annotations

import numpy as np
import pytest
from pesim_support import build, groups, sim

from dtg.errors import SimulationError

BATCHED = """
module batched
mesh PE[1, 1]
input A dense color 0 { A[i = 0:2, j = 0:4] -> [PE[0, -1] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[3][5] store B;
  array float32 land[BATCH];
  array float32 sizes[16] store S;
  int row = 0;
  int n = 0;
  int b = 0;
  route 0: N -> RAMP;
  task got data color 0 batch BATCH land land {
    for (k = 0; k <= count - 1; k++) {
      a[row][n + k] = land[k];
      sizes[b] += 1.0;
    }
    n += count;
    b += 1;
  }
  task next control color 0 {
    row += 1;
    n = 0;
  }
}
"""

A = np.arange(1, 16, dtype=np.float32).reshape(3, 5)


@pytest.mark.parametrize("batch, sizes", [(3, [3, 2, 3, 2, 3, 2]), (5, [5, 5, 5]),
                                          (8, [5, 5, 5]), (1, [1] * 15)])
def test_batches_end_at_their_size_or_at_an_end_mark(batch: int, sizes: list[int]) -> None:
    result = sim(BATCHED.replace("BATCH", str(batch)), {"A": A},
                 {"B": ((3, 5), "float32"), "S": ((16,), "float32")})
    assert np.array_equal(result.outputs["B"], A)
    assert result.pes[(0, 0)].tasks_run == len(sizes) + 3  # and one control task per row
    assert list(result.outputs["S"]) == sizes + [0] * (16 - len(sizes))


def test_one_dispatch_per_batch_is_cheaper_than_one_per_wavelet() -> None:
    per_batch = sim(BATCHED.replace("BATCH", "5"), {"A": A},
                    {"B": ((3, 5), "float32"), "S": ((16,), "float32")})
    per_wavelet = sim(BATCHED.replace("BATCH", "1"), {"A": A},
                      {"B": ((3, 5), "float32"), "S": ((16,), "float32")})
    assert per_batch.pes[(0, 0)].busy < per_wavelet.pes[(0, 0)].busy


def test_a_simd_instruction_reads_the_landed_batch() -> None:
    text = """
module simd_batch
mesh PE[1, 1]
input x dense color 0 { x[j = 0:7] -> [PE[0, -1] -> index[j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 W[4][8] load W;
  array float16 y[4] store y;
  array float16 land[4];
  int n = 0;
  route 0: N -> RAMP;
  simd mac [4, 4]: y[i1] += W[i0 + 8*i1] * land[i0];
  task got data color 0 batch 4 land land {
    run mac {y: 0, W: n, land: 0};
    n += count;
  }
}
"""
    rng = np.random.default_rng(0)
    w = rng.integers(-3, 4, (4, 8)).astype(np.float16)
    x = rng.integers(-3, 4, 8).astype(np.float16)
    result = sim(text, {"W": w, "x": x}, {"y": ((4,), "float16")})
    assert np.array_equal(result.outputs["y"], w @ x)
    assert result.pes[(0, 0)].tasks_run == 2


@pytest.mark.parametrize("head, message", [
    ("data color 0 batch 4 land land", "finds its wavelets' values in 'land'"),
    ("data color 0 batch 4 land nowhere", "'nowhere', which is not an array"),
    ("data color 0 batch 9 land land", "holds 4 elements"),
    ("data color 0 batch 0 land land", "at least 1 wavelet"),
])
def test_bad_batches_are_rejected(head: str, message: str) -> None:
    text = """
module bad
mesh PE[1, 1]
input x dense color 0 { x[j = 0:7] -> [PE[0, -1] -> index[j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float16 land[4];
  route 0: N -> RAMP;
  task got HEAD {
    land[0] = value;
  }
}
""".replace("HEAD", head)
    with pytest.raises(SimulationError, match=message):
        build(text)


SPARSE = """
module sparse_batched
mesh PE[1, 1]
input A sparse color 0 { A[i = 0:2, j = 0:6] -> [PE[0, -1] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[3][9] store B { B[i, j] : 0 <= i <= 2 and 0 <= j <= 6 };
  array float32 land[3];
  int row = 0;
  route 0: N -> RAMP;
  task got data color 0 sparse batch 3 land land {
    for (k = 0; k <= count - 1; k++) {
      a[row][index + k] = land[k];
    }
  }
  task next control color 0 {
    row += 1;
  }
}
"""


def test_sparse_batches_are_aligned_windows_with_zeros_where_nothing_was_sent() -> None:
    a = np.array([[1, 0, 2, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 3, 0, -4, 0]],
                 np.float32)
    result = sim(SPARSE, {"A": a}, {"B": ((3, 7), "float32")})
    assert np.array_equal(result.outputs["B"], a)
    # windows [0, 3), [6, 9) of row 0 and [3, 6) of row 2 hold a sent element
    assert result.pes[(0, 0)].tasks_run == 3 + 3


ONCE = """
module sparse_once
mesh PE[1, 1]
input A sparse color 0 { A[j = 0:7] -> [PE[0, -1] -> index[j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[8] store B { B[j] : 0 <= j <= 7 };
  array float32 land[LAND];
  route 0: N -> RAMP;
  task got data color 0 sparse batch BATCH land land once {
    for (k = 0; k <= count - 1; k++) {
      a[index + k] = land[k];
    }
  }
}
"""


def test_a_once_batch_is_not_cleared_and_saves_the_clearing() -> None:
    a = np.array([1, 0, 2, 0, 0, 0, 5, 0], np.float32)
    once = sim(ONCE.replace("BATCH", "8").replace("LAND", "8"), {"A": a},
               {"B": ((8,), "float32")})
    cleared = sim(ONCE.replace("BATCH", "8").replace("LAND", "8").replace(" once", ""),
                  {"A": a}, {"B": ((8,), "float32")})
    assert np.array_equal(once.outputs["B"], a)
    assert np.array_equal(cleared.outputs["B"], a)
    # clearing 8 float32 elements: SIMD start-up + 8 cycles at width 1
    assert cleared.pes[(0, 0)].busy - once.pes[(0, 0)].busy == 4 + 8


def test_a_second_window_of_a_once_batch_is_an_error() -> None:
    a = np.array([1, 0, 2, 0, 0, 0, 5, 0], np.float32)
    with pytest.raises(SimulationError, match="declared 'once', but a second window opens"):
        sim(ONCE.replace("BATCH", "4").replace("LAND", "4"), {"A": a},
            {"B": ((8,), "float32")})


@pytest.mark.parametrize("head, decl, message", [
    ("data color 0 batch 4 land land once", "array float16 land[4];", "for sparse batches"),
    ("data color 0 sparse batch 4 land land once", "array float16 land[4] init -inf;",
     "starts at -inf"),
])
def test_bad_once_batches_are_rejected(head: str, decl: str, message: str) -> None:
    text = """
module bad
mesh PE[1, 1]
input x sparse color 0 { x[j = 0:3] -> [PE[0, -1] -> index[j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  DECL
  route 0: N -> RAMP;
  task got HEAD {
  }
}
""".replace("HEAD", head).replace("DECL", decl)
    with pytest.raises(SimulationError, match=message):
        build(text)


A4 = np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5], [0, -6, 0]], np.float32)


@pytest.mark.parametrize("g", [1, 2, 4])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_batches_of_whole_groups_land_each_group_in_its_slot(kind: str, g: int) -> None:
    result = sim(groups(kind, g), {"A": A4}, {"B": ((4, 3), "float32"),
                                             "S": ((4,), "float32")})
    assert np.array_equal(result.outputs["B"], A4)
    # one task per batch, no control task: end marks close the batches
    assert result.pes[(0, 0)].tasks_run == 4 // g
    sent = [3] * 4 if kind == "dense" else [2, 0, 3, 1]  # (sparse: no zeros)
    count = [sum(sent[b * g:(b + 1) * g]) for b in range(4 // g)]
    assert list(result.outputs["S"]) == count + [0] * (4 - len(count))


def test_sparse_batches_of_groups_are_cleared_unless_once() -> None:
    cleared = sim(groups("sparse", 4), {"A": A4}, {"B": ((4, 3), "float32"),
                                                  "S": ((4,), "float32")})
    once = sim(groups("sparse", 4, once=True), {"A": A4}, {"B": ((4, 3), "float32"),
                                                          "S": ((4,), "float32")})
    assert np.array_equal(once.outputs["B"], A4)
    # clearing 4 groups x 4 float32 slots: SIMD start-up + 16 cycles at width 1
    assert cleared.pes[(0, 0)].busy - once.pes[(0, 0)].busy == 4 + 16
    with pytest.raises(SimulationError, match="declared 'once', but a second batch opens"):
        sim(groups("sparse", 2, once=True), {"A": A4}, {"B": ((4, 3), "float32"),
                                                       "S": ((4,), "float32")})


@pytest.mark.parametrize("kind, message", [
    ("dense", r"groups of up to 2 wavelets \(indices 0..1\), but wavelet 3 of a group"),
    ("sparse", r"groups of up to 2 wavelets \(indices 0..1\), but index 2 arrived"),
])
def test_a_group_larger_than_its_slot_is_an_error(kind: str, message: str) -> None:
    text = groups(kind, 2).replace("batch 4", "batch 2")
    with pytest.raises(SimulationError, match=message):
        sim(text, {"A": A4 + 1}, {"B": ((4, 3), "float32"), "S": ((4,), "float32")})


@pytest.mark.parametrize("change, message", [
    (("groups 2", "groups 0"), "at least 1 group, not 0"),
    (("land[8]", "land[7]"), "batches of 2 groups of up to 4 wavelets in 'land', which "
                             "holds 7 elements"),
    (("  task got", "  task next control color 0 {\n  }\n  task got"),
     "drop control task next"),
    (("g += 2;", "g += index;"), "index"),
])
def test_bad_batches_of_groups_are_rejected(change: tuple[str, str], message: str) -> None:
    text = groups("sparse", 2).replace(*change)
    with pytest.raises(SimulationError, match=message):
        build(text)


RING = """
module ring
mesh PE[1, 1]
input x dense color 0 { x[j = 0:LAST] -> [PE[0, -1] -> index[j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 y[N] store y;
  array float32 land[LAND];
  int n = 0;
  route 0: N -> RAMP;
  task got data color 0 batch 16 land land RING {
    for (k = 0; k <= count - 1; k++) {
      y[n + k] = land[slot + k] * 2.0;
    }
    n += count;
  }
}
"""


def ring_module(n: int, ring: int) -> str:
    return RING.replace("LAST", str(n - 1)).replace("[N]", f"[{n}]").replace(
        "LAND", str(16 * ring)).replace("RING", f"ring {ring}" if ring > 1 else "")


@pytest.mark.parametrize("n", [16, 32, 40, 48])
def test_a_ring_lands_the_next_batches_while_the_core_runs(n: int) -> None:
    x = np.arange(1, n + 1, dtype=np.float32)
    one, two, three = (sim(ring_module(n, ring), {"x": x}, {"y": ((n,), "float32")})
                       for ring in (1, 2, 3))
    for run in (one, two, three):
        assert np.array_equal(run.outputs["y"], 2 * x)
        assert run.pes[(0, 0)].busy == one.pes[(0, 0)].busy
    # with a second slot the core never waits after the first batch has landed (16
    # wavelets, one per cycle): each batch is there when the one before it ends
    assert two.cycles == 16 + two.pes[(0, 0)].busy
    assert three.cycles == two.cycles
    # with one, the wavelets beyond the core's queue land only after the task
    assert one.cycles > two.cycles or n == 16


def test_sparse_windows_in_a_ring_are_cleared_slot_by_slot() -> None:
    a = np.array([[1, 0, 2, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 3, 0, -4, 0]],
                 np.float32)
    text = SPARSE.replace("array float32 land[3];", "array float32 land[6];").replace(
        "batch 3 land land", "batch 3 land land ring 2").replace("land[k]", "land[slot + k]")
    ringed = sim(text, {"A": a}, {"B": ((3, 7), "float32")})
    plain = sim(SPARSE, {"A": a}, {"B": ((3, 7), "float32")})
    assert np.array_equal(ringed.outputs["B"], a)
    # the same windows (each cleared as it opens), one more addition per element read
    assert ringed.pes[(0, 0)].tasks == {"got": (3, plain.pes[(0, 0)].tasks["got"][1] + 9),
                                        "next": plain.pes[(0, 0)].tasks["next"]}


RINGS = [("dense", 1, 2, False), ("dense", 2, 2, False), ("sparse", 1, 2, False),
         ("sparse", 2, 2, False), ("sparse", 1, 4, True), ("sparse", 2, 2, True)]


@pytest.mark.parametrize("kind, g, ring, once", RINGS)
def test_batches_of_groups_in_a_ring(kind: str, g: int, ring: int, once: bool) -> None:
    result = sim(groups(kind, g, ring=ring, once=once), {"A": A4},
                 {"B": ((4, 3), "float32"), "S": ((4,), "float32")})
    assert np.array_equal(result.outputs["B"], A4)
    assert result.pes[(0, 0)].tasks_run == 4 // g


def test_a_once_ring_opens_each_slot_once() -> None:
    with pytest.raises(SimulationError, match="declared 'once' with a ring of 2, but batch 3 "
                                              "opens on color 0"):
        sim(groups("sparse", 1, ring=2, once=True), {"A": A4 + 1},
            {"B": ((4, 3), "float32"), "S": ((4,), "float32")})


@pytest.mark.parametrize("change, message", [
    (("ring 2", "ring 33"), "a landing ring holds 1 to 32 batches, not 33"),
    (("ring 2", "ring 0"), "a landing ring holds 1 to 32 batches, not 0"),
    (("land[16]", "land[15]"), "batches of 2 groups of up to 4 wavelets, 2 at a time, in "
                               "'land', which holds 15 elements"),
])
def test_bad_rings_are_rejected(change: tuple[str, str], message: str) -> None:
    text = groups("sparse", 2, ring=2).replace(*change)
    with pytest.raises(SimulationError, match=message):
        build(text)


MARKS = """
module marks
mesh PE[1, 1]
input A KIND color 0 { A[i = 0:LAST, j = 0:3] -> [PE[0, -1] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[ROWS][4] store B;
  array float32 land[LAND];
  int row = 0;
  int n = 0;
  int w = 0;
  route 0: N -> RAMP;
  task got data color 0 SPARSE batch 4 land land RING {
    for (k = 0; k <= count - 1; k++) {
      a[row][n + k] = land[slot + k];
    }
    n += count;
    for (q = 1; q <= 100; q++) {
      w += 1;
    }
  }
  task next control color 0 {
    row += 1;
    n = 0;
  }
}
"""


def marks_module(kind: str, rows: int, ring: int) -> str:
    """A stream of ``rows`` groups of 4 in batches of 4 with a slow task, on a ring."""
    return MARKS.replace("KIND", kind).replace("SPARSE", "sparse" if kind == "sparse" else "")\
        .replace("LAST", str(rows - 1)).replace("ROWS", str(rows))\
        .replace("LAND", str(4 * ring)).replace("RING", f"ring {ring}" if ring > 1 else "")


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("ring", [1, 2, 8])
def test_end_marks_land_ahead_of_their_control_tasks_at_most_a_ring_deep(kind: str,
                                                                         ring: int) -> None:
    # (sparse: the first row full, the rest empty groups, nothing but end marks)
    a = np.zeros((24, 4), np.float32)
    a[0] = [1, 2, 3, 4]
    if kind == "dense":
        a = np.arange(1, 97, dtype=np.float32).reshape(24, 4)
    result = sim(marks_module(kind, 24, ring), {"A": a}, {"B": ((24, 4), "float32")})
    assert np.array_equal(result.outputs["B"], a)
    tasks = result.pes[(0, 0)].tasks
    assert tasks["next"][0] == 24 and tasks["got"][0] == (24 if kind == "dense" else 1)
