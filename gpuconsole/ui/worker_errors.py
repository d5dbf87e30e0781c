"""No worker error that vanishes.

:class:`ReportsWorkerErrors` is mixed into the app and into every pane, screen and wizard step
that runs a worker: a worker that raises something nobody expected turns into a one-line error
on screen and an entry in the log (``--log``). Textual sends a worker's state changes to the
node that started it, and they do not bubble, so each such node carries the handler;
``tests/test_worker_errors.py`` checks that every one does.
"""

from __future__ import annotations

import logging
from typing import Any

from textual.worker import Worker, WorkerState

log = logging.getLogger("gpuconsole.ui")


def worker_failed(app: Any, worker: Worker[Any]) -> None:
    """Say, in one line, that ``worker`` raised something nobody expected, and log it whole."""
    error = worker.error
    what = worker.description or worker.name or "background work"
    detail = str(error).strip().splitlines()[0] if error is not None and str(error).strip() else ""
    name = type(error).__name__ if error is not None else "error"
    line = f"{what} failed: {name}" + (f": {detail}" if detail else "")
    log.error("%s", line, exc_info=error if isinstance(error, BaseException) else None)
    app.notify(line[:200], title="Unexpected error", severity="error", timeout=10)


class ReportsWorkerErrors:
    """Mixed into every node that runs workers: an ERROR state becomes :func:`worker_failed`.

    Textual sends a worker's state changes to the node that started it, and they do not bubble,
    so each such node carries this handler (a test checks every one does)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            node: Any = self
            worker_failed(node.app, event.worker)
