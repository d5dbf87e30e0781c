"""The Instances pane: cloud GPU instances with their market, state and what they cost."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.core.ops.actions import (
    TYPED_CONFIRMATION,
    ActionKind,
    ActionRequest,
    ActionResult,
    confirmation_prompt,
)
from gpuconsole.model import FleetSnapshot, Instance, InstanceState, Market, SourceKind
from gpuconsole.ui.actions import Action, Confirm, batch, run_action
from gpuconsole.ui.format import age, money, short_model
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.live_table import LiveTable, width_of

COLUMNS = [
    ("NAME", "name", 12),  # the Name tag: what the owner calls it (at 80 columns the cost still fits)
    ("TYPE", "type", 13),
    ("GPUS", "gpus", 11),
    ("MARKET", "market", 9),
    ("STATE", "state", 9),  # "stopped $": stopped, its compute still billed (an Azure VM not deallocated)
    ("$/H", "price", 5),
    ("COST", "cost", 8),
    ("UPTIME", "uptime", 6),
    ("AZ", "az", 10),
    ("CLOUD", "cloud", 7),  # the provider: aws, alibaba
    ("ID", "id", 19),
    ("OWNER", "owner", 8),
]

# What an AWS instance's accrued cost covers (Instance.history), said beside the figure.
_ACCRUED_OVER = {"observed": "since last start only", "cloudtrail": "over its runs (CloudTrail, 90 days)"}


def state_style(state: InstanceState, palette: Palette):  # noqa: ANN201 - rich Style
    if state is InstanceState.RUNNING:
        return palette.ok
    if state in (InstanceState.PENDING, InstanceState.STOPPING, InstanceState.SHUTTING_DOWN):
        return palette.warn
    return palette.dim


def state_cell(inst: Instance, palette: Palette) -> object:
    """The state, and for a stopped instance whose cloud still bills its compute, ``stopped $``."""
    if inst.state is InstanceState.STOPPED and inst.bills_now:
        return text("stopped $", palette.warn)
    return text(inst.state.value, state_style(inst.state, palette))


def name_cell(inst: Instance) -> object:
    return text(inst.name or "-")


def instance_cells(inst: Instance, now: float, palette: Palette) -> tuple[object, ...]:
    gpus = f"{inst.gpus}×{short_model(inst.gpu_model)}" if inst.gpus else "-"
    running = inst.state.billed
    return (
        name_cell(inst),
        text(inst.instance_type),
        text(gpus),
        text(inst.market.value, palette.accent if inst.market is Market.SPOT else None),
        state_cell(inst, palette),
        right(f"{inst.price_per_hour:.2f}"),
        right(money(inst.accrued_cost)),
        right(age(now - inst.launch_time) if running else "-"),
        text(inst.availability_zone),
        text(inst.cloud),
        text(inst.instance_id),
        text(inst.tag("Owner") or ""),
    )


# What EC2 accepts in each state; anything else is refused here with a line, not a round trip.
ALLOWED_FROM: dict[ActionKind, tuple[InstanceState, ...]] = {
    ActionKind.START: (InstanceState.STOPPED,),
    ActionKind.STOP: (InstanceState.RUNNING, InstanceState.PENDING),
    ActionKind.REBOOT: (InstanceState.RUNNING,),
    ActionKind.POWER_OFF: (InstanceState.RUNNING,),
    ActionKind.TERMINATE: (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.STOPPING, InstanceState.STOPPED),
}


def refusal(kind: ActionKind, inst: Instance) -> str | None:
    """Why EC2 would refuse ``kind`` on ``inst`` in its state (said here, not after a round trip),
    or None."""
    if kind is ActionKind.STOP and inst.state is InstanceState.STOPPED and inst.bills_now:
        return None  # stopped but still billing (an Azure VM powered off, still allocated): stop ends the bill
    if inst.state not in ALLOWED_FROM[kind]:
        return f"cannot {kind.value} {inst.instance_id}: it is {inst.state.value}"
    if kind is ActionKind.STOP and inst.market is Market.SPOT and not inst.stoppable_spot:
        return f"cannot stop {inst.instance_id}: a one-time spot instance can only be terminated"
    return None


class InstancesPane(Pane):
    """Every GPU instance of the configured accounts and regions.

    | key | does |
    |---|---|
    | s | stop the selected instance (asks y/n) |
    | S | start it |
    | b | reboot it (asks y/n) |
    | o | power an Azure VM off without deallocating it: it still bills (asks y/n; s deallocates) |
    | x | terminate it (asks you to type its id) |
    | space | tag the row: s and x then act on every tagged instance, in one confirmation |
    | n | launch a new instance (the launch wizard) |
    """

    kind = SourceKind.CLOUD

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "instance('stop')", "Stop"),
        Binding("S", "instance('start')", "Start"),
        Binding("b", "instance('reboot')", "Reboot", show=False),
        Binding("o", "instance('power-off')", "Power off (bills on)", show=False),
        Binding("x", "instance('terminate')", "Terminate"),
        Binding("n", "new_instance", "New instance"),
    ]

    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        if action == "instance" and parameters:
            return ActionKind(str(parameters[0])), None
        return (ActionKind.LAUNCH, None) if action == "new_instance" else None

    def action_new_instance(self) -> None:
        """``n``: the launch wizard, or a line saying why this console cannot launch."""
        from gpuconsole.ui.wizards import open_provision_wizard

        open_provision_wizard(self.app)  # type: ignore[arg-type]

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="instance-table", gives={"az": 6, "owner": 5, "cloud": 4}, taggable=True)

    def summary(self, snapshot: FleetSnapshot) -> str:
        if not snapshot.instances:
            return ""
        spot = sum(1 for i in snapshot.instances if i.market is Market.SPOT and i.state.billed)
        on_demand = sum(1 for i in snapshot.instances if i.market is Market.ON_DEMAND and i.state.billed)
        return f"{on_demand} on-demand · {spot} spot · {money(snapshot.burn_per_hour)}/h"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        now = snapshot.taken_at
        order = sorted(snapshot.instances, key=lambda i: (not i.state.billed, -i.price_per_hour, i.instance_id))
        # A fleet holds a thousand instances: the table makes the cells of the rows on screen.
        shown = {inst.instance_id: inst for inst in order
                 if self.matches(inst.instance_id, inst.instance_type, inst.availability_zone, inst.market.value,
                                 inst.cloud, inst.state.value, inst.gpu_model, inst.name, *(v for _, v in inst.tags))}
        names = max((width_of(name_cell(inst)) for inst in shown.values()), default=0)
        self.query_one(LiveTable).show_rows(list(shown), lambda key: instance_cells(shown[key], now, palette),
                                            fitted={"name": names})

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        inst = next((i for i in snapshot.instances if i.instance_id == key), None)
        if inst is None:
            return None
        line = Text(f"{inst.instance_id} {inst.name}  ".replace("  ", " ", 1), style=palette.strong)
        market = f"{inst.market.value} ({inst.spot_kind})" if inst.spot_kind else inst.market.value
        unit = "$" if inst.currency == "USD" else f"{inst.currency} "
        line.append(f"{inst.region}/{inst.availability_zone} · {market} at {unit}{inst.price_per_hour:.3f}/h")
        if inst.gpus:
            line.append(f" ({unit}{inst.price_per_hour / inst.gpus:.3f} per GPU-h)")
        if inst.state is InstanceState.STOPPED:
            line.append(" · stopped, still billing its compute" if inst.bills_now else " · stopped, compute not billed")
        if inst.node:
            line.append(f" · node {inst.node}")
        return line

    # ------------------------------------------------------------------ actions
    def selected_instance(self) -> Instance | None:
        key = self.query_one(LiveTable).selected_key
        snap = self.snapshot
        if key is None or snap is None:
            return None
        return next((i for i in snap.instances if i.instance_id == key), None)

    def action_instance(self, verb: str) -> None:
        """Ask for what ``verb`` needs, then run it through the core in a worker (on every
        tagged instance when some are tagged)."""
        kind = ActionKind(verb)
        tagged = self.query_one(LiveTable).tagged_keys()
        if tagged and self.snapshot is not None:
            by_id = {i.instance_id: i for i in self.snapshot.instances}
            self._on_tagged(kind, [by_id[key] for key in tagged if key in by_id])
            return
        inst = self.selected_instance()
        if inst is None:
            self.app.notify("select an instance first", severity="warning")
            return
        if not self.core.services.cloud.available:
            self.app.notify("this cloud source cannot change instances", severity="warning")
            return
        refused = refusal(kind, inst)
        if refused:
            self.app.notify(refused, severity="warning")
            return
        cloud = self.core.services.cloud
        what = ActionRequest(kind, inst.instance_id, inst.region).describe()

        def perform(answer: str | None) -> ActionResult:
            return cloud.perform(ActionRequest(kind, inst.instance_id, inst.region, confirmation=answer or ""))

        confirm = None
        if kind.destructive:
            details = (f"{inst.instance_id}  {inst.name}\n{inst.instance_type} · {inst.market.value} · "
                       f"{inst.state.value} · {inst.availability_zone} · ${inst.price_per_hour:.2f}/h · "
                       f"{money(inst.accrued_cost)} {_ACCRUED_OVER.get(inst.history, 'since launch')}")
            if kind is ActionKind.POWER_OFF:
                details += "\npowered off it STILL BILLS its compute until deallocated (s stops and deallocates)"
            confirm = Confirm(f"{verb.capitalize()} instance", confirmation_prompt(kind, inst.instance_id), details,
                              typed=inst.instance_id if kind in TYPED_CONFIRMATION else None,
                              cancelled=f"{verb} cancelled")
        run_action(self, Action(what, perform, kind, confirm=confirm, group="instance-action"))

    def _on_tagged(self, kind: ActionKind, tagged: list[Instance]) -> None:
        """One confirmation listing every tagged instance with its $/h, then each change in turn;
        an instance that cannot take ``kind`` in its state is named and left out."""
        verb = kind.value
        if not self.core.services.cloud.available:
            self.app.notify("this cloud source cannot change instances", severity="warning")
            return
        able = [i for i in tagged if refusal(kind, i) is None]
        left = [i.instance_id for i in tagged if i not in able]
        if not able:
            self.app.notify(f"cannot {verb} any of the {len(tagged)} tagged instances in their state", severity="warning")
            return
        cloud = self.core.services.cloud

        def change(inst: Instance):  # noqa: ANN202 - the call for one instance
            typed = kind in TYPED_CONFIRMATION
            return lambda answer: cloud.perform(ActionRequest(kind, inst.instance_id, inst.region,
                                                              confirmation=inst.instance_id if typed else answer or ""))

        lines = tuple(f"{i.instance_id}  {i.name or '-':<14.14} {i.instance_type:<13} {i.state.value:<8} "
                      f"${i.price_per_hour:,.2f}/h" for i in able)
        total = f"{len(able)} instances · ${sum(i.price_per_hour for i in able):,.2f}/h together"
        if left:
            total += f" · left out (their state): {', '.join(left)}"
        word = f"{verb} {len(able)}"
        confirm = Confirm(f"{verb.capitalize()} {len(able)} instances",
                          f"Type {word} to {verb} them. This cannot be undone." if kind in TYPED_CONFIRMATION
                          else f"{verb.capitalize()} these {len(able)} instances? (y/n)",
                          targets=lines, total=total, typed=word if kind in TYPED_CONFIRMATION else None,
                          cancelled=f"{verb} cancelled")
        changes = [(i.instance_id, change(i)) for i in able]
        table = self.query_one(LiveTable)
        call = batch(verb, "instances", changes, after=lambda: self.app.call_from_thread(table.untag))
        run_action(self, Action(f"{verb} {len(able)} instances", call, kind,
                                confirm=confirm, group="instance-action"))
