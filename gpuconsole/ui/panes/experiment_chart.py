"""The Experiments pane's drawings: a progress bar, and $ per unit of work as bars with intervals.

Display-only helpers over the core's analysis: each arm's median cost is a bar (``█``), its 95 %
interval a whisker (``├─┤``) on the same scale, the cheapest arm in the theme's "ok" colour.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.text import Text

from gpuconsole.ui.palette import Palette

if TYPE_CHECKING:  # SciPy loads with the first analysis, not with the app
    from gpuconsole.core.ops.experiments.analysis import Analysis, ArmResult
    from gpuconsole.core.ops.experiments.book import Progress

BAR = "█"
MAX_SCALE = 72  # columns of the widest bar: wider screens show the same chart


def progress_bar(p: Progress, width: int = 8) -> str:
    filled = round(p.fraction * width)
    return f"{BAR * filled}{'░' * (width - filled)} {p.done}/{p.planned}"


def dollars(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def chart_text(analysis: Analysis, width: int, palette: Palette) -> Text:
    """One bar per arm: $ per unit of work, the interval drawn over the same scale."""
    out = Text()
    per = analysis.spec.work.label
    out.append(f"$ per {per} (bar: median, ├─┤: 95% interval)\n", palette.strong)
    measured = [a for a in analysis.arms if a.has_results]
    if not measured:
        out.append("no results yet", palette.dim)
        return out
    top = max(max(a.cost_ci[1], a.cost_per_work) for a in measured) or 1.0
    label_w = min(max(len(a.arm.title) for a in analysis.arms), 22)
    scale_w = min(max(width - label_w - 12, 10), MAX_SCALE)
    cheapest = min(a.cost_per_work for a in measured)
    for a in analysis.arms:
        out.append(f"{a.arm.title[:label_w]:<{label_w}} ")
        if not a.has_results:
            out.append("-".ljust(scale_w) + "\n", palette.dim)
            continue
        out.append_text(_bar(a, top, scale_w, palette, best=a.cost_per_work == cheapest))
        out.append(f" {dollars(a.cost_per_work):>8}\n")
    return out


def _bar(a: ArmResult, top: float, width: int, palette: Palette, *, best: bool) -> Text:
    def at(value: float) -> int:
        return min(max(round(value / top * (width - 1)), 0), width - 1)

    cells = [" "] * width
    end = at(a.cost_per_work)
    for i in range(end + 1):
        cells[i] = BAR
    low, high = at(a.cost_ci[0]), at(a.cost_ci[1])
    for i in range(low, high + 1):
        if cells[i] == " ":
            cells[i] = "─"
    if high > low:
        cells[low] = "├" if cells[low] != BAR or low > end else cells[low]
        cells[high] = "┤" if high > end else cells[high]
    line = Text("".join(cells))
    line.stylize(palette.ok if best else palette.accent, 0, end + 1)
    line.stylize(palette.warn, end + 1, width)
    return line


def number(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"
