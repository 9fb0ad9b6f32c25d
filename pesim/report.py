"""The ``pesim`` report: a JSON document for tools and a short table for people."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dtg.lair.cli import report_header
from dtg.lair.files import write_atomically
from dtg.lair.limits import counted
from dtg.pe.ir import PeModule
from dtg.pesim.run import RunOutcome
from dtg.pesim.sim import PeStats

PE_FIELDS = ("busy", "simd_ops", "simd_instructions", "simd_flops", "scalar_ops",
             "scalar_flops", "wavelets_sent", "stall_cycles", "wait_cycles", "tasks_run")


def pe_key(pe: tuple[int, int]) -> str:
    return f"{pe[0]},{pe[1]}"


def memory_bytes(module: PeModule) -> dict[str, int]:
    """Bytes of local arrays of each program (what one of its PEs allocates)."""
    return {p.name: p.memory_bytes for p in module.programs}


def pe_entry(stats: PeStats, memory: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = {"program": stats.program, "memory_bytes": memory}
    entry.update({name: getattr(stats, name) for name in PE_FIELDS})
    entry["tasks"] = {name: {"runs": runs, "busy": busy}
                      for name, (runs, busy) in sorted(stats.tasks.items())}
    return entry


def run_header(*, params: Mapping[str, int | str] | None = None, seed: int | None = 0,
               inputs: str | None = None, fabric_preset: str | None = None,
               fabric_config: str | None = None, mapping: str | None = None
               ) -> dict[str, Any]:
    """How a run was asked for (:func:`lair.cli.report_header`): the same fields for
    ``pesim`` and :func:`dtg.simulate`. ``seed`` is None when the inputs were given
    (``inputs`` says where from)."""
    return report_header("pesim", params=dict(params or {}), seed=seed, inputs=inputs,
                         fabric_preset=fabric_preset, fabric_config=fabric_config,
                         mapping=mapping)


def build_report(outcome: RunOutcome, header: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything measured in one run, as plain JSON types, after ``header`` (how the
    run was asked for, :func:`run_header`). A run stopped early compared nothing: its
    ``compared`` is false and ``exact``, ``max_abs_error`` and ``cycles_over_bound``
    are null."""
    r = outcome.result
    memory = memory_bytes(outcome.module)
    c = outcome.comparison
    bound = outcome.bound
    cycles = r.cycles
    totals = {name: sum(getattr(s, name) for s in r.pes.values()) for name in PE_FIELDS}
    links = {
        f"{pe_key(a)}->{pe_key(b)}": {
            "wavelets": n,
            "utilization": round(n / cycles, 6) if cycles else 0.0,
        }
        for (a, b), n in sorted(r.links.items())
    }
    return {
        **(header or {}),
        "failed": not c.verified,
        "module": r.module,
        "module_file": str(outcome.module_path) if outcome.module_path else None,
        "reference": str(outcome.reference_path) if outcome.reference_path else None,
        "cycles": cycles,
        "start": r.start,
        "end": r.end,
        "microseconds": r.config.microseconds(cycles),
        "mapping_file": str(outcome.mapping_path) if outcome.mapping_path else None,
        "verified": c.verified,
        "compared": c.compared,
        "exact": c.exact if c.compared else None,
        "comparison": c.mode,
        "max_abs_error": c.max_abs_error if c.compared else None,
        "mismatch": c.mismatch,
        "complete": r.complete,
        "error": (None if c.verified
                  else f"interrupted by Ctrl-C at cycle {r.end}: the figures are partial and "
                       "nothing was compared" if not r.complete
                  else f"the outputs differ from the reference: {c.mismatch}"),
        "events": r.events,
        "wall_seconds": r.wall_seconds,
        "engine": r.engine,
        "engine_note": r.engine_note,
        "pe_count": len(r.pes),
        "totals": totals,
        "memory_bytes_per_pe": max(memory.values(), default=0),
        "pes": {pe_key(pe): pe_entry(s, memory.get(s.program, 0))
                for pe, s in sorted(r.pes.items())},
        "links": links,
        "fabric": r.config.as_dict(),
        # the mapping's lower bound (docs/pecode.md, "The bound"), or why there is none
        "bound": None if bound is None else bound.as_dict(),
        "bound_note": outcome.bound_note if bound is None else None,
        "cycles_over_bound": (round(cycles / bound.cycles, 3)
                              if bound is not None and r.complete else None),
    }


