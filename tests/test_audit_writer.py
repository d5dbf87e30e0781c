"""Without a relay, each login's audit copy is written with its own keys: what holds is who those
keys are. Against moto enforcing IAM (CloudWatch Logs' resources and ``${aws:username}``
evaluated), with ``gpuconsole-audit-writer`` as ``access iam-policy`` prints it attached to each
IAM user: the console writes the login's stream; the same keys used straight through boto3,
bypassing the console, cannot delete, cut or write another login's stream; another login's keys
cannot touch this one's; and with ``[audit] account`` the console sends, and acts, only as the
login's own IAM user.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from gpuconsole.cli.main import main
from gpuconsole.core.access import audit_sink, iam_policy, site
from gpuconsole.core.access.audit import AuditError
from gpuconsole.core.access.guard import default_guard
from tests.aws_peer import TEST_REGION, reset_moto
from tests.aws_peer_iam import ACCOUNT, SETUP_ACTIONS, IamMoto, free_actions, iam_moto  # noqa: F401 - fixture

GROUP = iam_policy.AUDIT_GROUP
LOGIN = audit_sink.login_name()  # the login these tests run as; its IAM user has the same name
HOST = socket.gethostname()
OTHER = "alice"


@pytest.fixture(autouse=True)
def _sinks_closed():
    yield
    audit_sink.close_all()


class Writers:
    """IAM users named after logins, each with gpuconsole-audit-writer alone, and their keys."""

    def __init__(self, moto: IamMoto, aws_dir: Path) -> None:
        self.moto, self.aws_dir, self.keys = moto, aws_dir, {}

    def session(self, user: str):
        import boto3

        key, secret = self.keys[user]
        return boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret, region_name=TEST_REGION)

    def logs(self, user: str):
        return self.session(user).client("logs", endpoint_url=self.moto.url)

    def profile(self, user: str, name: str = "audit") -> None:
        """``user``'s keys as the login's own profile ``name`` (the file the sink reads)."""
        key, secret = self.keys[user]
        (self.aws_dir / "credentials").write_text(f"[{name}]\naws_access_key_id = {key}\n"
                                                  f"aws_secret_access_key = {secret}\n")

    def streams(self) -> dict[str, list[int]]:
        """Every stream of the group and the record numbers in it, read in an unchecked action."""
        free_actions(self.moto.url, 1)
        try:
            logs = self.session(LOGIN).client("logs", endpoint_url=self.moto.url)
            events = logs.filter_log_events(logGroupName=GROUP)["events"]
        except logs.exceptions.ResourceNotFoundException:
            return {}  # nothing was ever sent
        finally:
            free_actions(self.moto.url, 0)
        out: dict[str, list[int]] = {}
        for event in events:
            out.setdefault(event["logStreamName"], []).append(json.loads(event["message"])["record"]["seq"])
        return out


@pytest.fixture
def writers(iam_moto: IamMoto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Writers:  # noqa: F811
    import boto3

    reset_moto(iam_moto.url)
    free_actions(iam_moto.url, SETUP_ACTIONS)
    iam = boto3.session.Session().client("iam", region_name=TEST_REGION, endpoint_url=iam_moto.url,
                                         aws_access_key_id="AKIDSETUP0000000", aws_secret_access_key="setup")
    aws_dir = tmp_path / "aws"
    aws_dir.mkdir(mode=0o700)
    found = Writers(iam_moto, aws_dir)
    policy = json.dumps(iam_policy.audit_writer_policy(ACCOUNT))
    for user in (LOGIN, OTHER):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="gpuconsole-audit-writer", PolicyDocument=policy)
        key = iam.create_access_key(UserName=user)["AccessKey"]
        found.keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
    free_actions(iam_moto.url, 0)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(aws_dir / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws_dir / "credentials"))
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "state" / "audit.db"))
    config = tmp_path / "config.toml"
    config.write_text(f'[audit]\ncloudwatch_log_group = "{GROUP}"\nregion = "{TEST_REGION}"\nprofile = "audit"\n'
                      f'endpoint_url = "{iam_moto.url}"\naccount = "{ACCOUNT}"\n')
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(config))
    return found


def act(n: int) -> None:
    audit = default_guard().audit
    for i in range(n):
        audit.check_writable()
        audit.append(LOGIN, "admin", "stop", f"i-{i}", (), "ok")
    audit_sink.close_all()


def denied(call, **kwargs) -> bool:
    """Whether IAM refused the call (moto answers a JSON service's denial in XML: botocore then
    keeps the status as the code and the document as the message)."""
    try:
        call(**kwargs)
    except ClientError as exc:
        error = exc.response["Error"]
        return error["Code"] in ("AccessDenied", "AccessDeniedException", "403") and (
            "AccessDenied" in error["Code"] or "<Code>AccessDenied</Code>" in error.get("Message", ""))
    return False


def test_the_logins_keys_write_its_stream_and_used_directly_cannot_cut_or_rewrite_it(writers, capsys) -> None:
    """The console sends as the login's own IAM user; the same keys, taken from the same file and
    used with boto3 directly, may append to that stream and read the group, nothing else."""
    writers.profile(LOGIN)
    act(2)
    mine = f"{HOST}/{LOGIN}"
    assert writers.streams() == {mine: [1, 2]}
    import boto3

    logs = boto3.session.Session(profile_name="audit", region_name=TEST_REGION).client(
        "logs", endpoint_url=writers.moto.url)  # the sink's own profile, bypassing the console
    assert denied(logs.delete_log_stream, logGroupName=GROUP, logStreamName=mine)
    assert denied(logs.delete_log_group, logGroupName=GROUP)
    assert denied(logs.put_retention_policy, logGroupName=GROUP, retentionInDays=1)
    assert denied(logs.delete_retention_policy, logGroupName=GROUP)
    theirs = f"{HOST}/{OTHER}"
    assert denied(logs.create_log_stream, logGroupName=GROUP, logStreamName=theirs)
    assert writers.streams() == {mine: [1, 2]}
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    out = capsys.readouterr().out
    assert "2 record(s)" in out and f"read as AWS account {ACCOUNT}" in out


def test_another_logins_keys_cannot_write_delete_or_add_to_this_logins_stream(writers) -> None:
    """The per-stream policy: alice's keys reach neither the login's stream nor the group."""
    writers.profile(LOGIN)
    act(1)
    mine = f"{HOST}/{LOGIN}"
    alice = writers.logs(OTHER)
    forged = {"schema": audit_sink.SCHEMA, "host": HOST, "login": LOGIN, "record": {"seq": 2}}
    event = [{"timestamp": int(time.time() * 1000), "message": json.dumps(forged)}]
    assert denied(alice.put_log_events, logGroupName=GROUP, logStreamName=mine, logEvents=event)
    assert denied(alice.delete_log_stream, logGroupName=GROUP, logStreamName=mine)
    assert denied(alice.create_log_stream, logGroupName=GROUP, logStreamName=f"{HOST}/someone-else")
    assert denied(alice.delete_log_group, logGroupName=GROUP)
    alice.create_log_stream(logGroupName=GROUP, logStreamName=f"{HOST}/{OTHER}")  # her own: allowed
    alice.put_log_events(logGroupName=GROUP, logStreamName=f"{HOST}/{OTHER}", logEvents=event)
    assert writers.streams() == {mine: [1], f"{HOST}/{OTHER}": [2]}


def test_keys_of_another_identity_are_refused_before_anything_runs_or_is_sent(writers, capsys) -> None:
    """With ``[audit] account``, the login's profile holding another user's keys (they could be
    another account's, or keys that may delete) stops actions in one line and sends nothing."""
    writers.profile(OTHER)
    audit = default_guard().audit
    with pytest.raises(AuditError, match=f"arn:aws:iam::{ACCOUNT}:user/{OTHER}, not as {LOGIN}'s own IAM user"):
        audit.check_writable()
    audit.append(LOGIN, "admin", "stop", "i-0", (), "ok")  # a denial's own record, say: it waits queued
    audit_sink.close_all()
    assert writers.streams() == {}
    capsys.readouterr()
    assert main(["audit", "verify"]) == 3  # cannot be verified: the copy those keys read is not this login's
    err = capsys.readouterr().err
    assert f"user/{OTHER}, not as {LOGIN}'s own IAM user" in err and "TAMPERED" not in err


@pytest.fixture
def site_dir(monkeypatch: pytest.MonkeyPatch):
    if os.geteuid() != 0:
        pytest.skip("needs root: GPUCONSOLE_SITE_DIR is honoured only for a root-owned folder")
    folder = Path(tempfile.mkdtemp(prefix="gpuconsole-site-"))
    os.chmod(folder, 0o755)
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(("extra", "refused"), [("", True), ('relay = "/run/gpuconsole/audit.sock"\n', False),
                                                (f'account = "{ACCOUNT}"\n', False)])
def test_a_site_copy_each_login_would_send_as_it_likes_is_refused_naming_the_key(site_dir, extra, refused,
                                                                                  capsys) -> None:
    """A site's CloudWatch copy with neither a relay nor an account: every login would write it
    with whatever keys its own files hold, so start-up refuses it in one line."""
    config = site_dir / "config.toml"
    config.write_text(f'[audit]\ncloudwatch_log_group = "{GROUP}"\nregion = "{TEST_REGION}"\n{extra}')
    os.chmod(config, 0o644)
    if not refused:
        site.load_site().check_audit_copy()
        return
    with pytest.raises(site.SiteSettingsRefused, match=r"\[audit\] cloudwatch_log_group in .* neither relay nor account"):
        site.resolve()
    capsys.readouterr()
    assert main(["audit", "list", "--local"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[audit] relay" in err and "[audit] account" in err


@pytest.mark.parametrize(("arn", "may"), [
    (f"arn:aws:iam::{ACCOUNT}:user/{LOGIN}", True),
    (f"arn:aws:iam::{ACCOUNT}:user/ops/{LOGIN}", True),  # an IAM path: still that user
    (f"arn:aws:iam::999999999999:user/{LOGIN}", False),  # the same name in another account
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/gpuconsole-admin/{LOGIN}", False),  # a role: its session name is chosen
    (f"arn:aws:iam::{ACCOUNT}:user/{LOGIN}-admin", False),
    (f"arn:aws:iam::{ACCOUNT}:root", False),
])
def test_only_the_logins_own_iam_user_in_the_account_may_write_its_copy(arn: str, may: bool) -> None:
    from gpuconsole.core.access.audit_writer import writer_problem

    assert (writer_problem(arn, ACCOUNT, LOGIN) is None) is may
