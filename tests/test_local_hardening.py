"""The local guards a security review broke, each reproduced as it was found: the login taken
from the environment, folders tightened that gpuconsole did not make, temp files through
planted symlinks, ``-o`` over special files, actions run unaudited, notification hooks and dry
runs in read-only and auditor consoles, and a wrong MFA code ignored inside the window."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core import paths
from gpuconsole.core.access.access import Role, current_user
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.guard import Guard
from gpuconsole.core.access.mfa import MfaStore, code_at
from gpuconsole.core.money.budget_evaluation import Crossing
from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionLog, ActionRequest, run_action
from gpuconsole.core.ops.budget_notify import notify
from gpuconsole.model import Budget, Threshold
from tests.access_world import INSTANCE, NAMES, guard_for, make_home, use_home
from tests.nonroot import nobody_home, nobody_runner, run_as_nobody

DEMO = ["--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    _users, _mfa, _audit, secret = use_home(tmp_path, time.time, monkeypatch.setenv)
    return AuditLog(tmp_path / "demo" / "audit.db"), secret


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- 1. the login comes from the uid
def test_logname_and_user_do_not_name_the_login(monkeypatch) -> None:
    import pwd

    monkeypatch.setenv("LOGNAME", "mallory")
    monkeypatch.setenv("USER", "mallory")
    monkeypatch.delenv("GPUCONSOLE_LOGIN", raising=False)
    assert current_user() == pwd.getpwuid(os.geteuid()).pw_name


def test_mfa_state_is_kept_under_the_uid(tmp_path) -> None:
    import pwd

    login = pwd.getpwuid(os.geteuid())
    store = MfaStore(tmp_path / "mfa.json", lambda: 1_800_000_000.0)
    store.enroll(login.pw_name)
    assert list(json.loads(store.path.read_text())["users"]) == [f"uid:{login.pw_uid}"]
    # An entry a former version kept under the name is still the login's, and moves under the uid.
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"users": {login.pw_name: json.loads(store.path.read_text())["users"][f"uid:{login.pw_uid}"]}}))
    legacy = MfaStore(old, lambda: 1_800_000_000.0)
    assert legacy.enrolled(login.pw_name)
    legacy.forget(login.pw_name)
    assert json.loads(old.read_text())["users"] == {}


# ---------------------------------------------------------------- 3. folders gpuconsole did not make
def test_an_existing_shared_folder_keeps_its_mode(tmp_path, monkeypatch) -> None:
    shared = tmp_path / "gpuconsole"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    AuditLog(shared / "audit.db").append("ada", "admin", "start", INSTANCE, (), "ok")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    made = tmp_path / "new" / "gpuconsole-state"
    paths.private_dir(made)
    assert stat.S_IMODE(made.stat().st_mode) == stat.S_IMODE(made.parent.stat().st_mode) == 0o700


def test_a_folder_this_login_may_not_use_is_a_one_line_denial() -> None:
    nobody_runner()
    locked = Path(paths.tempfile.mkdtemp(prefix="gpuconsole-locked-"))  # root's, 0700
    home = nobody_home()
    try:
        for argv, code in ((["audit", "verify"], 3), (["audit", "list"], 1)):  # verify: "cannot be verified"
            run = run_as_nobody(argv, home, {"GPUCONSOLE_AUDIT_DB": str(locked / "audit.db")})
            assert run.returncode == code and "Traceback" not in run.stderr, run.stderr
            assert run.stderr.startswith("gpuconsole: ") and run.stderr.count("\n") == 1, run.stderr
            assert "permission denied" in run.stderr.lower()
    finally:
        shutil.rmtree(locked, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------- 4. temp files and planted symlinks
def test_a_planted_symlink_at_the_temp_name_is_never_followed(tmp_path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    target = tmp_path / "shared" / "users.json"
    target.parent.mkdir()
    for pid in {os.getpid(), os.getppid()}:
        (target.parent / f".{target.name}.{pid}.tmp").symlink_to(victim)
    paths.write_private(target, "{}\n")
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert target.read_text() == "{}\n" and not target.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_planted_symlink_at_a_private_file_is_refused(tmp_path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    planted = tmp_path / "state" / "audit.db"
    planted.parent.mkdir()
    planted.symlink_to(victim)
    with pytest.raises(OSError):
        paths.private_file(planted)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


# ---------------------------------------------------------------- 5. -o over special files
def test_export_refuses_a_target_that_is_not_a_regular_file(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("GPUCONSOLE_LOGIN", "ada")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere.csv")
    for target in (fifo, link):
        assert main(["audit", "export", "--csv", "-o", str(target)]) == 2
        assert "not a regular file" in one_line_error(capsys)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and not (tmp_path / "elsewhere.csv").exists()


# ---------------------------------------------------------------- 6. nothing runs unaudited
def plain_guard(tmp_path) -> Guard:
    """No users table: the single-user default (admin, no MFA), so only the audit can stop an action."""
    from gpuconsole.core.access.access import UsersTable

    audit = AuditLog(tmp_path / "audit.db")
    audit.busy_timeout_s = 0.2
    return Guard(UsersTable(tmp_path / "users.json"), MfaStore(tmp_path / "mfa.json"), audit, user="ada")


def hold_a_read_transaction(path: Path) -> sqlite3.Connection:
    """Another process's reader: SQLite then refuses every commit to the log."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM records").fetchone()
    return reader


