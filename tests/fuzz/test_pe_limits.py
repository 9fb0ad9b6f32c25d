"""The budget of the PE-code parser: deep nesting, long sums, huge numbers, huge meshes.

Each once ended in a RecursionError or a Python int() error (exit status 2); now each is
a located error (exit status 1), and the limits leave room for what the compiler prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.errors import LimitError
from dtg.lair.limits import MAX_PE_BLOCKS, MAX_PE_NESTING
from dtg.pe.parser import parse_module_text
from dtg.pesim.cli import main

HANDWRITTEN = EXAMPLES / "handwritten" / "gemv_checkerboard" / "gemv_checkerboard.pe"
SOURCE = HANDWRITTEN.read_text().replace(
    '"../../gemv/gemv.lair"', f'"{EXAMPLES / "gemv" / "gemv.lair"}"')
MAC = "run mac {y_local: 0, W_local: n} (value);"
STEP = "n += 1;"


def nested_ifs(depth: int) -> str:
    return SOURCE.replace(STEP, "if (n >= 0) {" * depth + STEP + "}" * depth)


def float_sum(terms: int) -> str:
    return SOURCE.replace(MAC, MAC + " y_local[0] = " + " + ".join(["value"] * terms) + ";")


CASES = {
    "float sum of 3000 terms": (float_sum(3000), 37, "expressions and blocks nested more"),
    "2000 nested if": (nested_ifs(2000), 38, "loops and conditionals nested more"),
    "integer sum of 3000 terms": (
        SOURCE.replace(STEP, "n = " + " + ".join(["n"] * 3000) + ";"), 38,
        "expressions and blocks nested more"),
    "3000 unary minus": (SOURCE.replace(STEP, "n = " + "-" * 3000 + "n;"), 38,
                         "expressions and blocks nested more"),
    "3000 conjunctions": (
        SOURCE.replace(STEP, "if (" + " && ".join(["n == 0"] * 3000) + ") { n += 1; }"), 38,
        "expressions and blocks nested more"),
    "1000 negations": (
        SOURCE.replace(STEP, "if (" + "!(" * 1000 + "true" + ")" * 1000 + ") { n += 1; }"), 38,
        "expressions and blocks nested more"),
    "5000-digit integer": (SOURCE.replace("int n = 0;", "int n = " + "9" * 5000 + ";"), 18,
                           "integer literal 999999... (a number of 5000 digits) is larger"),
    "64-bit overflow": (SOURCE.replace("mesh PE[4, 4]", "mesh PE[4, 9223372036854775808]"), 9,
                        "integer literal 9223372036854775808 is larger"),
    "huge mesh": (SOURCE.replace("mesh PE[4, 4]", "mesh PE[4096, 4096]"), 9,
                  "the mesh PE[4096, 4096] has 16777216 PEs, more than the limit of 1048576"),
    "isl nested 300 deep": (
        SOURCE.replace("0 <= x <= 3 and", "0 <= x <= " + "(" * 300 + "3" + ")" * 300 + " and"),
        14, "the isl text nests parentheses or brackets more than 200 levels deep"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_beyond_the_budget_is_a_located_error(name: str, cli, tmp_path: Path) -> None:
    text, line, message = CASES[name]
    path = tmp_path / "module.pe"
    path.write_text(text)
    result = cli(main, path)
    assert result.status == 1, result.err
    first = result.err.splitlines()[0]
    assert first.startswith(f"{path}:{line}:"), first
    assert message in first


def test_zero_padded_literals_keep_their_value() -> None:
    text = SOURCE.replace("int n = 0;", "int n = " + "0" * 5000 + "7;")
    module = parse_module_text(text)[0]
    assert module.programs[0].ints[0].init == 7


@pytest.mark.parametrize(("blocks", "terms"), [
    (MAX_PE_BLOCKS, 2), (MAX_PE_BLOCKS, MAX_PE_NESTING - MAX_PE_BLOCKS + 1),
    (0, MAX_PE_NESTING + 1)])
def test_the_limits_leave_room_for_the_verifier_and_the_simulator(
        blocks: int, terms: int, cli, tmp_path: Path) -> None:
    """At the limits the module parses, verifies and runs (the simulator walks blocks
    and expressions recursively); the sum adds zeros, so the outputs stay right."""
    body = "n = " + " + ".join(["n", *["0"] * (terms - 2), "1"]) + ";"  # terms - 1 levels
    text = SOURCE.replace(STEP, "if (n >= 0) {" * blocks + body + "}" * blocks)
    path = tmp_path / "module.pe"
    path.write_text(text)
    result = cli(main, path)
    assert result.status == 0, result.err


def test_one_level_more_is_refused() -> None:
    with pytest.raises(LimitError, match="loops and conditionals"):
        parse_module_text(nested_ifs(MAX_PE_BLOCKS + 1))
    with pytest.raises(LimitError, match="expressions and blocks"):
        parse_module_text(float_sum(MAX_PE_NESTING + 2))  # a sum of n terms nests n - 1
