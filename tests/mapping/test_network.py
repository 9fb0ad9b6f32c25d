"""Network plans: parsing, printing and the rules verify() checks, each with its text."""

from __future__ import annotations

import re

import pytest

from dtg.lair.frontend import program_from_text
from dtg.mapping.network import NetworkError, parse_plan, print_plan

MLP = """
lair fc1(): float32 x[8], float32 W1[16][8] -> float32 h[16]
{
  all (o, i) in (16, 8) h[o] += W1[o][i] * x[i]
}
lair relu1(): float32 h[16] -> float32 a[16]
{
  all (o) in (16) a[o] = max(h[o], 0.0)
}
lair fc2(): float32 a[16], float32 W2[4][16] -> float32 y[4]
{
  all (o, i) in (4, 16) y[o] += W2[o][i] * a[i]
}
"""

GOOD = """# two layers
wafer PE[16, 16]
stream x
layer one: fc1, relu1 at PE[0:16, 0:8] in west out south
layer two: fc2 at PE[0:16, 8:12] in N out E
"""


def graph():  # type: ignore[no-untyped-def]
    return program_from_text(MLP).graph


def test_a_plan_reads_back_as_printed() -> None:
    plan = parse_plan(GOOD, "good.net")
    plan.verify(graph())
    again = parse_plan(print_plan(plan), "again.net")
    assert again == plan
    assert print_plan(again) == print_plan(plan)
    assert plan.layers[1].side_in == "north" and plan.layers[1].region.pes == 64
    assert str(plan.bounding_box()) == "PE[0:16, 0:12]"


@pytest.mark.parametrize("change, message", [
    (("PE[16, 16]", "PE[16, 10]"), "layer 'two' at PE[0:16, 8:12] reaches beyond the wafer "
                                   "PE[16, 10]"),
    (("8:12", "6:12"), "layer 'two' at PE[0:16, 6:12] overlaps layer 'one'"),
    (("8:12", "8:8"), "layer 'two' has an empty region"),
    (("in N", "in W"), "so layer 'two' after it must take its input from the north, not "
                       "the west"),
    (("at PE[0:16, 0:8] in west out south\nlayer two: fc2 at PE[0:16, 8:12]",
      "at PE[0:16, 4:12] in west out south\nlayer two: fc2 at PE[0:16, 0:4]"),
     "does not lie south of layer 'one'"),
    (("8:12", "10:14"), ""),  # a gap of free PEs: fine
    (("fc1, relu1", "fc1"), "node 'relu1' is in no layer"),
    (("fc2 at", "fc2, fc1 at"), "node 'fc1' is in layer 'one' and in layer 'two'"),
    (("fc2 at", "fc3 at"), "names node 'fc3', which the program does not have"),
    (("stream x", "stream W1, q"), "'q' is streamed in, but it is not an input"),
    (("in west out south", "in south out south"), "takes its input from the south, but its "
                                                  "region PE[0:16, 0:8] is not on that side"),
    (("layer one", "layer two"), "layer 'two' is declared twice"),
])
def test_plans_that_break_a_rule_say_which(change: tuple[str, str], message: str) -> None:
    plan = parse_plan(GOOD.replace(*change), "bad.net")
    if not message:
        plan.verify(graph())
        return
    with pytest.raises(NetworkError, match=message.replace("[", r"\[").replace("(", r"\(")):
        plan.verify(graph())


def test_layers_in_another_order_than_the_data_flow_are_refused() -> None:
    text = ("wafer PE[16, 16]\nstream x\n"
            "layer two: fc2 at PE[0:16, 0:4] in west out south\n"
            "layer one: fc1, relu1 at PE[0:16, 4:12] in north out east\n")
    with pytest.raises(NetworkError, match="layer 'two' reads 'a', which layer 'one' after "
                                           "it computes"):
        parse_plan(text, "order.net").verify(graph())


def test_a_layer_between_two_others_blocks_their_route() -> None:
    text = ("wafer PE[16, 16]\nstream x\n"
            "layer one: fc1, relu1 at PE[0:16, 0:4] in west out south\n"
            "layer two: fc2 at PE[0:16, 8:12] in north out east\n"
            "layer three: fc2 at PE[0:4, 5:7] in west out south\n")
    with pytest.raises(NetworkError, match="layer 'three' at PE\\[0:4, 5:7\\] lies between "
                                           "layers 'one' and 'two'"):
        parse_plan(text, "between.net").verify()


def test_syntax_errors_are_located() -> None:
    with pytest.raises(Exception, match=r"bad.net:3:33: syntax error: .*'wst'.*did you mean "
                                        "'west'"):
        parse_plan("wafer PE[4, 4]\nstream x\nlayer a: fc1 at PE[0:4, 0:4] in wst out S\n",
                   "bad.net")
    with pytest.raises(NetworkError, match=re.escape("bad.net:3:7: error: layer 'a' at "
                                                     "PE[0:5, 0:4]")):
        parse_plan("wafer PE[4, 4]\nstream x\nlayer a: fc1, relu1, fc2 at PE[0:5, 0:4] in W "
                   "out S\n", "bad.net").verify(graph())
