"""The service identity of automatic actions, against moto enforcing IAM: with ``[aws.roles]
automation`` set, a budget that acts by itself stops a tagged instance through the automation
role (assumed by the service's own credentials, no MFA, the session named for automation and
its source identity the login), and a login's own console runs no automatic cloud action: it is
denied, audited, and says where such actions run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuconsole.core.access import iam_policy
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.aws_roles import AUTOMATION_SESSION, load_aws_roles, os_login
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import Budget, BudgetAction, BudgetPeriod, Threshold
from tests.aws_peer import TEST_REGION
from tests.aws_peer_iam import ACCOUNT, SETUP_ACTIONS, IamWorld, _trust, free_actions, iam_moto, iam_world  # noqa: F401
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

MFA_SERIAL = f"arn:aws:iam::{ACCOUNT}:mfa/admin-user"  # the admin's device, for the admin role
RULE = (Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL)),)


@pytest.fixture
def automation(iam_world: IamWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The automation role as ``access iam-policy`` prints it, trusted by ``service-user`` alone
    (the bastion's service role, in moto); the config naming it; a users table and audit log."""
    import boto3

    free_actions(iam_world.moto.url, SETUP_ACTIONS)
    try:
        iam = boto3.session.Session().client("iam", region_name=TEST_REGION, endpoint_url=iam_world.moto.url,
                                             aws_access_key_id="AKIDSETUP0000000", aws_secret_access_key="setup")
        role = next(r for r in iam_policy.service_roles(ACCOUNT) if r.gpuconsole_role == "automation")
        arn = iam.create_role(RoleName=role.name, AssumeRolePolicyDocument=_trust(role, [iam_world.user_arn("service-user")])
                              )["Role"]["Arn"]
        iam.put_role_policy(RoleName=role.name, PolicyName=role.name, PolicyDocument=json.dumps(role.policy))
        iam.create_user(UserName="service-user")
        iam.put_user_policy(UserName="service-user", PolicyName="assume-automation", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"],
                                                     "Resource": arn}]}))
        key = iam.create_access_key(UserName="service-user")["AccessKey"]
        iam_world.keys["service-user"] = (key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        free_actions(iam_world.moto.url, 0)
    iam_world.role_arns["automation"] = arn
    monkeypatch.setenv("GPUCONSOLE_USERS", str(tmp_path / "users.json"))
    monkeypatch.setenv("GPUCONSOLE_MFA", str(tmp_path / "mfa.json"))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    UsersTable(tmp_path / "users.json").init(current_user())  # this login: an admin, whose role needs MFA
    return iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)


def console_on(store: Store, config: Path, *, automation: bool) -> Console:
    options = ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(TEST_REGION,), gpus="off", jobs="off"),
                             interval=0.3, timeout=20, clock=lambda: time.time() + 3600, config_path=config,
                             automation=automation)
    return Console(options, store=store)


def managed() -> Budget:
    return Budget("fleet", 0.01, BudgetPeriod.CUSTOM, f"tag:{iam_policy.TAG_KEY}={iam_policy.TAG_VALUE}", RULE,
                  automatic=True, starts=time.time() - 86400)


def stops(world: IamWorld) -> list:
    return [r for r in world.moto.proxy.requests if r.action == "StopInstances"]


def test_the_table_takes_an_automation_role(automation: Path) -> None:
    settings = load_aws_roles(automation)
    assert settings is not None and settings.automation_arn.endswith(":role/gpuconsole-automation")


