"""The two ways the compiled engine compiles a function with numba, both cached on disk
(the first run compiles, later ones load): ``compiled`` for functions Python calls too,
``internal`` for those only other compiled code calls (no Python wrapper is made for
them, which halves the first compile).

numba keys a function's cache on its own file only, so a kernel cached before one of
the functions it calls changed would run the old code. The cache therefore lives in a
directory named by a digest of every source file numba compiles (:data:`COMPILED`), in
the user's cache directory (``$DTG_CACHE_DIR``, else ``$XDG_CACHE_HOME/dtg``, else
``~/.cache/dtg``), which also works from a read-only install. ``$NUMBA_CACHE_DIR``,
when set, is left to numba.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])


# the modules whose code (or constants) numba compiles; the set-up and the results are
# plain Python and may change without a new compile
COMPILED = ("calendar", "errors", "events", "f16", "interp", "jit", "kernel", "layout",
            "lower", "record", "simd", "steps", "view")


def cache_directory() -> Path:
    """Where this version of the engine's compiled code is cached."""
    here = Path(__file__).resolve().parent
    sources = [here / f"{name}.py" for name in COMPILED]
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources))
    base = os.environ.get("DTG_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dtg"
    return Path(base) / "numba" / digest.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = str(cache_directory())  # type: ignore[attr-defined]


def is_cached() -> bool:
    """Whether this version of the engine has been compiled and cached already."""
    return any(cache_directory().rglob("kernel.run_slice-*.nbi"))


def compiled(fn: F) -> F:
    return numba.njit(cache=True)(fn)  # type: ignore[return-value]


def internal(fn: F) -> F:
    return numba.njit(cache=True, no_cpython_wrapper=True)(fn)  # type: ignore[call-overload]


def inlined(fn: F) -> F:
    """For the arithmetic of the innermost loops: numba inlines the function into each
    caller (a call per element costs more than the operation)."""
    return numba.njit(cache=True, inline="always")(fn)  # type: ignore[return-value]
