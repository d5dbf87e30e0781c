"""Experiments and their runs in SQLite, beside the console's cache.

Two tables, in the console's database file (or any other, or memory for the demo):

* ``experiments(name, source, state, created, message)`` — the file as the user wrote it
  (TOML text, read again with :func:`~.spec.parse_text`), and ``running``, ``stopping``,
  ``stopped``, ``done`` or ``budget``;
* ``experiment_runs`` — one row per run (:class:`~.runs.RunRecord`), keyed by its Job's name.

Like the cache it sits beside, it is history, not the truth: the Jobs are on the cluster. The
store is shared by the console's threads, so every call holds one lock around its own connection.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from pathlib import Path

import sqlite_utils

from gpuconsole.core.ops.experiments.runs import RunRecord
from gpuconsole.core.paths import private_file

RUN_COLUMNS = tuple(f.name for f in dataclasses.fields(RunRecord))
EXPERIMENT_STATES = ("running", "stopping", "stopped", "done", "budget")


@dataclasses.dataclass(frozen=True, slots=True)
class ExperimentRow:
    name: str
    source: str
    state: str
    created: float
    message: str = ""


class ExperimentStore:
    """Experiments and runs. ``path`` ``":memory:"`` keeps them for this process only."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        if str(path) != ":memory:":
            private_file(Path(path))  # 0600 before SQLite writes a byte (its -wal follows it)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
        self._db = sqlite_utils.Database(conn)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL") if str(path) != ":memory:" else None
            if "experiments" not in self._db.table_names():
                self._db["experiments"].create({"name": str, "source": str, "state": str, "created": float,
                                                "message": str}, pk="name")
            if "experiment_runs" not in self._db.table_names():
                self._db["experiment_runs"].create(
                    {"experiment": str, "arm": str, "repeat": int, "attempt": int, "job": str, "state": str,
                     "node": str, "submitted": float, "start": float, "end": float, "metric": float, "market": str,
                     "price_per_hour": float, "cost": float, "message": str}, pk="job")
                self._db["experiment_runs"].create_index(["experiment"])

    def put_experiment(self, row: ExperimentRow) -> None:
        with self._lock:
            self._db["experiments"].upsert(dataclasses.asdict(row), pk="name")

    def experiment(self, name: str) -> ExperimentRow | None:
        with self._lock:
            found = list(self._db["experiments"].rows_where("name = ?", [name]))
        return ExperimentRow(**found[0]) if found else None

    def experiments(self) -> list[ExperimentRow]:
        with self._lock:
            return [ExperimentRow(**r) for r in self._db["experiments"].rows_where(order_by="created")]

    def set_state(self, name: str, state: str, message: str = "") -> None:
        with self._lock:
            self._db["experiments"].update(name, {"state": state, "message": message})

    def put_run(self, run: RunRecord) -> None:
        with self._lock:
            self._db["experiment_runs"].upsert(dataclasses.asdict(run), pk="job")

    def runs(self, experiment: str) -> list[RunRecord]:
        with self._lock:
            rows = list(self._db["experiment_runs"].rows_where("experiment = ?", [experiment],
                                                               order_by="repeat, submitted, job"))
        return [RunRecord(**{k: row[k] for k in RUN_COLUMNS}) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.conn.close()
