"""Results leaving the compute PEs: partial results combined along chains, outputs
streamed out of the rectangle (docs/codegen.md, "Outputs")."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import islpy as isl

from dtg.codegen.adapters import OPPOSITE
from dtg.codegen.cost import elementwise_simd_pays
from dtg.codegen.emitstate import EmitterState
from dtg.codegen.islast import (
    condition_of,
    pw_aff_expr,
    scan,
    substitute,
)
from dtg.codegen.routes import direct_routes
from dtg.codegen.simd import flat_aff, flatten, row_major
from dtg.codegen.stmtutil import and_cond, case_chain, guarded, pe_condition_set, simplify
from dtg.codegen.variants import size_variants
from dtg.errors import CompilerBug
from dtg.lair.lower import CTX
from dtg.mapping import affine, poly
from dtg.mapping.flows import (
    OutputFlow,
    Region,
    ResidentReduction,
    chain_length,
    unsupported,
)
from dtg.mapping.lifting import lift_in_order
from dtg.mapping.memory import LocalTensor
from dtg.mapping.mesh import upstream_of
from dtg.pe.ir import (
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FExpr,
    IBin,
    IConst,
    IExpr,
    If,
    IVar,
    Load,
    Recv,
    Route,
    Run,
    Send,
    SendEnd,
    SimdConfig,
    SimdOperand,
    Stmt,
    Store,
)


class Gathering(EmitterState):
    """Emits the combining chains of partial results and the output streams."""

    def _combine(self, red: ResidentReduction) -> list[Stmt]:
        """Pass partial results along each segment; the last PE adds them into its array."""
        local = self.memory.of(red.tensor)
        if local is None:
            raise CompilerBug(f"'{red.tensor}' has partial results but no local array")
        context = self.region.context()
        held = poly.bind_pe(red.elements)
        held, to_local = poly.align_params(held, isl.Map.from_multi_aff(local.to_local_bound))
        positions = held.apply(to_local)
        rect = poly.rectangularity(positions, index=())
        # One SIMD configuration needs the same box on every PE; uneven tiles (a smaller
        # last tile) get one size variant per box size, selected by the PE (every PE of a
        # chain holds the same elements, so a sender and its receiver take the same);
        # other shapes combine in scalar loops over the held elements.
        uniform = rect.rectangular and rect.constant_size is not None
        sizes = rect.constant_size if rect.constant_size is not None else ()
        variants: tuple[tuple[int, ...], ...] = (sizes,)
        variant: IExpr | None = None
        if rect.rectangular and rect.constant_size is None:
            by_pe = size_variants(rect.sizes, context)
            if by_pe is not None:
                uniform = True
                variants, variant = by_pe
                sizes = max(variants, key=prod)
        strides = row_major(local.size)
        flat = flat_aff(positions.get_space(), strides)
        base: IExpr = IConst(0)
        if uniform:
            base = pw_aff_expr(isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
                rect.minimum.align_params(flat.get_space())), context)
        else:
            # (the blocks of a block-cyclic placement, `y` rows `64 a + 16 b + r`: one box
            # of their lifted coordinates, in the same order as the elements)
            blocks = _lifted_box(held, local, context)
            if blocks is not None:
                uniform = True
                sizes, strides, base = blocks
                variants, variant = (sizes,), None
        pos = red.position
        zero = pos.zero_set()
        even = pos.mod_val(isl.Val.int_from_si(CTX, 2)).zero_set()
        holders = pos.domain()  # only the PEs holding partial results take part
        holders, even = poly.align_params(holders, even)
        even = even.intersect(holders)
        odd = holders.subtract(even)
        zero = zero.intersect(holders.align_params(zero.get_space()))
        last = red.last
        first_c, second_c = red.colors
        port_out, port_in = red.side, OPPOSITE[red.side]

        def cond(*parts: isl.Set, minus: tuple[isl.Set, ...] = ()) -> tuple[bool, Cond | None]:
            result = self.region.context()
            for part in parts:
                result, part = poly.align_params(result, part)
                result = result.intersect(part)
            for part in minus:
                result, part = poly.align_params(result, part)
                result = result.subtract(part)
            return (not result.is_empty(), condition_of(result, context))

        sends_even = cond(even, minus=(last,))
        sends_odd = cond(odd, minus=(last,))
        gets_even = cond(even, minus=(zero,))
        gets_odd = cond(odd)
        if red.step is not None:  # (a chain through PEs on no one line)
            self.routes += _path_routes(red.step, ((even, first_c), (odd, second_c)), last,
                                        context)
        else:
            if sends_even[0]:
                self.routes.append(Route(first_c, "RAMP", (port_out,), sends_even[1]))
            if sends_odd[0]:
                self.routes.append(Route(second_c, "RAMP", (port_out,), sends_odd[1]))
            if gets_odd[0]:
                self.routes.append(Route(first_c, port_in, ("RAMP",), gets_odd[1]))
            if gets_even[0]:
                self.routes.append(Route(second_c, port_in, ("RAMP",), gets_even[1]))
        op = self._reduction_op(red.tensor)
        roles = [  # (exists, condition, destination color or None, source color or None)
            (*cond(zero, minus=(last,)), first_c, None),
            (*cond(even, minus=(last, zero)), first_c, second_c),
            (*cond(odd, minus=(last,)), second_c, first_c),
            (*cond(even, last, minus=(zero,)), None, second_c),
            (*cond(odd, last), None, first_c),
        ]
        if self.tg.model.graph.tensor(red.tensor).role == "internal":
            # (the conditions are exclusive: where the totals are read on, the last PEs
            # go on working after the chain, so they are tested right after its first)
            roles = [roles[0], roles[3], roles[4], roles[1], roles[2]]
        cases: list[tuple[Cond | None, Sequence[Stmt]]] = []
        for exists, when, send_color, recv_color in roles:
            if not exists:
                continue
            if self._simd_out("combine", red.tensor) and uniform and len(sizes) <= 4 and \
                    elementwise_simd_pays(sizes, local.dtype, ops=3):
                name = f"combine_{red.tensor}_{len(self.configs)}"
                array = SimdOperand("array", local.name, strides)
                srcs: tuple[SimdOperand, ...] = (array,)
                if recv_color is not None:
                    srcs = (array, SimdOperand("in", color=recv_color))
                dst = SimdOperand("out", color=send_color) if send_color is not None else array
                kind = "copy" if recv_color is None else op
                self.configs.append(SimdConfig(name, kind, variants, dst, srcs))  # type: ignore[arg-type]
                cases.append((when, [Run(name, ((local.name, base),), None, variant)]))
                continue

            def body(_: str, coords: Sequence[IExpr], send_color: int | None = send_color,
                     recv_color: int | None = recv_color) -> list[Stmt]:
                element = Load(local.name, tuple(simplify(c) for c in coords))
                if recv_color is None:
                    assert send_color is not None
                    return [Send(send_color, element)]
                combined = FBin("max" if op == "fmax" else "+", element, Recv(recv_color))
                if send_color is None:
                    return [Store(element, "=", combined)]
                return [Send(send_color, combined)]

            cases.append((when, scan(positions.set_tuple_name("held"), context, body)))
        return list(case_chain(cases, exhaustive=False))

    def _output(self, out: OutputFlow) -> list[Stmt]:
        local = self.memory.of(out.tensor)
        if local is None:
            raise CompilerBug(f"output '{out.tensor}' has no local array")
        context = self.region.context()
        order = out.relation.range_factor_range()
        elements = poly.bind_pe(out.sent_by())  # elements sent by this PE, over PE_X, PE_Y
        k_to_t = order.reverse().intersect_range(elements)
        to_local = isl.Map.from_multi_aff(local.array.to_local_bound)
        k_to_t, to_local = poly.align_params(k_to_t, to_local)
        k_to_local = k_to_t.apply_range(to_local)
        indices = k_to_local.domain()
        bounds = isl.Set.universe(k_to_local.get_space().range())
        for d, size in enumerate(local.size):
            bounds = bounds.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(CTX, 0))
            bounds = bounds.upper_bound_val(isl.dim_type.set, d,
                                            isl.Val.int_from_si(CTX, size - 1))
        if not k_to_local.range().is_subset(bounds):
            raise unsupported(out.tensor,
                f"output '{out.tensor}': the PEs of its lines that compute no part of an "
                "element would send it from outside their local array; place the instances "
                "so that every PE of a line the output leaves along computes the same "
                "elements, or only the PE next to the side")
        n = int(indices.dim(isl.dim_type.set))
        linear, rect, flats, strides, variants, variant = _linear_send(k_to_local, local,
                                                                       context)
        sizes = max(variants, key=prod)
        if not linear and out.kind == "dense":
            # (a block-cyclic order, `index[8 (i // 32) + i mod 8]`: each block's number
            # a coordinate of its own before its offset's, the same order, linear)
            lifted = lift_in_order(indices)
            if lifted is not None and int(lifted[1].dim(isl.dim_type.set)) <= 4:
                forward, within = lifted
                at = k_to_local.preimage_domain_multi_aff(forward).intersect_domain(within)
                found = _linear_send(at, local, context)
                if found[0]:
                    linear, rect, flats, strides, variants, variant = found
                    n, sizes = len(strides), max(variants, key=prod)
        if not linear and n == 1 and out.kind == "dense":
            # (a linearized order, `index[(i mod 4) * 32 + j]`: the PE's elements a box
            # sent row-major, one SIMD instruction over the box)
            rows = _row_major(k_to_t, to_local, local)
            if rows is not None:
                rect, flats, strides = rows
                n, linear = len(strides), True
                sizes = rect.constant_size or sizes
                variants, variant = (sizes,), None
        base: IExpr = IConst(0)
        if linear:
            flat_pw: isl.PwAff | None = None
            for where, flat in flats:
                piece = isl.PwAff.from_aff(flat).intersect_domain(where)
                flat_pw = piece if flat_pw is None else flat_pw.union_add(piece)
            assert flat_pw is not None
            base = pw_aff_expr(flat_pw.pullback_multi_pw_aff(
                rect.minimum.align_params(flat_pw.get_space())), context)
        pos = _position(out.side, self.region)
        length = chain_length(out.side, self.region)
        send_port, recv_port = out.side, OPPOSITE[out.side]
        first, second = out.chain_colors
        reduction = self._reduction_op(out.tensor)
        senders = condition_of(pe_condition_set(out.senders), context)
        # (when, send color, recv color, sends (value, index) pairs)
        roles: list[tuple[Cond | None, int, int | None, bool]] = []
        sparse = out.kind == "sparse"
        if not out.chain:
            self.routes.append(Route(first, "RAMP", (send_port,), senders))
            # (PEs between a sender and the side, where a line's elements were gathered
            # on another PE of it, pass them on)
            passing = out.senders.apply(upstream_of(out.side)).subtract(out.senders)
            if not passing.is_empty():
                self.routes.append(Route(first, recv_port, (send_port,), condition_of(
                    pe_condition_set(passing), context)))
            roles.append((senders, first, None, sparse))
        else:
            even = Cmp("==", IBin("%", pos, IConst(2)), IConst(0))
            odd = Cmp("==", IBin("%", pos, IConst(2)), IConst(1))
            self.routes.append(Route(first, "RAMP", (send_port,), and_cond(senders, even)))
            self.routes.append(Route(second, "RAMP", (send_port,), and_cond(senders, odd)))
            if length > 1:
                self.routes.append(Route(first, recv_port, ("RAMP",), and_cond(senders, odd)))
            if length > 2:
                self.routes.append(Route(second, recv_port, ("RAMP",), and_cond(
                    senders, BoolOp("&&", even, Cmp(">", pos, IConst(0))))))
            # An if / else-if chain: the second case is reached only when pos > 0.
            if sparse:  # the last PE sends (value, index) pairs out of the rectangle
                colors = (first, second)
                roles.append((Cmp("==", pos, IConst(length - 1)), colors[(length - 1) % 2],
                              colors[(length - 2) % 2] if length > 1 else None, True))
            roles.append((Cmp("==", pos, IConst(0)), first, None, False))
            if length > 2:
                roles.append((even, first, second, False))
            roles.append((odd, second, first, False))
        # A sparse stream's index is the innermost k: one indexed SIMD output sends it
        # where its groups are the box's rows, counted from 0 (``out(c, index)``).
        from_zero = linear and poly.constant_value(rect.minimum.get_at(n - 1)) == 0
        cases: list[tuple[Cond | None, Sequence[Stmt]]] = []
        for when, send_color, recv_color, pairs in roles:
            simd = self._simd_out("out", out.tensor) and n <= 4 and linear and \
                elementwise_simd_pays(sizes, local.dtype, ops=3)
            if pairs and simd and from_zero:
                cases.append((when, self._simd_send(out, len(cases), local, strides, variants,
                                                    variant, base, send_color, recv_color,
                                                    True)))
            elif pairs:
                closing = (SendEnd(send_color),) if n == 1 else ()  # (else per group)
                cases.append((when, (*self._scalar_send(
                    k_to_local, context, local, send_color, recv_color, reduction,
                    with_index=True), *closing)))
            elif simd:
                cases.append((when, self._simd_send(out, len(cases), local, strides, variants,
                                                    variant, base, send_color, recv_color,
                                                    False)))
            else:
                cases.append((when, self._scalar_send(
                    k_to_local, context, local, send_color, recv_color, reduction)))
        if out.chain:  # only the lines the output leaves along take part
            return list(guarded(senders, case_chain(cases, exhaustive=True)))
        return list(case_chain(cases, exhaustive=False))

    def _simd_send(self, out: OutputFlow, case: int, local: LocalTensor,
                   strides: tuple[int, ...], variants: tuple[tuple[int, ...], ...],
                   variant: IExpr | None, base: IExpr, send_color: int,
                   recv_color: int | None, indexed: bool) -> list[Stmt]:
        """One SIMD instruction sending the PE's box of ``out`` (plus what arrives on
        ``recv_color``, a chain's partial results), with indices and end marks if
        ``indexed``; ``variant`` selects the PE's box size among ``variants``."""
        op = "copy" if recv_color is None else self._reduction_op(out.tensor)
        name = f"out_{out.tensor}_{case}"
        srcs: tuple[SimdOperand, ...] = (SimdOperand("array", local.name, strides),)
        if recv_color is not None:
            srcs = (*srcs, SimdOperand("in", color=recv_color))
        self.configs.append(SimdConfig(name, op, variants,  # type: ignore[arg-type]
                                       SimdOperand("out", color=send_color, indexed=indexed,
                                                   ends=indexed),
                                       srcs))
        return [Run(name, ((local.name, base),), None, variant)]

    def _scalar_send(self, k_to_local: isl.Map, context: isl.Set, local: LocalTensor,
                     send_color: int, recv_color: int | None, reduction: str, *,
                     with_index: bool = False) -> tuple[Stmt, ...]:
        """Loops sending, in the stream's index order ``k``, the element at local position
        ``k_to_local(k)`` (the loops visit the pairs (k, position), so the position may
        be any quasi-affine, piecewise function of ``k``)."""
        indices = k_to_local.domain()
        n = int(indices.dim(isl.dim_type.set))
        names = [f"k{d}" for d in range(n)]
        # A multi-dimensional sparse index: the wavelet carries the innermost index and an
        # end mark closes each group of outer index values, after its last element.
        group_end: IExpr | None = None
        if with_index and n > 1:
            inner = poly.bind_leading(indices, names[:-1])
            group_end = pw_aff_expr(inner.dim_max(0), inner.params())

        def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            k, position = coords[:n], coords[n:]
            element: FExpr = Load(local.name, tuple(simplify(c) for c in position))
            if recv_color is not None:
                element = FBin("max" if reduction == "fmax" else "+", element, Recv(recv_color))
            sends: list[Stmt] = [Send(send_color, element, k[-1] if with_index else None)]
            if group_end is not None:
                last = simplify(substitute(group_end, dict(zip(names, k, strict=True))))
                sends.append(If(Cmp("==", k[-1], last), (SendEnd(send_color),)))
            return sends

        pairs = k_to_local.wrap().flatten().set_tuple_name("out")
        return scan(pairs, context, body)


