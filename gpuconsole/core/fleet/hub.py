"""The Hub: polls every source on its own interval, supervises failures, publishes snapshots.

Each source gets a supervisor thread and one long-lived poll worker (a daemon thread): the
supervisor hands each poll to the worker and waits at most the timeout, so a hung driver (an NVML
call stuck in the kernel, a TCP connection that never answers) is abandoned without blocking the
supervisor, the other sources, or interpreter exit; no poll is handed over while one still hangs.

Status rules, shown by every pane next to the data they describe:

* a poll that answers → ``live``;
* a poll that raises → ``error: reason``; the last good data stays on screen with its age;
* a poll that does not answer within the timeout → ``stale for N s``;
* a backend that says it is not configured → ``unconfigured`` with its set-up hint.

After a failure the next attempt waits ``interval × 2^failures`` (capped), less a random part of
up to :attr:`PollPolicy.jitter` of it, so a broken endpoint is not hammered and consoles that
failed together do not retry together; the first success resets everything. Polls at the normal interval fall on the
interval's grid of the monotonic clock, so sources of the same interval poll together and the
console composes their answers into one snapshot.
"""

from __future__ import annotations

import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, BackendThrottled, BackendUnavailable
from gpuconsole.model import (
    CloudReading,
    GpuReading,
    JobsReading,
    ServicesReading,
    SourceKind,
    SourceState,
    SourceStatus,
)

log = logging.getLogger(__name__)

Reading = GpuReading | JobsReading | CloudReading | ServicesReading

READING_TYPES: dict[SourceKind, type] = {
    SourceKind.GPUS: GpuReading,
    SourceKind.JOBS: JobsReading,
    SourceKind.CLOUD: CloudReading,
    SourceKind.SERVICES: ServicesReading,
}
# The method each kind of source is polled with.
POLLS: dict[SourceKind, str] = {
    SourceKind.GPUS: "poll_gpus",
    SourceKind.JOBS: "poll_jobs",
    SourceKind.CLOUD: "poll_instances",
    SourceKind.SERVICES: "poll_services",
}


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """How often and how patiently a source is polled."""

    interval: float = 1.0
    timeout: float = 5.0
    max_backoff: float = 30.0
    unconfigured_retry: float = 60.0
    jitter: float = 0.25  # a backoff is shortened by a random fraction of it, up to this


