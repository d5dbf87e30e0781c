"""AWS roles through STS: every AWS call of a session runs as the IAM role of the login's role.

The configuration file maps each gpuconsole role to an IAM role::

    [aws]
    mfa_serial = "arn:aws:iam::123456789012:mfa/ada"   # optional: else IAM ListMFADevices

    [aws.roles]
    admin = "arn:aws:iam::123456789012:role/gpuconsole-admin"
    developer = "arn:aws:iam::123456789012:role/gpuconsole-developer"
    auditor = "arn:aws:iam::123456789012:role/gpuconsole-auditor"
    automation = "arn:aws:iam::123456789012:role/gpuconsole-automation"   # optional

Where it is set, IAM, not this process, decides what a login may do in AWS: the session is
``sts:AssumeRole`` for the login's role, named after the OS login (``RoleSessionName`` and
``SourceIdentity``, so CloudTrail names the person). An admin's session carries the MFA device
and the code the admin typed, and AWS checks the code. Sessions are kept in memory until
:data:`REFRESH_BEFORE_S` before they expire; an admin's is then renewed only with a new code.
A refusal by AWS is a :class:`BackendPermissionDenied` in AWS's own words, so the action path
records it as ``denied``. A login with no role, or a role with no ARN, gets no AWS session at
all: the console never falls back to the login's own credentials.

The ``automation`` role is the service identity of automatic actions (autopilot rules, budget
actions that run by themselves): the autopilot service (``autopilot run``) and ``budget check
--enforce`` act through it, with the credentials of the machine's service role (only that role
may assume it, and it changes only instances tagged ``ManagedBy = gpuconsole``), never through a
person's MFA session. Where it is set, a login's own session runs no automatic cloud action:
the action is denied and audited, saying where such actions run.
"""

from __future__ import annotations

import os
import pwd
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendUnavailable,
    CredentialSwitching,
    NamedProfile,
)
from gpuconsole.core.access.site import site_table
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import Role

# botocore renews refreshable credentials 15 minutes before they expire (10 at the latest):
# a session this close to its end is assumed again rather than handed out once more.
REFRESH_BEFORE_S = 900.0
DEFAULT_DURATION_S = 3600
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
MFA_ARN = re.compile(r"^(arn:aws[a-z-]*:iam::\d{12}:(mfa|u2f)/[\w+=,.@/-]+|GAHT[0-9A-Z]{8,})$")
# The actions that reach AWS: for an admin under [aws.roles], AWS checks their MFA code.
CLOUD_KINDS = frozenset({ActionKind.LAUNCH, ActionKind.START, ActionKind.STOP, ActionKind.REBOOT, ActionKind.TERMINATE})


RoleArn = Annotated[str, msgspec.Meta(pattern=ROLE_ARN.pattern, description="an IAM role ARN")]
# [aws.roles]: one optional IAM role ARN per gpuconsole role.
AUTOMATION = "automation"  # the service identity of automatic actions, beside the gpuconsole roles
AUTOMATION_SESSION = "gpuconsole-automation"
AwsRolesTable = msgspec.defstruct("AwsRolesTable", [(r, RoleArn | None, None) for r in (*(r.value for r in Role), AUTOMATION)],
                                  frozen=True, forbid_unknown_fields=True)


class AwsTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[aws]`` table as written."""

    roles: AwsRolesTable | None = None  # type: ignore[valid-type]
    mfa_serial: Annotated[str, msgspec.Meta(pattern=MFA_ARN.pattern)] = ""
    session_seconds: Annotated[int, msgspec.Meta(ge=900, le=43200)] = DEFAULT_DURATION_S


class MfaCodeNeeded(BackendPermissionDenied):
    """The admin role needs a session that only a new MFA code can open."""


@dataclass(frozen=True, slots=True)
class AwsRoleSettings:
    """The ``[aws.roles]`` table and ``[aws] mfa_serial``."""

    roles: tuple[tuple[str, str], ...]
    mfa_serial: str = ""
    duration_s: int = DEFAULT_DURATION_S

    def arn(self, role: Role | None) -> str:
        return dict(self.roles).get(role.value, "") if role is not None else ""

    @property
    def automation_arn(self) -> str:
        """The automation role's ARN ("" when automatic actions have no identity of their own)."""
        return dict(self.roles).get(AUTOMATION, "")