def _linear_send(k_to_local: isl.Map, local: LocalTensor, context: isl.Set
                 ) -> tuple[bool, poly.Rectangularity, list[tuple[isl.Set, isl.Aff]],
                            tuple[int, ...], tuple[tuple[int, ...], ...], IExpr | None]:
    """Whether one SIMD configuration sends a PE's elements in the stream's order (the
    index ``k`` -> local position map ``k_to_local``): the same box of indices on every
    PE (or a size per PE class, uneven tiles), each read at ``base + sum(stride * k)``
    (one affine piece: a grown array can make the position ``floor(k / 6) * 66 + k mod
    6``). With it, the box, the flat positions by piece, the strides, the sizes and the
    expression selecting a PE's."""
    indices = k_to_local.domain()
    rect = poly.rectangularity(indices, index=())
    pma = k_to_local.as_pw_multi_aff()
    n = int(indices.dim(isl.dim_type.set))
    linear = rect.rectangular
    sizes = rect.constant_size if rect.constant_size is not None else (1,) * n
    variants: tuple[tuple[int, ...], ...] = (sizes,)
    variant: IExpr | None = None
    if linear and rect.constant_size is None:  # uneven tiles: a size per PE class
        by_pe = size_variants(rect.sizes, context)
        linear = by_pe is not None
        if by_pe is not None:
            variants, variant = by_pe
    strides: tuple[int, ...] = (0,) * n
    flats: list[tuple[isl.Set, isl.Aff]] = []
    if linear:
        # (one stride per dimension on every piece: pieces that differ only by the
        # PE's offset, `32 * (PE_Y mod 2)` written as two pieces, make one base)
        pieces: list[tuple[isl.Set, isl.MultiAff]] = []
        pma.foreach_piece(lambda where, ma: pieces.append((where, ma)))
        # (a division fixed on the piece, `(32 PE_Y + k) mod 64` for k < 32, read by
        # meaning: mapping.affine)
        flats = [(where, affine.affine_on(flat, where) or flat)
                 for where, ma in pieces for flat in [flatten(ma, local.size)]]
        strides = tuple(int(flats[0][1].get_coefficient_val(
            isl.dim_type.in_, k).to_python()) for k in range(n))
        linear = all(
            tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                  for k in range(n)) == strides and
            not any(flat.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
                    for d in range(flat.dim(isl.dim_type.div)))
            for _, flat in flats)
    return linear, rect, flats, strides, variants, variant


