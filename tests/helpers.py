"""Builders for a seeded, frozen-clock demo console, shared by the UI and snapshot tests."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from gpuconsole.core.console import Console, ConsoleOptions
from gpuconsole.core.sources import SourceOptions
from gpuconsole.core.store import Store
from gpuconsole.model import SourceState

# Mid-month, mid-afternoon UTC: spend today and this month are both meaningful.
START = datetime(2026, 11, 16, 14, 0, tzinfo=UTC).timestamp()


class FrozenClock:
    """A clock the test moves by hand; the simulated world only advances when it does."""

    def __init__(self, t: float = START) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def demo_console(
    *,
    seed: int = 7,
    nodes: int | None = None,
    faults: str | None = None,
    db: Path | None = None,
    clock: FrozenClock | None = None,
    interval: float = 0.25,
    timeout: float = 0.5,
    demo: bool = True,
) -> Console:
    clock = clock or FrozenClock()
    store = Store(db) if db is not None else None
    options = ConsoleOptions(
        sources=SourceOptions(demo=demo, seed=seed, demo_nodes=nodes, demo_faults=faults, sim_start=START),
        interval=interval,
        timeout=timeout,
        clock=clock,
    )
    return Console(options, store=store)


async def wait_until(predicate, timeout: float = 10.0) -> None:
    """Let the app's event loop run until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def all_live(app) -> bool:
    sources = app.snapshot.sources
    return bool(sources) and all(s.state is SourceState.LIVE for s in sources)
