"""The fabric settings: every number of the cost table in ``docs/pecode.md``.

A :class:`FabricConfig` is immutable; ``--config FABRIC.toml`` overrides any field by
name (flat ``key = value`` lines, or the same keys under a ``[fabric]`` table). Unknown
keys, wrong types and out-of-range values are errors, so a typo cannot silently leave a
default in place.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from lair.diagnostics import InputError, SimulationError


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
    simd_width_float16: int = 4
    simd_width_float32: int = 1
    # run
    clock_mhz: float = 850.0
    cycle_limit: int = 50_000_000

    def simd_width(self, dtype: str) -> int:
        return self.simd_width_float16 if dtype == "float16" else self.simd_width_float32

    def microseconds(self, cycles: int) -> float:
        return cycles / self.clock_mhz

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_POSITIVE = {"colors", "buffer_wavelets", "hop_cycles", "memory_bytes", "max_simd_configs",
             "simd_width_float16", "simd_width_float32", "cycle_limit", "clock_mhz"}


def config_from_mapping(values: dict[str, Any], *, where: str = "the fabric settings",
                        base: FabricConfig | None = None) -> FabricConfig:
    """Override ``base`` (default: the defaults) with ``values``; reject unknown keys."""
    base = base or FabricConfig()
    known = {f.name: f for f in fields(FabricConfig)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown setting{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(unknown)} in {where}; known settings are "
                          f"{', '.join(known)}")
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
            raise ConfigError(f"setting '{name}' in {where} is {value!r}; expected {kind}")
        low = 1 if name in _POSITIVE else 0
        if value < low:
            raise ConfigError(f"setting '{name}' in {where} is {value}; expected at least {low}")
        changes[name] = value
    return replace(base, **changes)


def load_config(path: str | Path) -> FabricConfig:
    """Read a TOML file of settings (top-level keys or a ``[fabric]`` table)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    if set(data) == {"fabric"} and isinstance(data["fabric"], dict):
        data = data["fabric"]
    return config_from_mapping(data, where=str(path))