def _path_routes(step: isl.Map, parities: Sequence[tuple[isl.Set, int]], last: isl.Set,
                 context: isl.Set) -> list[Route]:
    """The routes of a chain through PEs on no one line (``step``: each PE to the next):
    each PE of a parity (a set over the PE's coordinates) to the next on that parity's
    color, along its row and then the next PE's column."""
    routes: list[Route] = []
    for parity, color in parities:
        senders, stop = poly.align_params(parity, last)
        senders = poly.pe_set(senders.subtract(stop))
        senders, pairs = poly.align_params(senders, step)
        pairs = pairs.intersect_domain(senders)
        if pairs.is_empty():
            continue
        made = direct_routes(color, pairs, context)
        if made is None:
            raise CompilerBug(f"the chain's routes on color {color} mix (the planner "
                              "checked them)")
        routes += made
    return routes


def _lifted_box(held: isl.Set, local: LocalTensor, context: isl.Set
                ) -> tuple[tuple[int, ...], tuple[int, ...], IExpr] | None:
    """Where the elements a PE ``held`` are the blocks of a block-cyclic placement
    (``y`` rows ``64 a + 16 b + r``), lifted in order into a box of one size
    (:func:`lift_in_order`: the same elements in the same order): its size, the strides
    of its coordinates in the PE's ``local`` array and its first element's flat
    position; None otherwise."""
    found = lift_in_order(held)
    if found is None:
        return None
    forward, within = found
    n = int(within.dim(isl.dim_type.set))
    if n > 4:
        return None
    rect = poly.rectangularity(within, index=())
    if not rect.rectangular or rect.constant_size is None:
        return None
    to_local = local.to_local_bound
    forward, to_local = poly.align_params(forward, to_local)
    flat = flat_aff(to_local.get_space().range(), row_major(local.size)).pullback_multi_aff(
        to_local).pullback_multi_aff(forward)
    if any(flat.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
           for d in range(flat.dim(isl.dim_type.div))):
        return None
    strides = tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                    for k in range(n))
    base = pw_aff_expr(isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
        rect.minimum.align_params(flat.get_space())), context)
    return rect.constant_size, strides, base


