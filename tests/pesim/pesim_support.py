"""Helpers for the pesim tests: build a module from text and simulate it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dtg.lair.limits import MAX_SECONDS
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule
from dtg.pe.parser import parse_module_text
from dtg.pesim.sim import SimResult, TensorInfo, simulate
from dtg.pesim.verify import verify_module

ROOT = Path(__file__).resolve().parents[2]
GEMV_DIR = ROOT / "examples" / "handwritten" / "gemv_checkerboard"
GEMV_PE = GEMV_DIR / "gemv_checkerboard.pe"


def build(text: str, config: FabricConfig | None = None) -> PeModule:
    module, locations = parse_module_text(text, "<test>")
    verify_module(module, config, locations=locations)
    return module


def sim(text: str, inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
        **settings: Any) -> SimResult:
    """Parse, verify and simulate; ``settings`` override FabricConfig fields (and
    ``max_seconds`` the wall-time limit)."""
    max_seconds = settings.pop("max_seconds", MAX_SECONDS)
    config = FabricConfig(**settings)
    module = build(text, config)
    arrays = {k: np.asarray(v) for k, v in (inputs or {}).items()}
    specs = {k: TensorInfo(shape, dtype) for k, (shape, dtype) in (outputs or {}).items()}
    return simulate(module, arrays, specs, config=config, max_seconds=max_seconds)
