"""Local memory allocation with the fixed-size box hull (paper §4.3, eqs. (7)-(9)).

Every tensor that a compute PE keeps in memory (resident inputs, results and partial
results) gets one local array per class of PEs: a fixed size for all PEs and a
PE-dependent, purely affine offset, so the allocation is the same parametric object
however many PEs there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import prod

import islpy as isl

from dtg.errors import UnsupportedMappingError
from dtg.mapping import poly
from dtg.mapping.flows import TaskGraph
from dtg.mapping.lifting import lift_blocks
from dtg.mapping.padding import padded_blocks, padding_enabled
from dtg.pe.ir import LOCAL_MEMORY_BYTES


@dataclass(frozen=True)
class LocalTensor:
    """The local array of one tensor on the compute PEs."""

    tensor: str
    array: poly.LocalArray
    dtype: str
    bytes: int
    resident_input: bool
    resident_output: bool

    @property
    def name(self) -> str:
        return self.array.name

    @property
    def size(self) -> tuple[int, ...]:
        return self.array.size

    @property
    def pes(self) -> isl.Set:
        return self.array.per_pe.domain()

    @property
    def to_local_bound(self) -> isl.MultiAff:
        return self.array.to_local_bound

    def grown(self, size: tuple[int, ...], shift: tuple[int, ...]) -> LocalTensor:
        """The array enlarged to ``size``, its old element ``l`` now at ``l - shift``
        (Example 5.9: y_local grows to [1, 18] and accesses shift by [0, -2])."""
        offset = self.array.box.offset
        ctx = offset.get_ctx()
        shifted = offset
        for d, delta in enumerate(shift):
            shifted = shifted.set_at(d, offset.get_at(d).add_constant_val(
                isl.Val.int_from_si(ctx, delta)))
        box = poly.FixedSizeBox(shifted, size)
        to_local = poly.global_to_local(box, self.name)
        array = poly.LocalArray(self.name, self.array.per_pe, box, to_local,
                                poly.bind_pe_coordinates(to_local))
        return replace(self, array=array, bytes=prod(size) * (self.bytes // prod(self.size)))

    def offset_aff(self) -> isl.MultiAff:
        """The box offset with the PE bound to ``PE_X``/``PE_Y``: global = local + offset."""
        offset = self.array.box.offset
        return offset.bind_domain(poly.multi_id(offset.get_domain_space(), poly.PE_NAMES))


@dataclass(frozen=True)
class Memory:
    arrays: tuple[LocalTensor, ...]

    def of(self, tensor: str) -> LocalTensor | None:
        return next((a for a in self.arrays if a.tensor == tensor), None)

    def grown(self, tensor: str, size: tuple[int, ...], shift: tuple[int, ...]) -> Memory:
        """``tensor``'s array enlarged (and with it every tensor sharing that array,
        codegen.inplace)."""
        local = self.of(tensor)
        if local is None:
            return self
        return Memory(tuple(a.grown(size, shift) if a.name == local.name else a
                            for a in self.arrays))

    def format(self) -> str:
        lines = []
        for a in self.arrays:
            lines.append(f"{a.name}: {a.dtype}{list(a.size)}, {a.bytes} bytes on {a.pes}")
            lines.append(f"  elements per PE (7): {a.array.per_pe}")
            lines.append(f"  global to local (8): {a.array.to_local}")
            lines.append(f"  bound (9): {a.array.to_local_bound}")
        return "\n".join(lines) + "\n"


def allocate(tg: TaskGraph, *, memory_bytes: int = LOCAL_MEMORY_BYTES) -> Memory:
    """Allocate the local arrays of the compute region; fail when a PE runs out of memory.
    Uneven tiles' blocks are held at the largest tile's size (:mod:`mapping.padding`)
    only where the arrays grown for them fit the PE."""
    arrays = _arrays(tg, padded=padding_enabled())
    if sum(a.bytes for a in arrays) > memory_bytes and padding_enabled():
        arrays = _arrays(tg, padded=False)
    check_fits("compute", [(a.name, a.size, a.bytes) for a in arrays], memory_bytes,
               hint=_sparse_hint(arrays) if sum(a.bytes for a in arrays) > memory_bytes
               else "", resident=_worth_streaming(arrays, memory_bytes))
    return Memory(tuple(arrays))


def _arrays(tg: TaskGraph, *, padded: bool) -> list[LocalTensor]:
    model, mapping = tg.model, tg.mapping
    streamed = {f.tensor for f in tg.inputs}
    by_element = {t.statement for t in tg.tasks if t.kind == "compute" and t.trigger}
    arrays = []
    for tensor in model.graph.tensors:
        per_pe: isl.Map | None = None
        for pstmt in model.statements:
            accessed = [t for t, _ in pstmt.reads] + [pstmt.stmt.target.tensor]
            if tensor.name not in accessed:
                continue
            if tensor.name in streamed and (tensor.name not in tg.buffered
                                            or pstmt.name in by_element):
                continue  # used as it arrives, not from memory
            rel = poly.elements_per_pe(tg.placement_of(pstmt.name), pstmt.access(tensor.name),
                                       pstmt.domain)
            per_pe = rel if per_pe is None else per_pe.union(rel)
        if per_pe is None:
            continue
        for gather in tg.exchanges:
            if gather.tensor == tensor.name and tensor.role == "output":
                # The PEs next to the side receive the elements they send out.
                per_pe, needed = poly.align_params(per_pe, gather.needed)
                per_pe = per_pe.union(needed)
        for ex in tg.exchanges:
            grown = None if ex.tensor != tensor.name or ex.reduce or not padded else \
                padded_blocks(ex.produced, tensor.shape)
            if grown is not None:
                # Uneven tiles go out at the largest tile's size (codegen.blocks): each
                # sender's array holds its grown block, beyond the tensor's shape.
                per_pe, blocks = poly.align_params(per_pe, grown[0])
                per_pe = per_pe.union(blocks)
        for red in (*tg.reductions, *tg.combines):
            if red.tensor == tensor.name:
                # A PE of a chain passes on the elements of its segment (of a banded
                # chain, also those it computes no part of, holding the neutral value).
                per_pe, held = poly.align_params(per_pe, red.elements)
                per_pe = per_pe.union(held)
        flow = tg.output_flow(tensor.name)
        if flow is not None and flow.chain:
            # Every PE of a chain sends the elements of its line from this array, those it
            # computes no part of too (holding the neutral value).
            sent = flow.sent_by().intersect_domain(flow.senders)
            per_pe, sent = poly.align_params(per_pe, sent)
            per_pe = per_pe.union(sent)
        local = _tightest_array(per_pe.coalesce(), f"{tensor.name}_local")
        if local is None:
            raise UnsupportedMappingError(
                f"the elements of '{tensor.name}' used on a PE have no fixed-size box hull "
                f"({per_pe}), so no local array of one size holds them on every PE; place "
                "the instances so that each PE uses a block of the same shape",
                subject=tensor.name)
        arrays.append(LocalTensor(
            tensor.name, local, tensor.dtype, prod(local.size) * tensor.bytes_per_element,
            mapping.is_resident(tensor.name) and tensor.role == "input",
            mapping.is_resident(tensor.name) and tensor.role == "output"))
    return arrays


def _tightest_array(per_pe: isl.Map, name: str) -> poly.LocalArray | None:
    """The local array of ``per_pe``'s box hull, or of the box hull of the same elements
    written by their blocks (:func:`mapping.lifting.lift_blocks`) where that is smaller:
    isl writes a PE's rows of ``PE[(j//16) mod 4, i//16 + 4 ((j//64) mod 2)]`` with
    existential variables, a box of 64; by blocks, ``16 (PE_Y mod 4) <= i < ... + 16``."""
    local = poly.local_array(per_pe, name)
    again = _by_blocks(per_pe)
    if again is None:
        return local
    other = poly.local_array(again, name)
    if other is None or (local is not None and prod(other.size) >= prod(local.size)):
        return local
    return replace(other, per_pe=per_pe)


def _by_blocks(per_pe: isl.Map) -> isl.Map | None:
    """``per_pe`` (``PE -> elements``) as isl writes it once the blocks its elements are
    read through are lifted and mapped back; None where there are none."""
    elements = poly.bind_pe(per_pe)
    if elements.n_basic_set() != 1:
        elements = elements.coalesce()
    lifted = lift_blocks(poly.compress(elements))
    if lifted is None:
        return None
    image = lifted.compressed.apply(lifted.as_map())
    again = image.unbind_params_insert_domain(poly.multi_id(per_pe.get_space().domain(),
                                                            poly.PE_NAMES))
    again, per_pe = poly.align_params(again, per_pe)
    return again if again.is_equal(per_pe) else None


def _worth_streaming(arrays: list[LocalTensor], memory_bytes: int) -> list[str]:
    """The resident inputs whose arrays alone exceed what does not fit, largest first:
    streamed instead, the rest would fit."""
    excess = sum(a.bytes for a in arrays) - memory_bytes
    return [a.tensor for a in sorted(arrays, key=lambda a: -a.bytes)
            if a.resident_input and a.bytes >= excess]


SPARSE_BOX = 4  # a box this many times the elements a PE uses is worth saying so


def _sparse_hint(arrays: list[LocalTensor]) -> str:
    """Why the arrays are large, where the largest box that is mostly elements the PE
    does not use (a cyclic placement's strided elements) says so: counted on one PE."""
    for largest in sorted(arrays, key=lambda a: -a.bytes):
        per_pe = largest.array.per_pe
        pe = per_pe.domain().lexmin()
        if pe.is_empty():
            continue
        used = per_pe.intersect_domain(pe).range()
        if not used.is_bounded():
            continue
        count = int(used.count_val().to_python())
        box = prod(largest.size)
        if count * SPARSE_BOX > box:
            continue
        return (f"; '{largest.tensor}' has {count} elements on a PE but they spread over a "
                f"box of {box} (strided, as a cyclic placement makes them): a local array "
                "holds the box around what its PE uses, so place the instances by blocks "
                "(i//b rather than i mod p) to keep each PE's elements together")
    return ""


def check_fits(program: str, arrays: list[tuple[str, tuple[int, ...], int]],
               memory_bytes: int = LOCAL_MEMORY_BYTES, *, hint: str = "",
               resident: Sequence[str] = ()) -> None:
    """Reject, at the placement, local arrays ``(name, shape, bytes)`` that do not fit a
    PE: the mapping puts too much data on each PE (``hint``: why, appended; ``resident``:
    the resident inputs among them, largest first, which could be streamed instead)."""
    total = sum(b for _, _, b in arrays)
    if total <= memory_bytes:
        return
    listing = ", ".join(f"{name}{list(shape)} {b} bytes"
                        for name, shape, b in sorted(arrays, key=lambda a: -a[2]))
    raise UnsupportedMappingError(
        f"the local arrays of each {program} PE need {total} bytes ({listing}), more than "
        f"the {memory_bytes} bytes a PE has; spread the work over more PEs "
        f"({total / memory_bytes:.1f}x less data on each would fit)"
        + (f" or stream '{resident[0]}' instead of keeping it resident" if resident else "")
        + hint, subject="placement")
