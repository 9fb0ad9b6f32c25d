"""Lower a checked LAIR graph to isl: instance sets and access relations.

Objects are built through islpy's API (spaces, constraints, affine expressions), never
by formatting isl text. The isl-based language checks live here too: every index must
stay inside its tensor's shape, and an elementwise definition (``=``) must write each
element at most once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from dtg.errors import LairSemanticError
from dtg.lair.graph import AffineExpr, Graph, Stmt, TensorAccess

CTX = isl.DEFAULT_CONTEXT


def named_set_space(name: str, dims: Sequence[str]) -> isl.Space:
    space = isl.Space.set_alloc(CTX, 0, len(dims)).set_tuple_name(isl.dim_type.set, name)
    for k, dim in enumerate(dims):
        space = space.set_dim_name(isl.dim_type.set, k, dim)
    return space


def box_set(name: str, dims: Sequence[str], extents: Sequence[int]) -> isl.Set:
    """``{ name[d0, d1, ...] : 0 <= dk < extents[k] }``."""
    result = isl.Set.universe(named_set_space(name, dims))
    for k, extent in enumerate(extents):
        result = result.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, 0))
        result = result.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, extent - 1))
    return result


def affine_on(space: isl.Space, dims: Sequence[str], expr: AffineExpr) -> isl.Aff:
    """The isl affine function of ``expr`` on the set space ``space`` (dims named ``dims``)."""
    ls = isl.LocalSpace.from_space(space)
    aff = isl.Aff.val_on_domain(ls, isl.Val.int_from_si(CTX, expr.constant))
    for name, coeff in expr.terms:
        var = isl.Aff.var_on_domain(ls, isl.dim_type.set, dims.index(name))
        aff = aff.add(var.scale_val(isl.Val.int_from_si(CTX, coeff)))
    return aff


def access_map(domain_space: isl.Space, dims: Sequence[str], access: TensorAccess) -> isl.Map:
    """``{ S[dims] -> tensor[index] }`` as a map (unrestricted)."""
    target = isl.Space.set_alloc(CTX, 0, len(access.index)).set_tuple_name(
        isl.dim_type.set, access.tensor)
    space = isl.Space.map_from_domain_and_range(domain_space, target)
    affs = isl.AffList.alloc(CTX, len(access.index))
    for expr in access.index:
        affs = affs.add(affine_on(domain_space, dims, expr))
    return isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(space, affs))


def point_coordinates(point: isl.Point, n: int) -> tuple[int, ...]:
    return tuple(point.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(n))


def least_point(s: isl.Set) -> isl.Point:
    """A witness of ``s`` for a message: its lexicographic minimum, or any point where
    isl 0.27's lexmin fails (it does on some sets with integer divisions)."""
    try:
        return s.lexmin().sample_point()
    except isl.Error:
        return s.sample_point()


@dataclass(frozen=True)
class PolyStatement:
    """The polyhedral view of one statement: its instances and its accesses."""

    stmt: Stmt
    domain: isl.Set
    write: isl.Map
    reads: tuple[tuple[str, isl.Map], ...]

    @property
    def name(self) -> str:
        return self.stmt.name

    def read(self, tensor: str) -> isl.Map:
        return dict(self.reads)[tensor]

    def access(self, tensor: str) -> isl.Map:
        """The access relation, restricted to the instance set."""
        if tensor == self.stmt.target.tensor:
            return self.write
        return self.read(tensor)

    def access_function(self, tensor: str) -> isl.Map:
        """The access as an affine function on the whole instance space (paper eq. (25)):
        what SIMD code evaluates, also at extra instances outside the instance set."""
        return access_map(self.domain.get_space(), self.stmt.iterators,
                          self.stmt.access(tensor))


