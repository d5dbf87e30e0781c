"""AWS roles through STS, against moto enforcing IAM policies and trust relationships.

Two IAM users: ``dev-user`` may assume only the developer (and auditor) role, ``admin-user``
also the admin role. The users table of gpuconsole says the login is an admin in both cases:
AWS, not the table, decides.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import hcl2
import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access import iam_policy
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.aws_roles import load_aws_roles, os_login
from gpuconsole.core.config import ConfigError
from gpuconsole.model import Role
from tests.aws_peer import TEST_REGION
from tests.aws_peer_iam import IamWorld, iam_moto, iam_world  # noqa: F401 - fixtures

MFA_SERIAL = "arn:aws:iam::123456789012:mfa/admin-user"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A users table naming this login with ``role``, and an audit log, under ``tmp_path``."""
    monkeypatch.setenv("GPUCONSOLE_USERS", str(tmp_path / "users.json"))
    monkeypatch.setenv("GPUCONSOLE_MFA", str(tmp_path / "mfa.json"))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    monkeypatch.delenv("GPUCONSOLE_MFA_CODE", raising=False)
    UsersTable(tmp_path / "users.json").init(current_user())
    return tmp_path


def _stop(config: Path, instance_id: str, *extra: str) -> list[str]:
    return ["instance", "stop", instance_id, "--yes", "--region", TEST_REGION, "--cloud", "aws", "--no-db",
            "--gpus", "off", "--jobs", "off", "--wait", "3", "--config", str(config), *extra]


def _records(home: Path, action: str) -> list:
    return [r for r in AuditLog(home / "audit.db").records() if r.action == action and r.result != "started"]


def _assume_calls(world: IamWorld) -> list:
    return [r for r in world.moto.proxy.requests if r.action == "AssumeRole"]


def test_the_developer_is_denied_by_aws_even_when_the_users_table_says_admin(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    iam_world.use_profile(monkeypatch, "dev-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)

    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "123456")) == 1

    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "AccessDenied" in err and "dev-user is not authorized to perform: sts:AssumeRole" in err
    [record] = _records(home, "stop")
    assert record.result.startswith("denied: ") and "dev-user is not authorized" in record.result
    assert record.target == iam_world.instance_id
    # One AssumeRole: the code AWS refused is not sent again by the polls or the stop.
    assert [r.params["RoleArn"] for r in _assume_calls(iam_world)] == [iam_world.role_arns["admin"]]
    assert not [r for r in iam_world.moto.proxy.requests if r.action == "StopInstances"]
    assert iam_world.instance_state() == "running"


def test_the_admin_stops_through_the_admin_role_with_the_mfa_device_and_code(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)

    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "654321")) == 0, capsys.readouterr().err

    assert iam_world.instance_state() in ("stopping", "stopped")
    calls = _assume_calls(iam_world)
    assert calls, "no AssumeRole was sent"
    for call in calls:
        assert call.params["RoleArn"] == iam_world.role_arns["admin"]
        assert call.params["SerialNumber"] == MFA_SERIAL
        assert call.params["TokenCode"] == "654321"
        assert call.params["RoleSessionName"] == os_login() == call.params["SourceIdentity"]
    assert len(calls) == 1, "the session is kept, not assumed again for the stop"
    [stop] = [r for r in iam_world.moto.proxy.requests if r.action == "StopInstances"]
    assert stop.params["InstanceId.1"] == iam_world.instance_id
    [record] = _records(home, "stop")
    assert record.result == "ok"
    assert "654321" not in json.dumps([r.params for r in AuditLog(home / "audit.db").records()])


def test_both_outcomes_are_in_one_audit_log(iam_world: IamWorld, home: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)
    iam_world.use_profile(monkeypatch, "dev-user")
    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "111111")) == 1
    iam_world.use_profile(monkeypatch, "admin-user")
    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "222222")) == 0
    results = [r.result.split(":")[0] for r in _records(home, "stop")]
    assert results == ["denied", "ok"]
    assert main(["audit", "verify"]) == 0


def test_the_mfa_device_comes_from_iam_when_the_config_names_none(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.aws_peer_iam import free_actions

    free_actions(iam_world.moto.url, 10)
    iam = iam_world.client("iam", "admin-user")
    serial = iam.create_virtual_mfa_device(VirtualMFADeviceName="admin-phone")["VirtualMFADevice"]["SerialNumber"]
    iam.enable_mfa_device(UserName="admin-user", SerialNumber=serial, AuthenticationCode1="123456",
                          AuthenticationCode2="234567")
    free_actions(iam_world.moto.url, 0)
    iam_world.use_profile(monkeypatch, "admin-user")
    config = iam_world.config(tmp_path / "config.toml")

    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "333333")) == 0

    assert [c.params["SerialNumber"] for c in _assume_calls(iam_world)] == [serial]