class PollWorker:
    """One long-lived daemon thread that runs the polls of one source, one at a time.

    :meth:`submit` hands a call over and returns an event set when it has finished; the caller
    waits on it with its own timeout, and may walk away from a call that hangs (the worker is
    then busy until the call returns, and :attr:`busy` says so).
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event] | None] = \
            queue.SimpleQueue()
        self._busy = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Whether a call handed over has not finished yet."""
        return self._busy.is_set()

    def submit(self, call: Callable[[], Any]) -> tuple[dict[str, Any], threading.Event]:
        """Run ``call`` on the worker; its ``reading`` or ``error`` lands in the box returned."""
        box: dict[str, Any] = {}
        done = threading.Event()
        self._busy.set()
        self._calls.put((call, box, done))
        return box, done

    def close(self) -> None:
        """End the worker once the call it runs (if any) returns."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            call, box, done = item
            try:
                box["reading"] = call()
            except BaseException as exc:  # noqa: BLE001 - every failure becomes a status
                box["error"] = exc
            finally:
                self._busy.clear()
                done.set()


class _Runner:
    """Supervises one source: schedules polls, applies the timeout, keeps status and data."""

    def __init__(
        self,
        kind: SourceKind,
        source: Any,
        policy: PollPolicy,
        clock: Callable[[], float],
        on_result: Callable[[_Runner], None],
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.kind = kind
        self.source = source
        self.policy = policy
        self.clock = clock
        self.on_result = on_result
        self.reading: Reading | None = None
        self.status = SourceStatus(name=source.name, kind=kind, state=SourceState.CONNECTING)
        self.failures = 0
        self.polls = 0
        self.answered = False
        self.lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._rand = rand
        self._worker: PollWorker | None = None  # started with the first poll
        self._inflight_since = 0.0
        self._first_try: float | None = None  # when the first poll was handed out
        self._thread = threading.Thread(target=self._loop, name=f"hub-{kind.value}", daemon=True)

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()

    def poke(self) -> None:
        """Poll now instead of waiting for the next interval (user pressed refresh)."""
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ------------------------------------------------------------------ loop
    def _poll_fn(self) -> Callable[[], Reading]:
        poll: Callable[[], Reading] = getattr(self.source, POLLS[self.kind])
        return poll

    def _loop(self) -> None:
        poll = self._poll_fn()
        while not self._stop.is_set():
            started = time.monotonic()
            delay = self.run_once(poll)
            if self._stop.is_set():
                break
            self._wake.wait(max(0.0, self._next_poll(started, delay) - time.monotonic()))
            self._wake.clear()

    def _next_poll(self, started: float, delay: float) -> float:
        """When to poll next (monotonic), for a poll that began at ``started`` and asked ``delay``.

        At the normal interval, polls fall on the interval's grid of the monotonic clock, so the
        sources of one interval poll together and their answers make one snapshot: the first
        grid point at least half an interval after ``started`` (a poll started off the grid, the
        first or one the user asked for, is followed by one on it). Backoff and retries wait
        their own delay."""
        interval = self.policy.interval
        if delay != interval or interval <= 0:
            return started + delay
        return math.ceil((started + interval / 2.0) / interval) * interval

    def run_once(self, poll: Callable[[], Reading]) -> float:
        """One supervised poll. Returns the delay before the next one."""
        worker = self._worker
        if worker is None:
            worker = self._worker = PollWorker(f"poll-{self.kind.value}")
        elif worker.busy:
            # The previous call is still hung: nothing more is handed to the worker behind it.
            self._mark_stale(f"no answer for {self.clock() - self._inflight_since:.0f} s")
            return self.policy.interval
        if self._first_try is None:
            self._first_try = self.clock()
        t0 = time.monotonic()
        self._inflight_since = self.clock()
        box, done = worker.submit(poll)
        if not done.wait(self.policy.timeout):
            self.failures += 1
            self._mark_stale(f"no answer in {self.policy.timeout:g} s")
            return self._backoff()
        latency = time.monotonic() - t0
        error = box.get("error")
        if error is None:
            self.failures = 0
            with self.lock:  # against a cache seed landing at the same moment (Hub.seed)
                self.reading = box["reading"]
                self.answered = True
            self._publish(SourceState.LIVE, updated_at=self.clock(), latency_s=latency)
            return self.policy.interval
        self.failures += 1
        if isinstance(error, BackendUnavailable):
            self._publish(SourceState.UNCONFIGURED, updated_at=None, error=_one_line(error), hint=error.hint)
            return self.policy.unconfigured_retry
        if isinstance(error, BackendThrottled):
            # The service asked us to slow down: keep the data, say so, and wait longer.
            delay = self._backoff()
            self._mark_stale(f"throttled, next try in {delay:.0f} s")
            return delay
        if not isinstance(error, BackendError):
            log.exception("source %s failed unexpectedly", self.source.name, exc_info=error)
        self._publish(SourceState.ERROR, error=_one_line(error), latency_s=latency)
        return self._backoff()

    def _mark_stale(self, reason: str) -> None:
        if self.reading is None:  # nothing was ever read: not stale, still waiting for a first answer
            self._publish(SourceState.CONNECTING, error=reason, answered=False, waiting_since=self._first_try)
            return
        self._publish(SourceState.STALE, error=reason, answered=False)

    def _publish(self, state: SourceState, *, answered: bool = True, **fields: Any) -> None:
        """Set the status (keeping the time of the last good data unless given) and hand it on.

        ``polls`` counts answers once they are published (see Console.wait_for_first_answers).
        """
        fields.setdefault("updated_at", self.status.updated_at)
        self.status = SourceStatus(name=self.source.name, kind=self.kind, state=state, **fields)
        self.on_result(self)
        if answered:
            self.polls += 1

    def _backoff(self) -> float:
        """``interval × 2^failures`` capped at ``max_backoff``, shortened by a random part of up
        to ``jitter`` of it (never longer than the cap)."""
        delay = min(self.policy.interval * (2 ** min(self.failures, 10)), self.policy.max_backoff)
        return delay * (1.0 - self.policy.jitter * self._rand())


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else type(error).__name__
    return message[:200]


class Hub:
    """Polls the configured sources and hands every new state to ``on_update``.

    Args:
        sources: one backend per kind (GPU telemetry, jobs, cloud); a kind may be absent.
        on_update: called from a supervisor thread with the kind that changed. Keep it cheap:
            the Console composes the snapshot and posts it to the UI.
        policies: poll interval/timeout per kind (defaults: 1 s / 5 s).
        clock: wall clock, injectable for tests.
        rand: the random numbers in [0, 1) of the backoff's jitter (seeded in tests).
    """

    def __init__(
        self,
        sources: dict[SourceKind, Any],
        on_update: Callable[[SourceKind], None],
        policies: dict[SourceKind, PollPolicy] | None = None,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._on_update = on_update
        self._rand = rand
        policies = policies or {}
        self.runners: dict[SourceKind, _Runner] = {
            kind: _Runner(kind, source, policies.get(kind, PollPolicy()), clock, self._result, rand)
            for kind, source in sources.items()
        }
        self._started = False

    def _result(self, runner: _Runner) -> None:
        self._on_update(runner.kind)

    def start(self) -> None:
        if not self._started:
            self._started = True
            for runner in self.runners.values():
                runner.start()

    def refresh(self) -> None:
        """Poll every source now."""
        for runner in self.runners.values():
            runner.poke()

    def poll_once(self) -> None:
        """One supervised poll of every source, on the caller's thread (no supervisor): for a
        command, a benchmark or a test that steps the world itself."""
        for runner in self.runners.values():
            runner.run_once(runner._poll_fn())

    def stop(self, timeout: float = 1.0) -> None:
        """Stop polling and close the sources. Never blocks longer than ``timeout`` per source."""
        for runner in self.runners.values():
            runner.stop()
        for runner in self.runners.values():
            runner.join(timeout)
            closer = threading.Thread(target=_close_quietly, args=(runner.source,), daemon=True)
            closer.start()
            closer.join(timeout)

    def replace(self, kind: SourceKind, source: Any, policy: PollPolicy | None = None) -> None:
        """Put ``source`` behind ``kind`` (another Kubernetes context, say). The old source is
        stopped and closed in the background, so a hung one never holds the caller."""
        old = self.runners.get(kind)
        runner = _Runner(kind, source, policy or (old.policy if old else PollPolicy()), old.clock if old else time.time,
                         self._result, self._rand)
        self.runners[kind] = runner
        if old is not None:
            old.stop()
            threading.Thread(target=_close_quietly, args=(old.source,), daemon=True).start()
        if self._started:
            runner.start()
        self._on_update(kind)

    def reading(self, kind: SourceKind) -> Reading | None:
        runner = self.runners.get(kind)
        return runner.reading if runner else None

    def seed(self, kind: SourceKind, reading: Reading, taken_at: float) -> None:
        """Show cached data before the first poll answers, marked stale with its age."""
        runner = self.runners.get(kind)
        if runner is None:
            return
        with runner.lock:
            if runner.answered or runner.reading is not None:
                return  # live data is newer than any cache
            runner.reading = reading
            runner.status = replace(runner.status, state=SourceState.STALE, updated_at=taken_at, error="cached")

    def statuses(self) -> tuple[SourceStatus, ...]:
        return tuple(runner.status for runner in self.runners.values())


def _close_quietly(source: Any) -> None:
    try:
        source.close()
    except Exception:  # noqa: BLE001 - closing must never fail the exit
        log.debug("closing %s failed", getattr(source, "name", source), exc_info=True)