def _position(side: str, region: Region) -> IExpr:
    """A PE's position along a line flowing towards ``side``, from the far end."""
    if side == "E":
        return IVar("PE_X")
    if side == "S":
        return IVar("PE_Y")
    if side == "W":
        return IBin("-", IConst(region.width - 1), IVar("PE_X"))
    return IBin("-", IConst(region.height - 1), IVar("PE_Y"))


RowMajor = tuple[poly.Rectangularity, list[tuple[isl.Set, isl.Aff]], tuple[int, ...]]


def _row_major(k_to_t: isl.Map, to_local: isl.Map, local: LocalTensor) -> RowMajor | None:
    """Where the elements a PE sends (``k_to_t``: position -> element) are a box of one
    size whose positions follow it row-major (an output order written linearized,
    ``index[(i mod 4) * 32 + j]``): the box's rectangularity, its elements' flat local
    positions by piece and their strides; None otherwise."""
    elements = k_to_t.range()
    rect = poly.rectangularity(elements, index=())
    size = rect.constant_size
    if not rect.rectangular or size is None:
        return None
    positions = k_to_t.domain()
    first = positions.dim_min(0)
    space = elements.get_space()
    ls = isl.LocalSpace.from_space(space)
    # position = first + sum over d of row_major(size)[d] * (t_d - minimum_d)
    expected = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
    for d, stride in enumerate(row_major(size)):
        coordinate = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
        low = rect.minimum.get_at(d)
        coordinate, low = poly.align_params(coordinate, low)
        lifted = low.pullback_multi_aff(isl.MultiAff.zero(isl.Space.map_from_domain_and_range(
            coordinate.get_domain_space(), low.get_domain_space())))
        expected, coordinate = poly.align_params(expected, coordinate)
        lifted = lifted.align_params(coordinate.get_space())
        expected = expected.add(coordinate.sub(lifted).scale_val(
            isl.Val.int_from_si(CTX, stride)))
    start, expected = poly.align_params(first, expected)
    expected = expected.add(start.pullback_multi_aff(isl.MultiAff.zero(
        isl.Space.map_from_domain_and_range(expected.get_domain_space(),
                                            start.get_domain_space()))))
    by_element, expected = poly.align_params(k_to_t.reverse(), expected)
    row_major_order = isl.Map.from_pw_aff(expected).intersect_domain(by_element.domain())
    if by_element.has_tuple_id(isl.dim_type.out):
        row_major_order = row_major_order.set_tuple_id(
            isl.dim_type.out, by_element.get_tuple_id(isl.dim_type.out))
    if not by_element.is_equal(row_major_order):
        return None
    placed = to_local.intersect_domain(elements.align_params(to_local.get_space()))
    pieces: list[tuple[isl.Set, isl.MultiAff]] = []
    placed.as_pw_multi_aff().foreach_piece(lambda where, ma: pieces.append((where, ma)))
    flats = [(where, affine.affine_on(flat, where) or flat)
             for where, ma in pieces for flat in [flatten(ma, local.size)]]
    n = len(size)
    strides = tuple(int(flats[0][1].get_coefficient_val(isl.dim_type.in_, k).to_python())
                    for k in range(n))
    for _, flat in flats:
        if tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                 for k in range(n)) != strides or any(
                flat.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
                for d in range(flat.dim(isl.dim_type.div))):
            return None
    return rect, flats, strides