def test_an_action_does_not_run_when_its_intent_cannot_be_recorded(tmp_path) -> None:
    guard = plain_guard(tmp_path)
    guard.audit.check_writable()
    reader = hold_a_read_transaction(guard.audit.path)
    ran: list[str] = []
    try:
        with pytest.raises(ActionError, match=r"^nothing runs unrecorded: cannot write the audit log"):
            run_action(ActionRequest(ActionKind.START, INSTANCE), lambda: ran.append("started") or "started", ActionLog(guard=guard))
    finally:
        reader.close()
    assert ran == []


def test_a_command_exits_1_and_changes_nothing_while_the_log_is_locked(home, monkeypatch, capsys) -> None:
    demo_log, _secret = home
    monkeypatch.setenv("GPUCONSOLE_LOGIN", "dev")
    monkeypatch.setenv("LOGNAME", "dev")  # what named the login before it came from the uid
    argv = [*DEMO, "job", "trigger", "team-nlp/nightly-eval"]
    assert main(argv) == 0  # the log exists, and the trigger works while nobody holds it
    before = len(demo_log.records())
    capsys.readouterr()
    from gpuconsole.core.access import audit

    monkeypatch.setattr(audit, "BUSY_TIMEOUT_S", 1.0)  # the wait is the same, only shorter
    reader = hold_a_read_transaction(demo_log.path)  # waits out the log's busy timeout
    try:
        assert main(argv) == 1
    finally:
        reader.close()
    assert "nothing runs unrecorded" in one_line_error(capsys)
    assert len(demo_log.records()) == before


def test_a_result_that_cannot_be_recorded_is_an_error(tmp_path) -> None:
    guard = plain_guard(tmp_path)
    readers: list[sqlite3.Connection] = []

    def start() -> str:
        readers.append(hold_a_read_transaction(guard.audit.path))  # the log locks while the call runs
        return "started"

    try:
        with pytest.raises(ActionError, match=r"done, but the result could not be recorded in the audit log"):
            run_action(ActionRequest(ActionKind.START, INSTANCE), start, ActionLog(guard=guard))
    finally:
        for reader in readers:
            reader.close()
    assert [(r.action, r.result) for r in guard.audit.records()] == [("start", "started")]


def test_any_error_inside_an_action_is_recorded(tmp_path) -> None:
    guard = plain_guard(tmp_path)

    def start() -> str:
        raise PermissionError(13, "Permission denied", "/dev/fake")

    with pytest.raises(ActionError, match="Permission denied"):
        run_action(ActionRequest(ActionKind.START, INSTANCE), start, ActionLog(guard=guard))
    assert [r.result.split(":")[0] for r in guard.audit.records()] == ["started", "failed"]
    assert guard.audit.verify().ok


# ---------------------------------------------------------------- 11. read-only and auditors act on nothing
def crossing(marker: Path) -> Crossing:
    budget = Budget(name="sprint", amount=100.0, notify_command=f"touch {marker}")
    return Crossing(budget, Threshold(80.0), 85.0, 95.0, 1_800_000_000.0, 1_800_000_100.0)


