"""Driving the real app in a test: the one ``running()`` every UI test starts it with, the
readers of what is on screen (a table, a pane's words), and keys typed in one burst."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager

from rich.text import Text
from textual import events
from textual.keys import _character_to_key
from textual.widgets import Static

from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.widgets.live_table import LiveTable
from gpuconsole.ui.widgets.virtual_table import VirtualTable
from tests.helpers import all_live, demo_console, wait_until

SIZE = (80, 24)


def shown(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def pane_text(app: GpuConsoleApp, pane_id: str) -> str:
    pane = app.query_one(f"#{pane_id}-pane")
    return "\n".join(shown(s) for s in pane.query(Static) if not isinstance(s, LiveTable) and s.display)


def table(app: GpuConsoleApp, table_id: str) -> LiveTable | VirtualTable:
    found = app.query_one(f"#{table_id}")
    assert isinstance(found, LiveTable | VirtualTable)
    return found


def column(app: GpuConsoleApp, table_id: str, column_key: str) -> list[str]:
    t = table(app, table_id)
    return [str(t.get_cell(key, column_key)) for key in t.shown_keys]


async def started(pilot, ready: Callable[[GpuConsoleApp], bool] = all_live) -> None:
    await wait_until(lambda: ready(pilot.app))
    await pilot.pause()


@asynccontextmanager
async def running(console=None, *, theme: str | None = None, live: bool | Callable[[GpuConsoleApp], bool] = True,
                  size: tuple[int, int] = SIZE, thresholds=None, key: str | None = None,
                  ready: Callable[[GpuConsoleApp], bool] | None = None, notifications: bool = False):
    """The app on ``console`` (a frozen seeded demo when None) at ``size``, once every source has
    answered (``live``: False to start at once, or a predicate of its own); then ``key`` pressed,
    waiting for ``ready``; ``notifications``: draw them as toasts. The console is closed afterwards."""
    console = console or demo_console()
    app = GpuConsoleApp(console, theme_name=theme, gpu_thresholds=thresholds)
    try:
        async with app.run_test(size=size, notifications=notifications) as pilot:
            if live:
                await started(pilot, all_live if live is True else live)
            if key is not None:
                await pilot.press(key)
            if ready is not None:
                await wait_until(lambda: ready(app))
                await pilot.pause()
            yield app, pilot
    finally:
        console.close()


# Keys as a fast typist sends them: all at once, before the first one has been handled.
SPECIAL = {"tab": "\t", "enter": "\r", "home": None, "end": None, "pageup": None, "pagedown": None,
           "escape": "\x1b", "ctrl+n": None, "ctrl+d": None, "space": " "}


def burst(app, *parts: str) -> None:
    """Post every key of ``parts`` to the app at once: a part named in SPECIAL is that one key,
    any other part is typed character by character."""
    for part in parts:
        if part in SPECIAL:
            app.post_message(events.Key(part, SPECIAL[part]))
            continue
        for char in part:
            key = char if char.isalnum() else _character_to_key(char)
            app.post_message(events.Key(key, char))


async def settle(pilot, predicate, timeout: float = 10.0) -> None:
    """Let the app work through the burst; fails (after ``timeout``) unless ``predicate()`` holds."""
    try:
        await wait_until(lambda: not pilot.app.is_running or predicate(), timeout)
    finally:
        await pilot.pause()


async def show_pane(app, pilot, key: str, pane_id: str) -> None:
    await pilot.press(key)
    await wait_until(lambda: app.current_pane is not None and app.current_pane.id == f"{pane_id}-pane")
    await pilot.pause()
