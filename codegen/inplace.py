"""Updates in place: a statement ``D[x] = S[x] + u[x] * v[x] + ...`` whose input ``S``
no other statement reads computes in ``S``'s local array.

LAIR is single assignment, so an update that C writes in place (PolyBench gemver's
``A[i][j] = A[i][j] + u1[i] * v1[j] + ...``) becomes a new tensor, and its SIMD steps
start with a copy of ``S`` into ``D`` (codegen.simd ``op_steps``: the copy, then one
multiply-add per product). Where ``S`` is a resident input that only this statement
reads, at the element it writes, and both tensors have local arrays of the same shape
and offset on every PE, ``D`` can live in ``S``'s array: the copy is the identity and
is dropped, and the PE holds one array instead of two. Each condition is checked with
isl before anything changes; the data-flow check then reads the plan as usual.

A statement a stream triggers (``z[i] = alpha * x[i] + y[i]``, ``x`` streamed) uses SIMD
only in its batches, so its update is found among the batches' decisions once they are
planned (:func:`in_place_batches`): one multiply-add per batch into ``y``'s array where
there were a multiplication and an addition (``a * b + s`` is taken as ``s + a * b``,
the same single rounded addition), and the chosen way's prediction drops the copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import islpy as isl

from dtg.codegen.batching import ArrivalPlan, Batch, Candidate
from dtg.codegen.cost import simd_cycles
from dtg.codegen.simd import Operand, SimdDecision
from dtg.mapping import poly
from dtg.mapping.flows import Task, TaskGraph
from dtg.mapping.memory import LocalTensor, Memory


@dataclass(frozen=True)
class InPlace:
    """Tensor ``dst`` computed in the array of ``src`` by task ``task``."""

    task: str
    dst: str
    src: str


def plan_in_place(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision]
                  ) -> tuple[InPlace, ...]:
    """The updates that can run in place (each source used once)."""
    found: list[InPlace] = []
    for task in tg.tasks:
        if task.kind != "compute" or task.statement is None:
            continue
        d = decisions.get(task.name)
        update = _update(tg, memory, task.statement, d)
        if update is not None and all(u.src != update[1] for u in found):
            found.append(InPlace(task.name, *update))
    return tuple(found)


def apply_in_place(memory: Memory, decisions: dict[str, SimdDecision],
                   updates: tuple[InPlace, ...]) -> tuple[Memory, dict[str, SimdDecision]]:
    """``D``'s local array renamed to ``S``'s, every operand of ``D`` with it, and the
    copy dropped from each update's steps."""
    if not updates:
        return memory, decisions
    memory, rename = _moved(memory, updates)
    result = {name: _renamed(d, rename) for name, d in decisions.items()}
    for u in updates:
        result[u.task] = _without_copy(result[u.task], u)
    return memory, result


def _moved(memory: Memory, updates: Sequence[InPlace]) -> tuple[Memory, dict[str, str]]:
    """Each update's ``D`` in ``S``'s local array, and the renaming of arrays that does it."""
    rename: dict[str, str] = {}
    arrays = list(memory.arrays)
    for u in updates:
        src = memory.of(u.src)
        assert src is not None
        for k, local in enumerate(arrays):
            if local.tensor == u.dst:
                arrays[k] = replace(local, array=replace(local.array, name=src.name))
        rename[u.dst] = src.name
    return Memory(tuple(arrays)), rename


def _without_copy(d: SimdDecision, u: InPlace) -> SimdDecision:
    """``d`` without its first step, the copy of ``S`` into ``D`` that is now the identity."""
    (op, dst, srcs, scalar), *rest = d.more
    return replace(d, op=op, dst=dst, srcs=srcs, scalar=scalar, more=tuple(rest),
                   reason=d.reason + f"; in place in {u.src}'s array",
                   permuted=None if d.permuted is None else _without_copy(d.permuted, u))


def _update(tg: TaskGraph, memory: Memory, statement: str, d: SimdDecision | None
            ) -> tuple[str, str] | None:
    """(D, S) where the statement's first SIMD step copies resident input S into D in
    place of an update, or None."""
    if d is None or not d.used or d.op != "copy" or not d.more or d.extensions \
            or d.case == "box_hull" or d.dst is None or len(d.srcs) != 1:
        return None
    copy_dst, copy_src = d.dst, d.srcs[0]
    if copy_dst.kind != "array" or copy_src.kind != "array" or copy_dst.tensor is None \
            or copy_src.tensor is None:
        return None
    dst, src = copy_dst.tensor, copy_src.tensor
    if any(src == o.tensor for _, _, srcs, _ in d.more for o in srcs):
        return None  # (a later step reads S, which D overwrites)
    graph = tg.model.graph
    if graph.tensor(src).role != "input" or any(f.tensor in (src, dst) for f in tg.inputs) \
            or tg.output_flow(dst) is not None or tg.output_flow(src) is not None:
        return None
    moved = {e.tensor for e in tg.exchanges} | {r.tensor for r in (*tg.reductions,
                                                                    *tg.combines)}
    if src in moved or dst in moved:
        return None
    readers = [s for s in tg.model.statements if any(t == src for t, _ in s.reads)]
    writers = [s for s in tg.model.statements if s.stmt.target.tensor == dst]
    if [s.name for s in readers] != [statement] or [s.name for s in writers] != [statement]:
        return None
    if sum(1 for t in tg.tasks if t.statement == statement) != 1:
        return None
    pstmt = tg.model.statement(statement)
    if pstmt.stmt.op != "=" or not _same(pstmt.write, pstmt.access(src)):
        return None
    local_src, local_dst = memory.of(src), memory.of(dst)
    if local_src is None or local_dst is None or not _same_layout(local_src, local_dst):
        return None
    if copy_dst.strides != copy_src.strides or copy_dst.base_isl is None \
            or copy_src.base_isl is None or not _same(copy_dst.base_isl, copy_src.base_isl):
        return None
    return dst, src


