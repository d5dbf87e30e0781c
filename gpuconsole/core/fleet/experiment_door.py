"""The experiments of a console: its job path, its job source and a store beside its cache.

The book is made once per console (the demo's is seeded on the simulated bench); the command
line and the Experiments pane both take it from :func:`experiment_book`, so both go through the
same job path, with the console's guard and audit.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from pathlib import Path

from gpuconsole.core.fleet.console import Console
from gpuconsole.core.ops.actions import ActionError
from gpuconsole.core.ops.experiments.book import ExperimentBook
from gpuconsole.core.ops.experiments.store import ExperimentStore
from gpuconsole.core.paths import default_db_path
from gpuconsole.model import Job, SourceKind

STORE_NAME = "experiments.db"
_BOOKS: weakref.WeakKeyDictionary[Console, ExperimentBook] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def experiment_store_path(console: Console) -> Path | str:
    """Beside the cache database (a file of its own, so the cache can be rebuilt without it);
    in memory with ``--no-db``."""
    if console.options.no_db:
        return ":memory:"
    db = console.options.db_path or default_db_path()
    return Path(db).expanduser().with_name(STORE_NAME)


def experiment_book(console: Console) -> ExperimentBook:
    """The console's experiments (made on first use)."""
    with _LOCK:
        book = _BOOKS.get(console)
        if book is None:
            book = _BOOKS[console] = _make(console)
        return book


def _make(console: Console) -> ExperimentBook:
    services = console.services
    user = services.guard.user or ""
    if console.demo:
        from gpuconsole.core.ops.experiments.demo import demo_book

        return demo_book(services.actions, user, console.clock())[0]

    def read_jobs() -> tuple[Job, ...]:
        reading = console.hub.reading(SourceKind.JOBS)
        if reading is not None and console.options.sources.watch_jobs:
            return reading.jobs  # type: ignore[union-attr]
        backend = console.services.jobs.backend
        return backend.poll_jobs().jobs if backend is not None else ()

    path = experiment_store_path(console)
    try:
        store = ExperimentStore(path)
    except (OSError, sqlite3.Error) as exc:
        raise ActionError(f"cannot open the experiments database at {path}: {exc}") from None
    return ExperimentBook(store, services.jobs, read_jobs, owner=user, clock=console.clock)
