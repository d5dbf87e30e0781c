"""``enter`` on a job or CronJob (``D`` on a service): the object as YAML with its recent events,
like ``kubectl describe``.

The text is fetched in a thread worker through ``console.jobs.describe`` (a service's:
``service_ops.describe``); until it arrives the
screen says what it is waiting for, and a failure is one line in its place.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuconsole.core.ops.actions import ActionError
from gpuconsole.ui.format import inert
from gpuconsole.ui.worker_errors import ReportsWorkerErrors
from gpuconsole.ui.widgets.footer import KeyFooter


class Describes(Protocol):
    """What describes an object: the job operations, the service operations."""

    def describe(self, kind: str, namespace: str, name: str) -> str: ...


class DescribeScreen(ReportsWorkerErrors, ModalScreen[None]):
    """A Job, a CronJob or a service described.

    | key | does |
    |---|---|
    | ↑ ↓ pgup pgdn home end | scroll (``end``: the events) |
    | esc / q | close |
    """

    CSS_PATH = "describe.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    def __init__(self, jobs: Describes, kind: str, namespace: str, name: str) -> None:
        super().__init__()
        self.jobs = jobs
        self.kind = kind
        self.namespace = namespace
        self.name_ = name
        self.text = ""
        self.error = ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="describe-box", can_focus=True) as box:
            box.border_title = Text(inert(f"{self.kind} {self.namespace}/{self.name_}"))
            box.border_subtitle = "esc closes · end: events"
            yield Static(f"Asking the cluster about {self.kind} {self.namespace}/{self.name_}…",
                         id="describe-text", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#describe-box").focus()
        self._load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="describe", description="describe")
    def _load(self) -> None:
        try:
            text, error = self.jobs.describe(self.kind, self.namespace, self.name_), ""
        except ActionError as exc:
            text, error = "", str(exc)
        self.app.call_from_thread(self._loaded, text, error)

    def _loaded(self, text: str, error: str) -> None:
        self.text, self.error = text, error
        if not self.is_attached:
            return
        shown = self.query_one("#describe-text", Static)
        if error:
            shown.update(Text(f"✗ {inert(error)}", style="bold"))
            shown.add_class("-error")
            return
        text = inert(text)  # event messages, labels and annotations are anyone's text
        body = Text(text)
        head, sep, _tail = text.partition("\nEvents:\n")
        if sep:
            body.stylize("bold", len(head) + 1, len(head) + 8)
        start = text.find("\n  Warning ")
        while start >= 0:
            end = text.find("\n", start + 1)
            body.stylize("bold", start + 1, end if end >= 0 else len(text))
            start = text.find("\n  Warning ", start + 1)
        shown.update(body)

    def action_close(self) -> None:
        self.dismiss(None)
