"""Pictures of sweeps: simulated cycles of every point beside the mapping's bound."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtg.lair.diagnostics import InputError
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


def plot_sweep(rows: Sequence[Row], path: str | Path, *, title: str | None = None) -> None:
    """A horizontal bar per point, fastest first: simulated cycles (blue when verified,
    red when the outputs differ), the bound as a black tick, failures listed as such."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise InputError("the sweep has no rows to plot")
    ran = sorted((r for r in rows if r.get("cycles") is not None), key=lambda r: r["cycles"])
    failed = [r for r in rows if r.get("cycles") is None]
    shown = ran + failed
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.35 * len(shown)))
    ys = list(range(len(shown)))[::-1]
    for y, r in zip(ys, shown, strict=True):
        if r.get("cycles") is None:
            ax.text(0, y, "  failed: " + str(r.get("error", "")).splitlines()[0][:80],
                    va="center", fontsize=8, color="firebrick")
            continue
        ax.barh(y, r["cycles"], color="tab:blue" if r.get("verified") else "tab:red",
                height=0.6)
        ax.text(r["cycles"], y, f" {r['cycles']}", va="center", fontsize=8)
        if r.get("bound"):
            ax.plot([r["bound"]] * 2, [y - 0.4, y + 0.4], color="black", linewidth=2)
    ax.set_yticks(ys, [label(r) for r in shown], fontsize=8)
    ax.set_xlabel("simulated cycles (black tick: the mapping's lower bound)")
    ax.set_title(title or f"{Path(str(rows[0]['program'])).name}: {len(ran)} of {len(rows)} "
                 "points ran (red: outputs differ)")
    ax.margins(x=0.15)
    fig.tight_layout()
    write_atomically(path, lambda handle: fig.savefig(handle, format="png", dpi=110),
                     "the picture")
    plt.close(fig)
