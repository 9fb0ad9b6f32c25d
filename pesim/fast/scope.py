"""What the compiled engine's set-up in arrays (:mod:`pesim.fast.build`) covers, told
without importing numba: the budget check and the choice of engine ask it first."""

from __future__ import annotations

from dtg.codegen.peir import PeModule


def not_in_arrays(module: PeModule) -> str | None:
    """Why the module cannot be set up in arrays (None: it can, unless a route forms a
    cycle or lists a buffer twice, found while building)."""
    for program in module.programs:
        for a in program.arrays:
            if a.load_set is not None:
                return f"array {a.name} has a load set"
            if a.store_set is not None:
                return f"array {a.name} has a store set"
    return None


__all__ = ["not_in_arrays"]
