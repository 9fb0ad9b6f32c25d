"""Arrival batching: the work of several consecutive wavelets of a stream as one task.

Per arrival, the paper's code pays a task dispatch and a SIMD start-up for a few cycles
of work. A stream arrives in a known order, so a PE can land up to ``K`` consecutive
wavelets in a small array while it computes (as a fabric-input DSD moves them in CSL)
and run one task per batch whose SIMD instructions cover the instances of all of them:
the per-arrival instance set with ``index`` ranging over the batch's window
``index .. index + count - 1`` (:func:`mapping.poly.over_window`). The streamed tensor
is then an ordinary array operand, the landing array, at position ``order(e) - index``.

A dense batch is ``K`` consecutive wavelets (fewer where its group ends). A sparse
stream does not send zeros, so its batches are windows of ``K`` indices aligned to
multiples of ``K``: the elements not sent are 0 in the landing array and the batch
computes with them, which gives what the program gives (a statement runs per element
of a sparse stream only if a zero contributes nothing); windows with no element sent
are skipped, as single zeros are by per-wavelet tasks.

The batch size comes from a small cost model; per-wavelet tasks stay where they are
predicted cheaper, and ``arrival="per-wavelet"`` keeps the paper's code exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil, prod

import islpy as isl

from dtg.codegen import groupbatch
from dtg.codegen.adapters import adapter_window
from dtg.codegen.cost import (
    box_volume,
    branch_cycles,
    costs,
    dispatch,
    expr_ops,
    scalar_cycles,
    simd_cycles,
)
from dtg.codegen.groupbatch import control_cycles
from dtg.codegen.hoist import per_arrival_ops
from dtg.codegen.islast import (
    condition_of,
    normalize,
    pw_aff_expr,
    substitute,
    substitute_stmts,
)
from dtg.codegen.keeping import arrival_share, keep_cycles
from dtg.codegen.scalarcode import scalar_code
from dtg.codegen.simd import Extension, SimdDecision, decide, flatten, linear_access
from dtg.codegen.stmtutil import pe_condition_set
from dtg.lair.limits import counted
from dtg.mapping import affine, poly
from dtg.mapping.flows import InputFlow, Task, TaskGraph
from dtg.mapping.memory import LocalTensor, Memory
from dtg.pe.ir import (
    COUNT,
    ELEMENT_BYTES,
    LOCAL_MEMORY_BYTES,
    MAX_RING,
    MAX_SIMD_DIMS,
    SLOT,
    BConst,
    Cond,
    IBin,
    IConst,
    IExpr,
    If,
    ISel,
    IVar,
    cut_dimension,
)
from dtg.pe.walk import iexpr_names, stmt_names

ARRIVAL_MODES = ("batched", "per-wavelet")
ALWAYS = "always"  # batches wherever possible, even where predicted slower (for testing)
ALWAYS_GROUPS = "always-groups"  # as ALWAYS, batches of whole groups first (for testing)
MAX_BATCH = 64
MAX_GROUP_BATCH = 256  # a group of a stream this long or less may land whole
# The share of a sparse stream's elements assumed nonzero when batches (which compute
# with the zeros) are weighed against per-wavelet tasks (which skip them).
SPARSE_DENSITY = 0.75
# Wavelets that come through per-wavelet adapters arrive one per adapter task (its
# dispatch, the test whether the element is for its line, the send): a batch waits for
# all of them. Batched adapters send a line's window at one per cycle.
ADAPTER_WORK = 5
KEEP_PER_WAVELET = 1  # storing an arriving element where it is kept (+1: a sparse address)
MAX_KEEP_VARIANTS = 4  # sizes of the kept part of a batch (one SIMD variant each)
KEEP_EFFORT = 200_000
MAX_SIZE_POINTS = 4096


@dataclass(frozen=True)
class Candidate:
    """One way to run a stream's per-arrival work, with its predicted cycles for the
    busiest group of arrivals on a PE (``size`` None: one task per wavelet)."""

    size: int | None
    cycles: int | None  # from the first arrival on the busiest PE to the end of its work
    note: str
    busy: int | None = None  # the data task's cycles on a PE over its groups, no zeros
    groups: int | None = None  # batches of whole groups: how many per batch
    runs: int | None = None  # batches: how many the busiest PE runs

    @property
    def way(self) -> tuple[int | None, int | None]:
        """What tells the candidates apart: the batch size, the groups per batch."""
        return self.size, self.groups

    def report(self) -> dict[str, object]:
        return {"batch": self.size, "groups": self.groups, "predicted_cycles": self.cycles,
                "predicted_busy": self.busy, "note": self.note}


@dataclass(frozen=True)
class KeepCopy:
    """A batch's elements that the PE keeps (for statements that read the whole tensor),
    copied from the landing array into the tensor's local array by one SIMD instruction
    over their box: where ``elements`` (parameters: the PE, the batch) is not empty."""

    sizes: tuple[int, ...]  # the largest (the only one without ``variants``)
    elements: isl.Set
    dst_strides: tuple[int, ...]
    dst_base: IExpr
    src_strides: tuple[int, ...]
    src_base: IExpr
    # where the box's size differs between batches (a halo's part of the window): one
    # variant per size, ``variant`` selecting the batch's; or, where the sizes differ in
    # the dimension a length cuts (pe.ir.cut_dimension), one configuration of the largest
    # size cut to the batch's ``length``
    variants: tuple[tuple[int, ...], ...] = ()
    variant: IExpr | None = None
    length: IExpr | None = None
    # where batches of a window of rows cut a PE's box: the elements a copy moves on
    # average on the PE with the most copies (else the largest size's)
    per_run: int | None = None

    def guard_cycles(self, context: isl.Set) -> int:
        """The test whether a batch has kept elements on its PE (none where all have)."""
        guard = condition_of(self.elements.params(), context)
        return 0 if guard is None else branch_cycles(guard)

    def cycles(self, dtype: str, varying: frozenset[str] | None = None) -> int:
        """Cycles of one copy; with ``varying`` (the names that change between copies),
        what is left of the base arithmetic once the rest is computed once (codegen.hoist)."""
        def ops(e: IExpr) -> int:
            return expr_ops(e) if varying is None else per_arrival_ops(e, varying)
        width = costs().simd_width(dtype, "copy")
        moved = prod(self.sizes) if self.per_run is None else self.per_run
        return costs().simd_startup + ceil(moved / width) + \
            ops(self.dst_base) + ops(self.src_base) + sum(
                costs().simd_variant_select + ops(chosen)
                for chosen in (self.length, self.variant) if chosen is not None)


@dataclass(frozen=True)
class Batch:
    """The chosen batching of one dense input flow."""

    flow: str
    size: int
    land: LocalTensor
    context: isl.Set  # parameters PE_X, PE_Y, outer index, index (first of batch), count
    tasks: tuple[Task, ...]  # the flow's compute tasks with their per-batch instances
    decisions: tuple[tuple[str, SimdDecision], ...]
    gain: int = 0  # predicted cycles saved over per-wavelet tasks
    keep: KeepCopy | None = None  # a stream also kept in memory: the batch's copy
    once: bool = False  # sparse: one window per PE in the whole run, never cleared
    # batches of whole groups (codegen.groupbatch): ``groups`` of them per batch, ``size``
    # slots each; the outer index values ``fixed`` are the batch's, ``context``'s
    # parameters are the PE's and those
    groups: int | None = None
    fixed: tuple[str, ...] = ()
    first: isl.PwAff | None = None  # what ``index`` stands for (groupbatch.GroupLayout)
    ring: int = 1  # batches the landing array holds (``ring`` in the PE code)
    window: int = 0  # the last of ``fixed`` starts a window of that many values

    @property
    def land_bytes(self) -> int:
        """Bytes of the landing array, its ring's slots all counted."""
        return self.land.bytes * self.ring

    def describe(self) -> str:
        if self.groups is None:
            return f"batches of {self.size}"
        return f"batches of {self.groups} groups of up to {self.size}"

    @property
    def way(self) -> tuple[int | None, int | None]:
        """As :attr:`Candidate.way`."""
        return self.size, self.groups

    @property
    def extensions(self) -> tuple[Extension, ...]:
        """Local arrays grown for the extra instances of the batch's box hulls."""
        return tuple(e for _, d in self.decisions for e in d.extensions)

    def decision(self, task: str) -> SimdDecision:
        return dict(self.decisions)[task]

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)


