"""The GPUs pane: one row per GPU keyed by UUID, MIG slices as child rows.

Keys: ``enter`` opens the GPU's detail view (sparklines of the last minutes, processes, slices).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.message import Message

from gpuconsole.core.attribution import attribute
from gpuconsole.model import FleetSnapshot, Gpu, MigMode, MigSlice, SourceKind
from gpuconsole.ui.format import bar, money, short_node
from gpuconsole.ui.palette import (
    MEMORY_THRESHOLDS,
    TEMPERATURE_THRESHOLDS,
    UTIL_THRESHOLDS,
    Palette,
)
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.live_table import LiveTable, Row, right, text

COLUMNS = [
    ("NODE", "node", 14),
    ("#", "index", 2),
    ("MODEL", "model", 11),
    ("UTIL", "util", 10),
    ("MEMORY", "memory", 9),
    ("TEMP", "temp", 4),
    ("POWER", "power", 8),
    ("MIG", "mig", 3),
]


def short_model(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` → ``A100-80GB``; ``Tesla T4`` → ``T4``: the words that differ."""
    words = name.replace("NVIDIA ", "").replace("Tesla ", "")
    parts = words.split("-")
    if len(parts) >= 3 and parts[1].startswith(("SXM", "PCIE")):
        return f"{parts[0]}-{parts[-1]}"
    return words.replace(" HBM3", "").replace(" ", "-")


def gib_pair(used_mib: float, total_mib: float) -> str:
    return f"{used_mib / 1024:.1f}/{total_mib / 1024:.0f}G"


def util_cell(value: float | None, palette: Palette) -> Text:
    if value is None:
        return right("N/A", palette.dim)
    style = palette.level(value, UTIL_THRESHOLDS)
    cell = Text(no_wrap=True, justify="right")
    cell.append(bar(value, 5), style)
    cell.append(f"{value:4.0f}%", style)
    return cell


def gpu_cells(gpu: Gpu, palette: Palette) -> tuple[object, ...]:
    return (
        text(short_node(gpu.node)),
        right(gpu.index),
        text(short_model(gpu.name)),
        util_cell(gpu.utilization, palette),
        right(gib_pair(gpu.memory_used_mib, gpu.memory_total_mib), palette.level(gpu.memory_percent, MEMORY_THRESHOLDS)),
        right(f"{gpu.temperature_c}°", palette.level(gpu.temperature_c, TEMPERATURE_THRESHOLDS)),
        right(f"{gpu.power_w:.0f}/{gpu.power_limit_w:.0f}W"),
        text({MigMode.ENABLED: "on", MigMode.DISABLED: "off"}.get(gpu.mig_mode, "N/A"), palette.accent if gpu.mig_mode is MigMode.ENABLED else None),
    )


def slice_cells(mig: MigSlice, palette: Palette) -> tuple[object, ...]:
    percent = 100.0 * mig.memory_used_mib / mig.memory_total_mib if mig.memory_total_mib else 0.0
    return (
        text(""),
        text(""),
        text(f"└ {mig.profile}", palette.accent),
        util_cell(mig.utilization, palette),
        right(gib_pair(mig.memory_used_mib, mig.memory_total_mib), palette.level(percent, MEMORY_THRESHOLDS)),
        text(""),
        text(""),
        text(""),
    )


class GpusPane(Pane):
    """All GPUs of the fleet, live."""

    kind = SourceKind.GPUS

    class OpenDetail(Message):
        """The user asked for one GPU's detail view."""

        def __init__(self, uuid: str) -> None:
            super().__init__()
            self.uuid = uuid

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="gpu-table")

    @property
    def table(self) -> LiveTable:
        return self.query_one(LiveTable)

    def summary(self, snapshot: FleetSnapshot) -> str:
        busy = sum(1 for g in snapshot.gpus if g.busy)
        return f"{len(snapshot.gpus)} GPUs · {busy} busy" if snapshot.gpus else ""

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        rows: list[Row] = []
        for gpu in sorted(snapshot.gpus, key=lambda g: (g.node, g.index)):
            if not self.matches(gpu.node, gpu.name, gpu.uuid, f"#{gpu.index}", *(s.profile for s in gpu.mig_slices)):
                continue
            rows.append((gpu.uuid, gpu_cells(gpu, palette)))
            rows.extend((f"{gpu.uuid}/{s.uuid}", slice_cells(s, palette)) for s in gpu.mig_slices)
        self.table.sync(rows)

    def on_data_table_row_selected(self, event: LiveTable.RowSelected) -> None:
        key = event.row_key.value or ""
        self.post_message(self.OpenDetail(key.split("/", 1)[0]))

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        gpu_uuid, _, mig_uuid = key.partition("/")
        gpu = next((g for g in snapshot.gpus if g.uuid == gpu_uuid), None)
        if gpu is None:
            return None
        who = attribute(snapshot, gpu, mig_uuid)
        line = Text(who.sentence(short_node), palette.bad if who.idle_while_billed else palette.strong if who.held else None)
        waste = next((w for w in snapshot.idle if w.uuid == gpu.uuid), None)
        if waste is not None and not mig_uuid:
            minutes = (snapshot.taken_at - waste.idle_since) / 60.0
            line.append(f" · idle {minutes:.0f} min, {money(waste.wasted)} wasted", palette.bad)
        line.append(f" · {mig_uuid or gpu.uuid}", palette.dim)
        return line
