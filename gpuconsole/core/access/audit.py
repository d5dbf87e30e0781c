"""The audit log: every change and every refused attempt, append-only and hash-chained.

Its own SQLite file (``audit.db`` in the state directory, 0600), never the cache: the cache can
be deleted and rebuilt, the audit log is never rebuilt or pruned. Each record carries the
SHA-256 of the record before it, and its own hash covers its sequence number and every field,
so :meth:`AuditLog.verify` finds the first record that was edited, deleted or moved. Triggers
refuse UPDATE and DELETE through SQLite; a head file beside the database holds the last
sequence number and hash, so cutting records off the end is found too, and a head that is
missing, unreadable or behind the database is tampering.

Each login keeps its own chain, in a file it owns: a log owned by another login is refused, since
its owner could rewrite whatever is added to it. Whoever can write the file can still recompute
the whole chain; what anchors it is the copy in a sink the login cannot rewrite (``sinks``, see
:mod:`gpuconsole.core.access.audit_sink`), which receives every record as it is appended.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol
from datetime import UTC, datetime
from pathlib import Path

from gpuconsole.core.csv_cells import write_rows
from gpuconsole.core.paths import private_dir, private_file, write_private
from gpuconsole.model import AuditFilter, AuditRecord

GENESIS = "0" * 64
HEAD_TEXT = re.compile(r"(\d+) ([0-9a-f]{64})\s*")
BUSY_TIMEOUT_S = 10.0  # how long an append waits for another process's lock before it fails
SECRET_KEY = re.compile(r"secret|token|passw|credential|api.?key|access.?key|auth|webhook|command|mfa|code", re.IGNORECASE)
SECRET_VALUE = re.compile(r"(AKIA|ASIA)[A-Z0-9]{16}|(?i:bearer\s+\S+)|://[^/\s:@]+:[^/\s@]+@")
REDACTED = "***"
FIELDS = ("seq", "ts", "actor", "role", "action", "target", "params", "result", "prev_hash", "hash")

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    ts TEXT NOT NULL,
    actor TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    params TEXT NOT NULL,
    result TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""


class AuditError(Exception):
    """The audit log cannot be read or written; the message is one line."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What verify found. ``unreadable``: this login may not read the log (its own answer:
    not evidence either way), as opposed to a log found altered."""

    ok: bool
    records: int
    message: str
    bad_seq: int | None = None
    unreadable: bool = False
    hint: str = "verify as its owner or a login that may read it"  # what to do when ``unreadable``


def unreadable(path: Path) -> Verdict | None:
    """The verdict for a file this login may not read (or whose folder it may not enter), else None."""
    try:
        path.stat()
    except PermissionError:
        pass
    except OSError:
        return None  # missing (or not a file): verify says what that means
    else:
        if path.is_dir() or os.access(path, os.R_OK):
            return None
    return Verdict(False, 0, f"{path} cannot be read by this login (permission denied)", unreadable=True)


class RecordSink(Protocol):
    """Where every record also goes as it is appended (a copy the login cannot rewrite)."""

    def check_writable(self) -> None:
        """Raise :class:`AuditError` unless a record handed over now would be kept."""

    def deliver(self, record: AuditRecord, log: AuditLog) -> None:
        """Take ``record`` (sent now, or kept to send later); raise :class:`AuditError` when it
        can be neither, so the action is not left unaudited."""


def redact(params: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Parameters as a dict, with values that look like or are named as secrets replaced."""
    out: dict[str, str] = {}
    for key, value in params:
        text = str(value)
        if SECRET_KEY.search(key) and text:
            text = REDACTED
        elif SECRET_VALUE.search(text):
            text = SECRET_VALUE.sub(REDACTED, text)
        out[key] = text
    return out


