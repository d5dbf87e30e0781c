"""The Hub supervises sources: live, error, stale on a hang, backoff, recovery."""

from __future__ import annotations

import threading
import time

import pytest

from gpuconsole.backends.base import BackendError, BackendThrottled, BackendUnavailable
from gpuconsole.core.fleet.hub import Hub, PollPolicy
from gpuconsole.model import GpuReading, SourceKind, SourceState
from tests.helpers import wait_for


class ScriptedSource:
    """A GPU source whose next answer the test decides: a reading, an error, or a hang."""

    name = "scripted"
    capabilities = frozenset()

    def __init__(self) -> None:
        self.mode = "ok"
        self.calls = 0
        self.release = threading.Event()

    def poll_gpus(self) -> GpuReading:
        self.calls += 1
        if self.mode == "error":
            raise BackendError("driver said no")
        if self.mode == "missing":
            raise BackendUnavailable("no driver", hint="install it")
        if self.mode == "throttled":
            raise BackendThrottled("RequestLimitExceeded: Request limit exceeded.")
        if self.mode == "boom":
            raise RuntimeError("unexpected\nsecond line")
        if self.mode == "hang":
            self.release.wait(10)
        return GpuReading(gpus=(), taken_at=time.time())

    def close(self) -> None:
        self.release.set()


@pytest.fixture
def hub_and_source():
    source = ScriptedSource()
    updates: list[SourceKind] = []
    hub = Hub(
        {SourceKind.GPUS: source},
        updates.append,
        {SourceKind.GPUS: PollPolicy(interval=0.02, timeout=0.2, max_backoff=0.05, unconfigured_retry=0.05)},
    )
    yield hub, source
    source.release.set()
    hub.stop(timeout=0.5)


def state(hub: Hub) -> SourceState:
    return hub.statuses()[0].state


def test_live_then_error_then_recovers(hub_and_source):
    hub, source = hub_and_source
    hub.start()
    wait_for(lambda: state(hub) is SourceState.LIVE)
    source.mode = "error"
    wait_for(lambda: state(hub) is SourceState.ERROR)
    status = hub.statuses()[0]
    assert status.error == "driver said no"
    assert status.describe(time.time()) == "error: driver said no"
    assert hub.reading(SourceKind.GPUS) is not None, "last good data stays on screen"
    source.mode = "ok"
    wait_for(lambda: state(hub) is SourceState.LIVE)


def test_hang_marks_stale_and_does_not_pile_up_threads(hub_and_source):
    hub, source = hub_and_source
    hub.start()
    wait_for(lambda: state(hub) is SourceState.LIVE)
    source.mode = "hang"
    wait_for(lambda: state(hub) is SourceState.STALE)
    calls_while_hung = source.calls
    time.sleep(0.3)
    assert source.calls == calls_while_hung, "no new poll while the previous one hangs"
    assert hub.statuses()[0].describe(time.time()).startswith("stale for")
    source.mode = "ok"
    source.release.set()
    wait_for(lambda: state(hub) is SourceState.LIVE)


def test_a_source_that_hangs_before_its_first_answer_is_waited_for_and_counts_up(hub_and_source):
    """Never answered: not "stale for 0 s" (stale since when?) but still connecting, with the
    seconds waited so far growing."""
    hub, source = hub_and_source
    source.mode = "hang"
    hub.start()
    wait_for(lambda: hub.statuses()[0].waiting_since is not None)
    status = hub.statuses()[0]
    assert status.state is SourceState.CONNECTING and status.updated_at is None
    assert hub.reading(SourceKind.GPUS) is None
    assert status.describe(status.waiting_since + 3.4) == "no answer yet, 3 s"
    assert status.describe(status.waiting_since + 42) == "no answer yet, 42 s"
    source.mode = "ok"
    source.release.set()
    wait_for(lambda: state(hub) is SourceState.LIVE)


def test_unexpected_exception_is_one_line_error(hub_and_source):
    hub, source = hub_and_source
    source.mode = "boom"
    hub.start()
    wait_for(lambda: state(hub) is SourceState.ERROR)
    assert hub.statuses()[0].error == "unexpected"


def test_unconfigured_carries_hint(hub_and_source):
    hub, source = hub_and_source
    source.mode = "missing"
    hub.start()
    wait_for(lambda: state(hub) is SourceState.UNCONFIGURED)
    status = hub.statuses()[0]
    assert status.hint == "install it"
    assert status.describe(0) == "not configured: no driver"


def test_backoff_grows_and_is_capped():
    source = ScriptedSource()
    hub = Hub({SourceKind.GPUS: source}, lambda kind: None, {SourceKind.GPUS: PollPolicy(interval=1.0, max_backoff=30.0)},
              rand=lambda: 0.0)  # no jitter: the doubling itself
    runner = hub.runners[SourceKind.GPUS]
    source.mode = "error"
    delays = [runner.run_once(source.poll_gpus) for _ in range(7)]
    assert delays[:4] == [2.0, 4.0, 8.0, 16.0]
    assert delays[-1] == 30.0
    source.mode = "ok"
    assert runner.run_once(source.poll_gpus) == 1.0
    assert runner.failures == 0
    hub.stop()


def test_backoff_is_jittered_within_its_bounds():
    """Two consoles that failed together do not retry together: each backoff is shortened by a
    random part of up to ``jitter`` of it, and never exceeds the cap."""
    import random

    def delays(seed: int) -> list[float]:
        source = ScriptedSource()
        source.mode = "error"
        policy = PollPolicy(interval=1.0, max_backoff=30.0, jitter=0.25)
        hub = Hub({SourceKind.GPUS: source}, lambda kind: None, {SourceKind.GPUS: policy}, rand=random.Random(seed).random)
        try:
            return [hub.runners[SourceKind.GPUS].run_once(source.poll_gpus) for _ in range(7)]
        finally:
            hub.stop()

    first, second = delays(1), delays(2)
    assert first != second, "two seeds, two schedules"
    assert first == delays(1), "a seed gives the same schedule again"
    for run in (first, second):
        for failures, delay in enumerate(run, start=1):
            full = min(2.0 ** failures, 30.0)
            assert 0.75 * full <= delay <= full, (failures, delay)