@pytest.mark.parametrize("role,read_only", [(Role.ADMIN, True), (Role.AUDITOR, False)], ids=["read-only", "auditor"])
def test_notification_hooks_do_not_run_in_read_only_or_as_auditor(tmp_path, role, read_only) -> None:
    users, mfa, audit, _secret = make_home(tmp_path, time.time)
    marker = tmp_path / "ran"
    result = notify(crossing(marker), ActionLog(guard=guard_for(role, users, mfa, audit, read_only=read_only)), time.time)
    assert not marker.exists()
    assert result.ok and result.message.startswith("budget sprint passed 80%") and "hooks not run" in result.message
    assert [(r.actor, r.action, r.result.split(":")[0]) for r in audit.records()] == [(NAMES[role], "notify", "denied")]
    result = notify(crossing(marker), ActionLog(guard=guard_for(Role.DEVELOPER, users, mfa, audit)), time.time)
    assert result.ok and marker.exists()  # others' consoles still run them


@pytest.mark.parametrize("flags,role", [(["--read-only"], Role.ADMIN), ([], Role.AUDITOR)], ids=["read-only", "auditor"])
def test_a_job_dry_run_goes_through_the_guard_and_the_audit(home, monkeypatch, capsys, flags, role) -> None:
    demo_log, _secret = home
    argv = [*DEMO, *flags, "job", "submit", "team-nlp/probe", "--image", "busybox", "--dry-run"]
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[role])
    assert main(argv) == 1
    assert one_line_error(capsys).startswith("gpuconsole: error: denied: ")
    last = demo_log.records()[-1]
    assert (last.actor, last.action, last.result.split(":")[0]) == (NAMES[role], "submit-job", "denied")
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[Role.DEVELOPER])
    assert main([*DEMO, "job", "submit", "team-nlp/probe", "--image", "busybox", "--dry-run"]) == 0
    assert json.loads(demo_log.records()[-1].params)["dry-run"] == "yes"


# ---------------------------------------------------------------- MFA window tightened
def test_a_wrong_code_inside_the_window_is_refused_and_counted(home, monkeypatch, capsys) -> None:
    _demo_log, secret = home
    audit = AuditLog(Path(os.environ["GPUCONSOLE_AUDIT_DB"]))
    monkeypatch.setenv("GPUCONSOLE_LOGIN", "ada")
    monkeypatch.setenv("LOGNAME", "ada")  # what named the login before it came from the uid
    now = time.time()
    assert main(["users", "add", "zed", "--role", "auditor", "--mfa-code", code_at(secret, now)]) == 0
    capsys.readouterr()
    wrong = next(c for c in ("000000", "111111", "222222") if c not in {code_at(secret, now + d) for d in (-30, 0, 30, 60)})
    assert main(["users", "add", "yan", "--role", "auditor", "--mfa-code", wrong]) == 1
    assert "MFA: wrong code (1 of 5" in one_line_error(capsys)
    assert [(r.action, r.target) for r in audit.records()[-2:]] == [("user-add", "zed"), ("mfa-verify", "ada")]
    assert audit.records()[-1].result.startswith("denied: wrong code")
    assert "yan" not in json.loads(Path(os.environ["GPUCONSOLE_USERS"]).read_text())["users"]


# ---------------------------------------------------------------- state files of the autopilot and experiments
def test_the_autopilot_and_experiment_files_are_the_owners_alone(tmp_path) -> None:
    """Made 0600 under a umask of 022, their write-ahead logs too: another login reads nothing."""
    from gpuconsole.core.ops.autopilot.state import AutopilotState
    from gpuconsole.core.ops.experiments.store import ExperimentStore

    old = os.umask(0o022)
    try:
        state = AutopilotState(tmp_path / "state" / "autopilot.db")
        state.close()
        store = ExperimentStore(tmp_path / "state" / "experiments.db")
    finally:
        os.umask(old)
    made = sorted(p for p in (tmp_path / "state").iterdir() if p.stat().st_size or p.suffix == ".db")
    assert {p.name for p in made} >= {"autopilot.db", "experiments.db"}
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    del store
