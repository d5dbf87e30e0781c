"""Every action with a command × every role through the CLI, checking the exit status, the one
line on stderr and the audit record; the users and audit commands; file modes."""

from __future__ import annotations

import json
import stat
import time

import pytest

from gpuconsole.cli.main import main
from tests.showcase import START  # noqa: E402 - 2026-11-16T14:00Z
from gpuconsole.core.access.access import Role, needs_mfa_kind
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import code_at
from gpuconsole.core.ops.actions import ActionKind
from tests.access_world import (
    CASES,
    FLEET_KINDS,
    CRONJOBS,
    INSTANCE,
    JOBS,
    PROCESS_JOBS,
    NAMES,
    OTHER_NS,
    OWN_NS,
    SERVICES,
    expected_allowed,
    use_home,
)

DEMO = ["--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z"]  # the world the names below come from


def argv_for(kind: ActionKind, scope: str, db: str) -> list[str]:
    ns = OWN_NS if scope == "own" else OTHER_NS
    job, cron = f"{ns}/{JOBS[ns]}", f"{ns}/{CRONJOBS[ns]}"
    if kind is ActionKind.KILL_PROCESS:
        return [*DEMO, "process", "kill", str(pid_of_job(ns)), "--yes"]
    return {
        ActionKind.LAUNCH: [*DEMO, "instance", "launch", "--type", "g5.xlarge", "--region", "us-east-1", "--yes",
                            "--only-this-zone"],
        ActionKind.START: [*DEMO, "instance", "start", INSTANCE],
        ActionKind.STOP: [*DEMO, "instance", "stop", INSTANCE, "--yes"],
        ActionKind.REBOOT: [*DEMO, "instance", "reboot", INSTANCE, "--yes"],
        ActionKind.POWER_OFF: [*DEMO, "instance", "power-off", INSTANCE, "--yes"],
        ActionKind.TERMINATE: [*DEMO, "instance", "terminate", INSTANCE, "--confirm", INSTANCE],
        ActionKind.SUBMIT_JOB: [*DEMO, "job", "submit", f"{ns}/matrix-job", "--image", "busybox"],
        ActionKind.DELETE_JOB: [*DEMO, "job", "delete", job, "--yes"],
        ActionKind.SUSPEND_JOB: [*DEMO, "job", "suspend", job, "--yes"],
        ActionKind.RESUME_JOB: [*DEMO, "job", "resume", job],
        ActionKind.SUSPEND_CRONJOB: [*DEMO, "job", "suspend", cron, "--kind", "CronJob", "--yes"],
        ActionKind.TRIGGER_CRONJOB: [*DEMO, "job", "trigger", cron],
        ActionKind.BUDGET_ADD: ["budget", "add", "matrix", "--amount", "100", "--db", db],
        ActionKind.BUDGET_REMOVE: ["budget", "remove", "kept", "--db", db],
        ActionKind.USER_ADD: ["users", "add", "newbie", "--role", "auditor"],
        ActionKind.USER_SET_ROLE: ["users", "set-role", "aud", "--role", "auditor"],
        ActionKind.USER_REMOVE: ["users", "remove", "aud"],
        ActionKind.RULE_ADD: ["rule", "add", '{ name = "matrix", kind = "idle-stop", idle_for = "2h" }'],
        ActionKind.RULE_REMOVE: ["rule", "remove", "kept"],
        ActionKind.RULE_PAUSE: ["rule", "pause", "kept"],
        ActionKind.RULE_RESUME: ["rule", "resume", "kept"],
        ActionKind.SCALE_SERVICE: [*DEMO, "service", "scale", SERVICES[scope], "2"],
        ActionKind.RESTART_SERVICE: [*DEMO, "service", "restart", SERVICES[scope], "--yes"],
    }[kind]


# Kueue's actions need a cluster that serves Kueue (the demo has none): tests/test_queues_kube.py.
QUEUE_KINDS = (ActionKind.MOVE_QUEUE, ActionKind.DEACTIVATE_WORKLOAD, ActionKind.REACTIVATE_WORKLOAD)
CLI_KINDS = [k for k in FLEET_KINDS if k is not ActionKind.NOTIFY and k not in QUEUE_KINDS]


def pid_of_job(ns: str) -> int:
    """The pid of a GPU process of the demo job ``JOBS[ns]`` (seed 7), as ``process kill`` finds it."""
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions

    origin = time.time()
    console = Console(ConsoleOptions(sources=SourceOptions(demo=True, sim_start=START), clock=lambda: START + time.time() - origin))
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(10)
        snap = console.snapshot
        job = next(j for j in snap.jobs if j.namespace == ns and j.name == PROCESS_JOBS[ns])
        return next(p.pid for g in snap.gpus for p in g.processes if job.owns_pod(p.pod_uid))
    finally:
        console.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    _users, _mfa, audit, secret = use_home(tmp_path, time.time, monkeypatch.setenv)
    return audit, secret


