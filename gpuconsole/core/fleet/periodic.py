"""The console's named periodic jobs: one daemon thread each, woken early on demand, all stopped
together (the billing watcher, key hygiene)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class PeriodicJob:
    """``run`` every ``every`` seconds on a thread called ``name``.

    Attributes:
        at_start: run once as soon as the job starts (else the first run waits ``every``).
        wakeable: :meth:`PeriodicJobs.wake` runs it early (a refresh after an action).
    """

    name: str
    every: float
    run: Callable[[], None]
    at_start: bool = True
    wakeable: bool = False
    _wake: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)


class PeriodicJobs:
    """A set of :class:`PeriodicJob`; a job that raises is logged and runs again next time."""

    def __init__(self) -> None:
        self._jobs: dict[str, PeriodicJob] = {}
        self._stopping = threading.Event()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._jobs)

    def start(self, job: PeriodicJob) -> None:
        """Start ``job`` (a job of the same name already running is left alone)."""
        if self._stopping.is_set() or job.name in self._jobs:
            return
        self._jobs[job.name] = job
        job._thread = threading.Thread(target=self._loop, args=(job,), name=job.name, daemon=True)
        job._thread.start()

    def wake(self) -> None:
        """Run every wakeable job now instead of at its next time."""
        for job in self._jobs.values():
            if job.wakeable:
                job._wake.set()

    def stop(self) -> None:
        """Stop every job after the run it is in (threads are daemons: nothing waits for them)."""
        self._stopping.set()
        for job in self._jobs.values():
            job._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _loop(self, job: PeriodicJob) -> None:
        if not job.at_start:
            self._sleep(job)
        while not self._stopping.is_set():
            try:
                job.run()
            except Exception:  # noqa: BLE001 - a job that fails must not stop the console
                log.warning("%s failed", job.name, exc_info=True)
            self._sleep(job)

    def _sleep(self, job: PeriodicJob) -> None:
        job._wake.wait(job.every)
        job._wake.clear()
