"""Skewed placements (issue 27): a run-time SIMD length where size variants do not fit
the PE, partial results summed by blocks, and the configuration budget spent where it
saves the most."""

from __future__ import annotations

import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtg.codegen.dataflow import DataFlowError, check_data_flow
from dtg.codegen.driver import compile_file
from dtg.codegen.pipeline import _least_loss
from dtg.errors import DtgError
from dtg.pe.ir import IBin, IConst
from dtg.pe.printer import module as print_module
from dtg.pesim.run import run_program

SKEWED_GEMV = ROOT / "benchmarks" / "kernels" / "skewed_gemv.lair"
SKEWED_SUM = EXAMPLES / "movement" / "skewed_sum.lair"


def test_diagonals_of_many_lengths_are_one_configuration_cut_at_run_time() -> None:
    """``PE[(i + j)//16, 0]``: a PE's instances form a band along the anti-diagonals,
    16 of them, of 1 to 64 elements; scanned along the skewed basis, each diagonal is
    one instruction (a row would be 16 at most), one configuration of 64 elements cut
    to each diagonal's length."""
    c = compile_file(SKEWED_GEMV)
    assert c.decisions is not None and c.module is not None
    d = c.decisions["mv_local"]
    assert d.used and d.by_length and d.variants == ((64,),) and d.length is not None
    assert "cut to each invocation's extent" in d.reason and "skewed basis" in d.reason
    assert "length(" in print_module(c.module)
    for engine in ("simpy", "fast"):
        outcome = run_program(SKEWED_GEMV, seed=1, engine=engine)
        assert outcome.result.engine == engine
        assert outcome.comparison.verified and outcome.comparison.exact
    scalar = run_program(SKEWED_GEMV, seed=1, simd=False)
    assert outcome.result.cycles * 3 < scalar.result.cycles


def test_a_wrong_length_is_caught_by_the_data_flow_check() -> None:
    c = compile_file(SKEWED_GEMV)
    assert c.tasks is not None and c.memory is not None and c.decisions is not None
    d = c.decisions["mv_local"]
    assert d.length is not None
    longer = replace(d, length=IBin("+", d.length, IConst(1)))
    with pytest.raises(DataFlowError, match="its SIMD length expression gives another extent"):
        check_data_flow(c.tasks, c.memory, {**c.decisions, "mv_local": longer})


GAPPED_MAP = """rectangle { PE[7, 1] }
placement { n[i, j] -> PE[2 * ((i + j)//8), 0] }
input  x resident
input  W resident
output y resident
"""


def test_partial_sums_meet_by_blocks(tmp_path: Path) -> None:
    """Where the writers of an element are not contiguous on their line (every other PE
    computes), every writer but the element's first (where its sum starts) sends its
    partial results by one SIMD instruction per keeper it sends to; each keeper adds
    what it keeps by another."""
    path = tmp_path / "gapped.lair"
    path.write_text(SKEWED_SUM.read_text())
    path.with_suffix(".map").write_text(GAPPED_MAP)
    c = compile_file(path)
    assert c.module is not None
    text = print_module(c.module)
    assert "out(0) = y_local[i0]" in text
    assert re.search(r"y_local\[i0\] = y_local\[i0\] \+ land_y_sum(_\d+)?\[i0\]", text)
    assert "send(0, y_local" not in text  # (no indexed sends)
    outcome = run_program(path, seed=2)
    assert outcome.comparison.verified and outcome.comparison.exact


def test_a_skewed_band_of_partial_sums_is_chained() -> None:
    """Where the writers of each element are contiguous on one line but hold different
    elements (a skewed band), every PE passes the elements of the whole line along a
    chain, those it computes no part of holding 0; the last keeps every total."""
    for path in (SKEWED_GEMV, SKEWED_SUM):
        c = compile_file(path)
        assert c.module is not None and c.tasks is not None
        (red,) = c.tasks.reductions
        assert red.side == "E"
        text = print_module(c.module)
        assert "land_y_sum" not in text and "combine_y" in text
        outcome = run_program(path, seed=2)
        assert outcome.comparison.verified and outcome.comparison.exact