def failure_report(module: str | Path, error: str, header: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """The report of a run that ended in an error: failed, with the error's text (so
    that no earlier report of the same file can be taken for this run's)."""
    return {**(header or {}), "failed": True, "module": None, "module_file": str(module),
            "verified": False, "compared": False, "exact": None, "comparison": None,
            "mismatch": None, "error": error}


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(report, indent=2) + "\n", "the report")


def print_summary(report: dict[str, Any], console: Console | None = None) -> None:
    """A few lines: verdict, cycles, where the time went."""
    console = console or Console()
    table = Table(title=f"pesim: {report['module']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    if report.get("compared", True):
        verdict = "[green]yes[/green]" if report["verified"] else "[red]NO[/red]"
        table.add_row("outputs match reference", f"{verdict} ({report['comparison']}; max "
                                                 f"abs error {report['max_abs_error']:g})")
    else:
        table.add_row("outputs match reference",
                      f"[yellow]{escape(report['comparison'])}[/yellow]")
    stopped = "" if report.get("complete", True) else ", interrupted there"
    table.add_row("cycles", f"{report['cycles']} ({report['microseconds']:.3f} µs at "
                            f"{report['fabric']['clock_mhz']:g} MHz{stopped})")
    bound = report.get("bound")
    if bound is not None:
        dominant = bound[bound["dominant"]]
        ratio = (f"cycles / bound {report['cycles_over_bound']:.2f}"
                 if report.get("cycles_over_bound") is not None
                 else "no cycles / bound (interrupted)")
        table.add_row("bound", escape(
            f"{bound['cycles']} cycles ({bound['dominant']}: {dominant['where']}; compute "
            f"{bound['compute']['cycles']}, injection {bound['injection']['cycles']}, "
            f"latency {bound['latency']['cycles']}); {ratio}"))
    else:
        table.add_row("bound", escape(f"n/a: {report.get('bound_note') or 'no mapping'}"))
    pes = report["pes"]
    busiest = max(pes.items(), key=lambda kv: kv[1]["busy"]) if pes else None
    totals = report["totals"]
    table.add_row("PEs", str(report["pe_count"]))
    if busiest is not None:
        share = busiest[1]["busy"] / report["cycles"] if report["cycles"] else 0.0
        table.add_row("busiest PE", f"PE[{busiest[0]}]: {busiest[1]['busy']} busy cycles "
                                    f"({share:.0%})")
    arithmetic = totals["simd_flops"] + totals["scalar_flops"]
    share = totals["simd_flops"] / arithmetic if arithmetic else 0.0
    table.add_row("arithmetic", f"{totals['simd_flops']} by SIMD + {totals['scalar_flops']} "
                                f"scalar flops ({share:.0%} SIMD; {totals['simd_ops']} SIMD "
                                "element operations)")
    table.add_row("scalar code", f"{totals['scalar_ops']} cycles")
    table.add_row("wavelets sent", f"{totals['wavelets_sent']} (stalled "
                                   f"{totals['stall_cycles']} cycles, waited "
                                   f"{totals['wait_cycles']})")
    links = report["links"]
    if links:
        top = max(links.items(), key=lambda kv: kv[1]["wavelets"])
        table.add_row("busiest link", f"{top[0]}: {counted(top[1]['wavelets'], 'wavelet')} "
                                      f"({top[1]['utilization']:.0%})")
    engine = report.get("engine", "simpy")
    table.add_row("simulation", f"{report['events']} events in {report['wall_seconds']:.2f} s "
                                f"({engine} engine)")
    if report.get("engine_note"):
        table.add_row("engine", escape(report["engine_note"]))
    console.print(table)
    if report["mismatch"]:
        console.print(f"[red]first mismatch:[/red] {report['mismatch']}")
