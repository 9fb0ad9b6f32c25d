"""Polyhedral primitives of dtg-codegen, on islpy's public API.

Everything here is parametric in the symbolic constants ``PE_X``/``PE_Y`` (the PE
coordinates) and ``index_0``, ``index_1``, …, ``index`` (the index values of an
arriving wavelet, innermost last), so that compile work never grows with the number
of PEs.  The helpers follow the IMPACT 2020 paper (Verdoolaege et al.):

* binding placements and tensor orders to those constants, and the task instance
  sets of §5.1;
* the local memory of §4.3 (eqs. (7)-(9));
* the fixed-size box hull (isl's own algorithm; islpy's ``FixedBox`` has no
  accessors, so we compute offset and size ourselves);
* variable compression (Meister 2004; isl does not export it);
* the rectangularity analysis of §5.1, the size enumeration of §5.4 and the
  box-hull approximation with extra instances of §5.3.

isl objects are only ever built through the API (spaces, constraints, affine
expressions, bind/preimage/project); isl text is never formatted nor parsed here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, Self, TypeVar

import islpy as isl

from dtg.errors import CodegenError
from dtg.lair.limits import MAX_POINTS
from dtg.mapping.hnf import column_hnf, inverse_unimodular, row_echelon, solve_lower_triangular

__all__ = [
    "INDEX",
    "PE_NAMES",
    "PE_X",
    "PE_Y",
    "BoxApproximation",
    "Compression",
    "ExtraWriteCheck",
    "FixedSizeBox",
    "LocalArray",
    "Rectangularity",
    "SizeEnumeration",
    "UnboundedSetError",
    "accessed_elements",
    "align_params",
    "apply_inverse_access",
    "approximate_by_box",
    "bind_order",
    "bind_pe_coordinates",
    "bind_placement",
    "bind_range",
    "box_map",
    "box_set",
    "check_extra_writes",
    "compress",
    "constant_value",
    "elements_per_pe",
    "enumerate_sizes",
    "external_pes",
    "global_to_local",
    "index_constraints",
    "index_names",
    "index_params",
    "is_index_name",
    "local_array",
    "multi_id",
    "param_id",
    "points",
    "project_out_params",
    "range_box_hull",
    "rectangularity",
    "rewrite_access",
    "set_box_hull",
    "task_instances",
    "tensor_order",
]

PE_X = "PE_X"
PE_Y = "PE_Y"
PE_NAMES = (PE_X, PE_Y)
INDEX = "index"

_dt = isl.dim_type
_INDEX_RE = re.compile(r"index(_\d+)?")


# -------------------- names


def index_names(n: int) -> tuple[str, ...]:
    """Index constants of an ``n``-dimensional index space, innermost (``index``) last.

    ``index[w, h]`` binds to ``(index_0, index)`` and a 3-D space to
    ``(index_0, index_1, index)``, as in the paper's Examples 5.6 and 5.7.
    """
    if n < 0:
        raise ValueError(f"negative index space dimension {n}")
    if n == 0:
        return ()
    return (*(f"index_{k}" for k in range(n - 1)), INDEX)


def is_index_name(name: str) -> bool:
    return _INDEX_RE.fullmatch(name) is not None


class _Parametric(Protocol):
    def get_space(self) -> isl.Space: ...

    def align_params(self, model: isl.Space) -> Self: ...


_P = TypeVar("_P", bound=_Parametric)
_Q = TypeVar("_Q", bound=_Parametric)
_T = TypeVar("_T")
_S = TypeVar("_S", isl.Set, isl.Map)


def _param_names(obj: _Parametric) -> tuple[str, ...]:
    space = obj.get_space()
    return tuple(space.get_dim_name(_dt.param, k) or "" for k in range(space.dim(_dt.param)))


def index_params(obj: _Parametric) -> tuple[str, ...]:
    """The index constants among the parameters of ``obj``."""
    return tuple(name for name in _param_names(obj) if is_index_name(name))


def param_id(ctx: isl.Context, name: str) -> isl.Id:
    """The canonical isl identifier ``name`` (no user data), equal to the parsed one."""
    space = isl.Space.create_from_names(ctx, set=[], params=[name])
    return space.get_dim_id(_dt.param, 0)


def multi_id(space: isl.Space, names: Sequence[str]) -> isl.MultiId:
    """Identifiers to bind the tuple ``space`` (a set space) to, one per dimension."""
    if space.dim(_dt.set) != len(names):
        raise CodegenError(
            f"cannot bind a {space.dim(_dt.set)}-dimensional tuple to {len(names)} "
            f"constants ({', '.join(names)})"
        )
    ctx = space.get_ctx()
    ids = isl.IdList.alloc(ctx, len(names))
    for name in names:
        ids = ids.add(param_id(ctx, name))
    return isl.MultiId.from_id_list(space, ids)


def align_params(a: _P, b: _Q) -> tuple[_P, _Q]:
    """``a`` and ``b`` over the union of their parameters (isl needs that to combine)."""
    model = a.get_space().params().align_params(b.get_space().params())
    return a.align_params(model), b.align_params(model)


def bind_leading(s: isl.Set, names: Sequence[str]) -> isl.Set:
    """The leading dimensions of ``s`` moved to parameters named ``names``."""
    n = len(names)
    as_map = isl.Map.from_range(s).move_dims(_dt.in_, 0, _dt.out, 0, n)
    return as_map.bind_domain(multi_id(as_map.get_space().domain(), names))


def project_out_params(obj: _S, names: Sequence[str]) -> _S:
    """Project out the parameters ``names`` of ``obj`` that it has."""
    space = obj.get_space()
    ids = isl.IdList.alloc(obj.get_ctx(), len(names))
    for name in names:
        pos = space.find_dim_by_name(_dt.param, name)
        if pos >= 0:
            ids = ids.add(space.get_dim_id(_dt.param, pos))
    if ids.n_id() == 0:
        return obj
    return obj.project_out_param_id_list(ids)


def project_onto_pe(obj: isl.Set) -> isl.Set:
    """``obj`` with every parameter but the PE coordinates projected out (which PEs)."""
    return project_out_params(obj, [p for p in _param_names(obj) if p not in PE_NAMES])


# -------------------- binding


def bind_range(rel: isl.Map, names: Sequence[str]) -> isl.Set:
    """The domain of ``rel`` with its range tuple fixed to the constants ``names``."""
    return rel.bind_range(multi_id(rel.get_space().range(), names))


def _check_same_tuple(expected: isl.Space, got: isl.Space, what: str) -> None:
    if expected.tuple_is_equal(_dt.set, got, _dt.set):
        return
    raise CodegenError(
        f"{what}: expected elements of {_space_name(expected)}, got {_space_name(got)}"
    )


def _space_name(space: isl.Space) -> str:
    name = space.get_tuple_name(_dt.set) if space.has_tuple_name(_dt.set) else None
    return f"{name or ''}[{space.dim(_dt.set)} dims]"


def bind_pe(rel: isl.Map) -> isl.Set:
    """``PE -> x`` with the PE bound to ``PE_X``/``PE_Y``: a set of ``x`` over them."""
    return rel.bind_domain(multi_id(rel.get_space().domain(), PE_NAMES))


def pe_set(params: isl.Set) -> isl.Set:
    """A condition on ``PE_X``, ``PE_Y`` as the set ``{ PE[x, y] }`` it selects."""
    space = isl.Space.set_alloc(params.get_ctx(), 0, 2).set_tuple_name(_dt.set, "PE")
    return params.unbind_params(multi_id(space, PE_NAMES))


def bind_placement(placement: isl.Map, domain: isl.Set | None = None) -> isl.Set:
    """Instances run by the PE ``(PE_X, PE_Y)``: the placement's range bound (eq. (11))."""
    if placement.dim(_dt.out) != 2:
        raise CodegenError(
            f"a placement must map to PE[x, y], not to {placement.dim(_dt.out)} coordinates"
        )
    if domain is not None:
        _check_same_tuple(placement.get_space().domain(), domain.get_space(), "placement")
        placement, domain = align_params(placement, domain)
        placement = placement.intersect_domain(domain)
    return bind_range(placement, PE_NAMES)


