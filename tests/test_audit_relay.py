"""The audit relay: every login's records reach one root-owned chain, under the login the kernel
names for the socket's peer (``SO_PEERCRED``), never the one the record claims; a login may not
read it unless the site makes it an admin or auditor; with a relay named, an action whose record
cannot reach it does not run. Other logins are real ones (``setpriv``), talking to the socket
directly, as an attacker would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access import audit_sink
from gpuconsole.core.access.access import UsersTable
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.audit_relay import AuditRelay, RelaySink, ask
from gpuconsole.core.access.guard import Guard
from gpuconsole.core.access.mfa import MfaStore
from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionLog, ActionRequest, run_action
from tests.access_world import INSTANCE
from tests.aws_peer import aws_peer, fault_proxy, moto_server  # noqa: F401 - fixtures
from tests.nonroot import NOBODY, nobody_home, nobody_runner, run_as_nobody

FORGED = {"op": "append", "actor": "alice", "role": "admin", "action": "terminate", "target": INSTANCE,
          "params": {"region": "us-east-1"}, "result": "ok"}


@pytest.fixture
def relay(tmp_path):
    """A relay on a socket every login may reach; its chain in root's private folder."""
    where = Path(tempfile.mkdtemp(prefix="gpuconsole-relay-"))
    os.chmod(where, 0o755)
    socket_path = where / "audit.sock"
    log = AuditLog(tmp_path / "relay" / "audit-relay.db")
    server = AuditRelay(log, may_read=lambda uid: uid == 0, role_of=lambda login: None)
    ready = threading.Event()
    thread = threading.Thread(target=server.serve, args=(socket_path,), kwargs={"ready": ready}, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield socket_path, log
    server.stop()
    thread.join(5)
    shutil.rmtree(where, ignore_errors=True)


def as_nobody(socket_path: Path, message: dict) -> dict:
    """``message`` sent to the relay by the real ``nobody`` login, through a raw socket."""
    switch, python = nobody_runner()
    code = ("import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b'\\n')\n"
            "print(s.makefile().readline(), end='')\n")
    done = subprocess.run([*switch, python, "-c", code, str(socket_path), json.dumps(message)],
                          capture_output=True, text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_record_carries_the_login_the_kernel_names_not_the_one_it_claims(relay) -> None:
    socket_path, log = relay
    assert as_nobody(socket_path, FORGED)["ok"]
    [record] = log.records()
    assert record.actor == "nobody" and record.action == "terminate"
    assert json.loads(record.params) == {"claimed_actor": "alice", "region": "us-east-1"}
    assert log.verify().ok


def test_a_login_that_is_neither_admin_nor_auditor_reads_nothing(relay) -> None:
    socket_path, _log = relay
    for op in ("records", "verify"):
        answer = as_nobody(socket_path, {"op": op})
        assert not answer["ok"] and "nobody may not read the relay's audit log" in answer["error"]
    assert ask(socket_path, {"op": "records"})["ok"]  # root may


def test_with_a_relay_named_nothing_runs_unless_its_record_reaches_the_relay(relay, tmp_path) -> None:
    socket_path, log = relay
    local = AuditLog(tmp_path / "mine" / "audit.db")
    local.sinks.append(RelaySink(socket_path))
    guard = Guard(UsersTable(tmp_path / "users.json"), MfaStore(tmp_path / "mfa.json"), local, user="ada")
    ran: list[str] = []
    run_action(ActionRequest(ActionKind.START, INSTANCE), lambda: ran.append("started") or "started", ActionLog(guard=guard))
    assert ran == ["started"]
    assert [(r.action, r.result) for r in log.records()] == [("start", "started"), ("start", "ok")]
    local.sinks[0] = RelaySink(socket_path.with_name("down.sock"))  # the relay is down
    with pytest.raises(ActionError, match=r"nothing runs unrecorded: the audit relay at .* cannot be reached"):
        run_action(ActionRequest(ActionKind.START, INSTANCE), lambda: ran.append("again") or "started", ActionLog(guard=guard))
    assert ran == ["started"]


def test_the_site_config_names_the_relay_and_the_readers_read_its_chain(relay, tmp_path, monkeypatch, capsys) -> None:
    socket_path, log = relay
    log.append("bob", "developer", "stop", INSTANCE, (), "ok")
    config = tmp_path / "config.toml"
    config.write_text(f'[audit]\nrelay = "{socket_path}"\n')
    settings = audit_sink.settings_from_config(config)
    assert settings.relay == str(socket_path)
    attached = audit_sink.attach(AuditLog(tmp_path / "own" / "audit.db"), settings)
    assert audit_sink.relay_socket(attached) == socket_path
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "own" / "audit.db"))
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(config))
    assert main(["audit", "list", "--json"]) == 0
    assert [r["actor"] for r in json.loads(capsys.readouterr().out)["records"]] == ["bob"]
    assert main(["audit", "verify"]) == 0
    assert "1 record(s)" in capsys.readouterr().out


