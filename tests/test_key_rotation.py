"""``gpuconsole keys rotate`` against moto enforcing IAM: the file, the keys in IAM, the refusals,
the audit trail, and no secret anywhere but the credentials file."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.guard import default_guard
from gpuconsole.core.access.key_rotation import (
    KeyRotation,
    KeyRotationError,
    RetiredKeys,
    iam_keys_for,
    profile_key,
    replace_key,
)
from gpuconsole.core.ops.actions import ActionLog
from tests.aws_peer_iam import IamWorld, free_actions, iam_moto, iam_world  # noqa: F401 - fixtures
from tests.test_aws_roles import home  # noqa: F401 - fixture

PROFILE = "ml"


def _keys(world: IamWorld, user: str) -> dict[str, str]:
    """IAM's view of ``user``'s keys: id → status (read in one unchecked action)."""
    free_actions(world.moto.url, 1)
    try:
        answer = world.client("iam", "admin-user").list_access_keys(UserName=user)
    finally:
        free_actions(world.moto.url, 0)
    return {k["AccessKeyId"]: k["Status"] for k in answer["AccessKeyMetadata"]}


def _profile_file(world: IamWorld, user: str) -> Path:
    """A credentials file with a plain-key profile ``ml`` between two others, and a comment."""
    key, secret = world.keys[user]
    path = world.aws_dir / "credentials"
    path.write_text("# team keys\n[other]\naws_access_key_id = AKIAOTHER000000000\naws_secret_access_key = keep-me\n\n"
                    f"[{PROFILE}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\nregion = us-east-1\n\n"
                    "[last]\naws_access_key_id = AKIALAST0000000000\naws_secret_access_key = keep-me-too\n")
    path.chmod(0o600)
    return path


def _rotate(*extra: str) -> int:
    return main(["keys", "rotate", "--profile", PROFILE, "--yes", *extra])


def _secrets_nowhere(secrets: list[str], *texts: str) -> None:
    for secret in secrets:
        for text in texts:
            assert secret not in text


def test_rotation_installs_a_new_key_and_deactivates_the_old_one(
        iam_world: IamWorld, home: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    path = _profile_file(iam_world, "dev-user")
    old_key, old_secret = iam_world.keys["dev-user"]

    assert _rotate() == 0

    new = profile_key(PROFILE)
    assert new.key_id != old_key and new.secret != old_secret
    assert _keys(iam_world, "dev-user") == {old_key: "Inactive", new.key_id: "Active"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.startswith("# team keys\n[other]\n") and "keep-me\n" in text and "keep-me-too\n" in text
    assert "region = us-east-1" in text and old_key not in text
    out = capsys.readouterr()
    assert "AWS accepts the new key: arn:aws:iam::123456789012:user/dev-user" in out.out
    assert out.err == ""
    records = AuditLog(home / "audit.db").records()
    assert [(r.action, r.result) for r in records if r.result != "started"] == [("key-create", "ok"), ("key-deactivate", "ok")]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    _secrets_nowhere([new.secret, old_secret], out.out, out.err, json.dumps([(r.target, r.params, r.result)
                                                                             for r in records]), logged)
    assert new.key_id not in out.out and old_key not in json.dumps([r.params for r in records])


def test_the_new_key_is_checked_again_while_iam_has_not_caught_up(
        iam_world: IamWorld, home: Path) -> None:
    _profile_file(iam_world, "dev-user")
    iam_world.moto.proxy.fail("GetCallerIdentity", "InvalidClientTokenId", "The security token included in the "
                              "request is invalid.", status=403, times=2)
    assert _rotate() == 0
    assert len([r for r in iam_world.moto.proxy.requests if r.action == "GetCallerIdentity"]) == 3
    assert sorted(_keys(iam_world, "dev-user").values()) == ["Active", "Inactive"]


def test_a_key_aws_never_accepts_leaves_the_old_key_in_place(iam_world: IamWorld, home: Path) -> None:
    path = _profile_file(iam_world, "dev-user")
    before = path.read_text()
    iam_world.moto.proxy.fail("GetCallerIdentity", "InvalidClientTokenId", "invalid", status=403)
    rotation = KeyRotation(profile_key(PROFILE), iam_keys_for(PROFILE), ActionLog(guard=default_guard()),
                           RetiredKeys(home / "retired.json"), sleep=lambda s: None)
    with pytest.raises(KeyRotationError, match="did not accept the new key .* the old key is back"):
        rotation.run()
    assert path.read_text() == before
    statuses = _keys(iam_world, "dev-user")
    assert statuses[iam_world.keys["dev-user"][0]] == "Active" and len(statuses) == 2


def test_a_user_with_two_keys_is_refused_before_anything_changes(
        iam_world: IamWorld, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _profile_file(iam_world, "dev-user")
    free_actions(iam_world.moto.url, 1)
    iam_world.client("iam", "admin-user").create_access_key(UserName="dev-user")
    free_actions(iam_world.moto.url, 0)
    before = path.read_text()

    assert _rotate() == 1

    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already has two access keys" in err and "Traceback" not in err
    assert path.read_text() == before
    assert not [r for r in iam_world.moto.proxy.requests if r.action == "CreateAccessKey"]


def test_the_old_key_is_deleted_after_the_grace_on_a_later_run(iam_world: IamWorld, home: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _profile_file(iam_world, "dev-user")
    first = iam_world.keys["dev-user"][0]
    assert _rotate() == 0
    second = profile_key(PROFILE).key_id
    assert _rotate() == 1  # within the default grace: the retired key still counts
    assert "wait for its grace to end" in capsys.readouterr().err
    assert _rotate("--grace", "0") == 0
    third = profile_key(PROFILE).key_id
    assert _keys(iam_world, "dev-user") == {second: "Inactive", third: "Active"}
    assert first not in _keys(iam_world, "dev-user")
    assert "deleted the old key" in capsys.readouterr().out
    assert [r.action for r in AuditLog(home / "audit.db").records() if r.result == "ok"].count("key-delete") == 1


@pytest.mark.parametrize(("config", "message"), [
    (f"[profile {PROFILE}]\nsso_session = corp\nsso_account_id = 123456789012\n", "uses SSO"),
    (f"[profile {PROFILE}]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = base\n", "uses a role"),
    (f"[profile {PROFILE}]\ncredential_source = Ec2InstanceMetadata\n", "instance profile"),
    ("", "has no access key"),
])
def test_a_profile_that_is_not_a_plain_key_is_refused(iam_world: IamWorld, home: Path,
                                                       capsys: pytest.CaptureFixture[str], config: str,
                                                       message: str) -> None:
    (iam_world.aws_dir / "config").write_text(config)
    if not config:
        (iam_world.aws_dir / "credentials").write_text("[other]\naws_access_key_id = AKIAOTHER000000000\n")
    assert _rotate() == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not iam_world.moto.proxy.requests


def test_rotation_needs_a_yes_from_a_script(iam_world: IamWorld, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _profile_file(iam_world, "dev-user")
    assert main(["keys", "rotate", "--profile", PROFILE]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert not iam_world.moto.proxy.requests


def test_an_auditor_may_not_rotate(iam_world: IamWorld, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuconsole.core.access.access import UsersTable, current_user
    from gpuconsole.model import Role

    UsersTable(home / "users.json").add("boss", Role.ADMIN)
    UsersTable(home / "users.json").set_role(current_user(), Role.AUDITOR)
    _profile_file(iam_world, "dev-user")
    assert _rotate() == 1
    assert "auditors may change nothing" in capsys.readouterr().err
    assert not [r for r in iam_world.moto.proxy.requests if r.action == "CreateAccessKey"]
    assert [r.result.split(":")[0] for r in AuditLog(home / "audit.db").records()] == ["denied"]


def test_replace_key_touches_only_the_profile() -> None:
    text = "[a]\naws_access_key_id = A\n[b]\n aws_access_key_id=B\naws_secret_access_key = b\n"
    assert replace_key(text, "b", "N", "S") == "[a]\naws_access_key_id = A\n[b]\naws_access_key_id = N\naws_secret_access_key = S\n"


def test_the_demo_rotates_nothing(iam_world: IamWorld, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _profile_file(iam_world, "dev-user")
    assert main(["keys", "rotate", "--profile", PROFILE, "--yes", "--demo"]) == 2
    assert "drop --demo" in capsys.readouterr().err
    assert not iam_world.moto.proxy.requests
