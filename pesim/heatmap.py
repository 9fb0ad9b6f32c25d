"""A picture of a run over the mesh: where the time went and where the wavelets went.

Each PE is shaded by the share of the run it was busy. Each directed link is a short
segment beside the line between the two PE centres (on the right of its direction of
travel, so the two directions of a pair never overlap) with a head at its end, coloured
by the wavelets it carried on a scale of its own: a hot link stands out by colour at any
mesh size, where arrows drawn by thickness blur into a uniform texture beyond a few PEs.
The busiest links are numbered, as the title lists them; external PEs (the sources and
sinks of streams) are grey squares labelled with their tensors.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtg.lair.files import write_atomically
from dtg.lair.limits import counted
from dtg.pe.ir import PeModule
from dtg.pesim.sim import SimResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Pe = tuple[int, int]
SIDE = 0.17  # how far a link sits beside the line between PE centres (cells)
SPAN = (0.14, 0.80)  # where a link's segment starts and ends along it (cells)
TOP = 3  # links numbered and listed in the title
MAX_DRAWN_LINKS = 50_000  # more would take matplotlib minutes; the busiest are drawn
HOT = 1.2  # a link is numbered when it carries this much over the median, and more than
# any link not listed
HEADS_FROM = 24.0  # points per cell from which every link gets its head
LINK_COLORS = "YlOrRd"
BUSY_COLORS = "Blues"


def stream_ends(module: PeModule) -> dict[Pe, str]:
    """The external PE of every stream, with the tensors it sends or collects
    (``x in``, ``y out``)."""
    import islpy as isl

    from dtg.mapping.poly import points

    ends: dict[Pe, list[str]] = {}
    for stream in module.streams:
        pes = isl.Map(stream.relation).range().unwrap().domain()
        for pe in points(pes):
            label = f"{stream.tensor} {'in' if stream.direction == 'input' else 'out'}"
            if label not in ends.setdefault((pe[0], pe[1]), []):
                ends[(pe[0], pe[1])].append(label)
    return {pe: "\n".join(labels) for pe, labels in ends.items()}


Outline = tuple[str, int, int, int, int]  # a named region: name, x0, y0, width, height


def draw_heatmap(result: SimResult, path: str | os.PathLike[str],
                 module: PeModule | None = None, regions: Sequence[Outline] = (),
                 wafer: Outline | None = None) -> None:
    """Busy cycles per PE (over the run's cycles) and wavelets per link, as a PNG; with
    ``module``, its external PEs are labelled with their streams; ``regions`` (a
    network's layers) are outlined and named, on the whole ``wafer`` where given (the
    PEs outside the module drawn blank)."""
    import matplotlib.pyplot as plt

    fig = heatmap_figure(result, module, regions, wafer)
    try:
        write_atomically(path, lambda handle: fig.savefig(handle, format="png", dpi=100),
                         "the heatmap")
    finally:
        plt.close(fig)


def heatmap_figure(result: SimResult, module: PeModule | None = None,
                   regions: Sequence[Outline] = (), wafer: Outline | None = None) -> Figure:
    """The picture :func:`draw_heatmap` writes, as a matplotlib figure (the caller
    closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection
    from matplotlib.colors import ListedColormap, Normalize

    pes = result.pes
    ends = stream_ends(module) if module is not None else {}
    points = list(pes) + [p for link in result.links for p in link] + list(ends)
    xs = [p[0] for p in points] or [0]
    ys = [p[1] for p in points] or [0]
    if wafer is not None:
        xs += [wafer[1], wafer[1] + wafer[3] - 1]
        ys += [wafer[2], wafer[2] + wafer[4] - 1]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    across, down = x1 - x0 + 1, y1 - y0 + 1
    cycles = max(result.cycles, 1)
    busy = np.full((down, across), np.nan)
    for (x, y), stats in pes.items():
        busy[y - y0, x - x0] = stats.busy / cycles
    width = max(6.0, min(15.0, 0.45 * across))
    height = width * down / across
    fig, ax = plt.subplots(figsize=(width + 3.2, height + 1.4), layout="constrained")
    # a light part of the scale, so that the links stay visible over the busiest PEs
    shades = ListedColormap(colormaps[BUSY_COLORS](np.linspace(0.0, 0.7, 256)))
    image = ax.imshow(busy, cmap=shades, vmin=0, vmax=1, origin="upper",
                      extent=(x0 - 0.5, x1 + 0.5, y1 + 0.5, y0 - 0.5))
    if pes:
        top_pe = max(pes, key=lambda pe: (pes[pe].busy, -pe[1], -pe[0]))
        ax.add_patch(plt.Rectangle((top_pe[0] - 0.5, top_pe[1] - 0.5), 1, 1, fill=False,
                                   ec="black", lw=1.5, zorder=2))
    if wafer is not None:
        ax.add_patch(plt.Rectangle((wafer[1] - 0.5, wafer[2] - 0.5), wafer[3], wafer[4],
                                   fill=False, ec="black", lw=1.0, zorder=2))
        ax.text(wafer[1] + wafer[3] - 0.7, wafer[2] + wafer[4] - 0.7, wafer[0], ha="right",
                va="bottom", fontsize=8, zorder=5)
    for name, rx, ry, rw, rh in regions:
        ax.add_patch(plt.Rectangle((rx - 0.5, ry - 0.5), rw, rh, fill=False, ec="0.15",
                                   lw=1.2, ls="--", zorder=2))
        ax.text(rx - 0.3, ry - 0.3, name, ha="left", va="top", fontsize=8, zorder=5,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                      "alpha": 0.7})
    cell = 72 * width / across  # points per cell
    for pe in set(points) - set(pes):  # external PEs: sources and sinks of streams
        ax.add_patch(plt.Rectangle((pe[0] - 0.4, pe[1] - 0.4), 0.8, 0.8, color="0.82"))
        if pe in ends:
            ax.text(pe[0], pe[1], ends[pe], ha="center", va="center", clip_on=True,
                    fontsize=max(4.0, min(9.0, cell / (2.2 + max(map(len, ends[pe].split()))))))

    links = sorted(result.links.items(), key=lambda item: item[1])
    every = [n for _, n in links]
    links = links[-MAX_DRAWN_LINKS:]  # (on a wafer: the busiest, drawable in seconds)
    most = max((n for _, n in links), default=1)
    norm = Normalize(vmin=0, vmax=most)
    colors: Any = colormaps[LINK_COLORS]
    segments, heads, counts = [], [], []
    for (a, b), count in links:
        dx, dy = b[0] - a[0], b[1] - a[1]
        sx, sy = -dy * SIDE, dx * SIDE  # to the right of the direction of travel
        start = (a[0] + sx + SPAN[0] * dx, a[1] + sy + SPAN[0] * dy)
        end = (a[0] + sx + SPAN[1] * dx, a[1] + sy + SPAN[1] * dy)
        segments.append((start, end))
        heads.append((end, _HEAD.get((dx, dy), "o")))
        counts.append(count)
    shares = np.asarray(counts, dtype=float) / most if counts else np.zeros(0)
    line = max(0.5, min(4.0, 0.05 * cell))  # points; the busiest link gets 1.5 times it
    drawn = LineCollection(segments, cmap=colors, norm=norm, capstyle="butt",
                           linewidths=line * (0.3 + 1.2 * shares), zorder=3)
    drawn.set_array(np.asarray(counts, dtype=float))
    ax.add_collection(drawn)
    # heads on every link while they are legible, else on the busiest links only
    headed = range(len(heads)) if cell >= HEADS_FROM else range(
        max(0, len(heads) - TOP), len(heads))
    for marker in set(m for _, m in heads):
        chosen = [k for k in headed if heads[k][1] == marker]
        ax.scatter([heads[k][0][0] for k in chosen], [heads[k][0][1] for k in chosen],
                   c=[counts[k] for k in chosen], cmap=colors, norm=norm, marker=marker,
                   s=(2.2 * line) ** 2 * (0.3 + 1.2 * shares[chosen]), linewidths=0,
                   zorder=4)
    ranked = sorted(result.links.items(), key=lambda item: (-item[1], item[0]))
    busiest = ranked[:TOP]
    typical = float(np.median(every)) if every else 0.0
    below = ranked[TOP][1] if len(ranked) > TOP else 0
    for rank, ((a, b), count) in enumerate(busiest, 1):
        if count <= HOT * typical or count <= below:  # a number would pick among equals
            continue
        dx, dy = b[0] - a[0], b[1] - a[1]
        ax.annotate(str(rank), (a[0] + 0.5 * dx - dy * 0.38, a[1] + 0.5 * dy + dx * 0.38),
                    ha="center", va="center", zorder=5, fontsize=max(5.0, min(9.0, cell / 4)),
                    bbox={"boxstyle": "circle,pad=0.15", "fc": "white", "ec": "black",
                          "lw": 0.6})

    fig.colorbar(drawn, ax=ax, fraction=0.035, pad=0.01,
                 label="wavelets per link (drawn right of the direction of travel)")
    fig.colorbar(image, ax=ax, fraction=0.035, pad=0.01, label="busy cycles / run cycles")
    listed = "; ".join(f"{k} PE[{a[0]},{a[1]}]->PE[{b[0]},{b[1]}] {n}"
                       for k, ((a, b), n) in enumerate(busiest, 1))
    done = "" if result.complete else " (interrupted)"
    title = f"{result.module}: {counted(result.cycles, 'cycle')}{done} on {counted(len(pes), 'PE')}"
    if pes:
        share = pes[top_pe].busy / cycles
        title += f"; busiest PE (outlined) PE[{top_pe[0]},{top_pe[1]}] {share:.0%} busy"
    if counts:
        title += (f"\nlinks carry {min(every)} to {most} wavelets (median {typical:g}); "
                  f"busiest: {listed}")
        if len(every) > len(links):
            title += f"; the {len(links):,} busiest of {len(every):,} links drawn"
    ax.set_title(title, fontsize=9)
    step = max(1, math.ceil(max(across, down) / 20))
    ax.set_xticks(range(x0, x1 + 1, step))
    ax.set_yticks(range(y0, y1 + 1, step))
    ax.set_xlabel("PE x (grey squares: external PEs, the streams' sources and sinks)")
    ax.set_ylabel("PE y")
    ax.set_xlim(x0 - 0.5, x1 + 0.5)
    ax.set_ylim(y1 + 0.5, y0 - 0.5)
    return fig


# the marker that points along a link's direction (y grows downwards on the picture)
_HEAD = {(1, 0): ">", (-1, 0): "<", (0, 1): "v", (0, -1): "^"}
