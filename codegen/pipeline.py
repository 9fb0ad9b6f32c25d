"""The compiler's stages in order, each a pure function of the previous ones."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from math import prod

import islpy as isl

from dtg.codegen.batching import ArrivalPlan, Batch, plan_arrivals
from dtg.codegen.colors import colors_used, share_colors
from dtg.codegen.configure import configurations_per_pe
from dtg.codegen.cost import box_volume, costs, fabric_costs, scalar_cycles, simd_cycles, simd_setup
from dtg.codegen.dataflow import check_data_flow
from dtg.codegen.emit import emit
from dtg.codegen.inplace import apply_in_place, in_place_batches, plan_in_place
from dtg.codegen.simd import (
    Extension,
    SimdDecision,
    decide,
    no_simd,
    temporaries_enabled,
    without_temporaries,
)
from dtg.errors import CodegenError, CompilerBug, DtgError, UnsupportedMappingError
from dtg.lair.frontend import Program
from dtg.mapping import inputs as input_plan
from dtg.mapping import poly
from dtg.mapping.flows import Task, out_of_colors
from dtg.mapping.memory import Memory, allocate, check_fits
from dtg.mapping.padding import padding_enabled, without_padding
from dtg.mapping.tasks import TaskGraph, build_task_graph
from dtg.mapping.validate import Mapping
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import LOCAL_MEMORY_BYTES, MAX_SIMD_CONFIGS, PeModule

STAGES = ("ast", "isl", "mapping", "tasks", "memory", "simd", "code")


@dataclass(frozen=True)
class Compilation:
    """Everything the compiler derived, up to the stage it was asked to stop at."""

    program: Program
    mapping: Mapping
    tasks: TaskGraph | None = None
    memory: Memory | None = None
    decisions: dict[str, SimdDecision] | None = None
    module: PeModule | None = None
    simd: bool = True
    seconds: float = 0.0
    arrivals: ArrivalPlan | None = None
    fabric: FabricConfig = field(default_factory=FabricConfig)  # whose costs chose


def simd_decisions(tg: TaskGraph, memory: Memory, *, simd: bool = True,
                   memory_bytes: int = LOCAL_MEMORY_BYTES
                   ) -> tuple[dict[str, SimdDecision], Memory]:
    """The SIMD decision of every compute task (paper §5), and the local memory grown for
    the extra instances of box-hull approximations (§5.3). When the grown arrays would
    not fit the PE, the box hull is given up for the task that grew them most (it runs
    scalar or with another SIMD case), and every decision is made again."""
    banned: set[str] = set()
    while True:
        decisions, grown, growth = _decide_all(tg, memory, simd=simd, banned=banned)
        if sum(a.bytes for a in grown.arrays) <= memory_bytes or not growth:
            return decisions, grown
        worst = max(growth, key=lambda name: (growth[name], name))
        banned.add(worst)


def _decide_all(tg: TaskGraph, memory: Memory, *, simd: bool, banned: set[str]
                ) -> tuple[dict[str, SimdDecision], Memory, dict[str, int]]:
    """Decide every task, growing the arrays until the extra instances fit; also how
    many elements each task's extra instances added."""
    growth: dict[str, int] = {}
    for _ in range(4):
        decisions = {}
        for task in tg.tasks:
            if task.kind != "compute" or task.statement is None or task.instances is None:
                continue
            if not simd:
                decisions[task.name] = no_simd("SIMD generation is off (--no-simd)")
                continue
            flow = tg.flow_of(task)
            context = flow.arrival_context() if flow else tg.compute.context()
            pstmt = tg.model.statement(task.statement)
            d = decide(pstmt, task.instances, task.trigger, memory, context,
                       box_hull=task.name not in banned,
                       rank=_ranking(tg.model.graph.tensor(pstmt.stmt.target.tensor).dtype))
            decisions[task.name] = _cheaper(tg, task, d)
        for name, d in decisions.items():
            for ext in d.extensions:
                growth[name] = growth.get(name, 0) + prod(ext.size)
        grown = _grow(memory, [e for d in decisions.values() for e in d.extensions])
        if grown is memory:
            return decisions, memory, growth
        memory = grown
    raise CompilerBug("growing local arrays for extra instances did not settle")