@dataclass(frozen=True)
class ArrivalPlan:
    batches: tuple[Batch, ...] = ()
    candidates: tuple[tuple[str, tuple[Candidate, ...]], ...] = ()
    batched: bool = True  # False: the paper's per-wavelet code everywhere (adapters too)

    def of(self, flow: str) -> Batch | None:
        return next((b for b in self.batches if b.flow == flow), None)

    @staticmethod
    def gain(batch: Batch) -> int:
        return batch.gain

    def extensions(self) -> list[Extension]:
        return [e for b in self.batches for e in b.extensions]

    def without(self, flow: str) -> ArrivalPlan:
        return replace(self, batches=tuple(b for b in self.batches if b.flow != flow))

    def cut_to_length(self) -> ArrivalPlan | None:
        """The plan with every batch's size variants that one configuration cut to a
        run-time length can serve so cut (fewer configurations, the same work); None
        where there are none."""
        def cut(d: SimdDecision) -> SimdDecision:
            return d.cut_to_length() if d.cuttable else d
        if not any(d.cuttable for b in self.batches for _, d in b.decisions):
            return None
        return replace(self, batches=tuple(
            replace(b, decisions=tuple((t, cut(d)) for t, d in b.decisions))
            for b in self.batches))

    def report(self) -> dict[str, object]:
        chosen = {b.flow: b for b in self.batches}
        return {flow: {"chosen_batch": chosen[flow].size if flow in chosen else None,
                       "chosen_groups": chosen[flow].groups if flow in chosen else None,
                       "candidates": [c.report() for c in cands]}
                for flow, cands in self.candidates}


def plan_arrivals(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision], *,
                  arrival: str = "batched", max_batch: int = MAX_BATCH, grow: bool = True,
                  memory_bytes: int = LOCAL_MEMORY_BYTES) -> ArrivalPlan:
    """For each input flow, the predicted cost of per-wavelet tasks and of batches
    of each candidate size; the cheapest batching where it beats per-wavelet tasks.
    ``grow=False``: no batch whose box hull needs larger local arrays. Landing arrays
    of whole groups must fit what ``memory_bytes`` leaves (those within a group hold at
    most ``max_batch`` elements, set aside for every stream)."""
    if arrival not in (*ARRIVAL_MODES, ALWAYS, ALWAYS_GROUPS):
        raise ValueError(f"arrival must be one of {ARRIVAL_MODES}, not {arrival!r}")
    batches: list[Batch] = []
    candidates: list[tuple[str, tuple[Candidate, ...]]] = []
    reserve = max_batch * max(ELEMENT_BYTES.values())  # (a landing array within a group)
    used = sum(a.bytes for a in memory.arrays) + reserve * len(tg.inputs)
    for flow in tg.inputs:
        tasks = tuple(t for t in tg.tasks if t.kind == "compute" and t.flow == flow.name)
        if not tasks and flow.tensor not in tg.buffered:
            continue
        cands, best = _candidates(tg, memory, decisions, flow, tasks, max_batch,
                                  arrival != "per-wavelet",
                                  force=arrival in (ALWAYS, ALWAYS_GROUPS),
                                  groups_first=arrival == ALWAYS_GROUPS, grow=grow,
                                  room=memory_bytes - used + reserve)
        if best is not None:
            used += best.land_bytes - reserve
        candidates.append((flow.name, cands))
        if best is not None:
            batches.append(best)
    return ArrivalPlan(tuple(batches), tuple(candidates), arrival != "per-wavelet")


def _candidates(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision],
                flow: InputFlow, tasks: tuple[Task, ...], max_batch: int, enabled: bool, *,
                force: bool = False, groups_first: bool = False, grow: bool = True,
                room: int = LOCAL_MEMORY_BYTES) -> tuple[tuple[Candidate, ...], Batch | None]:
    window = batch_window(flow)
    per_wavelet = [d for t in tasks for d in [decisions.get(t.name)] if d is not None]
    length = window[2] if window is not None else None
    varying = frozenset(poly.index_names(flow.index_dims)[-1:])
    env: dict[str, IExpr] | None = None
    if flow.kind == "sparse" and flow.wire_offset is not None:  # as emission rewrites it
        env = {"index": IBin("+", IVar("index"), pw_aff_expr(flow.wire_offset[-1],
                                                             flow.arrival_context()))}
    # dispatch, a dense stream's arrival counter, storing a kept element, the work (on
    # the share of arrivals that have instances on the PE, the others test a guard): on
    # the busiest PE, as each piece runs where its PEs are
    pw_cost = None
    if len(per_wavelet) == len(tasks):
        # (a dense stream's position in its group is counted where the code reads it)
        reads_index = flow.tensor in tg.buffered or any(
            varying & _work_names(d, tg, t, memory)
            for t, d in zip(tasks, per_wavelet, strict=True))
        lines = pe_condition_set(flow.lines)
        pieces = [(lines, dispatch() + (flow.kind == "dense" and reads_index))]
        for t, d in zip(tasks, per_wavelet, strict=True):
            assert t.instances is not None
            run = _run_cost(d, tg, t, varying=varying, env=env, memory=memory)
            share = _trigger_share(flow, t, varying)
            pieces.append((_pes(t.instances), run if share is None else ceil(run * share[0])))
            if share is not None:
                pieces.append((lines, share[1]))
        if flow.tensor in tg.buffered:
            local = memory.of(flow.tensor)
            pieces.append((lines, KEEP_PER_WAVELET + (flow.kind == "sparse")) if local is None
                          else (pe_condition_set(local.pes), keep_cycles(
                              flow, local, tg.compute.context(), varying)))
        pw_cost = _busiest(pieces, flow)
    every = None if pw_cost is None or length is None else length * max(1, pw_cost)
    groups = _groups(flow)
    period = 1 if flow.adapter is None or (enabled and adapter_window(
        flow, tg.model.graph.tensor(flow.tensor).dtype) is not None) \
        else dispatch() + ADAPTER_WORK
    pw_cycles = None
    if every is not None and length is not None and pw_cost is not None:
        # the stream's arrivals on the PE, or its busy cycles (sparse: skipping zeros)
        busy = groups * every * (SPARSE_DENSITY if flow.kind == "sparse" else 1)
        pw_cycles = ceil(max(groups * length * period + pw_cost, busy))
    result = [Candidate(None, pw_cycles, "one task per wavelet (the paper's code)",
                        None if every is None else groups * every)]
    if not enabled:
        return tuple(result), None
    best = _within_groups(tg, memory, flow, tasks, window, groups, period, max_batch, grow,
                          result, room)
    grouped = _group_candidates(tg, memory, flow, tasks, period, room)
    result.extend(c for c, _ in grouped)
    if best is None or (not force and pw_cycles is not None and best[0] >= pw_cycles):
        best = None
    # (per group, the others also pay an end mark's control task)
    control = control_cycles(flow, groups)
    rival = min((c for c in (pw_cycles, best[0] if best else None) if c is not None),
                default=None)
    for cand, made in grouped:
        if cand.cycles is not None and made is not None and (
                rival is None or cand.cycles < rival + control or groups_first) and (
                    best is None or best[1].groups is None or cand.cycles < best[0]):
            best = (cand.cycles, made)
            if groups_first:  # (the fewest groups per batch: the most batches)
                break
    if best is None:
        return tuple(result), None
    gain = max(0, pw_cycles + (control if best[1].groups is not None else 0) - best[0]) \
        if pw_cycles is not None else 0
    return tuple(result), replace(best[1], gain=gain)


