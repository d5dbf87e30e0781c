"""The cache database file: its schema, the check and conversion on open, write transactions,
and setting a corrupt or foreign file aside so a fresh one can be made."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from gpuconsole.core.fleet import history
from gpuconsole.core.paths import StoreError

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 5.0  # how long a write waits for another process's write lock
# A rollup of thousands of GPUs grows the WAL to tens of MB; trim it back after checkpoints.
WAL_SIZE_LIMIT_BYTES = 32 * 1024 * 1024

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
TABLES = frozenset({"readings", "reading_parts", "gpus", "settings", "store_meta", "budgets", "budget_fired"}) | history.TABLES
V1_TABLES = frozenset({"readings", "gpus", "gpu_samples", "gpu_minutes", "settings", "store_meta"})

# readings: the last reading per source (JSON, as UTF-8 bytes), its long tuples (a big cluster's
# jobs) left empty there and kept in reading_parts, a few thousand items a row. gpus: a small id per GPU UUID,
# never deleted, so history rows do not repeat the UUID. settings: small JSON values. budgets:
# budgets added in the console or with `budget add`. budget_fired: which threshold action ran in
# which period, so it runs once per period. store_meta: how far rollups have got. GPU history:
# see history.py.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS readings (
    source TEXT PRIMARY KEY,
    taken_at REAL,
    payload TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reading_parts (
    source TEXT NOT NULL,
    field TEXT NOT NULL,
    part INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (source, field, part)
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


def connect(path: Path) -> sqlite_utils.Database:
    """A connection to the file, usable from any thread (each is used by one at a time).

    Raises:
        StoreError: the file cannot be opened.
    """
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the database at {path}: {exc}") from exc
    db = sqlite_utils.Database(conn, execute_plugins=False)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    return db


def prepare(db: sqlite_utils.Database, path: Path, quick_check_max_bytes: int) -> int | None:
    """Check the file and create the schema when the file is new; convert schema 1 in place.

    Returns:
        None when the file is ready, else the schema version it has instead of ours.

    Raises:
        sqlite3.DatabaseError: the file could not be read; :func:`is_corrupt` tells whether
            because it is corrupt.
    """
    db.enable_wal()
    version = db.conn.execute("PRAGMA user_version").fetchone()[0]
    tables = set(db.table_names())
    if file_size(path) <= quick_check_max_bytes:
        verdict = db.conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
    if version == 1 and tables >= V1_TABLES:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            history.migrate_v1(db.conn)
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.conn.execute(statement)
            db.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError) and is_corrupt(exc):
                raise
            return 1  # a schema-1 file this code cannot convert: set it aside
        return None
    if version == SCHEMA_VERSION:
        if not tables >= TABLES:
            create_schema(db)
        return None
    if version == 0 and not tables:
        create_schema(db)
        return None
    return int(version)


def create_schema(db: sqlite_utils.Database) -> None:
    db.conn.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA}\nCOMMIT;")


def set_aside(path: Path, tag: str) -> Path:
    """Rename the database to ``<name>.<tag>-<time>``, with its WAL or journal when not empty.

    The ``-shm`` index is dropped: SQLite rebuilds it from the WAL whenever it is needed.
    """
    stamp = time.strftime("%Y%m%dT%H%M%S")
    kept = path.with_name(f"{path.name}.{tag}-{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = path.with_name(f"{path.name}.{tag}-{stamp}-{n}")
    try:
        os.replace(path, kept)
        for suffix in ("-wal", "-journal", "-shm"):
            source = Path(f"{path}{suffix}")
            if suffix != "-shm" and file_size(source) > 0:
                os.replace(source, f"{kept}{suffix}")
            elif source.exists():
                source.unlink()
    except OSError as exc:
        raise StoreError(f"cannot set aside the old database at {path}: {exc.strerror or exc}") from exc
    return kept


@contextlib.contextmanager
def writing(db: sqlite_utils.Database) -> Iterator[None]:
    """A write transaction that takes the write lock up front (another process may write too)."""
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.conn.execute("COMMIT")
    except BaseException:
        if db.conn.in_transaction:
            db.conn.execute("ROLLBACK")
        raise


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite failed because the file is damaged or not a database at all."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    message = str(exc)
    return "malformed" in message or "not a database" in message


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