def test_an_admin_without_a_code_is_denied_before_aws_is_asked(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)

    assert main(_stop(config, iam_world.instance_id)) == 1

    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "MFA code for the AWS admin role" in err
    [record] = _records(home, "stop")
    assert record.result.startswith("denied: ")
    assert not _assume_calls(iam_world)
    assert iam_world.instance_state() == "running"


def test_whoami_names_the_login_the_caller_and_the_role_it_acts_through(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    UsersTable(home / "users.json").add("someone-else", Role.ADMIN)
    UsersTable(home / "users.json").set_role(current_user(), Role.DEVELOPER, ("ml",))
    iam_world.use_profile(monkeypatch, "dev-user")
    config = iam_world.config(tmp_path / "config.toml")

    assert main(["access", "whoami", "--json", "--cloud", "aws", "--no-db", "--gpus", "off", "--jobs", "off",
                 "--config", str(config)]) == 0

    answer = json.loads(capsys.readouterr().out)
    assert answer["gpuconsole"]["role"] == "developer" and answer["gpuconsole"]["login"] == os_login()
    aws = answer["aws"]
    assert aws["caller"] == iam_world.user_arn("dev-user")
    assert aws["role_arn"] == iam_world.role_arns["developer"]
    assert ":assumed-role/gpuconsole-developer/" in aws["acts_as"]
    assert aws["tls"] == "none (http endpoint)" and aws["tls_floor"].startswith("TLS 1.2")
    assert answer["mfa"]["missing"] == []
    assert iam_world.keys["dev-user"][1] not in json.dumps(answer)


def test_whoami_says_what_is_missing_without_aws(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "whoami", "--cloud", "off", "--no-db", "--gpus", "off", "--jobs", "off"]) == 0
    out = capsys.readouterr().out
    assert "aws\n  configured: False\n  missing: configure AWS credentials" in out
    assert "missing: enrol MFA" in out


def test_iam_policy_json_parses_and_holds_the_guards(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "iam-policy", "--account", "123456789012"]) == 0
    roles = {r["gpuconsole_role"]: r for r in json.loads(capsys.readouterr().out)["roles"]}
    assert set(roles) == {"admin", "developer", "auditor"}
    [admin_trust] = roles["admin"]["trust_policy"]["Statement"]
    assert admin_trust["Condition"]["Bool"] == {"aws:MultiFactorAuthPresent": "true"}
    assert admin_trust["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    for name in ("developer", "auditor"):
        assert "Condition" not in roles[name]["trust_policy"]["Statement"][0]
    developer = roles["developer"]["policy"]["Statement"]
    denied = {a for s in developer if s["Effect"] == "Deny" for a in s["Action"]}
    assert {"ec2:RunInstances", "ec2:StopInstances", "ec2:TerminateInstances", "ec2:StartInstances"} <= denied
    allowed = {a for s in developer if s["Effect"] == "Allow" for a in s["Action"]}
    assert "ec2:Describe*" in allowed and not allowed & denied
    auditor = {a for s in roles["auditor"]["policy"]["Statement"] if s["Effect"] == "Allow" for a in s["Action"]}
    assert {"ce:GetCostAndUsage", "cloudtrail:LookupEvents", "ec2:Describe*"} <= auditor
    assert all(a.split(":")[1].startswith(("Describe", "Get", "Lookup", "List")) for a in auditor)
    changes = [s for s in roles["admin"]["policy"]["Statement"] if "ec2:StopInstances" in s["Action"]]
    assert changes and all(s["Condition"]["StringEquals"] == {"aws:ResourceTag/ManagedBy": "gpuconsole"}
                           for s in changes)


def test_the_service_roles_fill_the_audit_copy_and_automate_only_tagged_instances(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "iam-policy", "--account", "123456789012"]) == 0
    doc = json.loads(capsys.readouterr().out)
    service = {r["gpuconsole_role"]: r for r in doc["service_roles"]}
    copy = {a for s in service["service"]["policy"]["Statement"] for a in s["Action"] if a.startswith("logs:")}
    assert {"logs:PutLogEvents", "logs:CreateLogStream", "logs:FilterLogEvents"} <= copy
    assert not any(a.startswith("logs:") for r in doc["roles"] for s in r["policy"]["Statement"] for a in s["Action"])
    [trust] = service["automation"]["trust_policy"]["Statement"]
    assert trust["Principal"] == {"AWS": "arn:aws:iam::123456789012:role/gpuconsole-service"}  # no login's keys
    changes = [s for s in service["automation"]["policy"]["Statement"] if s["Effect"] == "Allow"
               and set(s["Action"]) & {"ec2:StopInstances", "ec2:TerminateInstances"}]
    assert changes and all(s["Condition"]["StringEquals"] == {"aws:ResourceTag/ManagedBy": "gpuconsole"} for s in changes)