def log_of(argv: list[str], audit: AuditLog, tmp_path) -> AuditLog:
    """The audit log an action of ``argv`` is written to: the demo's own for a ``--demo`` command."""
    return AuditLog(tmp_path / "demo" / "audit.db") if "--demo" in argv else audit


def act_as(monkeypatch, role: Role) -> None:
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[role])


@pytest.mark.parametrize("role,scope", CASES, ids=[f"{r.value}-{s}" for r, s in CASES])
@pytest.mark.parametrize("kind", CLI_KINDS, ids=[k.value for k in CLI_KINDS])
def test_every_action_for_every_role_through_the_cli(home, tmp_path, monkeypatch, capsys, kind, role, scope) -> None:
    audit, secret = home
    db = str(tmp_path / "cache" / "cli.db")
    if kind is ActionKind.BUDGET_REMOVE:
        from gpuconsole.core.fleet.store import Store
        from gpuconsole.model import Budget

        store = Store(db)
        store.save_budget(Budget(name="kept", amount=5.0, origin="store"))
        store.close()
    if kind in (ActionKind.RULE_REMOVE, ActionKind.RULE_PAUSE, ActionKind.RULE_RESUME):
        from gpuconsole.core.ops.autopilot.state import AutopilotState

        monkeypatch.setenv("GPUCONSOLE_AUTOPILOT_DB", str(tmp_path / "autopilot.db"))
        state = AutopilotState(tmp_path / "autopilot.db")
        state.add_rule("kept", {"name": "kept", "kind": "idle-stop", "idle_for": "2h"})
        state.set_paused("kept", kind is ActionKind.RULE_RESUME)
        state.close()
    act_as(monkeypatch, role)
    argv = argv_for(kind, scope, db)
    if role is Role.ADMIN and needs_mfa_kind(kind):
        argv += ["--mfa-code", code_at(secret, time.time())]
    rc = main(argv)
    err = capsys.readouterr().err
    allowed = expected_allowed(kind, role, scope)
    last = [r for r in log_of(argv, audit, tmp_path).records() if r.action == kind.value][-1]
    assert (last.actor, last.role) == (NAMES[role], role.value)
    if allowed and kind is ActionKind.POWER_OFF and rc != 0:  # a cloud without power-off apart from stop
        assert "not offered by this cloud" in err and not last.result.startswith("denied")
    elif allowed:
        assert rc == 0, err
        assert last.result == "ok"
    else:
        assert rc != 0
        assert err.startswith("gpuconsole: error: denied: ") and err.count("\n") == 1
        assert last.result.startswith("denied: ")
    assert AuditLog(audit.path).verify().ok


def test_an_admin_without_a_code_is_denied_and_recorded(home, tmp_path, monkeypatch, capsys) -> None:
    audit, _secret = home
    act_as(monkeypatch, Role.ADMIN)
    assert main([*DEMO, "instance", "stop", INSTANCE, "--yes"]) == 1
    assert "needs a current MFA code" in capsys.readouterr().err
    assert log_of(DEMO, audit, tmp_path).records()[-1].result.startswith("denied: stop needs a current MFA code")


def test_a_wrong_code_is_refused_counted_and_recorded(home, tmp_path, monkeypatch, capsys) -> None:
    audit, secret = home
    act_as(monkeypatch, Role.ADMIN)
    wrong = "000000" if code_at(secret, time.time()) != "000000" else "111111"
    assert main([*DEMO, "instance", "stop", INSTANCE, "--yes", "--mfa-code", wrong]) == 1
    assert "MFA: wrong code (1 of 5" in capsys.readouterr().err
    last = log_of(DEMO, audit, tmp_path).records()[-1]
    assert (last.action, last.result.split(" (")[0], json.loads(last.params)) == (
        "mfa-verify", "denied: wrong code", {"for": f"stop {INSTANCE}"})


