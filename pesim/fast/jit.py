"""The two ways the compiled engine compiles a function with numba, both cached on disk
(the first run after an install compiles, later ones load): ``compiled`` for functions
Python calls too, ``internal`` for those only other compiled code calls (no Python
wrapper is made for them, which halves the first compile)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])


def compiled(fn: F) -> F:
    return numba.njit(cache=True)(fn)  # type: ignore[return-value]


def internal(fn: F) -> F:
    return numba.njit(cache=True, no_cpython_wrapper=True)(fn)  # type: ignore[call-overload]