def _ranking(dtype: str) -> Callable[[SimdDecision], int]:
    """Predicted cycles of a decision on a PE, its configurations included (to choose
    between the bases a task's instances can be scanned along)."""
    def rank(d: SimdDecision) -> int:
        return simd_cycles(d, dtype) + simd_setup(d)
    return rank


def _cheaper(tg: TaskGraph, task: Task, d: SimdDecision) -> SimdDecision:
    """The SIMD decision, or scalar loops where they are predicted faster on a PE (its
    configuration included): SIMD is never chosen to be slower than scalar code."""
    if not d.used:
        return d
    assert task.statement is not None and task.instances is not None
    stmt = tg.model.statement(task.statement).stmt
    flow = tg.flow_of(task)
    runs = box_volume(poly.bind_pe(flow.arrivals())) if flow is not None else 1
    simd = runs * simd_cycles(d, tg.model.graph.tensor(stmt.target.tensor).dtype) + \
        simd_setup(d)
    scalar = runs * scalar_cycles(stmt, task.instances, task.trigger)
    predicted = (("simd", simd), ("scalar", scalar))
    if simd <= scalar:
        return replace(d, predicted=predicted)
    return replace(no_simd(f"scalar loops are predicted faster ({scalar} cycles per PE "
                           f"against {simd} with SIMD: {d.reason})"), case=d.case, op=d.op,
                   predicted=predicted)


def _plan_batches(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision], *,
                  arrival: str, memory_bytes: int = LOCAL_MEMORY_BYTES
                  ) -> tuple[ArrivalPlan, dict[str, SimdDecision], Memory]:
    """The arrival plan, with the local arrays grown once for the extra instances of
    batches' box hulls (every decision is then made again on the grown arrays); where
    the grown arrays would not fit the PE, or the new decisions would grow them again,
    batches whose box hulls need larger arrays are not considered."""
    planned = plan_arrivals(tg, memory, decisions, arrival=arrival, memory_bytes=memory_bytes)
    grown = _grow(memory, planned.extensions())
    if grown is memory:
        return planned, decisions, memory
    if sum(a.bytes for a in grown.arrays) <= memory_bytes:
        # once: the decisions on the grown arrays need no more room, or batches do without
        decisions_grown, memory_grown = simd_decisions(tg, grown)
        again = plan_arrivals(tg, memory_grown, decisions_grown, arrival=arrival,
                              memory_bytes=memory_bytes)
        if not again.extensions():
            return again, decisions_grown, memory_grown
    return plan_arrivals(tg, memory, decisions, arrival=arrival, grow=False,
                         memory_bytes=memory_bytes), decisions, memory


def _grow(memory: Memory, extensions: list[Extension]) -> Memory:
    """Apply the extensions; several for one tensor take the box that holds them all."""
    by_tensor: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for ext in extensions:
        lo, hi = ext.shift, tuple(s + n for s, n in zip(ext.shift, ext.size, strict=True))
        if ext.tensor in by_tensor:
            plo, phi = by_tensor[ext.tensor]
            lo = tuple(map(min, lo, plo))
            hi = tuple(map(max, hi, phi))
        by_tensor[ext.tensor] = (lo, hi)
    for tensor, (lo, hi) in by_tensor.items():
        memory = memory.grown(tensor, tuple(h - low for h, low in zip(hi, lo, strict=True)), lo)
    return memory


