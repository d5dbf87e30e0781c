"""Alibaba Cloud roles through STS: every Alibaba Cloud call of a session runs as the RAM role of
the login's gpuconsole role, as ``[aws.roles]`` does for AWS::

    [alibaba.roles]
    admin = "acs:ram::1234567890123456:role/gpuconsole-admin"
    developer = "acs:ram::1234567890123456:role/gpuconsole-developer"
    auditor = "acs:ram::1234567890123456:role/gpuconsole-auditor"
    automation = "acs:ram::1234567890123456:role/gpuconsole-automation"   # optional

Where it is set, RAM, not this process, decides what a login may do in Alibaba Cloud: the session
is STS ``AssumeRole`` for the login's role, named after the OS login (``RoleSessionName``, so
ActionTrail names the person), kept until :data:`REFRESH_BEFORE_S` before it expires. STS's
AssumeRole takes no MFA code: an admin's actions are held by the console's own MFA check and by
the role's RAM policy. A login with no role, or a role with no ARN, gets no Alibaba Cloud session
at all, and a broken table stops every call: the console never falls back to the login's own keys.

``automation`` is the service identity of automatic actions, as ``[aws.roles] automation`` is:
the autopilot service and ``budget check --enforce`` act through it (session
``gpuconsole-automation``, with the keys of the machine's own RAM identity, which alone the
role's trust policy names), never through a person's session; where it is set, a login's own
session runs no automatic Alibaba Cloud action (denied and audited, saying where they run).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import msgspec

from gpuconsole.backends.base import BackendPermissionDenied, BackendUnavailable, RoleCredentials
from gpuconsole.core.access.aws_roles import (
    AUTOMATION,
    AUTOMATION_SESSION,
    CLOUD_KINDS,
    REFRESH_BEFORE_S,
    os_login,
    session_name,
)
from gpuconsole.core.access.site import site_table
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import Role

RAM_ROLE_ARN = re.compile(r"^acs:ram::\d{16}:role/[A-Za-z0-9.@-]{1,64}$")
RamRoleArn = Annotated[str, msgspec.Meta(pattern=RAM_ROLE_ARN.pattern, description="a RAM role ARN")]
# [alibaba.roles]: one optional RAM role ARN per gpuconsole role and automation, as [aws.roles] names IAM roles.
ROLE_KEYS = (*(r.value for r in Role), AUTOMATION)
AlibabaRolesTable = msgspec.defstruct("AlibabaRolesTable", [(key, RamRoleArn | None, None) for key in ROLE_KEYS],
                                      frozen=True, forbid_unknown_fields=True)


class AlibabaAccessTable(msgspec.Struct, frozen=True):
    """What ``[alibaba]`` says about access (its other keys are the cloud's: core.fleet.cloud_config)."""

    roles: AlibabaRolesTable | None = None  # type: ignore[valid-type]
    session_seconds: Annotated[int, msgspec.Meta(ge=900, le=43200)] = 3600


def load_alibaba_roles(config_path: Path | str | None = None) -> tuple[dict[str, str], int] | None:
    """``[alibaba.roles]`` (role → RAM role ARN) and ``[alibaba] session_seconds``: the site
    config's when it sets roles (a login cannot replace them), else the login's file's; None
    when neither sets the table.

    Raises:
        ConfigError: the table is there but wrong (one line naming the file and key).
    """
    declared = site_table("alibaba")
    if declared is not None and "roles" in declared[1]:
        path, table = declared
    else:
        try:
            path, text = read_config_text(config_path)
        except ConfigError:
            return None
        if text is None:
            return None
        table = parse_toml(text, path).get("alibaba")
    if table is None or "roles" not in table:
        return None
    try:
        decoded = decode_table(table, AlibabaAccessTable)
    except TableError as exc:
        raise ConfigError(f"{path}: [alibaba] key {exc.key or 'alibaba'}: {exc.problem}") from None
    roles = {key: arn for key in ROLE_KEYS if (arn := getattr(decoded.roles, key, None))}
    return roles, decoded.session_seconds


class AlibabaRoleSessions:
    """The login's RAM role session: assumed on demand, kept until shortly before it expires.

    Args:
        roles: gpuconsole role → RAM role ARN.
        role_of: the login's gpuconsole role now.
        assume: STS AssumeRole as the login (``RoleCredentials.assume_role``).
        automation: act as the automation role (the autopilot service, budget enforcement),
            whatever the login's role.
    """

    def __init__(self, roles: dict[str, str], duration_s: int, role_of: Callable[[], Role | None],
                 assume: Callable[[str, str, int], dict[str, Any]], *, clock: Callable[[], float] = time.time,
                 login: str | None = None, automation: bool = False) -> None:
        self.roles, self.duration_s = roles, duration_s
        self.automation = automation and bool(roles.get(AUTOMATION))
        self._role_of, self._assume, self._clock = role_of, assume, clock
        self.login = login or os_login()
        self._lock = threading.Lock()
        self._session: dict[str, Any] | None = None
        self._session_arn = ""

    @property
    def role_arn(self) -> str:
        if self.automation:
            return self.roles[AUTOMATION]
        role = self._role_of()
        return self.roles.get(role.value, "") if role is not None else ""

    def automatic_refusal(self, kind: ActionKind) -> str | None:
        """Why an automatic action of ``kind`` may not run in this session, or None: where
        ``[alibaba.roles] automation`` is set, automatic cloud actions run as that role alone."""
        if kind not in CLOUD_KINDS or not self.roles.get(AUTOMATION) or self.automation:
            return None
        return (f"automatic actions run as [alibaba.roles] automation (the autopilot service, budget check "
                f"--enforce), not in {self.login}'s own Alibaba Cloud session")

    def _fresh(self) -> bool:
        return (self._session is not None and self._session_arn == self.role_arn
                and self._clock() < float(self._session["expires_at"]) - REFRESH_BEFORE_S)

    def credentials(self) -> dict[str, Any]:
        """The role session (cached, or assumed now).

        Raises:
            BackendPermissionDenied: no role for the login, or STS refused it.
        """
        with self._lock:
            if self._fresh():
                return dict(self._session or {})
            arn = self.role_arn
            if not arn:
                role = self._role_of()
                who = (f"{self.login} has no gpuconsole role" if role is None
                       else f"[alibaba.roles] names no RAM role for {role.value}")
                raise BackendPermissionDenied(f"no Alibaba Cloud session: {who}")
            name = AUTOMATION_SESSION if self.automation else session_name(self.login)
            self._session, self._session_arn = self._assume(arn, name, self.duration_s), arn
            return dict(self._session)

    def describe(self) -> dict[str, Any]:
        """What ``access whoami`` shows: the role ARN, the session and its expiry (no secret)."""
        with self._lock:
            session = self._session if self._fresh() else None
        return {"role_arn": self.role_arn, "session": session["arn"] if session else "",
                "expires_at": session["expires_at"] if session else None}


def _refused(reason: str) -> Callable[[], dict[str, str]]:
    def refresh() -> dict[str, str]:
        raise BackendUnavailable(f"Alibaba Cloud roles are not usable: {reason}",
                                 hint="fix [alibaba.roles] in the configuration file")

    return refresh


def attach_alibaba_roles(cloud: object | None, guard: Any, config_path: Path | str | None = None, *,
                         automation: bool = False) -> AlibabaRoleSessions | None:
    """Put the Alibaba Cloud member of ``cloud`` on the RAM role session of ``guard``'s login when
    ``[alibaba.roles]`` is set (fail closed on a broken table); ``automation``: this process acts
    by itself, as the automation role when the table names one."""
    members = getattr(cloud, "members", None)
    found = [m for m in (members.values() if isinstance(members, dict) else [cloud]) if isinstance(m, RoleCredentials)]
    if not found:
        return None
    try:
        loaded = load_alibaba_roles(config_path)
    except ConfigError as exc:
        for member in found:
            member.use_role_credentials(_refused(str(exc)))
        return None
    if loaded is None:
        return None
    sessions = AlibabaRoleSessions(loaded[0], loaded[1], lambda: guard.principal.role, found[0].assume_role,
                                   automation=automation)
    for member in found:
        member.use_role_credentials(sessions.credentials)
    return sessions
