"""The fabric settings: every number of the cost table in ``docs/pecode.md``.

A :class:`FabricConfig` is immutable. ``--fabric NAME`` starts from one of the
:data:`PRESETS` (``paper``, the defaults; ``wse2`` and ``wse3``, with the figures the
public Cerebras SDK documentation gives, each sourced in ``docs/pecode.md``);
``--config FABRIC.toml`` then overrides any field by name (flat ``key = value`` lines,
or the same keys under a ``[fabric]`` table). Unknown keys, wrong types and values
outside :data:`RANGES` are errors, so a typo cannot silently leave a default in place.
"""

from __future__ import annotations

import argparse
import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from dtg.errors import LimitError, SimulationError, SourceLoc
from dtg.lair.limits import (
    MAX_BUFFER_WAVELETS,
    MAX_CLOCK_MHZ,
    MAX_COLORS,
    MAX_CONFIG_NESTING,
    MAX_COST,
    MAX_CYCLES,
    MAX_PE_MEMORY,
    MAX_SIMD_WIDTH,
    abbreviate,
    offset_loc,
)
from dtg.lair.parser import read_source


class ConfigError(SimulationError):
    """A fabric configuration file that is malformed or names unknown settings."""


@dataclass(frozen=True)
class FabricConfig:
    """Sizes and costs of the simulated fabric (defaults: ``docs/pecode.md``)."""

    # mesh and router
    colors: int = 24
    buffer_wavelets: int = 4  # router input buffer per (color, input port); core queue per color
    hop_cycles: int = 1  # latency of one link; each link carries one wavelet per cycle
    # core
    memory_bytes: int = 48 * 1024
    task_dispatch: int = 3
    scalar_op: int = 1  # arithmetic, comparison, load, store, send, recv, activate, branch op
    for_setup: int = 2
    for_iteration: int = 3
    if_branch: int = 1
    # SIMD engine
    max_simd_configs: int = 8  # per PE, counting size variants
    simd_config: int = 8  # per variant, charged at the start of main
    simd_startup: int = 4
    simd_variant_select: int = 2
    simd_width_float16: int = 4  # elements per cycle of every float16 operation
    simd_width_float32: int = 1  # of float32 add, sub, max, copy and fill
    simd_width_float32_mul: int = 1  # of float32 multiply-add and multiply
    # run
    clock_mhz: float = 850.0
    cycle_limit: int = 50_000_000

    def simd_width(self, dtype: str, op: str = "fadd") -> int:
        """Elements per cycle of SIMD operation ``op`` computing in ``dtype``."""
        if dtype == "float16":
            return self.simd_width_float16
        return self.simd_width_float32_mul if op in MULTIPLYING else self.simd_width_float32

    def widest(self, dtype: str) -> int:
        """The largest width of any operation in ``dtype`` (for lower bounds)."""
        return max(self.simd_width(dtype, op) for op in ("fadd", "fmac"))

    def microseconds(self, cycles: int) -> float:
        return cycles / self.clock_mhz

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


MULTIPLYING = frozenset({"fmac", "fmul"})


PRESETS: dict[str, FabricConfig] = {
    # the defaults, chosen for this project: the paper publishes no figure
    "paper": FabricConfig(),
    # public figures for WSE-2 (sources in docs/pecode.md, "Fabric presets"); the
    # settings without a public figure keep the paper preset's values
    "wse2": FabricConfig(hop_cycles=2, simd_width_float16=4, simd_width_float32=2,
                         simd_width_float32_mul=1),
    # public figures for WSE-3; its hop latency is not public and stays 1 as in paper
    "wse3": FabricConfig(simd_width_float16=8, simd_width_float32=4,
                         simd_width_float32_mul=1),
}
"""Named fabrics for ``--fabric`` (``docs/pecode.md``, "Fabric presets")."""


def preset(name: str) -> FabricConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown fabric {name!r}; known fabrics are "
                          f"{', '.join(PRESETS)}")
    return PRESETS[name]


def chosen_fabric(name: str = "paper", config_path: str | Path | None = None) -> FabricConfig:
    """What ``--fabric NAME [--config FABRIC.toml]`` ask for: the preset, with the
    file's settings over it."""
    base = preset(name)
    return load_config(config_path, base) if config_path else base


