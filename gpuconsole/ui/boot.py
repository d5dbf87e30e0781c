"""Building the console off the UI thread, once the first frame is on screen.

The app paints its frame ("starting…") first, then :class:`CoreBuilder` builds the Console (and
imports the panes' code) in a thread and posts :class:`CoreBuilt` back. A user who quits while
it is being built is not kept waiting: the build thread closes what it built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from gpuconsole.core.fleet.console import Console


class CoreBuilt(Message):
    """The console built off the UI thread (``error`` set when building it failed)."""

    def __init__(self, core: Console | None, error: BaseException | None) -> None:
        super().__init__()
        self.core = core
        self.error = error


class CoreBuilder:
    """Runs ``build`` (and ``also``, the imports that should not happen on the UI thread) in a
    thread; ``post`` gets the :class:`CoreBuilt` message."""

    def __init__(self, build: Callable[[], Console], also: Callable[[], object],
                 post: Callable[[Message], object]) -> None:
        self._build = build
        self._also = also
        self._post = post
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._built: Console | None = None
        self._closed = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuconsole-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        core: Console | None = None
        error: BaseException | None = None
        try:
            core = self._build()
            self._also()
        except BaseException as exc:  # noqa: BLE001 - handed to the UI thread, then to the caller
            error = exc
        with self._lock:
            if self._closed:  # the user quit while it was being built
                if core is not None:
                    core.close()
                return
            self._built = core
        self._post(CoreBuilt(core, error))

    def close(self, wait_s: float = 2.0) -> None:
        """Close the console built; one still being built is closed by the thread building it,
        which is given ``wait_s`` to finish."""
        with self._lock:
            self._closed = True
            core, self._built = self._built, None
        if core is not None:
            core.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)