def load_aws_roles(config_path: Path | str | None = None, env: Mapping[str, str] = os.environ) -> AwsRoleSettings | None:
    """The AWS role settings: the site config's ``[aws.roles]`` when it has one (a login cannot
    replace them), else the login's configuration file's; None when neither sets the table.

    Raises:
        ConfigError: the table is there but wrong (one line naming the file and key).
    """
    declared = site_table("aws")
    if declared is not None and "roles" in declared[1]:
        path, aws = declared  # the site's roles bind every login: its own config cannot replace them
    else:
        try:
            path, text = read_config_text(config_path, env)
        except ConfigError:
            return None  # a missing or unreadable file: the budgets' reading of it reports that
        if text is None:
            return None
        aws = parse_toml(text, path).get("aws")
    if aws is None:
        return None
    try:
        table = decode_table(aws, AwsTable)
    except TableError as exc:
        raise ConfigError(f"{path}: {_aws_problem(exc, aws)}") from None
    if table.roles is None:
        return None
    checked = tuple((r, arn) for r in (*(r.value for r in Role), AUTOMATION) if (arn := getattr(table.roles, r)) is not None)
    return AwsRoleSettings(tuple(sorted(checked)), table.mfa_serial, table.session_seconds)


def _aws_problem(exc: TableError, aws: Any) -> str:
    """A problem of the ``[aws]`` table in its key's words."""
    head, _, role = exc.key.partition(".")
    if not exc.key:
        return "[aws] must be a table"
    if head == "roles" and not role:
        return "[aws.roles] must be a table of role = \"arn:aws:iam::…:role/…\""
    if head == "roles":
        if exc.unknown:
            return f"[aws.roles] {role}: not a gpuconsole role (admin, developer, auditor) or automation"
        return f"[aws.roles] {role}: not an IAM role ARN: {aws['roles'][role]!r}"
    if head == "mfa_serial" and not exc.unknown:
        return f"[aws] mfa_serial: not an MFA device ARN: {aws['mfa_serial']!r}"
    if head == "session_seconds" and not exc.unknown:
        return f"[aws] session_seconds: a whole number from 900 to 43200, not {aws['session_seconds']!r}"
    return f"[aws] {exc.key}: {exc.problem}"


