"""Adapter lines (eq. (5)): batched where each line's elements are one aligned window,
the paper's per-wavelet spreading with ``--arrival=per-wavelet``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtg.codegen.driver import compile_file
from dtg.pe.printer import module as print_module
from dtg.pesim.run import run_program


def _adapter_text(path: Path, arrival: str) -> str:
    c = compile_file(path, arrival=arrival)
    assert c.module is not None
    assert sum(p.name.startswith("adapters") for p in c.module.programs) == 1
    return print_module(c.module).split("program compute")[0]


def test_ff_adapters_send_their_window_by_one_simd_instruction() -> None:
    """x[4 PE_X .. 4 PE_X + 3] goes down line PE_X, re-indexed 0 .. 3 (eq. (5)). The
    16 elements land whole in every adapter (one window, never cleared): with a batch
    per window, each adapter's task for every window held the stream up on the line."""
    text = _adapter_text(EXAMPLES / "fc" / "ff.lair", "batched")
    assert "task spread_x data color 0 sparse batch 16 land land_x once" in text
    assert "out(1, index) = land_x[i0]" in text
    assert "run spread_x_send {land_x: 4 * PE_X};" in text
    assert "send(" not in text.replace("send_end(", "")


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_adapters_land_a_short_stream_whole_and_a_long_one_by_windows(
        tmp_path: Path, kind: str) -> None:
    """Aligned windows: the whole stream as one batch where it is short (up to 64
    wavelets) and predicted faster, a batch per window beyond; both compute the
    program."""
    for n in (32, 128):
        here = tmp_path / f"{kind}{n}"
        here.mkdir()
        (here / "g.lair").write_text(
            f"let M = 32, N = {n}\nlair g<T=float16>(M, N):\n  T W[M][N], T x[N] -> T y[M]\n"
            "{\n  all (i, j) in (M, N)\n    y[i] += W[i][j] * x[j]\n}\n")
        tile = n // 4
        (here / "g.map").write_text(
            "rectangle { PE[4, 5] }\n"
            f"placement {{ g[i, j] -> PE[j//{tile}, 1 + i//8] }}\n"
            f"input  x {kind} {{ x[j = 0:{n - 1}] -> [PE[0, -1] -> index[j]] }}\n"
            "input  W resident\n"
            "output y dense { y[i = 0:31] -> [PE[4, 1 + i//8] -> index[i mod 8]] }\n")
        text = _adapter_text(here / "g.lair", "batched")
        batch = n if n <= 64 else tile
        assert f"batch {batch} land land_x" in text, text
        outcome = run_program(here / "g.lair", seed=n)
        assert outcome.comparison.verified and outcome.comparison.exact


def test_per_wavelet_adapters_are_the_papers() -> None:
    text = _adapter_text(EXAMPLES / "fc" / "ff.lair", "per-wavelet")
    assert "send(1, value, index % 4)" in text and "batch" not in text


def test_a_dense_stream_through_batched_adapters_computes_the_program(tmp_path: Path
                                                                     ) -> None:
    (tmp_path / "ff.lair").write_text((EXAMPLES / "fc" / "ff.lair").read_text())
    mapping = (EXAMPLES / "fc" / "ff.map").read_text()
    dense = mapping.replace("input  x sparse", "input  x dense")
    assert dense != mapping
    (tmp_path / "ff.map").write_text(dense)
    text = _adapter_text(tmp_path / "ff.lair", "batched")
    assert "batch 16 land land_x {" in text and "{land_x: 4 * PE_X}" in text
    batched = run_program(tmp_path / "ff.lair", seed=3)
    per_wavelet = run_program(tmp_path / "ff.lair", seed=3, arrival="per-wavelet")
    assert batched.comparison.verified and batched.comparison.exact
    assert batched.result.cycles < per_wavelet.result.cycles