def _within_groups(tg: TaskGraph, memory: Memory, flow: InputFlow, tasks: tuple[Task, ...],
                   window: tuple[isl.PwAff, isl.PwAff, int] | None, groups: int, period: int,
                   max_batch: int, grow: bool, result: list[Candidate], room: int
                   ) -> tuple[int, Batch] | None:
    """Batches of consecutive wavelets within a group: each size's candidate (appended to
    ``result``) and the cheapest batching, if any."""
    length = window[2] if window is not None else None
    kept = memory.of(flow.tensor) if flow.tensor in tg.buffered else None
    if flow.tensor in tg.buffered and kept is None:
        result.append(Candidate(None, None, "no batches: the kept stream has no array"))
        return None
    if window is None or length is None:
        result.append(Candidate(None, None, "no batches: the arrivals of a group do not "
                                            "have a first and last index per PE"))
        return None
    # (a group of up to MAX_GROUP_BATCH wavelets may land whole: one batch per group,
    # whose windows then never straddle two batches)
    whole = length if max_batch < length <= MAX_GROUP_BATCH else None
    # (a linearized order's rows, `index[c * 130 + i]`: batches of one row each, whose
    # kept part is one box, where a row is longer than the usual batches)
    row = _order_row(flow, length, max_batch)
    land_local = _landing(tg, flow, max(whole or max_batch, row or 0))
    if isinstance(land_local, str):
        result.append(Candidate(None, None, f"no batches: {land_local}"))
        return None
    best: tuple[int, Batch] | None = None
    sizes = sorted({s for s in (length, 4, 8, 16, 32, 64) if 2 <= s <= min(length, max_batch)}
                   | ({whole} if whole is not None else set())
                   | ({row} if row is not None else set()), reverse=True)
    for size in sizes:
        if size * ELEMENT_BYTES[land_local.dtype] > room:
            result.append(Candidate(size, None, f"batches of {size}: the landing array "
                                                "would not fit the PE"))
            continue
        made = _batch(tg, memory, flow, tasks, window, size, land_local, grow=grow)
        if isinstance(made, str):
            result.append(Candidate(size, None, made))
            continue
        batches = ceil(length / size)
        if flow.kind == "sparse":  # windows aligned to multiples of K
            batches = _windows(flow, window, size)
        ring, once = landing_ring(flow.kind == "sparse", groups * batches, made.land.bytes,
                                  room)
        if lands_in_place(made, kept):  # (in the tensor's array: one slot, the array's)
            ring, once = 1, flow.kind == "sparse" and groups * batches == 1
        made = replace(made, ring=ring, once=once)
        # (a sparse window's task has what does not change with its first index computed
        # per group or once, codegen.hoist, unless it runs once)
        varying = frozenset({poly.INDEX}) if flow.kind == "sparse" and not (
            once and ring == 1) else None
        if flow.kind == "dense" and groups > 1:  # (its parts of the PE alone: in main)
            varying = frozenset({*poly.index_names(flow.index_dims), COUNT, SLOT})
        # (the busiest PE's: the tasks and the kept copy may each run on other PEs; a
        # task with instances in some batches only runs on their share, its test on all)
        work: list[tuple[isl.Set, int]] = []
        full: list[tuple[isl.Set, int]] = []  # (a batch that has them all: the last may)
        tests: list[Cond] = []  # (the tests counted: one the kept copy shares is one)
        for t in made.tasks:
            if t.instances is None:
                continue
            run = _run_cost(made.decision(t.name), tg, t, count=size, varying=varying)
            full.append((_pes(t.instances), run))
            test = condition_of(t.instances.params(), made.context)
            if test is None or flow.kind == "dense":
                work.append((_pes(t.instances), run))
                continue
            share = arrival_share(flow, t.instances.params(), made.context)
            work.append((_pes(t.instances), ceil(share * run)))
            tests.append(test)
            tested = (pe_condition_set(flow.lines), branch_cycles(test, varying))
            work.append(tested)
            full.append(tested)
        if made.keep is not None and not lands_in_place(made, kept):
            # (the copy where a batch has kept elements, the test on every batch)
            share = arrival_share(flow, made.keep.elements.params(), made.context)
            work.append((_pes(made.keep.elements),
                         ceil(share * made.keep.cycles(land_local.dtype, varying))))
            full.append((_pes(made.keep.elements), made.keep.cycles(land_local.dtype, varying)))
            guard = made.keep.guard_cycles(made.context)
            if guard and condition_of(made.keep.elements.params(), made.context) not in tests:
                work.append((pe_condition_set(flow.lines), guard))
                full.append((pe_condition_set(flow.lines), guard))
        cost = [dispatch() + _busiest(work, flow), dispatch() + _busiest(full, flow)]
        if flow.kind == "sparse" and not once:  # each window's slot cleared as it opens
            width = costs().simd_width(land_local.dtype, "fill")
            cost = [c + costs().simd_startup + ceil(size / width) for c in cost]
        if made.ring == 2 and not made.once:
            # (slots for the batches that land while a task runs: a task longer than a
            # batch's landing holds up the stream, and a multicast line with it; where
            # a PE runs work in a small share of the batches only, as many more as pile
            # up over its share, so that the stream goes on to the PEs after it)
            deeper = 1 + ceil(cost[1] / (size * period))
            share = max((arrival_share(flow, t.instances.params(), made.context)
                         for t in made.tasks if t.instances is not None), default=1.0)
            if share <= MAX_SHARE_PILED and cost[1] > size * period:
                deeper = max(deeper, 1 + ceil(share * groups * batches * (
                    1 - size * period / cost[1])))
            deeper = min(MAX_RING, groups * batches, deeper)
            while deeper > 2 and made.land.bytes * deeper > room:
                deeper -= 1
            if deeper > 2:
                made = replace(made, ring=deeper)
        # landing the first batch, then compute-bound, or arrival-bound and the last batch
        # (and, where a stream's one group is not one batch, its end mark's control task,
        # which a whole group's batch runs in its own task: codegen.emit)
        tail = dispatch() + groupbatch.CONTROL_WORK if flow.index_dims == 1 and \
            size < length else 0
        cycles = max(size * period + groups * batches * cost[0],
                     groups * length * period + cost[1] + tail)
        result.append(Candidate(size, cycles, f"{counted(batches, 'batch', 'batches')} of up to "
                                              f"{counted(size, 'wavelet')}, {cost[0]} cycles each",
                                groups * batches * cost[0], runs=groups * batches))
        if best is None or cycles < best[0]:
            best = (cycles, made)
    return best


