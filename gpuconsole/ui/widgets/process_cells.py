"""A GPU process's cells, as nvitop shows one: PID, user, GPU memory, SM %, CPU %, host memory
(RSS), how long it has run and its command, shared by the GPU detail view and the GPUs pane's
process view. What the host cannot say is a dim N/A, never 0."""

from __future__ import annotations

from rich.text import Text

from gpuconsole.model import GpuProcess
from gpuconsole.ui.format import age
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.widgets.cells import right, text

THRESHOLDS = tuple[float, float]
# A GPU process's columns, here and in the GPUs pane's process view (which adds where it runs):
# each figure's column holds its label and a sort arrow (GPU-MEM▼).
PROCESS_COLUMNS = [
    ("PID", "pid", 7),
    ("USER", "user", 7),
    ("GPU-MEM", "gpumem", 8),
    ("SM%", "sm", 4),
    ("CPU%", "cpu", 5),
    ("RSS", "rss", 5),
    ("TIME", "time", 5),
    ("COMMAND", "command", None),
]


def gib(mib: float | None) -> str:
    return "N/A" if mib is None else f"{mib / 1024:.1f}G"


def percent(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}"


def process_fields(proc: GpuProcess, now: float, palette: Palette, util_t: THRESHOLDS) -> dict[str, Text]:
    """The cells of one process by :data:`PROCESS_COLUMNS` key, as nvitop shows a process: what the
    host cannot say is a dim N/A."""
    dim = palette.dim
    return {
        "pid": right(proc.pid),
        "user": text(proc.user or "?", None if proc.user else dim),
        "gpumem": right(gib(proc.memory_used_mib)),
        "sm": right(percent(proc.sm_utilization),
                    dim if proc.sm_utilization is None else palette.level(proc.sm_utilization, util_t)),
        "cpu": right(percent(proc.cpu_percent), dim if proc.cpu_percent is None else None),
        "rss": right(gib(proc.rss_mib), dim if proc.rss_mib is None else None),
        "time": right("N/A", dim) if proc.started is None else right(age(now - proc.started)),
        "command": text(proc.command or proc.name),
    }
