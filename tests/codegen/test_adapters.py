"""Adapter lines (eq. (5)): batched where each line's elements are one aligned window,
the paper's per-wavelet spreading with ``--arrival=per-wavelet``."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES

from dtg.codegen.driver import compile_file
from dtg.pe.printer import module as print_module
from dtg.pesim.run import run_program


def _adapter_text(path: Path, arrival: str) -> str:
    c = compile_file(path, arrival=arrival)
    assert c.module is not None
    assert sum(p.name.startswith("adapters") for p in c.module.programs) == 1
    return print_module(c.module).split("program compute")[0]


def test_ff_adapters_send_their_window_by_one_simd_instruction() -> None:
    text = _adapter_text(EXAMPLES / "fc" / "ff.lair", "batched")
    # x[4 PE_X .. 4 PE_X + 3] goes down line PE_X, re-indexed 0 .. 3 (eq. (5))
    assert "task spread_x data color 0 sparse batch 4 land land_x" in text
    assert "out(1, index) = land_x[i0]" in text
    assert "if (index == 4 * PE_X)" in text
    assert "send(" not in text.replace("send_end(", "")


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
    assert "if (n_x == 4 * PE_X)" in text and "n_x += count;" in text
    batched = run_program(tmp_path / "ff.lair", seed=3)
    per_wavelet = run_program(tmp_path / "ff.lair", seed=3, arrival="per-wavelet")
    assert batched.comparison.verified and batched.comparison.exact
    assert batched.result.cycles < per_wavelet.result.cycles