def _pes(obj: isl.Set) -> isl.Set:
    """The PEs (``PE_X``, ``PE_Y`` parameters) where work on ``obj`` happens."""
    return poly.project_onto_pe(obj.params())


def _busiest(work: list[tuple[isl.Set, int]], flow: InputFlow) -> int:
    """The most cycles of ``work`` (each piece with the PEs doing it) one PE of the
    stream's lines does."""
    if not work:
        return 0
    lines = pe_condition_set(flow.lines)
    aligned = []
    for pes, cycles in work:
        pes, within = poly.align_params(pes, lines)
        aligned.append((pes.intersect(within), cycles))
    space = aligned[0][0].get_space()
    return poly.heaviest_overlap([(p.align_params(space), c) for p, c in aligned])


def _group_candidates(tg: TaskGraph, memory: Memory, flow: InputFlow, tasks: tuple[Task, ...],
                      period: int, room: int) -> list[tuple[Candidate, Batch | None]]:
    """Batches of whole groups (:mod:`codegen.groupbatch`), each with its prediction;
    those whose landing array would take more than ``room`` bytes are left out."""
    found = groupbatch.layouts(tg, flow)
    if isinstance(found, str):
        return [] if flow.index_dims < 2 else [
            (Candidate(None, None, f"no batches of whole groups: {found}"), None)]
    made: list[tuple[Candidate, Batch | None]] = []
    for layout in found:
        what = f"batches of {layout.groups} groups of up to {layout.slot}"
        if layout.land.bytes > room:
            made.append((Candidate(layout.slot, None, f"{what}: its landing array "
                                   f"({layout.land.bytes} bytes) would not fit the PE "
                                   f"({max(room, 0)} bytes left)", None, layout.groups), None))
            continue
        chosen = groupbatch.decisions(tg, memory, flow, tasks, layout)
        if isinstance(chosen, str):
            made.append((Candidate(layout.slot, None, f"{what}: {chosen}", None, layout.groups),
                         None))
            continue
        ring, once = landing_ring(flow.kind == "sparse", layout.batches, layout.land.bytes,
                                  room)
        # (over several batches of a dense stream, what depends on the PE alone is
        # computed once, in main: codegen.hoist; all else changes with the batch)
        varying = frozenset({*poly.index_names(flow.index_dims), COUNT, SLOT,
                             f"g_{flow.name}"}) if layout.batches > 1 and \
            flow.kind == "dense" else None
        work = sum(_run_cost(d, tg, t, count=layout.slot, varying=varying) for t, d in chosen)
        keep: KeepCopy | None = None
        if flow.tensor in tg.buffered:  # the batch's kept elements copied into place
            kept = memory.of(flow.tensor)
            copy = "the kept stream has no array" if kept is None else keep_copy(
                flow, kept, layout.land, layout.context, free=layout.free,
                window=(layout.fixed[-1], layout.window) if layout.window else None)
            if isinstance(copy, str):
                made.append((Candidate(layout.slot, None, f"{what}: {copy}", None,
                                       layout.groups), None))
                continue
            keep = copy
        batch = Batch(flow.name, layout.slot, layout.land, layout.context,
                      tuple(t for t, _ in chosen), tuple((t.name, d) for t, d in chosen),
                      keep=keep, once=once, groups=layout.groups, fixed=layout.fixed,
                      first=layout.first, ring=ring, window=layout.window)
        if keep is not None and lands_in_place(batch, memory.of(flow.tensor)):
            # (in the tensor's array: one slot, the array's, and no copy)
            batch = replace(batch, ring=1, once=flow.kind == "sparse" and layout.batches == 1)
        elif keep is not None:
            costed = keep
            if layout.first is not None:  # (its bases as emitted, with the first index)
                known = poly.project_out_params(flow.arrival_context(), [
                    n for n in poly.index_names(flow.index_dims) if n not in layout.fixed])
                at = {poly.INDEX: pw_aff_expr(layout.first, known)}
                costed = replace(keep, dst_base=normalize(substitute(keep.dst_base, at)),
                                 src_base=normalize(substitute(keep.src_base, at)))
            work += costed.cycles(layout.land.dtype, varying) + keep.guard_cycles(
                layout.context)
        cycles, busy = groupbatch.batch_cycles(layout, work, sparse=flow.kind == "sparse",
                                               once=batch.once, period=period,
                                               streams=len(tg.inputs))
        note = f"{what}: {counted(layout.batches, 'batch', 'batches')} of {work} cycles of work"
        made.append((Candidate(layout.slot, cycles, note, busy, layout.groups,
                               layout.batches), batch))
    return made


# A sparse stream's batches each in a slot of their own, opened once, up to this many
MAX_ONCE_RING = 8
# Slots for the batches that pile up over a PE's share of a stream, where the share is
# at most this: where a PE works on most batches, it holds up the stream either way (a
# ring of 11 for a share of 0.89 slowed a conv -> relu -> pool chain by 12%)
MAX_SHARE_PILED = 0.5


def landing_ring(sparse: bool, runs: int, slot_bytes: int, room: int) -> tuple[int, bool]:
    """The slots of a stream's landing ring on a PE that runs ``runs`` batches of it, and
    whether each slot opens once: every batch in a slot of its own where they are few
    (a sparse stream's slots then start as the program image's zeros and are never
    cleared), else two, so that a batch lands while the core runs the one before it
    (what the predictions assume); one where the PE has no room for more."""
    if runs <= 1:
        return 1, sparse
    if sparse and runs <= MAX_ONCE_RING and slot_bytes * runs <= room:
        return runs, True
    if slot_bytes * 2 <= room:
        return 2, False
    return 1, False


