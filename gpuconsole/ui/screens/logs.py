"""``l`` on a job or a service's replica: its pod's log, following while it runs, with ``/`` search.

Lines come from a thread worker reading ``console.jobs.logs`` (a service's: ``service_ops.logs``); it hands them over through a
bounded queue that the screen drains ten times a second, so a chatty pod costs one repaint per
tick however many lines it printed. The view keeps the last 5,000 lines.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpuconsole.core.ops.actions import ActionError
from gpuconsole.ui.format import inert
from gpuconsole.ui.widgets.focus import focus_now
from gpuconsole.ui.widgets.log_view import MAX_LINES, LogView
from gpuconsole.ui.worker_errors import ReportsWorkerErrors
from gpuconsole.ui.widgets.footer import KeyFooter

TAIL_LINES = 1000  # what is fetched first; following adds to it up to MAX_LINES
DRAIN_EVERY_S = 0.1


class PodLogs(Protocol):
    """What reads a pod's log: the job operations, the service operations."""

    def logs(self, namespace: str, pod: str, *, tail_lines: int = ..., follow: bool = ...,
             stop: threading.Event | None = ...) -> Iterator[str]: ...


class SearchInput(Input):
    """The ``/`` field: enter searches, esc closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close search")]

    def action_close(self) -> None:
        screen = self.screen
        if isinstance(screen, LogScreen):
            screen.close_search()


class LogScreen(ReportsWorkerErrors, ModalScreen[None]):
    """A pod's log.

    | key | does |
    |---|---|
    | / | search (enter finds, esc closes the field) |
    | n / N | next / previous match |
    | ↑ ↓ pgup pgdn home end | scroll (end follows new lines again) |
    | esc / q | close |
    """

    CSS_PATH = "logs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("slash", "search", "Search"),
        Binding("n", "match(1)", "Next match"),
        Binding("N", "match(-1)", "Previous match"),
    ]

    def __init__(self, jobs: PodLogs, namespace: str, pod: str, *, follow: bool, title: str = "") -> None:
        super().__init__()
        self.jobs = jobs
        self.namespace = namespace
        self.pod = pod
        self.follow = follow
        self.title_text = title or f"{namespace}/{pod}"
        self._stop = threading.Event()
        self._incoming: deque[str] = deque(maxlen=MAX_LINES)
        self._lock = threading.Lock()
        self.state = "following" if follow else "loading"
        self.error = ""
        self.found = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="log-box") as box:
            box.border_title = Text(inert(f"log · {self.title_text}"))  # a title is markup unless it is Text
            yield Static("", id="log-status", markup=False)
            yield LogView(id="log-view")
            yield SearchInput(placeholder="search: type, enter finds, n/N next/previous, esc closes",
                              id="log-search", compact=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(SearchInput).display = False
        self.query_one(LogView).focus()
        self._show_status()
        self.set_interval(DRAIN_EVERY_S, self._drain)
        self._read()

    def on_unmount(self) -> None:
        self._stop.set()

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    # ------------------------------------------------------------------ reading
    @work(thread=True, exclusive=True, exit_on_error=False, group="pod-log", description="pod log")
    def _read(self) -> None:
        try:
            for line in self.jobs.logs(self.namespace, self.pod, tail_lines=TAIL_LINES, follow=self.follow,
                                       stop=self._stop):
                with self._lock:
                    self._incoming.append(line)
                if self._stop.is_set():
                    break
            state, error = "ended", ""
        except ActionError as exc:
            state, error = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken stream is shown, never raised into the app
            state, error = "error", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        with self._lock:
            self.state, self.error = state, error

    def _drain(self) -> None:
        with self._lock:
            batch = list(self._incoming)
            self._incoming.clear()
        if batch:
            self.view.append(batch)
        self._show_status()

    def _show_status(self) -> None:
        view = self.view
        kept = len(view.lines)
        words = {"following": "following", "loading": "reading", "ended": "end of log"}.get(self.state, "")
        if self.state == "error":
            text = f"✗ {self.error}"
        else:
            text = f"{kept:,} lines" + (f" (last {MAX_LINES:,} kept)" if view.dropped else "") + f" · {words}"
        if self.found:
            text += f" · {self.found}"
        status = self.query_one("#log-status", Static)
        status.update(text)
        status.set_class(self.state == "error", "-error")

    # ------------------------------------------------------------------ search
    def action_search(self) -> None:
        field = self.query_one(SearchInput)
        field.display = True
        focus_now(field)  # now: the words typed right after / are already queued behind it

    def close_search(self) -> None:
        field = self.query_one(SearchInput)
        field.display = False
        self.view.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.view.search(event.value.strip())
        self.found = ""
        self._show_status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(SearchInput).display = bool(event.value.strip())
        self.view.focus()
        self.action_match(1)

    def action_match(self, step: int) -> None:
        view = self.view
        if not view.search_text:
            self.found = "press / to search"
        else:
            where = view.next_match(step)
            words = view.search_text
            self.found = f"match {where[0]}/{where[1]} for {words!r}" if where else f"no match for {words!r}"
        self._show_status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While typing a search, letters belong to the field.
        if action in ("match", "search", "close") and isinstance(self.focused, SearchInput):
            return False
        return True

    def action_close(self) -> None:
        self._stop.set()
        self.dismiss(None)
