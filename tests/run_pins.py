"""Pinned simulator runs: every figure a run reports, so that a change of the simulator
(or of the code it runs) shows up in a test.

A run is summarized by its totals (readable in a failure message) and a digest of all
of it: cycles and span, every PE's statistics including per-task profiles, every link's
wavelet count and every output's bytes. Events and wall time are left out: they measure
the simulator, not the simulated machine. ``DTG_UPDATE_PINS=1`` rewrites the pins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dtg.pesim.sim import SimResult

PINNED_RUNS = Path(__file__).with_name("pinned_runs.json")


def summary(result: SimResult) -> dict[str, Any]:
    """Totals of a run and a digest of every per-PE, per-link and output figure."""
    h = hashlib.sha256()
    h.update(repr((result.start, result.end)).encode())
    for pe in sorted(result.pes):
        stats = dataclasses.asdict(result.pes[pe])
        stats["tasks"] = sorted(stats["tasks"].items())
        h.update(repr((pe, sorted(stats.items()))).encode())
    h.update(repr(sorted(result.links.items())).encode())
    for name in sorted(result.outputs):
        array = result.outputs[name]
        h.update(f"{name}{array.dtype}{array.shape}".encode())
        h.update(array.tobytes())
    pes = result.pes.values()
    return {
        "cycles": result.cycles,
        "busy": sum(p.busy for p in pes),
        "stall": sum(p.stall_cycles for p in pes),
        "wait": sum(p.wait_cycles for p in pes),
        "tasks": sum(p.tasks_run for p in pes),
        "sent": sum(p.wavelets_sent for p in pes),
        "hops": sum(result.links.values()),
        "digest": h.hexdigest()[:20],
    }


def _pins() -> dict[str, dict[str, Any]]:
    return json.loads(PINNED_RUNS.read_text()) if PINNED_RUNS.exists() else {}


def check_pinned(key: str, result: SimResult) -> None:
    """Assert that the run named ``key`` reports exactly what it reported when pinned."""
    got = summary(result)
    if os.environ.get("DTG_UPDATE_PINS"):
        # tests may run in parallel: merge into what is there
        pins = _pins()
        pins[key] = got
        PINNED_RUNS.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
        return
    want = _pins().get(key)
    assert want is not None, f"no pinned run {key!r}; DTG_UPDATE_PINS=1 pins it"
    assert got == want, f"run {key} changed: pinned {want}, now {got}"
