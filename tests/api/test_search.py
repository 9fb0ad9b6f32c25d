"""dtg search: candidates from the space, ranked by the bound, verified by simulation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import EXAMPLES

import dtg
from dtg.cli import main
from dtg.lair.frontend import load_program
from dtg.mapping.space import alignments, candidates
from dtg.mapsearch import _spearman, search


def test_the_api_has_search() -> None:
    assert dtg.search is search and dtg.SearchResult.__name__ == "SearchResult"

GEMV = EXAMPLES / "gemv" / "gemv.lair"
CONV = EXAMPLES / "conv1d" / "conv1d.lair"


def test_the_space_of_gemv() -> None:
    model = load_program(GEMV).model
    found = {a.label() for a in alignments(model)}
    assert {"W dim 1 along X, W dim 0 along Y", "W dim 0 along X, W dim 1 along Y",
            "W dim 1 along X"} <= found
    texts = [c.text for c in candidates(model, 4, 4)]
    assert len(texts) == len(set(texts))
    written = (EXAMPLES / "gemv" / "gemv.map").read_text()
    assert "input  W resident" in written  # (the kind of each tensor of the written one)
    assert any("input x dense { x[j = 0:15] -> [PE[OX + j//TX, -1] -> index[j mod TX]] }"
               in t for t in texts)


@pytest.mark.parametrize(("program", "rectangle", "written"), [
    (GEMV, (4, 4), EXAMPLES / "gemv" / "gemv.map"),
    (CONV, (1, 2), EXAMPLES / "conv1d" / "conv1d.map"),
])
def test_a_short_search_finds_a_verified_mapping_as_fast_as_the_written_one(
        program: Path, rectangle: tuple[int, int], written: Path, tmp_path: Path) -> None:
    # (bounded by a count of candidates, not by time: the budget is not reached)
    result = search(program, *rectangle, budget=3600, top=5, like=written, limit=40)
    best = result.best
    assert best is not None and best.verified and best.cycles is not None
    assert result.considered == 40 and not result.out_of_time
    assert result.simulated == result.compiled == 5
    hand = dtg.simulate(dtg.compile(program, written)).cycles
    assert best.cycles <= hand
    # the best mapping is an ordinary .map that compiles and verifies again
    path = tmp_path / "best.map"
    path.write_text(best.text)
    again = dtg.simulate(dtg.compile(program, path))
    assert again.verified and again.cycles == best.cycles


def test_cli_writes_the_best_mapping(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "best.map"
    result = cli(main, "search", "conv1d", "--rectangle", "PE[1, 2]", "--budget", "1h",
                 "--limit", "40", "--top", "2", "-o", out, "-q")
    assert result.status == 0, result.err
    assert re.search(r"considered \d+ candidate mappings \(\d+ without a tiling that fits\), "
                     r"ranked their \d+ tilings; compiled 2 of the first \d+ in rank order, "
                     r"simulated 2 \(\d verified\) in ", result.out)
    text = out.read_text()
    assert text.startswith("# dtg search: ") and f"wrote {out}" in result.out
    assert dtg.simulate(dtg.compile(CONV, out)).verified
    # written as a person would: the program's iterators, nothing added to zero
    placement = next(line for line in text.splitlines() if line.startswith("placement"))
    assert re.fullmatch(r"placement \{ C\[k, w, rw\] -> PE\[[^\]]*\] \}", placement)
    assert not re.search(r"\+ 0\b|- \(|\(0\)| {2}| \]|o0", text)


def test_a_bad_rectangle_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, "search", "gemv", "--rectangle", "PE[0, 4]")
    assert result.status == 1 and "expected PE[W, H] or WxH" in result.err


def test_spearman() -> None:
    assert _spearman([1, 2, 3], [10, 20, 30]) == 1.0
    assert _spearman([1, 2, 3], [30, 20, 10]) == -1.0
    assert _spearman([1, 1, 1], [1, 2, 3]) is None


def test_a_tensor_of_two_dimensions_may_stream_through_one_pe() -> None:
    model = load_program(EXAMPLES / "conv2d" / "conv2d.lair").model
    texts = {c.text for c in candidates(model, 1, 2, {"x": False, "W": True, "y": True})}
    assert any("input x sparse { x[d0 = 0:15, d1 = 0:15] -> [PE[0, -1] -> index[d0, d1]] }"
               in t for t in texts)
    assert all("input W resident" in t and "output y resident" in t for t in texts)
