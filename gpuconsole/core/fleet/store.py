"""The cache-and-history store: last readings, GPU metric history, settings and budgets in SQLite.

A cache, never the source of truth: a file that is corrupt or of another schema is set aside
and rebuilt with a one-line warning instead of failing the app. Writes run on one writer thread
(:mod:`store_writer`), reads on each reading thread's own connection (WAL: they never wait).
"""

from __future__ import annotations

import functools
import json
import sqlite3
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self, TypeVar

import msgspec
import sqlite_utils

from gpuconsole.core.fleet import history, store_readings
from gpuconsole.core.fleet.history import (
    HOUR_RETENTION_S,
    MINUTE_RETENTION_S,
    RAW_RETENTION_S,
    ROLLUP_GRACE_S,
)
from gpuconsole.core.fleet.store_file import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    WAL_SIZE_LIMIT_BYTES,
    connect,
    is_corrupt,
    prepare,
    set_aside,
    writing,
)
from gpuconsole.core.fleet.store_readers import Reader, ReadConnections
from gpuconsole.core.fleet.store_writer import WriteQueue
from gpuconsole.core.paths import StoreError, private_dir, private_file
from gpuconsole.model import Budget, Gpu, GpuSample, from_jsonable, to_jsonable

__all__ = [
    "BUSY_TIMEOUT_S",
    "HOUR_RETENTION_S",
    "MINUTE_RETENTION_S",
    "QUICK_CHECK_MAX_BYTES",
    "RAW_RETENTION_S",
    "ROLLUP_GRACE_S",
    "SCHEMA_VERSION",
    "WAL_SIZE_LIMIT_BYTES",
    "Store",
    "StoreError",
]

T = TypeVar("T")
R = TypeVar("R")

