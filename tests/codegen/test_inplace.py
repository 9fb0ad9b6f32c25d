"""Updates computed in place in the array of an input only they read (codegen.inplace)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import compile_file
from dtg.pe.ir import For, If, PeProgram, Run, Stmt
from dtg.pesim.run import run_program


def test_gemver_updates_a_in_its_own_array() -> None:
    """PolyBench's ``A[i][j] = A[i][j] + u1[i] v1[j] + u2[i] v2[j]``, single assignment
    in LAIR, runs as two multiply-adds into ``A``'s array: no copy, no second array."""
    path = EXAMPLES / "polybench" / "gemver.lair"
    c = compile_file(path)
    assert c.decisions is not None and c.memory is not None and c.module is not None
    hat = c.decisions["hat_local"]
    assert hat.op == "fmac" and len(hat.more) == 1 and "in place in A" in hat.reason
    (program,) = c.module.programs
    names = [a.name for a in program.arrays]
    assert "Ah_local" not in names and names.count("A_local") == 1
    assert all(cfg.op != "copy" or cfg.dst.array != "A_local" for cfg in program.configs)
    assert not any(run.arrays for run in runs(program))  # (no copy bound onto A_local)
    outcome = run_program(path)
    assert outcome.comparison.verified and outcome.comparison.exact


def _program(tmp: Path, body: str, *, extra_out: str = "", mapping: str = "") -> Path:
    (tmp / "p.lair").write_text(
        "let N = 8\n"
        "lair p<T=float16>(N):\n"
        f"  T S[N][N], T u[N], T v[N] -> T D[N][N]{extra_out}\n"
        "{\n" + body + "}\n")
    (tmp / "p.map").write_text(mapping or (
        "rectangle { PE[2, 2] }\n"
        "placement { upd[i, j] -> PE[j//4, i//4]"
        + ("; other[i, j] -> PE[j//4, i//4]" if "other" in body else "") + " }\n"
        "input S resident\ninput u resident\ninput v resident\noutput D resident\n"
        + ("output E resident\n" if extra_out else "")))
    return tmp / "p.lair"


UPDATE = "  upd: all (i, j) in (N, N) D[i][j] = S[i][j] + u[i] * v[j]\n"


@pytest.mark.parametrize(("body", "extra_out", "in_place"), [
    (UPDATE, "", True),
    # S read again by another statement: D may not overwrite it
    (UPDATE + "  other: all (i, j) in (N, N) E[i][j] = S[i][j] * u[i]\n", ", T E[N][N]",
     False),
    # S read at another element than the one written (its transpose)
    ("  upd: all (i, j) in (N, N) D[i][j] = S[j][i] + u[i] * v[j]\n", "", False),
    # S read by a later step of the statement
    ("  upd: all (i, j) in (N, N) D[i][j] = S[i][j] + u[i] * S[i][j]\n", "", False),
])
def test_in_place_only_where_nothing_else_needs_the_input(
        tmp_path: Path, body: str, extra_out: str, in_place: bool) -> None:
    path = _program(tmp_path, body, extra_out=extra_out)
    c = compile_file(path)
    assert c.module is not None
    (program,) = c.module.programs
    names = [a.name for a in program.arrays]
    assert ("D_local" not in names) == in_place
    for seed in (0, 1):
        outcome = run_program(path, seed=seed)
        assert outcome.comparison.verified and outcome.comparison.exact


def test_an_update_read_back_after_its_run_is_the_stored_output(tmp_path: Path) -> None:
    """D shares S's array and is the stored output: what is read back after the run is
    D, computed from the loaded S."""
    path = _program(tmp_path, UPDATE)
    c = compile_file(path)
    assert c.module is not None
    (program,) = c.module.programs
    (shared,) = [a for a in program.arrays if a.name == "S_local"]
    assert shared.load == "S" and shared.store == "D"
    outcome = run_program(path, seed=3)
    assert outcome.comparison.verified and outcome.comparison.exact


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_streamed_axpy_updates_its_addend_in_place(engine: str) -> None:
    """``z[i] = alpha * x[i] + y[i]`` with ``x`` streamed: its batches' decision is a
    multiply-add into ``y``'s array (the addition first, the same rounding), one
    instruction where there were a multiplication and an addition; predicted so."""
    from conftest import ROOT

    path = ROOT / "benchmarks" / "kernels" / "axpy.lair"
    c = compile_file(path)
    assert c.module is not None and c.arrivals is not None
    (program,) = c.module.programs
    assert [(cfg.op, cfg.dst.array) for cfg in program.configs] == [("fmac", "y_local")]
    assert not any(run.arrays for run in runs(program))
    assert "z_local" not in [a.name for a in program.arrays]
    (batch,) = c.arrivals.batches
    (way,) = [k for _, cands in c.arrivals.candidates for k in cands if k.way == batch.way]
    assert way.note.endswith("updated in place)")
    outcome = run_program(path, engine=engine, seed=5)
    assert outcome.comparison.verified and outcome.comparison.exact


def runs(program: PeProgram) -> Iterator[Run]:
    """Every ``run`` statement of ``program``."""
    def walk(body: tuple[Stmt, ...]) -> Iterator[Run]:
        for s in body:
            if isinstance(s, Run):
                yield s
            elif isinstance(s, If):
                yield from walk(s.then)
                yield from walk(s.orelse)
            elif isinstance(s, For):
                yield from walk(s.body)
    for task in program.tasks:
        yield from walk(task.body)
