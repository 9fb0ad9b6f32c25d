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


GROUPS = """
module groups
mesh PE[1, 1]
input A KIND color 0 { A[i = 0:3, j = 0:2] -> [PE[0, -1] -> index[i, j]] }
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[4][3] store B;
  array float32 land[LAND];
  array float32 seen[4] store S;
  int g = 0;
  route 0: N -> RAMP;
  task got data color 0 SPARSE batch 4 land land groups G @R ONCE {
    for (j = 0; j <= G - 1; j++) {
      for (k = 0; k <= 2; k++) {
        a[g + j][k] = land[slot + 4 * j + k];
      }
    }
    for (n = 1; n <= count; n++) {
      seen[g // G] += 1.0;
    }
    g += G;
  }
}
"""


def groups(kind: str, g: int, *, once: bool = False, land: int | None = None,
           ring: int = 1) -> str:
    """A module taking a 4 x 3 input (dense or sparse) in batches of ``g`` whole groups,
    landed in a ring of ``ring`` batches."""
    return GROUPS.replace("KIND", kind).replace("SPARSE", "sparse" if kind == "sparse" else "")\
        .replace("ONCE", "once" if once else "").replace("LAND", str(land or 4 * g * ring))\
        .replace("@R", f"ring {ring}" if ring > 1 else "").replace("G", str(g))
