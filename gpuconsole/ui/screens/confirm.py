"""Asking before a change: ``y``/``n`` for a stop or reboot, the typed target for a terminate.

The screen only collects the answer; the core checks it again before anything runs
(:func:`gpuconsole.core.ops.actions.check_confirmation`), so a script cannot skip it either.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpuconsole.ui.deliberate import deliberate, shown_now


class ConfirmScreen(ModalScreen[str | None]):
    """Dismisses with the confirmation (``"yes"`` or the typed text), or None when cancelled.

    | key | does |
    |---|---|
    | y | confirm (plain confirmations) |
    | n / esc | cancel |
    | enter | submit the typed text (typed confirmations) |
    """

    CSS_PATH = "confirm.tcss"

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("n", "cancel", "No", show=False),
        Binding("y", "confirm", "Yes", show=False),
    ]

    def __init__(self, title: str, prompt: str, details: str = "", *, typed: str | None = None,
                 targets: tuple[str, ...] = (), total: str = "") -> None:
        """``targets``: every thing the change acts on, one line each (all of them listed, in a
        list that scrolls when long: a confirmation never hides what it acts on); ``total``:
        a line under them (e.g. what they cost per hour together)."""
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.details = details
        self.typed = typed
        self.targets = targets
        self.total = total

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self.title_text
            box.border_subtitle = "enter to confirm · esc to cancel" if self.typed else "y to confirm · n/esc to cancel"
            if self.details:
                yield Static(self.details, id="confirm-details")
            if self.targets:
                with VerticalScroll(id="confirm-targets"):
                    yield Static("\n".join(self.targets), id="confirm-target-lines", markup=False)
                if self.total:
                    yield Static(self.total, id="confirm-total")
            yield Static(self.prompt, id="confirm-prompt")
            if self.typed is not None:
                yield Input(placeholder=self.typed, id="confirm-input")
                yield Static("", id="confirm-error")

    def on_mount(self) -> None:
        # a y typed before this question was on screen does not answer it
        shown_now(self, "this confirmation", self._error_line())
        if self.typed is not None:
            self.query_one(Input).focus()

    def _error_line(self):  # noqa: ANN202 - the typed confirmation's error line, else None (a notification)
        errors = self.query("#confirm-error")
        return errors.first(Static).update if errors else None

    def _deliberate(self) -> bool:
        return deliberate(self.app, self, "this confirmation", self._error_line())

    def action_confirm(self) -> None:
        if self.typed is None and self._deliberate():
            self.dismiss("yes")

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip() == self.typed:
            if self._deliberate():
                self.dismiss(event.value.strip())
        else:
            self.query_one("#confirm-error", Static).update(f"that is not {self.typed}; type it exactly, or esc to cancel")