def _fit_configurations(tg: TaskGraph, memory: Memory, decisions: dict[str, SimdDecision], *,
                        simd: bool, name: str, reference: str | None,
                        params: Sequence[tuple[str, int | str]],
                        max_configs: int = MAX_SIMD_CONFIGS,
                        arrivals: ArrivalPlan | None = None,
                        given_up: frozenset[str] = frozenset()
                        ) -> tuple[PeModule, dict[str, SimdDecision], ArrivalPlan]:
    """Emit the module within the SIMD configurations a PE has (§5.4): while a program
    needs more, share configurations between instructions that differ only in their
    arrays, then give up SIMD where it helps least, by the cost model: the initial
    fills, batches of arrivals, SIMD for compute tasks or for the output tasks, the
    least predicted saving per configuration first; each compute task records why.
    ``given_up`` starts the uses given up (``halo:T``: the exchanges of ``T`` by turns)."""
    fill, scalar_outputs = True, given_up
    arrivals = arrivals or ArrivalPlan()
    tensors = [t.name for t in tg.model.graph.tensors]
    while True:
        halos: dict[str, tuple[int, float]] = {}
        module = emit(tg, memory, decisions, name=name, reference=reference, params=params,
                      simd=simd, simd_fill=fill, scalar_outputs=scalar_outputs,
                      arrivals=arrivals, choices=halos)
        if max((configurations_per_pe(p) for p in module.programs), default=0) <= max_configs:
            return module, decisions, arrivals
        # First, instructions that differ only in their arrays share a configuration:
        # the same work, a scalar operation per array a run binds. (Not where the budget
        # does not bind: a bound run in a task that runs per wavelet could cost more than
        # the configuration.) What else to give up is weighed on the module without
        # sharing, where each configuration is one use's: giving it up frees it.
        shared = emit(tg, memory, decisions, name=name, reference=reference, params=params,
                      simd=simd, simd_fill=fill, scalar_outputs=scalar_outputs,
                      arrivals=arrivals, share=True)
        needed = max((configurations_per_pe(p) for p in shared.programs), default=0)
        if needed <= max_configs:
            return shared, decisions, arrivals
        # Then, size variants differing in one dimension become one configuration cut
        # to a run-time length (that dimension scanned outermost where it is not already,
        # codegen.scanorder): the same work, fewer configurations.
        cuttable = [t for t, d in decisions.items() if d.cuttable]
        cut_batches = arrivals.cut_to_length()
        if cuttable or cut_batches is not None:
            decisions = {**decisions, **{t: decisions[t].cut_to_length() for t in cuttable}}
            arrivals = cut_batches or arrivals
            continue
        # What each remaining use of SIMD saves per configuration, by the cost model: give
        # up the least saving first, as many at once as the excess needs (one emission per
        # round, not one per task: a chain of 100 statements would emit 100 times).
        options: list[tuple[float, str, int]] = [
            (_saving(d) / max(1, d.configs), task, d.configs)
            for task, d in decisions.items() if d.used]
        for group, (configs, saving) in _output_saving(module, tensors,
                                                       _indexed_exchange(tg)).items():
            if group not in scalar_outputs:
                options.append((saving / configs, group, configs))
        for halo, (freed, loss) in halos.items():  # (a halo for the block turns)
            options.append((max(loss, 0.0) / freed, halo, freed))
        if fill:
            configs, saving = _fill_saving(module)
            if configs:
                options.append((saving / configs, "fill:", configs))
        for batch in arrivals.batches:
            extra = _batch_configs(batch) - sum(
                decisions[t.name].configs for t in batch.tasks if t.name in decisions)
            if extra > 0:
                options.append((batch.gain / extra, f"batch:{batch.flow}", extra))
        if not options:
            raise UnsupportedMappingError(
                f"the compute PEs need {needed} SIMD configurations, more than the "
                f"{max_configs} a PE has, even with SIMD given up where it helps least; "
                "compile with --no-simd", subject="placement")
        excess = needed - max_configs
        chosen = _least_loss(options, excess)
        for _, task, configs in chosen:
            if ":" in task:  # a batch, the fills, or a tensor's outputs: emit again first
                if excess == needed - max_configs:
                    halo = f"halo:{task.removeprefix('exchange:')}"
                    if task.startswith("exchange:") and halo not in scalar_outputs and \
                            halo.removeprefix("halo:") in _halo_tensors(module, tensors):
                        # (a halo's parts given up first for the block turns, which
                        # take fewer configurations, before the indexed protocol)
                        scalar_outputs = scalar_outputs | {halo}
                    elif task.startswith("batch:"):
                        arrivals = arrivals.without(task.removeprefix("batch:"))
                    elif task == "fill:":
                        fill = False
                    else:
                        scalar_outputs = scalar_outputs | {task}
                break
            d = decisions[task]
            decisions = {**decisions, task: replace(
                d, used=False, reason=f"the PE would need {needed} SIMD configurations, "
                f"more than the {max_configs} it has; SIMD was possible: {d.reason}")}
            excess -= configs
            if excess <= 0:
                break