def tensor_order(spec: isl.Map) -> isl.Map:
    """The order ``{ x[i] -> index[i] }`` of a spec ``{ x[i] -> [PE[0, -1] -> index[i]] }``."""
    if not spec.range_is_wrapping():
        raise CodegenError("a tensor spec must map elements to [PE[...] -> index[...]]")
    return spec.range_factor_range()


def external_pes(spec: isl.Map) -> isl.Map:
    """The external PEs ``{ x[i] -> PE[0, -1] }`` of a tensor spec."""
    if not spec.range_is_wrapping():
        raise CodegenError("a tensor spec must map elements to [PE[...] -> index[...]]")
    return spec.range_factor_domain()


def bind_order(order: isl.Map) -> isl.Set:
    """Tensor elements arriving with the index constants (``{ x[index] : … }``)."""
    return bind_range(order, index_names(order.dim(_dt.out)))


def apply_inverse_access(elements: isl.Set, access: isl.Map) -> isl.Set:
    """Statement instances that access any of ``elements``."""
    _check_same_tuple(access.get_space().range(), elements.get_space(), "access relation")
    elements, access = align_params(elements, access)
    return elements.apply(access.reverse())


def index_constraints(order: isl.Map, access: isl.Map) -> isl.Set:
    """Instances touching the element that arrives with the index constants."""
    return apply_inverse_access(bind_order(order), access)


def task_instances(domain: isl.Set, placement: isl.Map, order: isl.Map, access: isl.Map) -> isl.Set:
    """Instance set of the task reacting to an arriving wavelet (§5.1, Example 5.1).

    The placement's range is bound to the PE coordinates (after intersecting with the
    statement's ``domain``) and intersected with the index constraints obtained by
    binding the range of the tensor ``order`` and applying the inverse ``access``.
    """
    _check_same_tuple(domain.get_space(), access.get_space().domain(), "access relation")
    on_pe = bind_placement(placement, domain)
    on_pe, at_index = align_params(on_pe, index_constraints(order, access))
    return on_pe.intersect(at_index)


# -------------------- isl building blocks


def _val(ctx: isl.Context, value: int) -> isl.Val:
    """``value`` as an isl value, of any size (isl's integers are unbounded)."""
    if -(1 << 62) <= value < 1 << 62:
        return isl.Val.int_from_si(ctx, value)
    return isl.Val.read_from_str(ctx, str(value))


def _int(val: isl.Val) -> int:
    value = val.to_python()
    if not isinstance(value, int):
        raise ValueError(f"expected an integer, got {val}")
    return value


def _var(space: isl.Space, pos: int) -> isl.Aff:
    """The affine expression ``x_pos`` on the set space ``space``."""
    return isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), _dt.set, pos)


def _zero(space: isl.Space) -> isl.Aff:
    return isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))


def _multi_aff(space: isl.Space, affs: Sequence[isl.Aff]) -> isl.MultiAff:
    """The multi-affine expression with components ``affs`` in the map space ``space``."""
    if not affs:
        return isl.MultiAff.zero(space)
    lst = isl.AffList.alloc(space.get_ctx(), len(affs))
    for aff in affs:
        lst = lst.add(aff)
    return isl.MultiAff.from_aff_list(space, lst)


def _constraints(bset: isl.BasicSet) -> list[isl.Constraint]:
    found: list[isl.Constraint] = []
    bset.foreach_constraint(found.append)
    return found


def _set_space(like: isl.Space, n: int, prefix: str = "i") -> isl.Space:
    """An anonymous set space of ``n`` dimensions over the parameters of ``like``."""
    space = like.params().set_from_params().add_dims(_dt.set, n)
    for k in range(n):
        space = space.set_dim_name(_dt.set, k, f"{prefix}{k}")
    return space


def _zero_based_box(space: isl.Space, size: Sequence[int]) -> isl.Set:
    """``{ x : 0 <= x < size }`` in the set space ``space``."""
    box = isl.Set.universe(space)
    for d, extent in enumerate(size):
        var = _var(space, d)
        box = box.add_constraint(isl.Constraint.inequality_from_aff(var))
        upper = var.neg().add_constant_val(_val(space.get_ctx(), extent - 1))
        box = box.add_constraint(isl.Constraint.inequality_from_aff(upper))
    return box


# -------------------- fixed-size box hull


@dataclass(frozen=True)
class FixedSizeBox:
    """A box ``offset <= x < offset + size``; the offset is quasi-affine (paper §4.3: a
    local array may start at ``floor(PE_X / 2)``; code computes it once per PE).

    For the range of a relation ``D -> R`` the offset is a ``MultiAff`` ``D -> R``
    (over the parameters too); for a set it lives on the parameters only.
    """

    offset: isl.MultiAff
    size: tuple[int, ...]

    @property
    def is_set_box(self) -> bool:
        """Whether this is the box of a set (offset on the parameters only)."""
        return self.offset.get_domain_space().is_params()


def _embed_domain(space: isl.Space, wrapped: isl.Space) -> isl.MultiAff:
    """``D -> [D -> [0]]`` for the map space ``space = D -> R1`` (``wrapped`` its wrap)."""
    domain = space.domain()
    n_in = space.dim(_dt.in_)
    affs = [_var(domain, j) for j in range(n_in)] + [_zero(domain)]
    return _multi_aff(isl.Space.map_from_domain_and_range(domain, wrapped), affs)


def _unstride(proj: isl.Map, shift: isl.Aff, stride: int) -> isl.Map:
    """``{ D -> [i'] : (D -> shift(D) + stride·i') in proj }``."""
    space = proj.get_space()
    wrapped = space.wrap()
    n_in = space.dim(_dt.in_)
    shift_w = shift.pullback_multi_aff(isl.MultiAff.domain_map(space))
    last = shift_w.add(_var(wrapped, n_in).scale_val(_val(proj.get_ctx(), stride)))
    affs = [_var(wrapped, j) for j in range(n_in)] + [last]
    substitution = _multi_aff(isl.Space.map_from_set(wrapped), affs)
    return proj.wrap().preimage_multi_aff(substitution).unwrap()


def _smallest_extent(work: isl.Map, affine: bool) -> tuple[int, isl.Aff] | None:
    """Smallest size over the lower bounds of the simple hull, with its offset."""
    n_in = work.dim(_dt.in_)
    hull = work.simple_hull().wrap()
    candidates = hull.remove_unknown_divs().remove_divs_involving_dims(_dt.set, n_in, 1)
    var = _var(hull.get_space(), n_in)
    best: tuple[int, isl.Aff] | None = None
    for constraint in _constraints(candidates):
        if not constraint.is_lower_bound(_dt.set, n_in):
            continue
        lower = constraint.get_bound(_dt.set, n_in).ceil()  # quasi-affine: ceil(b/m)
        if affine and lower.involves_locals():
            continue
        extent = hull.max_val(var.sub(lower))
        if not extent.is_int():
            continue
        size = _int(extent) + 1
        if best is None or size < best[0]:
            best = (size, lower)
    if best is None:
        return None
    size, lower = best
    return size, lower.pullback_multi_aff(_embed_domain(work.get_space(), hull.get_space()))


