"""moto enforcing IAM: its own server process started with ``INITIAL_NO_AUTH_ACTION_COUNT=0``
(and CloudWatch Logs' resources and ``${aws:username}`` evaluated, :mod:`tests.moto_iam_server`).

With that setting moto checks every request's signature against the IAM users it holds, their
identity policies, the roles' permissions and the trust relationship of ``AssumeRole``. It
counts actions for the whole process, so this peer runs its own process (the shared
``moto_server`` of :mod:`tests.aws_peer` stays open) and arranges each test's world in a window
opened with ``POST /moto-api/reset-auth`` (a count of free actions), closed again before the
test acts. A :class:`~tests.aws_peer.FaultProxy` in front records what was sent.

Fixtures:
    ``iam_moto`` (module): the enforcing moto's URL and its proxy.
    ``iam_world`` (function): a fresh account with two IAM users (``dev-user`` may assume only
        the developer role, ``admin-user`` also the admin role), the three gpuconsole roles with
        the policies ``access iam-policy`` prints, and one running instance; boto3 points at the
        proxy and ``~/.aws`` is a private temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpuconsole.core.access import iam_policy
from tests.aws_peer import _MOTO_AMIS, MOTO_LINUX_AMI, TEST_REGION, FaultProxy, free_port, reset_moto

ACCOUNT = "123456789012"  # moto's default account
SETUP_ACTIONS = 200  # free actions for arranging a world; enforcement starts once they are used or closed


def _post(url: str, body: bytes) -> None:
    # A form content type would leave Flask's request.data empty: moto reads the raw body.
    request = urllib.request.Request(url, method="POST", data=body, headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
        response.read()


def free_actions(moto_url: str, count: int) -> None:
    """Let the next ``count`` actions through unchecked (0: enforce from now on)."""
    _post(f"{moto_url}/moto-api/reset-auth", str(count).encode())


@dataclass
class IamMoto:
    url: str
    proxy: FaultProxy


@dataclass
class IamWorld:
    """One arranged account: users' keys, role ARNs, an instance, and the folders boto3 reads."""

    moto: IamMoto
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # user → (key id, secret)
    role_arns: dict[str, str] = field(default_factory=dict)  # gpuconsole role → IAM role ARN
    instance_id: str = ""
    aws_dir: Path = Path()

    def user_arn(self, user: str) -> str:
        return f"arn:aws:iam::{ACCOUNT}:user/{user}"

    def client(self, service: str, user: str) -> Any:
        """A client straight to moto (not recorded), signed as ``user``."""
        import boto3

        key, secret = self.keys[user]
        return boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret).client(
            service, region_name=TEST_REGION, endpoint_url=self.moto.url)

    def instance_state(self) -> str:
        """The instance's state, read in an unchecked action (the IAM users may not describe).

        A console's thread that is still winding down may take the free action first: then the
        read is denied, and it is tried again with the next one."""
        from botocore.exceptions import ClientError

        for attempt in range(5):
            free_actions(self.moto.url, 1)
            try:
                answer = self.client("ec2", "admin-user").describe_instances(InstanceIds=[self.instance_id])
                break
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("AccessDenied", "UnauthorizedOperation") or attempt == 4:
                    raise
            finally:
                free_actions(self.moto.url, 0)
        return answer["Reservations"][0]["Instances"][0]["State"]["Name"]

    def use_profile(self, monkeypatch: pytest.MonkeyPatch, user: str, profile: str = "default") -> None:
        """Make ``user``'s key the only credentials boto3 finds (a credentials-file profile)."""
        key, secret = self.keys[user]
        creds = self.aws_dir / "credentials"
        creds.write_text(f"[{profile}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
        creds.chmod(0o600)
        monkeypatch.setenv("AWS_PROFILE", profile)

    def config(self, path: Path, **extra: str) -> Path:
        """A gpuconsole configuration file mapping the three roles (plus ``[aws]`` keys)."""
        lines = ["[aws]", *(f"{k} = {json.dumps(v)}" for k, v in extra.items()), "", "[aws.roles]"]
        lines += [f"{role} = {json.dumps(arn)}" for role, arn in sorted(self.role_arns.items())]
        path.write_text("\n".join(lines) + "\n")
        return path


@pytest.fixture(scope="module")
def iam_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IamMoto]:
    folder = tmp_path_factory.mktemp("moto-iam")
    amis = folder / "amis.json"
    amis.write_text(json.dumps(_MOTO_AMIS))
    port = free_port()
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0", "MOTO_AMIS_PATH": str(amis),
           "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    # moto's server, with CloudWatch Logs resources and ${aws:username} evaluated (tests.moto_iam_server)
    process = subprocess.Popen([sys.executable, "-m", "tests.moto_iam_server", "-H", "127.0.0.1", "-p", str(port)],
                               env=env, cwd=root,
                               stdout=subprocess.DEVNULL, stderr=(folder / "moto.log").open("wb"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                free_actions(url, 0)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"moto did not start: {(folder / 'moto.log').read_text()[-2000:]}") from None
                time.sleep(0.1)
        proxy = FaultProxy(url).start()
        try:
            yield IamMoto(url, proxy)
        finally:
            proxy.stop()
    finally:
        process.terminate()
        process.wait(timeout=30)


def _trust(role: iam_policy.IamRole, principals: list[str]) -> str:
    """The role's trust policy, naming the users instead of the account (moto matches ARNs)."""
    trust = json.loads(json.dumps(role.trust))
    for statement in trust["Statement"]:
        statement["Principal"] = {"AWS": principals}
    return json.dumps(trust)


def _user_policy(assumable: list[str]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"], "Resource": assumable},
        {"Effect": "Allow", "Action": ["iam:GetUser", "iam:ListMFADevices", "iam:ListAccessKeys", "iam:CreateAccessKey",
                                       "iam:UpdateAccessKey", "iam:DeleteAccessKey"], "Resource": "*"},
    ]})