def test_an_automatic_budget_action_runs_as_the_automation_role_without_mfa(
        iam_world: IamWorld, automation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    iam_world.use_profile(monkeypatch, "service-user")
    store = Store(tmp_path / "cache.db")
    store.save_budget(managed())  # added earlier, by an admin with MFA (budget add)
    console = console_on(store, automation, automation=True)
    try:
        console.start(open_store=False)
        wait_for(lambda: bool(stops(iam_world)), timeout=60)
        assert console.services.budget_ops.wait_idle(30)
    finally:
        console.close()
        store.close()
    assert stops(iam_world)[0].params["InstanceId.1"] == iam_world.instance_id
    assert iam_world.instance_state() in ("stopping", "stopped")
    calls = [r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"]
    assert calls and {c.params["RoleArn"] for c in calls} == {iam_world.role_arns["automation"]}
    for call in calls:
        assert call.params["RoleSessionName"] == AUTOMATION_SESSION and call.params["SourceIdentity"] == os_login()
        assert "SerialNumber" not in call.params and "TokenCode" not in call.params
    [record] = [r for r in AuditLog(tmp_path / "audit.db").records() if r.action == "stop" and r.result != "started"]
    assert record.result.startswith("ok") and "automatic:fleet" in record.params


def test_a_logins_own_console_runs_no_automatic_cloud_action(
        iam_world: IamWorld, automation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    store = Store(tmp_path / "cache.db")
    store.save_budget(managed())
    console = console_on(store, automation, automation=False)
    audit = AuditLog(tmp_path / "audit.db")

    def denied() -> list:
        return [r for r in audit.records() if r.action == "stop" and r.result.startswith("denied")]

    try:
        # The admin opens the AWS admin session (ctrl+p): the fleet is read, the budget is due.
        console.services.guard.verify_mfa("246810", "Opening the AWS admin session", ActionKind.START)
        console.start(open_store=False)
        wait_for(lambda: bool(denied()), timeout=60)
        assert console.services.budget_ops.wait_idle(30)
    finally:
        console.close()
        store.close()
    [record] = denied()
    assert record.actor == current_user() and "automatic:fleet" in record.params
    assert "automatic actions run as [aws.roles] automation (the autopilot service" in record.result
    assert stops(iam_world) == [] and iam_world.instance_state() == "running"
    calls = [r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"]
    assert calls and {c.params["RoleArn"] for c in calls} == {iam_world.role_arns["admin"]}


def _enforce(config: Path) -> list[str]:
    return ["budget", "check", "--enforce", "--cloud", "aws", "--region", TEST_REGION, "--no-db", "--gpus", "off",
            "--jobs", "off", "--wait", "10", "--config", str(config)]


def test_budget_enforcement_acts_as_automation_which_a_logins_own_keys_cannot_assume(
        iam_world: IamWorld, automation: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuconsole.cli.main import main

    with automation.open("a") as config:
        config.write('\n[[budgets]]\nname = "fleet"\namount = 0.0001\nperiod = "custom"\nstarts = 2020-01-01\n'
                     f'scope = "tag:{iam_policy.TAG_KEY}={iam_policy.TAG_VALUE}"\nthresholds = ["100:notify+stop-all"]\n'
                     'automatic = true\n')
    iam_world.use_profile(monkeypatch, "admin-user")  # a person's own keys: the trust policy names the service alone
    assert main(_enforce(automation)) == 2
    err = capsys.readouterr().err
    assert "cannot check budgets" in err and "AccessDenied" in err and "admin-user is not authorized" in err, err
    assume = [r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"]
    assert assume and {c.params["RoleArn"] for c in assume} == {iam_world.role_arns["automation"]}
    assert stops(iam_world) == [] and iam_world.instance_state() == "running"

    iam_world.moto.proxy.reset()
    iam_world.use_profile(monkeypatch, "service-user")  # the machine's service role
    assert main(_enforce(automation)) == 1, capsys.readouterr().err
    assert f"stopped {iam_world.instance_id}" in capsys.readouterr().out
    assert [r.params["InstanceId.1"] for r in stops(iam_world)] == [iam_world.instance_id]
    for call in (r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"):
        assert call.params["RoleArn"] == iam_world.role_arns["automation"]
        assert call.params["RoleSessionName"] == AUTOMATION_SESSION and "TokenCode" not in call.params


def test_an_autopilot_action_in_a_logins_own_session_is_denied_and_audited(automation: Path, tmp_path: Path) -> None:
    from gpuconsole.core.access.aws_roles import AwsRoleSessions
    from gpuconsole.core.access.guard import default_guard
    from gpuconsole.core.ops.actions import ActionDenied, ActionLog, ActionRequest, autopilot_confirmation, run_action

    guard = default_guard(config=automation)
    guard.aws_roles = AwsRoleSessions(load_aws_roles(automation), lambda: guard.principal.role, sts=None)
    ran: list[str] = []
    request = ActionRequest(ActionKind.STOP, "i-0123456789abcdef0", TEST_REGION, autopilot_confirmation("idle"),
                            (("rule", "idle"),))
    with pytest.raises(ActionDenied, match=r"automatic actions run as \[aws.roles\] automation"):
        run_action(request, lambda: ran.append("stop") or "stopped", ActionLog(guard=guard))
    assert ran == []
    [record] = [r for r in AuditLog(tmp_path / "audit.db").records() if r.action == "stop"]
    assert record.actor == "autopilot:idle" and record.result.startswith("denied: automatic actions run as")
    assert f"not in {os_login()}'s own AWS session" in record.result


@pytest.mark.parametrize(("command", "role"), [(["autopilot", "run", "--once", "--lock", "autopilot.lock"], "automation"),
                                               (["autopilot", "plan"], "admin")])
def test_the_autopilot_service_reads_and_acts_as_automation_and_its_plan_never_does(
        iam_world: IamWorld, automation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        command: list[str], role: str) -> None:
    from gpuconsole.cli.main import main

    monkeypatch.setenv("GPUCONSOLE_AUTOPILOT_DB", str(tmp_path / "autopilot.db"))
    iam_world.use_profile(monkeypatch, "service-user" if role == "automation" else "admin-user")
    with automation.open("a") as config:  # a rule, so the autopilot polls the fleet
        config.write('\n[[rules]]\nname = "idle"\nkind = "idle-stop"\nscope = "all"\nidle_for = "30m"\n')
    argv = [*command, "--cloud", "aws", "--region", TEST_REGION, "--gpus", "off", "--jobs", "off", "--no-db",
            "--config", str(automation)]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    arns = {r.params["RoleArn"] for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"}
    if role == "automation":
        assert arns == {iam_world.role_arns["automation"]}
    else:  # the plan acts on nothing: the login's own session (an admin's, which waits for a code)
        assert iam_world.role_arns["automation"] not in arns
