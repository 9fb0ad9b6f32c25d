"""Which engine simulates a run: the simpy engine (:mod:`pesim.sim`, the reference and
the specification) or the compiled one (:mod:`pesim.fast`, the same figures, many times
faster), as Brian2 picks a runtime target.

``auto`` takes the compiled engine for meshes of ``AUTO_FAST_PES`` PEs and more (on
smaller ones the simpy engine is done before the compiled one has loaded) when numba
is installed and the module uses nothing it lacks. Where ``fast`` is asked for (or
``auto`` chose it) and cannot run, the simpy engine runs and the result says why in one
line (``SimResult.engine_note``). The figures are the same either way, so the choice
changes the time a run takes, never its result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from dtg.errors import InputError
from dtg.lair.limits import FAST_BYTES_PER_PE, FAST_BYTES_PER_ROUTE, MAX_SECONDS
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule
from dtg.pe.parser import Locations
from dtg.pesim.fast.scope import not_in_arrays
from dtg.pesim.progress import Watcher
from dtg.pesim.sim import SimResult, TensorInfo
from dtg.pesim.sim import check_budget as check_simpy_budget
from dtg.pesim.sim import simulate as simulate_simpy
from dtg.pesim.trace import Window

ENGINES = ("auto", "fast", "simpy")
AUTO_FAST_PES = 256  # measured: below, the simpy engine finishes first (benchmarks/)
Notice = Callable[[str], None]


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    return engine


def fast_unavailable() -> str | None:
    """Why the compiled engine cannot run (None when it can, as far as can be told
    before looking at the module)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return "numba is not installed (pip install numba)"
    return None


def needs_compiling() -> bool:
    """Whether a run on the compiled engine would compile it first (about half a
    minute, once per installed version)."""
    if fast_unavailable() is not None:
        return False
    from dtg.pesim.fast.jit import is_cached

    return not is_cached()


def resolve(module: PeModule, engine: str = "auto") -> str:
    """The engine a run of ``module`` will take as far as can be told before lowering
    it: "simpy", "fast" (set up in arrays) or "fast-objects" (set up through the simpy
    engine's objects, for what the set-up in arrays lacks)."""
    check_engine(engine)
    if engine == "simpy" or fast_unavailable() is not None or (
            engine == "auto" and module.width * module.height < AUTO_FAST_PES):
        return "simpy"
    return "fast" if not_in_arrays(module) is None else "fast-objects"


def check_budget(module: PeModule, locations: Locations | None = None, *,
                 engine: str = "auto") -> None:
    """Refuse, before anything is allocated, a run whose memory on the engine it will
    take is estimated beyond the limit (:func:`lair.limits.memory_limit`)."""
    if resolve(module, engine) == "fast":
        check_simpy_budget(module, locations, engine="fast", per_pe=FAST_BYTES_PER_PE,
                           per_route=FAST_BYTES_PER_ROUTE)
    else:
        check_simpy_budget(module, locations)


def prepare(module: PeModule, engine: str = "auto") -> None:
    """Start compiling the compiled engine in the background when this run will take it
    and it is not compiled yet (:mod:`pesim.fast.warm`): the compile then overlaps
    verification, inputs and set-up."""
    if resolve(module, engine) != "simpy" and needs_compiling():
        from dtg.pesim.fast import warm

        warm.start()


def simulate(module: PeModule, inputs: Mapping[str, np.ndarray],
             outputs: Mapping[str, TensorInfo], *, engine: str = "auto",
             config: FabricConfig | None = None, max_seconds: float = MAX_SECONDS,
             watch: Watcher | None = None, trace: bool | Window = False,
             notice: Notice | None = None) -> SimResult:
    """:func:`pesim.sim.simulate` on the engine ``engine`` names (see the module);
    ``notice`` is told when the compiled engine is about to be compiled."""
    check_engine(engine)
    options = {"config": config, "max_seconds": max_seconds, "watch": watch, "trace": trace}
    if engine == "simpy" or (engine == "auto"
                             and module.width * module.height < AUTO_FAST_PES):
        return simulate_simpy(module, inputs, outputs, **options)  # type: ignore[arg-type]
    why = fast_unavailable()
    if why is None:
        check_budget(module, engine=engine)  # (callers that read no file come here first)
        from dtg.pesim.fast import warm
        from dtg.pesim.fast.engine import simulate as simulate_fast
        from dtg.pesim.fast.lower import Unsupported

        if notice is not None and needs_compiling():
            notice("compiling the fast engine (once per installed version, about half a "
                   "minute; --engine simpy runs without it)")
        warm.wait()
        try:
            return simulate_fast(module, inputs, outputs, config=config,
                                 max_seconds=max_seconds, watch=watch, trace=trace)
        except Unsupported as missing:
            why = f"the fast engine does not run {missing} yet"
    result = simulate_simpy(module, inputs, outputs, **options)  # type: ignore[arg-type]
    return dataclasses.replace(result, engine_note=f"ran on the simpy engine: {why}")


__all__ = ["AUTO_FAST_PES", "ENGINES", "Notice", "check_budget", "check_engine",
           "fast_unavailable", "needs_compiling", "prepare", "resolve", "simulate"]