def _same_layout(a: LocalTensor, b: LocalTensor) -> bool:
    return a.dtype == b.dtype and a.size == b.size and a.resident_input \
        and not a.resident_output and _same(a.offset_aff(), b.offset_aff()) \
        and _same(a.pes, b.pes)


def _same(a: Any, b: Any) -> bool:
    """Equal isl objects (sets, maps, piecewise or multi affine functions) by meaning,
    parameters aligned and the names of the tensors they point into ignored."""
    x, y = poly.align_params(a, b)
    if isinstance(x, isl.MultiAff):
        x, y = (isl.MultiPwAff.from_multi_aff(m.reset_tuple_id(isl.dim_type.out))
                for m in (x, y))
    elif isinstance(x, isl.Map):
        x, y = (m.reset_tuple_id(isl.dim_type.out) for m in (x, y))
    return bool(x.is_equal(y))


def _renamed(d: SimdDecision, rename: dict[str, str]) -> SimdDecision:
    """``d`` with the operands of renamed tensors in their new arrays."""
    if not d.used or not rename:
        return d

    def op(o: Operand) -> Operand:
        if o.tensor not in rename:
            return o
        return replace(o, array=rename[o.tensor])

    more = tuple((name, op(dst), tuple(op(s) for s in srcs), scalar)
                 for name, dst, srcs, scalar in d.more)
    return replace(d, dst=None if d.dst is None else op(d.dst),
                   srcs=tuple(op(s) for s in d.srcs), more=more,
                   permuted=None if d.permuted is None else _renamed(d.permuted, rename))


def in_place_batches(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision],
                     arrivals: ArrivalPlan) -> tuple[Memory, dict[str, SimdDecision],
                                                     ArrivalPlan]:
    """The same for statements a stream's batches run (``y = alpha * x + s`` with ``x``
    streamed): their per-wavelet decisions use no SIMD, the batches' do; the plan with
    ``D`` in ``S``'s array and each such batch decision without its copy."""
    found: list[InPlace] = []
    for batch in arrivals.batches:
        for name, d in batch.decisions:
            task = batch.task(name)
            if task.statement is None:
                continue
            update = _update(tg, memory, task.statement, d)
            if update is not None and all(u.src != update[1] and u.dst != update[0]
                                          for u in found):
                found.append(InPlace(task.name, *update))
    if not found:
        return memory, decisions, arrivals
    memory, rename = _moved(memory, found)
    renamed = {name: _renamed(d, rename) for name, d in decisions.items()}
    batches: list[Batch] = []
    saved: dict[str, int] = {}
    for batch in arrivals.batches:
        made = []
        for name, d in batch.decisions:
            d = _renamed(d, rename)
            done = next((u for u in found if u.task == name), None)
            if done is not None:
                was, d = d, _without_copy(d, done)
                dtype = tg.model.graph.tensor(_target(tg, batch.task(name))).dtype
                saved[batch.flow] = saved.get(batch.flow, 0) + simd_cycles(
                    was, dtype) - simd_cycles(d, dtype)
            made.append((name, d))
        batches.append(replace(batch, decisions=tuple(made)))
    # (the chosen way's prediction without the copies: what the batches now run)
    chosen = {b.flow: b.way for b in batches}
    candidates = tuple((flow, tuple(_less(c, saved.get(flow, 0)) if c.way == chosen.get(flow)
                                    else c for c in cands))
                       for flow, cands in arrivals.candidates)
    return memory, renamed, replace(arrivals, batches=tuple(batches), candidates=candidates)


def _target(tg: TaskGraph, task: Task) -> str:
    assert task.statement is not None
    return tg.model.statement(task.statement).stmt.target.tensor


def _less(c: Candidate, cycles: int) -> Candidate:
    """``c`` predicted ``cycles`` per batch cheaper."""
    if not cycles or c.runs is None or c.busy is None or c.cycles is None:
        return c
    return replace(c, busy=c.busy - cycles * c.runs, cycles=c.cycles - cycles * c.runs,
                   note=c.note + f" (less {cycles} per batch: updated in place)")
