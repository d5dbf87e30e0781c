"""When to compose: at once when a source's state changed, else once per round of answers.

Sources polled at the console's interval answer one after another, each cycle: answers that keep
every source's state are composed into one snapshot once all of them have answered, or
:data:`COALESCE_S` (at most half the interval) after the first, whichever comes first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gpuconsole.model import SourceKind

COALESCE_S = 0.5


class PublishCoalescer:
    """Gathers the answers that changed no state into one composition.

    Args:
        publish: composes and hands the snapshot on (called from the answering thread or a timer).
        fast: the sources whose every answer is awaited (the live ones at the console's interval).
        interval: the console's interval; the wait is at most half of it.
    """

    def __init__(self, publish: Callable[[], None], fast: Callable[[], set[SourceKind]], interval: float) -> None:
        self._publish = publish
        self._fast = fast
        self.interval = interval
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None  # the composition coming for answers that changed no state
        self._answered: set[SourceKind] = set()  # the sources that answered since the last composition
        self._stopped = False

    @property
    def pending(self) -> bool:
        """Whether a composition is waiting for more answers (or its timer)."""
        return self._timer is not None

    def answered(self, kind: SourceKind) -> None:
        """Compose once every fast source has answered since the last composition, or
        :data:`COALESCE_S` (at most half the interval) after ``kind``'s answer."""
        with self._lock:
            if self._stopped:
                return
            self._answered.add(kind)
            if self._fast() <= self._answered:
                timer, self._timer = self._timer, None
            elif self._timer is None:
                wait = min(COALESCE_S, self.interval / 2.0)  # read now: a test may change it
                self._timer = timer = threading.Timer(wait, self._due)
                timer.daemon = True
                timer.name = "compose"
                timer.start()
                return
            else:
                return
        if timer is not None:
            timer.cancel()
        self._publish()

    def composed(self) -> None:
        """A composition is made now: answers from here on wait for a later one."""
        with self._lock:
            self._answered.clear()

    def stop(self) -> None:
        """Cancel the composition that is waiting; later answers compose nothing."""
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _due(self) -> None:
        with self._lock:
            if self._timer is threading.current_thread():  # this timer's thread; not one set since
                self._timer = None
            if self._stopped:
                return
        self._publish()

