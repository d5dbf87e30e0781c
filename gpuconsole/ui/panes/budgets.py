"""The Budgets pane: each budget's spend against its limit, forecast and thresholds."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from gpuconsole.model import BudgetStatus, FleetSnapshot, SourceKind, ThresholdBasis
from gpuconsole.ui.format import bar, money
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.base import Pane
from gpuconsole.ui.widgets.live_table import LiveTable, Row, right, text

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
    """Budgets, evaluated against the live spend of the cloud source."""

    kind = SourceKind.CLOUD

    def compose_body(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="budget-table")

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
        self.query_one(LiveTable).sync(rows)

    def detail(self, table_id: str, key: str, snapshot: FleetSnapshot, palette: Palette) -> Text | None:
        status = next((b for b in snapshot.budgets if b.budget.name == key), None)
        if status is None:
            return None
        b = status.budget
        line = Text(f"{b.name}  ", style=palette.strong)
        line.append(f"{money(status.spent)} of {money(b.amount)} this {'day' if b.period.value == 'daily' else 'period'}, "
                    f"burning {money(status.burn_per_hour)}/h, forecast {money(status.forecast)}; scope {b.scope}")
        return line