def lands_in_place(batch: Batch, kept: LocalTensor | None) -> bool:
    """Whether every batch's wavelets go, as they land, exactly where the PE keeps them
    (``kept``): the kept box is the whole batch (a window, or its whole groups) in the
    landing array's order, at the start of the tensor's array."""
    keep = batch.keep
    slots = batch.size * (batch.groups or 1)
    return keep is not None and kept is not None and not keep.variants and \
        keep.length is None and prod(keep.sizes) == slots and \
        keep.dst_strides == keep.src_strides == _row_major(keep.sizes) and \
        keep.dst_base == IConst(0) and keep.src_base == IConst(0) and \
        prod(kept.size) >= slots and kept.dtype == batch.land.dtype


def _row_major(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a dense row-major box of ``sizes``."""
    return tuple(prod(sizes[d + 1:]) for d in range(len(sizes)))


def _order_row(flow: InputFlow, length: int, max_batch: int) -> int | None:
    """Where the innermost position is a linearized index (a coefficient of the element's
    coordinates other than 1, such as the 130 of ``c * 130 + i``) that divides a group
    and is longer than ``max_batch`` but short enough to land whole: that row's length."""
    order = flow.order_on_pe()
    if order is None:
        return None
    inner = order.get_at(flow.index_dims - 1)
    rows = {abs(int(value.to_python())) for k in range(inner.dim(isl.dim_type.in_))
            for value in [inner.get_coefficient_val(isl.dim_type.in_, k)] if value.is_int()}
    fits = [r for r in rows if max_batch < r <= MAX_GROUP_BATCH and r < length
            and length % r == 0]
    return max(fits, default=None)


def batch_window(flow: InputFlow) -> tuple[isl.PwAff, isl.PwAff, int] | None:
    """First and last innermost index of each group of arrivals on a PE (functions of the
    PE and the outer index values) and the largest group's length."""
    arrivals = poly.bind_pe(flow.arrivals())
    outer = poly.index_names(flow.index_dims)[:-1]
    if outer:
        arrivals = poly.bind_leading(arrivals, outer)
    first, last = arrivals.dim_min(0), arrivals.dim_max(0)
    length = poly.greatest(last.sub(first).add_constant_val(isl.Val.one(first.get_ctx())))
    if not length.is_int():
        return None
    return first, last, int(length.to_python())


def _windows(flow: InputFlow, window: tuple[isl.PwAff, isl.PwAff, int], size: int) -> int:
    """The most windows of ``size`` (aligned to multiples of it, after the wire offset)
    that one group of a sparse stream's arrivals spans."""
    first, last, length = window
    shift = flow.wire_offset[-1] if flow.wire_offset is not None else None

    def window_of(at: isl.PwAff) -> isl.PwAff:
        if shift is not None:
            at = at.sub(shift.align_params(at.get_space()))
        return at.scale_down_val(isl.Val.int_from_si(at.get_ctx(), size)).floor()

    first, last = poly.align_params(first, last)
    spans = poly.greatest(window_of(last).sub(window_of(first)))
    return int(spans.to_python()) + 1 if spans.is_int() else ceil(length / size) + 1


def in_first_window(flow: InputFlow, first: isl.PwAff, last: isl.PwAff, size: int) -> bool:
    """Whether every index a sparse stream's wavelets carry to a PE (its arrivals from
    ``first`` to ``last``, less the wire offset) lies in ``0 .. size - 1``."""
    shift = flow.wire_offset[-1] if flow.wire_offset is not None else None
    if shift is not None:
        first = first.sub(shift.align_params(first.get_space()))
        last = last.sub(shift.align_params(last.get_space()))
    low = poly.greatest(first.neg())
    high = poly.greatest(last)
    return low.is_int() and high.is_int() and -int(low.to_python()) >= 0 and \
        int(high.to_python()) < size


def _trigger_share(flow: InputFlow, task: Task, varying: frozenset[str]
                   ) -> tuple[float, int] | None:
    """For a task whose instances on a PE do not follow every arrival there: the share
    of arrivals that have some (:func:`codegen.keeping.arrival_share`) and the cycles of
    the guard that tests it per wavelet. None if every one has (no guard in the code)."""
    assert task.instances is not None
    arrivals = flow.arrival_context()
    triggering = task.instances.params()
    arrivals, triggering = poly.align_params(arrivals, triggering)
    guard = condition_of(triggering, arrivals)
    if guard is None:
        return None
    return arrival_share(flow, triggering), branch_cycles(guard, varying)


def mean_runs(outer: isl.Set, flow: InputFlow) -> float | None:
    """Where a per-wavelet SIMD decision's outer loops (``outer``: parameters the PE and
    the arrival) run a number of times that varies between arrivals (a halo's first and
    last rows): the mean over the arrivals that run them, the most at the first and last
    PE of the flow's lines; None where it cannot be counted."""
    arrivals = flow.arrival_context()
    outer, arrivals = poly.align_params(outer, arrivals)
    outer = outer.intersect_params(arrivals)
    n = outer.dim(isl.dim_type.param)
    best: float | None = None
    for corner in (flow.lines.lexmin(), flow.lines.lexmax()):
        at = outer.intersect_params(pe_condition_set(corner).align_params(outer.get_space()))
        if at.is_empty():
            continue
        flat = at.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
        if not (flat.is_bounded() and at.params().is_bounded()):
            return None
        runs = _count(at.params())
        points = int(flat.count_val().to_python())
        if runs:
            best = max(best or 0.0, points / runs)
    return best


def _count(params: isl.Set) -> int:
    """The points of a bounded set of parameter values."""
    return int(isl.Set.from_params(params).count_val().to_python())


def _groups(flow: InputFlow) -> int:
    """The most groups of arrivals (values of the outer index) a PE sees, by box."""
    if flow.index_dims < 2:
        return 1
    arrivals = poly.bind_pe(flow.arrivals())
    outer = arrivals.project_out(isl.dim_type.set, flow.index_dims - 1, 1)
    return box_volume(outer)


def _landing(tg: TaskGraph, flow: InputFlow, max_batch: int) -> LocalTensor | str:
    """The landing array's view of the streamed tensor: element ``e`` of the current group
    at ``order(e) - index`` (``index`` the batch's first index); sized for the largest
    batch, its size fixed by :func:`_sized`."""
    order = groupbatch.order_on_pe(flow)
    if isinstance(order, str):
        return order
    inner = order.get_at(flow.index_dims - 1)
    # (the position matters where a PE reads what lands: a column's stream may bring
    # every PE of the column all its rows' blocks, in an order affine on each block)
    read = _read_on_pe(tg, flow)
    on_pe = inner.gist(read.align_params(inner.get_domain_space()))
    made = affine.affine_on(on_pe, read)
    if made is None and affine.affine_on_lattice(on_pe, read):
        # (a residue class of the order, i // 2 on the odd i: its divisions stay, exact,
        # and isl simplifies them away where a copy addresses it over the lattice)
        made = on_pe
    if made is None:
        return "the position of an element in its group is not affine on a PE"
    inner = made.gist(read.align_params(made.get_domain_space()))
    inner = poly.with_params(inner, [poly.INDEX])
    ls = isl.LocalSpace.from_space(inner.get_domain_space())
    start = isl.Aff.var_on_domain(ls, isl.dim_type.param, inner.get_domain_space(
        ).find_dim_by_name(isl.dim_type.param, poly.INDEX))
    position = inner.sub(start)
    name = f"land_{flow.name}"
    ma = isl.MultiAff.from_aff(position).set_tuple_name(isl.dim_type.out, name)
    tensor = tg.model.graph.tensor(flow.tensor)
    box = poly.FixedSizeBox(ma, (max_batch,))
    # (the landing array is addressed through ``to_local_bound`` only: the batch's
    # position, with the PE and ``index`` as parameters, stands for eqs. (8) and (9))
    array = poly.LocalArray(name, flow.reaching().reverse(), box, ma, ma)
    return LocalTensor(flow.tensor, array, tensor.dtype, max_batch * ELEMENT_BYTES[tensor.dtype],
                       False, False)


def _read_on_pe(tg: TaskGraph, flow: InputFlow) -> isl.Set:
    """The elements of ``flow`` reaching a PE (parameters: the PE) that a statement
    placed on it reads; those reaching it where it reads none."""
    reaching = flow.reaching()
    read: isl.Map | None = None
    for pstmt in tg.model.statements:
        if flow.tensor not in dict(pstmt.reads):
            continue
        readers = pstmt.access(flow.tensor).reverse().apply_range(
            tg.placement_of(pstmt.stmt.name))
        read = readers if read is None else read.union(readers)
    if read is not None:
        read = read.intersect(reaching)
    return poly.bind_pe((reaching if read is None or read.is_empty() else read).reverse())


def _sized(land: LocalTensor, size: int) -> LocalTensor:
    box = poly.FixedSizeBox(land.array.box.offset, (size,))
    return replace(land, array=replace(land.array, box=box),
                   bytes=size * ELEMENT_BYTES[land.dtype])


def _batch(tg: TaskGraph, memory: Memory, flow: InputFlow, tasks: tuple[Task, ...],
           window: tuple[isl.PwAff, isl.PwAff, int], size: int, land: LocalTensor, *,
           grow: bool = True) -> Batch | str:
    """Batches of ``size``: each task's instances over the batch's window, one SIMD
    decision each (with the landing array standing for the stream), or why not."""
    first, last, _ = window
    if flow.kind == "sparse":  # windows aligned in the index the wavelets carry
        shift = flow.wire_offset[-1] if flow.wire_offset is not None else None
        context = poly.window_starts(flow.arrival_context(), size, poly.INDEX, COUNT, shift)
    else:
        context = poly.batch_starts(flow.arrival_context(), first, last, size, poly.INDEX,
                                    COUNT)
    context = poly.simplified(context)  # (halo windows: one existential per way an
    # index is reached, which made the SIMD analysis run for minutes)
    land = _sized(land, size)
    view = Memory((land, *memory.arrays))
    batched: list[Task] = []
    decisions: list[tuple[str, SimdDecision]] = []
    for task in tasks:
        assert task.instances is not None and task.statement is not None
        instances = poly.over_window(task.instances, poly.INDEX, COUNT)
        instances, ctx = poly.align_params(instances, context)
        instances = instances.intersect_params(ctx)
        pstmt = tg.model.statement(task.statement)
        d = decide(pstmt, instances, None, view, ctx, varying=(COUNT,))
        if not d.used:
            return f"batches of {size}: no SIMD instruction for {task.name} ({d.reason})"
        if d.extensions and not grow:
            return (f"batches of {size}: {task.name}'s box hull would need larger arrays, "
                    "which would not fit the PE or would grow again")
        batched.append(replace(task, instances=instances, trigger=None))
        decisions.append((task.name, d))
    keep: KeepCopy | None = None
    kept = memory.of(flow.tensor) if flow.tensor in tg.buffered else None
    if kept is not None:
        copy = keep_copy(flow, kept, land, context)
        if isinstance(copy, str):
            return f"batches of {size}: {copy}"
        keep = copy
    return Batch(flow.name, size, land, context, tuple(batched), tuple(decisions), keep=keep)


def keep_copy(flow: InputFlow, kept: LocalTensor, land: LocalTensor, context: isl.Set, *,
              free: tuple[str, ...] | None = None, window: tuple[str, int] | None = None
              ) -> KeepCopy | str:
    """The copy of a batch's kept elements into ``kept``'s array: the elements arriving
    at the PE in the batch's window (``free``: for any value of these index parameters,
    a batch of whole groups; ``window``: and for the values of that parameter from its
    value on, that many) that the PE needs, as one box."""
    reaching = poly.bind_pe(flow.reaching().reverse())
    order = flow.order.intersect_domain(reaching.align_params(flow.order.get_space()))
    at_index = order.bind_range(poly.multi_id(order.get_space().range(),
                                              poly.index_names(flow.index_dims)))
    needed = poly.bind_pe(kept.array.per_pe)
    at_index, needed = poly.align_params(at_index, needed)
    elements = at_index.intersect(needed)
    if window is not None:
        elements = poly.over_values(elements, *window)
    elements = poly.over_window(elements, poly.INDEX, COUNT) if \
        free is None else poly.project_out_params(elements, free)
    elements, ctx = poly.align_params(elements, context)
    elements = elements.intersect_params(ctx).coalesce()
    varying = (*poly.index_params(elements), *((COUNT,) if free is None else ()))
    rect = poly.within_effort(KEEP_EFFORT, lambda: poly.rectangularity(elements,
                                                                      index=varying))
    if (rect is None or not rect.dense) and free is None and window is None:
        run = _linear_keep(flow, kept, land, context)
        if run is not None:
            return run
    if rect is None:  # (quasi-affine orders over linearized indices can make isl explode)
        return "the kept elements of a batch are too intricate for isl to analyze quickly"
    moved = at_index.intersect(needed)  # (what the copies move, over every batch)
    if not rect.dense and free is not None:
        # (a stencil's PE needs a cross of the rows a batch of whole groups brings, not a
        # box: copy the box of them in its local array, the corners too, true values of
        # the tensor that nothing reads)
        boxed = _kept_box(at_index, kept, free, window, ctx)
        if boxed is not None:
            elements, rect, moved = boxed
    # (copied from where they are: the identity; or, for a strided box, from the
    # coordinates of its lattice, the elements a cyclic placement gives a PE)
    access = isl.Map.identity(isl.Space.map_from_set(elements.get_space()))
    if not rect.dense:
        strided = _strided(elements, varying)
        if strided is None:
            return "the kept elements of a batch are not a box"
        access, rect = strided
    variants: tuple[tuple[int, ...], ...] = ()
    variant: IExpr | None = None
    length: IExpr | None = None
    size = rect.constant_size
    if size is None:  # a box of a few sizes: one variant each
        sizes = rect.sizes.project_out_all_params().coalesce()
        found = poly.within_effort(KEEP_EFFORT, lambda: poly.points(
            sizes, limit=MAX_SIZE_POINTS))
        if found and len(found) <= MAX_KEEP_VARIANTS:
            variants = tuple(sorted(found))
            size = tuple(max(v[d] for v in variants) for d in range(len(variants[0])))
            varied = [d for d in range(len(size)) if len({v[d] for v in variants}) > 1]
            per_pe = _variants_per_pe(rect.sizes, variants)
            if per_pe > 1 and len(varied) == 1 and cut_dimension(size) == varied[0]:
                d = varied[0]  # one configuration, cut to the batch's extent there
                length = normalize(IBin("+", IBin("-", pw_aff_expr(rect.maximum.get_at(d),
                                                                   ctx),
                                                  pw_aff_expr(rect.minimum.get_at(d), ctx)),
                                        IConst(1)))
                variants = ()
            else:  # (one size per PE: selected by the PE alone, each PE sets up its own)
                variant = _variant_selector(rect.sizes, variants, ctx, by_pe=per_pe == 1)
        else:  # (sizes by the PE in all but the cut dimension, cut to the batch's there)
            cut = _cut_variants(rect, ctx)
            if cut is None:
                return (f"the kept elements of a batch are boxes of more than "
                        f"{MAX_KEEP_VARIANTS} sizes")
            size, variants, variant, length = cut
    if not 0 < len(size) <= MAX_SIMD_DIMS:
        return "the kept elements of a batch have too many dimensions for SIMD"
    operands = []
    for local in (kept, land):
        linear = linear_access(access, local.to_local_bound, local.size, rect.minimum, ctx)
        if isinstance(linear, str):
            return f"the kept elements' position in '{local.name}' {linear}"
        operands.append(linear)
    (dst_strides, _, dst_base), (src_strides, _, src_base) = operands
    per_run = _per_run(moved, elements) if window is not None and length is not None else None
    return KeepCopy(size, elements, dst_strides, dst_base, src_strides, src_base,
                    variants, variant, length, per_run)


def _linear_keep(flow: InputFlow, kept: LocalTensor, land: LocalTensor, context: isl.Set
                 ) -> KeepCopy | None:
    """Where the elements a PE keeps of each group arrive at consecutive positions and
    lie in its local array at addresses affine in the position (an image streamed
    row-major as one sequence, a PE keeping whole rows of it: not a box of the batch's
    elements, but one run of the array): the batch's part of them as one SIMD copy cut
    to its length; None otherwise."""
    if flow.kind != "dense":
        return None
    names = poly.index_names(flow.index_dims)
    needed = poly.bind_pe(kept.array.per_pe)
    order, needed = poly.align_params(flow.order, needed)
    back = order.intersect_domain(needed).reverse()  # index[...] -> its kept element
    if back.is_empty() or not back.is_single_valued():
        return None
    flat = flatten(kept.to_local_bound, kept.size)
    flat, back = poly.align_params(flat, back)
    address = back.apply_range(isl.Map.from_aff(flat)).wrap().flatten()  # [index..., a]
    address = poly.bind_leading(address, names[:-1])  # [position, address]
    by_position = isl.Map.from_range(address).move_dims(isl.dim_type.in_, 0,
                                                        isl.dim_type.out, 0, 1)
    function = by_position.as_pw_multi_aff()
    if function.n_piece() != 1:
        return None
    pieces: list[isl.Aff] = []
    function.foreach_piece(lambda _s, ma: pieces.append(ma.get_at(0)))
    aff = pieces[0]
    if any(aff.get_div(d).involves_dims(isl.dim_type.in_, 0, 1)
           for d in range(aff.dim(isl.dim_type.div))):
        return None
    stride = aff.get_coefficient_val(isl.dim_type.in_, 0)
    if not stride.is_int() or stride.is_zero():
        return None
    at_zero = isl.PwAff.from_aff(aff.set_coefficient_val(
        isl.dim_type.in_, 0, isl.Val.zero(aff.get_ctx())).drop_dims(isl.dim_type.in_, 0, 1)
        ).project_domain_on_params()
    positions = by_position.domain()
    rect = poly.within_effort(KEEP_EFFORT, lambda: poly.rectangularity(positions))
    if rect is None or not rect.dense:
        return None  # (holes: not one run of consecutive positions)
    lo, hi = rect.minimum.get_at(0), rect.maximum.get_at(0)
    index, count = IVar(poly.INDEX), IVar(COUNT)
    first = normalize(IBin("max", pw_aff_expr(lo, context), index))
    last = normalize(IBin("min", pw_aff_expr(hi, context),
                          IBin("-", IBin("+", index, count), IConst(1))))
    step = int(stride.to_python())
    dst = normalize(IBin("+", IBin("*", IConst(step), first), pw_aff_expr(at_zero, context)))
    src = normalize(IBin("-", first, index))
    length = normalize(IBin("+", IBin("-", last, first), IConst(1)))
    # (the batch's part, over the PE and the batch: whether it has any, on what share)
    batch = poly.with_params(positions, [poly.INDEX, COUNT])
    ls = isl.LocalSpace.from_space(batch.get_space())
    at = isl.Aff.var_on_domain(ls, isl.dim_type.set, 0)
    start = isl.Aff.var_on_domain(ls, isl.dim_type.param, batch.get_space().find_dim_by_name(
        isl.dim_type.param, poly.INDEX))
    width = isl.Aff.var_on_domain(ls, isl.dim_type.param, batch.get_space().find_dim_by_name(
        isl.dim_type.param, COUNT))
    batch = batch.intersect(at.ge_set(start)).intersect(at.lt_set(start.add(width)))
    batch, ctx = poly.align_params(batch, context)
    batch = batch.intersect_params(ctx).coalesce()
    return KeepCopy((land.size[0],), batch, (step,), dst, (1,), src, length=length)


def _strided(elements: isl.Set, varying: tuple[str, ...]
             ) -> tuple[isl.Map, poly.Rectangularity] | None:
    """Where ``elements`` are a box of a lattice (every k-th element along some
    dimension, as a cyclic placement keeps them): the map from its compressed
    coordinates to the elements and their rectangularity; None otherwise."""
    comp = poly.within_effort(KEEP_EFFORT, lambda: poly.compress(elements))
    if comp is None or comp.dim == 0:
        return None
    rect = poly.within_effort(KEEP_EFFORT, lambda: poly.rectangularity(
        comp.compressed, index=varying))
    if rect is None or not rect.dense:
        return None
    return comp.as_map(), rect


def _kept_box(at_index: isl.Set, kept: LocalTensor, free: tuple[str, ...],
              window: tuple[str, int] | None, context: isl.Set
              ) -> tuple[isl.Set, poly.Rectangularity, isl.Set] | None:
    """The elements a batch of whole groups brings that lie in the PE's local array of
    the kept tensor (its box hull), and their rectangularity, where that is a box; also
    those elements over every batch (over the PE and the arriving index)."""
    in_box = poly.bind_pe(poly.box_map(kept.array.box))
    at_index, in_box = poly.align_params(at_index, in_box)
    moved = elements = at_index.intersect(in_box)
    if window is not None:
        elements = poly.over_values(elements, *window)
    elements = poly.project_out_params(elements, free)
    elements, context = poly.align_params(elements, context)
    elements = elements.intersect_params(context).coalesce()
    rect = poly.within_effort(KEEP_EFFORT, lambda: poly.rectangularity(
        elements, index=poly.index_params(elements)))
    return None if rect is None or not rect.dense else (elements, rect, moved)


def _per_run(kept: isl.Set, per_batch: isl.Set) -> int | None:
    """The elements a PE keeps (``kept``: over the PE and the arriving index) over the
    copies of their batches (``per_batch``: over the PE and the batch), on the PE with
    the most copies; None where they are too many to count."""
    whole = poly.project_out_params(kept, poly.index_params(kept))
    rect = poly.rectangularity(whole, index=())
    sizes = rect.sizes.project_out_all_params()
    where = isl.Set.from_params(per_batch.params())
    where = where.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0,
                            int(where.dim(isl.dim_type.param)))
    try:
        largest = max((prod(v) for v in poly.points(sizes, limit=MAX_SIZE_POINTS)),
                      default=0)
        listed = poly.points(where, limit=1 << 14)
    except poly.TooManyPointsError:
        return None
    names = [per_batch.get_space().get_dim_name(isl.dim_type.param, k)
             for k in range(int(per_batch.dim(isl.dim_type.param)))]
    at = [names.index(n) for n in poly.PE_NAMES if n in names]
    runs: dict[tuple[int, ...], int] = {}
    for point in listed:
        pe = tuple(point[k] for k in at)
        runs[pe] = runs.get(pe, 0) + 1
    most = max(runs.values(), default=0)
    return ceil(largest / most) if most else None