def test_audit_verify_names_the_first_bad_record_and_exits_1(home, capsys) -> None:
    import sqlite3

    audit, _ = home
    for n in range(3):
        audit.append("ada", "admin", "stop", f"i-{n}", (), "ok")
    assert main(["audit", "verify"]) == 0
    assert "chain verified" in capsys.readouterr().out
    conn = sqlite3.connect(audit.path)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("UPDATE records SET target = 'i-x' WHERE seq = 2")
    conn.commit()
    conn.close()
    assert main(["audit", "verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: audit log TAMPERED: record 2 was edited") and err.count("\n") == 1


def test_audit_list_and_export_for_auditors_not_developers(home, monkeypatch, capsys, tmp_path) -> None:
    audit, _ = home
    audit.append("dev", "developer", "delete-job", "team-nlp/a", (("kind", "Job"),), "ok")
    audit.append("aud", "auditor", "stop", "i-1", (), "denied: auditors may change nothing")
    act_as(monkeypatch, Role.AUDITOR)
    assert main(["audit", "list", "--actor", "dev"]) == 0
    out = capsys.readouterr().out
    assert "delete-job" in out and "i-1" not in out
    assert main(["audit", "export", "--json", "--result", "denied"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["target"] for r in doc["records"]] == ["i-1"]
    target = tmp_path / "out" / "audit.csv"
    target.parent.mkdir()  # export writes into a folder that exists, and creates none
    assert main(["audit", "export", "--csv", "-o", str(target)]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    act_as(monkeypatch, Role.DEVELOPER)
    capsys.readouterr()
    assert main(["audit", "list"]) == 1
    assert "only admins and auditors read the audit log" in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(home, monkeypatch, capsys) -> None:
    act_as(monkeypatch, Role.ADMIN)
    for argv in (["users", "add", "bad/name", "--role", "admin"], ["users", "add", "x", "--role", "boss"],
                 [*DEMO, "job", "delete", "no-slash"], ["audit", "list", "--since", "yesterday"],
                 ["users", "add", "x", "--role", "admin", "--namespace", "Bad_NS"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("gpuconsole: error: ") and err.count("\n") == 1, err


def test_users_init_list_and_the_last_admin(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("GPUCONSOLE_LOGIN", "root-admin")
    assert main(["users", "list"]) == 0
    assert "no users table yet" in capsys.readouterr().out
    assert main(["users", "init"]) == 0
    out = capsys.readouterr().out
    assert "root-admin is now admin" in out and "otpauth://totp/gpuconsole:root-admin?" in out and "▀" in out
    assert main(["users", "init"]) == 1
    capsys.readouterr()
    assert main(["users", "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["you"] == {"name": "root-admin", "role": "admin", "managed": True}
    from gpuconsole.core.paths import mfa_path

    secret = json.loads(mfa_path().read_text())["users"]["root-admin"]["secret"]
    assert main(["users", "remove", "root-admin", "--mfa-code", code_at(secret, time.time())]) == 1
    assert "last admin" in capsys.readouterr().err


def test_files_gpuconsole_creates_are_private(tmp_path, monkeypatch, capsys) -> None:
    from gpuconsole.core import paths

    monkeypatch.setenv("GPUCONSOLE_LOGIN", "ada")
    db = tmp_path / "cache" / "deep" / "gpuconsole.db"
    assert main(["users", "init", "--no-qr"]) == 0
    assert main(["budget", "add", "b1", "--amount", "10", "--db", str(db)]) == 0
    files = [paths.users_path(), paths.mfa_path(), paths.audit_db_path(), db]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent
    assert stat.S_IMODE(db.parent.parent.stat().st_mode) == 0o700


def test_read_only_denies_every_command_to_an_admin(home, tmp_path, monkeypatch, capsys) -> None:
    audit, secret = home
    act_as(monkeypatch, Role.ADMIN)
    assert main([*DEMO, "--read-only", "job", "trigger", "team-nlp/nightly-eval"]) == 1
    assert "denied: the console runs read-only" in capsys.readouterr().err
    assert main(["--read-only", "users", "add", "zed", "--role", "auditor", "--mfa-code", code_at(secret, time.time())]) == 1
    records = [*log_of(DEMO, audit, tmp_path).records(), *audit.records()]
    assert [r.result.split(":")[0] for r in records if r.action in ("trigger-cronjob", "user-add")] == [
        "denied", "denied"]


def test_audit_usage_sums_the_demo_jobs_per_user_and_namespace(home, monkeypatch, capsys) -> None:
    act_as(monkeypatch, Role.AUDITOR)
    assert main(["audit", "usage", "--demo", "--no-db", "--json", "--wait", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpuconsole.usage/1" and doc["gpu_hours"] > 0
    assert {line["key"] for line in doc["by_namespace"]} >= {"team-nlp", "research"}
    assert round(sum(line["cost"] for line in doc["by_user"]), 2) == round(doc["cost"], 2)
    act_as(monkeypatch, Role.DEVELOPER)
    assert main(["audit", "usage", "--demo", "--no-db"]) == 1