def _dim_extent(proj: isl.Map, affine: bool) -> tuple[isl.Aff, int] | None:
    """Offset (affine in the domain) and size of the single output of ``proj``.

    On a stride lattice ``i = f + s·i'`` the bounds on ``i'`` are tried first, as
    isl does; their ``ceil`` is often quasi-affine, though, so the bounds on ``i``
    itself are tried as well and the smaller size wins (the strided one on ties).
    """
    info = proj.get_range_stride_info(0)
    stride = _int(info.get_stride())
    shift = info.get_offset()
    best: tuple[int, isl.Aff] | None = None
    if stride > 1 and not (affine and shift.involves_locals()):
        found = _smallest_extent(_unstride(proj, shift, stride), affine)
        if found is not None:
            size, offset = found
            offset = shift.add(offset.scale_val(_val(proj.get_ctx(), stride)))
            # isl 0.27 reports strides that do not hold on some sets: keep the box only
            # when it really contains the set.
            if _within(proj, offset, stride * (size - 1) + 1):
                best = (stride * (size - 1) + 1, offset)
    found = _smallest_extent(proj, affine)
    if found is not None and (best is None or found[0] < best[0]) and _within(
            proj, found[1], found[0]):
        best = found
    least = within_effort(LEAST_OFFSET_EFFORT, lambda: _least_offset(proj, affine))
    if least is not None and (best is None or least[0] < best[0]):
        best = least
    if best is None:
        return None
    return best[1], best[0]


def _least_offset(proj: isl.Map, affine: bool) -> tuple[int, isl.Aff] | None:
    """The least value of the single output of ``proj`` where isl writes it as one
    quasi-affine function of the domain, with the size above it: the offset of a tile
    rotated by a ``mod`` (``64 * ((x - y) mod 8)``, Cannon's skew), which no lower bound
    of the simple hull gives (its ``mod`` is an unknown div there)."""
    least = proj.lexmin_pw_multi_aff()
    if least.n_piece() != 1:
        return None
    pieces: list[isl.MultiAff] = []
    least.foreach_piece(lambda _s, ma: pieces.append(ma))
    offset = pieces[0].get_at(0)
    if affine and offset.involves_locals():
        return None
    space = proj.get_space()
    value = _var(space.wrap(), space.dim(_dt.in_))
    start = offset.pullback_multi_aff(isl.MultiAff.domain_map(space))
    extent = proj.wrap().max_val(value.sub(start))
    if not extent.is_int():
        return None
    return _int(extent) + 1, offset


LEAST_OFFSET_EFFORT = 200_000  # isl operations for the least value as one function


def _within(proj: isl.Map, offset: isl.Aff, size: int) -> bool:
    """Whether every ``D -> [i]`` of ``proj`` has ``offset(D) <= i < offset(D) + size``."""
    space = proj.get_space()
    value = _var(space.wrap(), space.dim(_dt.in_))
    start = offset.pullback_multi_aff(isl.MultiAff.domain_map(space))
    above = isl.Set.universe(space.wrap()).add_constraint(
        isl.Constraint.inequality_from_aff(value.sub(start)))
    below = above.add_constraint(isl.Constraint.inequality_from_aff(
        start.add_constant_val(_val(proj.get_ctx(), size - 1)).sub(value)))
    return bool(proj.wrap().is_subset(below))


def index_gaps(rel: isl.Map) -> isl.Set:
    """For ``rel`` = ``D -> index[o..., v]``: the points ``[D -> index[o..., v]]`` not in
    ``rel`` whose ``v`` lies between the least and greatest ``v`` of the same ``D`` and
    outer values ``o`` (empty when every such run of ``v`` is consecutive, as counting
    the wavelets of a dense stream needs)."""
    _require_bounded(rel.range(), "finding gaps between indices")
    points = rel.wrap().flatten()
    n = int(points.dim(_dt.set))
    last = isl.Map.from_domain(points).move_dims(_dt.out, 0, _dt.in_, n - 1, 1)
    line = isl.Space.set_alloc(rel.get_ctx(), 0, 1)
    at_least = isl.Map.lex_le(line)  # [v] -> [w] : v <= w
    between = last.lexmin().apply_range(at_least).intersect(
        last.lexmax().apply_range(at_least.reverse()))
    return between.subtract(last).wrap().flatten()


def range_box_hull(rel: isl.Map, *, affine: bool = False) -> FixedSizeBox | None:
    """Fixed-size box hull of the range of ``rel`` (isl's algorithm; DESIGN §8).

    Per output dimension: project out the other outputs, work on the stride lattice
    if there is one, and try every lower bound ``m·i >= b`` of the simple hull as
    offset ``ceil(b/m)``, keeping the smallest finite size (the first on ties).
    ``None`` when some dimension has no finite size. ``affine`` keeps only offsets
    without ``floor`` (where code needs a linear base, as SIMD instructions do).
    """
    n_out = rel.dim(_dt.out)
    rel = rel.detect_equalities()
    offsets: list[isl.Aff] = []
    sizes: list[int] = []
    for pos in range(n_out):
        proj = rel.project_out(_dt.out, pos + 1, n_out - pos - 1).project_out(_dt.out, 0, pos)
        extent = _dim_extent(proj, affine)
        if extent is None:
            return None
        offsets.append(extent[0])
        sizes.append(extent[1])
    return FixedSizeBox(_multi_aff(rel.get_space(), offsets), tuple(sizes))


def set_box_hull(s: isl.Set, *, affine: bool = False) -> FixedSizeBox | None:
    """Fixed-size box hull of a set; the offset depends on the parameters only."""
    box = range_box_hull(isl.Map.from_range(s), affine=affine)
    if box is None:
        return None
    return FixedSizeBox(box.offset.project_domain_on_params(), box.size)


def box_map(box: FixedSizeBox) -> isl.Map:
    """The relation ``{ D -> R : offset(D) <= R < offset(D) + size }`` of a range box."""
    space = box.offset.get_space()
    if box.is_set_box:
        raise ValueError("box_map needs the box of a relation; use box_set for a set box")
    diff = isl.MultiAff.range_map(space).sub(
        box.offset.pullback_multi_aff(isl.MultiAff.domain_map(space))
    )
    return _zero_based_box(space.range(), box.size).preimage_multi_aff(diff).unwrap()


def box_set(box: FixedSizeBox, context: isl.Set | None = None) -> isl.Set:
    """The set ``{ x : offset <= x < offset + size }`` of a set box (within ``context``)."""
    if not box.is_set_box:
        raise ValueError("box_set needs the box of a set; use box_map for a relation box")
    space = box.offset.get_space().range()
    diff = isl.MultiAff.identity_on_domain_space(space).sub(box.offset.insert_domain(space))
    result = _zero_based_box(space, box.size).preimage_multi_aff(diff)
    if context is None:
        return result
    result, context = align_params(result, context)
    return result.intersect_params(context)


# -------------------- local memory (§4.3)


