"""The audit sink: every record also goes to CloudWatch Logs (moto's, through the fault proxy) and
the system log; ``audit verify`` holds the local chain against the remote copy; what cannot be
sent waits in a 0600 queue and arrives later."""

from __future__ import annotations

import json
import time
import os
import socket
import sqlite3
import stat
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access import audit_sink
from gpuconsole.core.access.audit import AuditError, AuditLog, record_hash
from gpuconsole.core.access.guard import default_guard
from tests.aws_peer import aws_peer, fault_proxy, free_port, moto_server  # noqa: F401 - fixtures

GROUP = "/gpuconsole/audit"


def write_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(path))
    return path


@pytest.fixture(autouse=True)
def _sinks_closed(monkeypatch):
    """Each test's sinks send what they queued while its peer and settings are still there, and
    nothing at the end of the run (the peer is gone by then)."""
    yield
    audit_sink.close_all()


@pytest.fixture
def anchored(tmp_path, monkeypatch, aws_peer):  # noqa: F811 - the fixture imported above
    """A login's audit log whose records also go to moto's CloudWatch Logs."""
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "state" / "audit.db"))
    write_config(tmp_path, monkeypatch, copy_table(aws_peer))
    return default_guard().audit


def copy_table(aws_peer, extra: str = "", endpoint: str | None = None) -> str:  # noqa: F811
    """The [audit] table of a copy in moto's CloudWatch Logs, its endpoint pinned there."""
    return (f'[audit]\ncloudwatch_log_group = "{GROUP}"\nregion = "us-east-1"\n'
            f'endpoint_url = "{endpoint or aws_peer.endpoint}"\n{extra}')


def act(audit: AuditLog, n: int, actor: str = "ada") -> None:
    for i in range(n):
        audit.append(actor, "admin", "stop", f"i-{i}", (("region", "us-east-1"),), "ok")


def remote_messages_at(aws_peer) -> list[dict]:  # noqa: F811
    """The copy's messages, read at the peer itself whatever the environment says."""
    import boto3

    logs = boto3.client("logs", region_name="us-east-1", endpoint_url=aws_peer.endpoint)
    return [json.loads(e["message"]) for e in logs.filter_log_events(logGroupName=GROUP)["events"]]


def remote_messages(aws_peer) -> list[dict]:  # noqa: F811
    logs = aws_peer.client("logs")
    try:
        events = logs.filter_log_events(logGroupName=GROUP)["events"]
    except logs.exceptions.ResourceNotFoundException:
        return []  # nothing was ever sent
    return [json.loads(e["message"]) for e in events]


