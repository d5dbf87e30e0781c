"""Key press → screen, measured precisely inside ``App.run_test()``.

``Pilot.press`` waits for the app to go idle and for animations after every key, and
``Pilot.pause`` waits again: on a 2-core machine that alone is about 100 ms, more than most of
what the console does for a key. :class:`KeyLatency` instead

1. sends the key event the way a terminal driver does (``driver.send_message`` of an
   ``events.Key``, which schedules it on the app's loop), reading the clock just before, and
2. watches the frames the app renders: it wraps ``App._display``, which every screen update goes
   through (headless too, where the frame is computed but not written), and stops the clock at
   the end of the first frame after the key in which ``done()`` holds. With ``encode`` (the
   default) that frame and every frame before it is also turned into the terminal's escape
   codes, as a real terminal's driver would, so the figure includes that cost.

It reports the wall time and the CPU time of the app's thread (the event loop's, where keys,
snapshots and frames are all handled) between the two: the CPU figure is what the console itself
spent, the wall figure adds waiting for other threads and other processes on a busy machine.

    .venv/bin/python benchmarks/keylat.py          # check it against the Pilot on a trivial key

The check runs the default demo headless on the GPUs pane and moves the cursor one row down
(done: the frame with the cursor on the next row and the line under the table rewritten for it),
timed both ways, and a key bound to nothing timed by the Pilot: the Pilot's figure less its
figure for that key (its own cost) should come close to this one.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class KeyTime:
    """One key: seconds from sending it to the end of the frame that shows its effect."""

    wall: float
    cpu: float  # CPU time of the app's thread over the same span
    frames: int  # frames rendered after the key, the one that showed it included


class KeyLatency:
    """Hooks an app's frame output; :meth:`press` sends a key and times it to the screen.

    It keeps the text of every screen line as the frames left it (what a terminal would show,
    without colours), so a condition can ask whether words are on screen, not only whether the
    app's state changed: a widget's state often changes a frame or a layout pass before the
    screen shows it. Use inside ``async with app.run_test() as pilot``::

        keys = await KeyLatency.attach(app)
        try:
            took = await keys.press("down", lambda: keys.on_screen("gpu-node-3"))
        finally:
            keys.close()
    """

    def __init__(self, app: Any, *, encode: bool = True) -> None:
        from textual.app import App

        if not hasattr(App, "_display"):
            import textual

            raise RuntimeError(f"textual {textual.__version__} has no App._display: update benchmarks/keylat.py")
        self.app = app
        self.encode = encode
        self.lines: list[list[str]] = []
        self._text: str | None = None
        self._waiter: tuple[Callable[[], bool], asyncio.Future[KeyTime], float, float] | None = None
        self._frames = 0
        self._painted: asyncio.Event | None = None
        self._original = app._display
        app._display = self._display  # an instance attribute: only this app is hooked

    @classmethod
    async def attach(cls, app: Any, *, encode: bool = True) -> KeyLatency:
        """Hook ``app`` (running) and wait for a full repaint, so the text copy is whole."""
        keys = cls(app, encode=encode)
        keys._painted = asyncio.Event()
        app.screen.refresh()
        await asyncio.wait_for(keys._painted.wait(), 30.0)
        return keys

    def close(self) -> None:
        """Unhook the app (idempotent)."""
        if self.app.__dict__.get("_display") == self._display:
            del self.app._display

    # ------------------------------------------------------------------ the screen's text
    def text(self) -> str:
        """The screen as its text, lines joined by newlines."""
        if self._text is None:
            self._text = "\n".join("".join(line) for line in self.lines)
        return self._text

    def on_screen(self, words: str) -> bool:
        """Whether ``words`` show on one line of the screen."""
        return words in self.text()

    def line(self, y: int) -> str:
        return "".join(self.lines[y]) if 0 <= y < len(self.lines) else ""

    def _paint(self, renderable: Any) -> None:
        width, height = self.app.size
        lines = self.lines
        if len(lines) != height or (lines and len(lines[0]) != width):
            self.lines = lines = [[" "] * width for _ in range(height)]
        strips = getattr(renderable, "strips", None)
        if strips is not None:  # a LayoutUpdate: whole lines from the region's top
            x0, y0 = renderable.region.x, renderable.region.y
            for y, line in enumerate(strips, y0):
                if 0 <= y < height:
                    self._put(lines[y], x0, "".join(strip.text for strip in line))
        else:  # a ChopsUpdate: the changed cuts of the changed lines
            chops = renderable.chops
            for y in sorted({y for y, _x1, _x2 in renderable.spans}):
                if 0 <= y < height:
                    for x, strip in chops[y].items():
                        if strip is not None:
                            self._put(lines[y], x, strip.text)
        self._text = None

    @staticmethod
    def _put(line: list[str], x: int, text: str) -> None:
        end = min(len(line), x + len(text))
        if end > x >= 0:
            line[x:end] = text[: end - x]

    # ------------------------------------------------------------------ frames and keys
    def _display(self, screen: Any, renderable: Any) -> None:
        self._original(screen, renderable)
        if renderable is None or not hasattr(renderable, "render_segments"):
            return
        if self.encode and self.app.is_headless:
            renderable.render_segments(self.app.console)  # what a terminal driver would write (then dropped)
        self._paint(renderable)
        if self._painted is not None:
            self._painted.set()
            self._painted = None
        waiter = self._waiter
        if waiter is None:
            return
        self._frames += 1
        done, future, wall0, cpu0 = waiter
        if not future.done() and done():
            future.set_result(KeyTime(time.perf_counter() - wall0, time.thread_time() - cpu0, self._frames))
            self._waiter = None

    async def press(self, key: str, done: Callable[[], bool], *, timeout: float = 30.0) -> KeyTime:
        """Send ``key`` (a Textual key name or one character) and wait for the first frame
        after it at whose end ``done()`` holds.

        Raises:
            ValueError: ``done()`` holds before the key is sent (nothing to measure).
            TimeoutError: no such frame within ``timeout`` seconds.
        """
        if done():
            raise ValueError(f"the condition holds before {key!r} is pressed")
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        waiting = self._wait(done, wall0, cpu0)
        self.send(key)
        return await asyncio.wait_for(waiting, timeout)

    def send(self, key: str) -> None:
        """Send ``key`` as the terminal driver would, and return at once."""
        event = key_event(key)
        event.set_sender(self.app)
        self.app._driver.send_message(event)

    async def frame(self, done: Callable[[], bool], since: tuple[float, float], *, timeout: float = 120.0) -> KeyTime:
        """Wait for the first frame at whose end ``done()`` holds; times from ``since``
        (``time.perf_counter()``, ``time.thread_time()`` read on the app's thread)."""
        return await asyncio.wait_for(self._wait(done, *since), timeout)

    def _wait(self, done: Callable[[], bool], wall0: float, cpu0: float) -> asyncio.Future[KeyTime]:
        future: asyncio.Future[KeyTime] = asyncio.get_running_loop().create_future()
        self._frames = 0
        self._waiter = (done, future, wall0, cpu0)

        def clear(_: object) -> None:
            if self._waiter is not None and self._waiter[1] is future:
                self._waiter = None

        future.add_done_callback(clear)
        return future

    async def walk_down(self, pane: Any, table: Any, keys: int = 9, spacing: float = 0.37) -> list[KeyTime]:
        """Press ``down`` in ``table`` ``keys`` times, ``spacing`` seconds apart (so the keys meet
        a 1 s refresh at different phases), each timed until the next row is shown."""
        times = []
        for _ in range(keys):
            await asyncio.sleep(spacing)
            times.append(await self.press("down", self.row_shown(pane, table, table.cursor_row + 1)))
        return times

    def row_shown(self, pane: Any, table: Any, row: int) -> Callable[[], bool]:
        """A condition: ``table``'s cursor is on ``row`` and the screen shows ``pane``'s line
        under the table rewritten for it (all that a cursor key changes on screen)."""
        view = pane.query_one(".row-detail")
        before = view._shown

        def done() -> bool:
            shown = view._shown
            if table.cursor_row != row or shown is before or shown is None:
                return False
            return self.on_screen(shown.plain.splitlines()[0][:60]) if shown.plain else True

        return done

    def filter_shown(self, table: Any, words: str, name_of: Callable[[str], str]) -> Callable[[], bool]:
        """A condition: the screen shows the pane's ``filter: words`` and either ``table``'s rows
        have changed and the names (``name_of(key)``, as far as a 20-column cell shows them) of
        the first three rows it now holds are on screen, or it holds none and the pane says no
        rows match: the narrowed table is on screen."""
        marker = f"filter: {words.strip().lower()}"
        before = table._keys

        def done() -> bool:
            keys = table._keys
            if not self.on_screen(marker):
                return False
            if not keys:  # () is one object: "changed" cannot be told from the keys
                return self.on_screen(f"no rows match {words.strip().lower()!r}")
            if keys is before:
                return False
            return all(self.on_screen(name_of(key)[:20]) for key in keys[:3])

        return done

    async def type_filter(self, pilot: Any, field: Any, table: Any, word: str, name_of: Callable[[str], str], *,
                          settle: float = 0.05, timeout: float = 30.0) -> KeyTime:
        """Put all of ``word`` but its last letter in the filter ``field`` (the caret at the end,
        where the next letter goes), let the app settle, then time the last letter until the
        narrowed ``table`` is on screen (:meth:`filter_shown`)."""
        field.value = word[:-1]
        field.cursor_position = len(field.value)
        await pilot.pause()
        await asyncio.sleep(settle)
        return await self.press(word[-1], self.filter_shown(table, word, name_of), timeout=timeout)


def key_event(key: str) -> Any:
    """The ``events.Key`` a terminal driver makes for ``key``, as ``App._press_keys`` builds it."""
    from textual import events
    from textual.keys import (
        REPLACED_KEYS,
        _character_to_key,
        _get_unicode_name_from_key,
    )

    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    original = REPLACED_KEYS.get(key, key)
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(original))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