def elements_per_pe(placement: isl.Map, access: isl.Map, domain: isl.Set | None = None) -> isl.Map:
    """``PE -> tensor`` elements accessed on each PE (eq. (7))."""
    _check_same_tuple(placement.get_space().domain(), access.get_space().domain(), "access")
    if domain is not None:
        placement, domain = align_params(placement, domain)
        placement = placement.intersect_domain(domain)
    placement, access = align_params(placement, access)
    return placement.reverse().apply_range(access)


def global_to_local(box: FixedSizeBox, local_name: str) -> isl.MultiAff:
    """``[PE -> x] -> x_local[x - offset(PE)]`` (eq. (8)) for the box of eq. (7)."""
    if box.is_set_box:
        raise ValueError("global_to_local needs the box of a PE -> tensor relation")
    space = box.offset.get_space()
    shifted = isl.MultiAff.range_map(space).sub(
        box.offset.pullback_multi_aff(isl.MultiAff.domain_map(space))
    )
    return shifted.set_tuple_name(_dt.out, local_name)


def bind_pe_coordinates(to_local: isl.MultiAff) -> isl.MultiAff:
    """Eq. (9): the PE part of the wrapped domain of eq. (8) bound to ``PE_X``/``PE_Y``."""
    domain = to_local.get_domain_space()
    if not domain.is_wrapping():
        raise ValueError("expected a map with a [PE -> tensor] domain")
    pe_space = domain.unwrap().domain()
    return to_local.bind_domain_wrapped_domain(multi_id(pe_space, PE_NAMES))


@dataclass(frozen=True)
class LocalArray:
    """Local array of a tensor: accessed elements per PE, box and global-to-local maps."""

    name: str
    per_pe: isl.Map  # eq. (7)
    box: FixedSizeBox
    to_local: isl.MultiAff  # eq. (8)
    to_local_bound: isl.MultiAff  # eq. (9)

    @property
    def size(self) -> tuple[int, ...]:
        return self.box.size


def local_array(per_pe: isl.Map, local_name: str) -> LocalArray | None:
    """Allocate the local array ``local_name`` for ``per_pe`` (eq. (7)); ``None``: no box."""
    box = range_box_hull(per_pe)
    if box is None:
        return None
    to_local = global_to_local(box, local_name)
    return LocalArray(local_name, per_pe, box, to_local, bind_pe_coordinates(to_local))


# -------------------- variable compression


@dataclass(frozen=True)
class Compression:
    """Variable compression of a set ``S``.

    ``map`` takes the compressed coordinates ``[i0, i1, …]`` (over the parameters) to
    the original tuple and is a bijection from the integer points of ``compressed``
    onto those of ``S``; ``inverse`` goes back, read off the unimodular matrix of the
    map (quasi-affine only when existentially quantified variables were lifted, and
    exact on ``S``).  ``lifted`` counts those variables: with them, the compressed
    set may keep a coordinate fixed by the parameters, as in the paper's eq. (34).
    """

    map: isl.MultiAff
    compressed: isl.Set
    inverse: isl.MultiAff
    lifted: int = 0

    @property
    def dim(self) -> int:
        return self.compressed.dim(_dt.set)

    def as_map(self) -> isl.Map:
        return isl.Map.from_multi_aff(self.map)


def _involves_set_dims(aff: isl.Aff, n: int) -> bool:
    return aff.involves_dims(_dt.in_, 0, n)


def _equality_system(
    hull: isl.BasicSet, n: int
) -> tuple[list[int], list[list[int]], list[isl.Aff]]:
    """Equalities of ``hull`` as ``M·u = C(p)`` over the unknowns ``u = [x, e]``.

    ``e`` are the existentially quantified variables (divs) that appear in an
    equality and depend on the set variables: as isl does, they are lifted into
    unknowns.  Divs on the parameters only stay in ``C(p)``.
    Returns the lifted div positions, the rows of ``M`` and the affine ``C``.
    """
    space = hull.get_space()
    n_div = hull.dim(_dt.div)
    n_param = hull.dim(_dt.param)
    divs = [hull.get_div(k) for k in range(n_div)]
    equalities = [c for c in _constraints(hull) if c.is_equality()]
    lifted = [
        k
        for k in range(n_div)
        if _involves_set_dims(divs[k], n)
        and any(not c.get_coefficient_val(_dt.div, k).is_zero() for c in equalities)
    ]
    rows: list[list[int]] = []
    rhs: list[isl.Aff] = []
    for c in equalities:
        row = [_int(c.get_coefficient_val(_dt.set, j)) for j in range(n)]
        row += [_int(c.get_coefficient_val(_dt.div, k)) for k in lifted]
        if not any(row):
            continue  # a constraint on the parameters only
        rest = _zero(space).add_constant_val(c.get_constant_val())
        for p in range(n_param):
            rest = rest.set_coefficient_val(_dt.param, p, c.get_coefficient_val(_dt.param, p))
        for k in range(n_div):
            coefficient = c.get_coefficient_val(_dt.div, k)
            if k not in lifted and not coefficient.is_zero():
                rest = rest.add(divs[k].floor().scale_val(coefficient))
        rows.append(row)
        rhs.append(rest.neg())
    return lifted, rows, rhs


def _combine(coefficients: Sequence[int], affs: Sequence[isl.Aff], zero: isl.Aff) -> isl.Aff:
    result = zero
    for coefficient, aff in zip(coefficients, affs, strict=True):
        if coefficient:
            result = result.add(aff.scale_val(_val(zero.get_ctx(), coefficient)))
    return result


def compress(s: isl.Set) -> Compression:
    """Variable compression (Meister 2004) of ``s``, as used in §5.2.

    With the affine hull's equalities ``M·u = C(p)`` (``u`` the set variables plus
    lifted existentials), a column Hermite form ``M·U = [H 0]`` gives
    ``u = U1·H⁻¹·C(p) + U2·i``, which runs exactly over the integer points of the
    hull's lattice; the compressed set is the preimage of ``s``.
    """
    space = s.get_space()
    ctx = s.get_ctx()
    n = s.dim(_dt.set)
    if s.is_empty():
        q = _set_space(space, 0)
        return Compression(
            map=isl.MultiAff.zero(isl.Space.map_from_domain_and_range(q, space)),
            compressed=isl.Set.empty(q),
            inverse=isl.MultiAff.zero(isl.Space.map_from_domain_and_range(space, q)),
        )
    hull = s.affine_hull().remove_unknown_divs()
    lifted, rows, rhs = _equality_system(hull, n)
    n_unknowns = n + len(lifted)

    echelon, transform = row_echelon(rows, n_unknowns)
    zero_t = _zero(space)
    independent = [k for k, row in enumerate(echelon) if any(row)]
    m = [list(echelon[k]) for k in independent]
    c = [_combine(transform[k], rhs, zero_t) for k in independent]
    form = column_hnf(m, n_unknowns)
    rank = form.rank
    h_inverse = solve_lower_triangular([row[:rank] for row in form.h])

    q = _set_space(space, n_unknowns - rank)
    to_q = isl.MultiAff.zero(isl.Space.map_from_domain_and_range(q, space))
    c_q = [aff.pullback_multi_aff(to_q) for aff in c]
    zero_q = _zero(q)
    particular: list[isl.Aff] = []
    for k in range(rank):
        denominator = math.lcm(*(f.denominator for f in h_inverse[k]))
        numerators = [int(f * denominator) for f in h_inverse[k]]
        y = _combine(numerators, c_q, zero_q)
        if denominator != 1:
            # exact on the parameters where s is non-empty: C(p) lies in H·Z^rank there
            y = y.scale_down_val(_val(ctx, denominator)).floor()
        particular.append(y)
    free = [_var(q, k) for k in range(n_unknowns - rank)]
    unknowns = [_combine(form.u[j], [*particular, *free], zero_q) for j in range(n_unknowns)]

    flat = _set_space(space, n_unknowns, "u")
    full = _multi_aff(isl.Space.map_from_domain_and_range(q, flat), unknowns)
    div_values = [hull.get_div(k).floor() for k in lifted]
    lift = _multi_aff(
        isl.Space.map_from_domain_and_range(space, flat),
        [_var(space, j) for j in range(n)] + div_values,
    )
    compressed = s.apply(isl.Map.from_multi_aff(lift)).preimage_multi_aff(full)
    mapping = _multi_aff(isl.Space.map_from_domain_and_range(q, space), unknowns[:n])

    u_inverse = inverse_unimodular(form.u)
    originals = [_var(space, j) for j in range(n)] + div_values
    inverse = _multi_aff(
        isl.Space.map_from_domain_and_range(space, q),
        [_combine(u_inverse[rank + k], originals, zero_t) for k in range(n_unknowns - rank)],
    )
    return Compression(mapping, compressed, inverse, lifted=len(lifted))


