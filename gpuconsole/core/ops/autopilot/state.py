"""What the autopilot remembers across restarts: cooldowns, failures, pauses, added rules.

A small SQLite file of its own beside the cache database (``autopilot.db``), so a restarted
service never launches again inside a cooldown, and a rule paused after three failures stays
paused until someone resumes it. Deleting the file forgets cooldowns, nothing else: the cloud
stays the source of truth for what runs, and ``max`` is counted from the cloud every time.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconsole.core.paths import private_file

SCHEMA = """
create table if not exists rule_state (
    rule text primary key, last_action_at real, last_decision text default '', failures integer default 0,
    paused integer default 0, paused_reason text default '');
create table if not exists spot_recoveries (
    instance_id text primary key, rule text, failures integer default 0, done integer default 0);
create table if not exists rules (name text primary key, body text not null);
"""

FAILURES_TO_PAUSE = 3


@dataclass(frozen=True, slots=True)
class RuleState:
    """One rule's memory."""

    rule: str
    last_action_at: float | None = None
    last_decision: str = ""
    failures: int = 0
    paused: bool = False
    paused_reason: str = ""


class AutopilotState:
    """The autopilot's SQLite state (``:memory:`` for a plan that writes nothing)."""

    def __init__(self, path: Path | str = ":memory:") -> None:
        self.path = path
        self._lock = threading.Lock()
        self._cache: dict[str, RuleState] = {}  # the leader is the only writer: read once, kept current
        if str(path) != ":memory:":
            private_file(Path(path))  # 0600 before SQLite writes a byte (its -wal follows it)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
        with self._db:
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------ rules
    def get(self, rule: str) -> RuleState:
        cached = self._cache.get(rule)
        if cached is not None:
            return cached
        with self._lock:
            row = self._db.execute("select last_action_at, last_decision, failures, paused, paused_reason "
                                   "from rule_state where rule = ?", (rule,)).fetchone()
        found = RuleState(rule) if row is None else RuleState(rule, row[0], row[1] or "", row[2] or 0, bool(row[3]), row[4] or "")
        self._cache[rule] = found
        return found

    def forget(self) -> None:
        """Read every rule's state from the file again (another process may have paused one)."""
        self._cache.clear()

    def _upsert(self, rule: str, **values: Any) -> None:
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        updates = ", ".join(f"{k} = excluded.{k}" for k in values)
        self._cache.pop(rule, None)
        with self._lock, self._db:
            self._db.execute(f"insert into rule_state (rule, {cols}) values (?, {marks}) "  # noqa: S608 - fixed names
                             f"on conflict(rule) do update set {updates}", (rule, *values.values()))

    def acted(self, rule: str, at: float, decision: str) -> None:
        """A successful action: the cooldown starts, the failure count is cleared."""
        self._upsert(rule, last_action_at=at, last_decision=decision, failures=0)

    def adopt(self, shared: dict[str, float]) -> None:
        """Take the last actions other replicas recorded (the Lease's), where they are later than
        this database's: a cooldown started by another replica holds here too."""
        for rule, at in shared.items():
            last = self.get(rule).last_action_at
            if last is None or at > last:
                self._upsert(rule, last_action_at=at, last_decision="acted (recorded by another replica)")

    def failed(self, rule: str, decision: str) -> bool:
        """A failed action; True when this failure paused the rule (the third in a row)."""
        failures = self.get(rule).failures + 1
        pause = failures >= FAILURES_TO_PAUSE
        values: dict[str, Any] = {"last_decision": decision, "failures": failures}
        if pause:
            values.update(paused=1, paused_reason=f"paused after {failures} failures in a row: {decision}")
        self._upsert(rule, **values)
        return pause

    def set_paused(self, rule: str, paused: bool, reason: str = "") -> None:
        self._upsert(rule, paused=int(paused), paused_reason=reason if paused else "", failures=0)

    # ------------------------------------------------------------------ spot recoveries
    def recovery(self, instance_id: str) -> tuple[int, bool]:
        """How many relaunches of ``instance_id`` failed, and whether it was relaunched."""
        with self._lock:
            row = self._db.execute("select failures, done from spot_recoveries where instance_id = ?",
                                   (instance_id,)).fetchone()
        return (0, False) if row is None else (int(row[0]), bool(row[1]))

    def recovery_result(self, instance_id: str, rule: str, ok: bool) -> None:
        failures, _ = self.recovery(instance_id)
        with self._lock, self._db:
            self._db.execute("insert or replace into spot_recoveries values (?, ?, ?, ?)",
                             (instance_id, rule, failures + (0 if ok else 1), int(ok)))

    # ------------------------------------------------------------------ rules kept in the database
    def added_rules(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("select body from rules order by name").fetchall()
        return [json.loads(r[0]) for r in rows]

    def add_rule(self, name: str, table: dict[str, Any]) -> None:
        with self._lock, self._db:
            self._db.execute("insert into rules values (?, ?)", (name, json.dumps(table, sort_keys=True)))

    def remove_rule(self, name: str) -> bool:
        with self._lock, self._db:
            return self._db.execute("delete from rules where name = ?", (name,)).rowcount > 0
