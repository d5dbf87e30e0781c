"""The sender's memory: each alert's episode, and every channel's queue of messages.

One SQLite file (0600, under the state directory) holds three tables. ``episodes``: identity →
when it began, when it fired, when it resolved, and the alert as sent. ``messages``: one row per
(message id, channel), each id made from the episode and what it says
(``gpu-idle:GPU-1@1764480000:firing:0``), so queueing the same message twice is a no-op and a
restart never queues again what it already queued. ``channels``: each channel's failures.
SQLite rather than a JSON-lines file: an episode firing and its messages queued are one
transaction (``synchronous=FULL``), a delivery is marked in place, and two processes (the
sender and ``notify status``) read it safely at once.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuconsole.core.paths import private_file

SCHEMA = """
create table if not exists episodes (
    identity text primary key, started real not null, fired real, resolved real, alert text not null);
create table if not exists messages (
    id text not null, channel text not null, identity text not null, status text not null,
    body text not null, queued real not null, attempts integer not null default 0, next_at real not null,
    delivered real, error text not null default '', primary key (id, channel));
create index if not exists messages_waiting on messages (channel, delivered, queued);
create table if not exists channels (
    channel text primary key, failing_since real, last_error text not null default '',
    last_ok real, next_at real);
"""
MAX_BACKOFF_S = 60.0
KEEP_DELIVERED_S = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Episode:
    identity: str
    started: float
    fired: float | None
    resolved: float | None
    alert: dict[str, object]


@dataclass(frozen=True, slots=True)
class Message:
    id: str
    channel: str
    identity: str
    status: str  # "firing" or "resolved"
    body: dict[str, object]
    queued: float
    attempts: int
    delivered: float | None
    error: str


@dataclass(frozen=True, slots=True)
class ChannelHealth:
    channel: str
    failing_since: float | None
    last_error: str
    last_ok: float | None
    waiting: int


class Outbox:
    """Episodes and queues in ``path`` (``:memory:`` for a demo that keeps nothing)."""

    def __init__(self, path: Path | str) -> None:
        if isinstance(path, Path):
            private_file(path)
        self._db = sqlite3.connect(str(path), timeout=10, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("pragma journal_mode=wal")
            self._db.execute("pragma synchronous=full")
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ episodes
    def active(self) -> dict[str, Episode]:
        """Every episode not resolved (pending or firing), by identity."""
        with self._lock:
            rows = self._db.execute("select identity, started, fired, resolved, alert from episodes "
                                    "where resolved is null").fetchall()
        return {r[0]: Episode(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows}

    def begin(self, identity: str, started: float, alert: dict[str, object]) -> None:
        with self._lock:
            self._db.execute("insert or replace into episodes values (?, ?, null, null, ?)",
                             (identity, started, json.dumps(alert)))

    def update_alert(self, identity: str, alert: dict[str, object]) -> None:
        with self._lock:
            self._db.execute("update episodes set alert = ? where identity = ?", (json.dumps(alert), identity))

    def drop(self, identity: str) -> None:
        """Forget a pending episode that ended before it fired."""
        with self._lock:
            self._db.execute("delete from episodes where identity = ? and fired is null", (identity,))

    def mark(self, identity: str, *, fired: float | None = None, resolved: float | None = None,
             messages: Sequence[tuple[str, str, str, dict[str, object]]] = (), now: float = 0.0) -> None:
        """Mark an episode fired or resolved and queue ``messages`` (id, channel, status, body), at once."""
        with self._lock, self._db:
            self._db.execute("begin immediate")
            if fired is not None:
                self._db.execute("update episodes set fired = ? where identity = ?", (fired, identity))
            if resolved is not None:
                self._db.execute("update episodes set resolved = ? where identity = ?", (resolved, identity))
            self._queue(identity, messages, now)
            self._db.execute("commit")

    def queue(self, identity: str, messages: Sequence[tuple[str, str, str, dict[str, object]]], now: float) -> int:
        """Queue messages (a repeat); those already queued are left as they are. Returns how many were new."""
        with self._lock:
            return self._queue(identity, messages, now)

    def _queue(self, identity: str, messages: Sequence[tuple[str, str, str, dict[str, object]]], now: float) -> int:
        new = 0
        for mid, channel, status, body in messages:
            new += self._db.execute(
                "insert or ignore into messages (id, channel, identity, status, body, queued, next_at) "
                "values (?, ?, ?, ?, ?, ?, ?)", (mid, channel, identity, status, json.dumps(body), now, now)).rowcount
        return new

    # ------------------------------------------------------------------ delivery
    def waiting(self, channel: str, now: float | None = None) -> list[Message]:
        """The channel's undelivered messages, oldest first (only those due at ``now`` when given)."""
        sql = "select * from messages where channel = ? and delivered is null"
        params: tuple[object, ...] = (channel,)
        if now is not None:
            sql += " and next_at <= ?"
            params = (channel, now)
        with self._lock:
            rows = self._db.execute(sql + " order by queued, id", params).fetchall()
        return [_message(r) for r in rows]

    def channel_due(self, channel: str, now: float) -> bool:
        with self._lock:
            row = self._db.execute("select next_at from channels where channel = ?", (channel,)).fetchone()
        return row is None or row[0] is None or row[0] <= now

    def delivered(self, channel: str, ids: list[str], now: float) -> None:
        with self._lock, self._db:
            self._db.execute("begin immediate")
            self._db.executemany("update messages set delivered = ?, error = '' where id = ? and channel = ?",
                                 [(now, i, channel) for i in ids])
            self._db.execute("insert into channels (channel, last_ok) values (?, ?) on conflict (channel) do update "
                             "set failing_since = null, last_error = '', last_ok = excluded.last_ok, next_at = null",
                             (channel, now))
            self._db.execute("delete from messages where delivered < ?", (now - KEEP_DELIVERED_S,))
            self._db.execute("commit")

    def failed(self, channel: str, ids: list[str], error: str, now: float) -> float:
        """Record a failed try; returns when the channel is tried again (backoff doubling to a minute)."""
        with self._lock, self._db:
            self._db.execute("begin immediate")
            row = self._db.execute("select failing_since from channels where channel = ?", (channel,)).fetchone()
            since = row[0] if row and row[0] is not None else now
            tries = self._db.execute("select max(attempts) from messages where channel = ? and delivered is null",
                                     (channel,)).fetchone()[0] or 0
            next_at = now + min(MAX_BACKOFF_S, 2.0 ** min(tries, 10))
            self._db.executemany("update messages set attempts = attempts + 1, error = ?, next_at = ? "
                                 "where id = ? and channel = ?", [(error, next_at, i, channel) for i in ids])
            self._db.execute("insert into channels (channel, failing_since, last_error, next_at) values (?, ?, ?, ?) "
                             "on conflict (channel) do update set failing_since = excluded.failing_since, "
                             "last_error = excluded.last_error, next_at = excluded.next_at",
                             (channel, since, error, next_at))
            self._db.execute("commit")
        return next_at

    # ------------------------------------------------------------------ what the commands show
    def health(self, channel: str) -> ChannelHealth:
        with self._lock:
            row = self._db.execute("select failing_since, last_error, last_ok from channels where channel = ?",
                                   (channel,)).fetchone()
            waiting = self._db.execute("select count(*) from messages where channel = ? and delivered is null",
                                       (channel,)).fetchone()[0]
        if row is None:
            return ChannelHealth(channel, None, "", None, waiting)
        return ChannelHealth(channel, row[0], row[1], row[2], waiting)

    def deliveries(self, identity: str) -> list[Message]:
        """Every message of ``identity``'s episodes, for ``notify list``."""
        with self._lock:
            rows = self._db.execute("select * from messages where identity = ? order by queued, id", (identity,)).fetchall()
        return [_message(r) for r in rows]


def _message(r: tuple[object, ...]) -> Message:
    mid, channel, identity, status, body, queued, attempts, _next, delivered, error = r
    return Message(str(mid), str(channel), str(identity), str(status), json.loads(str(body)), float(queued),  # type: ignore[arg-type]
                   int(attempts), delivered, str(error))  # type: ignore[arg-type]
