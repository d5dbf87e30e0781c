"""The Instances pane: cloud GPU instances with their market, state and what they cost."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from gpuconsole.model import FleetSnapshot, Instance, InstanceState, Market, SourceKind
from gpuconsole.ui.format import age, money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.panes.gpus import short_model
from gpuconsole.ui.widgets.live_table import LiveTable, Row, right, text

COLUMNS = [
    ("TYPE", "type", 13),
    ("GPUS", "gpus", 11),
    ("MARKET", "market", 9),
    ("STATE", "state", 8),
    ("$/H", "price", 6),
    ("COST", "cost", 8),
    ("UPTIME", "uptime", 6),
    ("AZ", "az", 10),
    ("ID", "id", 19),
    ("OWNER", "owner", 8),
]


def state_style(state: InstanceState, palette: Palette):  # noqa: ANN201 - rich Style
    if state is InstanceState.RUNNING:
        return palette.ok
    if state in (InstanceState.PENDING, InstanceState.STOPPING, InstanceState.SHUTTING_DOWN):
        return palette.warn
    return palette.dim


def instance_cells(inst: Instance, now: float, palette: Palette) -> tuple[object, ...]:
    gpus = f"{inst.gpus}×{short_model(inst.gpu_model)}" if inst.gpus else "-"
    running = inst.state.billed
    return (
        text(inst.instance_type),
        text(gpus),
        text(inst.market.value, palette.accent if inst.market is Market.SPOT else None),
        text(inst.state.value, state_style(inst.state, palette)),
        right(f"{inst.price_per_hour:.2f}"),
        right(money(inst.accrued_cost)),
        right(age(now - inst.launch_time) if running else "-"),
        text(inst.availability_zone),
        text(inst.instance_id),
        text(inst.tag("Owner") or ""),
    )


class InstancesPane(Pane):
    """Every GPU instance of the configured accounts and regions."""

    kind = SourceKind.CLOUD

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="instance-table")

    def summary(self, snapshot: FleetSnapshot) -> str:
        if not snapshot.instances:
            return ""
        spot = sum(1 for i in snapshot.instances if i.market is Market.SPOT and i.state.billed)
        on_demand = sum(1 for i in snapshot.instances if i.market is Market.ON_DEMAND and i.state.billed)
        return f"{on_demand} on-demand · {spot} spot · {money(snapshot.burn_per_hour)}/h"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        now = snapshot.taken_at
        order = sorted(snapshot.instances, key=lambda i: (not i.state.billed, -i.price_per_hour, i.instance_id))
        rows: list[Row] = [
            (inst.instance_id, instance_cells(inst, now, palette))
            for inst in order
            if self.matches(inst.instance_id, inst.instance_type, inst.availability_zone, inst.market.value,
                            inst.state.value, inst.gpu_model, inst.name, *(v for _, v in inst.tags))
        ]
        self.query_one(LiveTable).sync(rows)

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        inst = next((i for i in snapshot.instances if i.instance_id == key), None)
        if inst is None:
            return None
        line = Text(f"{inst.instance_id} {inst.name}  ".replace("  ", " ", 1), style=palette.strong)
        line.append(f"{inst.region}/{inst.availability_zone} · {inst.market.value} at ${inst.price_per_hour:.3f}/h")
        if inst.gpus:
            line.append(f" (${inst.price_per_hour / inst.gpus:.3f} per GPU-h)")
        if inst.node:
            line.append(f" · node {inst.node}")
        return line