def tamper(audit: AuditLog, *sql: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(audit.path)
    conn.execute("DROP TRIGGER IF EXISTS records_no_update")
    conn.execute("DROP TRIGGER IF EXISTS records_no_delete")
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()


def verify_cli(capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["audit", "verify"])
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------- CloudWatch Logs


def test_every_record_goes_to_one_stream_per_host_and_login_with_its_chain_hash(anchored, aws_peer) -> None:  # noqa: F811
    act(anchored, 3)
    sent = remote_messages(aws_peer)
    local = anchored.records()
    assert [m["record"]["hash"] for m in sent] == [r.hash for r in local]
    assert {(m["host"], m["login"]) for m in sent} == {(socket.gethostname(), audit_sink.login_name())}
    streams = aws_peer.client("logs").describe_log_streams(logGroupName=GROUP)["logStreams"]
    assert [s["logStreamName"] for s in streams] == [f"{socket.gethostname()}/{audit_sink.login_name()}"]
    assert sent[1]["record"]["prev_hash"] == local[0].hash and sent[0]["record"]["params"] == local[0].params
    assert "PutLogEvents" in aws_peer.proxy.actions()


def test_verify_holds_the_local_chain_against_the_remote_copy(anchored, capsys) -> None:
    act(anchored, 3)
    rc, out, _ = verify_cli(capsys)
    assert rc == 0 and "3 record(s), chain verified against the remote copy" in out


def test_a_deleted_database_and_head_fail_verify(anchored, capsys) -> None:
    act(anchored, 3)
    anchored.path.unlink()
    anchored.head_path.unlink()
    assert AuditLog(anchored.path).verify().ok  # the local check alone cannot tell: nothing is left
    rc, _, err = verify_cli(capsys)
    assert rc == 1
    assert err.startswith("gpuconsole: audit log TAMPERED: record 1 is missing from the local log") and err.count("\n") == 1


def test_a_fully_recomputed_chain_fails_verify(anchored, capsys) -> None:
    act(anchored, 4)
    rows = anchored.records()
    prev = rows[0].hash
    statements = []
    for r in rows[1:]:  # edit record 2, then rewrite every hash after it, and the head
        actor = "mallory" if r.seq == 2 else r.actor
        digest = record_hash(r.seq, r.ts, actor, r.role, r.action, r.target, r.params, r.result, prev)
        statements.append(f"UPDATE records SET actor = '{actor}', prev_hash = '{prev}', hash = '{digest}' WHERE seq = {r.seq}")
        prev = digest
    tamper(anchored, *statements)
    anchored.head_path.write_text(f"4 {prev}\n")
    assert AuditLog(anchored.path).verify().ok  # the attack beats the local chain and head
    rc, _, err = verify_cli(capsys)
    assert rc == 1
    assert "record 2 differs from the remote copy" in err and "(actor, hash)" in err


def test_a_truncated_tail_fails_verify_even_with_the_head_rewritten(anchored, capsys) -> None:
    act(anchored, 5)
    third = anchored.records()[2]
    tamper(anchored, "DELETE FROM records WHERE seq > 3")
    anchored.head_path.write_text(f"3 {third.hash}\n")
    rc, _, err = verify_cli(capsys)
    assert rc == 1 and "record 4 is missing from the local log" in err


def test_a_record_never_sent_is_extra(anchored, capsys) -> None:
    act(anchored, 2)
    anchored.sinks.clear()  # written by something that skips the sink
    act(anchored, 1)
    rc, _, err = verify_cli(capsys)
    assert rc == 1 and "record 3 is extra in the local log" in err


@pytest.mark.parametrize("stream", ["", 'stream = "elsewhere"\n'])
def test_a_log_begun_again_is_not_vouched_for_by_a_copy_of_another_chain(anchored, aws_peer, tmp_path, monkeypatch,  # noqa: F811
                                                                         capsys, stream) -> None:
    """The copy must be a prefix of the local chain and of no other: a login that deletes its log,
    head and queue and begins again (in the same stream, or under a stream name of its own
    choosing) sends a second chain as the same login and host, and verify says so."""
    act(anchored, 3, actor="bob")
    sink = audit_sink.anchor(anchored)
    for path in (anchored.path, anchored.head_path, sink.queue_path):
        path.unlink()
    write_config(tmp_path, monkeypatch, copy_table(aws_peer, stream))
    again = default_guard().audit
    act(again, 1, actor="bob")
    assert again.verify().ok  # the new chain holds on its own
    if stream:
        assert sorted(r.record.seq for r in audit_sink.anchor(again).remote()) == [1, 1, 2, 3]  # each stream of its own
    rc, _, err = verify_cli(capsys)
    assert rc == 1 and err.count("\n") == 1
    assert "record 1 is in the remote copy twice, with different contents" in err
    assert f"the copy holds another chain sent as {audit_sink.login_name()}@{socket.gethostname()}" in err


def test_with_the_sink_down_records_queue_0600_and_arrive_later(anchored, aws_peer, capsys) -> None:  # noqa: F811
    aws_peer.proxy.fail("PutLogEvents", "ServiceUnavailableException", "down for the test", status=503)
    act(anchored, 2)
    sink = audit_sink.anchor(anchored)
    queue = sink.queue_path
    assert stat.S_IMODE(queue.stat().st_mode) == 0o600
    assert [json.loads(line)["record"]["seq"] for line in queue.read_text().splitlines()] == [1, 2]
    assert remote_messages(aws_peer) == []
    assert "down for the test" in sink.last_error
    rc, out, _ = verify_cli(capsys)  # the copy is readable: the two are named as waiting
    assert rc == 0 and "2 not yet sent (queued)" in out
    aws_peer.proxy.reset()
    act(anchored, 1)  # the next record takes the queue along, in order, in one call
    assert [m["record"]["seq"] for m in remote_messages(aws_peer)] == [1, 2, 3]
    assert {len(r.params["logEvents"]) for r in aws_peer.proxy.sent("PutLogEvents")} == {3}  # (the group is made between)
    assert queue.read_text() == ""
    rc, out, _ = verify_cli(capsys)
    assert rc == 0 and "queued" not in out


def test_the_environment_cannot_send_the_copy_elsewhere_and_verify_names_where_it_read(anchored, aws_peer, tmp_path, monkeypatch, capsys) -> None:  # noqa: F811
    """A login's AWS_ENDPOINT_URL_CLOUDWATCH_LOGS (or AWS_ENDPOINT_URL, or a profile's
    endpoint_url) pointing at a server of its own changes nothing: the endpoint is pinned."""
    elsewhere = f"http://127.0.0.1:{free_port()}"
    for variable in ("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"):
        monkeypatch.setenv(variable, elsewhere)
    own_config = tmp_path / "aws-config"
    own_config.write_text(f"[default]\nendpoint_url = {elsewhere}\nservices = mine\n\n"
                          f"[services mine]\nlogs =\n  endpoint_url = {elsewhere}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(own_config))
    audit = default_guard().audit
    act(audit, 2)
    assert [m["record"]["seq"] for m in remote_messages_at(aws_peer)] == [1, 2]
    rc, out, _ = verify_cli(capsys)
    assert rc == 0 and f"({'us-east-1'}, {aws_peer.endpoint})" in out and "read as AWS account 123456789012" in out


def test_a_record_queued_longer_than_max_lag_fails_verify(anchored, aws_peer, tmp_path, monkeypatch, capsys) -> None:  # noqa: F811
    """A login that cuts the copy off, acts, then deletes the records from its log and queue
    leaves no trace; so a record may wait only ``[audit] max_lag`` (15 min) before verify fails."""
    aws_peer.proxy.fail("PutLogEvents", "ServiceUnavailableException", "cut off", status=503)
    anchored.append("dave", "developer", "terminate", "i-0123456789abcdef0", (), "ok", at=time.time() - 20 * 60)
    anchored.append("dave", "developer", "stop", "i-0123456789abcdef0", (), "ok")
    rc, _, err = verify_cli(capsys)
    assert rc == 1 and "record 1 has waited 20 min for the remote copy" in err and "max_lag, 15 min" in err
    write_config(tmp_path, monkeypatch, copy_table(aws_peer, "max_lag = 30\n"))
    rc, out, _ = verify_cli(capsys)
    assert rc == 0 and "2 not yet sent (queued)" in out


def test_queued_records_deleted_from_the_queue_fail_verify(anchored, aws_peer, capsys) -> None:  # noqa: F811
    """dave cuts the copy off, acts, then empties his queue file: the records the copy never got
    and nothing still queues are found."""
    act(anchored, 1)
    aws_peer.proxy.fail("PutLogEvents", "ServiceUnavailableException", "cut off", status=503)
    anchored.append("dave", "developer", "terminate", "i-0123456789abcdef0", (), "ok")
    queue = audit_sink.anchor(anchored).queue_path
    assert len(queue.read_text().splitlines()) == 1
    queue.write_text("")
    aws_peer.proxy.reset()
    rc, _, err = verify_cli(capsys)
    assert rc == 1 and "record 2 is extra in the local log: the remote copy" in err and "never received it" in err


def test_with_the_server_stopped_records_queue_and_go_at_verify(anchored, aws_peer, tmp_path, monkeypatch, capsys) -> None:  # noqa: F811
    write_config(tmp_path, monkeypatch, copy_table(aws_peer, endpoint=f"http://127.0.0.1:{free_port()}"))  # nothing listens
    down = default_guard().audit
    act(down, 2)
    assert len(audit_sink.anchor(down).queued()) == 2
    rc, _, err = verify_cli(capsys)
    assert rc == 3 and "cannot be verified: cannot read the remote copy" in err and err.count("\n") == 1
    assert "TAMPERED" not in err
    write_config(tmp_path, monkeypatch, copy_table(aws_peer))
    rc, out, _ = verify_cli(capsys)  # verify sends the queue first
    assert rc == 0 and "2 record(s), chain verified against the remote copy" in out
    assert [m["record"]["seq"] for m in remote_messages(aws_peer)] == [1, 2]


def test_records_written_before_the_sink_was_set_go_with_the_first_one(tmp_path, monkeypatch, aws_peer, capsys) -> None:  # noqa: F811
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "state" / "audit.db"))
    act(default_guard().audit, 2)
    write_config(tmp_path, monkeypatch, copy_table(aws_peer))
    audit = default_guard().audit
    act(audit, 1)
    assert [m["record"]["seq"] for m in remote_messages(aws_peer)] == [1, 2, 3]
    rc, _, _ = verify_cli(capsys)
    assert rc == 0


