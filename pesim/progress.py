"""Progress of a running simulation, for people watching a long run.

The event loop calls a :data:`Watcher` every few thousand events with a
:class:`Progress`; :class:`ProgressBar` shows it with rich once a run has taken more than
a second. The fraction done is the share of input wavelets the sources have injected:
the only measure of the whole run known before it ends, so the ETA is that of the
inputs. Once every input is in (and for modules that stream nothing in) the bar pulses
and shows the simulated cycle alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichProgress,
)


@dataclass(frozen=True)
class Progress:
    cycle: int  # simulated time reached
    events: int  # simulation events so far
    seconds: float  # wall time of the event loop so far
    injected: int  # input wavelets the sources have sent
    total: int  # input wavelets the sources hold in all (0: nothing streams in)

    @property
    def fraction(self) -> float | None:
        return self.injected / self.total if self.total else None

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


Watcher = Callable[[Progress], None]


class ProgressBar:
    """A rich progress bar that appears only after ``delay`` seconds of simulation and
    disappears when the run ends; use as a context manager and pass :meth:`update` as
    the watcher."""

    def __init__(self, console: Console | None = None, *, delay: float = 1.0):
        self.console = console or Console(stderr=True)
        self.delay = delay
        self.bar: RichProgress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, p: Progress) -> None:
        if p.seconds < self.delay:
            return
        if self.bar is None:
            self.bar = RichProgress(
                TextColumn("simulating"), BarColumn(),
                TextColumn("{task.fields[share]}"),
                TextColumn("cycle {task.fields[cycle]:,}"),
                TextColumn("{task.fields[rate]:,.0f} events/s"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("simulating", total=p.total or None, share="",
                                          cycle=0, rate=0.0)
        assert self.task is not None
        streaming = p.fraction is not None and p.injected < p.total
        share = f"{p.fraction:.0%} of inputs in" if streaming else "inputs in"
        if not p.total:
            share = ""
        self.bar.update(self.task, total=p.total if streaming else None,
                        completed=p.injected, share=share, cycle=p.cycle,
                        rate=p.events_per_second)