def skewed(compression: Compression, a: int, b: int, sign: int) -> Compression:
    """``compression`` followed by the unimodular skew ``c'_a = c_a + sign * c_b`` of the
    compressed coordinates: the same instances, scanned along another lattice basis (a
    sliding window's instances ``(i, k)`` form a box in ``(i + k, k)``)."""
    q = compression.compressed.get_space()
    maps = isl.Space.map_from_domain_and_range(q, q)
    n = q.dim(_dt.set)

    def shear(s: int) -> isl.MultiAff:
        ma = isl.MultiAff.identity(maps)
        ls = isl.LocalSpace.from_space(q)
        moved = isl.Aff.var_on_domain(ls, _dt.set, a).add(
            isl.Aff.var_on_domain(ls, _dt.set, b).scale_val(isl.Val.int_from_si(
                q.get_ctx(), s)))
        return ma.set_aff(a, moved) if n else ma

    forward, back = shear(sign), shear(-sign)  # c -> c', c' -> c
    return Compression(map=compression.map.pullback_multi_aff(back),
                       compressed=compression.compressed.preimage_multi_aff(back),
                       inverse=forward.pullback_multi_aff(compression.inverse),
                       lifted=compression.lifted)


def moved_outermost(compression: Compression, d: int, to: int) -> Compression:
    """``compression`` with compressed coordinate ``d`` moved to position ``to`` (``to <=
    d``), the ones between shifted inwards: the same instances, scanned with ``d``
    further out (one size variant cut by a run-time length where only ``d`` varies)."""
    q = compression.compressed.get_space()
    n = q.dim(_dt.set)
    order = list(range(n))
    order.insert(to, order.pop(d))  # new position k holds old coordinate order[k]
    maps = isl.Space.map_from_domain_and_range(q, q)
    forward = _multi_aff(maps, [_var(q, order[k]) for k in range(n)])  # c -> c'
    back = _multi_aff(maps, [_var(q, order.index(j)) for j in range(n)])  # c' -> c
    return Compression(map=compression.map.pullback_multi_aff(back),
                       compressed=compression.compressed.preimage_multi_aff(back),
                       inverse=forward.pullback_multi_aff(compression.inverse),
                       lifted=compression.lifted)


def residues_lifted(compression: Compression, a: int, b: int, m: int, t: int = 1
                    ) -> Compression:
    """``compression`` with coordinate ``a`` split into its residue ``r = a mod m``,
    outermost, and ``q = floor(a / m)`` in its place, and ``b`` shifted to ``b - t q``:
    the same instances (``a = m q + r``, ``b = b' + t q``, ``0 <= r < m``). A cyclic
    diagonal's row ``a`` runs ``j = a - m b``: its rows of one residue are a box along
    ``(q, b')`` (``j = r - m b'``, with ``t = 1``), one 2-D instruction per residue
    instead of one per row."""
    q = compression.compressed.get_space()
    n = q.dim(_dt.set)
    lifted_space = q.add_dims(_dt.set, 1)
    for k in range(n + 1):
        lifted_space = lifted_space.set_dim_name(_dt.set, k, f"i{k}")
    # new coordinates: r, then the old ones with q at a's place and b' at b's
    at = [k + 1 for k in range(n)]
    val = _val(q.get_ctx(), m)
    old = []
    for k in range(n):
        v = _var(lifted_space, at[k])
        if k == a:
            v = v.scale_val(val).add(_var(lifted_space, 0))
        elif k == b:
            v = v.add(_var(lifted_space, at[a]).scale_val(_val(q.get_ctx(), t)))
        old.append(v)
    back = _multi_aff(isl.Space.map_from_domain_and_range(lifted_space, q), old)
    block = _var(q, a).scale_down_val(val).floor()
    new = [_var(q, a).sub(block.scale_val(val))]
    for k in range(n):
        new.append(block if k == a else _var(q, k).sub(block.scale_val(_val(q.get_ctx(), t)))
                   if k == b else _var(q, k))
    forward = _multi_aff(isl.Space.map_from_domain_and_range(q, lifted_space), new)
    lifted = compression.compressed.preimage_multi_aff(back)
    r = _var(lifted_space, 0)
    lifted = lifted.add_constraint(isl.Constraint.inequality_from_aff(r)).add_constraint(
        isl.Constraint.inequality_from_aff(r.neg().add_constant_val(_val(q.get_ctx(), m - 1))))
    return Compression(map=compression.map.pullback_multi_aff(back), compressed=lifted,
                       inverse=forward.pullback_multi_aff(compression.inverse),
                       lifted=compression.lifted + 1)


def rewrite_access(access: isl.Map, compression: Compression) -> isl.Map:
    """An access of the original instances in terms of the compressed ones (eq. (26))."""
    _check_same_tuple(compression.map.get_space().range(), access.get_space().domain(), "access")
    access, ma = align_params(access, compression.map)
    return access.preimage_domain_multi_aff(ma)


# -------------------- guards


class UnboundedSetError(CodegenError):
    """A primitive that needs extremes or points was given an unbounded set.

    Validated programs and mappings never lead to one (validation rejects unbounded
    placements and stream relations at their entry); this keeps a bug or a hand-built
    input from ending in an isl "unbounded optimum" error."""


def _require_bounded(s: isl.Set, what: str) -> None:
    if not s.is_bounded():
        raise UnboundedSetError(f"{what} needs a bounded set, got the unbounded {_shown(s)}")


# -------------------- rectangularity (§5.1)


@dataclass(frozen=True)
class Rectangularity:
    """Per-dimension extremes of a set and whether it is a dense box of fixed size.

    ``minimum``/``maximum``/``size`` are multi piecewise quasi-affine expressions of
    the parameters in the set's space; ``size`` is simplified (gist) with respect to
    ``context``, the known constraints on the parameters (where the set is non-empty),
    on first use: few callers need it and the gist is the costliest step.
    ``sizes`` is the set of size vectors per parameter value (exact, not simplified).
    """

    minimum: isl.MultiPwAff
    maximum: isl.MultiPwAff
    extent: isl.MultiPwAff  # maximum - minimum + 1, not simplified
    sizes: isl.Set
    box: isl.Set
    context: isl.Set
    dense: bool
    fixed: bool
    constant_size: tuple[int, ...] | None

    @cached_property
    def size(self) -> isl.MultiPwAff:
        n = self.extent.dim(_dt.out)
        return _multi_pw_aff(self.box.get_space(),
                             [self.extent.get_at(d).gist_params(self.context) for d in range(n)])

    @property
    def rectangular(self) -> bool:
        """Dense box whose size does not depend on the index constants."""
        return self.dense and self.fixed


