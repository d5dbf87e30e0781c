"""The audit log: every change and every refused attempt, append-only and hash-chained.

Its own SQLite file (``audit.db`` in the state directory, 0600), never the cache: the cache can
be deleted and rebuilt, the audit log is never rebuilt or pruned. Each record carries the
SHA-256 of the record before it, and its own hash covers its sequence number and every field,
so :meth:`AuditLog.verify` finds the first record that was edited, deleted or moved. Triggers
refuse UPDATE and DELETE through SQLite; a head file beside the database holds the last
sequence number and hash, so cutting records off the end is found too.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpuconsole.core.paths import private_dir, private_file, write_private
from gpuconsole.model import AuditFilter, AuditRecord

GENESIS = "0" * 64
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
    ok: bool
    records: int
    message: str
    bad_seq: int | None = None


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

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self._ready:
                private_dir(self.path.parent)
                private_file(self.path)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            if not self._ready:
                conn.executescript(SCHEMA)
                self._ready = True
        except (OSError, sqlite3.Error) as exc:
            raise AuditError(f"cannot open the audit log {self.path}: {exc}") from exc
        return conn

    def check_writable(self) -> None:
        """Raise :class:`AuditError` unless records can be appended (actions fail closed)."""
        self._connect().close()

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
        return AuditRecord(seq, ts, actor, role, action, target, text, result, prev, digest)

    def records(self, flt: AuditFilter | None = None, limit: int | None = None, *,
                action: str | None = None) -> list[AuditRecord]:
        """Records in chain order (oldest first), filtered; with ``limit`` the newest that many;
        with ``action`` only that action's (selected by SQLite)."""
        if not self.path.exists():
            return []
        conn = self._connect()
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
        """Walk the chain; the verdict names the first record edited, deleted or moved."""
        try:
            rows = self.records()
        except AuditError as exc:
            return Verdict(False, 0, str(exc))
        prev_hash, expected = GENESIS, 1
        for r in rows:
            if r.seq != expected:
                return Verdict(False, len(rows), f"record {expected} is missing (deleted) before record {r.seq}", expected)
            if r.prev_hash != prev_hash:
                return Verdict(False, len(rows), f"record {r.seq} does not follow record {r.seq - 1} "
                                                 "(a record was deleted, inserted or moved)", r.seq)
            digest = record_hash(r.seq, r.ts, r.actor, r.role, r.action, r.target, r.params, r.result, r.prev_hash)
            if digest != r.hash:
                return Verdict(False, len(rows), f"record {r.seq} was edited or moved (its hash does not match)", r.seq)
            prev_hash, expected = r.hash, expected + 1
        head = self._head()
        if head is not None:
            seq, digest = head
            if seq > len(rows):
                return Verdict(False, len(rows), f"record {len(rows) + 1} is missing: the log ended at record {seq} "
                                                 "(records were cut off the end)", len(rows) + 1)
            if seq == len(rows) and digest != prev_hash:
                return Verdict(False, len(rows), f"record {seq} was replaced (it differs from the last one written)", seq)
        return Verdict(True, len(rows), f"audit log intact: {len(rows)} record(s), chain verified")

    def _head(self) -> tuple[int, str] | None:
        try:
            seq, digest = self.head_path.read_text(encoding="utf-8").split()
            return int(seq), digest
        except (OSError, ValueError):
            return None



def to_csv(records: Sequence[AuditRecord]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    for r in records:
        writer.writerow([getattr(r, f) for f in FIELDS])
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