def _halo_kernel(tmp_path: Path, *, n: int, window: int, stride: int, tile: int, pes: int,
                 entry: int = 0, weights: bool = False, gap: int = 1) -> Path:
    """A 1-D pooling (or, with ``weights``, a 1-D convolution) whose input enters from
    the north at column ``entry``: the windows of neighbouring PE columns overlap by
    ``window - stride`` elements per output at their ends (a halo). With ``gap`` 2 the
    tiles go to every other column, the columns between needing nothing."""
    outputs = (n - window) // stride + 1
    read = f"w[k] * x[{stride}*i + k]" if weights else f"x[{stride}*i + k]"
    inputs = "T w[K], T x[N]" if weights else "T x[N]"
    (tmp_path / "halo.lair").write_text(
        f"let N = {n}, K = {window}\n"
        f"lair halo<T=float16>(N, K):\n  {inputs} -> T y[{outputs}]\n"
        f"{{\n  all (i, k) in ({outputs}, K)\n    y[i] += {read}\n}}\n")
    (tmp_path / "halo.map").write_text(
        f"rectangle {{ PE[{gap * (pes - 1) + 1}, 2] }}\n"
        f"placement {{ halo[i, k] -> PE[{gap}*(i//{tile}), 1] }}\n"
        f"input  x dense {{ x[i = 0:{n - 1}] -> [PE[{entry}, -1] -> index[i]] }}\n"
        + ("input  w resident\n" if weights else "") + "output y resident\n")
    return tmp_path / "halo.lair"


HALOS = [
    dict(n=66, window=4, stride=2, tile=8, pes=4),  # sum pooling 4 / 2: 2-element halo
    dict(n=34, window=3, stride=1, tile=8, pes=4, weights=True),  # a 3-tap convolution
    dict(n=40, window=5, stride=1, tile=12, pes=3, entry=1),  # entering mid-line
    dict(n=50, window=3, stride=2, tile=6, pes=4, weights=True),
    dict(n=29, window=2, stride=1, tile=7, pes=4, entry=3),  # uneven last tile
]


def test_lines_without_a_window_send_nothing(tmp_path: Path) -> None:
    """Tiles on every other column: the adapters between have no window (they sent a
    part of one they do not have before the review of issue 27)."""
    path = _halo_kernel(tmp_path, n=23, window=5, stride=1, tile=7, pes=3, entry=4, gap=2)
    for arrival in ("batched", "per-wavelet"):
        outcome = run_program(path, seed=6, arrival=arrival)
        assert outcome.comparison.verified and outcome.comparison.exact


def test_halo_adapters_send_each_batchs_part_of_the_window_by_simd(tmp_path: Path) -> None:
    path = _halo_kernel(tmp_path, **HALOS[0])  # type: ignore[arg-type]
    text = _adapter_text(path, "batched")
    assert "data color 0 batch" in text and "run spread_x_send" in text
    assert "send(1, value" not in text  # (no wavelet is forwarded by the core)


def test_halo_adapters_compute_the_program_faster_than_per_wavelet(tmp_path: Path) -> None:
    for k, case in enumerate(HALOS):
        here = tmp_path / str(k)
        here.mkdir()
        path = _halo_kernel(here, **case)  # type: ignore[arg-type]
        batched = run_program(path, seed=k)
        per_wavelet = run_program(path, seed=k, arrival="per-wavelet")
        assert batched.comparison.verified and batched.comparison.exact, case
        assert per_wavelet.comparison.verified, case
        assert batched.result.cycles < per_wavelet.result.cycles, case


@st.composite
def halos(draw: st.DrawFn) -> dict[str, object]:
    window = draw(st.integers(2, 6))
    stride = draw(st.integers(1, window - 1))  # (windows overlap)
    tile = draw(st.integers(2, 12))
    pes = draw(st.integers(2, 5))
    outputs = draw(st.integers(tile * (pes - 1) + 1, tile * pes))  # every column used
    gap = draw(st.integers(1, 2))
    return dict(n=(outputs - 1) * stride + window, window=window, stride=stride, tile=tile,
                pes=pes, entry=draw(st.integers(0, gap * (pes - 1))),
                weights=draw(st.booleans()), gap=gap)


