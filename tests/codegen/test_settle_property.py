"""Settling tests of the PE alone (codegen.cleanup.settle_pe_branches) keeps what every
PE computes: random nests of tests of ``PE_X``, ``PE_Y`` (and of a variable), each
branch adding its own power of two, run on a 3 x 3 mesh before and after (Hypothesis)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtg.codegen.cleanup import settle_pe_branches
from dtg.pe.ir import (
    BoolOp,
    Cmp,
    Cond,
    FConst,
    IBin,
    IConst,
    If,
    IVar,
    Load,
    Not,
    SetInt,
    Stmt,
    Store,
)
from dtg.pe.parser import parse_module
from dtg.pe.printer import module as module_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pesim"))
from pesim_support import sim

MODULE = """
module m
mesh PE[3, 3]
program p origin PE[0, 0] pes { PE[x, y] : 0 <= x <= 2 and 0 <= y <= 2 }
{
  array float32 a[1] offset [PE_X + 3 * PE_Y] store y;
  int n = 0;
  task main {
  }
}
"""

coordinate = st.sampled_from([IVar("PE_X"), IVar("PE_Y"),
                              IBin("+", IVar("PE_X"), IVar("PE_Y")),
                              IBin("%", IVar("PE_X"), IConst(2)),
                              IBin("//", IVar("PE_Y"), IConst(2))])
comparison = st.builds(Cmp, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), coordinate,
                       st.integers(-1, 3).map(IConst))
variable = st.builds(Cmp, st.sampled_from(["==", "!="]), st.just(IVar("n")),
                     st.integers(0, 1).map(IConst))


def conditions(leaf: st.SearchStrategy[Cond]) -> st.SearchStrategy[Cond]:
    return st.recursive(leaf, lambda inner: st.one_of(
        st.builds(BoolOp, st.sampled_from(["&&", "||"]), inner, inner),
        st.builds(Not, inner)), max_leaves=3)


@st.composite
def bodies(draw: st.DrawFn, depth: int = 0) -> tuple[Stmt, ...]:
    """Statements: each branch adds a distinct power of two to the PE's output."""
    out: list[Stmt] = []
    for _ in range(draw(st.integers(1, 2))):
        weight = draw(st.integers(0, 20))
        out.append(Store(Load("a", (IConst(0),)), "+=", FConst(float(2 ** weight))))
        if depth < 3 and draw(st.booleans()):
            leaf = st.one_of(comparison, comparison, variable)
            cond = draw(conditions(leaf))
            then = draw(bodies(depth + 1))
            orelse = draw(bodies(depth + 1)) if draw(st.booleans()) else ()
            out.append(If(cond, then, orelse))
        if draw(st.booleans()):
            out.append(SetInt("n", "=", IConst(draw(st.integers(0, 1)))))
    return tuple(out)


def _run(program_body: tuple[Stmt, ...], *, settle: bool) -> tuple[np.ndarray, str]:
    module = parse_module(MODULE)
    (program,) = module.programs
    (main,) = program.tasks
    program = replace(program, tasks=(replace(main, body=program_body),))
    if settle:
        program = settle_pe_branches(program)
    text = module_text(replace(module, programs=(program,)))
    result = sim(text, {}, {"y": ((9,), "float32")})
    return result.outputs["y"], text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_settled_tests_compute_what_the_plain_ones_do(body: tuple[Stmt, ...]) -> None:
    plain, _ = _run(body, settle=False)
    settled, text = _run(body, settle=True)
    assert np.array_equal(plain, settled), text
    for line in text.splitlines():  # a test left to run time reads the variable
        if line.strip().startswith("if ("):
            assert "n " in line, line