def _cut_variants(rect: poly.Rectangularity, context: isl.Set
                  ) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...], IExpr, IExpr] | None:
    """Boxes of many sizes that differ, between batches on a PE, only in the dimension a
    length cuts (:func:`cut_dimension`): one variant per size of the other dimensions,
    each PE's selected by the PE alone, cut to the batch's extent there (the largest
    size, the variants, the selector, the length); None if the sizes are otherwise."""
    n = int(rect.sizes.dim(isl.dim_type.set))
    all_sizes = rect.sizes.project_out_all_params()
    size = tuple(poly.constant_value(all_sizes.dim_max(d)) for d in range(n))
    if any(v is None for v in size):
        return None
    largest = tuple(v or 0 for v in size)
    d = cut_dimension(largest)
    others = rect.sizes.project_out(isl.dim_type.set, d, 1)
    found = poly.within_effort(KEEP_EFFORT, lambda: poly.points(
        others.project_out_all_params().coalesce(), limit=MAX_SIZE_POINTS))
    if not found or len(found) > MAX_KEEP_VARIANTS:
        return None
    rest = tuple(sorted(found))
    if _variants_per_pe(others, rest) != 1:
        return None
    variants = tuple((*v[:d], largest[d], *v[d:]) for v in rest)
    variant = _variant_selector(others, rest, context, by_pe=True)
    length = normalize(IBin("+", IBin("-", pw_aff_expr(rect.maximum.get_at(d), context),
                                      pw_aff_expr(rect.minimum.get_at(d), context)),
                            IConst(1)))
    return largest, variants, variant, length


