"""The MFA code prompt shown before a destructive admin action.

The code is checked by the core (:meth:`gpuconsole.core.access.guard.Guard.verify_mfa`) in a worker:
a wrong or replayed code is refused and counted, five in five minutes lock the user out, and
every attempt is in the audit log. A right code keeps destructive actions open for the window
of the users table, so a burst of stops asks once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

if TYPE_CHECKING:
    from gpuconsole.ui.protocols import ConsoleApp


class MfaPrompt(ReportsWorkerErrors, ModalScreen[bool]):
    """Dismisses with True once a code is accepted, False when cancelled.

    | key | does |
    |---|---|
    | enter | check the code |
    | esc | cancel |
    """

    CSS_PATH = "mfa_prompt.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, kind: ActionKind, purpose: str) -> None:
        super().__init__()
        self.kind = kind
        self.purpose = purpose

    def compose(self) -> ComposeResult:
        with Vertical(id="mfa-box") as box:
            box.border_title = "MFA code"
            box.border_subtitle = "enter to check · esc to cancel"
            yield Static(f"{self.purpose} needs a current code from your authenticator app.", id="mfa-prompt")
            yield Input(placeholder="6-digit code", password=True, max_length=8, id="mfa-input")
            yield Static("", id="mfa-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        code = event.value.strip()
        event.input.value = ""
        if code:
            self._check(code)

    @work(thread=True, exclusive=True, group="mfa", exit_on_error=False, description="check MFA code")
    def _check(self, code: str) -> None:
        from gpuconsole.core.access.mfa import MfaError

        guard = cast("ConsoleApp", self.app).core.services.guard
        try:
            guard.verify_mfa(code, self.purpose, self.kind)
        except MfaError as exc:
            self.app.call_from_thread(self.query_one("#mfa-error", Static).update, str(exc))
            return
        self.app.call_from_thread(self.dismiss, True)
