"""``s`` on a service: how many replicas. The number only; what it costs is confirmed next.

A bad number is one line under the field, and the field keeps what was typed. The screen
dismisses with the replicas asked for, or None when cancelled; the confirmation that follows
(:class:`~gpuconsole.ui.screens.confirm.ConfirmScreen`) is the one a key typed ahead never
answers.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpuconsole.ui.format import inert

MAX_REPLICAS = 1000  # as the core takes it


def replicas_from(words: str) -> int:
    """The replicas ``words`` ask for; ValueError with the one line to show."""
    text = words.strip()
    if not text.isdigit() or int(text) > MAX_REPLICAS:
        raise ValueError(f"replicas must be a whole number from 0 to {MAX_REPLICAS}, not {inert(text)!r}"
                         if text else f"type the replicas, a whole number from 0 to {MAX_REPLICAS}")
    return int(text)


class ScalePrompt(ModalScreen[int | None]):
    """The replicas for a service.

    | key | does |
    |---|---|
    | enter | go on to the confirmation |
    | esc | cancel |
    """

    CSS_PATH = "scale_prompt.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, target: str, current: int, hint: str) -> None:
        super().__init__()
        self.target = target
        self.current = current
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="scale-box") as box:
            box.border_title = Text(inert(f"Scale {self.target}"))
            box.border_subtitle = "enter: next · esc: cancel"
            yield Static(Text(inert(self.hint)), id="scale-hint")
            yield Input(placeholder=f"replicas (now {self.current})", id="scale-input")
            yield Static("", id="scale-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            replicas = replicas_from(event.value)
        except ValueError as exc:
            self.query_one("#scale-error", Static).update(Text(str(exc)))
            return
        self.dismiss(replicas)

    def action_cancel(self) -> None:
        self.dismiss(None)