@pytest.mark.long
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(halos())
def test_random_halo_adapters_compute_the_program(case: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _halo_kernel(Path(tmp), **case)  # type: ignore[arg-type]
        outcome = run_program(path, seed=1)
        assert outcome.comparison.verified and outcome.comparison.exact, case


def test_a_halo_whose_arrivals_isl_describes_redundantly_compiles_quickly(
        tmp_path: Path) -> None:
    """Drawn by the random halo family: the arrivals of windows of 5 at a stride of 4 on
    every other column carry one existential variable per way an index is reached, and
    the batch's SIMD analysis ran for minutes in isl (not bounded by its operation
    limit) until the batch's context gets explicit divisions."""
    path = _halo_kernel(tmp_path, n=125, window=5, stride=4, tile=7, pes=5, entry=6,
                        weights=True, gap=2)
    outcome = run_program(path, seed=1)
    assert outcome.comparison.verified and outcome.comparison.exact


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_adapter_lines_land_batches_in_a_ring(engine: str, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """Every line of an adapter takes the whole stream, and a multicast wavelet moves on
    only when every line has room: the batches land in a ring of slots while a line
    runs its task, instead of each line holding up the stream in turn (the kernel's 262
    elements on 8 lines: 728 cycles with one slot)."""
    from conftest import ROOT

    from dtg.codegen import adapters

    path = ROOT / "benchmarks" / "kernels" / "conv1d_halo.lair"
    text = print_module(compile_file(path).module)  # type: ignore[arg-type]
    assert "land land_x ring 3" in text and "{land_x: slot" in text
    ringed = run_program(path, seed=3, engine=engine)
    monkeypatch.setattr(adapters, "adapter_ring", lambda size, batches: 1)
    single = run_program(path, seed=3, engine=engine)
    assert ringed.comparison.verified and ringed.comparison.exact
    assert single.comparison.verified
    assert ringed.result.cycles < 0.6 * single.result.cycles


RING_GEMV = """let M = 32, N = 256
lair gemv<T=float16>(M, N):
  T W[M][N], T x[N] -> T y[M]
{
  all (i, j) in (M, N)
    y[i] += W[i][j] * x[j]
}
"""
RING_GEMV_MAP = """rectangle { PE[8, 5] }
placement { gemv[i, j] -> PE[j//32, 1 + i//8] }
input  x KIND { x[j = 0:255] -> [PE[3, -1] -> index[j]] }
input  W resident
output y dense  { y[i = 0:31] -> [PE[8, 1 + i//8] -> index[i mod 8]] }
"""


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_aligned_windows_land_in_a_ring_on_both_engines(tmp_path: Path, kind: str) -> None:
    """An adapter line of 8 taking 256 elements in windows of 32: a ring of 3 slots,
    each sparse slot cleared as it opens; right for every share of zeros, alike on
    both engines."""
    import numpy as np

    (tmp_path / "g.lair").write_text(RING_GEMV)
    (tmp_path / "g.map").write_text(RING_GEMV_MAP.replace("KIND", kind))
    text = print_module(compile_file(tmp_path / "g.lair").module)  # type: ignore[arg-type]
    assert f"data color 0 {'sparse ' if kind == 'sparse' else ''}batch 32 land land_x " \
        "ring 3 {" in text
    for density in (0.0, 0.1, 1.0):
        rng = np.random.default_rng(3)
        x = rng.integers(-3, 4, size=256).astype(np.float16)
        x[rng.random(256) >= density] = 0
        w = rng.integers(-2, 3, size=(32, 256)).astype(np.float16)
        np.savez(tmp_path / "in.npz", x=x, W=w)
        runs = [run_program(tmp_path / "g.lair", inputs_path=tmp_path / "in.npz", engine=e)
                for e in ("simpy", "fast")]
        assert all(r.comparison.verified and r.comparison.exact for r in runs), density
        assert runs[0].result.cycles == runs[1].result.cycles, density
