"""The input budget of the LAIR front end (lair.limits, docs/limits.md).

Each hostile input ends quickly as a located error with exit status 1: files that are
too large or not regular, literals and values beyond 64 bits, sizes beyond the limits,
expressions nested too deeply. The golden files ``invalid/limit_*.lair`` cover the
messages; these tests cover what golden files cannot hold (devices, FIFOs, 10 MiB) and
that the limits leave room for everything the rest of dtg accepts.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import main
from dtg.errors import DtgError, LimitError, SourceLoc
from dtg.lair.frontend import program_from_text
from dtg.lair.limits import (
    MAX_INPUT_BYTES,
    MAX_INT,
    MAX_NESTING,
    isl_text_problem,
    literal_value,
    offset_loc,
)
from dtg.lair.parser import parse, read_source
from dtg.lair.specialize import parse_param
from dtg.pesim.cli import main as pesim_main

GEMV = (EXAMPLES / "gemv" / "gemv.lair").read_text()
GEMV_MAP = EXAMPLES / "gemv" / "gemv.map"


def first_line(err: str) -> str:
    return err.splitlines()[0]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_without_reading_it(cli) -> None:
    start = time.perf_counter()
    result = cli(main, "/dev/zero", "--emit=isl")
    assert result.status == 1
    assert first_line(result.err) == (
        "/dev/zero:1:1: error: not a regular file (a device, pipe or socket); expected a text "
        "file")
    assert time.perf_counter() - start < 2


def test_fifo_is_refused_without_blocking(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "prog.lair"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    result = cli(main, fifo, "--emit=isl")
    assert result.status == 1
    assert "not a regular file" in first_line(result.err)


@pytest.mark.parametrize("what", ["program", "mapping"])
def test_ten_mib_comment_is_refused_by_size(cli, tmp_path: Path, what: str) -> None:
    big = tmp_path / ("big.lair" if what == "program" else "big.map")
    big.write_text("#" + "x" * (10 << 20) + "\n" + (GEMV if what == "program" else
                                                     GEMV_MAP.read_text()))
    program = big if what == "program" else EXAMPLES / "gemv" / "gemv.lair"
    mapping = GEMV_MAP if what == "program" else big
    tracemalloc.start()
    try:
        result = cli(main, program, "-m", mapping)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == 1
    assert first_line(result.err) == (
        f"{big}:1:1: error: the file is larger than 1 MiB, the limit for input files")
    assert peak < 4 << 20  # nothing of the file was read


def test_a_sparse_huge_file_is_refused_by_size(tmp_path: Path) -> None:
    huge = tmp_path / "huge.lair"
    with open(huge, "wb") as f:
        f.truncate(1 << 40)  # a terabyte of zeros, none on disk
    with pytest.raises(DtgError, match="larger than 1 MiB"):
        read_source(huge)


def test_a_long_block_comment_within_the_budget_is_cheap() -> None:
    """The block-comment pattern once kept backtracking state per character (GiBs)."""
    body = "x*" * ((MAX_INPUT_BYTES - len(GEMV)) // 2 - 8)
    text = "/*" + body + "*/\n" + GEMV
    assert len(text) <= MAX_INPUT_BYTES
    tracemalloc.start()
    try:
        start = time.perf_counter()
        module = parse(text)
        seconds = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert module.nodes[0].name == "gemv"
    assert seconds < 5
    assert peak < 64 << 20


def test_unterminated_block_comment_is_a_syntax_error() -> None:
    with pytest.raises(DtgError, match="unexpected '/'"):
        parse(GEMV + "/*" + "x" * 100_000)


@pytest.mark.parametrize(("digits", "value"), [
    ("0", 0), ("007", 7), (str(MAX_INT), MAX_INT), (str(MAX_INT + 1), None),
    ("0" * 5000 + "12", 12), ("9" * 5000, None),
])
def test_literal_value_never_converts_long_strings(digits: str, value: int | None) -> None:
    assert literal_value(digits) == value


@pytest.mark.parametrize("value", ["1" + "0" * 5000, str(MAX_INT + 1), str(-MAX_INT - 2)])
def test_param_beyond_64_bits_names_the_value(value: str) -> None:
    with pytest.raises(LimitError, match="does not fit in 64 bits"):
        parse_param(f"M={value}")


def test_param_limits_keep_ordinary_values() -> None:
    assert parse_param("M=" + "0" * 5000 + "32") == ("M", 32)
    assert parse_param("M=-3") == ("M", -3)
    assert parse_param(f"M={MAX_INT}") == ("M", MAX_INT)


def test_param_beyond_the_size_limit_points_at_the_dimension(cli) -> None:
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "--param", "M=4294967296",
                 "--emit=isl")
    assert result.status == 1
    assert first_line(result.err).endswith(
        "error: dimension 0 of 'W' is 4294967296, more than the limit of 2147483647 on sizes")
    assert ":5:7:" in first_line(result.err)


def test_huge_param_through_the_command_line(cli) -> None:
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "--param", "M=" + "7" * 5000)
    assert result.status == 1
    assert "does not fit in 64 bits" in result.err
    assert len(result.err) < 300


def nested_sum(terms: int) -> str:
    return GEMV.replace("W[i][j] * x[j]", "W[i][j] * (" + " + ".join(["x[j]"] * terms) + ")")


@pytest.mark.parametrize("text", [
    nested_sum(500),
    GEMV.replace("W[i][j] * x[j]", "W[i][j] * " + "-" * 5000 + "x[j]"),
    GEMV.replace("W[i][j] * x[j]", "W[i][j] * " + "max(x[j], " * 3000 + "x[j]" + ")" * 3000),
    GEMV.replace("x[N]", "x[" + "-" * 100_000 + "N]"),
])
def test_deep_nesting_is_refused_before_anything_recurses(text: str) -> None:
    with pytest.raises(LimitError, match=f"nested more than {MAX_NESTING} levels deep"):
        program_from_text(text)


def test_parentheses_do_not_count_as_nesting() -> None:
    text = GEMV.replace("W[i][j] * x[j]", "W[i][j] * " + "(" * 5000 + "x[j]" + ")" * 5000)
    assert program_from_text(text).graph.statements[0].name == "gemv"


def test_the_deepest_expression_accepted_compiles_and_simulates(cli, tmp_path: Path) -> None:
    """The nesting limit leaves room for every later stage: the checker, the lowering, the
    interpreter, the SIMD analysis, the PE-code printer, parser, verifier and simulator
    (float32 keeps the long sums exact)."""
    terms = MAX_NESTING - 20
    while True:
        try:
            program_from_text(nested_sum(terms + 1))
        except LimitError:
            break
        terms += 1
    assert terms > MAX_NESTING - 10
    program = tmp_path / "deep.lair"
    program.write_text(nested_sum(terms))
    result = cli(pesim_main, program, "-m", GEMV_MAP, "--param", "T=float32")
    assert result.status == 0, result.err


@pytest.mark.parametrize(("text", "problem", "offset"), [
    ("{ PE[4, 4] }", None, None),
    ("{ S[i] -> PE[" + "(" * 201 + "0" + ")" * 201 + ", 0] }", "nests parentheses", 212),
    ("{ S[" + ", ".join(["i"] * 17) + "] }", "more than 16 dimensions", 50),
    ("{ S[" + ", ".join(["i"] * 16) + "] }", None, None),
    ("{ S[i] : i < min(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18) }",
     None, None),
    ("{ S[i] : i < 9223372036854775808 }", "integer literal 9223372036854775808", 13),
    ("{ S[i0] -> S9223372036854775808[i0] }", None, None),
    ("{" + " " * 10_000 + "}", "10002 characters", 0),
])
def test_isl_text_budget(text: str, problem: str | None, offset: int | None) -> None:
    found = isl_text_problem(text)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found[0] and found[1] == offset


def test_offset_loc_counts_lines_and_columns() -> None:
    start = SourceLoc("m.map", 3, 11)
    assert offset_loc(start, "{ a\n  bc }", 2) == SourceLoc("m.map", 3, 13)
    assert offset_loc(start, "{ a\n  bc }", 6) == SourceLoc("m.map", 4, 3)