def _variants_per_pe(sizes: isl.Set, variants: tuple[tuple[int, ...], ...]) -> int:
    """The most of ``variants`` one PE sets up (each PE configures only the sizes it
    uses: where that is one, variants cost no more configurations than a length)."""
    return poly.most_overlapping([
        poly.project_onto_pe(sizes.intersect(_size_point(sizes.get_space(), v)).params())
        for v in variants])


def _size_point(space: isl.Space, values: tuple[int, ...]) -> isl.Set:
    point = isl.Set.universe(space)
    for d, v in enumerate(values):
        point = point.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(space.get_ctx(), v))
    return point


def _variant_selector(sizes: isl.Set, variants: tuple[tuple[int, ...], ...],
                      context: isl.Set, *, by_pe: bool = False) -> IExpr:
    """The index in ``variants`` of the size ``sizes`` (size vectors per parameter value)
    gives, as a chain of selects on the parameters; ``by_pe``: on the PE coordinates
    alone (where each PE has one size)."""
    chosen: IExpr = IConst(len(variants) - 1)
    space = sizes.get_space()
    for k in range(len(variants) - 2, -1, -1):
        where = sizes.intersect(_size_point(space, variants[k])).params()
        within = context.intersect(sizes.params())
        if by_pe:
            where, within = poly.project_onto_pe(where), poly.project_onto_pe(within)
        cond = condition_of(where, within)
        chosen = ISel(cond if cond is not None else BConst(True), IConst(k), chosen)
    return normalize(chosen)


