"""[alibaba.roles]: every Alibaba Cloud call of a session runs as the RAM role of the login's
gpuconsole role, through STS AssumeRole, never with the login's own keys; through the official SDK
against the local ECS and STS peer (tests/alibaba_peer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.core.access.alibaba_roles import load_alibaba_roles
from gpuconsole.core.access.aws_roles import os_login, session_name
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import MfaStore, code_at
from gpuconsole.core.config import ConfigError
from tests.alibaba_peer import EcsPeer

LOGIN_KEY = "LTAI5tTestKeyId"
DEVELOPER = "acs:ram::1234567890123456:role/gpuconsole-developer"
ADMIN = "acs:ram::1234567890123456:role/gpuconsole-admin"


@pytest.fixture
def ecs(monkeypatch):
    monkeypatch.setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", LOGIN_KEY)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")
    with EcsPeer() as peer:
        yield peer


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A users table naming this login an admin with MFA enrolled, and an audit log, under ``tmp_path``."""
    monkeypatch.setenv("GPUCONSOLE_USERS", str(tmp_path / "users.json"))
    monkeypatch.setenv("GPUCONSOLE_MFA", str(tmp_path / "mfa.json"))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    monkeypatch.delenv("GPUCONSOLE_MFA_CODE", raising=False)
    UsersTable(tmp_path / "users.json").init(current_user())
    secret, _uri = MfaStore(tmp_path / "mfa.json").enroll(current_user())
    (tmp_path / "secret").write_text(secret)
    return tmp_path


def _config(tmp_path: Path, url: str, roles: str = f'developer = "{DEVELOPER}"\nadmin = "{ADMIN}"\n') -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{url}"\nsts_endpoint = "{url}"\n'
                    f'session_seconds = 1800\n\n[alibaba.roles]\n{roles}')
    return path


def _stop(config: Path, instance_id: str, home: Path) -> list[str]:
    code = code_at((home / "secret").read_text(), time.time())  # the console's own MFA check of an admin
    return ["instance", "stop", instance_id, "--yes", "--cloud", "alibaba", "--no-db", "--mfa-code", code,
            "--gpus", "off", "--jobs", "off", "--wait", "3", "--config", str(config)]


def _ecs_calls(peer: EcsPeer) -> list[tuple[str, dict[str, str]]]:
    return [(a, p) for a, p in peer.world.calls if a not in ("AssumeRole", "GetCallerIdentity")]


def test_the_admin_stops_through_the_admin_ram_role(ecs, home, tmp_path, capsys):
    iid = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    assert main(_stop(_config(tmp_path, ecs.url), iid, home)) == 0, capsys.readouterr().err
    assert ecs.world.instances[iid]["Status"] == "Stopped"
    [assume] = [p for a, p in ecs.world.calls if a == "AssumeRole"]  # one session for the polls and the stop
    assert assume["RoleArn"] == ADMIN and assume["RoleSessionName"] == session_name(os_login())
    assert assume["DurationSeconds"] == "1800" and assume["AccessKeyId"] == LOGIN_KEY
    calls = _ecs_calls(ecs)
    assert {a for a, _ in calls} >= {"DescribeInstances", "StopInstance"}
    assert all(p["AccessKeyId"].startswith("STS.") and p.get("SecurityToken") for _, p in calls)
    assert ecs.world.sessions[calls[-1][1]["AccessKeyId"]] == ADMIN
    [record] = [r for r in AuditLog(home / "audit.db").records() if r.action == "stop" and r.result != "started"]
    assert record.result == "ok" and record.target == iid


def test_a_role_with_no_ram_role_gets_no_session_and_no_call_with_the_login_keys(ecs, home, tmp_path, capsys):
    iid = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    assert main(_stop(_config(tmp_path, ecs.url, roles=f'developer = "{DEVELOPER}"\n'), iid, home)) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no Alibaba Cloud session" in err and "admin" in err
    assert _ecs_calls(ecs) == [] and "AssumeRole" not in ecs.actions()
    assert ecs.world.instances[iid]["Status"] == "Running"


def test_a_role_ram_refuses_is_a_denial_in_rams_words(ecs, home, tmp_path, capsys):
    iid = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    ecs.world.assumable = {DEVELOPER}  # the login may not assume the admin role
    assert main(_stop(_config(tmp_path, ecs.url), iid, home)) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "NoPermission" in err
    assert _ecs_calls(ecs) == [] and ecs.world.instances[iid]["Status"] == "Running"
    [record] = [r for r in AuditLog(home / "audit.db").records() if r.action == "stop" and r.result != "started"]
    assert record.result.startswith("denied: ") and "NoPermission" in record.result


def test_whoami_names_the_role_session_it_acts_through(ecs, home, tmp_path, capsys):
    assert main(["access", "whoami", "--json", "--cloud", "alibaba", "--config", str(_config(tmp_path, ecs.url)),
                 "--no-db", "--gpus", "off", "--jobs", "off"]) == 0
    section = json.loads(capsys.readouterr().out)["alibaba"]
    assert section["identity_type"] == "AssumedRoleUser"
    assert section["caller"].startswith("acs:ram::1234567890123456:assumed-role/gpuconsole-admin/"), ecs.world.calls
    assert section["roles"]["role_arn"] == ADMIN and section["roles"]["session"].endswith("/" + session_name(os_login()))
    assert "role-secret" not in json.dumps(section)