def test_without_a_relay_each_identity_writes_only_its_own_audit_streams(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "iam-policy", "--account", "123456789012"]) == 0
    writer = json.loads(capsys.readouterr().out)["audit_writer"]
    assert writer["name"] == "gpuconsole-audit-writer"
    writes = [s for s in writer["policy"]["Statement"] if "logs:PutLogEvents" in s["Action"]]
    assert writes == [{"Sid": "ItsOwnStreamsOnly", "Effect": "Allow",
                       "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                       "Resource": "arn:aws:logs:*:123456789012:log-group:/gpuconsole/audit:log-stream:*/${aws:username}"}]
    reads = {a for s in writer["policy"]["Statement"] for a in s["Action"]}
    assert reads == {"logs:CreateLogStream", "logs:PutLogEvents", "logs:CreateLogGroup", "logs:FilterLogEvents"}


def test_iam_policy_terraform_parses_and_holds_the_mfa_condition(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "iam-policy", "--terraform"]) == 0
    text = capsys.readouterr().out
    parsed = hcl2.loads(text)
    names = [name for block in parsed["resource"] for kind in block.values() for name in kind]
    assert len(names) == 11  # a role and its policy for admin, developer, auditor, service and automation; the writer
    assert "log-stream:*/$${aws:username}" in text  # IAM's variable, not Terraform's
    assert "aws:MultiFactorAuthPresent" in text and "${data.aws_caller_identity.current.account_id}" in text


def test_a_bad_account_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["access", "iam-policy", "--account", "12ab"]) == 2
    assert "not an AWS account id" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "message"), [
    ('[aws.roles]\nboss = "arn:aws:iam::123456789012:role/x"\n', "not a gpuconsole role"),
    ('[aws.roles]\nadmin = "role/x"\n', "not an IAM role ARN"),
    ('[aws]\nmfa_serial = "phone"\n[aws.roles]\nadmin = "arn:aws:iam::123456789012:role/x"\n', "mfa_serial"),
])
def test_a_wrong_role_table_is_one_line_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_aws_roles(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_wrong_role_table_stops_aws_calls_instead_of_using_the_login_keys(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    config = tmp_path / "config.toml"
    config.write_text('[aws.roles]\nadmin = "not-an-arn"\n')
    main(["snapshot", "--json", "--cloud", "aws", "--region", TEST_REGION, "--no-db", "--gpus", "off", "--jobs", "off",
          "--wait", "3", "--config", str(config)])
    assert "AWS roles are not usable" in capsys.readouterr().out
    assert not [r for r in iam_world.moto.proxy.requests if r.action == "DescribeInstances"]


def test_iam_policy_roles_match_the_documented_names() -> None:
    assert [r.name for r in iam_policy.roles()] == ["gpuconsole-admin", "gpuconsole-developer", "gpuconsole-auditor"]


def test_the_key_age_alert_sees_the_login_key_under_a_role_session(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.model import SourceKind

    iam_world.use_profile(monkeypatch, "dev-user")
    config = iam_world.config(tmp_path / "config.toml")
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(TEST_REGION,), gpus="off", jobs="off"),
                                     config_path=config))
    try:
        assert console.services.aws_roles is not None
        keys = console.hub.runners[SourceKind.CLOUD].source.access_keys()
    finally:
        console.close()
    assert [(key_id, in_use) for key_id, _created, _active, in_use in keys] == [(iam_world.keys["dev-user"][0], True)]