@pytest.fixture
def iam_world(iam_moto: IamMoto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[IamWorld]:
    import boto3

    reset_moto(iam_moto.url)
    iam_moto.proxy.reset()
    free_actions(iam_moto.url, SETUP_ACTIONS)
    setup = {"region_name": TEST_REGION, "endpoint_url": iam_moto.url, "aws_access_key_id": "AKIDSETUP0000000",
             "aws_secret_access_key": "setup"}
    iam = boto3.session.Session().client("iam", **setup)
    world = IamWorld(iam_moto, aws_dir=tmp_path / "aws")
    world.aws_dir.mkdir(mode=0o700)
    by_role = {r.gpuconsole_role: r for r in iam_policy.roles(ACCOUNT)}
    trusted = {"admin": [world.user_arn("admin-user")],
               "developer": [world.user_arn("dev-user"), world.user_arn("admin-user")],
               "auditor": [world.user_arn("dev-user"), world.user_arn("admin-user")]}
    for name, role in by_role.items():
        arn = iam.create_role(RoleName=role.name, AssumeRolePolicyDocument=_trust(role, trusted[name]))["Role"]["Arn"]
        iam.put_role_policy(RoleName=role.name, PolicyName=role.name, PolicyDocument=json.dumps(role.policy))
        world.role_arns[name] = arn
    for user, assumable in (("dev-user", ["developer", "auditor"]), ("admin-user", ["admin", "developer", "auditor"])):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="gpuconsole-assume",
                            PolicyDocument=_user_policy([world.role_arns[r] for r in assumable]))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        world.keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
    ec2 = boto3.session.Session().client("ec2", **setup)
    world.instance_id = ec2.run_instances(ImageId=MOTO_LINUX_AMI, InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
                                          TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                              {"Key": iam_policy.TAG_KEY, "Value": iam_policy.TAG_VALUE}]}],
                                          )["Instances"][0]["InstanceId"]
    free_actions(iam_moto.url, 0)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                "AWS_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", iam_moto.proxy.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(world.aws_dir / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(world.aws_dir / "credentials"))
    yield world
    iam_moto.proxy.reset()
