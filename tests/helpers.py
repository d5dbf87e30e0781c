"""Shared helpers for the UI tests: a seeded frozen demo and waiting on the app's loop."""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import threading
import time
from typing import Any

from tests.showcase import START, FrozenClock, record_history, showcase_console
from gpuconsole.model import SourceState

__all__ = ["START", "FrozenClock", "record_history", "demo_console", "wait_until", "wait_for", "all_live", "settle", "TickingClock"]

demo_console = showcase_console


async def wait_until(predicate, timeout: float = 10.0) -> None:
    """Let the app's event loop run until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def wait_for(predicate, timeout: float = 10.0) -> None:
    """Block (outside an event loop) until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def all_live(app) -> bool:
    sources = app.snapshot.sources
    return bool(sources) and all(s.state is SourceState.LIVE for s in sources)


def settle(*keys: str):
    """A snapshot test's ``run_before``: every source live, then ``keys`` pressed one by one."""
    async def run_before(pilot) -> None:
        await wait_until(lambda: all_live(pilot.app))
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause(0.1)

    return run_before


class TickingClock:
    """A clock one second further on at every reading (each audit record its own second)."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        self.t += 1
        return self.t


def json_lines(argv: list[str], **popen: object) -> tuple[subprocess.Popen[str], queue.Queue[dict[str, Any]]]:
    """Start ``argv`` (a command that prints one JSON object a line) and read its lines into a
    queue from a thread, so a test waits for the event it wants with a timeout."""
    proc: subprocess.Popen[str] = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(json.loads(line))

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines

