"""``a`` on the Budgets pane: a new budget in one form, with the guide's rule one key away.

The form only collects words; :mod:`gpuconsole.core.money.budgets` parses and checks them, so the
console and ``gpuconsole budget add`` accept exactly the same budgets.
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Label, Select, Static

from gpuconsole.core.money import budgets as budget_rules
from gpuconsole.model import Budget, BudgetAction, BudgetPeriod, Threshold

PERIODS = [("monthly", "monthly"), ("daily", "daily"), ("from now on (cumulative)", "custom")]

# The deployment guide's rule: alert, and pause instances when cumulative cost reaches $1,000.
PAUSE_AT_1000 = Budget(
    name="pause-at-1000",
    amount=1000.0,
    period=BudgetPeriod.CUSTOM,
    scope="all",
    thresholds=(Threshold(80.0), Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL))),
    automatic=True,
)


class BudgetForm(ModalScreen[Budget | None]):
    """Dismisses with the new :class:`Budget`, or None when cancelled.

    | key | does |
    |---|---|
    | ctrl+s | save the budget |
    | f2 | fill in the guide's rule: alert, and pause instances at $1,000 |
    | esc | cancel |
    """

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("f2", "preset", "Pause at $1,000"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, clock=time.time) -> None:  # noqa: ANN001 - a clock callable
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        defaults = " ".join(budget_rules.format_threshold(t) for t in Budget("x", 1).thresholds)
        with Vertical(id="budget-form") as box:
            box.border_title = "New budget"
            box.border_subtitle = "ctrl+s save · f2 pause at $1,000 · esc cancel"
            with Horizontal(classes="form-row"):
                yield Label("Name", classes="form-label")
                yield Input(placeholder="e.g. team-nlp", id="budget-name", compact=True)
            with Horizontal(classes="form-row"):
                yield Label("Amount $", classes="form-label")
                yield Input(placeholder="e.g. 25000", id="budget-amount", compact=True)
            with Horizontal(classes="form-row"):
                yield Label("Period", classes="form-label")
                yield Select(PERIODS, value="monthly", allow_blank=False, id="budget-period", compact=True)
            with Horizontal(classes="form-row"):
                yield Label("Scope", classes="form-label")
                yield Input(value="all", placeholder="all, tag:Project=nlp or namespace:research", id="budget-scope",
                            compact=True)
            with Horizontal(classes="form-row"):
                yield Label("Thresholds", classes="form-label")
                yield Input(value=defaults, id="budget-thresholds", compact=True)
            with Horizontal(classes="form-row"):
                yield Label("", classes="form-label")
                yield Checkbox("run actions automatically (else each waits for a yes)", id="budget-automatic",
                               compact=True)
            yield Static(
                "Thresholds: PCT:ACTION[+ACTION], actions notify, stop-spot, stop-all, suspend-cronjobs; "
                f"forecast thresholds as in {budget_rules.format_threshold(Threshold(100.0, budget_rules.ThresholdBasis.FORECAST))}.",
                id="budget-help",
            )
            yield Static("", id="budget-error")

    def on_mount(self) -> None:
        self.query_one("#budget-name", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_preset(self) -> None:
        b = PAUSE_AT_1000
        self.query_one("#budget-name", Input).value = b.name
        self.query_one("#budget-amount", Input).value = f"{b.amount:g}"
        self.query_one("#budget-period", Select).value = b.period.value
        self.query_one("#budget-scope", Input).value = b.scope
        self.query_one("#budget-thresholds", Input).value = " ".join(budget_rules.format_threshold(t) for t in b.thresholds)
        self.query_one("#budget-automatic", Checkbox).value = b.automatic
        self.query_one("#budget-error", Static).update("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def action_save(self) -> None:
        try:
            budget = self.budget()
        except ValueError as exc:
            self.query_one("#budget-error", Static).update(str(exc))
            return
        self.dismiss(budget)

    def budget(self) -> Budget:
        """The budget the fields describe. Raises ValueError with one line for the user."""
        name = self.query_one("#budget-name", Input).value.strip()
        if not name:
            raise ValueError("name: give the budget a name")
        words = self.query_one("#budget-amount", Input).value.strip().replace(",", "").lstrip("$")
        try:
            amount = float(words)
        except ValueError:
            raise ValueError(f"amount: not a number of dollars: {words!r}") from None
        if not amount > 0:
            raise ValueError("amount: must be more than $0")
        scope = self.query_one("#budget-scope", Input).value.strip() or "all"
        budget_rules.parse_scope(scope)
        tokens = self.query_one("#budget-thresholds", Input).value.replace(",", " ").split()
        if not tokens:
            raise ValueError("thresholds: give at least one, e.g. 80:notify")
        thresholds = tuple(budget_rules.parse_threshold(t) for t in tokens)
        period = BudgetPeriod(str(self.query_one("#budget-period", Select).value))
        starts = self.clock() if period is BudgetPeriod.CUSTOM else None
        return Budget(name=name, amount=amount, period=period, scope=scope, thresholds=thresholds,
                      automatic=self.query_one("#budget-automatic", Checkbox).value, starts=starts)
