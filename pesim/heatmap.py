"""A picture of a run over the mesh: each PE shaded by the share of the run it was busy,
each link drawn as an arrow as thick and as dark as the wavelets it carried."""

from __future__ import annotations

import os
from typing import Any

from dtg.lair.files import write_atomically
from dtg.pesim.sim import SimResult

SIDE = 0.16  # how far an arrow sits beside the line between PE centres (both directions)


def draw_heatmap(result: SimResult, path: str | os.PathLike[str]) -> None:
    """Busy cycles per PE (over the run's cycles) and wavelets per link, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.patches import FancyArrow

    pes = result.pes
    points = list(pes) + [p for link in result.links for p in link]
    xs = [p[0] for p in points] or [0]
    ys = [p[1] for p in points] or [0]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    cycles = max(result.cycles, 1)
    busy = np.full((y1 - y0 + 1, x1 - x0 + 1), np.nan)
    for (x, y), stats in pes.items():
        busy[y - y0, x - x0] = stats.busy / cycles
    scale = max(6.0, min(14.0, 0.6 * (x1 - x0 + 1)))
    fig, ax = plt.subplots(figsize=(scale + 2, scale * (y1 - y0 + 1) / (x1 - x0 + 1) + 1))
    image = ax.imshow(busy, cmap="Blues", vmin=0, vmax=1, origin="upper",
                      extent=(x0 - 0.5, x1 + 0.5, y1 + 0.5, y0 - 0.5))
    fig.colorbar(image, ax=ax, fraction=0.04, label="busy cycles / run cycles")
    inside = set(pes)
    for p in set(points) - inside:  # external PEs: sources and sinks of streams
        ax.add_patch(plt.Rectangle((p[0] - 0.3, p[1] - 0.3), 0.6, 0.6, color="0.85"))
    most = max(result.links.values(), default=1)
    reds: Any = colormaps["Reds"]
    for (a, b), count in sorted(result.links.items(), key=lambda item: item[1]):
        dx, dy = b[0] - a[0], b[1] - a[1]
        side = (-dy * SIDE, dx * SIDE)  # to the right of the direction of travel
        share = count / most
        ax.add_patch(FancyArrow(a[0] + side[0] + 0.2 * dx, a[1] + side[1] + 0.2 * dy,
                                0.6 * dx, 0.6 * dy, width=0.02 + 0.1 * share,
                                head_width=0.08 + 0.16 * share, head_length=0.12,
                                length_includes_head=True, color=reds(0.3 + 0.7 * share)))
    busiest = sorted(result.links.items(), key=lambda item: -item[1])[:3]
    listed = ", ".join(f"PE[{a[0]},{a[1]}]->PE[{b[0]},{b[1]}] {n}" for (a, b), n in busiest)
    ax.set_title(f"{result.module}: {result.cycles} cycles; busiest links: {listed}",
                 fontsize=9)
    ax.set_xticks(range(x0, x1 + 1))
    ax.set_yticks(range(y0, y1 + 1))
    ax.set_xlabel("PE x (arrows: wavelets per link, darker and thicker = more)")
    ax.set_ylabel("PE y")
    ax.set_xlim(x0 - 0.5, x1 + 0.5)
    ax.set_ylim(y1 + 0.5, y0 - 0.5)
    fig.tight_layout()
    write_atomically(path, lambda handle: fig.savefig(handle, format="png", dpi=100),
                     "the heatmap")
    plt.close(fig)
