"""Alibaba Cloud roles through STS: every Alibaba Cloud call of a session runs as the RAM role of
the login's gpuconsole role, as ``[aws.roles]`` does for AWS::

    [alibaba.roles]
    admin = "acs:ram::1234567890123456:role/gpuconsole-admin"
    developer = "acs:ram::1234567890123456:role/gpuconsole-developer"
    auditor = "acs:ram::1234567890123456:role/gpuconsole-auditor"

Where it is set, RAM, not this process, decides what a login may do in Alibaba Cloud: the session
is STS ``AssumeRole`` for the login's role, named after the OS login (``RoleSessionName``, so
ActionTrail names the person), kept until :data:`REFRESH_BEFORE_S` before it expires. STS's
AssumeRole takes no MFA code: an admin's actions are held by the console's own MFA check and by
the role's RAM policy. A login with no role, or a role with no ARN, gets no Alibaba Cloud session
at all, and a broken table stops every call: the console never falls back to the login's own keys.
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
from gpuconsole.core.access.aws_roles import REFRESH_BEFORE_S, os_login, session_name
from gpuconsole.core.access.site import site_table
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.model import Role

RAM_ROLE_ARN = re.compile(r"^acs:ram::\d{16}:role/[A-Za-z0-9.@-]{1,64}$")
RamRoleArn = Annotated[str, msgspec.Meta(pattern=RAM_ROLE_ARN.pattern, description="a RAM role ARN")]
# [alibaba.roles]: one optional RAM role ARN per gpuconsole role, as [aws.roles] names IAM roles.
AlibabaRolesTable = msgspec.defstruct("AlibabaRolesTable", [(r.value, RamRoleArn | None, None) for r in Role],
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
    roles = {r.value: arn for r in Role if (arn := getattr(decoded.roles, r.value, None))}
    return roles, decoded.session_seconds


class AlibabaRoleSessions:
    """The login's RAM role session: assumed on demand, kept until shortly before it expires.

    Args:
        roles: gpuconsole role → RAM role ARN.
        role_of: the login's gpuconsole role now.
        assume: STS AssumeRole as the login (``RoleCredentials.assume_role``).
    """

    def __init__(self, roles: dict[str, str], duration_s: int, role_of: Callable[[], Role | None],
                 assume: Callable[[str, str, int], dict[str, Any]], *, clock: Callable[[], float] = time.time,
                 login: str | None = None) -> None:
        self.roles, self.duration_s = roles, duration_s
        self._role_of, self._assume, self._clock = role_of, assume, clock
        self.login = login or os_login()
        self._lock = threading.Lock()
        self._session: dict[str, Any] | None = None
        self._session_arn = ""

    @property
    def role_arn(self) -> str:
        role = self._role_of()
        return self.roles.get(role.value, "") if role is not None else ""

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
            name = session_name(self.login)
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


def attach_alibaba_roles(cloud: object | None, guard: Any, config_path: Path | str | None = None
                         ) -> AlibabaRoleSessions | None:
    """Put the Alibaba Cloud member of ``cloud`` on the RAM role session of ``guard``'s login when
    ``[alibaba.roles]`` is set (fail closed on a broken table)."""
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
    sessions = AlibabaRoleSessions(loaded[0], loaded[1], lambda: guard.principal.role, found[0].assume_role)
    for member in found:
        member.use_role_credentials(sessions.credentials)
    return sessions
