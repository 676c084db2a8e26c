"""Bars per device drawn on a `Scene`: the bytes each device holds, or its training memory by kind.

Each bar is one device, named under it and coloured as the device (bytes)
or stacked by kind with colour and hatching (memory), so the chart reads in
grey and for every colour vision. The y axis has a few round ticks.
"""

from __future__ import annotations

import math

from matplotlib.ticker import MaxNLocator

from course_utils.memory.state import MemoryReport
from course_utils.viz.canvas import Scene, line_height, text_size
from course_utils.viz.figures import FONT, SMALL
from course_utils.viz.palette import MEMORY_COLORS

HATCHES = {"weights": "", "gradients": "//", "optimizer": "..", "activations": "xx", "gathered": "\\\\",
           "scratch": "--"}
BAR_GID = "bar"  # every bar segment, for tests; its kind is in `Box.hatch` and its colour
MAX_LABELS = 16  # device names under the bars; more devices get every k-th


def bytes_bars(scene: Scene, rect, totals: dict[str, int], colors, *, title: str) -> None:
    """One bar per device, `totals[device]` bytes high, in the device's colour (`colors[device]`)."""
    stacks = {device: [(total, colors[device], "")] for device, total in totals.items()}
    _bars(scene, rect, stacks, title=title, ylabel="bytes", edge="black")


def memory_bars(scene: Scene, rect, memory: MemoryReport, *, legend: bool = True) -> None:
    """Stacked bars per device: weights, gradients, optimizer state; a legend names each kind at the right."""
    stacks = {r.device: _memory_stack(r) for r in memory.rows}
    _stacked_with_legend(scene, rect, stacks, title=f"Training memory per device (largest: {memory.max_total:,} "
                         "bytes)", legend=legend)


def memory_by_bars(scene: Scene, rect, reports: dict[str, MemoryReport], *, title: str) -> None:
    """One stacked bar per report (a distribution, a mesh shape): the device that holds the most."""
    stacks = {label: _memory_stack(max(report.rows, key=lambda r: r.total)) for label, report in reports.items()}
    _stacked_with_legend(scene, rect, stacks, title=title, legend=True, totals=True)


def _memory_stack(row) -> list:
    return [(getattr(row, kind), color, HATCHES[kind]) for kind, color in MEMORY_COLORS.items()]


def _stacked_with_legend(scene: Scene, rect, stacks: dict[str, list], *, title: str, legend: bool,
                         totals: bool = False) -> None:
    x, y, w, h = rect
    room = 1.2 if legend else 0.0
    _bars(scene, (x, y, w - room, h), stacks, title=title, ylabel="bytes per device", edge="white", totals=totals)
    if legend:  # under the title's line, so that a long title never runs into it
        top = y + h - line_height(FONT) - 0.1
        for k, (kind, color) in enumerate(MEMORY_COLORS.items()):
            at = top - 0.25 - 0.22 * k
            scene.box(x + w - room + 0.15, at, 0.28, 0.16, face=color, edge="white", linewidth=0.5,
                      hatch=HATCHES[kind], z=2)
            scene.text(x + w - room + 0.5, at + 0.08, kind, SMALL, ha="left")


