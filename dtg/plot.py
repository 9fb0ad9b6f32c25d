"""Pictures of sweeps: simulated cycles of every point beside the mapping's bound."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtg.errors import InputError
from dtg.lair.files import write_atomically

Row = dict[str, Any]


def label(row: Row) -> str:
    """What distinguishes a point: its mapping's file name and parameter values, and
    SIMD and fabric when they are not the defaults."""
    parts = [Path(row["mapping"]).stem if row.get("mapping") else Path(row["program"]).stem]
    parts += [f"{k.removeprefix('param.')}={v}" for k, v in row.items()
              if k.startswith("param.")]
    if row.get("simd") is False:
        parts.append("scalar")
    if row.get("fabric", "paper") != "paper":
        parts.append(str(row["fabric"]))
    return " ".join(parts)


def _plain(text: str) -> str:
    """``text`` shown as written: matplotlib reads ``$...$`` as mathematics, and a stray
    ``$`` in a title or mapping name would fail the whole picture."""
    return text.replace("$", "\\$")


def log_scale(values: Sequence[float]) -> bool:
    """Whether values this spread need a logarithmic axis: on a linear one, the small
    bars would be slivers beside the largest (more than 20 times as long)."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) > 20 * min(positive)


def plot_sweep(rows: Sequence[Row], path: str | Path, *, title: str | None = None) -> None:
    """A horizontal bar per point, fastest first: simulated cycles (blue when verified,
    red when the outputs differ), the bound as a black tick, failures listed as such.
    The axis is logarithmic when the cycles and bounds span more than a factor of 20."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise InputError("the sweep has no rows to plot")
    ran = sorted((r for r in rows if r.get("cycles") is not None), key=lambda r: r["cycles"])
    failed = [r for r in rows if r.get("cycles") is None]
    shown = ran + failed
    values = [float(r["cycles"]) for r in ran] + [float(r["bound"]) for r in ran
                                                   if r.get("bound")]
    log = log_scale(values)
    base = 10 ** math.floor(math.log10(min(v for v in values if v > 0))) if log else 0
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.35 * len(shown)))
    try:
        ys = list(range(len(shown)))[::-1]
        for y, r in zip(ys, shown, strict=True):
            if r.get("cycles") is None:
                reason = (str(r.get("error") or "").splitlines() or [""])[0][:80]
                ax.text(base or 0, y, _plain("  failed: " + reason), va="center", fontsize=8,
                        color="firebrick")
                continue
            cycles = r["cycles"]
            ax.barh(y, max(cycles - base, 0), left=base, height=0.6,
                    color="tab:blue" if r.get("verified") else "tab:red")
            ax.text(max(cycles, base), y, f" {cycles}", va="center", fontsize=8)
            if r.get("bound"):
                ax.plot([r["bound"]] * 2, [y - 0.4, y + 0.4], color="black", linewidth=2)
        ax.set_yticks(ys, [_plain(label(r)) for r in shown], fontsize=8)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(left=base)
        ax.set_xlabel("simulated cycles" + (", logarithmic" if log else "") +
                      " (black tick: the mapping's lower bound)")
        ax.set_title(_plain(title) if title is not None else
                     _plain(f"{Path(str(rows[0]['program'])).name}: {len(ran)} of {len(rows)} "
                            "points ran (red: outputs differ)"))
        ax.margins(x=0.15)
        ax.set_ylim(-0.7, len(shown) - 0.3)
        fig.tight_layout()
        write_atomically(path, lambda handle: fig.savefig(handle, format="png", dpi=110),
                         "the picture")
    finally:
        plt.close(fig)
