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

A trace of a large run is large (a slice per task run on every PE): a :class:`Window`
keeps only the slices that overlap a range of cycles on a box of PEs, and the hops of
those cycles (the hop counter is the whole mesh's).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from dtg.errors import InputError

Pe = tuple[int, int]
Range = tuple[int, int]  # first, past the last


@dataclass(frozen=True)
class Window:
    """What a trace keeps: slices overlapping ``cycles`` on PEs with ``x`` and ``y`` in
    their ranges (half-open, as Python's slices; None: all)."""

    cycles: Range | None = None
    x: Range | None = None
    y: Range | None = None

    def __post_init__(self) -> None:
        for name, bounds in (("cycles", self.cycles), ("x", self.x), ("y", self.y)):
            if bounds is not None and not (len(bounds) == 2 and 0 <= bounds[0] < bounds[1]):
                raise InputError(f"a trace window's {name} must be (first, past the last) "
                                 f"with 0 <= first < past the last, got {bounds!r}")

    def keeps(self, pe: Pe, start: int, end: int) -> bool:
        return (self.keeps_pe(pe) and (self.cycles is None or (
            start < self.cycles[1] and max(end, start + 1) > self.cycles[0])))

    def keeps_pe(self, pe: Pe) -> bool:
        return ((self.x is None or self.x[0] <= pe[0] < self.x[1])
                and (self.y is None or self.y[0] <= pe[1] < self.y[1]))

    def keeps_cycle(self, cycle: int) -> bool:
        return self.cycles is None or self.cycles[0] <= cycle < self.cycles[1]


class Trace:
    """What a traced run recorded: slices per PE and wavelet hops per cycle."""

    __slots__ = ("hops", "slices", "window")

    def __init__(self, window: Window | None = None) -> None:
        self.slices: list[tuple[Pe, str, str, int, int, dict[str, Any] | None]] = []
        self.hops: Counter[int] = Counter()
        self.window = window

    def span(self, pe: Pe, name: str, category: str, start: int, end: int,
             args: dict[str, Any] | None = None) -> None:
        if self.window is None or self.window.keeps(pe, start, end):
            self.slices.append((pe, name, category, start, end, args))

    def hop(self, cycle: int, wavelets: int) -> None:
        if self.window is None or self.window.keeps_cycle(cycle):
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
        other: dict[str, Any] = {"module": module, "cycles": cycles,
                                 "time_unit": "1 us on the time axis is 1 cycle"}
        if self.window is not None:
            other["window"] = {k: list(v) for k, v in vars(self.window).items()
                               if v is not None}
        return {"traceEvents": self.events(module), "otherData": other}

    def json(self, module: str, cycles: int) -> str:
        return json.dumps(self.document(module, cycles), separators=(",", ":")) + "\n"


def tracing(trace: bool | Window) -> Trace | None:
    """The trace a run with ``trace=`` records into (None: not traced)."""
    if not trace:
        return None
    return Trace(trace if isinstance(trace, Window) else None)