def test_the_relays_verify_holds_its_chain_against_its_own_copy(tmp_path, aws_peer) -> None:  # noqa: F811
    """The copy must be a prefix of the relay's chain: ``gpuconsole audit relay`` ships its chain to
    the site's CloudWatch copy, and root's own file cut short, its head file rewritten to match,
    passes the local check but not the relay's verify. The site's ``account`` binds the logins'
    own sinks to their IAM users; the relay still ships as the machine's own credentials."""
    from tests.test_audit_sink import GROUP, copy_table, tamper

    where = Path(tempfile.mkdtemp(prefix="gpuconsole-relay-"))
    os.chmod(where, 0o755)
    site = where / "site"
    site.mkdir(mode=0o755)
    (site / "config.toml").write_text(copy_table(aws_peer, 'account = "123456789012"\n'))
    os.chmod(site / "config.toml", 0o644)
    socket_path, db = where / "audit.sock", tmp_path / "relay" / "chain.db"
    server = start_relay(socket_path, db, {**os.environ, "GPUCONSOLE_SITE_DIR": str(site)})
    try:
        for _ in range(3):
            assert ask(socket_path, {**FORGED, "actor": "root"})["ok"]
        answer = ask(socket_path, {"op": "verify"})
        assert answer["ok"] and "3 record(s), chain verified against the remote copy" in answer["message"], answer
        assert GROUP in answer["message"]
        log = AuditLog(db)
        first = log.records()[0]
        tamper(log, "DELETE FROM records WHERE seq > 1")
        log.head_path.write_text(f"1 {first.hash}\n")
        assert log.verify().ok  # the local chain and head alone cannot tell
        answer = ask(socket_path, {"op": "verify"})
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(where, ignore_errors=True)
    assert not answer["ok"] and answer["bad_seq"] == 2
    assert answer["message"].startswith("record 2 is missing from the local log")


def test_the_manifest_names_the_socket_and_the_chain(capsys) -> None:
    assert main(["audit", "relay", "manifest", "--socket", "/run/x/audit.sock"]) == 0
    units = capsys.readouterr().out
    assert "ListenStream=/run/x/audit.sock" in units and "SocketMode=0666" in units
    assert "audit relay --socket /run/x/audit.sock --db /var/lib/gpuconsole/audit-relay.db" in units


def start_relay(socket_path: Path, db: Path, env: dict[str, str]) -> subprocess.Popen:
    """``gpuconsole audit relay`` as root, once its socket answers."""
    if socket_path.exists():
        socket_path.unlink()
    server = subprocess.Popen([sys.executable, "-m", "gpuconsole", "audit", "relay", "--socket", str(socket_path),
                               "--db", str(db)], env=env, stderr=subprocess.PIPE, text=True)
    for _ in range(400):
        if socket_path.exists():
            break
        time.sleep(0.05)
    return server


