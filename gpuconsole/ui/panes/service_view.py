"""``enter`` on a service: its last hour in charts, its replicas, its HPA and its events.

The charts (requests/s, p99, tokens/s, GPU use) come from the services source's history
(``service_ops.history``: Prometheus ``query_range``, or the demo's own), read in a thread worker
every 15 s; the facts and the replicas follow the snapshot on screen; the events are the
describe text's, read once when the view opens (``e`` reads them again). The keys act as they
do in the Services pane (:mod:`gpuconsole.ui.panes.service_actions`), ``l`` on the selected
replica.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuconsole.core.ops.actions import ActionError, ActionKind
from gpuconsole.model import Service
from gpuconsole.ui import service_words as words
from gpuconsole.ui.access import why_not
from gpuconsole.ui.format import inert, short_node
from gpuconsole.ui.screens.gpu_detail import ScaledSparkline, downsample
from gpuconsole.ui.widgets.cells import right, text
from gpuconsole.ui.widgets.footer import KeyFooter
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

if TYPE_CHECKING:
    from gpuconsole.ui.protocols import ConsoleApp

HISTORY_S, STEP_S, RELOAD_S = 3600.0, 30.0, 15.0
# (figure the history names, label, fixed ceiling or 0 for the data's own, how the latest reads)
SERIES = (
    ("rps", "requests/s", 0.0, words.rate),
    ("p99_ms", "p99 latency", 0.0, words.short_latency),
    ("tokens_per_s", "tokens/s", 0.0, words.rate),
    ("gpu_util", "GPU use %", 100.0, lambda v: f"{v:.0f}%"),
)
REPLICA_COLUMNS = [("POD", "pod", 24), ("NODE", "node", 14), ("GPUS", "gpus", 8), ("UTIL", "util", 4),
                   ("RUN", "running", 4), ("WAIT", "waiting", 4), ("STATE", "state", None)]
REPLICA_GIVES = {"node": 6, "gpus": 4, "state": 5}
EVENTS = "\nEvents:\n"


def replica_rows(service: Service) -> list[tuple[str, tuple[object, ...]]]:
    rows = []
    for r in service.replicas:
        state = "ready" if r.ready else r.phase + (f": {r.pending_reason}" if r.pending_reason else "")
        util = words.UNKNOWN if r.gpu_utilization is None else f"{r.gpu_utilization:.0f}%"
        rows.append((r.pod, (text(r.pod), text(short_node(r.node) if r.node else words.UNKNOWN),
                             text(r.mig_profile or f"{r.gpus:g}"), right(util), right(words.count(r.running)),
                             right(words.count(r.waiting)), text(state))))
    return rows


class ServiceScreen(ReportsWorkerErrors, ModalScreen[None]):
    """One inference service in depth.

    | key | does |
    |---|---|
    | s | scale to N replicas (asks for N, then y/n) |
    | R | rollout restart (asks y/n) |
    | l | the selected replica's log |
    | D | describe the service (YAML and events) |
    | e | read the events again |
    | esc / q | back |
    """

    CSS_PATH = "service_view.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back"),
        Binding("q", "dismiss", "Back", show=False),
        Binding("s", "scale", "Scale", tooltip="scale the service to N replicas: asks N, then y/n with what it costs"),
        Binding("R", "restart", "Restart", tooltip="rollout restart: every replica replaced (asks y/n)"),
        Binding("l", "logs", "Logs", tooltip="the selected replica's log"),
        Binding("D", "describe", "Describe", tooltip="the service as YAML, with its events"),
        Binding("e", "events", "Events", show=False, tooltip="read the service's events again"),
        Binding("question_mark", "app.help", "Keys", show=False),
    ]

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self._loaded_at = -1e18
        self.history: dict[str, tuple[tuple[float, float], ...]] = {}
        self.history_error = ""
        self.events = ""

    @property
    def console_app(self) -> ConsoleApp:
        return cast("ConsoleApp", self.app)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="service-view") as box:
            box.border_title = Text(inert(self.key))
            box.border_subtitle = "s scale · R restart · l logs · D describe · esc back"
            yield Static(id="service-facts")
            yield Static(Text.assemble(("last hour", "bold")), id="service-window", classes="window-line")
            for figure, label, _ceiling, _fmt in SERIES:
                with Horizontal(classes="spark-row"):
                    yield Static(label, classes="spark-label")
                    yield ScaledSparkline([], id=f"spark-{figure}", classes="spark")
                    yield Static("collecting…", id=f"spark-{figure}-now", classes="spark-now")
            yield LiveTable(REPLICA_COLUMNS, id="replica-table", identity="pod", gives=REPLICA_GIVES)
            yield Static("events: reading…", id="service-events")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#replica-table", LiveTable).focus()
        self.refresh_view()
        self.set_interval(1.0, self.refresh_view)
        self.load_events()

    def current(self) -> Service | None:
        return next((s for s in self.console_app.snapshot.services if s.key == self.key), None)

    def refresh_view(self) -> None:
        service = self.current()
        facts = self.query_one("#service-facts", Static)
        if service is None:
            facts.update(Text(inert(f"{self.key} is no longer reported by the services source.")))
            return
        self.query_one("#service-view").border_title = Text(inert(f"{service.kind.value} {service.key}"))
        lines = [words.summary(service), *words.facts(service)]
        facts.update(Text(inert("\n".join(lines))))
        self.query_one("#replica-table", LiveTable).sync(replica_rows(service))
        if time.monotonic() - self._loaded_at >= RELOAD_S:
            self._loaded_at = time.monotonic()
            self.load_history(service)

    @work(thread=True, exclusive=True, group="service-history", exit_on_error=False, description="service history")
    def load_history(self, service: Service) -> None:
        ops = self.console_app.core.services.service_ops
        history: dict[str, tuple[tuple[float, float], ...]] = {}
        error = ""
        for figure, _label, _ceiling, _fmt in SERIES:
            try:
                history[figure] = ops.history(service, figure, HISTORY_S, STEP_S)
            except ActionError as exc:
                error = str(exc)
                break
        self.app.call_from_thread(self._show_history, history, error)

    def _show_history(self, history: dict[str, tuple[tuple[float, float], ...]], error: str) -> None:
        self.history, self.history_error = history, error
        if not self.is_mounted:
            return
        if error:
            self.query_one("#service-window", Static).update(Text(inert(f"last hour: {error}")))
        for figure, _label, ceiling, fmt in SERIES:
            values = [v for _t, v in history.get(figure, ())]
            self.query_one(f"#spark-{figure}", ScaledSparkline).plot(downsample(values), 0.0, ceiling)
            summary = f"{fmt(values[-1])} (max {fmt(max(values))})" if values else words.UNKNOWN
            self.query_one(f"#spark-{figure}-now", Static).update(summary)

    @work(thread=True, exclusive=True, group="service-events", exit_on_error=False, description="service events")
    def load_events(self) -> None:
        service = self.current()
        if service is None:
            return
        ops = self.console_app.core.services.service_ops
        try:
            described = ops.describe(service.kind.value, service.namespace, service.name)
            _head, found, events = described.partition(EVENTS)
            shown = f"Events:\n{events.rstrip()}" if found else "events: none reported"
        except ActionError as exc:
            shown = f"events: {exc}"
        self.app.call_from_thread(self._show_events, shown)

    def _show_events(self, shown: str) -> None:
        self.events = shown
        if self.is_mounted:
            self.query_one("#service-events", Static).update(Text(inert(shown)))

    # ------------------------------------------------------------------ keys
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        kind = {"scale": ActionKind.SCALE_SERVICE, "restart": ActionKind.RESTART_SERVICE}.get(action)
        if kind is None:
            return True
        service = self.current()
        return None if why_not(self.app, kind, service.namespace if service else None) else True

    def _service(self) -> Service | None:
        service = self.current()
        if service is None:
            self.app.notify(f"{self.key} is no longer reported.", severity="warning")
        return service

    def action_scale(self) -> None:
        from gpuconsole.ui.panes.service_actions import ask_scale

        service = self._service()
        if service is not None:
            ask_scale(self, service)

    def action_restart(self) -> None:
        from gpuconsole.ui.panes.service_actions import ask_restart

        service = self._service()
        if service is not None:
            ask_restart(self, service)

    def action_logs(self) -> None:
        from gpuconsole.ui.panes.service_actions import open_logs

        service = self._service()
        if service is not None:
            open_logs(self, service, self.query_one("#replica-table", LiveTable).selected_key)

    def action_describe(self) -> None:
        from gpuconsole.ui.panes.service_actions import open_describe

        service = self._service()
        if service is not None:
            open_describe(self, service)

    def action_events(self) -> None:
        self.load_events()
