"""Timelines of a run in the Chrome/Perfetto trace format (JSON).

One track (thread) per PE, named ``PE[x, y]``: a slice per task run (from its dispatch
to the end of its work), and inside it a slice per SIMD instruction, per wait for a
wavelet and per stall on a full router. A counter track gives the wavelets moved over
links in each cycle. Times are cycles written as microseconds, the format's unit (1 us
= 1 cycle), so the Perfetto UI (ui.perfetto.dev) reads off cycles directly. No
``displayTimeUnit`` is written: ``"ns"`` made older Perfetto versions read every time
as nanoseconds and chrome://tracing show a cycle as 1000 ns.

Recording costs nothing when off: the simulator holds ``None`` instead of a
:class:`Trace` and checks for it once per task, instruction, wait and forward.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

Pe = tuple[int, int]


class Trace:
    """What a traced run recorded: slices per PE and wavelet hops per cycle."""

    __slots__ = ("hops", "slices")

    def __init__(self) -> None:
        self.slices: list[tuple[Pe, str, str, int, int, dict[str, Any] | None]] = []
        self.hops: Counter[int] = Counter()

    def span(self, pe: Pe, name: str, category: str, start: int, end: int,
             args: dict[str, Any] | None = None) -> None:
        self.slices.append((pe, name, category, start, end, args))

    def hop(self, cycle: int, wavelets: int) -> None:
        self.hops[cycle] += wavelets

    def events(self, module: str) -> list[dict[str, Any]]:
        """The trace events: track names, then slices (longest first at equal start, so
        that enclosing slices come before what they enclose), then the counter."""
        pes = sorted({s[0] for s in self.slices}, key=lambda p: (p[1], p[0]))
        tid = {pe: k + 1 for k, pe in enumerate(pes)}
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
             "args": {"name": f"pesim: {module}"}}]
        for pe in pes:
            out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid[pe],
                        "args": {"name": f"PE[{pe[0]}, {pe[1]}]"}})
            out.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid[pe],
                        "args": {"sort_index": tid[pe]}})
        for pe, name, category, start, end, args in sorted(
                self.slices, key=lambda s: (tid[s[0]], s[3], -(s[4] - s[3]))):
            event: dict[str, Any] = {"name": name, "cat": category, "ph": "X", "ts": start,
                                     "dur": end - start, "pid": 1, "tid": tid[pe]}
            if args:
                event["args"] = args
            out.append(event)
        for cycle in sorted(self.hops):
            out.append({"name": "wavelet hops", "ph": "C", "ts": cycle, "pid": 1, "tid": 0,
                        "args": {"wavelets": self.hops[cycle]}})
            if cycle + 1 not in self.hops:  # back to zero after a burst
                out.append({"name": "wavelet hops", "ph": "C", "ts": cycle + 1, "pid": 1,
                            "tid": 0, "args": {"wavelets": 0}})
        return out

    def document(self, module: str, cycles: int) -> dict[str, Any]:
        return {"traceEvents": self.events(module),
                "otherData": {"module": module, "cycles": cycles,
                              "time_unit": "1 us on the time axis is 1 cycle"}}

    def json(self, module: str, cycles: int) -> str:
        return json.dumps(self.document(module, cycles), separators=(",", ":")) + "\n"
