"""Full garbage collections wait for a quiet keyboard once the console is built."""

from __future__ import annotations

import gc
import os

import pytest

from gpuconsole.ui import collector
from gpuconsole.ui.collector import CollectorPacing, pace_collections
from tests.driving import running


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def restored():
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_full_collections_wait_for_the_console_and_a_quiet_keyboard(restored) -> None:
    clock, ready, last_key = Clock(), [False], [0.0]
    pacing = CollectorPacing(lambda: last_key[0], lambda: ready[0], clock)
    own = gc.get_threshold()
    clock.now += 60
    assert not pacing.tick() and gc.get_threshold() == own  # still building: the interpreter's pace
    ready[0] = True
    assert not pacing.tick()  # taken over: what exists is frozen, the third threshold is ours
    assert gc.get_threshold()[2] == collector.NEVER and gc.get_freeze_count() > 0
    full_before = gc.get_stats()[2]["collections"]
    for _ in range(int(collector.LONGEST_GAP_S / 0.25) - 1):  # keys every 0.25 s: no full collection
        clock.now += 0.25
        last_key[0] = clock.now
        assert not pacing.tick()
    clock.now += 0.25
    assert pacing.tick()  # the longest gap: collected whatever the keyboard does
    assert gc.get_stats()[2]["collections"] == full_before + 1
    clock.now += collector.LEAST_GAP_S  # quiet for long enough, and the least gap passed
    assert pacing.tick() and pacing.collections == 2
    clock.now += 1.0
    assert not pacing.tick()  # quiet, but a full collection ran a second ago
    pacing.release()
    assert gc.get_threshold() == own and gc.get_freeze_count() == 0


def test_the_pacing_ends_with_the_app_and_gives_the_interpreter_its_pace_back(restored) -> None:
    own = gc.get_threshold()
    pacing = CollectorPacing(lambda: 0.0, lambda: True)
    with pacing.beside():
        pacing.tick()
        assert gc.get_threshold()[2] == collector.NEVER
    assert gc.get_threshold() == own and gc.get_freeze_count() == 0


async def test_a_typed_key_is_when_the_keyboard_was_last_used() -> None:
    async with running() as (app, pilot):
        pacing = pace_collections(app)
        before = app.typeahead.last_key_at
        await pilot.press("2")
        assert app.typeahead.last_key_at > before
        assert pacing._last_key() == app.typeahead.last_key_at and pacing._ready()  # noqa: SLF001


def _resident_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(collector._heap_trimmer() is None or not os.path.exists("/proc/self/statm"),  # noqa: SLF001
                    reason="glibc's malloc_trim and /proc (Linux)")
def test_a_paced_full_collection_gives_the_freed_heap_back_to_the_system(restored) -> None:
    """Space freed in the middle of the C heap (a big reading's tables, gone) stays resident
    until the heap is trimmed; the paced full collection trims it."""
    clock = Clock()
    pacing = CollectorPacing(lambda: 0.0, lambda: True, clock)
    pacing.tick()  # taken over
    blocks = [bytearray(64 * 1024) for _ in range(1200)]  # 75 MiB under the mmap threshold: the heap
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touched: resident
    pin = bytearray(64 * 1024)  # above them, so the heap's top cannot shrink by itself
    del blocks
    held = _resident_mib()
    clock.now += collector.LONGEST_GAP_S
    assert pacing.tick()
    assert _resident_mib() < held - 40
    del pin
