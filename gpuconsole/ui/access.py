"""What the UI shows of the access rules: disabled keys with the reason, who the user is.

The core decides (:mod:`gpuconsole.core.access.guard`); the UI only mirrors it so a key the role
may not use is dimmed in the footer and its reason is on screen. For jobs, the cluster's RBAC
answers (:mod:`gpuconsole.core.access.rbac`, kept a minute) dim the keys it would refuse as
well. The principal (who the user is, from the users table) is read in a worker and cached on
the app as ``access_principal``; until it is read, nothing is disabled and the core still
guards every action.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.core.access.access import Principal, denial
from gpuconsole.core.ops.actions import ActionKind, ActionRequest


def principal_of(app: Any) -> Principal | None:
    return getattr(app, "access_principal", None)


def services_of(app: Any) -> Any:
    """The services of ``app``'s console, or None before the console is built."""
    core = getattr(app, "core", None)
    return core.services if core is not None else None


def why_not(app: Any, kind: ActionKind, namespace: str | None = None) -> str | None:
    """Why the user of ``app`` may not run ``kind`` (in ``namespace``), or None: the local rules
    first, then what the cluster answered for that namespace (only once it was asked).

    Without a namespace a developer is asked about its first one, so a key that some row
    allows stays enabled.
    """
    principal = principal_of(app)
    services = services_of(app)
    guard = services.guard if services is not None else None
    if principal is None or guard is None:
        return None
    if namespace is None and principal.namespaces:
        namespace = principal.namespaces[0]
    params = (("namespace", namespace),) if namespace else ()
    local = denial(principal, ActionRequest(kind, namespace or "-", params=params), read_only=guard.read_only)
    if local is not None or not namespace:
        return local
    return services.rbac.why_not(kind, namespace)  # the cluster's own answer, where one was asked for


def identity_text(app: Any) -> str:
    """``ada · admin``, ``dev · developer (team-nlp)``, ``READ-ONLY``… for the top bar; empty for
    a fresh install without a users table (the OS user acts as admin)."""
    principal = principal_of(app)
    services = services_of(app)
    guard = services.guard if services is not None else None
    parts = []
    if principal is not None and principal.managed:
        role = principal.role_text
        if principal.role is not None and principal.role.value == "developer":
            role += f" ({', '.join(principal.namespaces) or 'no namespace'})"
        parts.append(f"{principal.name} · {role}")
    if guard is not None and guard.read_only:
        parts.append("READ-ONLY")
    return "  ".join(parts)


def aws_session_needed(app: Any) -> bool:
    """Whether the AWS admin session waits for an MFA code (``[aws.roles]``, an admin login)."""
    roles = app.core.services.aws_roles
    return roles is not None and bool(roles.needs_code())


def open_aws_session(app: Any) -> None:
    """Ask for the code that opens the AWS admin session (from the palette); AWS checks it on
    the next call, and the sources are polled again at once."""
    from gpuconsole.ui.screens.mfa_prompt import MfaPrompt

    def answered(ok: bool | None) -> None:
        if ok:
            app.core.refresh()

    app.push_screen(MfaPrompt(ActionKind.START, "Opening the AWS admin session"), answered)