def test_a_trust_policy_that_does_not_name_the_user_is_a_denial_too(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.aws_peer_iam import _user_policy, free_actions

    free_actions(iam_world.moto.url, 1)  # dev-user's own policy now allows the admin role: only its trust refuses
    iam_world.client("iam", "admin-user").put_user_policy(
        UserName="dev-user", PolicyName="gpuconsole-assume", PolicyDocument=_user_policy(list(iam_world.role_arns.values())))
    free_actions(iam_world.moto.url, 0)
    iam_world.use_profile(monkeypatch, "dev-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)

    assert main(_stop(config, iam_world.instance_id, "--mfa-code", "123456")) == 1

    assert "AccessDenied" in capsys.readouterr().err
    [record] = _records(home, "stop")
    assert record.result.startswith("denied: ") and "sts:AssumeRole" in record.result


def test_sessions_are_kept_until_shortly_before_they_expire(iam_world: IamWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuconsole.backends.aws import StsCalls
    from gpuconsole.core.access.aws_roles import REFRESH_BEFORE_S, AwsRoleSessions, AwsRoleSettings, MfaCodeNeeded

    iam_world.use_profile(monkeypatch, "admin-user")
    now = [0.0]
    role = [Role.DEVELOPER]
    settings = AwsRoleSettings(tuple(sorted(iam_world.role_arns.items())), MFA_SERIAL, 900)
    sessions = AwsRoleSessions(settings, lambda: role[0], StsCalls(), clock=lambda: now[0], login="ana")
    first = sessions.credentials()
    now[0] = first.expires_at - REFRESH_BEFORE_S - 1
    assert sessions.credentials() is first
    now[0] = first.expires_at - REFRESH_BEFORE_S + 1
    assert sessions.credentials() is not first
    assert len(_assume_calls(iam_world)) == 2

    role[0], now[0] = Role.ADMIN, 0.0  # another role: its own session, and for an admin only with a code
    assert sessions.needs_code()
    with pytest.raises(MfaCodeNeeded):
        sessions.credentials()
    sessions.offer_code("135790")
    admin = sessions.credentials()
    assert ":assumed-role/gpuconsole-admin/ana" in admin.arn and not sessions.needs_code()
    now[0] = admin.expires_at  # expired: a new code is needed again
    assert sessions.needs_code()
    assert [c.params.get("TokenCode") for c in _assume_calls(iam_world)] == [None, None, "135790"]
    assert "135790" not in repr(sessions.describe()) and admin.secret_key not in repr(admin)


@pytest.mark.parametrize(("user", "image"), [("dev-user", "ami-760aaa0f"), ("dev-user", ""), ("admin-user", "")])
def test_a_launch_refused_by_aws_is_one_line(iam_world: IamWorld, home: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             user: str, image: str) -> None:
    iam_world.use_profile(monkeypatch, user)
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)
    code = ["--mfa-code", "123456"] if user == "dev-user" else []
    argv = ["instance", "launch", "--type", "g5.xlarge", "--region", TEST_REGION, "--yes", "--only-this-zone",
            "--cloud", "aws", "--no-db", "--gpus", "off", "--jobs", "off", "--config", str(config), *code]
    assert main([*argv, *(["--image", image] if image else [])]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert ("AccessDenied" in err) if user == "dev-user" else ("MFA code" in err)
    assert not [r for r in iam_world.moto.proxy.requests if r.action == "RunInstances"]
    if image:
        [record] = _records(home, "launch")
        assert record.result.startswith("denied: ") and "not authorized" in record.result


def test_whoami_of_an_admin_opens_the_admin_session_with_a_code(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)
    argv = ["access", "whoami", "--json", "--cloud", "aws", "--no-db", "--gpus", "off", "--jobs", "off",
            "--config", str(config)]

    assert main(argv) == 0
    closed = json.loads(capsys.readouterr().out)
    assert "needs a current MFA code" in closed["aws"]["session_error"] and closed["mfa"]["aws_session_open"] is False

    assert main([*argv, "--mfa-code", "975310"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert ":assumed-role/gpuconsole-admin/" in answer["aws"]["acts_as"]
    assert answer["mfa"]["aws_serial"] == MFA_SERIAL and answer["mfa"]["aws_session_open"] is True
    assert [c.params["TokenCode"] for c in _assume_calls(iam_world)] == ["975310"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a folder that GPUCONSOLE_SITE_DIR may name")
def test_the_site_roles_bind_every_login_and_its_own_config_cannot_replace_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir(mode=0o755)
    (site / "config.toml").write_text(
        '[aws.roles]\ndeveloper = "arn:aws:iam::123456789012:role/gpuconsole-developer"\n', encoding="utf-8")
    mine = tmp_path / "mine.toml"
    mine.write_text('[aws.roles]\ndeveloper = "arn:aws:iam::123456789012:role/anything-i-like"\n', encoding="utf-8")
    assert load_aws_roles(mine).arn(Role.DEVELOPER).endswith(":role/anything-i-like")  # no site settings yet
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(site))  # a root-owned folder: honoured
    assert load_aws_roles(mine).arn(Role.DEVELOPER).endswith(":role/gpuconsole-developer")


def test_a_named_config_file_that_is_missing_sets_no_roles(tmp_path: Path) -> None:
    assert load_aws_roles(tmp_path / "none.toml") is None
