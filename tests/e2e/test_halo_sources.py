"""Halos from the neighbours' sources: each PE's block of a stencil's input streams in
from the external PE beside it, and the elements it shares with a neighbour reach that
neighbour by a multicast tree. Each source sends its own indices, so sources sharing a
color would give a PE its position in the stream by a function that isl writes by
piece; each source takes its own color instead, and every flow is taken in batches
(issue 27, item 1). Both engines, SIMD and scalar, against the reference interpreter."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dtg
from dtg.codegen.colors import colors_used
from dtg.mapping import inputs
from dtg.pesim.run import run_program

STENCIL1D = ("""
    lair st(): float16 x[258], float16 c[3] -> float16 y[256]
    { all (i, r) in (256, 3) y[i] += c[r] * x[i + r] }
    """, """
    rectangle { PE[4, 1] }
    placement { st[i, r] -> PE[i//64, 0] }
    input  x dense { x[i = 0:257] -> [PE[i//64, -1] -> index[i mod 64]] : i < 256;
                     x[i = 0:257] -> [PE[3, -1] -> index[i - 192]] : i >= 256 }
    input  c resident
    output y dense { y[i = 0:255] -> [PE[i//64, 1] -> index[i mod 64]] }
    """)
STENCIL2D = ("""
    lair st(): float16 x[50][34], float16 c[3][3] -> float16 y[48][32]
    { all (i, j, a, b) in (48, 32, 3, 3) y[i][j] += c[a][b] * x[i + a][j + b] }
    """, """
    rectangle { PE[2, 3] }
    placement { st[i, j, a, b] -> PE[j//16, i//16] }
    input  x dense { x[i = 0:49, j = 0:33] -> [PE[-1, i//16] -> index[i mod 16, j]] : i < 48;
                     x[i = 0:49, j = 0:33] -> [PE[-1, 2] -> index[i - 32, j]] : i >= 48 }
    input  c resident
    output y resident
    """)
CASES = {"stencil1d": STENCIL1D, "stencil2d": STENCIL2D}
SOURCES = {"stencil1d": 4, "stencil2d": 3}


def _write(tmp_path: Path, name: str) -> Path:
    lair, mapping = CASES[name]
    (tmp_path / "p.lair").write_text(textwrap.dedent(lair))
    (tmp_path / "p.map").write_text(textwrap.dedent(mapping))
    return tmp_path / "p.lair"


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_verifies(tmp_path: Path, name: str, simd: bool, engine: str) -> None:
    path = _write(tmp_path, name)
    for seed in (0, 1):
        outcome = run_program(path, simd=simd, seed=seed, engine=engine)
        assert outcome.comparison.verified, outcome.comparison.mismatch


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_source_is_batched(tmp_path: Path, name: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Apart, every source's flow has one order on its PEs and is taken in batches; the
    sources left together (no split) run one task per wavelet, several times slower.
    (The trees whole: cut into halos and the rest, tests/e2e/test_halo_split.py.)"""
    monkeypatch.setattr(inputs, "halo_split", lambda *a, **k: None)
    path = _write(tmp_path, name)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None and compiled.arrivals is not None
    flows = compiled.tasks.input_flows("x")
    assert len(flows) == SOURCES[name] and all(f.order_on_pe() is not None for f in flows)
    assert any(f.apart for f in flows)
    assert all(("apart on 2 colors" in f.plan) == f.apart for f in flows)
    assert {b.flow for b in compiled.arrivals.batches} == {f.name for f in flows}
    apart = run_program(path)
    assert apart.comparison.verified
    monkeypatch.setattr(inputs, "MAX_SPLIT", 0)
    tasks = dtg.compile(path).tasks
    assert tasks is not None and len(tasks.input_flows("x")) == 2
    together = run_program(path)
    assert together.comparison.verified
    assert 3 * apart.result.cycles < together.result.cycles, (apart.result.cycles,
                                                              together.result.cycles)


@st.composite
def blocked_stencils(draw: st.DrawFn) -> tuple[str, str, str]:
    """A 1-D stencil of ``taps`` points on a row of ``pes`` PEs, each PE's block of the
    input from the external PE beside it (north or south), the last ``taps - 1`` points
    from the last PE's; a dense or sparse stream, each source's indices from 0 or
    continuing the global index; the output streamed out or resident."""
    taps = draw(st.integers(2, 5))
    block = draw(st.integers(taps, 40))
    pes = draw(st.integers(2, 6))
    n = block * pes
    kind = draw(st.sampled_from(["dense", "sparse"]))
    row = draw(st.sampled_from(["-1", "1"]))
    local = draw(st.booleans())
    first = f"i mod {block}" if local else "i"
    last = f"i - {block * (pes - 1)}" if local else "i"
    lair = (f"lair st(): float16 x[{n + taps - 1}], float16 c[{taps}] -> float16 y[{n}]\n"
            f"{{ all (i, r) in ({n}, {taps}) y[i] += c[r] * x[i + r] }}\n")
    out = draw(st.sampled_from(["resident", "stream"]))
    away = "1" if row == "-1" else "-1"  # (the other side)
    output = ("output y resident" if out == "resident" else
              f"output y dense {{ y[i = 0:{n - 1}] -> [PE[i//{block}, {away}]"
              f" -> index[i mod {block}]] }}")
    mapping = (f"rectangle {{ PE[{pes}, 1] }}\n"
               f"placement {{ st[i, r] -> PE[i//{block}, 0] }}\n"
               f"input  x {kind} {{ x[i = 0:{n + taps - 2}] -> [PE[i//{block}, {row}] -> "
               f"index[{first}]] : i < {n};\n"
               f"                 x[i = 0:{n + taps - 2}] -> [PE[{pes - 1}, {row}] -> "
               f"index[{last}]] : i >= {n} }}\n"
               f"input  c resident\n{output}\n")
    return lair, mapping, kind


@pytest.mark.long
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocked_stencils(), st.sampled_from(["simpy", "fast"]))
def test_random_blocked_stencils_compute_the_program(case: tuple[str, str, str],
                                                     engine: str) -> None:
    lair, mapping, _ = case
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "p.lair").write_text(lair)
        (Path(tmp) / "p.map").write_text(mapping)
        outcome = run_program(Path(tmp) / "p.lair", seed=4, engine=engine)
        assert outcome.comparison.verified and outcome.comparison.exact, mapping


def test_sources_apart_lose_their_batches_first_where_colors_run_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three stencil inputs, each from 8 sources that send their own indices: apart and
    batched they would take 24 colors before the output's. Without batches their colors
    are shared (7 in all), which is faster than the sources together, whose orders allow
    no batches either."""
    n, pes = 128, 8
    block = n // pes
    ins = ", ".join(f"float16 {t}[{n + 2}]" for t in "abc")
    (tmp_path / "p.lair").write_text(
        f"lair st(): {ins}, float16 w[3] -> float16 y[{n}]\n"
        f"{{ all (i, r) in ({n}, 3) y[i] += w[r] * (a[i + r] + b[i + r] + c[i + r]) }}\n")
    streams = "\n".join(
        f"input  {t} dense {{ {t}[i = 0:{n + 1}] -> [PE[i//{block}, -1] -> index[i mod "
        f"{block}]] : i < {n};\n  {t}[i = 0:{n + 1}] -> [PE[{pes - 1}, -1] -> "
        f"index[i - {n - block}]] : i >= {n} }}" for t in "abc")
    (tmp_path / "p.map").write_text(
        f"rectangle {{ PE[{pes}, 1] }}\nplacement {{ st[i, r] -> PE[i//{block}, 0] }}\n"
        f"{streams}\ninput  w resident\n"
        f"output y dense {{ y[i = 0:{n - 1}] -> [PE[i//{block}, 1] -> index[i mod {block}]] }}\n")
    compiled = dtg.compile(tmp_path / "p.lair")
    assert compiled.tasks is not None and compiled.arrivals is not None
    assert compiled.module is not None
    assert all(len(compiled.tasks.input_flows(t)) == 8 for t in "abc")
    assert not compiled.arrivals.batches and len(colors_used(compiled.module)) <= 24
    apart = run_program(tmp_path / "p.lair", seed=1)
    assert apart.comparison.verified and apart.comparison.exact
    monkeypatch.setattr(inputs, "MAX_SPLIT", 0)
    together = run_program(tmp_path / "p.lair", seed=1)
    assert together.comparison.verified and together.comparison.exact
    assert apart.result.cycles < together.result.cycles


LONG_LINE = ("""
    lair st(): float32 x[644], float32 w[5] -> float32 y[640]
    { all (i, r) in (640, 5) y[i] += x[i + r] * w[r] }
    """, """
    rectangle { PE[20, 2] }
    placement { st[i, r] -> PE[i//32, 0] }
    input x dense { x[i = 0:643] -> [PE[i//32, -1] -> index[i mod 32]] : i < 640;
                    x[i = 0:643] -> [PE[19, -1] -> index[i - 608]] : i >= 640 }
    input w resident
    output y resident
    """)


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_more_sources_than_colors_apart_form_residue_classes(
        tmp_path: Path, engine: str) -> None:
    """20 sources, each PE's block and its neighbour's halo: every other source on one
    color, too many to take apart (10, more than 8), are written as a residue class, on which
    a PE's position in the stream is one function: two flows, both batched. Written a
    point each (a helper's 32-source line), the keep expression had 16 pieces tested on
    every wavelet and the stream ran without batches, 72x its bound."""
    lair, mapping = LONG_LINE
    (tmp_path / "p.lair").write_text(textwrap.dedent(lair))
    (tmp_path / "p.map").write_text(textwrap.dedent(mapping))
    compiled = dtg.compile(tmp_path / "p.lair")
    assert compiled.tasks is not None and compiled.arrivals is not None
    flows = compiled.tasks.input_flows("x")
    assert len(flows) == 2 and all(f.order_on_pe() is not None for f in flows)
    assert {b.flow for b in compiled.arrivals.batches} == {f.name for f in flows}
    outcome = run_program(tmp_path / "p.lair", engine=engine, seed=2)
    assert outcome.comparison.verified and outcome.comparison.exact
    assert outcome.bound is not None and outcome.result.cycles < 3 * outcome.bound.cycles