@dataclass(frozen=True)
class PolyModel:
    graph: Graph
    statements: tuple[PolyStatement, ...]
    tensors: tuple[tuple[str, isl.Set], ...]

    def statement(self, name: str) -> PolyStatement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    def tensor_set(self, name: str) -> isl.Set:
        return dict(self.tensors)[name]

    def domains(self) -> isl.UnionSet:
        result = isl.UnionSet.empty(isl.Space.params_alloc(CTX, 0))
        for s in self.statements:
            result = result.union(isl.UnionSet.from_set(s.domain))
        return result

    def format(self) -> str:
        """The model in isl syntax, one object per line, loadable with islpy."""
        lines = []
        for t in self.graph.tensors:
            lines.append(f"tensor {t.name} ({t.role}, {t.dtype}): {self.tensor_set(t.name)}")
        for s in self.statements:
            lines.append("")
            lines.append(f"statement {s.name} (node {s.stmt.node}, {s.stmt.op}): {s.domain}")
            lines.append(f"  write {s.stmt.target.tensor}: {s.write}")
            for tensor, rel in s.reads:
                lines.append(f"  read {tensor}: {rel}")
        return "\n".join(lines) + "\n"


def lower(graph: Graph) -> PolyModel:
    """Build instance sets and access relations, checking bounds and single assignment."""
    tensor_sets = tuple(
        (t.name, box_set(t.name, [f"i{k}" for k in range(len(t.shape))], t.shape))
        for t in graph.tensors
    )
    shapes = dict(tensor_sets)
    stmts = []
    for stmt in graph.statements:
        domain = box_set(stmt.name, stmt.iterators, stmt.extents)
        space = domain.get_space()

        def rel(acc: TensorAccess, domain: isl.Set = domain, space: isl.Space = space,
                stmt: Stmt = stmt) -> isl.Map:
            relation = access_map(space, stmt.iterators, acc).intersect_domain(domain)
            _check_bounds(stmt, acc, relation, shapes[acc.tensor], graph)
            return relation

        write = rel(stmt.target)
        if stmt.op == "=":
            _check_single_write(stmt, write)
        reads = tuple((acc.tensor, rel(acc)) for acc in stmt.reads)
        stmts.append(PolyStatement(stmt, domain, write, reads))
    return PolyModel(graph, tuple(stmts), tensor_sets)


def _describe_instance(stmt: Stmt, coords: Sequence[int]) -> str:
    inner = ", ".join(f"{n} = {v}" for n, v in zip(stmt.iterators, coords, strict=True))
    return f"{stmt.name}[{inner}]"


def _check_bounds(stmt: Stmt, acc: TensorAccess, relation: isl.Map, shape: isl.Set,
                  graph: Graph) -> None:
    outside = relation.subtract_range(shape)
    if outside.is_empty():
        return
    point = least_point(outside.domain())
    coords = point_coordinates(point, len(stmt.iterators))
    env = dict(zip(stmt.iterators, coords, strict=True))
    element = ", ".join(str(e.evaluate(env)) for e in acc.index)
    dims = "".join(f"[{d}]" for d in graph.tensor(acc.tensor).shape)
    raise LairSemanticError(
        f"index {acc} is out of bounds for {acc.tensor}{dims}: instance "
        f"{_describe_instance(stmt, coords)} accesses {acc.tensor}[{element}]", acc.loc)


def _check_single_write(stmt: Stmt, write: isl.Map) -> None:
    if write.is_injective():
        return
    # Two distinct instances writing one element: a witness from the relation's square.
    square = write.apply_range(write.reverse())
    clash = square.subtract(isl.Map.identity(square.get_space()))
    pair = least_point(clash.wrap())
    n = len(stmt.iterators)
    coords = [pair.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(2 * n)]
    raise LairSemanticError(
        f"elementwise definition of '{stmt.target.tensor}' writes the same element twice: "
        f"instances {_describe_instance(stmt, coords[:n])} and "
        f"{_describe_instance(stmt, coords[n:])} both write {stmt.target}; use '+=' or "
        "'max=' for a reduction", stmt.target.loc)
