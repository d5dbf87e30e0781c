"""The gpuconsole Textual app: the panes of :data:`gpuconsole.ui.registry.PANES` over one
Console, the top line, the pane strip and the footer.

The app's own keys (``?`` lists them, the palette ``ctrl+p`` reaches them): the panes' number
keys, ``tab`` / ``shift+tab``, ``/`` filter, ``r`` poll now, ``t`` theme, ``d`` demo, ``$`` cost
calculator, ``q`` quit. Typed keys pass the type-ahead gate (:mod:`gpuconsole.ui.typeahead`);
a worker's unexpected error is one line on screen (:mod:`gpuconsole.ui.worker_errors`); every
notification is inert text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.containers import Container
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.lazy import Lazy
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input

from gpuconsole.ui.boot import AfterFirstFrame, CoreBuilder, CoreBuilt
from gpuconsole.ui.command_line import CommandLine
from gpuconsole.ui.messages import SnapshotUpdated
from gpuconsole.ui.palette import MEMORY_THRESHOLDS, UTIL_THRESHOLDS, Palette
from gpuconsole.ui.registry import BY_ID, PANES, import_panes, pane_class
from gpuconsole.ui.themes import (
    DEFAULT_THEME,
    PLAIN_THEME,
    load_themes,
    short_name,
    textual_name,
    theme_names,
)
from gpuconsole.ui.typeahead import BOOTING, TypeAhead
from gpuconsole.ui.widgets.footer import KeyFooter
from gpuconsole.ui.widgets.pane_tabs import PaneTabs
from gpuconsole.ui.widgets.top_bar import TopBar
from gpuconsole.ui.worker_errors import ReportsWorkerErrors

if TYPE_CHECKING:
    from gpuconsole.core.fleet.console import Console
    from gpuconsole.model import FleetSnapshot
    from gpuconsole.ui.panes.base import Pane
    from gpuconsole.ui.panes.gpus import GpusPane

ACCESS_EVERY_S = 30.0  # how often the users table is read again (a role may change while the console runs)


def _pane_base() -> type[Pane]:
    from gpuconsole.ui.panes.base import Pane

    return Pane


BOOT_KEYS_ALWAYS = frozenset({"ctrl+q", "ctrl+c"})  # quit even before the console is built


def _provider(name: str) -> type[Provider]:
    """Palette providers load when the palette first opens, not at start-up."""
    from gpuconsole.ui import commands

    return getattr(commands, name)  # type: ignore[no-any-return]


class GpuConsoleApp(ReportsWorkerErrors, App[int]):
    """The console. ``core`` (the Console facade) is started on mount; the caller closes it."""

    TITLE = "gpuconsole"
    CSS_PATH = ["app.tcss", *(spec.css_path for spec in PANES)]  # each screen loads its own
    COMMANDS = App.COMMANDS | {
        partial(_provider, name)
        for name in ("ConsoleCommands", "GpuCommands", "JobCommands", "ServiceCommands", "InstanceCommands",
                     "BudgetCommands", "ContextCommands")
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(spec.key, f"show_pane('{spec.id}')", spec.title, show=False) for spec in PANES),
        Binding("tab", "cycle_pane(1)", "Next pane", show=False, priority=True),
        Binding("shift+tab", "cycle_pane(-1)", "Previous pane", show=False, priority=True),
        Binding("slash", "filter", "Filter"),
        Binding("r", "refresh", "Refresh"),
        Binding("t", "next_theme", "Theme"),
        Binding("d", "demo", "Demo", show=False),
        Binding("question_mark", "help", "Keys"),
        Binding("dollar_sign", "cost_calculator", "Costs", show=False),
        Binding("q", "quit_key", "Quit"),
        Binding("colon", "command_line", "Command", show=False),
        # htop's function keys: help, search, quit
        Binding("f1", "help", "Keys", show=False),
        Binding("f3", "filter", "Filter", show=False),
        Binding("f10", "quit_key", "Quit", show=False),
    ]

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, writing only the runs of text that changed (:mod:`gpuconsole.ui.terminal`)."""
        from gpuconsole.ui.terminal import filtered_driver

        return filtered_driver(super().get_driver_class())

    def __init__(self, core: Console | None = None, theme_name: str | None = None, *, start_console: bool = True,
                 gpu_thresholds: tuple[tuple[float, float], tuple[float, float]] | None = None,
                 build: Callable[[], Console] | None = None) -> None:
        """``core``: the console to show; or ``build``, which makes it off the UI thread once the
        first frame (top line, pane strip, footer: "starting") is on screen. Keys typed meanwhile
        are held, in order, for the panes; ``ctrl+q`` quits at once. A ``build`` that raises ends
        the app, with the error in :attr:`boot_error` for the caller to report. The caller closes
        a ``core`` it gave; :meth:`close_core` closes one the app built."""
        # NO_COLOR: text in the terminal's own colours (Textual's Monochrome would draw its default black)
        super().__init__(ansi_color=True if os.environ.get("NO_COLOR") is not None else None)
        if (core is None) == (build is None):
            raise ValueError("give the app a console, or a way to build one")
        self._builder = CoreBuilder(build, import_panes, self.post_message) if build is not None else None
        self.boot_error: BaseException | None = None
        # (utilization, memory) colour thresholds of the GPU views: --gpu-util-thresh, --mem-util-thresh
        self.gpu_thresholds = gpu_thresholds or (UTIL_THRESHOLDS, MEMORY_THRESHOLDS)
        self.start_console = start_console
        for theme in load_themes():
            self.register_theme(theme)
        wanted = theme_name or (PLAIN_THEME if self.no_color else DEFAULT_THEME)
        self.theme = textual_name(wanted)
        self.palette = Palette.from_theme(self.current_theme)
        # None only while booting (see _booting), until _take_core
        self.core: Console = None  # type: ignore[assignment]
        self.snapshot: FleetSnapshot = None  # type: ignore[assignment]
        self._latest = self.snapshot
        self._paint_every = 1.0
        if core is not None:
            self._take_core(core)
        self._flush_timer: Timer | None = None
        self._last_paint = 0.0
        self.after_first_frame = AfterFirstFrame(
            self, lambda: (p for p in self._tabs.query(_pane_base()) if p is not self.current_pane))
        self.access_principal = None  # who the user is (users table), read by load_access
        # keys typed while the one before them is still being handled (see on_event)
        self.typeahead = TypeAhead(self, partial(App.on_event, self), lambda: self._booting)

    @property
    def _booting(self) -> bool:
        return self.core is None

    def _take_core(self, core: Console) -> None:
        self.core = core
        self.snapshot = self._latest = core.snapshot
        self._paint_every = min(core.options.interval, 1.0)

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield TopBar(id="top-bar")
        yield PaneTabs(PANES, id="pane-tabs")
        with ContentSwitcher(initial="overview", id="panes"):
            for spec in PANES:
                with Container(id=spec.id, classes="pane-box"):
                    if not self._booting:
                        yield self._make_pane(spec.id)
        yield CommandLine(id="command-line")
        yield KeyFooter()

    def _make_pane(self, pane_id: str) -> Pane | Lazy:
        pane = pane_class(pane_id)(id=f"{pane_id}-pane")
        # Hidden panes mount just after the first frame: the overview shows sooner.
        return pane if pane_id == "overview" else Lazy(pane)

    def on_mount(self) -> None:
        self._top_bar = self.query_one(TopBar)
        self._tabs = self.query_one(ContentSwitcher)
        self._pane_tabs = self.query_one(PaneTabs)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        if self._booting:
            self._draw_starting()
            self.call_after_refresh(self._start_build)
            return
        self._attach()

    def _attach(self) -> None:
        """Start showing ``self.core``: its snapshots, who the user is, and its polling."""
        self.core.subscribe(self._from_worker)
        self.load_access()
        self.set_interval(ACCESS_EVERY_S, self.load_access)
        if self.start_console:
            # The cache database opens, and the hidden panes get ready, once the first complete
            # frame is on screen (or after a second at most): neither delays what the user sees first.
            self.core.start(open_store=False)
            self.set_timer(1.0, self.after_first_frame.settle)
        self.show_snapshot(self.core.snapshot)

    # ------------------------------------------------------------------ building the console
    def _draw_starting(self) -> None:
        self._top_bar.starting(self.palette)
        self._draw_tabs()

    def _start_build(self) -> None:
        """Once the first frame is painted: build the console (and import the panes) off the UI thread."""
        self._builder.start()

    async def on_core_built(self, message: CoreBuilt) -> None:
        if message.error is not None or message.core is None:
            self.boot_error = message.error
            self.exit(return_code=1)
            return
        self._take_core(message.core)
        mounts = [self.query_one(f"#{spec.id}", Container).mount(self._make_pane(spec.id)) for spec in PANES]
        self._attach()
        self.refresh_bindings()
        for mounted in mounts:
            await mounted
        # The overview is on screen: the keys typed while starting go to it, in order.
        if self.active_pane == "overview" and (pane := self.current_pane) is not None:
            pane.focus_body()
        await self.typeahead.done(BOOTING)

    def close_core(self, wait_s: float = 2.0) -> None:
        """Close the console the app built (see ``build``); one still being built is closed by
        the thread building it, which is given ``wait_s`` to finish."""
        if self._builder is not None:
            self._builder.close(wait_s)

    # ------------------------------------------------------------------ type-ahead
    async def on_event(self, event: events.Event) -> None:
        """Typed keys go through the type-ahead gate (:mod:`gpuconsole.ui.typeahead`), one at a
        time; ``ctrl+q`` quits at once, even while the console is being built."""
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
            if self._booting and isinstance(event, events.Key) and event.key in BOOT_KEYS_ALWAYS:
                self.exit()
                return
            await self.typeahead.take(event)
            return
        await super().on_event(event)

    def _from_worker(self, snapshot: FleetSnapshot) -> None:
        # From the Hub's threads (what panes derive from a new reading is made here first); a
        # newer snapshot replaces a queued older one (SnapshotUpdated.can_replace).
        self.post_message(SnapshotUpdated.delivered(snapshot))

    def on_snapshot_updated(self, message: SnapshotUpdated) -> None:
        # Sources answer one after another; paint at most once per poll interval, so three
        # sources at 1 Hz cost one repaint a second, not three.
        self._latest = message.snapshot
        if self._flush_timer is not None:
            return
        changed = [s.state for s in message.snapshot.sources] != [s.state for s in self.snapshot.sources]
        delay = 0.0 if changed else self._last_paint + self._paint_every - time.monotonic()
        if delay <= 0:
            self._paint_latest()
        else:
            self._flush_timer = self.set_timer(delay, self._paint_latest)

    def _paint_latest(self) -> None:
        self._flush_timer = None
        self._last_paint = time.monotonic()
        self.show_snapshot(self._latest)

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        if self._booting:
            self._draw_starting()
            return
        self.snapshot = snapshot
        self._render_top_bar()
        self._draw_tabs()
        pane = self.current_pane
        if pane is not None:
            pane.show(snapshot, self.palette)
        self.after_first_frame.shown(snapshot)  # the cache and the hidden panes, once it is painted
        if self.core.services.budget_ops.take_bell():
            # A budget crossed a notify threshold: ring once, and say which where the user looks.
            self.bell()
            crossing = next((a for a in snapshot.alerts if a.source == "budget"), None)
            if crossing is not None:
                self.notify(crossing.message, title="Budget", severity="warning", timeout=10)

    def _render_top_bar(self) -> None:
        from gpuconsole.ui.access import identity_text
        from gpuconsole.ui.panes.base import status_text

        snap, palette = self.snapshot, self.palette
        dots = [status_text(status, snap.taken_at, palette)[:2] for status in snap.sources]
        self._top_bar.draw(snap, palette, dots, identity_text(self))

    @property
    def active_pane(self) -> str:
        """The id of the pane on screen (``overview``, ``gpus``, …)."""
        return self._tabs.current or "overview"

    @property
    def current_pane(self) -> Pane | None:
        try:
            return self._tabs.query_one(f"#{self.active_pane}-pane", _pane_base())
        except NoMatches:  # not mounted yet (hidden panes mount after the first frame) or closing
            return None

    def _draw_tabs(self) -> None:
        palette = self.palette
        self._pane_tabs.draw(self.active_pane, palette.accent + Style(reverse=True, bold=True), palette.accent)

    def on_pane_tabs_clicked(self, message: PaneTabs.Clicked) -> None:
        self.action_show_pane(message.pane_id)

    # ------------------------------------------------------------------ actions
    def action_show_pane(self, pane_id: str) -> None:
        if pane_id not in BY_ID:
            return
        self._tabs.current = pane_id
        self._draw_tabs()
        pane = self.current_pane
        if pane is not None:
            pane.show(self.snapshot, self.palette)
            pane.focus_body()
        else:
            self.call_after_refresh(self._show_when_mounted, pane_id)

    def _show_when_mounted(self, pane_id: str) -> None:
        if self.active_pane == pane_id and (pane := self.current_pane) is not None:
            pane.show(self.snapshot, self.palette)
            pane.focus_body()

    def action_cycle_pane(self, step: int) -> None:
        ids = list(BY_ID)
        current = self.active_pane
        self.action_show_pane(ids[(ids.index(current) + step) % len(ids)])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self._booting:
            return True if action in {"quit", "quit_key"} else None  # shown dimmed until the console is up
        # While typing in a field, tab and the single-letter keys belong to the field.
        typing = isinstance(self.focused, Input)
        if typing and action in {"cycle_pane", "show_pane", "refresh", "next_theme", "demo", "quit_key", "filter",
                                 "help", "command_line"}:
            return False
        # Over a dialog or wizard, tab moves between its fields; the panes behind stay put.
        if action in {"cycle_pane", "show_pane", "filter", "demo", "command_line"} and len(self.screen_stack) > 1:
            return False
        return True

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Words shown as written (names, typed words, errors from data): no markup, and every
        control character spelled out (:func:`~gpuconsole.ui.format.inert`)."""
        from gpuconsole.ui.format import inert

        super().notify(inert(message), title=inert(title), severity=severity, timeout=timeout, markup=markup)

    async def action_quit_key(self) -> None:
        """``q``: quit (``ctrl+q`` quits even while typing in a field)."""
        await self.action_quit()

    def action_command_line(self) -> None:
        """``:``: the command line (``:gpus``, ``:ns team-a``, ``:ctx prod``, ``:q``)."""
        self.query_one(CommandLine).open()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, CommandLine):
            event.stop()
            from gpuconsole.ui.navigation import run_command

            line = event.input
            line.action_close()
            run_command(self, event.value)

    def action_filter(self) -> None:
        pane = self.current_pane
        if pane is not None and pane.filterable:
            pane.open_filter()
        else:
            self.notify("This pane has no table to filter.", severity="warning", timeout=3)

    def action_refresh(self) -> None:
        self.core.refresh()
        self.notify("Polling every source now.", timeout=2)

    def action_next_theme(self) -> None:
        names = theme_names()
        current = short_name(self.theme)
        nxt = names[(names.index(current) + 1) % len(names)] if current in names else names[0]
        self.set_theme(nxt)

    def set_theme(self, short: str) -> None:
        self.theme = textual_name(short)
        self.notify(f"Theme: {short}", timeout=2)

    def _on_theme_changed(self, _theme: object) -> None:
        self.palette = Palette.from_theme(self.current_theme)
        self.show_snapshot(self.snapshot)

    def action_demo(self) -> None:
        if self.core.services.demo:
            self.notify("Already running the demo.", timeout=2)
            return
        self.core.switch_to_demo()
        self.notify("Switched to the demo: everything you see now is simulated.", timeout=4)

    def action_cost_calculator(self) -> None:
        """``$``: the cost comparison calculator (own server vs cloud on-demand vs spot)."""
        from gpuconsole.ui.screens.calculator import open_cost_calculator

        open_cost_calculator(self)

    def action_help(self) -> None:
        from gpuconsole.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def on_gpus_pane_open_detail(self, message: GpusPane.OpenDetail) -> None:
        self.open_gpu(message.uuid)

    def open_gpu(self, uuid: str) -> None:
        """Push the detail view of one GPU (sparklines, slices, processes)."""
        from gpuconsole.ui.screens.gpu_detail import GpuDetailScreen

        self.push_screen(GpuDetailScreen(uuid))

    @work(thread=True, exclusive=True, group="access", exit_on_error=False, description="read the users table")
    def load_access(self) -> None:
        """Who the user is (role, namespaces), read off the UI thread; panes then disable what
        the role may not do. The core checks every action either way."""
        principal = self.core.services.guard.principal
        if principal != self.access_principal:
            self.call_from_thread(self._access_changed, principal)

    def _access_changed(self, principal: object) -> None:
        self.access_principal = principal
        self.show_snapshot(self.snapshot)

    def switch_context(self, name: str) -> None:
        """Watch another kubeconfig context's jobs (``:ctx``, the palette); failures are one line."""
        from gpuconsole.ui.navigation import switch_context

        switch_context(self, name)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, less its theme picker: one theme system, ``themes/``
        (``t``, and the palette's ``Theme: …``)."""
        return (command for command in super().get_system_commands(screen) if command.title != "Theme")
