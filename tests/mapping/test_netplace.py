"""Automatic placement of a network's layers and the mapping that links them."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtg.lair.frontend import program_from_text
from dtg.mapping.netplace import layers_of, network_mapping, place
from dtg.mapping.network import NetworkError, parse_plan
from dtg.mapping.spec import parse_mapping


def mlp(*sizes: int, batch: int = 1) -> str:
    """LAIR text of dense layers ``sizes[0] -> sizes[1] -> ...`` with ReLUs between."""
    parts = []
    x = "x"
    for k, (n, m) in enumerate(itertools.pairwise(sizes)):
        parts.append(f"lair fc{k}(): float32 {x}[{batch}][{n}], float32 W{k}[{m}][{n}] -> "
                     f"float32 h{k}[{batch}][{m}]\n{{\n  all (b, o, i) in ({batch}, {m}, {n}) "
                     f"h{k}[b][o] += W{k}[o][i] * {x}[b][i]\n}}\n")
        x = f"h{k}"
        if k < len(sizes) - 2:
            parts.append(f"lair relu{k}(): float32 h{k}[{batch}][{m}] -> float32 a{k}[{batch}]"
                         f"[{m}]\n{{\n  all (b, o) in ({batch}, {m}) a{k}[b][o] = "
                         f"max(h{k}[b][o], 0.0)\n}}\n")
            x = f"a{k}"
    return "\n".join(parts)


def test_a_layer_is_a_contraction_with_the_elementwise_nodes_after_it() -> None:
    graph = program_from_text(mlp(8, 16, 4)).graph
    assert layers_of(graph) == [("fc0", ("fc0", "relu0")), ("fc1", ("fc1",))]


def test_the_staircase_faces_each_output_to_the_next_input() -> None:
    graph = program_from_text(mlp(32, 64, 32, 8)).graph
    plan = place(graph, (40, 40), ("x",))
    plan.verify(graph)
    sides = [(lay.side_in, lay.side_out) for lay in plan.layers]
    assert sides == [("west", "south"), ("north", "east"), ("west", "south")]
    one, two, three = (lay.region for lay in plan.layers)
    assert (two.x0, two.width, two.y0) == (one.x0, one.width, one.y1)  # below, same columns
    assert (three.y0, three.height, three.x0) == (two.y0, two.height, two.x1)  # beside


def test_every_layer_gets_the_same_work_per_pe() -> None:
    graph = program_from_text(mlp(64, 64, 64)).graph
    plan = place(graph, (32, 32), ("x",))
    work = []
    for lay in plan.layers:
        per_row = 64 // (lay.region.height if lay.side_in == "west" else lay.region.width)
        per_col = 64 // (lay.region.width if lay.side_in == "west" else lay.region.height)
        work.append(per_row * per_col)
    assert len(set(work)) == 1


def test_a_network_too_large_for_the_wafer_is_refused() -> None:
    graph = program_from_text(mlp(4096, 4096)).graph
    with pytest.raises(NetworkError, match="do not fit the wafer PE\\[8, 8\\]"):
        place(graph, (8, 8), ("x",))


def test_a_contraction_cannot_take_and_send_along_one_axis() -> None:
    graph = program_from_text(mlp(8, 4)).graph
    plan = parse_plan("wafer PE[8, 8]\nstream x\nlayer fc0: fc0 at PE[0:4, 0:8] in west out "
                      "east\n", "straight.net")
    with pytest.raises(NetworkError, match=re.escape(
            "straight.net:3:7: error: layer 'fc0' takes its input from the west and sends its "
            "output east")):
        network_mapping(graph, plan)


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(2, 40), min_size=2, max_size=5),
       batch=st.integers(1, 3), wafer=st.integers(8, 48))
def test_placed_networks_give_valid_mappings(sizes: list[int], batch: int, wafer: int) -> None:
    """Any MLP that fits: the plan verifies and its mapping parses and binds to the
    program (every instance placed inside the rectangle, the streams well formed)."""
    from dtg.mapping.validate import validate_mapping

    program = program_from_text(mlp(*sizes, batch=batch))
    try:
        plan = place(program.graph, (wafer, wafer), ("x",))
    except NetworkError:
        return  # (too large for the wafer)
    plan.verify(program.graph)
    assert all(lay.region.x1 <= wafer and lay.region.y1 <= wafer for lay in plan.layers)
    spec = parse_mapping(network_mapping(program.graph, plan), "net.map")
    validate_mapping(spec, program.model)