MAX_EXACT_CHOICE = 12  # uses of SIMD weighed together; beyond, the greedy choice


def _least_loss(options: list[tuple[float, str, int]], excess: int
                ) -> list[tuple[float, str, int]]:
    """Which uses of SIMD to give up (``(saving per configuration, name, configurations)``)
    so that at least ``excess`` configurations are freed at the least predicted loss:
    every combination of the few most worth considering, else the least saving per
    configuration first. Those that must be emitted again come first."""
    ordered = sorted(options)
    if len(ordered) <= MAX_EXACT_CHOICE:
        best: tuple[float, int, tuple[int, ...]] | None = None
        for mask in range(1, 1 << len(ordered)):
            picked = tuple(k for k in range(len(ordered)) if mask >> k & 1)
            if sum(ordered[k][2] for k in picked) < excess:
                continue
            loss = sum(ordered[k][0] * ordered[k][2] for k in picked)
            key = (loss, len(picked), picked)
            if best is None or key < best:
                best = key
        if best is not None:
            chosen = [ordered[k] for k in best[2]]
            return sorted(chosen, key=lambda o: ":" not in o[1])
    return ordered


def _halo_tensors(module: PeModule, tensors: Sequence[str]) -> set[str]:
    """The tensors whose exchange goes as a halo, by displacement (configurations
    ``out_T_<n>_send`` and ``out_T_<n>_recv``, codegen.direct.halo_exchange)."""
    found: set[str] = set()
    by_length = sorted(tensors, key=len, reverse=True)
    for p in module.programs:
        for c in p.configs:
            rest = c.name.removeprefix("out_")
            tensor = next((t for t in by_length if rest.startswith(f"{t}_")), None)
            if tensor is None or c.name == rest:
                continue
            number, _, tail = rest[len(tensor) + 1:].partition("_")
            if number.isdigit() and tail.startswith(("send", "recv")):
                found.add(tensor)
    return found