def constant_value(value: isl.PwAff) -> int | None:
    """The integer a function always takes, or None when it varies (isl's ``is_cst``
    only says that every piece is constant: ``4`` on one piece and ``1`` on another
    passes it)."""
    pieces: list[isl.Aff] = []
    value.foreach_piece(lambda _s, aff: pieces.append(aff))
    if not pieces or not all(a.is_cst() for a in pieces):
        return None
    values = {a.get_constant_val().to_python() for a in pieces}
    if len(values) != 1:
        return None
    (result,) = values
    return int(result) if isinstance(result, int) else None


def _multi_pw_aff(space: isl.Space, pas: Sequence[isl.PwAff]) -> isl.MultiPwAff:
    if not pas:
        return isl.MultiPwAff.zero(space)
    lst = isl.PwAffList.alloc(space.get_ctx(), len(pas))
    for pa in pas:
        lst = lst.add(pa)
    return isl.MultiPwAff.from_pw_aff_list(space, lst)


def _single_point(s: isl.Set) -> tuple[int, ...] | None:
    """The coordinates of ``s`` if it is a single point (no parameters)."""
    if s.is_empty() or not s.lexmin().is_equal(s):
        return None
    point = s.sample_point()
    return tuple(_int(point.get_coordinate_val(_dt.set, d)) for d in range(s.dim(_dt.set)))


def rectangularity(s: isl.Set, index: Sequence[str] | None = None) -> Rectangularity:
    """Rectangularity analysis of §5.1 by parametric integer programming.

    The box between the per-dimension minima and maxima is dense when it is a subset
    of ``s``; its size is fixed when it does not depend on the index constants
    ``index`` (default: all ``index*`` parameters), while it may depend on the PE.
    """
    _require_bounded(s, "the rectangularity analysis")
    space = s.get_space()
    n = s.dim(_dt.set)
    index = index_params(s) if index is None else tuple(index)
    context = s.params()
    minima = [s.dim_min(d) for d in range(n)]
    maxima = [s.dim_max(d) for d in range(n)]

    box = isl.Set.universe(space).intersect_params(context)
    ls = isl.LocalSpace.from_space(space)
    for d in range(n):
        var = isl.PwAff.var_on_domain(ls, _dt.set, d)
        box = box.intersect(var.ge_set(minima[d].insert_domain(space)))
        box = box.intersect(var.le_set(maxima[d].insert_domain(space)))
    dense = box.is_subset(s)

    one = _val(s.get_ctx(), 1)
    exact = [hi.sub(lo).add_constant_val(one) for lo, hi in zip(minima, maxima, strict=True)]
    sizes = isl.Set.from_multi_pw_aff(_multi_pw_aff(space, exact)).intersect_params(context)
    sizes = sizes.coalesce()
    per_pe = project_out_params(sizes, index)
    fixed = per_pe.is_empty() or per_pe.lexmin().is_equal(per_pe)
    constant = _single_point(sizes.project_out_all_params()) if fixed else None
    return Rectangularity(
        minimum=_multi_pw_aff(space, minima),
        maximum=_multi_pw_aff(space, maxima),
        extent=_multi_pw_aff(space, exact),
        sizes=sizes,
        box=box,
        context=context,
        dense=dense,
        fixed=fixed,
        constant_size=constant,
    )


# -------------------- size enumeration (§5.4)


@dataclass(frozen=True)
class SizeEnumeration:
    """SIMD configurations for the possible sizes of an instance set (§5.4).

    ``sizes`` is the set of sizes over all index values (eq. (42)), ``box`` its
    fixed-size box hull, ``identifiers`` the sizes minus the box offset with the PE
    coordinates projected out (eq. (43)).  ``entries`` pairs every identifier with the
    size it stands for (offset + identifier, possibly depending on the PE).
    """

    sizes: isl.Set
    box: FixedSizeBox
    identifiers: isl.Set
    entries: tuple[tuple[tuple[int, ...], isl.MultiAff], ...]

    def size_of(self, identifier: Sequence[int]) -> isl.MultiAff:
        for key, size in self.entries:
            if key == tuple(identifier):
                return size
        raise KeyError(tuple(identifier))


class TooManyPointsError(CodegenError):
    """A set has more points than its caller can list (:func:`points`' ``limit``)."""


def points(s: isl.Set, *, limit: int = MAX_POINTS) -> list[tuple[int, ...]]:
    """The integer points of a bounded set without parameters, in lexicographic order;
    :class:`TooManyPointsError`, before listing any, when its bounding box (of the set
    made dense by :func:`compress` where needed) holds more than ``limit`` points."""
    _require_bounded(s, "listing the points of a set")
    if s.is_empty():
        return []
    _require_listable(s, limit)
    return _listed_points(s)


def function_points(rel: isl.Map, *, limit: int = MAX_POINTS) -> list[tuple[int, ...]]:
    """The points of ``rel``'s wrapped set (argument, then value), in lexicographic
    order. Where ``rel`` is a function, there are as many as its domain has, which the
    ``limit`` then bounds: the bounding box of the whole may be far larger, as where the
    values are floors of the arguments (a tile's PE)."""
    wrapped = rel.wrap()
    if not rel.is_single_valued():
        return points(wrapped, limit=limit)
    _require_bounded(wrapped, "listing the points of a set")
    if wrapped.is_empty():
        return []
    _require_listable(rel.domain(), limit)
    return _listed_points(wrapped)


def _require_listable(s: isl.Set, limit: int) -> None:
    if _volume(s) > limit and _volume(compress(s).compressed) > limit and \
            _volume_by_pieces(s, limit) > limit:
        raise TooManyPointsError(f"a set with more than {limit} points cannot be listed "
                                 f"one by one: {_shown(s)}")


def _listed_points(s: isl.Set) -> list[tuple[int, ...]]:
    found: list[tuple[int, ...]] = []
    n = s.dim(_dt.set)

    def record(point: isl.Point) -> None:
        found.append(tuple(_int(point.get_coordinate_val(_dt.set, d)) for d in range(n)))

    s.foreach_point(record)
    return sorted(found)


def greatest(value: isl.PwAff) -> isl.Val:
    """The greatest value of ``value`` over its domain and all parameter values
    (infinite when unbounded). isl's ``max_val`` refuses an expression that isl wrote
    with a rational coefficient, ``(2 - PE_X)/2`` where ``PE_X`` is even, integral as it
    is; the graph of the function has no such form."""
    if value.get_domain_space().is_params():
        graph = isl.Set.from_pw_aff(value)
    else:
        graph = isl.Map.from_pw_aff(value).range()
    return graph.project_out_all_params().dim_max_val(0)


def _volume(s: isl.Set) -> int:
    """The points of the bounding box of a bounded, non-empty set without parameters."""
    volume = 1
    for d in range(s.dim(_dt.set)):
        volume *= _int(s.dim_max_val(d)) - _int(s.dim_min_val(d)) + 1
    return volume


