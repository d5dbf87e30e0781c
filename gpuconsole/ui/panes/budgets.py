"""The Budgets pane: each budget's spend against its limit, forecast and thresholds."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionResult
from gpuconsole.core.ops.budget_actions import action_kind
from gpuconsole.model import (
    Budget,
    BudgetAction,
    BudgetStatus,
    FleetSnapshot,
    PendingAction,
    SourceKind,
    ThresholdBasis,
)
from gpuconsole.ui.actions import Action, Confirm, run_action
from gpuconsole.ui.format import bar, money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.screens.budget_form import BudgetForm
from gpuconsole.ui.widgets.cells import Row, right, text
from gpuconsole.ui.widgets.live_table import LiveTable

COLUMNS = [
    ("BUDGET", "name", 14),
    ("PERIOD", "period", 7),
    ("SPENT", "spent", 8),
    ("LIMIT", "limit", 8),
    ("USED", "used", 12),
    ("FORECAST", "forecast", 9),
    ("THRESHOLDS", "thresholds", 20),
    ("SCOPE", "scope", 22),
]


PENDING_COLUMNS = [
    ("BUDGET", "budget", 14),
    ("AT", "at", 6),
    ("ACTION", "action", 16),
    ("WHAT", "what", 60),
]


def pending_key(p: PendingAction) -> str:
    return f"{p.budget}|{p.basis.value}|{p.percent:g}|{p.action.value}"


def used_style(percent: float, palette: Palette):  # noqa: ANN201 - rich Style
    if percent >= 100:
        return palette.bad
    if percent >= 80:
        return palette.warn
    return palette.ok


def thresholds_cell(status: BudgetStatus, palette: Palette) -> Text:
    """``50 80 100 f100`` with each crossed threshold highlighted."""
    cell = Text(no_wrap=True, overflow="ellipsis")
    for n, threshold in enumerate(status.budget.thresholds):
        if n:
            cell.append(" ")
        label = f"{'f' if threshold.basis is ThresholdBasis.FORECAST else ''}{threshold.percent:g}%"
        crossed = threshold in status.crossed
        cell.append(("▲" if crossed else "") + label, used_style(threshold.percent, palette) if crossed else palette.dim)
    return cell


def budget_cells(status: BudgetStatus, palette: Palette) -> tuple[object, ...]:
    b = status.budget
    style = used_style(status.percent, palette)
    used = Text(no_wrap=True)
    used.append(bar(status.percent, 6), style)
    used.append(f"{status.percent:5.0f}%", style)
    forecast_pct = 100.0 * status.forecast / b.amount if b.amount else 0.0
    return (
        text(b.name),
        text(b.period.value),
        right(money(status.spent)),
        right(money(b.amount)),
        used,
        right(money(status.forecast), used_style(forecast_pct, palette)),
        thresholds_cell(status, palette),
        text(b.scope),
    )


class BudgetsPane(Pane):
    """Budgets, evaluated against the live spend of the cloud source, and the actions they call for.

    | key | does |
    |---|---|
    | a | add a budget (f2 in the form: alert and pause instances at $1,000) |
    | x | remove the selected budget (asks y/n) |
    | g | run the selected pending action (shows exactly what it stops; asks y/n) |
    """

    kind = SourceKind.CLOUD

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add_budget", "Add budget"),
        Binding("x", "remove_budget", "Remove"),
        # never g (first row, for k9s and less habits): running a budget action is not a reflex
        Binding("exclamation_mark", "run_pending", "Run action", key_display="!"),
    ]

    def guarded_kind(self, action: str, parameters: tuple[object, ...]) -> tuple[ActionKind, str | None] | None:
        kinds = {"add_budget": ActionKind.BUDGET_ADD, "remove_budget": ActionKind.BUDGET_REMOVE, "run_pending": ActionKind.STOP}
        return (kinds[action], None) if action in kinds else None

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="budget-table")
        yield LiveTable(PENDING_COLUMNS, id="pending-table", identity="budget")

    def summary(self, snapshot: FleetSnapshot) -> str:
        if not snapshot.budgets:
            return "no budgets defined"
        over = sum(1 for b in snapshot.budgets if b.crossed)
        return f"{len(snapshot.budgets)} budgets · {over} past a threshold · this month {money(snapshot.spend_month)}"

    def render_snapshot(self, snapshot: FleetSnapshot, palette: Palette) -> None:
        rows: list[Row] = [
            (status.budget.name, budget_cells(status, palette))
            for status in snapshot.budgets
            if self.matches(status.budget.name, status.budget.scope, status.budget.period.value)
        ]
        self.query_one("#budget-table", LiveTable).sync(rows)
        pending = self.query_one("#pending-table", LiveTable)
        pending.display = bool(snapshot.pending_actions)
        pending.sync([
            (pending_key(p), (
                text(p.budget),
                text(f"{'f' if p.basis is ThresholdBasis.FORECAST else ''}{p.percent:g}%"),
                text(p.action.value + (" (auto)" if p.automatic else ""), palette.warn),
                text(p.detail or ", ".join(p.targets) or "nothing in scope"),
            ))
            for p in snapshot.pending_actions
        ])

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        if table_id == "pending-table":
            action = next((p for p in snapshot.pending_actions if pending_key(p) == key), None)
            if action is None:
                return None
            line = Text(f"{action.budget} at {action.percent:g}%: {action.action.value}  ", style=palette.strong)
            line.append(action.detail or ", ".join(action.targets) or "nothing in scope")
            return line
        status = next((b for b in snapshot.budgets if b.budget.name == key), None)
        if status is None:
            return None
        b = status.budget
        line = Text(f"{b.name}  ", style=palette.strong)
        line.append(f"{money(status.spent)} of {money(b.amount)} this {'day' if b.period.value == 'daily' else 'period'}, "
                    f"burning {money(status.burn_per_hour)}/h, forecast {money(status.forecast)}; scope {b.scope}")
        if status.spend_basis:  # a real cloud's spend: with CloudTrail's history, or since the last start only
            line.append(f" · spend: {status.spend_basis}", style=palette.dim)
        if status.left_out:  # spend in another currency than the budget's, without [money] rates
            line.append(f" · {status.left_out}", style=palette.warn)
        return line

    # ------------------------------------------------------------------ actions
    def action_add_budget(self) -> None:
        core = self.core

        def added(budget: Budget | None) -> None:
            if budget is None:
                return
            ops = core.services.budget_ops
            try:  # in memory only: which request it is, so an automatic budget asks for MFA first
                request = ops.add_request(budget)
            except ActionError as exc:
                self.app.notify(str(exc), severity="error")
                return
            self._change(f"add budget {budget.name}", lambda _: ops.add(budget), request.kind, request.params)

        self.app.push_screen(BudgetForm(clock=core.clock), added)

    def action_remove_budget(self) -> None:
        key = self.query_one("#budget-table", LiveTable).selected_key
        if key is None:
            self.app.notify("select a budget first", severity="warning")
            return
        ops = self.core.services.budget_ops
        self._change(f"remove budget {key}", lambda _: ops.remove(key), ActionKind.BUDGET_REMOVE,
                     confirm=Confirm("Remove budget", f"Remove budget {key}? (y/n)"))

    def action_run_pending(self) -> None:
        snap = self.snapshot
        key = self.query_one("#pending-table", LiveTable).selected_key
        action = next((p for p in snap.pending_actions if pending_key(p) == key), None) if snap else None
        if action is None:
            self.app.notify("no budget action is waiting" if not (snap and snap.pending_actions)
                            else "select an action in the lower table first", severity="warning")
            return
        ops = self.core.services.budget_ops
        what = action.detail or ", ".join(action.targets) or "nothing in scope"
        kind = action_kind(action.action)
        targets, total = confirmation_targets(action, snap)
        # A terminate is never one keypress away: the budget's name is typed, for every listed target.
        typed = action.budget if kind is ActionKind.TERMINATE else None
        prompt = (f"Type {action.budget} to terminate them. This cannot be undone." if typed else "Run it now? (y/n)")
        self._change(f"budget {action.budget}: {action.action.value}", lambda answer: ops.run(action, answer or ""),
                     kind, confirm=Confirm(f"Budget {action.budget}: {action.action.value}", prompt, what, typed=typed,
                                           targets=targets, total=total))

    def _change(self, what: str, call: Callable[[str | None], ActionResult], kind: ActionKind,
                params: tuple[tuple[str, str], ...] = (), confirm: Confirm | None = None) -> None:
        run_action(self, Action(what, call, kind, params, confirm, refused=(ActionError, ValueError), prefix=False,
                                group="budget-action"))


def confirmation_targets(action: PendingAction, snap: FleetSnapshot) -> tuple[tuple[str, ...], str]:
    """Every target of a budget action, one line each, and their total per hour (instances) or
    count (CronJobs): the confirmation lists them all, never "and N more"."""
    if action.action is BudgetAction.SUSPEND_CRONJOBS:
        crons = {c.uid: c for c in snap.cronjobs}
        lines = tuple(f"{c.namespace}/{c.name}  {c.schedule}" if (c := crons.get(uid)) else uid for uid in action.targets)
        return lines, f"{len(lines)} CronJob{'s' if len(lines) != 1 else ''}"
    instances = {i.instance_id: i for i in snap.instances}
    lines, hourly = [], 0.0
    for target in action.targets:
        inst = instances.get(target)
        if inst is None:
            lines.append(target)
            continue
        hourly += inst.price_per_hour
        lines.append(f"{inst.instance_id}  {inst.instance_type:<15} {inst.market.value:<9} {money(inst.price_per_hour)}/h")
    count = len(lines)
    return tuple(lines), f"{count} instance{'s' if count != 1 else ''}, {money(hourly)}/h in all" if count else ""