def _bars(scene: Scene, rect, stacks: dict[str, list], *, title: str, ylabel: str, edge: str,
          totals: bool = False) -> None:
    """Bars of stacked (value, colour, hatch) segments in `rect` (inches), with axes, ticks and names
    (and each bar's total above it, with `totals`)."""
    x, y, w, h = rect
    sums = [sum(v for v, _, _ in segments) for segments in stacks.values()]
    ticks = [t for t in MaxNLocator(nbins=4, integer=True).tick_values(0, max(max(sums), 1)) if t >= 0]
    top = max(ticks[-1], max(sums), 1) * (1.12 if totals else 1)
    labels = [f"{int(t):,}" for t in ticks]
    left = max(text_size(label, SMALL)[0] for label in labels) + 0.1 + line_height(SMALL) + 0.1
    x0, w0 = x + left, w - left
    y0, h0 = y + 0.3, h - 0.3 - line_height(FONT) - 0.1
    slot = w0 / len(stacks)
    step = math.ceil(len(stacks) / MAX_LABELS)
    for i, (device, segments) in enumerate(stacks.items()):
        bottom = 0
        for value, color, hatch in segments:
            scene.box(x0 + (i + 0.1) * slot, y0 + h0 * bottom / top, 0.8 * slot, h0 * value / top, face=color,
                      edge=edge, linewidth=0.5, hatch=hatch, gid=BAR_GID, z=2)
            bottom += value
        if i % step == 0:
            scene.text(x0 + (i + 0.5) * slot, y0 - 0.06, device, SMALL, va="top")
        if totals:
            scene.text(x0 + (i + 0.5) * slot, y0 + h0 * bottom / top + 0.04, f"{bottom:,}", SMALL, va="bottom")
    for tick, label in zip(ticks, labels):
        at = y0 + h0 * tick / top
        scene.line((x0 - 0.05, x0), (at, at), linewidth=0.8)
        scene.text(x0 - 0.08, at, label, SMALL, ha="right")
    scene.line((x0, x0, x0 + w0), (y0 + h0, y0, y0), linewidth=0.8)
    scene.text(x + 0.02, y0 + h0 / 2, ylabel, SMALL, rotation=90, va="top")
    scene.text(x0 + w0 / 2, y0 + h0 + 0.08, title, FONT, va="bottom")


def grouped_bars(scene: Scene, rect, groups: dict[str, list[int]], series: list[tuple[str, str, str]], *,
                 title: str, xlabel: str) -> None:
    """Side by side bars, one group per label of `groups` (a value per series), each bar's value above it;
    `series` gives each bar of a group its (name, colour, hatch), named in a legend at the right."""
    x, y, w, h = rect
    room = max(text_size(name, SMALL)[0] for name, _, _ in series) + 0.6
    x, w = x, w - room
    values = [v for group in groups.values() for v in group]
    ticks = [t for t in MaxNLocator(nbins=4, integer=True).tick_values(0, max(max(values), 1)) if t >= 0]
    top = max(ticks[-1], max(values), 1) * 1.12
    labels = [f"{int(t):,}" for t in ticks]
    left = max(text_size(label, SMALL)[0] for label in labels) + 0.1 + line_height(SMALL) + 0.1
    x0, w0 = x + left, w - left
    y0, h0 = y + 0.3 + line_height(SMALL), h - 0.3 - line_height(SMALL) - line_height(FONT) - 0.1
    slot = w0 / len(groups)
    bar = 0.8 * slot / len(series)
    for i, (label, group) in enumerate(groups.items()):
        for k, (value, (_, color, hatch)) in enumerate(zip(group, series)):
            left_edge = x0 + (i + 0.1) * slot + k * bar
            scene.box(left_edge, y0, bar, h0 * value / top, face=color, edge="white", linewidth=0.5, hatch=hatch,
                      gid=BAR_GID, z=2)
            if value:
                scene.text(left_edge + bar / 2, y0 + h0 * value / top + 0.04, f"{value:,}", SMALL, va="bottom")
        scene.text(x0 + (i + 0.5) * slot, y0 - 0.06, label, SMALL, va="top")
    for tick, label in zip(ticks, labels):
        at = y0 + h0 * tick / top
        scene.line((x0 - 0.05, x0), (at, at), linewidth=0.8)
        scene.text(x0 - 0.08, at, label, SMALL, ha="right")
    scene.line((x0, x0, x0 + w0), (y0 + h0, y0, y0), linewidth=0.8)
    scene.text(x + 0.02, y0 + h0 / 2, "bytes per device", SMALL, rotation=90, va="top")
    scene.text(x0 + w0 / 2, y - 0.0 + 0.02, xlabel, SMALL, va="bottom")
    scene.text(x0 + w0 / 2, y0 + h0 + 0.08, title, FONT, va="bottom")
    at = y + h - line_height(FONT) - 0.1  # the legend, under the title's line: one entry under the other
    for name, color, hatch in series:
        lines = name.count("\n") + 1
        at -= 0.1 + lines * line_height(SMALL)
        scene.box(x + w + 0.15, at + (lines - 1) * line_height(SMALL), 0.28, 0.16, face=color, edge="white",
                  linewidth=0.5, hatch=hatch, z=2)
        scene.text(x + w + 0.5, at + lines * line_height(SMALL) - 0.02, name, SMALL, ha="left", va="top")
