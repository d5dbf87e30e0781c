"""``gpuconsole keys rotate``: a new IAM access key for a profile, the old one retired after a grace.

The steps, each through the action path (role check and an audit record, done or refused):

1. on a later run, delete the keys this rotation deactivated more than ``grace`` days ago;
2. create a new key for the profile's IAM user (refused while the user has two keys: IAM's limit);
3. write it into the shared credentials file, atomically, the file kept at 0600;
4. check it with ``sts:GetCallerIdentity``, retrying while IAM's change propagates (on failure
   the file gets its old key back and the old key stays active);
5. deactivate the old key, and remember when, so step 1 deletes it after the grace.

Only a plain access key can be rotated: a profile of SSO, a role, a credential process or
an instance profile is refused in one line. No secret is ever written anywhere but the
credentials file: key ids are shown and audited shortened (``AKIA…WXYZ``).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconsole.backends.base import BackendError, BackendPermissionDenied
from gpuconsole.core import paths
from gpuconsole.core.ops.actions import ActionKind, ActionLog, ActionRequest, run_action

DAY = 86400.0
DEFAULT_GRACE_DAYS = 7
VERIFY_TRIES = 8  # IAM takes a few seconds to accept a new key everywhere
VERIFY_FIRST_WAIT_S = 0.5
# Settings of ~/.aws/config that mean the profile is not a plain access key.
NOT_A_KEY = (("sso_session", "SSO"), ("sso_start_url", "SSO"), ("role_arn", "a role"),
             ("credential_process", "a credential process"), ("web_identity_token_file", "a web identity"),
             ("credential_source", "an instance profile or container role"))


class KeyRotationError(Exception):
    """The rotation cannot start or could not finish; the message is one line."""


def short(key_id: str) -> str:
    """A key id as shown and audited: enough to recognise it, not the whole id."""
    return f"{key_id[:4]}…{key_id[-4:]}" if len(key_id) > 8 else "…"


@dataclass(frozen=True, slots=True)
class ProfileKey:
    """The key pair a profile holds in the shared credentials file."""

    profile: str
    path: Path
    key_id: str
    secret: str

    def __repr__(self) -> str:
        return f"ProfileKey(profile={self.profile!r}, key_id={short(self.key_id)!r})"


def aws_files(env: Mapping[str, str] = os.environ) -> tuple[Path, Path]:
    """The AWS config file and shared credentials file, where the AWS CLI finds them."""
    home = Path.home() / ".aws"
    return (Path(env.get("AWS_CONFIG_FILE") or home / "config").expanduser(),
            Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials").expanduser())


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise KeyRotationError(f"{path}: cannot be read: {str(exc).splitlines()[0]}") from None
    return parser


def profile_key(profile: str | None, env: Mapping[str, str] = os.environ) -> ProfileKey:
    """The plain access key of ``profile`` (``None``: ``$AWS_PROFILE`` or ``default``).

    Raises:
        KeyRotationError: the profile is SSO, a role, a process or has no key in the file.
    """
    name = profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    config_file, credentials_file = aws_files(env)
    config = _read_ini(config_file)
    section = name if name == "default" else f"profile {name}"
    if config.has_section(section):
        for key, what in NOT_A_KEY:
            if config.has_option(section, key):
                raise KeyRotationError(f"profile {name} uses {what} ({key} in {config_file}): "
                                       "only a plain access key can be rotated")
    if env.get("AWS_ACCESS_KEY_ID") and not profile:
        raise KeyRotationError("AWS_ACCESS_KEY_ID is set: the key in use comes from the environment, "
                               "not from a profile gpuconsole can update (pass --profile)")
    creds = _read_ini(credentials_file)
    if not creds.has_section(name):
        raise KeyRotationError(f"profile {name} has no access key in {credentials_file} "
                               "(an instance profile, SSO or a role has none to rotate)")
    if creds.has_option(name, "aws_session_token"):
        raise KeyRotationError(f"profile {name} holds temporary credentials (aws_session_token): nothing to rotate")
    key_id, secret = creds.get(name, "aws_access_key_id", fallback=""), creds.get(name, "aws_secret_access_key", fallback="")
    if not key_id or not secret:
        raise KeyRotationError(f"profile {name} in {credentials_file} lacks aws_access_key_id or aws_secret_access_key")
    return ProfileKey(name, credentials_file, key_id.strip(), secret.strip())


def replace_key(text: str, profile: str, key_id: str, secret: str) -> str:
    """``text`` (a credentials file) with ``profile``'s key pair replaced; the rest kept as it was."""
    out, inside = [], False
    header = re.compile(r"^\s*\[([^\]]+)\]\s*$")
    for line in text.splitlines(keepends=True):
        match = header.match(line)
        if match:
            inside = match.group(1).strip() == profile
        elif inside:
            name = line.split("=", 1)[0].strip().lower() if "=" in line else ""
            if name == "aws_access_key_id":
                line = f"aws_access_key_id = {key_id}\n"
            elif name == "aws_secret_access_key":
                line = f"aws_secret_access_key = {secret}\n"
        out.append(line)
    return "".join(out)


def write_credentials(path: Path, text: str) -> None:
    """Replace ``path`` atomically: a fresh 0600 file in the same folder, then renamed over it.

    ``mkstemp`` opens with ``O_EXCL`` under a random name, so nothing planted in the folder is
    followed; the folder itself is left as it is.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def iam_keys_for(profile: str | None) -> Callable[[str, str], Any]:
    """The IAM calls of ``profile``'s region and endpoint, signed with a given key pair."""

    def make(key_id: str, secret: str) -> Any:
        from gpuconsole.backends.registry import iam_keys

        return iam_keys(profile, key_id, secret)

    return make


