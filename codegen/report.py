"""The compile report (JSON): tasks with their SIMD decisions, local arrays, timing.

isl objects are printed in isl syntax with the parameter names ``PE_X``, ``PE_Y``,
``index``, ``index_0``, ..., so a reader can load them with islpy and compare by meaning.
"""

from __future__ import annotations

from typing import Any

from dtg.codegen.bound import mapping_bound
from dtg.codegen.pipeline import Compilation
from dtg.codegen.simd import row_major
from dtg.lair.frontend import Program
from dtg.mapping.flows import TaskGraph


def compile_report(c: Compilation, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report of a compilation, as far as it went (``header``: how it was asked for,
    :func:`lair.cli.report_header`). Nothing in it depends on the machine or the time,
    so identical compiles give identical reports."""
    report = {**(header or {}), **program_report(c.program)}
    report["rectangle"] = [c.mapping.width, c.mapping.height]
    report["fabric"] = c.fabric.as_dict()  # the costs the compiler chose by
    report["bound"] = mapping_bound(c.program.model, c.mapping, c.fabric).as_dict()
    if c.tasks is None:
        return report
    tasks = []
    for t in c.tasks.tasks:
        entry: dict[str, Any] = {
            "name": t.name, "kind": t.kind, "region": t.region, "statement": t.statement,
            "pes": str(t.pes), "trigger": t.trigger,
            "instances": None if t.instances is None else str(t.instances),
            "detail": t.detail,
        }
        decision = (c.decisions or {}).get(t.name)
        batch = c.arrivals.of(t.flow) if c.arrivals is not None and t.flow and (
            t.kind == "compute") else None
        if batch is not None:
            entry["simd"] = batch.decision(t.name).report()
            entry["batch"] = {"size": batch.size, "instances": str(batch.task(t.name).instances),
                              "per_wavelet_simd": decision.report() if decision else None}
        elif decision is not None:
            entry["simd"] = decision.report()
        elif t.kind == "init":
            local = c.memory.of(c.program.model.statement(t.statement or "").stmt.target.tensor) \
                if c.memory else None
            entry["simd"] = _plain(c.simd and local is not None and 0 < len(local.size) <= 4,
                                   "fills the whole local array" if c.simd else
                                   "SIMD generation is off (--no-simd)",
                                   local.size if local else None)
        elif t.name.startswith("out_"):
            entry["simd"] = _plain(c.simd, "sends the local array in the stream's order, "
                                   "adding the partial results that arrive" if c.simd else
                                   "SIMD generation is off (--no-simd)", None)
        else:
            entry["simd"] = _plain(False, "routing and scalar sends only", None)
        tasks.append(entry)
    memory = []
    for a in (c.memory.arrays if c.memory else ()):
        memory.append({
            "tensor": a.tensor, "array": a.name, "pes": str(a.pes), "size": list(a.size),
            "offset": str(a.array.to_local_bound), "to_local": str(a.array.to_local),
            "elements": str(a.array.per_pe), "bytes": a.bytes, "strides": list(row_major(
                a.size)),
        })
    report.update({
        "compute_region": {"origin": [c.tasks.compute.x0, c.tasks.compute.y0],
                           "size": [c.tasks.compute.width, c.tasks.compute.height]},
        "simd_enabled": c.simd,
        "flows": _flows(c.tasks),
        "arrivals": c.arrivals.report() if c.arrivals is not None else {},
        "tasks": tasks,
    })
    if c.memory is not None:
        report["memory"] = memory
    if c.module is not None:  # the largest local memory of a PE, landing arrays included
        report["memory_bytes_per_pe"] = max((p.memory_bytes for p in c.module.programs),
                                            default=0)
    return report


def program_report(program: Program) -> dict[str, Any]:
    """The program's tensors and statements (what ``--emit=ast`` and ``isl`` know)."""
    g = program.graph
    return {
        "program": g.file,
        "tensors": {t.name: {"role": t.role, "shape": list(t.shape), "dtype": t.dtype}
                    for t in g.tensors},
        "statements": [s.name for s in g.statements],
    }


def _flows(tg: TaskGraph) -> dict[str, Any]:
    """How the planner moves each tensor, and why (docs/codegen.md)."""
    inputs = [{"name": f.name, "tensor": f.tensor, "kind": f.kind, "side": f.side,
               "color": f.color,
               "route": (f.plan if f.members is not None else
                         "adapters" if f.adapter is not None else "direct along its line")}
              for f in tg.inputs]
    outputs = [{"tensor": o.tensor, "kind": o.kind, "side": o.side, "color": o.color,
                "route": ("chain along its line" if o.chain else
                          "gathered next to the side" if any(
                              ex.tensor == o.tensor for ex in tg.exchanges) else
                          "sent by the PE next to the side")}
               for o in tg.outputs]
    exchanges = [{"tensor": ex.tensor, "axis": ex.axis, "color": ex.color,
                  "route": ("partial results summed by one writer per element" if ex.reduce
                            else "complete elements sent to their readers")}
                 for ex in tg.exchanges]
    chains = [{"tensor": r.tensor, "towards": r.side, "colors": list(r.colors)}
              for r in (*tg.combines, *tg.reductions)]
    return {"inputs": inputs, "outputs": outputs, "exchanges": exchanges,
            "reduction_chains": chains}


def _plain(used: bool, reason: str, sizes: tuple[int, ...] | None) -> dict[str, Any]:
    return {"used": bool(used), "reason": reason, "case": "base" if used and sizes else None,
            "compression": None, "sizes": list(sizes) if used and sizes else None,
            "offset": None, "extra_instances": None, "size_ids": None}
