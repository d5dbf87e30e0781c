"""The cache-and-history store: last readings, GPU metric history and small settings.

The store lets the console open with the last known state at once and draw sparklines and
charts from history. It is a cache, never the source of truth: the file can be deleted at any
time, and a file that is corrupt or of another schema version is set aside and rebuilt instead
of failing the app. (The audit log is not kept here; it has its own database.)

Tables:

* ``readings(source, taken_at, payload)`` — the last reading per source, as JSON text from
  :func:`gpuconsole.model.to_jsonable`.
* ``gpus(id, uuid)`` — a small integer id per GPU UUID, so history rows do not repeat the
  40-character UUID (it halves the file). Rows are never deleted, so an id never goes stale.
* ``gpu_samples``, ``gpu_minutes``, ``gpu_hours`` — GPU metric history: raw samples for an
  hour, minute rollups for two days, hour rollups for 35 days (see :mod:`gpuconsole.core.fleet.history`).
* ``settings(key, value)`` — small JSON values (the chosen theme and the like).
* ``budgets(name, payload)`` — budgets added in the console or with ``gpuconsole budget add``,
  as JSON text of :class:`~gpuconsole.model.Budget`. (Budgets that must survive a lost cache
  belong in the configuration file.)
* ``budget_fired(budget, threshold, action, period_start, fired_at)`` — which threshold action
  of which budget has already run in which period, so a notification or an automatic stop
  happens once per period and not on every poll.
* ``store_meta(key, value)`` — the store's own bookkeeping (how far rollups have got).

Raw samples are clustered by time (``WITHOUT ROWID``, key ``(ts_ms, gpu)``): a poll of a
thousand GPUs then appends to a few pages instead of touching a page per GPU, which keeps a
write at a few milliseconds and the WAL small, and makes rollup and retention plain range
scans. One GPU's raw history is read by walking the distinct timestamps (a skip-scan written
out in SQL). Rollups are written once a minute and read over long ranges, so they are
clustered by GPU (key ``(gpu, ts)``) and a chart reads adjacent pages.

Schema 1 (REAL timestamps, no hour rollups) is converted in place on open; any other version
is set aside and the file rebuilt.

Threads: the Hub writes from a worker thread while the UI reads from another. Every thread gets
its own SQLite connection (a :class:`sqlite_utils.Database` in a ``threading.local``); the file
runs in WAL mode, so readers never wait for the writer and writers queue on SQLite's busy
timeout. Write transactions start with ``BEGIN IMMEDIATE`` so two writers never deadlock on a
lock upgrade. Connections of threads that have ended are closed when a new one opens, and
:meth:`Store.close` closes the rest.

Errors: a corrupt file, found on open or later, is rebuilt with a one-line warning (through
``on_warning`` and :attr:`Store.warnings`); the caller never sees an exception for it. Anything
the user must act on (an unwritable path, a full disk) is raised as :class:`StoreError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import sqlite_utils

from gpuconsole.core.fleet import history
from gpuconsole.core.fleet.history import (
    HOUR_RETENTION_S,
    MINUTE_RETENTION_S,
    RAW_RETENTION_S,
    ROLLUP_GRACE_S,
)
from gpuconsole.core.paths import StoreError, private_dir, private_file
from gpuconsole.model import Budget, Gpu, GpuSample, from_jsonable, to_jsonable

__all__ = [
    "HOUR_RETENTION_S",
    "MINUTE_RETENTION_S",
    "RAW_RETENTION_S",
    "ROLLUP_GRACE_S",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
]

T = TypeVar("T")
R = TypeVar("R")

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 5.0
# PRAGMA quick_check reads every page (about 3 ms per MB when cached, three times that cold);
# above this size opening would no longer be instant, and corruption there is caught when a
# statement first meets it.
QUICK_CHECK_MAX_BYTES = 16 * 1024 * 1024
# A rollup of thousands of GPUs grows the WAL to tens of MB; trim it back after checkpoints.
WAL_SIZE_LIMIT_BYTES = 32 * 1024 * 1024

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_TABLES = frozenset({"readings", "gpus", "settings", "store_meta", "budgets", "budget_fired"}) | history.TABLES
_V1_TABLES = frozenset({"readings", "gpus", "gpu_samples", "gpu_minutes", "settings", "store_meta"})

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS readings (
    source TEXT PRIMARY KEY,
    taken_at REAL,
    payload TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gpus (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE
);
{history.SCHEMA}CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS store_meta (
    key TEXT PRIMARY KEY,
    value
);
CREATE TABLE IF NOT EXISTS budgets (
    name TEXT PRIMARY KEY,
    payload TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_fired (
    budget TEXT NOT NULL,
    threshold TEXT NOT NULL,
    action TEXT NOT NULL,
    period_start REAL NOT NULL,
    fired_at REAL NOT NULL,
    PRIMARY KEY (budget, threshold, action, period_start)
) WITHOUT ROWID;
PRAGMA user_version = {SCHEMA_VERSION};
"""