def _volume_by_pieces(s: isl.Set, limit: int) -> int:
    """At least the points of ``s`` (bounded, without parameters): the bounding boxes of
    its pieces, each made dense by :func:`compress` where that is smaller, added up (the
    displacements of a halo that wraps to the next row, ``(1, 0)`` and ``(-3, 1)``, are
    two points each in two pieces, but span a box of 35); past ``limit``, more."""
    total = 0
    for piece in s.get_basic_sets():
        if total > limit:
            break
        whole = isl.Set.from_basic_set(piece)
        if whole.is_empty():
            continue
        total += min(_volume(whole), _volume(compress(whole).compressed))
    return total


def _shown(s: isl.Set) -> str:
    text = str(s)
    return text if len(text) <= 200 else text[:200] + "..."


def enumerate_sizes(
    sizes: isl.Set, index: Sequence[str] | None = None, pe: Sequence[str] = PE_NAMES, *,
    limit: int = MAX_POINTS, context: isl.Set | None = None
) -> SizeEnumeration | None:
    """Enumerate the sizes of ``sizes`` (one size vector per parameter value).

    ``None`` when the sizes over all index values have no fixed-size box hull;
    :class:`TooManyPointsError` when there are more than ``limit`` size identifiers.
    Where the box's offset would need a ``floor`` of the PE coordinates (a cyclic
    placement of 30 rows over 4 PEs: ``(29 - PE_Y)//4 + 1``, 7 or 8), the box of the
    sizes over every PE of ``context`` (parameters only) serves, at a constant offset.
    """
    index = index_params(sizes) if index is None else tuple(index)
    over_index = project_out_params(sizes, index).coalesce()
    box = set_box_hull(over_index, affine=True)
    if (box is None or _pe_sized(over_index, box, pe)) and context is not None:
        # The box of the sizes over every PE of the context, at a constant offset: where
        # the offset would need a floor of the PE's coordinates (no box), or where an
        # identifier would stand for a size of each PE (uneven tiles of 10 and 8: a box
        # of size 1 at ``10 - 2 PE_X``), each size its own identifier.
        bounded, known = align_params(over_index, context)
        within = bounded.intersect_params(known).coalesce()
        fixed = set_box_hull(project_out_params(within, pe).coalesce(), affine=True)
        if fixed is not None and not _involves_params(fixed.offset, pe):
            over_index = within
            box = FixedSizeBox(fixed.offset.align_params(over_index.get_space()), fixed.size)
    if box is None:
        return None
    space = over_index.get_space()
    shift = isl.MultiAff.identity_on_domain_space(space).add(box.offset.insert_domain(space))
    shifted = over_index.preimage_multi_aff(shift)
    identifiers = project_out_params(shifted, pe).project_out_all_params().coalesce()
    entries = tuple((point, _shifted_offset(box.offset, point))
                    for point in points(identifiers, limit=limit))
    return SizeEnumeration(over_index, box, identifiers, entries)


def _pe_sized(over_index: isl.Set, box: FixedSizeBox, pe: Sequence[str]) -> bool:
    """Whether some identifier of ``box`` over the sizes ``over_index`` stands for a
    size that depends on the PE: the box is one point wide in a dimension whose offset
    involves the PE's coordinates (every PE's own size, the same identifier)."""
    if not _involves_params(box.offset, pe):
        return False
    space = box.offset.get_space()
    positions = [space.find_dim_by_name(_dt.param, n) for n in pe]
    return any(size == 1 and any(p >= 0 and box.offset.get_at(d).involves_dims(
        _dt.param, p, 1) for p in positions) for d, size in enumerate(box.size))


def _involves_params(offset: isl.MultiAff, names: Sequence[str]) -> bool:
    space = offset.get_space()
    positions = [space.find_dim_by_name(_dt.param, n) for n in names]
    return any(p >= 0 and offset.get_at(d).involves_dims(_dt.param, p, 1)
               for p in positions for d in range(offset.dim(_dt.out)))


def most_overlapping(sets: Sequence[isl.Set]) -> int:
    """The most of ``sets`` (in one space) that any one point lies in: e.g. the SIMD
    configurations one PE needs, given the PEs needing each."""
    return heaviest_overlap([(s, 1) for s in sets])


def heaviest_overlap(weighted: Sequence[tuple[isl.Set, int]]) -> int:
    """The largest sum of the weights of the sets (in one space) that one point lies in:
    e.g. the cycles of the busiest PE, given the PEs doing each piece of work."""
    weights: list[tuple[isl.Set, int]] = []
    for s, weight in weighted:
        for n, (known, w) in enumerate(weights):
            if known.is_equal(s):
                weights[n] = (known, w + weight)
                break
        else:
            weights.append((s, weight))
    if not weights:
        return 0
    pieces = [(isl.Set.universe(weights[0][0].get_space()), 0)]
    for where, w in weights:
        refined = []
        for piece, count in pieces:
            inside, outside = piece.intersect(where), piece.subtract(where)
            refined += [(p, n) for p, n in ((inside, count + w), (outside, count))
                        if not p.is_empty()]
        pieces = refined
    return max((n for _, n in pieces), default=0)


def _shifted_offset(offset: isl.MultiAff, point: Sequence[int]) -> isl.MultiAff:
    ctx = offset.get_ctx()
    affs = [offset.get_at(d).add_constant_val(_val(ctx, value)) for d, value in enumerate(point)]
    return _multi_aff(offset.get_space(), affs)


# -------------------- box approximation (§5.3)


@dataclass(frozen=True)
class BoxApproximation:
    """Instance set widened to its fixed-size box hull (eq. (35)) and the extras (eq. (36))."""

    box: FixedSizeBox
    approximated: isl.Set
    extra: isl.Set

    @property
    def exact(self) -> bool:
        return self.extra.is_empty()


def approximate_by_box(instances: isl.Set) -> BoxApproximation | None:
    """Box-hull approximation of §5.3; ``None`` when there is no fixed-size box."""
    box = set_box_hull(instances, affine=True)
    if box is None:
        return None
    approximated = box_set(box, instances.params())
    approximated, instances = align_params(approximated, instances)
    return BoxApproximation(box, approximated, approximated.subtract(instances).coalesce())


def accessed_elements(
    instances: isl.Set, access: isl.Map, project_out: Sequence[str] = ()
) -> isl.Set:
    """Elements ``access`` touches from ``instances``, with the constants ``project_out``
    projected out (e.g. the index constants: over all invocations, eqs. (38)-(41))."""
    _check_same_tuple(access.get_space().domain(), instances.get_space(), "access")
    instances, access = align_params(instances, access)
    return project_out_params(instances.apply(access), project_out).coalesce()


@dataclass(frozen=True)
class ExtraWriteCheck:
    """Elements written by the proper (eq. (40)) and extra (eq. (41)) instances."""

    proper: isl.Set
    extra: isl.Set

    @property
    def conflicts(self) -> isl.Set:
        proper, extra = align_params(self.proper, self.extra)
        return proper.intersect(extra)

    @property
    def disjoint(self) -> bool:
        return self.conflicts.is_empty()


def check_extra_writes(
    instances: isl.Set,
    extra: isl.Set,
    write: isl.Map,
    index: Sequence[str] | None = None,
) -> ExtraWriteCheck:
    """Do the extra instances leave the elements written by proper instances alone?

    Compared per PE over all invocations: the index constants are projected out.
    """
    if index is None:
        index = tuple(sorted({*index_params(instances), *index_params(extra)}))
    return ExtraWriteCheck(
        proper=accessed_elements(instances, write, index),
        extra=accessed_elements(extra, write, index),
    )


# -------------------- arrival windows (batched arrivals)


