"""The task graph as ``--emit=tasks`` prints it: each flow says which way it runs."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import main


@pytest.mark.parametrize(("path", "lines"), [
    # x enters from the north (PE[j//4, -1]) and runs south down each column
    ("gemv/gemv.lair", ["x flows southwards along each line with a source"]),
    # x enters from the west (PE[-1, 0]) and runs east along the row
    ("conv2d_degenerate/conv2d_degenerate.lair",
     ["x flows eastwards along each line with a source"]),
    # x in two parts, from the north (j < 16) and from the south (j >= 16)
    ("movement/gemv_two_sides.lair", ["x flows southwards along each line with a source",
                                      "x flows northwards along each line with a source"]),
])
def test_flows_name_their_direction(path: str, lines: list[str], cli) -> None:
    result = cli(main, EXAMPLES / path, "--emit=tasks")
    assert result.status == 0, result.err
    for line in lines:
        assert line in result.out
    assert "Swards" not in result.out and "Nwards" not in result.out
