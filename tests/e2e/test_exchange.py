"""Internal tensors shared between PEs of a row or column (a 2-D tiled matrix chain)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dtg.codegen.sharing
from dtg.codegen.driver import compile_file
from dtg.pe.ir import If
from dtg.pe.printer import module as module_text
from dtg.pe.printer import task as task_text
from dtg.pesim.run import run_program

ROW_LAIR = """
lair mm(): float32 A[8][6], float32 B[6][8], float32 C[8][4]
  -> float32 E[8][4], float32 T[8][8]
{
  ab: all (i, j, k) in (8, 8, 6) T[i][j] += A[i][k] * B[k][j]
  tc: all (i, l, j) in (8, 4, 8) E[i][l] += T[i][j] * C[j][l]
}
"""
COLUMN_LAIR = """
lair mm(): float32 A[8][6], float32 B[6][8], float32 C[4][8]
  -> float32 E[4][8], float32 T[8][8]
{
  ab: all (i, j, k) in (8, 8, 6) T[i][j] += A[i][k] * B[k][j]
  tc: all (l, j, i) in (4, 8, 8) E[l][j] += C[l][i] * T[i][j]
}
"""
CASES = {
    "row_2x2": (ROW_LAIR, """
        rectangle { PE[2, 2] }
        placement { ab[i, j, k] -> PE[j//4, i//4]; tc[i, l, j] -> PE[l//2, i//4] }
        input A resident
        input B resident
        input C resident
        output E resident
    """),
    "row_4x2_streamed": (ROW_LAIR, """
        rectangle { PE[4, 2] }
        placement { ab[i, j, k] -> PE[j//2, i//4]; tc[i, l, j] -> PE[l, i//4] }
        input A sparse { A[i = 0:7, k = 0:5] -> [PE[-1, i//4] -> index[i mod 4, k]] }
        input B resident
        input C resident
        output E resident
    """),
    "column_2x4": (COLUMN_LAIR, """
        rectangle { PE[2, 4] }
        placement { ab[i, j, k] -> PE[j//4, i//2]; tc[l, j, i] -> PE[j//4, l] }
        input A resident
        input B resident
        input C resident
        output E resident
    """),
}


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_internal_tensor_shared_along_lines(tmp_path: Path, name: str, simd: bool) -> None:
    lair, mapping = CASES[name]
    (tmp_path / "mm.lair").write_text(lair)
    (tmp_path / "mm.map").write_text(mapping)
    compiled = compile_file(tmp_path / "mm.lair", stop="tasks")
    assert compiled.tasks is not None and [e.tensor for e in compiled.tasks.exchanges] == ["T"]
    result = run_program(tmp_path / "mm.lair", simd=simd, seed=3)
    assert result.comparison.verified and result.comparison.exact, result.comparison.mismatch


def _protocol(tmp_path: Path, name: str) -> set[str]:
    """Which exchange protocol each compiled case uses: 'block' (one SIMD instruction
    sends a PE's block, a batched task lands it) or 'pairs' (indexed scalar sends)."""
    lair, mapping = CASES[name]
    (tmp_path / "mm.lair").write_text(lair)
    (tmp_path / "mm.map").write_text(mapping)
    compiled = compile_file(tmp_path / "mm.lair")
    assert compiled.module is not None
    tasks = [t for p in compiled.module.programs for t in p.tasks
             if t.name.startswith("share_")]
    return {"block" if t.batch is not None else "pairs" for t in tasks}


SHIFT_LAIR = """
lair sh(): float32 A[8][10], float32 B[8][10] -> float32 S[8][8], float32 T[8][10]
{
  t: all (i, j) in (8, 10) T[i][j] = A[i][j] * B[i][j]
  s: all (i, j) in (8, 8) S[i][j] = T[i][j + 2]
}
"""
CASES["shift_5x2"] = (SHIFT_LAIR, """
        rectangle { PE[5, 2] }
        placement { t[i, j] -> PE[j//2, i//4]; s[i, j] -> PE[j//2, i//4] }
        input A resident
        input B resident
        output S resident
    """)


@pytest.mark.parametrize("name, protocol", [
    ("row_2x2", "block"), ("column_2x4", "block"), ("row_4x2_streamed", "block"),
    # each PE keeps its neighbour's columns of T only: one part of one block
    ("shift_5x2", "block")])
def test_whole_blocks_are_exchanged_by_simd_instructions(tmp_path: Path, name: str,
                                                         protocol: str) -> None:
    assert _protocol(tmp_path, name) == {protocol}
    result = run_program(tmp_path / "mm.lair", seed=5)
    assert result.comparison.verified and result.comparison.exact, result.comparison.mismatch


@pytest.fixture
def turns_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn protocol wherever an exchange has one (direct exchanges off)."""
    monkeypatch.setattr(dtg.codegen.sharing, "direct_exchange", lambda *a, **k: None)


@pytest.mark.usefixtures("turns_only")
def test_a_receiver_keeps_only_the_part_of_each_block_inside_its_array(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With turns (a halo's exchanges without them off): the part of each block."""
    monkeypatch.setattr(dtg.codegen.sharing, "halo_exchange", lambda *a, **k: None)
    lair, mapping = CASES["shift_5x2"]
    (tmp_path / "mm.lair").write_text(lair)
    (tmp_path / "mm.map").write_text(mapping)
    compiled = compile_file(tmp_path / "mm.lair")
    assert compiled.module is not None
    (share,) = [t for p in compiled.module.programs for t in p.tasks
                if t.name == "share_T"]
    # blocks from PEs before this one: nothing kept; after: only the next PE's block
    (choice,) = share.body
    assert isinstance(choice, If) and choice.then == () and len(choice.orelse) == 1
    for seed in (1, 2):
        result = run_program(tmp_path / "mm.lair", seed=seed)
        assert result.comparison.verified and result.comparison.exact


@pytest.mark.parametrize("example, protocol", [
    ("movement/mlp.lair", "block"),  # read across rows and columns: the whole region
    ("polybench/3mm.lair", "block")])
def test_examples_exchange_protocols(example: str, protocol: str) -> None:
    from conftest import EXAMPLES

    compiled = compile_file(EXAMPLES / example)
    assert compiled.module is not None
    tasks = [t for p in compiled.module.programs for t in p.tasks
             if t.name.startswith("share_")]
    assert tasks and {"block" if t.batch else "pairs" for t in tasks} == {protocol}


GEMV_TRANSPOSED = """
lair g(): float32 W[16][16], float32 x[16] -> float32 y[16]
{ all (i, j) in (16, 16) y[i] += W[i][j] * x[j] }
"""
# Row b's chain totals end at PE[3, b]; y's block b leaves south of column b: the
# totals cross the region, from the last column only.
HOLDERS = {
    "last_column_to_columns": (GEMV_TRANSPOSED, """
        rectangle { PE[4, 4] }
        placement { g[i, j] -> PE[j//4, i//4] }
        input x sparse { x[j = 0:15] -> [PE[1, -1] -> index[j]] }
        input W resident
        output y dense { y[i = 0:15] -> [PE[i//4, 4] -> index[i mod 4]] }
    """),
    "last_column_sparse": (GEMV_TRANSPOSED, """
        rectangle { PE[4, 4] }
        placement { g[i, j] -> PE[j//4, i//4] }
        input x sparse { x[j = 0:15] -> [PE[1, -1] -> index[j]] }
        input W resident
        output y sparse { y[i = 0:15] -> [PE[i//4, 4] -> index[i mod 4]] }
    """),
}


@pytest.mark.usefixtures("turns_only")
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(HOLDERS))
def test_only_the_pes_holding_elements_take_turns(tmp_path: Path, name: str, simd: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dtg.codegen.sharing, "halo_exchange", lambda *a, **k: None)
    lair, mapping = HOLDERS[name]
    (tmp_path / "g.lair").write_text(lair)
    (tmp_path / "g.map").write_text(mapping)
    compiled = compile_file(tmp_path / "g.lair", simd=simd)
    assert compiled.module is not None and compiled.tasks is not None
    (ex,) = compiled.tasks.exchanges
    text = module_text(compiled.module)
    # the turn needs this PE to be a holder (the last column) and counts 4 senders
    assert f"got_{ex.tensor}" in text
    turn = next(t for p in compiled.module.programs for t in p.tasks
                if t.name.startswith("turn_"))
    body = "\n".join(task_text(turn))
    assert "PE_X == 3" in body and "== 4" in body, body
    for seed in (0, 4):
        result = run_program(tmp_path / "g.lair", simd=simd, seed=seed)
        assert result.comparison.verified and result.comparison.exact, result.comparison.mismatch


def _turn_counts(tmp_path: Path, lair: str, mapping: str) -> str:
    (tmp_path / "g.lair").write_text(lair)
    (tmp_path / "g.map").write_text(mapping)
    compiled = compile_file(tmp_path / "g.lair")
    assert compiled.module is not None
    return module_text(compiled.module)


@pytest.mark.parametrize("name", sorted(HOLDERS))
def test_each_holder_sends_its_block_straight_to_the_pes_needing_it(
        tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column's totals read by the PEs of one other column each: every holder sends
    at once, on routes to its readers only (no turns, no broadcast), verified on both
    engines and faster than the turns."""
    lair, mapping = HOLDERS[name]
    text = _turn_counts(tmp_path, lair, mapping)
    assert "== 4" not in text  # (no count of 4 turns)
    runs = {}
    for engine in ("simpy", "fast"):
        for seed in (0, 4):
            result = run_program(tmp_path / "g.lair", seed=seed, engine=engine)
            assert result.comparison.verified and result.comparison.exact
            runs[engine] = result.result.cycles
    assert runs["simpy"] == runs["fast"]
    monkeypatch.setattr(dtg.codegen.sharing, "direct_exchange", lambda *a, **k: None)
    assert runs["simpy"] < run_program(tmp_path / "g.lair", seed=0).result.cycles


def test_a_receiver_of_several_blocks_takes_turns(tmp_path: Path) -> None:
    """Each PE of a row reads the blocks of the three others: an exchange without turns
    per displacement would send each block three times (measured slower: 447 against
    313 cycles), so the turns broadcast each block once, as before."""
    lair, mapping = CASES["row_4x2_streamed"]
    text = _turn_counts(tmp_path, lair, mapping)
    assert "got_T + sent_T == 4" in text
    result = run_program(tmp_path / "g.lair", seed=3)
    assert result.comparison.verified and result.comparison.exact
