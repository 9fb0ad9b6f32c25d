"""The state the compute program's emitters share (codegen.emit and its parts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from dtg.codegen.batching import ArrivalPlan
from dtg.codegen.simd import SimdDecision
from dtg.mapping.flows import Region, TaskGraph
from dtg.mapping.memory import Memory
from dtg.pe.ir import Array, IntVar, Route, SimdConfig, Task


@dataclass
class EmitterState:
    """What the compute program's emitters share: the plan, and the declarations and
    tasks they add to as they go."""

    tg: TaskGraph
    memory: Memory
    decisions: dict[str, SimdDecision]
    simd: bool
    simd_fill: bool
    scalar_outputs: frozenset[str]  # "out:T", "combine:T", "exchange:T" done by scalar loops
    arrivals: ArrivalPlan
    configs: list[SimdConfig] = field(default_factory=list)
    extra_tasks: list[Task] = field(default_factory=list)
    extra_arrays: list[Array] = field(default_factory=list)
    ints: list[IntVar] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    inits: dict[str, float] = field(default_factory=dict)  # array -> initial value
    task_pes: dict[str, isl.Set] = field(default_factory=dict)  # where a task can run
    landed_in_place: set[str] = field(default_factory=set)  # landing arrays not needed
    extra_colors: int = 0  # colors taken beyond the plan's (:meth:`_fresh_color`)
    # "halo:T" -> (configurations the block turns would free, their predicted extra
    # cycles): what giving up a halo for the turns trades, for the budget
    halo_choices: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def region(self) -> Region:
        return self.tg.compute

    def _fresh_color(self) -> int:
        """A color no route of the plan has (an exchange's further colors): numbered
        after the plan's, compacted with the others by ``codegen.colors``."""
        self.extra_colors += 1
        return len(self.tg.color_uses) + self.extra_colors - 1

    def _simd_out(self, kind: str, tensor: str) -> bool:
        """Whether the ``kind`` (out, combine, exchange) tasks of ``tensor`` use SIMD."""
        return self.simd and f"{kind}:{tensor}" not in self.scalar_outputs

    def _reduction_op(self, tensor: str) -> str:
        """The SIMD operation combining partial results of ``tensor``."""
        definer = self.tg.model.graph.definer(tensor)
        return "fmax" if definer is not None and definer.op == "max=" else "fadd"
