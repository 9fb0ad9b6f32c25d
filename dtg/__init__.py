"""dtg: a polyhedral compiler (``dtg-codegen``) and PE-mesh simulator (``pesim``) for
wafer-scale dataflow hardware.

The Python API (``docs/api.md``)::

    import dtg
    c = dtg.compile("gemv.lair", "gemv.map", params={"M": 64})
    r = dtg.simulate(c)
    print(r.cycles, r.bound.cycles, r.verified)

The compiler and simulator themselves are the subpackages ``dtg.lair`` (front end),
``dtg.mapping``, ``dtg.codegen`` and ``dtg.pesim``. The names below are loaded when
first used, so that importing one subpackage does not import them all.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("dtg")
except PackageNotFoundError:  # pragma: no cover (run from a tree that is not installed)
    __version__ = "0+unknown"

_WHERE = {
    "compile": "dtg.api", "simulate": "dtg.api", "load": "dtg.api",
    "module_text": "dtg.api", "Result": "dtg.api",
    "example": "dtg.catalog", "examples": "dtg.catalog", "Example": "dtg.catalog",
    "Compilation": "dtg.codegen.pipeline", "DtgError": "dtg.errors",
    "FabricConfig": "dtg.pe.fabric", "search": "dtg.mapsearch",
    "SearchResult": "dtg.mapsearch", "import_onnx": "dtg.lair.onnx_import",
    "Imported": "dtg.lair.onnx_import", "place": "dtg.api", "link": "dtg.api",
    "NetworkPlan": "dtg.mapping.network",
}

if TYPE_CHECKING:
    from dtg.api import Result, compile, link, load, module_text, place, simulate
    from dtg.catalog import Example, example, examples
    from dtg.codegen.pipeline import Compilation
    from dtg.errors import DtgError
    from dtg.lair.onnx_import import Imported, import_onnx
    from dtg.mapping.network import NetworkPlan
    from dtg.mapsearch import SearchResult, search
    from dtg.pe.fabric import FabricConfig


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'dtg' has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = ["Compilation", "DtgError", "Example", "FabricConfig", "Imported", "NetworkPlan",
           "Result", "SearchResult", "__version__", "compile", "example", "examples",
           "import_onnx", "link", "load", "module_text", "place", "search", "simulate"]