def os_login() -> str:
    """The login of the real user id: what CloudTrail names (never ``$LOGNAME`` or ``$USER``)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # no passwd entry (a bare container): the uid still names someone
        return f"uid-{os.geteuid()}"


def session_name(login: str) -> str:
    """``login`` as STS accepts a session name and source identity (2-64 of ``[\\w+=,.@-]``)."""
    return re.sub(r"[^\w+=,.@-]", "-", login)[:64].ljust(2, "-")


class AwsRoleSessions:
    """The login's role session: assumed on demand, kept until shortly before it expires.

    Args:
        settings: the role table.
        role_of: the login's gpuconsole role now (the users table may change while running).
        sts: the STS calls as the login (:class:`gpuconsole.backends.aws.StsCalls`).
        clock: the time, for the expiry.
        login: the OS login (default :func:`os_login`).
        automation: act as the automation role (the autopilot service, budget enforcement),
            whatever the login's role; no MFA.
    """

    def __init__(self, settings: AwsRoleSettings, role_of: Callable[[], Role | None], sts: Any, *,
                 clock: Callable[[], float] = time.time, login: str | None = None, automation: bool = False) -> None:
        self.settings = settings
        self.automation = automation and bool(settings.automation_arn)
        self._role_of = role_of
        self.sts = sts
        self._clock = clock
        self.login = login or os_login()
        self._lock = threading.Lock()
        self._session: Any = None  # RoleCredentials of the role in _session_arn
        self._session_arn = ""
        self._code = ""  # an MFA code offered for the next AssumeRole (never logged)
        self._assume_lock = threading.Lock()
        self._refused: tuple[str, BackendError] | None = None  # the code AWS refused last, and how

    @property
    def role(self) -> Role | None:
        return self._role_of()

    @property
    def role_arn(self) -> str:
        return self.settings.automation_arn if self.automation else self.settings.arn(self.role)

    @property
    def needs_mfa(self) -> bool:
        """The admin role's trust policy requires MFA: its session is assumed with a code."""
        return self.role is Role.ADMIN and not self.automation

    def automatic_refusal(self, kind: ActionKind) -> str | None:
        """Why an automatic action of ``kind`` may not run in this session, or None: where
        ``[aws.roles] automation`` is set, automatic cloud actions run as that role alone."""
        if kind not in CLOUD_KINDS or not self.settings.automation_arn or self.automation:
            return None
        return (f"automatic actions run as [aws.roles] automation (the autopilot service, budget check --enforce), "
                f"not in {self.login}'s own AWS session")

    def checks_mfa(self, kind: ActionKind) -> bool:
        """Whether AWS, not the local authenticator secret, checks the code of ``kind``."""
        return self.needs_mfa and kind in CLOUD_KINDS

    def fresh(self) -> bool:
        with self._lock:
            return self._fresh_locked()

    def _fresh_locked(self) -> bool:
        return (self._session is not None and self._session_arn == self.role_arn
                and self._clock() < self._session.expires_at - REFRESH_BEFORE_S)

    def needs_code(self) -> bool:
        """Whether the next AWS call needs a new MFA code (an admin without a fresh session or a
        code waiting to be used)."""
        return self.needs_mfa and not self.fresh() and not self._code

    def offer_code(self, code: str) -> None:
        """Keep ``code`` for the next ``AssumeRole`` of the admin role; AWS checks it there.

        The code stays until a session is opened with it, so the action that asked for it fails
        with AWS's own words when AWS refuses the role (and is audited as denied).
        """
        with self._lock:
            self._code, self._refused = code.strip(), None

    def credentials(self) -> Any:
        """The role session (cached, or assumed now; an admin's only with a code offered before).

        Raises:
            BackendPermissionDenied: no role for the login, AWS refused, or a code is needed.
        """
        with self._assume_lock:  # one AssumeRole at a time: the poll and an action share a code
            with self._lock:
                if self._fresh_locked():
                    return self._session
                code = self._code
            if self.needs_mfa and not code:
                raise MfaCodeNeeded("the AWS admin role needs a current MFA code (--mfa-code; in the console "
                                    "ctrl+p, Open the AWS admin session)")
            refused = self._refused
            if code and refused is not None and refused[0] == code:
                # A code AWS refused is not sent again (every poll would): the refusal is repeated.
                raise type(refused[1])(str(refused[1]))
            try:
                session = self._assume(code)
            except BackendError as exc:
                if code:
                    self._refused = (code, exc)
                raise
            with self._lock:
                if self._code == code:
                    self._code = ""
            return session

    def _assume(self, code: str) -> Any:
        arn = self.role_arn
        if not arn:
            role = self.role
            who = f"{self.login} has no gpuconsole role" if role is None else f"[aws.roles] names no IAM role for {role.value}"
            raise BackendPermissionDenied(f"no AWS session: {who}")
        serial = ""
        if self.needs_mfa:
            serial = self.settings.mfa_serial or self.sts.mfa_serial()
            if not serial:
                raise BackendPermissionDenied("no MFA device: set [aws] mfa_serial, or register one for the IAM user")
        name = session_name(self.login)
        session = self.sts.assume_role(arn, AUTOMATION_SESSION if self.automation else name, name, serial=serial,
                                       code=code, duration_s=self.settings.duration_s)
        with self._lock:
            self._session, self._session_arn = session, arn
        return session

    def refresh(self) -> dict[str, str]:
        """The session in botocore's refresh shape, for ``AwsCloud.use_credentials``."""
        creds = self.credentials()
        return {"access_key": creds.access_key, "secret_key": creds.secret_key, "token": creds.token,
                "expiry_time": datetime.fromtimestamp(creds.expires_at, tz=UTC).isoformat()}

    def describe(self) -> dict[str, Any]:
        """What ``access whoami`` shows: the role ARN, the session and its expiry (no secret)."""
        with self._lock:
            session = self._session if self._fresh_locked() else None
        return {"role_arn": self.role_arn, "session": session.arn if session else "",
                "expires_at": session.expires_at if session else None, "needs_mfa": self.needs_mfa}


def _refused(reason: str) -> Callable[[], dict[str, str]]:
    def refresh() -> dict[str, str]:
        raise BackendUnavailable(f"AWS roles are not usable: {reason}", hint="fix [aws.roles] in the configuration file")

    return refresh


def attach_aws_roles(cloud: object | None, guard: Any, config_path: Path | str | None = None, *,
                     automation: bool = False) -> AwsRoleSessions | None:
    """Put ``cloud`` (an AWS backend) on the role session of ``guard``'s login, when
    ``[aws.roles]`` is set; the guard then lets AWS check the MFA codes of cloud actions.
    ``automation``: this process acts by itself (the autopilot service, budget enforcement): its
    session is the automation role's, when ``[aws.roles] automation`` names one.

    A broken table stops every AWS call (fail closed) rather than using the login's own keys.
    """
    if not isinstance(cloud, CredentialSwitching):
        return None
    use = cloud.use_credentials
    try:
        settings = load_aws_roles(config_path)
    except ConfigError as exc:
        use(_refused(str(exc)))
        return None
    if settings is None:
        return None
    from gpuconsole.backends.registry import sts_calls

    profile = cloud.profile if isinstance(cloud, NamedProfile) else None
    sessions = AwsRoleSessions(settings, lambda: guard.principal.role, sts_calls(profile), automation=automation)
    use(sessions.refresh)
    guard.aws_roles = sessions
    return sessions
