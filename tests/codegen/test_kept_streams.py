"""Streams kept in memory where per-element statements would be slow (issue 27).

A statement reading one stream runs per arriving element; where the busiest PE needs
far more cycles per wavelet than the stream's pace (a band matrix or stencil whose
windows overlap: a batch's instances are no box), the compiler also compiles the
program with the stream kept in memory, its statements running once over the PE's
whole box, and keeps that where the cost model predicts it at most 90% of the cycles.
A batch's part of a PE's window, kept, is a box of a few sizes: one copy variant each.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dtg.codegen.batching as batching
import dtg.codegen.pipeline as pipeline
from dtg.codegen.driver import compile_file
from dtg.pesim.run import run_program


def _band(tmp_path: Path, *, n: int = 64, taps: int = 3, tile: int = 16, pes: int = 4,
          kind: str = "dense", entry: str = "W") -> Path:
    """``y[i] += A[i][k] * x[i + k]``: a band matrix times a vector streamed along the
    row of PEs, each PE's window overlapping its neighbour's by ``taps - 1``."""
    (tmp_path / "band.lair").write_text(
        f"let N = {n}, K = {taps}\n"
        "lair band<T=float16>(N, K):\n  T A[N][K], T x[N + K - 1] -> T y[N]\n"
        "{\n  all (i, k) in (N, K)\n    y[i] += A[i][k] * x[i + k]\n}\n")
    source = "PE[-1, 0]" if entry == "W" else f"PE[{pes}, 0]"
    (tmp_path / "band.map").write_text(
        f"rectangle {{ PE[{pes}, 1] }}\n"
        f"placement {{ band[i, k] -> PE[i//{tile}, 0] }}\n"
        f"input  x {kind} {{ x[i = 0:{n + taps - 2}] -> [{source} -> index[i]] }}\n"
        "input  A resident\noutput y resident\n")
    return tmp_path / "band.lair"


def test_a_band_matrix_keeps_its_stream_and_runs_one_box(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (in batches shorter than the stream's 66 elements, which would otherwise land whole)
    monkeypatch.setattr(batching, "MAX_GROUP_BATCH", 0)
    path = _band(tmp_path)
    c = compile_file(path)
    assert c.tasks is not None and c.arrivals is not None and c.module is not None
    assert c.tasks.buffered == ("x",)
    (batch,) = c.arrivals.batches
    # the halo's part of each batch varies in size, on every PE: one copy cut to a length
    assert batch.keep is not None and batch.keep.length is not None
    assert not batch.keep.variants
    compute = next(p for p in c.module.programs if p.name == "compute")
    # (batches of 64: a PE's whole window of 16 + 2 in one copy, cut to each batch's part)
    assert [cfg.variants for cfg in compute.configs if cfg.name == "keep_x"] == [((18,),)]
    assert any(cfg.name == "simd_band_local" and cfg.variants == ((16, 3),)
               for cfg in compute.configs)
    for seed in (0, 1):
        outcome = run_program(path, seed=seed)
        assert outcome.comparison.verified and outcome.comparison.exact


def test_keeping_is_chosen_only_where_it_is_faster(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "MAX_GROUP_BATCH", 0)
    path = _band(tmp_path)
    kept = run_program(path, seed=2)
    monkeypatch.setattr(pipeline, "_slow_streams", lambda c: frozenset())
    per_element = run_program(path, seed=2)
    assert per_element.comparison.verified
    assert kept.result.cycles * 2 < per_element.result.cycles


@st.composite
def bands(draw: st.DrawFn) -> dict[str, object]:
    taps = draw(st.integers(2, 5))
    tile = draw(st.integers(2, 20))
    pes = draw(st.integers(1, 5))
    n = draw(st.integers(tile * (pes - 1) + 1, tile * pes))
    return dict(n=n, taps=taps, tile=tile, pes=pes, kind=draw(st.sampled_from(
        ["dense", "sparse"])), entry=draw(st.sampled_from(["W", "E"])))


@pytest.mark.long
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bands())
def test_random_bands_compute_the_program(case: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _band(Path(tmp), **case)  # type: ignore[arg-type]
        outcome = run_program(path, seed=3)
        assert outcome.comparison.verified and outcome.comparison.exact, case


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_whole_groups_kept_in_their_landing_order_land_in_place(engine: str) -> None:
    """Both operands of a matrix product stream in and are kept whole: each PE's batch of
    whole groups lands in the tensor's own array (the copy would be the identity), with
    no landing array and no copy."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels" / \
        "matmul_two_streams.lair"
    c = compile_file(path)
    assert c.module is not None
    compute = next(p for p in c.module.programs if p.name == "compute")
    lands = {t.name: t.land for t in compute.tasks if t.batch is not None}
    assert lands == {"on_A": "A_local", "on_B": "B_local"}
    assert not any(a.name.startswith("land_") for a in compute.arrays)
    assert not any(cfg.name.startswith("keep_") for cfg in compute.configs)
    for seed in (0, 1):
        outcome = run_program(path, seed=seed, engine=engine)
        assert outcome.comparison.verified and outcome.comparison.exact


# y = W x with x arriving in a stride-16 interleave per column of PEs: on a PE the
# position is affine on none of the 16 residue classes' lattices a split would need (at
# most 8), so no batch; one SIMD column of W per wavelet.
INTERLEAVED = ("""
    lair gemv(): float16 W[32][128], float16 x[128] -> float16 y[32]
    { all (i, j) in (32, 128) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[4, 4] }
    placement { gemv[i, j] -> PE[j//32, i//8] }
    input  x dense { x[j = 0:127] -> [PE[j//32, -1] -> index[(j mod 16) * 2 + (j mod 32)//16]] }
    input  W resident
    output y dense { y[i = 0:31] -> [PE[4, i//8] -> index[i mod 8]] }
    """)


def test_a_stream_that_cannot_be_batched_is_kept_where_predicted_faster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept in memory, one instruction runs after the stream: predicted faster, kept,
    and faster than per wavelet (what the compiler keeps with ``KEEP_GAIN`` at 0)."""
    from conftest import write_pair

    path = write_pair(tmp_path, *INTERLEAVED)
    c = compile_file(path)
    assert c.tasks is not None and c.arrivals is not None and "x" in c.tasks.buffered
    assert not c.arrivals.batches
    kept = run_program(path, engine="simpy")
    monkeypatch.setattr(pipeline, "KEEP_GAIN", 0.0)
    assert "x" not in (compile_file(path).tasks.buffered)  # type: ignore[union-attr]
    per_wavelet = run_program(path, engine="simpy")
    assert kept.comparison.verified and per_wavelet.comparison.verified
    assert kept.result.cycles < per_wavelet.result.cycles