def _fill_saving(module: PeModule) -> tuple[int, float]:
    """The configurations of the initial fills (``fill_``) and what they save per PE
    over a loop storing each element."""
    configs, saving = 0, 0.0
    for p in module.programs:
        dtypes = {a.name: a.dtype for a in p.arrays}
        for c in p.configs:
            if not c.name.startswith("fill_"):
                continue
            n = max(prod(v) for v in c.variants)
            width = costs().simd_width(dtypes.get(c.dst.array or "", "float32"), "fill")
            configs += len(c.variants)
            saving += n * (costs().for_iteration + costs().scalar_op) - (
                costs().simd_startup + -(-n // width) + costs().simd_config)
    return configs, max(0.0, saving)


def _batch_configs(batch: Batch) -> int:
    """SIMD configurations a batched flow sets up."""
    keep = 0 if batch.keep is None else len(batch.keep.variants) or 1
    return sum(d.configs for _, d in batch.decisions) + keep


def _saving(d: SimdDecision) -> float:
    """Predicted cycles per PE SIMD saves over scalar loops (codegen.cost)."""
    predicted = dict(d.predicted)
    if "simd" not in predicted or "scalar" not in predicted:
        return float("inf")
    return max(0, predicted["scalar"] - predicted["simd"])


def _indexed_exchange(tg: TaskGraph) -> dict[str, float]:
    """Per ``exchange:T`` of complete elements, about what its indexed protocol costs a
    PE: every element its line (or the region) holds received by a task, kept or not.
    A halo's block exchanges send small parts; the protocol they spare sends it all."""
    per_element = costs().task_dispatch + 2 * (costs().for_iteration + 4) + 10
    lines = {"row": tg.compute.height, "column": tg.compute.width, "region": 1}
    return {f"exchange:{ex.tensor}": box_volume(ex.produced.range()) / lines[ex.axis]
            * per_element for ex in tg.exchanges if not ex.reduce}


def _output_saving(module: PeModule, tensors: Sequence[str],
                   indexed: dict[str, float] | None = None
                   ) -> dict[str, tuple[int, float]]:
    """Per group of a tensor's output (``out_T_k``), combining (``combine_T_k``) or
    block-exchange (``out_T_send``, ``out_T_recv``) instructions, keyed ``"out:T"``,
    ``"combine:T"``, ``"exchange:T"``: their configurations and about what they save
    per PE. A chain instruction against a scalar loop that loads, receives, adds and
    sends per element (the group's largest); a block exchange against indexed sends (a
    loop) and receives (a task) per element. Outputs and chains run after the compute,
    on the run's critical path (a chain's PEs wait on each other), where a fill runs
    while inputs arrive: their saving counts twice."""
    per_element = 2 * (costs().for_iteration + 4)
    configs: dict[str, int] = {}
    saving: dict[str, float] = {}
    by_length = sorted(tensors, key=len, reverse=True)
    for p in module.programs:
        for c in p.configs:
            prefix, _, rest = c.name.partition("_")
            if prefix not in ("out", "combine"):
                continue
            tensor = next((t for t in by_length if rest.startswith(f"{t}_")), None)
            if tensor is None:
                continue
            tail = rest[len(tensor) + 1:].removeprefix("sum_")  # (partial results' exchange)
            tail = tail.lstrip("0123456789").removeprefix("_") if tail[:1].isdigit() else tail
            # (a halo's exchanges: one per displacement, ``out_T_<n>_send``)
            n = max(prod(v) for v in c.variants)
            if tail.startswith(("send", "recv")):
                group = f"exchange:{tensor}"
                value = n * (per_element + 2) if tail.startswith("send") else n * (
                    costs().task_dispatch + per_element + 10)
                saving[group] = saving.get(group, 0.0) + value
            else:
                group = f"{prefix}:{tensor}"
                saving[group] = max(saving.get(group, 0.0), float(n * per_element))
            configs[group] = configs.get(group, 0) + len(c.variants)
    for group, protocol in (indexed or {}).items():
        if group in saving:
            saving[group] = max(saving[group], protocol)
    return {g: (n, saving[g]) for g, n in configs.items()}


def compile_mapping(program: Program, mapping: Mapping, *, stop: str = "code",
                    simd: bool = True, name: str = "program", reference: str | None = None,
                    params: Sequence[tuple[str, int | str]] = (),
                    max_configs: int | None = None, arrival: str = "batched",
                    fabric: FabricConfig | None = None) -> Compilation:
    """Run the back end (task graph, memory, SIMD, code) up to ``stop``; ``max_configs``
    is the number of SIMD configurations a PE holds (default: the fabric's);
    ``arrival="per-wavelet"`` runs one task per arriving wavelet as the paper does,
    ``"batched"`` takes dense streams in batches where the cost model predicts a gain;
    ``fabric`` gives the costs the choices are made by, a PE's memory, its SIMD
    configurations and the colors (default: the paper preset)."""
    fabric = fabric or FabricConfig()
    try:
        with fabric_costs(fabric):
            compiled = _compile(program, mapping, stop=stop, simd=simd, name=name,
                                reference=reference, params=params,
                                max_configs=(fabric.max_simd_configs if max_configs is None
                                             else max_configs),
                                arrival=arrival, fabric=fabric)
        return replace(compiled, fabric=fabric)
    except UnsupportedMappingError as err:
        if err.loc is None and err.subject is not None:
            err.loc = mapping.loc_of(err.subject)
        raise
    except CodegenError as err:  # what the back end cannot do for this placement
        if err.loc is None:
            err.loc = mapping.loc_of("placement")
        raise


def _compile(program: Program, mapping: Mapping, *, stop: str, simd: bool, name: str,
             reference: str | None, params: Sequence[tuple[str, int | str]],
             max_configs: int, arrival: str, fabric: FabricConfig,
             keep: frozenset[str] = frozenset()) -> Compilation:
    """The stages; with SIMD and batches, where statements run per element of a stream
    at much more than the stream's pace, the same compiled with that stream kept in
    memory (the statements running once it is complete, as whole-box SIMD) where the
    cost model predicts it at most :data:`KEEP_GAIN` of the cycles."""
    compiled = _compile_halos(program, mapping, stop=stop, simd=simd, name=name,
                              reference=reference, params=params, max_configs=max_configs,
                              arrival=arrival, fabric=fabric, keep=keep)
    if keep or not simd or arrival == "per-wavelet" or compiled.arrivals is None:
        return compiled
    slow = _slow_streams(compiled)
    if not slow:
        return compiled
    try:
        kept = _compile_halos(program, mapping, stop=stop, simd=simd, name=name,
                              reference=reference, params=params, max_configs=max_configs,
                              arrival=arrival, fabric=fabric, keep=slow)
    except DtgError:  # (kept in memory it may not fit, or not compile: as it was)
        return compiled
    mine, theirs = _stream_work(compiled, slow), _stream_work(kept, slow)
    if mine is None or theirs is None or theirs > KEEP_GAIN * mine:
        return compiled
    return replace(kept, seconds=compiled.seconds + kept.seconds)


KEEP_GAIN = 0.9  # a stream is kept in memory where that is predicted this much faster
SLOW_STREAM = 2  # per-element work at this many times a stream's wavelets or more


def _slow_streams(c: Compilation) -> frozenset[str]:
    """Streamed tensors whose per-element statements the busiest PE takes at least
    :data:`SLOW_STREAM` cycles per arriving wavelet for, in the way chosen."""
    assert c.tasks is not None and c.arrivals is not None
    chosen = {b.flow: b.way for b in c.arrivals.batches}
    flows = {f.name: f for f in c.tasks.inputs}
    slow: set[str] = set()
    for name, candidates in c.arrivals.candidates:
        flow = flows[name]
        if flow.tensor in c.tasks.buffered:
            continue
        way = next((k for k in candidates if k.way == chosen.get(name, (None, None))), None)
        arrivals = box_volume(poly.bind_pe(flow.arrivals()))
        if way is not None and way.busy is not None and way.busy >= SLOW_STREAM * arrivals:
            slow.add(flow.tensor)
    return frozenset(slow)


def _stream_work(c: Compilation, tensors: frozenset[str]) -> int | None:
    """Predicted cycles on the busiest PE of taking the streams of ``tensors`` (their
    flows' chosen way, from the first arrival to the end of its work) and of the
    statements that run once they are complete (their decision's prediction)."""
    assert c.tasks is not None and c.arrivals is not None and c.decisions is not None
    chosen = {b.flow: b.way for b in c.arrivals.batches}
    flows = {f.name: f for f in c.tasks.inputs}
    total = 0
    busy: list[tuple[isl.Set, int]] = []  # (the flow's sources, its busy cycles)
    for name, candidates in c.arrivals.candidates:
        if flows[name].tensor not in tensors:
            continue
        way = next((k for k in candidates if k.way == chosen.get(name, (None, None))), None)
        if way is None or way.cycles is None:
            return None
        total = max(total, way.cycles)
        sources = flows[name].relation.range_factor_domain().range()
        busy.append((sources, min(way.busy or 0, way.cycles)))
    # (flows from the same sources arrive one after the other, and where they reach the
    # same PEs their work adds up there: a stream's residue classes apart on colors)
    for sources, _ in busy:
        same = [b for other, b in busy if other.is_equal(sources)]
        if len(same) > 1:
            total = max(total, sum(same))
    for task in c.tasks.tasks:
        if task.kind != "compute" or task.flow is not None or task.statement is None:
            continue
        pstmt = c.tasks.model.statement(task.statement)
        if not any(t in tensors for t, _ in pstmt.reads):
            continue
        predicted = dict(c.decisions[task.name].predicted)
        if not predicted:
            assert task.instances is not None
            predicted = {"scalar": scalar_cycles(pstmt.stmt, task.instances, None)}
        total += min(predicted.values()) if c.decisions[task.name].used else predicted.get(
            "scalar", min(predicted.values()))
    return total


def _compile_halos(program: Program, mapping: Mapping, *, stop: str, simd: bool, name: str,
                   reference: str | None, params: Sequence[tuple[str, int | str]],
                   max_configs: int, arrival: str, fabric: FabricConfig,
                   keep: frozenset[str]) -> Compilation:
    """A compilation with tree streams cut into their halos and the rest
    (mapping.inputs.halo_split) where the cost model predicts taking the streams and the
    work after them not markedly slower than with the trees whole (:data:`HALO_LOSS`; a
    cut whose parts arrive unevenly, in groups of sizes that differ between sources, can
    cost more than the neighbours' extra wavelets); the other one otherwise."""
    def attempt(halos: bool | None) -> Compilation:
        return _compile_kept(program, mapping, stop=stop, simd=simd, name=name,
                             reference=reference, params=params, max_configs=max_configs,
                             arrival=arrival, fabric=fabric, keep=keep, halos=halos)

    cut = attempt(None)
    if cut.tasks is None or cut.arrivals is None or not any(f.halo for f in cut.tasks.inputs):
        return cut
    try:
        whole = attempt(False)
    except DtgError:
        return cut
    seconds = cut.seconds + whole.seconds
    tensors = frozenset(f.tensor for f in cut.tasks.inputs)
    mine, theirs = _stream_work(cut, tensors), _stream_work(whole, tensors)
    if mine is not None and (theirs is None or theirs > HALO_LOSS * mine):
        return replace(cut, seconds=seconds)
    return replace(whole, seconds=seconds)


# The trees whole only where predicted at this share of the cut's cycles or less: the
# prediction does not count the links and ramps the neighbours' whole streams load
HALO_LOSS = 0.9


def _compile_kept(program: Program, mapping: Mapping, *, stop: str, simd: bool, name: str,
                  reference: str | None, params: Sequence[tuple[str, int | str]],
                  max_configs: int, arrival: str, fabric: FabricConfig,
                  keep: frozenset[str], split: bool = True,
                  segments: int | None = None, halos: bool | None = None) -> Compilation:
    """One compilation (``split``: multicast sources apart where their orders differ,
    :func:`mapping.inputs.tree_flows`, and straight streams cut into at most ``segments``
    segments, :func:`mapping.inputs.line_segments`; by default its ``MAX_SEGMENTS``;
    ``halos``: tree streams cut into their halos and the rest, :func:`mapping.inputs.
    halo_split`, by default but with ``arrival="per-wavelet"``). Short of colors, lines
    take fewer segments, then the halos go back into their trees, then sources taken
    apart lose their batches (all streams next), then they go back together."""
    segments = input_plan.MAX_SEGMENTS if segments is None else segments
    if halos is None:  # (the paper's code: its trees whole)
        halos = arrival != "per-wavelet"
    start = time.perf_counter()
    if stop == "mapping":
        return Compilation(program, mapping, simd=simd)
    tg = build_task_graph(program.model, mapping, keep=keep, split=split, segments=segments,
                          halos=halos)
    result = Compilation(program, mapping, tg, simd=simd)
    if stop != "tasks":
        memory = allocate(tg, memory_bytes=fabric.memory_bytes)
        result = Compilation(program, mapping, tg, memory, simd=simd)
        if stop != "memory":
            decisions, memory = simd_decisions(tg, memory, simd=simd,
                                               memory_bytes=fabric.memory_bytes)
            memory, decisions = apply_in_place(memory, decisions,
                                               plan_in_place(tg, memory, decisions))
            planned = None
            if simd:
                planned, decisions, memory = _plan_batches(tg, memory, decisions,
                                                           arrival=arrival,
                                                           memory_bytes=fabric.memory_bytes)
                memory, decisions, planned = in_place_batches(tg, memory, decisions, planned)
            module, decisions, arrivals = _fit_configurations(
                tg, memory, decisions, simd=simd, name=name, reference=reference,
                params=params, max_configs=max_configs, arrivals=planned)
            shared = share_colors(module, fabric.colors)
            if shared is None and any(f.segmented for f in tg.inputs):
                # lines cut into half as many segments first: fewer colors and tasks
                fewer = _compile_kept(program, mapping, stop=stop, simd=simd, name=name,
                                      reference=reference, params=params,
                                      max_configs=max_configs, arrival=arrival, fabric=fabric,
                                      keep=keep, split=split, segments=segments // 2,
                                      halos=halos)
                return replace(fewer, seconds=time.perf_counter() - start)
            if shared is None and any(f.halo for f in tg.inputs):
                # then the halos go with the rest of their trees again
                whole = _compile_kept(program, mapping, stop=stop, simd=simd, name=name,
                                      reference=reference, params=params,
                                      max_configs=max_configs, arrival=arrival, fabric=fabric,
                                      keep=keep, split=split, segments=segments, halos=False)
                return replace(whole, seconds=time.perf_counter() - start)
            # Batched colors are never shared: where the colors run short, first the
            # multicast sources taken apart lose their batches, then every stream; then
            # the sources go back together (their orders then allow no batches anyway).
            apart = {f.name for f in tg.inputs if f.apart}
            for drop in ([apart] if apart else []) + [{b.flow for b in arrivals.batches}]:
                if shared is not None or not drop & {b.flow for b in arrivals.batches}:
                    continue
                module, decisions, arrivals = _fit_configurations(
                    tg, memory, decisions, simd=simd, name=name, reference=reference,
                    params=params, max_configs=max_configs, arrivals=replace(
                        arrivals, batches=tuple(b for b in arrivals.batches
                                                if b.flow not in drop)))
                shared = share_colors(module, fabric.colors)
            if shared is None and apart:
                together = _compile_kept(program, mapping, stop=stop, simd=simd, name=name,
                                         reference=reference, params=params,
                                         max_configs=max_configs, arrival=arrival,
                                         fabric=fabric, keep=keep, split=False)
                return replace(together, seconds=time.perf_counter() - start)
            if shared is None and tg.exchanges:
                # (exchanges without turns take a color per displacement: by turns, one)
                module, decisions, arrivals = _fit_configurations(
                    tg, memory, decisions, simd=simd, name=name, reference=reference,
                    params=params, max_configs=max_configs, arrivals=arrivals,
                    given_up=frozenset(f"halo:{ex.tensor}" for ex in tg.exchanges))
                shared = share_colors(module, fabric.colors)
            if shared is None:
                raise out_of_colors(tg.color_uses, len(colors_used(module)), fabric.colors)
            module = shared
            check_data_flow(tg, memory, decisions, arrivals)
            for pe_program in module.programs:
                arrays = [(a.name, a.shape, a.bytes) for a in pe_program.arrays]
                over = sum(b for _, _, b in arrays) > LOCAL_MEMORY_BYTES
                # (what would not fit: the SIMD temporaries, then the arrays grown for
                # padded blocks; compiled again without them)
                fallback = without_temporaries if over and temporaries_enabled() and any(
                    a.name.startswith("temp_") for a in pe_program.arrays) else \
                    without_padding if over and padding_enabled() else None
                if fallback is not None:
                    with fallback():
                        again = _compile_kept(program, mapping, stop=stop, simd=simd,
                                              name=name, reference=reference, params=params,
                                              max_configs=max_configs, arrival=arrival,
                                              fabric=fabric, keep=keep, split=split,
                                              segments=segments, halos=halos)
                    return replace(again, seconds=time.perf_counter() - start)
                check_fits(pe_program.name, arrays)
            result = Compilation(program, mapping, tg, memory, decisions,
                                 module if stop == "code" else None, simd, arrivals=arrivals)
    seconds = time.perf_counter() - start
    return replace(result, seconds=seconds)
