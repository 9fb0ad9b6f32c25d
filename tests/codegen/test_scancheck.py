"""Generated loop nests are read back with isl and must visit exactly their set, once."""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl
import pytest

from dtg.codegen import islast
from dtg.codegen.islast import scan
from dtg.codegen.scancheck import ScanError, check_scan, visit_marker
from dtg.mapping.poly import points
from dtg.pe.ir import For, IBin, IConst, IExpr, If, IVar, SetInt, Stmt
from dtg.pesim.expr import evaluate, holds

# The set on which isl's AST generator, given one multi-dimensional band, drops a point:
# for index = 2 both S[0, 2, 0] and S[0, 0, 1] belong to it.
EQUALITIES = isl.Set("[index] -> { S[a, b, q] : 0 <= a <= 1 and 0 <= b <= 2 and "
                     "0 <= q <= 1 and b + 2q = index - 5a }")
CONTEXT = isl.Set("[index] -> { : 0 <= index <= 24 }")


def visited(instances: isl.Set, context: isl.Set, indices: range
            ) -> dict[int, list[tuple[int, ...]]]:
    """Run the scanned loops for each value of ``index`` (a tiny interpreter)."""
    stmts = scan(instances, context, visit_marker)
    n = int(instances.dim(isl.dim_type.set))

    def run(body: Sequence[Stmt], env: dict[str, int], seen: list[tuple[int, ...]],
            coords: list[int]) -> None:
        for stmt in body:
            match stmt:
                case For(var, lo, hi, inner):
                    for value in range(evaluate(lo, env), evaluate(hi, env) + 1):
                        run(inner, {**env, var: value}, seen, coords)
                case SetInt(_, _, value):
                    coords.append(evaluate(value, env))
                    if len(coords) == n:
                        seen.append(tuple(coords))
                        coords.clear()
                case If(test, then, orelse):
                    run(then if holds(test, env) else orelse, env, seen, coords)

    result = {}
    for index in indices:
        seen: list[tuple[int, ...]] = []
        run(stmts, {"index": index}, seen, [])
        result[index] = sorted(seen)
    return result


# One on which the nested bands drop points too (q = 0 is never visited).
EQUALITIES_2 = isl.Set("[index] -> { S0[a, b, p, q] : 2q = index - 21a - 3b - 14p and "
                       "index >= 0 and a <= 1 and 0 <= b <= 1 and 0 <= p <= 1 and "
                       "-2 + index - 21a - 3b <= 14p <= index - 21a - 3b }")
CONTEXT_2 = isl.Set("[index] -> { : 0 <= index <= 48 }")
# One that every schedule shape gets wrong (a = 0 or 2 is taken as one value): only the
# loops built from isl's extremes and membership tests scan it.
EQUALITIES_3 = isl.Set("[index] -> { S0[a, b, p, q] : 2q = index - 8a - b - 16p and "
                       "0 <= a <= 5 and 0 <= b <= 5 and 0 <= p <= 1 and "
                       "-2 + index - 8a - b <= 16p <= index - 8a - b }")
CONTEXT_3 = isl.Set("[index] -> { : 0 <= index <= 63 }")


@pytest.mark.parametrize("instances, context, indices", [
    (EQUALITIES, CONTEXT, range(0, 12)), (EQUALITIES_2, CONTEXT_2, range(0, 49)),
    (EQUALITIES_3, CONTEXT_3, range(0, 64))], ids=["b+2q", "2q+21a", "2q+8a"])
def test_scan_visits_every_point_of_sets_with_equalities(
        instances: isl.Set, context: isl.Set, indices: range) -> None:
    runs = visited(instances, context, indices)
    for index in indices:
        fixed = instances.fix_val(isl.dim_type.param, 0, isl.Val.int_from_si(
            instances.get_ctx(), index))
        assert runs[index] == sorted(points(fixed)), index


def test_a_single_band_schedule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def one_band(instances: isl.Set) -> isl.Schedule:
        identity = isl.Map.identity(instances.get_space().map_from_set()).intersect_domain(
            instances).reset_tuple_id(isl.dim_type.out)
        return isl.Schedule.from_domain(isl.UnionSet.from_set(instances)).insert_partial_schedule(
            isl.MultiUnionPwAff.from_union_map(isl.UnionMap.from_map(identity)))

    monkeypatch.setattr(islast, "_nested_bands", one_band)
    monkeypatch.setattr(islast, "_scan_compressed", islast._scan_one_band)
    monkeypatch.setattr(islast, "_scan_bounded", islast._scan_one_band)
    with pytest.raises(ScanError, match="visits"):
        scan(EQUALITIES, CONTEXT, lambda name, coords: [])


def loop(hi: int, coord: IExpr) -> list[Stmt]:
    return [For("i", IConst(0), IConst(hi), tuple(visit_marker("S", [coord])))]


def test_a_loop_that_stops_early_is_caught() -> None:
    with pytest.raises(ScanError, match="visits"):
        check_scan(loop(2, IVar("i")), isl.Set("{ S[i] : 0 <= i <= 3 }"), isl.Set("{ : }"))
    check_scan(loop(3, IVar("i")), isl.Set("{ S[i] : 0 <= i <= 3 }"), isl.Set("{ : }"))


def test_an_instance_visited_twice_is_caught() -> None:
    with pytest.raises(ScanError, match="several iterations"):
        check_scan(loop(3, IBin("//", IVar("i"), IConst(2))),
                   isl.Set("{ S[i] : 0 <= i <= 1 }"), isl.Set("{ : }"))