def add_fabric_arguments(parser: argparse.ArgumentParser) -> None:
    """``--fabric`` and ``--config``, the same for the compiler and the simulator."""
    parser.add_argument("--fabric", choices=tuple(PRESETS), default="paper",
                        help="the fabric's costs and sizes: paper (the defaults), wse2 or wse3 "
                             "(public Cerebras SDK figures; docs/pecode.md, \"Fabric "
                             "presets\"); default %(default)s")
    parser.add_argument("--config", metavar="FABRIC.toml",
                        help="override settings of the fabric (costs, sizes, cycle limit)")


_COST = (0, MAX_COST)
RANGES: dict[str, tuple[float, float]] = {
    "colors": (1, MAX_COLORS),
    "buffer_wavelets": (1, MAX_BUFFER_WAVELETS),
    "hop_cycles": (1, MAX_COST),
    "memory_bytes": (1, MAX_PE_MEMORY),
    "task_dispatch": _COST,
    "scalar_op": _COST,
    "for_setup": _COST,
    "for_iteration": _COST,
    "if_branch": _COST,
    "max_simd_configs": (1, MAX_SIMD_WIDTH),
    "simd_config": _COST,
    "simd_startup": _COST,
    "simd_variant_select": _COST,
    "simd_width_float16": (1, MAX_SIMD_WIDTH),
    "simd_width_float32": (1, MAX_SIMD_WIDTH),
    "simd_width_float32_mul": (1, MAX_SIMD_WIDTH),
    "clock_mhz": (0, MAX_CLOCK_MHZ),  # exclusive below: a positive frequency
    "cycle_limit": (1, MAX_CYCLES),
}
"""The accepted range of every setting (``docs/limits.md``)."""


def config_from_mapping(values: dict[str, Any], *, where: str = "the fabric settings",
                        base: FabricConfig | None = None) -> FabricConfig:
    """Override ``base`` (default: the defaults) with ``values``; reject unknown keys and
    values outside :data:`RANGES` (for numbers: NaN and infinities too)."""
    base = base or FabricConfig()
    known = {f.name: f for f in fields(FabricConfig)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        listed = ", ".join(abbreviate(u) for u in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ConfigError(f"unknown setting{'s' if len(unknown) > 1 else ''} {listed}{more} "
                          f"in {where}; known settings are {', '.join(known)}")
    changes: dict[str, Any] = {}
    for name, value in values.items():
        default = getattr(base, name)
        if isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            kind = "a number" if isinstance(default, float) else "an integer"
            raise ConfigError(f"setting '{name}' in {where} is {_describe(value)}; expected "
                              f"{kind}")
        low, high = RANGES[name]
        if isinstance(value, float):
            if not (math.isfinite(value) and low < value <= high):
                raise ConfigError(f"setting '{name}' in {where} is {value}; expected a finite "
                                  f"number above {_bound(low)} and at most {_bound(high)}")
        elif not low <= value <= high:
            raise ConfigError(f"setting '{name}' in {where} is {value}; expected at least "
                              f"{_bound(low)} and at most {_bound(high)}")
        changes[name] = value
    return replace(base, **changes)


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _describe(value: Any) -> str:
    """A setting's value for a message; a long text is described, not quoted."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 24 else f"a text of {len(value)} characters"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return abbreviate(repr(value))


def _nesting_problem(text: str) -> int | None:
    """The offset where ``text`` nests arrays or tables deeper than
    :data:`MAX_CONFIG_NESTING` (tomllib is recursive), outside strings and comments."""
    depth = 0
    quote: str | None = None
    comment = False
    for offset, char in enumerate(text):
        if comment:
            comment = char != "\n"
        elif quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > MAX_CONFIG_NESTING:
                return offset
        elif char in "]}":
            depth = max(0, depth - 1)
    return None


def load_config(path: str | Path, base: FabricConfig | None = None) -> FabricConfig:
    """Read a TOML file of settings (top-level keys or a ``[fabric]`` table) over
    ``base`` (default: the paper preset), within the input budget: a regular UTF-8 text
    file of at most 1 MiB, nested at most :data:`MAX_CONFIG_NESTING` deep."""
    text = read_source(path)
    offset = _nesting_problem(text)
    if offset is not None:
        raise LimitError(f"arrays or tables nested more than {MAX_CONFIG_NESTING} levels deep, "
                         "the limit; fabric settings are flat key = value lines",
                         offset_loc(SourceLoc(str(path), 1, 1), text, offset))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    if set(data) == {"fabric"} and isinstance(data["fabric"], dict):
        data = data["fabric"]
    return config_from_mapping(data, where=str(path), base=base)