# PRAGMA quick_check reads every page (about 3 ms per MB when cached, three times that cold);
# above this size opening would no longer be instant, and corruption there is caught when a
# statement first meets it.
QUICK_CHECK_MAX_BYTES = 16 * 1024 * 1024
class Store:
    """SQLite cache of the last readings, GPU metric history and settings; safe across threads.

    Every write waits for its job on the writer thread, so what it wrote reads back at once on
    any thread, and its :class:`StoreError` (a full disk, say) reaches the caller.

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
        self._generation = 0  # bumped whenever the file is replaced or the store closed
        self._readers = ReadConnections(functools.partial(connect, self.path))
        self._ids: dict[str, int] = {}  # GPU UUID -> gpus.id, used on the writer thread only
        self._writer = WriteQueue("store-writer", functools.partial(connect, self.path))
        weakref.finalize(self, self._writer.stop_soon)  # a store dropped unclosed ends its writer
        try:
            private_dir(self.path.parent)
            private_file(self.path)  # 0600 before SQLite writes a byte (its -wal and -shm follow it)
        except OSError as exc:
            raise StoreError(f"cannot create {self.path.parent} for the database: {exc.strerror or exc}") from exc
        try:
            warning = self._writer.run(self._open)
        except BaseException:
            self._writer.stop()
            raise
        self._announce(warning)

    # ------------------------------------------------------------------ readings

    def save_reading(self, source_key: str, reading: Any) -> None:
        """Keep ``reading`` (a GpuReading, JobsReading or CloudReading) as the last of its source
        (long tuples in parts: :func:`store_readings.saver`)."""
        self._write("save a reading", store_readings.saver(source_key, reading))

    def load_reading(self, source_key: str, cls: type[T]) -> T | None:
        """The last reading saved for ``source_key``, or None when there is none that decodes.

        A row written by another version of the model that no longer decodes is deleted, so the
        console starts empty for that source rather than failing.
        """
        rows = self._read("load a reading", functools.partial(store_readings.rows, source_key=source_key))
        if not rows:
            return None
        reading = store_readings.decoded(cls, rows)
        if reading is not None:
            return reading
        self._write("drop an unreadable reading", functools.partial(store_readings.drop, source_key=source_key))
        return None

    # ------------------------------------------------------------------ GPU history

    def record_gpus(self, gpus: Iterable[Gpu], ts: float) -> None:
        """Add one raw sample per GPU at time ``ts`` (kept to the millisecond), in one transaction."""
        gpus = list(gpus)
        if not gpus:
            return
        ts_ms = round(ts * 1000)

        def record(db: sqlite_utils.Database) -> None:
            with writing(db):
                ids = self._gpu_ids(db, [g.uuid for g in gpus])
                db.conn.executemany(
                    history.INSERT_SAMPLE,
                    [(ts_ms, ids[g.uuid], g.utilization, g.memory_used_mib, g.temperature_c, g.power_w) for g in gpus],
                )
            self._ids.update(ids)

        self._write("record GPU samples", record)

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
            with writing(db):
                ids = self._gpu_ids(db, list(dict.fromkeys(r[0] for r in rows)))
                history.write_rollups(db.conn, table, ids, rows, rolled_until)
            self._ids.update(ids)

        self._write(f"record GPU history in {table}", record)

    def maintain(self, now: float) -> None:
        """Roll complete minutes and hours up and apply retention; cheap enough to call once a minute.

        Each minute and hour is rolled up once, from where the last call stopped. Rows are deleted
        once they are past their retention *and* rolled up, so a console that was closed for a
        while loses nothing; deletions run as short transactions of bounded size, so a poll's
        write never waits long behind them.
        """

        def run(db: sqlite_utils.Database) -> None:
            with writing(db):
                history.roll_up(db.conn, now)
            history.apply_retention(db.conn, now, lambda: writing(db))

        self._write("maintain GPU history", run)

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

        return self._read("read GPU history", query)

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and truncate it (the file size then tells all)."""
        self._write("checkpoint the database", lambda db: db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())

    # ------------------------------------------------------------------ settings

    def get_setting(self, key: str, default: Any = None) -> Any:
        """The JSON value stored under ``key``, or ``default`` when unset or unreadable."""
        row = self._read(
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
        self._execute("save a setting", "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, text))

    # ------------------------------------------------------------------ budgets

    def budgets(self) -> list[Budget]:
        """The saved budgets, by name; a row that no longer decodes is skipped."""
        rows = self._read(
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
        return self._execute("save a budget", f"{verb} INTO budgets (name, payload) VALUES (?, ?)", (budget.name, payload)) > 0

    def delete_budget(self, name: str) -> bool:
        """Delete a budget and what it has fired; False when there was none of that name."""

        def delete(db: sqlite_utils.Database) -> bool:
            with writing(db):
                cursor = db.conn.execute("DELETE FROM budgets WHERE name = ?", (name,))
                db.conn.execute("DELETE FROM budget_fired WHERE budget = ?", (name,))
                return cursor.rowcount > 0

        return self._write("delete a budget", delete)

    def budget_fired(self, since: float = 0.0) -> set[tuple[str, str, str, float]]:
        """``(budget, threshold, action, period_start)`` of every action fired at or after ``since``."""
        rows = self._read(
            "read fired budget actions",
            lambda db: db.execute(
                "SELECT budget, threshold, action, period_start FROM budget_fired WHERE fired_at >= ?", (since,)
            ).fetchall(),
        )
        return {(b, t, a, float(p)) for b, t, a, p in rows}

    def mark_budget_fired(self, budget: str, threshold: str, action: str, period_start: float, at: float) -> bool:
        """Record that an action fired; False when it was already recorded for that period."""
        return self._execute("record a fired budget action",
                             "INSERT OR IGNORE INTO budget_fired (budget, threshold, action, period_start, fired_at) "
                             "VALUES (?, ?, ?, ?, ?)", (budget, threshold, action, period_start, at)) > 0

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Run the writes already given, stop the writer and close every connection; a later
        call opens new ones."""
        self._writer.stop()
        self._generation += 1
        self._readers.close_all()
        self._ids.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def _connections(self) -> list[Reader]:
        """The read connections open now (tests count them)."""
        return self._readers.open

    # ------------------------------------------------------------------ internals

    def _write(self, action: str, op: Callable[[sqlite_utils.Database], R]) -> R:
        """Run ``op`` on the writer thread's connection and wait for it; a corrupt file is
        rebuilt there and ``op`` tried once more."""

        def job() -> tuple[R, str | None]:
            warning = None
            for attempt in range(2):
                generation = self._generation
                try:
                    return op(self._writer.connection()), warning
                except sqlite3.DatabaseError as exc:
                    if not is_corrupt(exc):
                        raise StoreError(f"cannot {action} in the cache database {self.path}: {exc}") from exc
                if attempt == 0:
                    warning = self._rebuild_corrupt(generation)
            raise StoreError(f"cannot {action}: the cache database {self.path} is corrupt again after a rebuild")

        result, warning = self._writer.run(job)
        self._announce(warning)
        return result

    def _execute(self, action: str, sql: str, params: tuple[Any, ...]) -> int:
        """One statement in a write transaction; the number of rows it changed."""

        def run(db: sqlite_utils.Database) -> int:
            with writing(db):
                return db.conn.execute(sql, params).rowcount

        return self._write(action, run)

    def _read(self, action: str, op: Callable[[sqlite_utils.Database], R]) -> R:
        """Run ``op`` on this thread's read connection; have the file rebuilt and retry once if
        it is corrupt."""
        for attempt in range(2):
            generation = self._generation
            reader: Reader | None = self._readers.mine(generation)
            with reader.lock:
                if reader.closed:  # the file was replaced meanwhile: read the new one
                    reader = None
                else:
                    try:
                        return op(reader.db)
                    except sqlite3.DatabaseError as exc:
                        if not is_corrupt(exc):
                            raise StoreError(f"cannot {action} in the cache database {self.path}: {exc}") from exc
            if reader is None:
                continue
            if attempt == 0:
                self._announce(self._writer.run(lambda generation=generation: self._rebuild_corrupt(generation)))
        raise StoreError(f"cannot {action}: the cache database {self.path} is corrupt again after a rebuild")

    def _gpu_ids(self, db: sqlite_utils.Database, uuids: list[str]) -> dict[str, int]:
        """The row id of each GPU UUID, adding the GPUs seen for the first time.

        Ids are cached for the life of the file (rows of ``gpus`` are never deleted, so an id
        never goes stale); a rebuild clears the cache. Runs on the writer thread.
        """
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

    def _open(self) -> str | None:
        """Open the file (on the writer thread), setting it aside first when it is corrupt or of
        another schema. Returns the warning to give when the file was rebuilt, else None."""
        try:
            version = prepare(self._writer.connection(), self.path, QUICK_CHECK_MAX_BYTES)
            if version is None:
                return None
            tag, what = f"schema{version}", f"had schema version {version} (this gpuconsole uses {SCHEMA_VERSION})"
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                self._writer.close_connection()
                raise StoreError(f"cannot open the database at {self.path}: {exc}") from exc
            tag, what = "corrupt", "was corrupt"
        kept = self._replace_file(tag)
        return f"cache database {what} and has been rebuilt (old file kept as {kept})"

    def _rebuild_corrupt(self, generation: int) -> str | None:
        """Set the corrupt file aside and start a fresh one, unless that was done since
        ``generation``. Runs on the writer thread, so no write is under way."""
        if self._generation != generation:
            return None
        kept = self._replace_file("corrupt")
        return f"cache database was corrupt and has been rebuilt (old file kept as {kept})"

    def _replace_file(self, tag: str) -> Path:
        """Close every connection, set the file aside as ``tag`` and create a fresh one."""
        self._generation += 1
        self._writer.close_connection()
        self._readers.close_all()
        self._ids.clear()
        kept = set_aside(self.path, tag)
        try:
            private_file(self.path)
            version = prepare(self._writer.connection(), self.path, QUICK_CHECK_MAX_BYTES)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create a fresh database at {self.path}: {exc}") from exc
        if version is not None:
            raise StoreError(f"cannot create a fresh database at {self.path}: it has schema version {version}")
        return kept

    def _announce(self, warning: str | None) -> None:
        if warning is None:
            return
        self.warnings.append(warning)
        if self._on_warning is not None:
            self._on_warning(warning)
