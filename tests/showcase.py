"""A seeded demo frozen at one moment: what the screenshots, the benchmarks and the UI tests show.

The simulated world advances only when its clock does, so a console built here shows the same
fleet, the same jobs and the same spend on every machine and every run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.fleet.store import Store
from gpuconsole.model import SourceKind

# Mid-month, mid-afternoon UTC: spend today and this month are both meaningful.
START = datetime(2026, 11, 16, 14, 0, tzinfo=UTC).timestamp()


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, t: float = START) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def showcase_console(
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
    """A demo console on a frozen clock (``demo=False``: no backends at all)."""
    clock = clock or FrozenClock()
    store = Store(db) if db is not None else None
    options = ConsoleOptions(
        sources=SourceOptions(demo=demo, seed=seed, demo_nodes=nodes, demo_faults=faults, sim_start=clock()),
        interval=interval,
        timeout=timeout,
        clock=clock,
    )
    return Console(options, store=store)


def record_history(console: Console, clock: FrozenClock, seconds: int) -> None:
    """Run the world ``seconds`` seconds forward, storing every GPU reading as the Hub would."""
    if console.store is None:
        raise ValueError("recording history needs a console with a Store")
    source = console.source(SourceKind.GPUS)
    for _ in range(seconds):
        clock.advance(1)
        reading = source.poll_gpus()
        console.store.record_gpus(reading.gpus, reading.taken_at)


def run_autopilot(console: Console, clock: FrozenClock, seconds: int, step: int = 15) -> None:
    """Run the world and the console's autopilot ``seconds`` seconds forward, one refresh every
    ``step`` seconds, so the demo's rules have decided and acted before the first frame."""
    for _ in range(0, seconds, step):
        clock.advance(step)
        console.hub.poll_once()
        console.services.autopilot.tick(console.compose())