def param_pw_aff(domain: isl.Set, name: str) -> isl.PwAff:
    """The parameter ``name`` of ``domain`` (a parameter set) as a function on it."""
    pos = domain.get_space().find_dim_by_name(_dt.param, name)
    if pos < 0:
        raise ValueError(f"no parameter {name} in {domain}")
    ls = isl.LocalSpace.from_space(domain.get_space())
    return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, _dt.param, pos)).intersect_domain(domain)


def with_params(obj: _P, names: Sequence[str]) -> _P:
    """``obj`` with the parameters ``names`` added (unconstrained) where it lacks them."""
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=[], params=list(names))
    return obj.align_params(space.align_params(obj.get_space()))


def over_window(s: isl.Set, name: str, width: str) -> isl.Set:
    """``{ x : exists v : name <= v < name + width and x in s[name := v] }``: the union of
    ``s`` over the values ``name, ..., name + width - 1`` of its parameter ``name`` (the
    instances a batch of consecutive arrivals triggers, the batch starting at ``name``
    and holding ``width`` of them)."""
    pos = s.get_space().find_dim_by_name(_dt.param, name)
    if pos < 0:
        raise ValueError(f"no parameter {name} in {s}")
    n = s.dim(_dt.set)
    moved = s.move_dims(_dt.set, n, _dt.param, pos, 1)  # v: the last set dimension
    moved = with_params(moved, [name, width])
    space = moved.get_space()
    ls = isl.LocalSpace.from_space(space)
    v = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, _dt.set, n))
    first = isl.PwAff.from_aff(isl.Aff.var_on_domain(
        ls, _dt.param, space.find_dim_by_name(_dt.param, name)))
    count = isl.PwAff.from_aff(isl.Aff.var_on_domain(
        ls, _dt.param, space.find_dim_by_name(_dt.param, width)))
    window = v.ge_set(first).intersect(v.lt_set(first.add(count)))
    result = moved.intersect(window).project_out(_dt.set, n, 1).coalesce()
    if s.get_space().has_tuple_id(_dt.set):
        result = result.set_tuple_id(s.get_space().get_tuple_id(_dt.set))
    return result


def over_values(s: isl.Set, name: str, width: int) -> isl.Set:
    """:func:`over_window` with a fixed ``width``: ``s`` united over the values ``name,
    ..., name + width - 1`` of its parameter ``name``."""
    wide = "__width"
    result = over_window(s, name, wide)
    at = param_pw_aff(result.params(), wide)
    result = result.intersect_params(at.eq_set(at.sub(at).add_constant_val(
        _val(result.get_ctx(), width))))
    return project_out_params(result, [wide]).coalesce()


def batch_starts(arrivals: isl.Set, first: isl.PwAff, last: isl.PwAff, size: int, name: str,
                 width: str) -> isl.Set:
    """The (parameter) values at which batches of ``size`` consecutive arrivals start,
    with their widths: ``name`` ranges over ``first, first + size, ...`` up to ``last``
    and ``width = min(size, last - name + 1)`` (relaxed to any width that occurs and
    keeps the batch in its group); ``arrivals`` (a parameter set holding ``name``) gives
    the context, ``first`` and ``last`` are functions of its other parameters."""
    ctx = arrivals.get_ctx()
    arrivals = with_params(arrivals, [width])
    start = param_pw_aff(arrivals, name)
    count = param_pw_aff(arrivals, width)
    first, last = first.align_params(arrivals.get_space()), last.align_params(
        arrivals.get_space())
    first = first.intersect_domain(arrivals)
    last = last.intersect_domain(arrivals)
    aligned = start.sub(first).mod_val(_val(ctx, size))
    on_grid = arrivals.intersect(aligned.eq_set(aligned.sub(aligned)))
    rest = last.sub(start).add_constant_val(_val(ctx, 1))
    full = rest.sub(rest).add_constant_val(_val(ctx, size))
    exact = on_grid.intersect(count.eq_set(full.min(rest)))
    # Stated without the minimum, which isl would carry into every expression derived
    # from it as cases: a batch ends inside its group and has one of the widths that
    # occur on its PE (a superset of the exact starts and widths, on which code is
    # correct too).
    widths = project_out_params(exact, [p for p in _param_names(exact)
                                        if p != width and p not in PE_NAMES])
    fits = on_grid.intersect(start.add(count).le_set(last.add_constant_val(_val(ctx, 1))))
    widths, fits = align_params(widths, fits)
    return fits.intersect(widths).coalesce()


def window_starts(arrivals: isl.Set, size: int, name: str, width: str,
                  shift: isl.PwAff | None = None) -> isl.Set:
    """The windows of ``size`` indices aligned to multiples of ``size`` (after
    subtracting ``shift``, a function of the other parameters) that hold at least one of
    the values of ``name`` in ``arrivals`` (a parameter set), with ``width = size``: the
    batches of a sparse stream, whose zeros are not sent."""
    ctx = arrivals.get_ctx()
    windows = over_window(isl.Set.from_params(arrivals), name, width).params()
    start = param_pw_aff(windows, name)
    count = param_pw_aff(windows, width)
    if shift is not None:
        start = start.sub(shift.align_params(windows.get_space()).intersect_domain(windows))
    aligned = start.mod_val(_val(ctx, size))
    windows = windows.intersect(aligned.eq_set(aligned.sub(aligned)))
    return windows.intersect(count.eq_set(count.sub(count).add_constant_val(
        _val(ctx, size)))).coalesce()


# -------------------- bounded effort


class TooComplex(Exception):
    """isl gave up on an analysis after its operation limit (see :func:`effort_limit`)."""


def within_effort(operations: int, attempt: Callable[[], _T]) -> _T | None:
    """``attempt()``, or None when it needs more than ``operations`` isl operations: for
    a nicer form of a result that has a plain one anyway. Inside
    :func:`effort_limit`, the enclosing analysis's count starts again afterwards."""
    ctx = isl.DEFAULT_CONTEXT
    outer = ctx.get_max_operations()
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        return attempt()
    except isl.Error as err:
        if "maximal number of operations exceeded" in str(err):
            return None
        raise
    finally:
        ctx.set_max_operations(outer)
        ctx.reset_operations()


SIMPLIFY_EFFORT = 200_000  # isl operations for explicit divisions of a set or map


def simplified(obj: _S) -> _S:
    """``obj`` with its existential variables made explicit divisions where isl finds
    them within a small effort: a stream's arrivals over a placement like
    ``PE[2, 1 + q + 2*a]`` carry existentials (``0 < PE_Y <= 4`` said with four
    of them) that isl copies into every set derived from them, until an analysis (a
    batch's starts, its SIMD decision) runs for minutes; otherwise ``obj`` as it is."""
    return within_effort(SIMPLIFY_EFFORT, lambda: obj.compute_divs().coalesce()) or obj


@contextmanager
def effort_limit(operations: int) -> Iterator[None]:
    """Run an optional analysis (a SIMD decision) with at most ``operations`` isl
    operations: sets that isl can only handle by an explosion of cases (quasi-affine
    placements over linearized indices) make it give up with :class:`TooComplex`
    instead of running for minutes; the caller falls back to what needs no analysis."""
    ctx = isl.DEFAULT_CONTEXT
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        yield
    except isl.Error as err:
        if "maximal number of operations exceeded" in str(err):
            raise TooComplex(str(err)) from err
        raise
    finally:
        ctx.set_max_operations(0)
        ctx.reset_operations()