@pytest.mark.parametrize(("text", "message"), [
    ('[alibaba]\nregions = ["cn-hangzhou"]\n[alibaba.roles]\nadmin = "arn:aws:iam::123456789012:role/x"\n', "roles.admin"),
    ('[alibaba]\nregions = ["cn-hangzhou"]\n[alibaba.roles]\nboss = "acs:ram::1234567890123456:role/x"\n', "roles.boss"),
])
def test_a_wrong_role_table_is_one_line_naming_the_key(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_alibaba_roles(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_wrong_role_table_stops_every_call_instead_of_using_the_login_keys(ecs, home, tmp_path, capsys):
    ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    config = _config(tmp_path, ecs.url, roles='developer = "not-an-arn"\n')
    main(["snapshot", "--json", "--cloud", "alibaba", "--no-db", "--gpus", "off", "--jobs", "off", "--wait", "15",
          "--config", str(config)])
    captured = capsys.readouterr()
    assert "roles" in captured.out + captured.err
    assert _ecs_calls(ecs) == [] and "AssumeRole" not in ecs.actions()


AUTOMATION = "acs:ram::1234567890123456:role/gpuconsole-automation"
SERVICE_KEY = "LTAI5tServiceKeyId"  # the machine's own RAM identity, which alone the automation role trusts


def _enforce_config(tmp_path: Path, url: str) -> Path:
    config = _config(tmp_path, url, roles=f'admin = "{ADMIN}"\nautomation = "{AUTOMATION}"\n')
    with config.open("a") as handle:
        handle.write('\n[[budgets]]\nname = "fleet"\namount = 0.0001\nperiod = "custom"\nstarts = 2020-01-01\n'
                     'scope = "tag:ManagedBy=gpuconsole"\nthresholds = ["100:notify+stop-all"]\nautomatic = true\n')
    return config


def _enforce(config: Path) -> list[str]:
    return ["budget", "check", "--enforce", "--cloud", "alibaba", "--gpus", "off", "--jobs", "off",
            "--wait", "10", "--config", str(config)]


def test_the_table_takes_an_automation_role(tmp_path):
    path = _config(tmp_path, "http://127.0.0.1:9", roles=f'automation = "{AUTOMATION}"\n')
    roles, _seconds = load_alibaba_roles(path)
    assert roles == {"automation": AUTOMATION}


def test_budget_enforcement_acts_as_automation_which_a_logins_own_keys_cannot_assume(ecs, home, tmp_path,
                                                                                    monkeypatch):
    """``budget check --enforce`` assumes ``[alibaba.roles] automation`` (session
    ``gpuconsole-automation``, no MFA): with a person's own keys RAM refuses it and nothing
    stops; with the service's keys the tagged instance stops through that role alone."""
    iid = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags={"ManagedBy": "gpuconsole"})
    ecs.world.trusted = {AUTOMATION: {SERVICE_KEY}}
    ecs.world.currency = "USD"  # the budget's own currency: no exchange rate needed
    config = _enforce_config(tmp_path, ecs.url)
    # Each run in a process of its own: the SDK keeps the first keys its default chain found per process.
    done = subprocess.run([sys.executable, "-m", "gpuconsole", *_enforce(config)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr  # the login's own keys: the automation role trusts the service alone
    assert "NoPermission" in done.stderr and ecs.world.instances[iid]["Status"] == "Running"
    assert {p["RoleArn"] for a, p in ecs.world.calls if a == "AssumeRole"} == {AUTOMATION}
    assert not [a for a, _ in ecs.world.calls if a == "StopInstance"]

    ecs.world.calls.clear()
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", SERVICE_KEY)
    done = subprocess.run([sys.executable, "-m", "gpuconsole", *_enforce(config)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"stopped {iid}" in done.stdout
    assert ecs.world.instances[iid]["Status"] == "Stopped"
    assumed = [p for a, p in ecs.world.calls if a == "AssumeRole"]
    assert assumed and all(p["RoleArn"] == AUTOMATION and p["RoleSessionName"] == "gpuconsole-automation"
                           and p["AccessKeyId"] == SERVICE_KEY for p in assumed)
    [stop] = [p for a, p in ecs.world.calls if a == "StopInstance"]
    assert ecs.world.sessions[stop["AccessKeyId"]] == AUTOMATION
    [record] = [r for r in AuditLog(home / "audit.db").records() if r.action == "stop" and r.result != "started"]
    assert record.result.startswith("ok") and "automatic:fleet" in record.params


def test_an_automatic_action_in_a_logins_own_alibaba_session_is_denied_and_audited(tmp_path, home):
    from gpuconsole.core.access.alibaba_roles import AlibabaRoleSessions
    from gpuconsole.core.access.guard import default_guard
    from gpuconsole.core.ops.actions import ActionDenied, ActionKind, ActionLog, ActionRequest, autopilot_confirmation
    from gpuconsole.core.ops.actions import run_action

    guard = default_guard()
    guard.alibaba_roles = AlibabaRoleSessions({"admin": ADMIN, "automation": AUTOMATION}, 3600,
                                              lambda: guard.principal.role, assume=None)
    ran: list[str] = []
    request = ActionRequest(ActionKind.STOP, "i-bp1000000000000000001", "cn-hangzhou", autopilot_confirmation("idle"),
                            (("rule", "idle"),))
    with pytest.raises(ActionDenied, match=r"automatic actions run as \[alibaba.roles\] automation"):
        run_action(request, lambda: ran.append("stop") or "stopped", ActionLog(guard=guard))
    assert ran == []
    [record] = [r for r in AuditLog(home / "audit.db").records() if r.action == "stop"]
    assert record.actor == "autopilot:idle" and f"not in {os_login()}'s own Alibaba Cloud session" in record.result