def test_without_credentials_nothing_is_called_and_records_queue(anchored, aws_peer, monkeypatch, capsys) -> None:  # noqa: F811
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    audit = default_guard().audit
    act(audit, 1)
    assert aws_peer.proxy.actions("logs") == []
    assert len(audit_sink.anchor(audit).queued()) == 1
    rc, _, err = verify_cli(capsys)
    assert rc == 3 and "cannot be verified" in err and "no AWS credentials" in err  # a copy not read proves nothing


def test_a_record_that_can_be_neither_sent_nor_queued_fails_the_append(anchored, aws_peer) -> None:  # noqa: F811
    aws_peer.proxy.fail("PutLogEvents", "ServiceUnavailableException", status=503)
    queue = audit_sink.anchor(anchored).queue_path
    queue.parent.mkdir(parents=True, exist_ok=True)
    queue.mkdir()  # the queue cannot be written
    with pytest.raises(AuditError, match="reached neither"):
        act(anchored, 1)


# --------------------------------------------------------------------------- the shared log


def test_auditors_read_every_logins_records_in_the_shared_copy(anchored, tmp_path, capsys) -> None:
    settings = audit_sink.settings_from_config()
    other = audit_sink.attach(AuditLog(tmp_path / "priya" / "audit.db"), settings, login="priya")
    other.append("priya", "developer", "delete-job", "team-nlp/sweep", (), "ok")
    act(anchored, 1, actor="ada")
    capsys.readouterr()
    assert main(["audit", "list"]) == 0
    out = capsys.readouterr().out
    assert "team-nlp/sweep" in out and "i-0" in out  # another login's record, read from the copy
    assert main(["audit", "list", "--local"]) == 0
    assert "team-nlp/sweep" not in capsys.readouterr().out
    rc, out, _ = verify_cli(capsys)  # each login's chain is its own: priya's does not disturb ada's
    assert rc == 0


