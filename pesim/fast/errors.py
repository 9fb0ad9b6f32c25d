"""How the compiled engine reports an error: a code and integer arguments in
``State.error``, and :class:`FastError` raised out of the kernel; the engine then
writes the simpy engine's message for it (:mod:`pesim.fast.engine`)."""

from __future__ import annotations


class FastError(Exception):
    """Raised inside the kernel; what went wrong is in ``State.error``."""


(E_NONE, E_INTERNAL, E_CYCLE_ROUTE, E_NO_ROUTE_ENTRY, E_NO_ROUTE_DOWN, E_LEAVES_MESH,
 E_ONCE_TWICE, E_SPARSE_NO_INDEX, E_SPARSE_ORDER, E_SINK_DENSE_INDEX, E_SINK_TOO_MANY,
 E_SINK_MARKS, E_SINK_NO_INDEX, E_SINK_AFTER_LAST, E_SINK_UNKNOWN_INDEX, E_OUT_OF_BOUNDS,
 E_CYCLE_LIMIT, E_NO_RAMP, E_VARIANT_RANGE, E_VARIANT_UNSET, E_SIMD_BOUNDS,
 E_SIMD_TOO_LARGE, E_DATA_NO_INDEX, E_LENGTH_RANGE, E_GROUP_SLOT) = range(25)