def _work_names(d: SimdDecision, tg: TaskGraph, task: Task, memory: Memory) -> set[str]:
    """The names a task's per-wavelet work reads: its SIMD bases and variant, or its
    scalar code (guard included)."""
    if d.used and d.sizes is not None:
        exprs = [o.base for o in (d.dst, *d.srcs) if o is not None and o.base is not None]
        exprs += [e for e in (d.variant, d.length) if e is not None]
        return {n for e in exprs for n in iexpr_names(e)}
    flow = tg.flow_of(task)
    assert task.statement is not None and task.instances is not None and flow is not None
    code = scalar_code(tg.model.statement(task.statement), task.instances, task.trigger,
                       flow.arrival_context(), memory, tg.compute.context())
    return stmt_names(code)


def _run_cost(d: SimdDecision, tg: TaskGraph, task: Task, *, count: int = 1,
              varying: frozenset[str] | None = None, env: dict[str, IExpr] | None = None,
              memory: Memory | None = None) -> int:
    """Predicted cycles of a task's work per invocation: its SIMD instructions, or scalar
    loops over ``count`` arrivals' instances (with ``memory``, for one arrival, the
    statements the emitter writes)."""
    assert task.statement is not None and task.instances is not None
    pstmt = tg.model.statement(task.statement)
    stmt = pstmt.stmt
    if d.used and d.sizes is not None:
        flow = tg.flow_of(task)
        runs = None if d.outer is None or flow is None or count != 1 or varying is None \
            else mean_runs(d.outer, flow)
        return simd_cycles(d, tg.model.graph.tensor(stmt.target.tensor).dtype,
                           varying=varying, env=env, outer_runs=runs)
    code = None
    flow = tg.flow_of(task)
    if memory is not None and count == 1 and flow is not None:
        code = scalar_code(pstmt, task.instances, task.trigger, flow.arrival_context(),
                           memory, tg.compute.context())
        if env:
            code = substitute_stmts(code, env)
        if len(code) == 1 and isinstance(code[0], If) and not code[0].orelse:
            code = code[0].then  # (the guard on the arrival is _trigger_share's)
    return scalar_cycles(stmt, task.instances, task.trigger, count=count, code=code,
                         varying=varying)