def test_the_socket_appears_only_once_the_relay_listens_and_every_login_may_use_it(tmp_path, monkeypatch) -> None:
    """A client that finds the socket is answered: the relay binds under a private name, listens,
    opens it to every login and only then moves it into place (a restart over the old socket too)."""
    import socketserver

    where = Path(tempfile.mkdtemp(prefix="gpuconsole-relay-"))
    os.chmod(where, 0o755)
    socket_path = where / "audit.sock"
    seen: list[bool] = []
    activate = socketserver.UnixStreamServer.server_activate

    def watched(server) -> None:
        seen.append(socket_path.exists())
        activate(server)

    monkeypatch.setattr(socketserver.UnixStreamServer, "server_activate", watched)
    try:
        for _ in range(2):
            relay = AuditRelay(AuditLog(tmp_path / "relay.db"), may_read=lambda uid: uid == 0, role_of=lambda login: None)
            ready = threading.Event()
            thread = threading.Thread(target=relay.serve, args=(socket_path,), kwargs={"ready": ready}, daemon=True)
            thread.start()
            assert ready.wait(10)
            assert ask(socket_path, {"op": "ping"}) == {"ok": True}
            assert (os.stat(socket_path).st_mode & 0o777) == 0o666
            relay.stop()
            thread.join(5)
        assert seen == [False, True]  # the restart's socket replaced the stale one, never unlinked it first
        assert sorted(p.name for p in where.iterdir()) == ["audit.sock"]
        (where / "taken").mkdir()
        relay = AuditRelay(AuditLog(tmp_path / "relay.db"), may_read=lambda uid: uid == 0, role_of=lambda login: None)
        with pytest.raises(OSError):  # a folder where the socket goes: the start fails, and says so
            relay.serve(where / "taken")
        assert sorted(p.name for p in where.iterdir()) == ["audit.sock", "taken"]  # no half-made socket left
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_the_relay_command_that_cannot_listen_says_why_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    if os.geteuid() != 0:
        pytest.skip("the relay command runs as root")
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(tmp_path / "no-site"))
    (tmp_path / "taken").mkdir()
    code = main(["audit", "relay", "--socket", str(tmp_path / "taken"), "--db", str(tmp_path / "relay" / "chain.db")])
    err = capsys.readouterr().err
    assert code == 1 and "the audit relay cannot listen on" in err and "Is a directory" in err, err
    assert "Traceback" not in err and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half-made socket


