"""What the compiled engine's set-up in arrays (:mod:`pesim.fast.build`) covers, told
without importing numba: the budget check and the choice of engine ask it first."""

from __future__ import annotations

from dtg.pe.ir import PeModule
from dtg.pesim.vector import halfspaces


def not_in_arrays(module: PeModule) -> str | None:
    """Why the module cannot be set up in arrays (None: it can, unless a route forms a
    cycle or lists a buffer twice, found while building)."""
    for program in module.programs:
        for a in program.arrays:
            for what, tensor, text in (("load", a.load, a.load_set),
                                       ("store", a.store, a.store_set)):
                if text is not None and tensor is not None and halfspaces(
                        text, tensor, len(a.shape)) is None:
                    return (f"array {a.name} has a {what} set that is not one conjunction "
                            "of affine constraints")
    return None


__all__ = ["not_in_arrays"]