async def check(runs: int = 15) -> dict[str, float]:
    """The default demo on the GPUs pane: ``down`` timed by the Pilot and by :class:`KeyLatency`."""
    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    console = make_console(parse_args(["--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z"]))
    app = GpuConsoleApp(console)
    pilot_times, idle, wall, cpu = [], [], [], []
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("2")
            await asyncio.sleep(2.0)
            pane = app.query_one("#gpus-pane")
            table = pane.query_one("#gpu-table", VirtualTable)
            table.focus()
            await pilot.pause()
            keys = await KeyLatency.attach(app)
            try:
                for _ in range(runs):
                    table.move_cursor(row=0)
                    await pilot.pause()
                    await asyncio.sleep(0.05)
                    t0 = time.perf_counter()
                    await pilot.press("down")
                    while table.cursor_row != 1:
                        await asyncio.sleep(0.001)
                    await pilot.pause()
                    pilot_times.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    await pilot.press("f19")  # bound to nothing: the Pilot's own cost per key
                    await pilot.pause()
                    idle.append(time.perf_counter() - t0)
                    table.move_cursor(row=0)
                    await pilot.pause()
                    await asyncio.sleep(0.05)
                    took = await keys.press("down", keys.row_shown(pane, table, 1))
                    wall.append(took.wall)
                    cpu.append(took.cpu)
                # The text copy must match a full repaint of the screen as it is now.
                full = KeyLatency.__new__(KeyLatency)
                full.app, full.lines = app, []
                full._paint(app.screen._compositor.render_update(full=True))
                same = full.text() == keys.text()
            finally:
                keys.close()
    finally:
        console.close()
    if not same:
        raise AssertionError("the text copy of the screen differs from a full repaint")
    return {"pilot": statistics.median(pilot_times), "pilot_idle": statistics.median(idle), "wall": statistics.median(wall), "cpu": statistics.median(cpu)}


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="keys timed each way (default 15)")
    args = parser.parse_args()
    result = asyncio.run(check(args.runs))
    print(f"{'down in the GPUs table (default demo)':<40}{'median':>10}")
    print(f"{'  Pilot: press + pause':<40}{result['pilot'] * 1000:>8.1f}ms")
    print(f"{'  key → screen (wall)':<40}{result['wall'] * 1000:>8.1f}ms")
    print(f"{'  key → screen (UI thread CPU)':<40}{result['cpu'] * 1000:>8.1f}ms")
    print(f"{'  Pilot, a key bound to nothing':<40}{result['pilot_idle'] * 1000:>8.1f}ms")
    print(f"{'  Pilot less that (the key itself)':<40}{(result['pilot'] - result['pilot_idle']) * 1000:>8.1f}ms")
    return 0

def time_ticks(app: Any, clock: Callable[[], float] = time.thread_time) -> list[float]:
    """Wrap ``app.show_snapshot`` so that each snapshot it draws adds its duration (by ``clock``;
    default the UI thread's CPU time) to the list returned."""
    ticks: list[float] = []
    show = app.show_snapshot

    def timed(snapshot: Any) -> None:  # a FleetSnapshot
        t0 = clock()
        show(snapshot)
        ticks.append(clock() - t0)

    app.show_snapshot = timed
    return ticks


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