def test_the_relay_command_serves_as_root_and_a_restart_loses_no_record(tmp_path) -> None:
    where = Path(tempfile.mkdtemp(prefix="gpuconsole-relay-"))
    os.chmod(where, 0o755)
    socket_path, db = where / "audit.sock", tmp_path / "relay" / "chain.db"
    env = {**os.environ, "GPUCONSOLE_SITE_DIR": str(tmp_path / "no-site")}
    server = start_relay(socket_path, db, env)
    try:
        assert ask(socket_path, {"op": "ping"}) == {"ok": True}
        assert as_nobody(socket_path, FORGED)["ok"]
        assert [r.actor for r in AuditLog(db).records()] == ["nobody"]
        assert (os.stat(db).st_mode & 0o777) == 0o600 and (os.stat(socket_path).st_mode & 0o777) == 0o666
        server.terminate()
        server.wait(10)
        server = start_relay(socket_path, db, env)  # systemd's Restart=always
        assert as_nobody(socket_path, {**FORGED, "action": "start"})["seq"] == 2
        assert [(r.seq, r.actor, r.action) for r in AuditLog(db).records()] == [(1, "nobody", "terminate"),
                                                                                (2, "nobody", "start")]
        assert ask(socket_path, {"op": "verify"})["ok"]
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def bastion(relay):
    """A root-owned site folder naming the relay and making ``nobody`` an admin, and its home."""
    nobody_runner()  # skips, saying why, where no non-root login can be used
    socket_path, log = relay
    site = Path(tempfile.mkdtemp(prefix="gpuconsole-site-"))
    os.chmod(site, 0o755)
    (site / "users.json").write_text(json.dumps({"users": {"nobody": {"role": "admin"}, "root": {"role": "admin"}}}))
    (site / "config.toml").write_text(f'[audit]\nrelay = "{socket_path}"\n')
    for name in ("users.json", "config.toml"):
        os.chmod(site / name, 0o644)
    home = nobody_home()
    yield site, home, socket_path, log
    shutil.rmtree(site, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


def test_a_real_login_acts_only_while_the_relay_takes_its_records_under_its_own_name(bastion) -> None:
    """nobody's ``budget add`` reaches the relay first, under the name the kernel gives its uid
    whatever its environment claims; with the relay down it does not run, in one line."""
    site, home, socket_path, log = bastion
    env = {"GPUCONSOLE_SITE_DIR": str(site), "GPUCONSOLE_LOGIN": "alice", "LOGNAME": "alice", "USER": "alice"}
    add = ["budget", "add", "sprint", "--amount", "100", "--db", str(home / "cache.db")]
    done = run_as_nobody(add, home, env)
    assert done.returncode == 0, done.stderr
    assert [(r.actor, r.action, r.result) for r in log.records()] == [
        ("nobody", "budget-add", "started"), ("nobody", "budget-add", "ok")]
    os.rename(socket_path, socket_path.with_name("away.sock"))  # the relay is down
    try:
        done = run_as_nobody([*add[:2], "spare", *add[3:]], home, env)
    finally:
        os.rename(socket_path.with_name("away.sock"), socket_path)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the audit relay at" in done.stderr and "cannot be reached" in done.stderr
    assert len(log.records()) == 2  # nothing of the second try ran, nothing was recorded elsewhere
    listed = run_as_nobody(["budget", "list", "--json", "--db", str(home / "cache.db")], home, env)
    assert "spare" not in listed.stdout and "sprint" in listed.stdout
    assert log.verify().ok


def test_a_real_logins_environment_cannot_move_the_relays_copy(tmp_path, aws_peer) -> None:  # noqa: F811
    """nobody points every AWS setting it may change at a server of its own and claims to be
    alice: its ``budget add`` still reaches the relay, and the relay's copy in the site's
    CloudWatch group holds it, under nobody, sent with the relay's own settings; nobody, an
    admin of the site's users table, verifies the relay's chain against that copy."""
    from tests.test_audit_sink import copy_table, remote_messages_at

    nobody_runner()  # skips, saying why, where no non-root login can be used
    where = Path(tempfile.mkdtemp(prefix="gpuconsole-relay-"))
    os.chmod(where, 0o755)
    socket_path = where / "audit.sock"
    site = where / "site"
    site.mkdir(mode=0o755)
    (site / "users.json").write_text(json.dumps({"users": {"nobody": {"role": "admin"}, "root": {"role": "admin"}}}))
    (site / "config.toml").write_text(copy_table(aws_peer, f'relay = "{socket_path}"\n'))
    for name in ("users.json", "config.toml"):
        os.chmod(site / name, 0o644)
    home = nobody_home()
    own = home / "aws-config"
    elsewhere = "http://127.0.0.1:9"
    own.write_text(f"[default]\nendpoint_url = {elsewhere}\nregion = us-west-2\n")
    os.chmod(own, 0o644)
    env = {"GPUCONSOLE_SITE_DIR": str(site), "GPUCONSOLE_LOGIN": "alice", "USER": "alice",
           "AWS_ENDPOINT_URL": elsewhere, "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": elsewhere, "AWS_CONFIG_FILE": str(own),
           "AWS_ACCESS_KEY_ID": "AKIDNOBODY000000", "AWS_SECRET_ACCESS_KEY": "nobody"}
    server = start_relay(socket_path, tmp_path / "relay" / "chain.db",
                         {**os.environ, "GPUCONSOLE_SITE_DIR": str(site)})
    try:
        done = run_as_nobody(["budget", "add", "sprint", "--amount", "100", "--db", str(home / "cache.db")], home, env)
        assert done.returncode == 0, done.stderr
        sent = [m["record"] for m in remote_messages_at(aws_peer)]
        verified = run_as_nobody(["audit", "verify"], home, env)  # the site makes nobody an admin: it may read
        assert verified.returncode == 0, verified.stderr
        assert "2 record(s), chain verified against the remote copy" in verified.stdout
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(where, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    assert [(r["actor"], r["action"], r["result"]) for r in sent] == [
        ("nobody", "budget-add", "started"), ("nobody", "budget-add", "ok")]