class RetiredKeys:
    """When each key this rotation deactivated was deactivated (a 0600 JSON file of the state dir)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "retired-keys.json"

    def load(self) -> dict[str, float]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {str(k): float(v) for k, v in dict(data).items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError) as exc:
            raise KeyRotationError(f"{self.path}: cannot be read: {exc}") from None

    def save(self, retired: dict[str, float]) -> None:
        paths.write_private(self.path, json.dumps(retired, indent=2) + "\n")


class KeyRotation:
    """One rotation of ``key``'s IAM user, every step through ``actions`` (the guarded log).

    Args:
        key: the profile's key pair now.
        iam_for: makes the IAM calls for a key pair (:class:`gpuconsole.backends.aws.IamKeys`).
        actions: the action log whose guard admits and audits each step.
        retired: where the deactivation times are kept.
        say: shows one line of progress (never a secret).
    """

    def __init__(self, key: ProfileKey, iam_for: Callable[[str, str], Any], actions: ActionLog, retired: RetiredKeys,
                 *, say: Callable[[str], None] = lambda line: None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.key = key
        self._iam_for = iam_for
        self.actions = actions
        self.retired = retired
        self.say = say
        self.clock = clock
        self.sleep = sleep

    def _step(self, kind: ActionKind, target: str, do: Callable[[], str], **params: str) -> None:
        request = ActionRequest(kind, target, confirmation="yes", params=(("profile", self.key.profile), *params.items()))
        self.say(run_action(request, do, self.actions, self.clock).message)

    def run(self, grace_days: float = DEFAULT_GRACE_DAYS) -> None:
        """Delete the retired keys that are due, then rotate (see the module's steps).

        Raises:
            KeyRotationError: refused before anything changed (two keys, not an IAM user).
            ActionError: a step was denied or failed (audited).
        """
        iam = self._iam_for(self.key.key_id, self.key.secret)
        try:
            user = iam.user_name()
            keys = iam.keys(user)
        except BackendPermissionDenied as exc:
            raise KeyRotationError(f"IAM refused to list the keys: {exc}") from exc
        except BackendError as exc:
            raise KeyRotationError(str(exc)) from exc
        keys = self._delete_due(iam, user, keys, grace_days)
        if len(keys) >= 2:
            others = ", ".join(f"{short(k.key_id)} ({'active' if k.active else 'inactive'})" for k in keys
                               if k.key_id != self.key.key_id)
            raise KeyRotationError(f"IAM user {user} already has two access keys (the most IAM allows): delete "
                                   f"{others} first, or wait for its grace to end and run again")
        new = None

        def create() -> str:
            nonlocal new
            new = iam.create(user)
            return f"created access key {short(new.key_id)} for IAM user {user}"

        self._step(ActionKind.KEY_CREATE, user, create)
        assert new is not None
        self._install_and_check(new)
        new_iam = self._iam_for(new.key_id, new.secret)

        def deactivate() -> str:
            new_iam.deactivate(user, self.key.key_id)
            retired = self.retired.load()
            retired[self.key.key_id] = self.clock()
            self.retired.save(retired)
            return (f"deactivated the old key {short(self.key.key_id)}; it is deleted after {grace_days:g} day(s) "
                    "by a later gpuconsole keys rotate")

        self._step(ActionKind.KEY_DEACTIVATE, short(self.key.key_id), deactivate, user=user)

    def _install_and_check(self, new: Any) -> None:
        """Write ``new`` into the credentials file and check that AWS accepts it; on failure put
        the old key back (the old key is still active, so nothing is locked out)."""
        path = self.key.path
        old_text = path.read_text(encoding="utf-8")
        write_credentials(path, replace_key(old_text, self.key.profile, new.key_id, new.secret))
        self.say(f"wrote the new key into {path} (profile {self.key.profile})")
        iam = self._iam_for(new.key_id, new.secret)
        wait, last = VERIFY_FIRST_WAIT_S, None
        for attempt in range(VERIFY_TRIES):
            try:
                arn = iam.identity_of(new)
                self.say(f"AWS accepts the new key: {arn}")
                return
            except BackendError as exc:
                last = exc
                if attempt + 1 < VERIFY_TRIES:
                    self.sleep(wait)
                    wait = min(wait * 2, 8.0)
        write_credentials(path, old_text)
        raise KeyRotationError(f"AWS did not accept the new key {short(new.key_id)} ({last}): the old key is back "
                               "in the file and still active; delete the new one in IAM or run again")

    def _delete_due(self, iam: Any, user: str, keys: tuple[Any, ...], grace_days: float) -> tuple[Any, ...]:
        retired = self.retired.load()
        now, kept = self.clock(), []
        for key in keys:
            since = retired.get(key.key_id)
            if key.active or since is None or now - since < grace_days * DAY:
                kept.append(key)
                continue

            def delete(key_id: str = key.key_id, since: float = since) -> str:
                iam.delete(user, key_id)
                retired.pop(key_id, None)
                self.retired.save(retired)
                return f"deleted the old key {short(key_id)} (inactive for {(now - since) / DAY:.0f} days)"

            self._step(ActionKind.KEY_DELETE, short(key.key_id), delete, user=user)
        return tuple(kept)
