"""``access whoami``: who the console acts as, in gpuconsole and in each system that owns resources.

The answer is a list of sections, each made by one provider in :data:`SECTIONS`; a provider is a
function of a :class:`WhoamiContext` that returns its fields plus ``missing``, the steps that
would set it up. A new system (a Kubernetes user and its RBAC-allowed job actions, the TLS
version of each source) is one more provider appended to the list. A provider that fails
gives a section with its error: one system down never hides the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.base import BackendError, one_line
from gpuconsole.core.access.aws_roles import AwsRoleSessions, os_login
from gpuconsole.core.ops.actions import ActionKind
from gpuconsole.model import SourceKind


@dataclass(frozen=True, slots=True)
class WhoamiContext:
    """What the providers may look at.

    Attributes:
        guard: the action path's guard (login, users table, MFA state).
        cloud: the cloud backend (an AWS one has ``profile``), or None.
        aws_roles: the role sessions when ``[aws.roles]`` is set, else None.
        sts: STS as the login (``StsCalls``), or None when AWS is not configured.
        jobs: the job backend, for a Kubernetes section.
    """

    guard: Any
    cloud: Any = None
    aws_roles: AwsRoleSessions | None = None
    sts: Any = None
    jobs: Any = None


Section = Callable[[WhoamiContext], dict[str, Any]]


def login_section(ctx: WhoamiContext) -> dict[str, Any]:
    principal = ctx.guard.principal
    missing = []
    if not principal.managed:
        missing.append("no users table: run gpuconsole users init to give logins roles")
    elif principal.role is None:
        missing.append(f"{principal.name} is not in the users table: ask an admin to add you")
    return {"login": os_login(), "user": principal.name, "role": principal.role_text,
            "namespaces": list(principal.namespaces), "read_only": bool(ctx.guard.read_only), "missing": missing}


def aws_section(ctx: WhoamiContext) -> dict[str, Any]:
    if ctx.sts is None:
        return {"configured": False, "missing": ["configure AWS credentials (aws configure, or AWS_PROFILE) "
                                                 "and a region"]}
    section: dict[str, Any] = {"configured": True, "profile": getattr(ctx.cloud, "profile", None) or "default chain",
                               "missing": []}
    try:
        me = ctx.sts.caller_identity()
        section.update(account=me.account, caller=me.arn)
    except BackendError as exc:
        section["caller_error"] = one_line(exc)
    roles = ctx.aws_roles
    if roles is None:
        section.update(acts_as="the login's own credentials (no [aws.roles])")
        section["missing"].append("map gpuconsole roles to IAM roles in [aws.roles] of the configuration file "
                                  "(gpuconsole access iam-policy prints them)")
    else:
        section.update(role_arn=roles.role_arn or "none for this role")
        if not roles.role_arn:
            role = ctx.guard.principal.role_text
            section["missing"].append(f"[aws.roles] names no IAM role for {role}: AWS calls are refused")
        try:
            session = roles.credentials()
            section.update(acts_as=ctx.sts.caller_identity(session).arn, session_expires=session.expires_at)
        except BackendError as exc:
            section.update(acts_as="", session_error=one_line(exc))
    try:
        section["tls"] = ctx.sts.tls_version()
    except BackendError as exc:
        section["tls"] = f"unknown ({one_line(exc)})"
    section["tls_floor"] = "TLS 1.2 (botocore)"
    return section


def mfa_section(ctx: WhoamiContext) -> dict[str, Any]:
    guard = ctx.guard
    enrolled = bool(guard.mfa.enrolled(guard.user))
    section: dict[str, Any] = {"local_enrolled": enrolled, "local_window_open": bool(
        enrolled and guard.mfa.fresh(guard.user, guard.users.mfa_window_s()))}
    missing = []
    roles = ctx.aws_roles
    if roles is not None and roles.needs_mfa:
        section["aws_serial"] = roles.settings.mfa_serial or "from IAM ListMFADevices"
        section["aws_session_open"] = not roles.needs_code()
        section["aws_checks_codes_for"] = sorted(k.value for k in ActionKind if guard.aws_checks_mfa(k))
    elif guard.principal.role_text == "admin" and not enrolled:
        missing.append("enrol MFA: gpuconsole users mfa enroll")
    section["missing"] = missing
    return section


# The sections, in the order shown; append a provider to add one (Kubernetes, per-source TLS…).
SECTIONS: list[tuple[str, Section]] = [
    ("gpuconsole", login_section),
    ("aws", aws_section),
    ("mfa", mfa_section),
]


def whoami(ctx: WhoamiContext) -> dict[str, dict[str, Any]]:
    """Every section of :data:`SECTIONS` for ``ctx`` (blocking: STS calls; call off the UI thread)."""
    answer = {}
    for name, provider in SECTIONS:
        try:
            answer[name] = provider(ctx)
        except Exception as exc:  # noqa: BLE001 - one failing system never hides the others
            answer[name] = {"error": one_line(exc), "missing": []}
    return answer


def context_for(console: Any) -> WhoamiContext:
    """The context of a running console (its guard, sources and AWS role sessions)."""
    runners = console.hub.runners
    cloud = getattr(runners.get(SourceKind.CLOUD), "source", None)
    jobs = getattr(runners.get(SourceKind.JOBS), "source", None)
    roles = getattr(console, "aws_roles", None)
    sts = roles.sts if roles is not None else None
    if sts is None and callable(getattr(cloud, "use_credentials", None)):
        from gpuconsole.backends.aws import StsCalls

        sts = StsCalls(getattr(cloud, "profile", None))
    return WhoamiContext(console.guard, cloud, roles, sts, jobs)
