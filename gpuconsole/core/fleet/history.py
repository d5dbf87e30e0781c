"""GPU metric history inside the Store: raw samples, minute and hour rollups, retention, reads.

Raw samples are kept an hour, minute rollups two days, hour rollups 35 days. Rollups run
incrementally from where the last stopped, and rows go only once past retention *and* rolled
up. :func:`read` picks the coarsest table that still gives :data:`MIN_POINTS` points and fills
the rest of the span from its neighbours. Runs on a connection the Store hands in.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconsole.model import GpuSample

__all__ = [
    "HOUR_RETENTION_S",
    "MINUTE_RETENTION_S",
    "MIN_POINTS",
    "RAW_RETENTION_S",
    "ROLLUP_GRACE_S",
    "apply_retention",
    "read",
    "roll_up",
    "write_rollups",
]

RAW_RETENTION_S = 3600
MINUTE_RETENTION_S = 2 * 86400
HOUR_RETENTION_S = 35 * 86400
ROLLUP_GRACE_S = 15.0
MIN_POINTS = 120
RAW_DELETE_SLICE_MS = 5 * 60_000  # raw rows deleted per transaction: 5 minutes of polls
GPUS_PER_DELETE = 256  # rollup rows deleted per transaction: these many GPUs' old rows

_FAR = 1 << 62  # stands for ±infinity in bound parameters

# Raw samples are clustered by time (a poll appends to a few pages; retention is a range scan);
# rollups by GPU (a chart reads adjacent pages). Rollup averages are integers in tenths and
# memory whole MiB, one or two bytes each instead of an eight-byte REAL.
SCHEMA = """
CREATE TABLE IF NOT EXISTS gpu_samples (
    ts_ms INTEGER NOT NULL,
    gpu INTEGER NOT NULL REFERENCES gpus (id),
    utilization REAL,
    memory_used_mib INTEGER,
    temperature_c INTEGER,
    power_w REAL,
    PRIMARY KEY (ts_ms, gpu)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gpu_minutes (
    gpu INTEGER NOT NULL REFERENCES gpus (id),
    ts INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    utilization INTEGER,
    utilization_max INTEGER,
    memory_used_mib INTEGER,
    temperature_c INTEGER,
    power_w INTEGER,
    PRIMARY KEY (gpu, ts)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gpu_hours (
    gpu INTEGER NOT NULL REFERENCES gpus (id),
    ts INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    utilization INTEGER,
    utilization_max INTEGER,
    memory_used_mib INTEGER,
    temperature_c INTEGER,
    power_w INTEGER,
    PRIMARY KEY (gpu, ts)
) WITHOUT ROWID;
"""
TABLES = frozenset({"gpu_samples", "gpu_minutes", "gpu_hours"})

INSERT_SAMPLE = "INSERT OR REPLACE INTO gpu_samples VALUES (?, ?, ?, ?, ?, ?)"
_COLUMNS = "gpu, ts, samples, utilization, utilization_max, memory_used_mib, temperature_c, power_w"

# Raw samples are clustered by time, so rolling a minute up is a range scan.
_RAW_TO_MINUTES = f"""
INSERT OR REPLACE INTO gpu_minutes ({_COLUMNS})
SELECT gpu, ts_ms / 60000 * 60 AS m, count(*),
       round(avg(utilization) * 10), round(max(utilization) * 10), round(avg(memory_used_mib)),
       round(avg(temperature_c) * 10), round(avg(power_w) * 10)
FROM gpu_samples
WHERE ts_ms >= :start * 1000 AND ts_ms < :end * 1000
GROUP BY gpu, m
"""


def _weighted(column: str) -> str:
    return f"round(sum({column} * samples) * 1.0 / sum(iif({column} IS NULL, 0, samples)))"


# Minutes are clustered by GPU; ``gpu IN (SELECT id FROM gpus)`` turns the scan into one key
# range per GPU instead of a pass over the whole table.
_MINUTES_TO_HOURS = f"""
INSERT OR REPLACE INTO gpu_hours ({_COLUMNS})
SELECT gpu, ts / 3600 * 3600 AS h, sum(samples),
       {_weighted("utilization")}, max(utilization_max), {_weighted("memory_used_mib")},
       {_weighted("temperature_c")}, {_weighted("power_w")}
FROM gpu_minutes
WHERE gpu IN (SELECT id FROM gpus) AND ts >= :start AND ts < :end
GROUP BY gpu, h
"""

# One GPU's raw samples are found by walking the distinct timestamps (a skip-scan written out)
# and looking each (ts_ms, gpu) up in the primary key.
_RAW_HISTORY = """
WITH RECURSIVE tick(ts) AS (
    SELECT (SELECT min(ts_ms) FROM gpu_samples WHERE ts_ms >= :since)
    UNION ALL
    SELECT (SELECT min(ts_ms) FROM gpu_samples WHERE ts_ms > tick.ts) FROM tick WHERE tick.ts < :until
)
SELECT s.ts_ms, s.utilization, s.memory_used_mib, s.temperature_c, s.power_w
FROM tick JOIN gpu_samples AS s ON s.ts_ms = tick.ts AND s.gpu = :gpu
WHERE tick.ts <= :until
ORDER BY s.ts_ms
"""
_ROLLUP_HISTORY = """
SELECT ts, utilization, memory_used_mib, temperature_c, power_w FROM {table}
WHERE gpu = :gpu AND ts >= :low AND ts <= :until AND ts < :high
ORDER BY ts
"""


@dataclass(frozen=True, slots=True)
class _Level:
    table: str
    width: int  # seconds one row stands for; 0 for raw samples


_RAW, _MINUTES, _HOURS = _Level("gpu_samples", 0), _Level("gpu_minutes", 60), _Level("gpu_hours", 3600)
LEVELS: tuple[_Level, ...] = (_RAW, _MINUTES, _HOURS)


# --------------------------------------------------------------------------- writing


def write_rollups(
    conn: sqlite3.Connection, table: str, ids: dict[str, int], rows: Iterable[Sequence[Any]], rolled_until: int
) -> None:
    """Write rollups (``table`` is gpu_minutes or gpu_hours) as live ingest would have, and mark
    the time before ``rolled_until`` rolled up in that table.

    Rows are ``(uuid, period start, samples, utilization, peak utilization, memory MiB,
    temperature °C, power W)`` in natural units; ``ids`` maps the UUIDs to GPU ids. Call inside
    a write transaction.
    """
    key = {"gpu_minutes": "rolled_until", "gpu_hours": "hours_rolled_until"}[table]
    conn.executemany(
        f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [  # written out rather than through helpers: this runs for millions of rows in a bulk fill
            (ids[uuid], ts, n, None if u is None else round(u * 10), None if peak is None else round(peak * 10),
             None if mem is None else round(mem), None if temp is None else round(temp * 10),
             None if power is None else round(power * 10))
            for uuid, ts, n, u, peak, mem, temp, power in rows
        ],
    )
    rolled = _meta(conn, key)
    _set_meta(conn, key, rolled_until if rolled is None else max(rolled, rolled_until))


def roll_up(conn: sqlite3.Connection, now: float) -> None:
    """Roll complete minutes of raw samples into minutes, and complete hours of minutes into hours.

    A minute counts as complete :data:`ROLLUP_GRACE_S` after it ends, so a poll stamped before
    the minute ended but committed just after still makes it in. Call inside a write transaction.
    """
    end = _floor(now - ROLLUP_GRACE_S, 60)
    rolled = _meta(conn, "rolled_until")
    start = rolled
    if start is None:
        oldest = conn.execute("SELECT min(ts_ms) FROM gpu_samples").fetchone()[0]
        start = None if oldest is None else _floor(oldest / 1000, 60)
    if start is not None and start < end:
        conn.execute(_RAW_TO_MINUTES, {"start": start, "end": end})
        rolled = end
        _set_meta(conn, "rolled_until", rolled)
    if rolled is None:
        return
    hour_end = _floor(rolled, 3600)
    hour_start = _meta(conn, "hours_rolled_until")
    if hour_start is None:
        oldest = _oldest(conn, "gpu_minutes")
        hour_start = None if oldest is None else _floor(oldest, 3600)
    if hour_start is not None and hour_start < hour_end:
        conn.execute(_MINUTES_TO_HOURS, {"start": hour_start, "end": hour_end})
        _set_meta(conn, "hours_rolled_until", hour_end)


def apply_retention(conn: sqlite3.Connection, now: float, transaction: Callable[[], contextlib.AbstractContextManager[Any]]) -> None:
    """Delete rows past their retention that have been rolled up, a bounded batch per transaction."""
    with transaction():
        rolled = _meta(conn, "rolled_until")
        hours_rolled = _meta(conn, "hours_rolled_until")
        oldest_raw = conn.execute("SELECT min(ts_ms) FROM gpu_samples").fetchone()[0]
        top_id = conn.execute("SELECT max(id) FROM gpus").fetchone()[0] or 0
    if rolled is not None and oldest_raw is not None:
        cut = min(_floor(now - RAW_RETENTION_S, 60), rolled) * 1000
        while oldest_raw < cut:
            step = min(cut, oldest_raw + RAW_DELETE_SLICE_MS)
            with transaction():
                conn.execute("DELETE FROM gpu_samples WHERE ts_ms < ?", (step,))
            oldest_raw = step
    cuts = [("gpu_hours", now - HOUR_RETENTION_S)]
    if hours_rolled is not None:
        # whole hours, so the oldest minute kept starts an hour and charts stitch without a gap
        cuts.insert(0, ("gpu_minutes", min(_floor(now - MINUTE_RETENTION_S, 3600), hours_rolled)))
    for table, cut in cuts:
        for first in range(0, top_id + 1, GPUS_PER_DELETE):
            with transaction():
                conn.execute(
                    f"DELETE FROM {table} WHERE gpu IN (SELECT id FROM gpus WHERE id >= ? AND id < ?) AND ts < ?",
                    (first, first + GPUS_PER_DELETE, cut),
                )


# --------------------------------------------------------------------------- reading


def resolution(span: float, min_points: int = MIN_POINTS) -> int:
    """Seconds per point of the coarsest table that gives ``min_points`` over ``span`` (0: raw)."""
    for level in reversed(LEVELS[1:]):
        if span / level.width >= min_points:
            return level.width
    return 0


def read(conn: sqlite3.Connection, gpu: int, since: float, until: float, min_points: int = MIN_POINTS) -> list[GpuSample]:
    """One GPU's samples from ``since`` to ``until`` (inclusive), oldest first; see the module doc.

    A rollup row is returned, stamped with the start of its minute or hour, when its period
    overlaps the range.
    """
    width = resolution(until - since, min_points)
    chosen = next(i for i, level in enumerate(LEVELS) if level.width == width)
    low, high = _coverage(conn, gpu)
    pieces: list[tuple[int, float, float]] = []  # (level, from, to): rows with from <= ts < to
    cut = low[chosen]
    for j in range(chosen + 1, len(LEVELS)):  # older than the chosen table holds: whole rows only
        pieces.insert(0, (j, -math.inf, cut - LEVELS[j].width + 1))
        cut = min(cut, low[j])
    pieces.append((chosen, -math.inf, high[chosen]))
    start = high[chosen]
    for j in range(chosen - 1, -1, -1):  # newer than the chosen table holds
        pieces.append((j, start, high[j]))
        start = max(start, high[j])
    out: list[GpuSample] = []
    last = -math.inf
    for j, frm, to in pieces:
        if to <= frm or to < since - LEVELS[j].width:
            continue
        for sample in _rows(conn, LEVELS[j], gpu, max(since, frm), until, to):
            if sample.ts > last:
                out.append(sample)
                last = sample.ts
    return out


def _rows(conn: sqlite3.Connection, level: _Level, gpu: int, since: float, until: float, high: float) -> list[GpuSample]:
    if level.width == 0:
        params = {"gpu": gpu, "since": _bound(since * 1000, math.ceil), "until": _bound(until * 1000, math.floor)}
        return [
            GpuSample(ts / 1000, u, float(mem), float(temp), power)
            for ts, u, mem, temp, power in conn.execute(_RAW_HISTORY, params)
        ]
    params = {
        "gpu": gpu,
        # a row overlaps the range when it ends after ``since``: ts + width > since
        "low": _bound(since, math.floor) - level.width + 1,
        "until": _bound(until, math.floor),
        "high": _bound(high, math.ceil),
    }
    return [
        GpuSample(float(ts), _from_tenths(u), float(mem or 0), _from_tenths(temp), _from_tenths(power))
        for ts, u, mem, temp, power in conn.execute(_ROLLUP_HISTORY.format(table=level.table), params)
    ]


def _coverage(conn: sqlite3.Connection, gpu: int) -> tuple[list[float], list[float]]:
    """Per level, from when (inclusive) and until when (exclusive) its rows are complete."""
    oldest_raw = conn.execute("SELECT min(ts_ms) FROM gpu_samples").fetchone()[0]
    # Raw samples are deleted by time for every GPU alike, so from the minute of the oldest one
    # on they are complete.
    low = [math.inf if oldest_raw is None else float(_floor(oldest_raw / 1000, 60))]
    high = [math.inf]
    for level, key in ((_MINUTES, "rolled_until"), (_HOURS, "hours_rolled_until")):
        first = conn.execute(f"SELECT min(ts) FROM {level.table} WHERE gpu = ?", (gpu,)).fetchone()[0]
        done = _meta(conn, key)
        low.append(math.inf if first is None else float(first))
        high.append(-math.inf if done is None else float(done))
    return low, high


# --------------------------------------------------------------------------- schema changes


def migrate_v1(conn: sqlite3.Connection) -> None:
    """Convert schema-1 history (REAL timestamps and averages, no hours) to this schema.

    Call inside a write transaction. Minute rows of schema 1 did not count their samples; they
    are taken as full minutes of 1 Hz polls.
    """
    conn.execute("ALTER TABLE gpu_samples RENAME TO gpu_samples_v1")
    conn.execute("ALTER TABLE gpu_minutes RENAME TO gpu_minutes_v1")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(
        "INSERT OR REPLACE INTO gpu_samples SELECT CAST(round(ts * 1000) AS INTEGER), gpu, utilization, "
        "memory_used_mib, temperature_c, power_w FROM gpu_samples_v1"
    )
    conn.execute(
        f"INSERT OR REPLACE INTO gpu_minutes ({_COLUMNS}) SELECT gpu, CAST(minute AS INTEGER), 60, "
        "round(utilization * 10), round(utilization_max * 10), round(memory_used_mib), round(temperature_c * 10), "
        "round(power_w * 10) FROM gpu_minutes_v1"
    )
    conn.execute("DROP TABLE gpu_samples_v1")
    conn.execute("DROP TABLE gpu_minutes_v1")


# --------------------------------------------------------------------------- helpers


def _oldest(conn: sqlite3.Connection, table: str) -> int | None:
    """The oldest row of a GPU-clustered table, found with one key lookup per GPU."""
    return conn.execute(f"SELECT min((SELECT min(ts) FROM {table} WHERE gpu = g.id)) FROM gpus AS g").fetchone()[0]


def _meta(conn: sqlite3.Connection, key: str) -> int | None:
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: int) -> None:
    conn.execute("INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", (key, value))


def _floor(ts: float, width: int) -> int:
    return int(ts // width) * width


def _bound(value: float, rounding: Callable[[float], int]) -> int:
    """``value`` rounded to an integer SQLite can compare, infinities as far-away numbers."""
    if value >= _FAR:
        return _FAR
    if value <= -_FAR:
        return -_FAR
    return rounding(value)


def _from_tenths(value: int | None) -> float:
    return 0.0 if value is None else value / 10
