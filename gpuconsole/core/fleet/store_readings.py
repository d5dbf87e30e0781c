"""A reading's rows in the cache: its head in ``readings`` and its long tuples (a big cluster's
jobs) in ``reading_parts``, a few thousand items a row, so no write holds the whole document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import sqlite_utils

from gpuconsole.core.fleet.store_file import writing

T = TypeVar("T")

PART_ITEMS = 2_000  # items of a reading's long tuple per row of reading_parts (about 1 MB of jobs)


def decoded(cls: type[T], rows: list[tuple[str, int, bytes | str]]) -> T | None:
    """A reading from its row (field ``""``) and its parts, in order; None when any part does
    not decode as the type ``cls`` gives its field (a row of another version of the model)."""
    types = {f.name: f.type for f in msgspec.structs.fields(cls)}
    head: T | None = None
    parts: dict[str, list[Any]] = {}
    try:
        for field, _part, payload in rows:  # text (older files) or UTF-8 bytes
            if field == "":
                head = msgspec.json.decode(payload, type=cls)
            elif field in types:
                parts.setdefault(field, []).extend(msgspec.json.decode(payload, type=types[field]))
            else:
                return None
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return None
    if not isinstance(head, cls):
        return None
    return msgspec.structs.replace(head, **{name: tuple(items) for name, items in parts.items()}) if parts else head


def drop(db: sqlite_utils.Database, *, source_key: str) -> None:
    """Delete a reading and its parts (one that no longer decodes)."""
    with writing(db):
        db.conn.execute("DELETE FROM readings WHERE source = ?", (source_key,))
        db.conn.execute("DELETE FROM reading_parts WHERE source = ?", (source_key,))


def saver(source_key: str, reading: Any) -> Callable[[sqlite_utils.Database], None]:
    """The write that keeps ``reading`` as the last of ``source_key``, for the writer thread.

    A tuple of more than :data:`PART_ITEMS` items (100,000 jobs are 44 MB of JSON) is written in
    parts of that many, each encoded just before SQLite takes it: one part is in memory at a time,
    and the GIL is let go between parts. The rest of the reading is one row, those tuples empty.
    """
    fields = msgspec.structs.fields(type(reading))
    long = {f.name: items for f in fields
            if isinstance(items := getattr(reading, f.name), tuple) and len(items) > PART_ITEMS}
    head = msgspec.structs.replace(reading, **{name: () for name in long}) if long else reading
    taken_at = getattr(reading, "taken_at", None)
    encode = msgspec.json.encode

    def save(db: sqlite_utils.Database) -> None:
        with writing(db):
            db.conn.execute("DELETE FROM reading_parts WHERE source = ?", (source_key,))
            db.conn.execute("INSERT OR REPLACE INTO readings (source, taken_at, payload) VALUES (?, ?, ?)",
                            (source_key, taken_at, encode(head)))
            for name, items in long.items():
                db.conn.executemany(
                    "INSERT INTO reading_parts (source, field, part, payload) VALUES (?, ?, ?, ?)",
                    ((source_key, name, n, encode(items[at:at + PART_ITEMS]))
                     for n, at in enumerate(range(0, len(items), PART_ITEMS))))

    return save


def rows(db: sqlite_utils.Database, *, source_key: str) -> list[tuple[str, int, bytes | str]]:
    """The reading's row (field ``""``) and its parts, in order, read in one statement (one commit)."""
    return db.execute(
        "SELECT '', 0, payload FROM readings WHERE source = ? "
        "UNION ALL SELECT field, part, payload FROM reading_parts WHERE source = ? ORDER BY 1, 2",
        (source_key, source_key)).fetchall()