def test_variants_become_a_length_before_simd_is_given_up() -> None:
    """skewed_sum's 16 diagonal sizes do not fit a PE's 8 configurations: the variants
    become one configuration cut at run time."""
    c = compile_file(SKEWED_SUM)
    assert c.decisions is not None
    d = c.decisions["n_local"]
    assert d.used and d.by_length
    per_wavelet = compile_file(SKEWED_SUM, arrival="per-wavelet")
    assert per_wavelet.decisions is not None and per_wavelet.decisions["n_local"].used


@pytest.mark.parametrize(("options", "excess", "expected"), [
    # 8 configurations saving 500 each against 2 saving 100 each: give up the 2
    ([(500.0, "n_local", 8), (100.0, "exchange:y", 2)], 2, ["exchange:y"]),
    # the greedy order (least per configuration first) would give up both
    ([(10.0, "a", 1), (20.0, "b", 3)], 3, ["b"]),
    ([(10.0, "a", 1), (20.0, "b", 3), (5.0, "c", 2)], 3, ["a", "c"]),
])
def test_the_configurations_given_up_lose_the_least(
        options: list[tuple[float, str, int]], excess: int, expected: list[str]) -> None:
    assert sorted(name for _, name, _ in _least_loss(options, excess)) == expected


@st.composite
def skewed(draw: st.DrawFn) -> dict[str, object]:
    return dict(m=draw(st.integers(4, 24)), n=draw(st.integers(4, 24)),
                a=draw(st.integers(1, 2)), b=draw(st.integers(1, 2)),
                tile=draw(st.integers(3, 12)), pes=draw(st.integers(2, 5)),
                op=draw(st.sampled_from(["+=", "max="])), dtype=draw(st.sampled_from(
                    ["float16", "float32"])), along=draw(st.sampled_from(["row", "column",
                                                                          "grid"])))


@pytest.mark.long
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skewed())
def test_random_skewed_placements_compute_the_program(case: dict[str, object]) -> None:
    """``y[i] op W[i][j] * x[j]`` placed by ``(a i + b j) // tile`` (wrapped onto the
    PEs) along a row, a column, or a row per block of 8 rows of W: rows of many lengths
    and partial results meeting on several PEs (banded chains, reducing exchanges)."""
    m, n, a, b, tile, pes = (int(case[k]) for k in ("m", "n", "a", "b", "tile", "pes"))
    span = (a * (m - 1) + b * (n - 1)) // tile + 1  # (PEs along the diagonal bands)
    wrap = f" mod {pes}" if span > 8 else ""
    pes = pes if wrap else span
    band = f"(({a}*i + {b}*j)//{tile}){wrap}"
    rect, place = {"row": (f"{pes}, 1", f"{band}, 0"),
                   "column": (f"1, {pes}", f"0, {band}"),
                   "grid": (f"{pes}, {(m - 1) // 8 + 1}", f"{band}, i//8")}[str(case["along"])]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.lair"
        path.write_text(f"lair s<T={case['dtype']}>(): T W[{m}][{n}], T x[{n}] -> T y[{m}]\n"
                        f"{{ all (i, j) in ({m}, {n}) y[i] {case['op']} W[i][j] * x[j] }}\n")
        path.with_suffix(".map").write_text(
            f"rectangle {{ PE[{rect}] }}\n"
            f"placement {{ s[i, j] -> PE[{place}] }}\n"
            "input x resident\ninput W resident\noutput y resident\n")
        try:
            outcome = run_program(path, seed=4)
        except DtgError as err:  # a located rejection is fine; a wrong result is not
            assert err.loc is not None, err
            return
        assert outcome.comparison.verified and outcome.comparison.exact, case


def test_a_length_shorter_than_the_inner_dimension_passes_the_check() -> None:
    """Sizes ``(1, 4)`` and ``(2, 4)`` cut to a length: only the cut dimension's extent
    is bounded by its size (the data-flow check compared the inner 4 with 2; random
    pair, seed 19, batches forced)."""
    path = ROOT / "tests" / "e2e" / "regressions" / "length_cut_narrower_than_inner.lair"
    for simd in (True, False):
        outcome = run_program(path, simd=simd, arrival="always")
        assert outcome.comparison.verified and outcome.comparison.exact