def test_polls_run_on_one_long_lived_worker_per_source():
    """Every poll of a source runs on the same thread; none is started per poll."""
    seen: list[threading.Thread] = []

    class Where(ScriptedSource):
        def poll_gpus(self) -> GpuReading:
            seen.append(threading.current_thread())
            return super().poll_gpus()

    source = Where()
    hub = Hub({SourceKind.GPUS: source}, lambda kind: None)
    runner = hub.runners[SourceKind.GPUS]
    try:
        before = threading.active_count()
        for _ in range(5):
            runner.run_once(source.poll_gpus)
        assert len(seen) == 5 and len(set(seen)) == 1 and seen[0] is not threading.current_thread()
        assert threading.active_count() <= before + 1, "at most the one worker, started with the first poll"
    finally:
        hub.stop()
    wait_for(lambda: not seen[0].is_alive(), timeout=5)  # the worker ends with the hub


def test_polls_at_the_interval_fall_on_one_grid_so_sources_answer_together():
    hub = Hub({SourceKind.GPUS: ScriptedSource()}, lambda kind: None, {SourceKind.GPUS: PollPolicy(interval=1.0)})
    runner = hub.runners[SourceKind.GPUS]
    assert runner._next_poll(100.02, 1.0) == 101.0  # a poll on the grid: the next grid point
    assert runner._next_poll(100.45, 1.0) == 101.0  # a late one still keeps the grid
    assert runner._next_poll(100.7, 1.0) == 102.0, "one the user asked for off the grid: at least half an interval"
    assert runner._next_poll(100.7, 4.0) == 104.7, "backoff waits its own delay"
    other = Hub({SourceKind.GPUS: ScriptedSource()}, lambda kind: None, {SourceKind.GPUS: PollPolicy(interval=1.0)})
    assert other.runners[SourceKind.GPUS]._next_poll(100.31, 1.0) == runner._next_poll(100.02, 1.0), \
        "two sources started apart poll together"


def test_stop_returns_even_when_a_poll_hangs():
    source = ScriptedSource()
    source.mode = "hang"
    hub = Hub({SourceKind.GPUS: source}, lambda kind: None, {SourceKind.GPUS: PollPolicy(interval=0.01, timeout=0.05)})
    hub.start()
    time.sleep(0.1)
    started = time.monotonic()
    hub.stop(timeout=0.2)
    assert time.monotonic() - started < 2.0


def test_cache_seed_never_replaces_live_data():
    source = ScriptedSource()
    hub = Hub({SourceKind.GPUS: source}, lambda kind: None)
    cached = GpuReading(gpus=(), taken_at=1.0)
    hub.seed(SourceKind.GPUS, cached, 1.0)
    assert hub.reading(SourceKind.GPUS) is cached
    assert hub.statuses()[0].state is SourceState.STALE and hub.statuses()[0].error == "cached"
    runner = hub.runners[SourceKind.GPUS]
    runner.run_once(source.poll_gpus)
    live = hub.reading(SourceKind.GPUS)
    assert live is not cached and hub.statuses()[0].state is SourceState.LIVE
    hub.seed(SourceKind.GPUS, cached, 1.0)  # a slow cache read finishing late
    assert hub.reading(SourceKind.GPUS) is live
    assert hub.statuses()[0].state is SourceState.LIVE


def test_throttling_keeps_the_data_marks_it_stale_and_recovers(hub_and_source):
    hub, source = hub_and_source
    hub.start()
    wait_for(lambda: state(hub) is SourceState.LIVE)
    source.mode = "throttled"
    wait_for(lambda: state(hub) is SourceState.STALE)
    status = hub.statuses()[0]
    assert status.error is not None and status.error.startswith("throttled, next try in")
    assert hub.reading(SourceKind.GPUS) is not None  # the last answer stays on screen
    source.mode = "ok"
    wait_for(lambda: state(hub) is SourceState.LIVE)


def test_replacing_a_source_polls_the_new_one_and_closes_the_old(hub_and_source):
    hub, source = hub_and_source
    hub.start()
    wait_for(lambda: state(hub) is SourceState.LIVE)
    source.mode = "hang"  # even a hung source is let go without holding the caller
    newer = ScriptedSource()
    newer.name = "newer"
    hub.replace(SourceKind.GPUS, newer)
    wait_for(lambda: newer.calls > 0 and state(hub) is SourceState.LIVE)
    assert hub.statuses()[0].name == "newer"
    wait_for(lambda: source.release.is_set(), timeout=5)  # close() was called on the old one
    newer.release.set()


@pytest.mark.parametrize("kind", list(SourceKind))
def test_a_source_that_is_not_set_up_is_unconfigured_for_every_kind(kind: SourceKind) -> None:
    from gpuconsole.backends.unconfigured import Unconfigured

    hub = Hub({kind: Unconfigured("off", "turned off", "start without it")}, lambda _kind: None,
              {kind: PollPolicy(interval=0.02, timeout=0.2, unconfigured_retry=0.05)})
    hub.start()
    try:
        wait_for(lambda: state(hub) is SourceState.UNCONFIGURED)
        assert hub.statuses()[0].hint == "start without it"
    finally:
        hub.stop(timeout=0.5)