class Store:
    """SQLite cache of the last readings, GPU metric history and settings; safe across threads.

    Args:
        path: the database file; its directory is created when missing.
        on_warning: called with a one-line message when the store had to rebuild its file.

    Raises:
        StoreError: the file cannot be opened or created (an unwritable directory, say).
    """

    def __init__(self, path: Path | str, *, on_warning: Callable[[str], None] | None = None) -> None:
        self.path = Path(path).expanduser()
        self.warnings: list[str] = []
        self._on_warning = on_warning
        self._local = threading.local()
        self._generation = 0  # bumped whenever every open connection becomes invalid
        self._connections: list[tuple[weakref.ref[threading.Thread], sqlite_utils.Database]] = []
        self._connections_lock = threading.Lock()
        self._ids: dict[str, int] = {}  # GPU UUID -> gpus.id
        self._ids_lock = threading.Lock()
        self._gate = _Gate()
        try:
            private_dir(self.path.parent)
            private_file(self.path)  # 0600 before SQLite writes a byte (its -wal and -shm follow it)
        except OSError as exc:
            raise StoreError(f"cannot create {self.path.parent} for the database: {exc.strerror or exc}") from exc
        self._announce(self._open())

    # ------------------------------------------------------------------ readings

    def save_reading(self, source_key: str, reading: Any) -> None:
        """Keep ``reading`` (a GpuReading, JobsReading or CloudReading) as the last of its source."""
        payload = json.dumps(to_jsonable(reading), separators=(",", ":"))
        taken_at = getattr(reading, "taken_at", None)

        def save(db: sqlite_utils.Database) -> None:
            with _writing(db):
                db.conn.execute(
                    "INSERT OR REPLACE INTO readings (source, taken_at, payload) VALUES (?, ?, ?)",
                    (source_key, taken_at, payload),
                )

        self._run("save a reading", save)

    def load_reading(self, source_key: str, cls: type[T]) -> T | None:
        """The last reading saved for ``source_key``, or None when there is none that decodes.

        A row written by another version of the model that no longer decodes is deleted, so the
        console starts empty for that source rather than failing.
        """
        rows = self._run(
            "load a reading",
            lambda db: db.execute("SELECT payload FROM readings WHERE source = ?", (source_key,)).fetchall(),
        )
        if not rows:
            return None
        try:
            reading = from_jsonable(cls, json.loads(rows[0][0]))
        except (ValueError, TypeError, RecursionError):
            reading = None
        if isinstance(reading, cls):
            return reading

        def forget(db: sqlite_utils.Database) -> None:
            with _writing(db):
                db.conn.execute("DELETE FROM readings WHERE source = ?", (source_key,))

        self._run("drop an unreadable reading", forget)
        return None

    # ------------------------------------------------------------------ GPU history

    def record_gpus(self, gpus: Iterable[Gpu], ts: float) -> None:
        """Add one raw sample per GPU at time ``ts`` (kept to the millisecond), in one transaction."""
        gpus = list(gpus)
        if not gpus:
            return
        ts_ms = round(ts * 1000)

        def record(db: sqlite_utils.Database) -> None:
            with _writing(db):
                ids = self._gpu_ids(db, [g.uuid for g in gpus])
                db.conn.executemany(
                    history.INSERT_SAMPLE,
                    [(ts_ms, ids[g.uuid], g.utilization, g.memory_used_mib, g.temperature_c, g.power_w) for g in gpus],
                )
            with self._ids_lock:
                self._ids.update(ids)

        self._run("record GPU samples", record)

    def record_minutes(self, rows: Iterable[tuple[str, int, int, float, float, float, float, float]], *,
                       rolled_until: int) -> None:
        """Write minute rollups directly, in one transaction, as if raw samples had been rolled up.

        For filling history in bulk (weeks of simulated fleet history in seconds, see
        :mod:`gpuconsole.core.fleet.history_fill`). Each row is ``(uuid, minute start, samples,
        utilization, peak utilization, memory MiB, temperature °C, power W)``, averages in
        natural units. Every minute before ``rolled_until`` (a minute boundary) then counts as
        rolled up, so :meth:`maintain` goes on from there, rolling hours and applying retention
        as it does for live samples.
        """
        self._record_rollups("gpu_minutes", rows, rolled_until)

    def record_hours(self, rows: Iterable[tuple[str, int, int, float, float, float, float, float]], *,
                     rolled_until: int) -> None:
        """Write hour rollups directly, like :meth:`record_minutes` (rows start at whole hours)."""
        self._record_rollups("gpu_hours", rows, rolled_until)

    def _record_rollups(self, table: str, rows: Iterable[tuple[str, int, int, float, float, float, float, float]],
                        rolled_until: int) -> None:
        rows = list(rows)

        def record(db: sqlite_utils.Database) -> None:
            with _writing(db):
                ids = self._gpu_ids(db, list(dict.fromkeys(r[0] for r in rows)))
                history.write_rollups(db.conn, table, ids, rows, rolled_until)
            with self._ids_lock:
                self._ids.update(ids)

        self._run(f"record GPU history in {table}", record)

    def maintain(self, now: float) -> None:
        """Roll complete minutes and hours up and apply retention; cheap enough to call once a minute.

        Each minute and hour is rolled up once, from where the last call stopped. Rows are deleted
        once they are past their retention *and* rolled up, so a console that was closed for a
        while loses nothing; deletions run as short transactions of bounded size, so a poll's
        write never waits long behind them.
        """

        def run(db: sqlite_utils.Database) -> None:
            with _writing(db):
                history.roll_up(db.conn, now)
            history.apply_retention(db.conn, now, lambda: _writing(db))

        self._run("maintain GPU history", run)

    def gpu_history(
        self, uuid: str, since: float, until: float | None = None, *, min_points: int = history.MIN_POINTS
    ) -> list[GpuSample]:
        """Samples of one GPU between ``since`` and ``until`` (inclusive), oldest first.

        The resolution follows the span: the coarsest of raw samples, minute and hour rollups
        that still gives ``min_points`` points (5 minutes or an hour: raw; a day: minutes; a
        week or a month: hours). Where that table does not reach, older parts come from coarser
        rollups and the newest, not yet rolled up, from finer ones. A rollup is one sample
        stamped with the start of its minute or hour. ``until=None`` reads to the newest sample.
        """

        def query(db: sqlite_utils.Database) -> list[GpuSample]:
            conn = db.conn
            row = conn.execute("SELECT id FROM gpus WHERE uuid = ?", (uuid,)).fetchone()
            if row is None:
                return []
            last = until
            if last is None:
                newest = conn.execute("SELECT max(ts_ms) FROM gpu_samples").fetchone()[0]
                rolled = conn.execute("SELECT value FROM store_meta WHERE key = 'rolled_until'").fetchone()
                candidates = [newest / 1000 if newest is not None else None, rolled[0] if rolled else None]
                last = max((c for c in candidates if c is not None), default=since)
            return history.read(conn, row[0], since, last, min_points)

        return self._run("read GPU history", query)

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and truncate it (the file size then tells all)."""
        self._run("checkpoint the database", lambda db: db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())

    # ------------------------------------------------------------------ settings

    def get_setting(self, key: str, default: Any = None) -> Any:
        """The JSON value stored under ``key``, or ``default`` when unset or unreadable."""
        row = self._run(
            "read a setting",
            lambda db: db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone(),
        )
        if row is None:
            return default
        try:
            return json.loads(row[0])
        except ValueError:
            return default

    def set_setting(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable ``value`` under ``key``."""
        text = json.dumps(value)

        def save(db: sqlite_utils.Database) -> None:
            with _writing(db):
                db.conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, text))

        self._run("save a setting", save)

    # ------------------------------------------------------------------ budgets

    def budgets(self) -> list[Budget]:
        """The saved budgets, by name; a row that no longer decodes is skipped."""
        rows = self._run(
            "read budgets", lambda db: db.execute("SELECT payload FROM budgets ORDER BY name").fetchall()
        )
        out: list[Budget] = []
        for (payload,) in rows:
            try:
                budget = from_jsonable(Budget, json.loads(payload))
            except (ValueError, TypeError, RecursionError):
                continue
            if isinstance(budget, Budget):
                out.append(budget)
        return out

    def save_budget(self, budget: Budget, *, replace: bool = False) -> bool:
        """Save ``budget``; False (and nothing written) when one of that name exists and not ``replace``."""
        payload = json.dumps(to_jsonable(budget), separators=(",", ":"))
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"

        def save(db: sqlite_utils.Database) -> bool:
            with _writing(db):
                cursor = db.conn.execute(f"{verb} INTO budgets (name, payload) VALUES (?, ?)", (budget.name, payload))
                return cursor.rowcount > 0

        return self._run("save a budget", save)

    def delete_budget(self, name: str) -> bool:
        """Delete a budget and what it has fired; False when there was none of that name."""

        def delete(db: sqlite_utils.Database) -> bool:
            with _writing(db):
                cursor = db.conn.execute("DELETE FROM budgets WHERE name = ?", (name,))
                db.conn.execute("DELETE FROM budget_fired WHERE budget = ?", (name,))
                return cursor.rowcount > 0

        return self._run("delete a budget", delete)

    def budget_fired(self, since: float = 0.0) -> set[tuple[str, str, str, float]]:
        """``(budget, threshold, action, period_start)`` of every action fired at or after ``since``."""
        rows = self._run(
            "read fired budget actions",
            lambda db: db.execute(
                "SELECT budget, threshold, action, period_start FROM budget_fired WHERE fired_at >= ?", (since,)
            ).fetchall(),
        )
        return {(b, t, a, float(p)) for b, t, a, p in rows}

    def mark_budget_fired(self, budget: str, threshold: str, action: str, period_start: float, at: float) -> bool:
        """Record that an action fired; False when it was already recorded for that period."""

        def mark(db: sqlite_utils.Database) -> bool:
            with _writing(db):
                cursor = db.conn.execute(
                    "INSERT OR IGNORE INTO budget_fired (budget, threshold, action, period_start, fired_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (budget, threshold, action, period_start, at),
                )
                return cursor.rowcount > 0

        return self._run("record a fired budget action", mark)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close every connection the store opened; a later call opens new ones."""
        with self._gate.exclusive():
            self._close_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _run(self, action: str, op: Callable[[sqlite_utils.Database], R]) -> R:
        """Run ``op`` on this thread's connection; rebuild the file and retry once if it is corrupt."""
        for attempt in range(2):
            with self._gate.shared():
                generation = self._generation
                try:
                    return op(self._db())
                except sqlite3.DatabaseError as exc:
                    if not _is_corrupt(exc):
                        raise StoreError(f"cannot {action} in the cache database {self.path}: {exc}") from exc
            if attempt == 0:
                self._announce(self._rebuild_corrupt(generation))
        raise StoreError(f"cannot {action}: the cache database {self.path} is corrupt again after a rebuild")

    def _db(self) -> sqlite_utils.Database:
        """This thread's connection, opened on first use (and again after a rebuild or close)."""
        local = self._local
        current: sqlite_utils.Database | None = getattr(local, "db", None)
        if current is not None and local.generation == self._generation:
            return current
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database at {self.path}: {exc}") from exc
        db = sqlite_utils.Database(conn, execute_plugins=False)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        with self._connections_lock:
            alive = []
            for thread_ref, other in self._connections:
                thread = thread_ref()
                if thread is not None and thread.is_alive():
                    alive.append((thread_ref, other))
                else:
                    other.close()  # its thread has ended, so nothing can be using it
            alive.append((weakref.ref(threading.current_thread()), db))
            self._connections = alive
        local.db, local.generation = db, self._generation
        return db

    def _gpu_ids(self, db: sqlite_utils.Database, uuids: list[str]) -> dict[str, int]:
        """The row id of each GPU UUID, adding the GPUs seen for the first time.

        Ids are cached for the life of the file (rows of ``gpus`` are never deleted, so an id
        never goes stale); a rebuild clears the cache.
        """
        with self._ids_lock:
            ids = {u: self._ids[u] for u in uuids if u in self._ids}
        new = [u for u in dict.fromkeys(uuids) if u not in ids]
        if new:
            db.conn.executemany("INSERT OR IGNORE INTO gpus (uuid) VALUES (?)", [(u,) for u in new])
            for i in range(0, len(new), 500):
                chunk = new[i : i + 500]
                marks = ",".join("?" * len(chunk))
                ids.update(
                    (u, gpu_id)
                    for gpu_id, u in db.conn.execute(f"SELECT id, uuid FROM gpus WHERE uuid IN ({marks})", chunk)
                )
        return ids

    def _close_all(self) -> None:
        """Close every tracked connection; only call with the gate held exclusively."""
        with self._connections_lock:
            for _thread_ref, db in self._connections:
                db.close()
            self._connections = []
        with self._ids_lock:
            self._ids.clear()
        self._generation += 1

    def _open(self) -> str | None:
        """Open the file, setting it aside first when it is corrupt or of another schema.

        Returns:
            The warning to give when the file was rebuilt, else None.
        """
        try:
            version = self._prepare()
            if version is None:
                return None
            tag, what = f"schema{version}", f"had schema version {version} (this gpuconsole uses {SCHEMA_VERSION})"
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                self._close_all()
                raise StoreError(f"cannot open the database at {self.path}: {exc}") from exc
            tag, what = "corrupt", "was corrupt"
        with self._gate.exclusive():
            self._close_all()
            kept = self._set_aside(tag)
            self._prepare_fresh()
        return f"cache database {what} and has been rebuilt (old file kept as {kept})"

    def _prepare(self) -> int | None:
        """Check the file and create the schema when the file is new.

        Returns:
            None when the file is ready, else the schema version it has instead of ours.

        Raises:
            sqlite3.DatabaseError: the file could not be read; :func:`_is_corrupt` tells
                whether because it is corrupt.
        """
        db = self._db()
        db.enable_wal()
        version = db.conn.execute("PRAGMA user_version").fetchone()[0]
        tables = set(db.table_names())
        if _file_size(self.path) <= QUICK_CHECK_MAX_BYTES:
            verdict = db.conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
        if version == 1 and tables >= _V1_TABLES:
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                history.migrate_v1(db.conn)
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.conn.execute(statement)
                db.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.conn.in_transaction:
                    db.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError) and _is_corrupt(exc):
                    raise
                return 1  # a schema-1 file this code cannot convert: set it aside
            return None
        if version == SCHEMA_VERSION:
            if not tables >= _TABLES:
                self._create_schema(db)
            return None
        if version == 0 and not tables:
            self._create_schema(db)
            return None
        return int(version)

    def _prepare_fresh(self) -> None:
        """Create the schema in a file that has just been set aside; only a fault here raises."""
        try:
            private_file(self.path)
            version = self._prepare()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create a fresh database at {self.path}: {exc}") from exc
        if version is not None:
            raise StoreError(f"cannot create a fresh database at {self.path}: it has schema version {version}")

    def _create_schema(self, db: sqlite_utils.Database) -> None:
        db.conn.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nCOMMIT;")

    def _rebuild_corrupt(self, generation: int) -> str | None:
        """Set the corrupt file aside and start a fresh one, unless another thread already did."""
        with self._gate.exclusive():
            if self._generation != generation:
                return None
            self._close_all()
            kept = self._set_aside("corrupt")
            self._prepare_fresh()
        return f"cache database was corrupt and has been rebuilt (old file kept as {kept})"

    def _set_aside(self, tag: str) -> Path:
        """Rename the database to ``<name>.<tag>-<time>``, with its WAL or journal when not empty.

        The ``-shm`` index is dropped: SQLite rebuilds it from the WAL whenever it is needed.
        """
        stamp = time.strftime("%Y%m%dT%H%M%S")
        kept = self.path.with_name(f"{self.path.name}.{tag}-{stamp}")
        n = 1
        while kept.exists():
            n += 1
            kept = self.path.with_name(f"{self.path.name}.{tag}-{stamp}-{n}")
        try:
            os.replace(self.path, kept)
            for suffix in ("-wal", "-journal", "-shm"):
                source = Path(f"{self.path}{suffix}")
                if suffix != "-shm" and _file_size(source) > 0:
                    os.replace(source, f"{kept}{suffix}")
                elif source.exists():
                    source.unlink()
        except OSError as exc:
            raise StoreError(f"cannot set aside the old database at {self.path}: {exc.strerror or exc}") from exc
        return kept

    def _announce(self, warning: str | None) -> None:
        if warning is None:
            return
        self.warnings.append(warning)
        if self._on_warning is not None:
            self._on_warning(warning)


class _Gate:
    """Shared/exclusive lock: operations share it; a rebuild or close takes it alone.

    A rebuild renames the file and closes other threads' connections, which is only safe while
    no statement of any thread is running.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


@contextlib.contextmanager
def _writing(db: sqlite_utils.Database) -> Iterator[None]:
    """A write transaction that takes the write lock up front (no deadlock on lock upgrade)."""
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.conn.execute("COMMIT")
    except BaseException:
        if db.conn.in_transaction:
            db.conn.execute("ROLLBACK")
        raise


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    message = str(exc)
    return "malformed" in message or "not a database" in message


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
