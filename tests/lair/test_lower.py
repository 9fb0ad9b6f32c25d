"""isl lowering: instance sets and access relations, compared by meaning."""

from __future__ import annotations

import islpy as isl
from conftest import EXAMPLES
from fixtures.listings import LISTING_1, LISTING_3

from dtg.codegen.driver import main
from dtg.lair.frontend import program_from_text

CONV1D_DOMAIN = "{ C[k, w, rw] : 0 <= k <= 1 and 0 <= w <= 13 and 0 <= rw <= 2 }"


def on(domain: isl.Set, relation: str) -> isl.Map:
    return isl.Map(relation).intersect_domain(domain)


def test_listing_3_instance_set_and_accesses() -> None:
    model = program_from_text(LISTING_3).model
    stmt = model.statement("C")
    domain = isl.Set(CONV1D_DOMAIN)
    assert stmt.domain.is_equal(domain)
    # The paper's (25) gives the accesses unrestricted; ours are restricted to the domain.
    assert stmt.read("x").is_equal(on(domain, "{ C[k, w, rw] -> x[w + rw] }"))
    assert stmt.read("W").is_equal(on(domain, "{ C[i0, i1, i2] -> W[i0, i2] }"))
    assert stmt.write.is_equal(on(domain, "{ C[i0, i1, i2] -> y[i0, i1] }"))
    assert model.tensor_set("x").is_equal(isl.Set("{ x[i] : 0 <= i <= 15 }"))


def test_listing_1_access_of_section_4_3() -> None:
    model = program_from_text(LISTING_1, {"M": 32, "N": 16}).model
    assert model.statement("ff").write.is_equal(isl.Map("{ ff[i = 0:31, 0:15] -> y[i] }"))


def _parse_emitted(text: str) -> dict[str, isl.Set | isl.Map]:
    """Read back ``--emit=isl`` output: every line ends with an isl object after ': '."""
    objects: dict[str, isl.Set | isl.Map] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        label, _, obj = line.strip().partition(": ")
        objects[label] = isl.Map(obj) if "->" in obj else isl.Set(obj)
    return objects


def test_emit_isl_prints_loadable_isl(cli) -> None:
    result = cli(main, EXAMPLES / "conv1d" / "conv1d.lair", "--emit=isl")
    assert result.status == 0, result.err
    objects = _parse_emitted(result.out)
    domain = isl.Set(CONV1D_DOMAIN)
    assert objects["statement C (node C, +=)"].is_equal(domain)
    assert objects["read x"].is_equal(on(domain, "{ C[k, w, rw] -> x[w + rw] }"))
    assert objects["read W"].is_equal(on(domain, "{ C[k, w, rw] -> W[k, rw] }"))
    assert objects["write y"].is_equal(on(domain, "{ C[k, w, rw] -> y[k, w] }"))


def test_emit_isl_needs_no_mapping(cli, tmp_path) -> None:
    path = tmp_path / "alone.lair"
    path.write_text(LISTING_3)
    assert cli(main, path, "--emit=isl").status == 0
    assert cli(main, path, "--emit=ast").status == 0
    result = cli(main, path)
    assert result.status == 1
    assert f"no mapping for {path}: expected {tmp_path / 'alone.map'}" in result.err


def test_multi_node_graph_roles_and_order() -> None:
    text = (EXAMPLES / "fc" / "train.lair").read_text()
    graph = program_from_text(text).graph
    roles = {t.name: t.role for t in graph.tensors}
    assert roles == {"W": "input", "x": "input", "y": "output", "dy": "input", "dW": "internal",
                     "dx": "output", "Wn": "output"}
    order = [s.name for s in graph.statements]
    assert order.index("fg") < order.index("update")