def test_a_log_owned_by_another_login_is_refused(tmp_path) -> None:
    audit = AuditLog(tmp_path / "shared" / "audit.db")
    act(audit, 1)
    os.chown(audit.path, 4242, 4242)
    with pytest.raises(AuditError, match="belongs to another login"):
        AuditLog(audit.path).check_writable()


# --------------------------------------------------------------------------- the system log


def test_records_go_to_the_system_log_and_queue_while_it_is_away(tmp_path, monkeypatch) -> None:
    where = tmp_path / "log.sock"
    write_config(tmp_path, monkeypatch, f'[audit]\nsyslog = true\nsyslog_socket = "{where}"\n')
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "state" / "audit.db"))
    audit = default_guard().audit
    act(audit, 1)  # no system log listens yet
    (sink,) = audit.sinks
    assert len(sink.queued()) == 1 and stat.S_IMODE(sink.queue_path.stat().st_mode) == 0o600
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(where))
        server.settimeout(10)
        act(audit, 1)
        got = [server.recv(65536).decode() for _ in range(2)]
    assert all(g.startswith("<86>gpuconsole-audit: ") for g in got)  # authpriv.info
    seqs = [json.loads(g.split(": ", 1)[1].rstrip("\x00"))["record"]["seq"] for g in got]
    assert seqs == [1, 2] and sink.queued() == []


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize("body, message", [
    ('[audit]\ncloudwatch_log_group = "g"\n', "[audit] key region"),
    ('[audit]\nsyslog = "yes"\n', "[audit] key syslog: expected true or false"),
    ('[audit]\nbucket = "x"\n', "[audit] key bucket: unknown key"),
])
def test_a_wrong_audit_table_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, body, message) -> None:
    write_config(tmp_path, monkeypatch, body)
    assert main(["audit", "verify"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_wrong_audit_table_lets_no_action_run_unanchored(tmp_path, monkeypatch) -> None:
    write_config(tmp_path, monkeypatch, '[audit]\ncloudwatch_log_group = "g"\n')
    with pytest.raises(AuditError, match="the audit sink cannot be used"):
        default_guard().audit.check_writable()


def test_batches_keep_within_what_one_call_accepts() -> None:
    from gpuconsole.backends.aws.audit_logs import MAX_BATCH_BYTES, MAX_BATCH_EVENTS, batches

    many = [f"m{i}" for i in range(MAX_BATCH_EVENTS * 2 + 5)]
    cut = list(batches(many))
    assert [len(b) for b in cut] == [MAX_BATCH_EVENTS, MAX_BATCH_EVENTS, 5]
    assert [m for b in cut for m in b] == many
    big = ["x" * 300_000] * 7
    assert all(sum(len(m) + 26 for m in b) <= MAX_BATCH_BYTES for b in batches(big))
    assert sum(len(b) for b in batches(big)) == 7


def test_the_console_copies_its_records_to_the_sinks_of_its_config_file(tmp_path) -> None:
    from gpuconsole.core.fleet.console import Console, ConsoleOptions

    config = tmp_path / "site.toml"
    config.write_text(f'[audit]\nsyslog = true\nsyslog_socket = "{tmp_path / "log.sock"}"\n')
    console = Console(ConsoleOptions(config_path=config))
    try:
        (sink,) = console.services.guard.audit.sinks
        assert str(tmp_path / "log.sock") in sink.name
    finally:
        console.close()


def test_a_record_queued_while_another_process_sends_waits_for_the_next_send(anchored, aws_peer) -> None:  # noqa: F811
    import fcntl

    act(anchored, 1)
    sink = audit_sink.anchor(anchored)
    with open(sink.lock_path, "a") as other:  # another process is sending this queue
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        act(anchored, 1)  # the action does not wait for it
        assert [json.loads(m)["record"]["seq"] for m in sink.queued()] == [2]
    assert sink.flush() == 0
    assert [m["record"]["seq"] for m in remote_messages(aws_peer)] == [1, 2]


def test_a_failed_call_is_retried_before_anything_is_queued(anchored, aws_peer) -> None:  # noqa: F811
    act(anchored, 1)  # the group and stream exist from here on
    aws_peer.proxy.reset()
    aws_peer.proxy.fail("PutLogEvents", "ServiceUnavailableException", status=503, times=1)
    act(anchored, 1)
    assert len(aws_peer.proxy.sent("PutLogEvents")) == 2  # refused once, then taken
    assert audit_sink.anchor(anchored).queued() == []
    assert [m["record"]["seq"] for m in remote_messages(aws_peer)] == [1, 2]


def test_an_action_of_a_command_reaches_the_copy(anchored, aws_peer, tmp_path, capsys) -> None:  # noqa: F811
    assert main(["budget", "add", "sprint", "--amount", "100", "--db", str(tmp_path / "cache.db")]) == 0
    sent = [m["record"] for m in remote_messages(aws_peer)]
    # The intent goes first, then the outcome: both reach the copy.
    assert [(r["action"], r["target"], r["result"]) for r in sent] == [
        ("budget-add", "sprint", "started"), ("budget-add", "sprint", "ok")]
    assert sent[-1]["hash"] == anchored.records()[-1].hash


def test_records_forged_in_the_shared_copy_are_shown_as_such(anchored, aws_peer, tmp_path, capsys) -> None:  # noqa: F811
    """bob's own keys write into his own stream of the shared copy directly with boto3 (IAM lets
    him write no other): a record 2 of priya's chain, a record in priya's name under his own login,
    two versions of his own record 1; carol's and dave's streams hold a chain with a record missing
    and one that does not link. The auditor's view flags each, never shows it as genuine, and
    priya's genuine records and her own verify stay untouched."""
    from gpuconsole.core.access.audit import GENESIS, record_hash
    from gpuconsole.model import AuditRecord

    settings = audit_sink.settings_from_config()
    priya = audit_sink.attach(AuditLog(tmp_path / "priya" / "audit.db"), settings, login="priya", host="bastion")
    priya.append("priya", "developer", "stop", "i-0aaaaaaaaaaaaaaaa", (), "ok")
    genuine = priya.append("priya", "developer", "stop", "i-0bbbbbbbbbbbbbbbb", (), "ok")

    def made(seq: int, actor: str, target: str, prev: str) -> AuditRecord:
        ts, params = "2026-12-01T10:00:00.000Z", "{}"
        digest = record_hash(seq, ts, actor, "admin", "terminate", target, params, "ok", prev)
        return AuditRecord(seq, ts, actor, "admin", "terminate", target, params, "ok", prev, digest)

    streams = {
        "bastion/bob": [
            audit_sink.encode(made(2, "priya", "i-0ffffffffffffffff", genuine.prev_hash), "bastion", "priya"),
            audit_sink.encode(made(1, "priya", "i-0eeeeeeeeeeeeeeee", GENESIS), "bastion", "bob"),
            audit_sink.encode(made(1, "bob", "i-0b2", GENESIS), "bastion", "bob"),
        ],
        "bastion/carol": [audit_sink.encode(made(1, "carol", "i-01", GENESIS), "bastion", "carol"),
                          audit_sink.encode(made(3, "carol", "i-03", "f" * 64), "bastion", "carol")],
        "bastion/dave": [audit_sink.encode(made(1, "dave", "i-0d1", GENESIS), "bastion", "dave"),
                         audit_sink.encode(made(2, "dave", "i-0d2", "f" * 64), "bastion", "dave")],  # not linked
    }
    logs = aws_peer.client("logs")
    for stream, messages in streams.items():
        logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
        logs.put_log_events(logGroupName=GROUP, logStreamName=stream,
                            logEvents=[{"timestamp": int(time.time() * 1000), "message": m} for m in messages])
    capsys.readouterr()
    assert main(["audit", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    records = json.loads(out)["records"]
    by_target = {r["target"]: r["result"] for r in records}
    assert by_target["i-0aaaaaaaaaaaaaaaa"] == by_target["i-0bbbbbbbbbbbbbbbb"] == "ok"  # priya's own, genuine
    assert by_target["i-0ffffffffffffffff"].startswith("untrusted (identity mismatch)")
    assert by_target["i-0eeeeeeeeeeeeeeee"].startswith("untrusted (")  # bob's own record 1, in two versions
    assert by_target["i-0b2"].startswith("untrusted (fork)")
    assert by_target["i-0d1"] == "ok" and by_target["i-0d2"].startswith("untrusted (break)")
    assert not any(r["result"] == "ok" and r["actor"] == "priya" and r["target"].startswith("i-0f") for r in records)
    assert "identity mismatch: record 2 of priya@bastion is in the stream bastion/bob, which only bob writes" in err
    assert "fork: record 1 of bob@bastion was sent 2 times with different contents" in err
    assert "gap: records 2–2 of carol@bastion are missing from the copy" in err
    mine = audit_sink.anchor(priya)
    assert [r.record.seq for r in mine.remote()] == [1, 2]  # priya's verify reads her own stream alone
