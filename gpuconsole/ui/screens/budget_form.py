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
from gpuconsole.ui import drafts
from gpuconsole.ui.widgets.marks import TickBox

DRAFT = "budget-form"  # the draft this form keeps on the app when closed with esc
PERIODS = [("monthly", "monthly"), ("daily", "daily"), ("from now on (cumulative)", "custom")]

# The deployment guide's rule: alert, and pause instances when cumulative cost reaches $1,000.
# A stop leaves one-time spot instances running at full price (EC2 cannot stop them), so the rule
# also ends those: pausing is what stops the spend, not only the on-demand part of it.
PAUSE_AT_1000 = Budget(
    name="pause-at-1000",
    amount=1000.0,
    period=BudgetPeriod.CUSTOM,
    scope="all",
    thresholds=(Threshold(80.0), Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL,
                                                           BudgetAction.TERMINATE_SPOT))),
    automatic=True,
)
PAUSE_AT_1000_SAYS = ("At $1,000 this stops on-demand and persistent spot instances and terminates one-time "
                      "spot instances (they cannot be stopped): all of the spend stops. An admin saves it with an MFA code.")


class BudgetForm(ModalScreen[Budget | None]):
    """Dismisses with the new :class:`Budget`, or None when cancelled.

    | key | does |
    |---|---|
    | ctrl+s | save the budget |
    | f2 | fill in the guide's rule: alert, and pause instances at $1,000 |
    | f1 | the form's keys |
    | esc | cancel |
    """

    CSS_PATH = "budget_form.tcss"

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", tooltip="save the budget (bad input keeps the form and says which field)"),
        Binding("f2", "preset", "Pause at $1,000",
                tooltip="fill in the guide's rule: alert, and pause instances when cumulative cost reaches $1,000"),
        Binding("escape", "cancel", "Cancel", tooltip="close the form without saving"),
        Binding("f1", "keys", "Keys", tooltip="the keys of this form (? types a ? in a field)"),
    ]

    def __init__(self, clock=time.time) -> None:  # noqa: ANN001 - a clock callable
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        defaults = " ".join(budget_rules.format_threshold(t) for t in Budget("x", 1).thresholds)
        with Vertical(id="budget-form") as box:
            box.border_title = "New budget"
            box.border_subtitle = "ctrl+s save · f2 pause at $1,000 · f1 keys · esc cancel"
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
                yield TickBox("run actions automatically (else each waits for a yes)", id="budget-automatic",
                               compact=True)
            yield Static(
                "Thresholds: PCT:ACTION[+ACTION], actions notify, stop-spot, stop-all, terminate-spot, suspend-cronjobs; "
                f"forecast thresholds as in {budget_rules.format_threshold(Threshold(100.0, budget_rules.ThresholdBasis.FORECAST))}.",
                id="budget-help",
            )
            yield Static("", id="budget-error")

    def on_mount(self) -> None:
        for field in self.query(Input):
            field.select_on_focus = False  # coming back to a field keeps its text: the first key adds to it
        self._defaults = drafts.values(self)
        if drafts.restore(self, DRAFT):
            self.query_one("#budget-error", Static).update("Your draft is back: ctrl+s saves it, esc keeps it for later.")
        self.query_one("#budget-name", Input).focus()

    def action_cancel(self) -> None:
        """esc: close; what was typed is kept as a draft for the next time the form opens."""
        drafts.keep(self, DRAFT, self._defaults)
        self.dismiss(None)

    def action_keys(self) -> None:
        from gpuconsole.ui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen())

    def action_preset(self) -> None:
        b = PAUSE_AT_1000
        self.query_one("#budget-name", Input).value = b.name
        self.query_one("#budget-amount", Input).value = f"{b.amount:g}"
        self.query_one("#budget-period", Select).value = b.period.value
        self.query_one("#budget-scope", Input).value = b.scope
        self.query_one("#budget-thresholds", Input).value = " ".join(budget_rules.format_threshold(t) for t in b.thresholds)
        self.query_one("#budget-automatic", Checkbox).value = b.automatic
        self.query_one("#budget-error", Static).update("")
        self.query_one("#budget-help", Static).update(PAUSE_AT_1000_SAYS)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def action_save(self) -> None:
        try:
            budget = self.budget()
        except FieldError as exc:
            # The form stays open with everything typed; the field at fault gets the focus.
            self.query_one("#budget-error", Static).update(str(exc))
            self.query_one(f"#budget-{exc.field}").focus()
            return
        drafts.forget(self, DRAFT)
        self.dismiss(budget)

    def budget(self) -> Budget:
        """The budget the fields describe, checked as ``budget add`` checks it.

        Raises:
            FieldError: one line, starting with the field at fault (``amount: …``).
        """
        name = self.query_one("#budget-name", Input).value.strip()
        if not name:
            raise FieldError("name", "give the budget a name")
        words = self.query_one("#budget-amount", Input).value.strip().replace(",", "").lstrip("$")
        try:
            amount = float(words)
        except ValueError:
            raise FieldError("amount", f"not a number of dollars: {words!r}") from None
        problem = budget_rules.amount_problem(amount)
        if problem is not None:
            raise FieldError("amount", f"{problem}, got {words}")
        scope = self.query_one("#budget-scope", Input).value.strip() or "all"
        try:
            budget_rules.parse_scope(scope)
        except budget_rules.BudgetError as exc:
            raise FieldError("scope", str(exc)) from None
        tokens = self.query_one("#budget-thresholds", Input).value.replace(",", " ").split()
        if not tokens:
            raise FieldError("thresholds", "give at least one, e.g. 80:notify")
        try:
            thresholds = tuple(budget_rules.parse_threshold(t) for t in tokens)
        except budget_rules.BudgetError as exc:
            raise FieldError("thresholds", str(exc)) from None
        period = BudgetPeriod(str(self.query_one("#budget-period", Select).value))
        starts = self.clock() if period is BudgetPeriod.CUSTOM else None
        budget = Budget(name=name, amount=amount, period=period, scope=scope, thresholds=thresholds,
                        automatic=self.query_one("#budget-automatic", Checkbox).value, starts=starts)
        try:
            return budget_rules.validate(budget)  # what the core would refuse, refused here
        except budget_rules.BudgetError as exc:
            raise FieldError(_field_of(str(exc)), str(exc)) from None


class FieldError(ValueError):
    """Bad input in one field of the form: ``field`` names it (``amount``), the message is one line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _field_of(message: str) -> str:
    """The field a :func:`gpuconsole.core.money.budgets.validate` message is about."""
    for field, words in (("name", "bad budget name"), ("amount", "bad amount"), ("scope", "bad budget scope"),
                         ("thresholds", "threshold")):
        if words in message:
            return field
    return "period"