def record_hash(seq: int, ts: str, actor: str, role: str, action: str, target: str, params: str,
                result: str, prev_hash: str) -> str:
    body = json.dumps([seq, ts, actor, role, action, target, params, result, prev_hash],
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditLog:
    """The append-only log at ``path`` (created 0600 in a 0700 directory when missing).

    Args:
        path: the SQLite file.
        clock: seconds since the epoch, for the records' times.
    """

    def __init__(self, path: Path, clock: Callable[[], float] | None = None) -> None:
        self.path = Path(path).expanduser()
        self.head_path = self.path.with_name(self.path.name + ".head")
        self.clock = clock or time.time
        self.busy_timeout_s = BUSY_TIMEOUT_S
        self._lock = threading.Lock()
        self._ready = False
        self.sinks: list[RecordSink] = []

    def _connect(self, *, write: bool = True) -> sqlite3.Connection:
        """A connection; one that will ``write`` refuses a log another login owns."""
        try:
            if not self._ready:
                private_dir(self.path.parent)
                private_file(self.path)
            if write:
                self._check_owner()
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            if not self._ready:
                conn.executescript(SCHEMA)
                self._ready = True
        except (OSError, sqlite3.Error) as exc:
            raise AuditError(f"cannot open the audit log {self.path}: {exc}") from exc
        return conn

    def _check_owner(self) -> None:
        """Refuse to write to a log another login owns: it could rewrite every record added to it
        (reading one is fine: root may read any login's log)."""
        owner = self.path.stat().st_uid
        if owner != os.geteuid():
            raise AuditError(f"the audit log {self.path} belongs to another login (uid {owner}): each login keeps "
                             "its own, and the shared copy is the audit sink ([audit] in the configuration)")

    def check_writable(self) -> None:
        """Raise :class:`AuditError` unless records can be appended (actions fail closed)."""
        self._connect().close()
        for sink in self.sinks:
            sink.check_writable()

    def append(self, actor: str, role: str, action: str, target: str, params: Iterable[tuple[str, str]],
               result: str, at: float | None = None) -> AuditRecord:
        """Add one record at the end of the chain (atomically, across processes)."""
        ts = iso(self.clock() if at is None else at)
        text = json.dumps(redact(params), sort_keys=True, ensure_ascii=False)
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                last = conn.execute("SELECT seq, hash FROM records ORDER BY seq DESC LIMIT 1").fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
                digest = record_hash(seq, ts, actor, role, action, target, text, result, prev)
                conn.execute("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)",
                             (seq, ts, actor, role, action, target, text, result, prev, digest))
                conn.execute("COMMIT")
                write_private(self.head_path, f"{seq} {digest}\n")
            except (OSError, sqlite3.Error) as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise AuditError(f"cannot write the audit log {self.path}: {exc}") from exc
            finally:
                conn.close()
        record = AuditRecord(seq, ts, actor, role, action, target, text, result, prev, digest)
        for sink in self.sinks:
            sink.deliver(record, self)
        return record

    def records(self, flt: AuditFilter | None = None, limit: int | None = None, *,
                action: str | None = None) -> list[AuditRecord]:
        """Records in chain order (oldest first), filtered; with ``limit`` the newest that many;
        with ``action`` only that action's (selected by SQLite)."""
        if not self.path.exists():
            return []
        conn = self._connect(write=False)
        where, args = (" WHERE action = ?", (action,)) if action else ("", ())
        try:
            rows = conn.execute(f"SELECT {', '.join(FIELDS)} FROM records{where} ORDER BY seq", args).fetchall()
        except sqlite3.Error as exc:
            raise AuditError(f"cannot read the audit log {self.path}: {exc}") from exc
        finally:
            conn.close()
        out = [AuditRecord(*row) for row in rows]
        if flt is not None:
            out = [r for r in out if flt.matches(r)]
        return out[-limit:] if limit else out

    def verify(self) -> Verdict:
        """Walk the chain and hold it against the head file; the verdict names the first record
        edited, deleted or moved. A missing, lagging or damaged head is tampering too; a log or
        head this login may not read is its own answer (``unreadable``)."""
        for path in (self.path, self.head_path):
            if (denied := unreadable(path)) is not None:
                return denied
        try:
            head = self._head()
        except AuditError as exc:
            return Verdict(False, 0, str(exc), 1)
        if not self.path.exists():
            if head is None:
                return Verdict(True, 0, "no audit log yet: 0 record(s)")
            return Verdict(False, 0, f"the audit database is missing, but its head file says {head[0]} record(s) "
                                     "were written (the log was deleted)", 1)
        try:
            rows = self.records()
        except AuditError as exc:
            return Verdict(False, 0, str(exc))
        broken = chain_break(rows)
        if broken is not None:
            return Verdict(False, len(rows), broken[1], broken[0])
        n = len(rows)
        last = rows[-1].hash if rows else GENESIS
        if head is None:
            if n:
                return Verdict(False, n, f"the head file {self.head_path.name} is missing, and it is written with "
                                         f"every record (record {n} is the last)", n)
        else:
            seq, digest = head
            if seq > n:
                return Verdict(False, n, f"record {n + 1} is missing: the log ended at record {seq} "
                                         "(records were cut off the end)", n + 1)
            if seq < n:
                return Verdict(False, n, f"record {seq + 1} was added behind the head file's back: the head "
                                         f"says the log ends at record {seq}", seq + 1)
            if digest != last:
                return Verdict(False, n, f"record {seq} was replaced (it differs from the last one written)", seq)
        return Verdict(True, n, f"audit log intact: {n} record(s), chain verified")

    def _head(self) -> tuple[int, str] | None:
        """The head file's record number and hash; None when there is none.

        Raises:
            AuditError: the file exists but cannot be read or does not hold a head.
        """
        try:
            text = self.head_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise AuditError(f"the head file {self.head_path.name} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
        match = HEAD_TEXT.fullmatch(text)
        if match is None:
            raise AuditError(f"the head file {self.head_path.name} does not hold a record number and hash "
                             "(it was overwritten)")
        return int(match.group(1)), match.group(2)


def chain_break(rows: Sequence[AuditRecord]) -> tuple[int, str] | None:
    """The first record (and why) where ``rows``, in order, stop being an unbroken chain from 1."""
    prev_hash, expected = GENESIS, 1
    for r in rows:
        if r.seq != expected:
            return expected, f"record {expected} is missing (deleted) before record {r.seq}"
        if r.prev_hash != prev_hash:
            return r.seq, f"record {r.seq} does not follow record {r.seq - 1} (a record was deleted, inserted or moved)"
        digest = record_hash(r.seq, r.ts, r.actor, r.role, r.action, r.target, r.params, r.result, r.prev_hash)
        if digest != r.hash:
            return r.seq, f"record {r.seq} was edited or moved (its hash does not match)"
        prev_hash, expected = r.hash, expected + 1
    return None


def to_csv(records: Sequence[AuditRecord]) -> str:
    """The records as CSV; a cell that would start a spreadsheet formula is written as text."""
    out = io.StringIO()
    write_rows(out, [FIELDS, *([getattr(r, f) for f in FIELDS] for r in records)])
    return out.getvalue()


def to_json(records: Sequence[AuditRecord]) -> str:
    return json.dumps({"schema": "gpuconsole.audit/1", "records": [r.as_dict() for r in records]}, indent=2) + "\n"


def result_text(ok: bool, message: str) -> str:
    """``ok``, ``denied: reason`` or ``failed: reason`` from an action's result message."""
    if ok:
        return "ok"
    if message.startswith("denied: "):
        return message
    for prefix in ("failed: ", "refused: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            break
    return f"failed: {message}"
