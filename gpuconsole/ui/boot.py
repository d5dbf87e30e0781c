"""Building the console off the UI thread, once the first frame is on screen.

The app paints its frame ("starting…") first, then :class:`CoreBuilder` builds the Console (and
imports the panes' code) in a thread and posts :class:`CoreBuilt` back. A user who quits while
it is being built is not kept waiting: the build thread closes what it built. What the first
complete frame does not need waits until it is painted (:class:`AfterFirstFrame`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from gpuconsole.core.fleet.console import Console
    from gpuconsole.model import FleetSnapshot


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


class AfterFirstFrame:
    """Work the first complete frame does not need, started once it is painted: once every
    source has answered and that frame is on screen (or when :meth:`settle` is called sooner,
    a second after the start), the cache database opens and the hidden panes get ready for
    their first showing. Before, both only delayed that frame: ordering 100,000 jobs for the
    Jobs pane takes a third of a second, and the two threads contend for the GIL.

    ``app`` is the Textual app showing ``core``; ``hidden`` gives the panes not on screen.
    """

    def __init__(self, app: Any, hidden: Callable[[], Iterable[Any]]) -> None:
        self._app = app
        self._hidden = hidden
        self._answered = False  # every source has answered once
        self.settled = False

    def shown(self, snapshot: FleetSnapshot) -> None:
        """``snapshot`` is on its way to the screen: get the hidden panes ready for it once
        settled; the first one every source has answered settles after it is painted."""
        from gpuconsole.model import SourceState

        if not self._answered and snapshot.sources and all(
            s.state is not SourceState.CONNECTING for s in snapshot.sources
        ):
            self._answered = True
            self._app.call_after_refresh(self.settle)
        if self.settled:
            for pane in self._hidden():
                pane.prepare(snapshot)  # e.g. the Jobs pane orders a big queue in a worker

    def settle(self) -> None:
        """Open the cache database and get the hidden panes ready (once)."""
        if not self.settled:
            self.settled = True
            self._app.core.open_store_in_background()
            self.shown(self._app.snapshot)
