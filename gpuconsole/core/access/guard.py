"""The guard of the action path: role and namespace, MFA, ``--read-only``, and the audit trail.

:func:`gpuconsole.core.ops.actions.run_action` asks :meth:`Guard.admit` before any request runs and
hands every result to :meth:`Guard.record`, so the UI and the CLI are checked and recorded the
same way, for every :class:`~gpuconsole.core.ops.actions.ActionKind` there is or will be. A denied
attempt is recorded like a done one. The guard fails closed: the intent of every admitted
action is written before it runs (:meth:`Guard.intend`), and when that fails nothing runs; a
result that cannot be written is an error, never a warning in a log.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuconsole.core import paths
from gpuconsole.core.access import audit_sink
from gpuconsole.core.access import site
from gpuconsole.core.access.access import (
    Principal,
    Role,
    UsersTable,
    current_user,
    denial,
    needs_mfa,
)
from gpuconsole.core.access.audit import AuditError, AuditLog, result_text
from gpuconsole.core.access.mfa import MfaError, MfaStore
from gpuconsole.core.ops.actions import (
    AUTOMATIC_PREFIX,
    AUTOPILOT_PREFIX,
    ActionError,
    ActionKind,
    ActionRequest,
    ActionResult,
)

MFA_ACTION = "mfa-verify"
SITE_OVERRIDE_ACTION = "site-override"
STARTED = "started"  # the intent record written before an action runs


class Guard:
    """Admits or denies requests for one OS user, and audits what happens.

    Args:
        users: the users table.
        mfa: the TOTP secrets and their state.
        audit: the audit log.
        user: the OS user acting (default: the login running the console).
        read_only: deny every change, to everyone (``--read-only``).
    """

    def __init__(self, users: UsersTable, mfa: MfaStore, audit: AuditLog, *, user: str | None = None,
                 read_only: bool = False) -> None:
        self.users = users
        self.mfa = mfa
        self.audit = audit
        self.user = user or current_user()
        self.read_only = read_only
        # The AWS role sessions (core.access.aws_roles) when [aws.roles] is set: AWS then checks
        # the MFA codes of an admin's cloud actions, through sts:AssumeRole.
        self.aws_roles: Any = None
        self.alibaba_roles: Any = None  # the RAM role sessions (core.access.alibaba_roles) of [alibaba.roles]

    @property
    def principal(self) -> Principal:
        return self.users.principal(self.user)

    # ------------------------------------------------------------------ questions the UI asks
    def why_not(self, kind: ActionKind, target: str = "", namespace: str | None = None,
                params: tuple[tuple[str, str], ...] = ()) -> str | None:
        """Why the user may not run ``kind`` (on ``target`` in ``namespace``), or None.

        Without a target a developer is asked about any of its namespaces, so a key is enabled
        when some row could be acted on.
        """
        principal = self.principal
        if namespace is None and not target and principal.role is Role.DEVELOPER and principal.namespaces:
            namespace = principal.namespaces[0]
        if namespace is not None:
            params = (*params, ("namespace", namespace))
        return denial(principal, ActionRequest(kind, target or "-", params=params), read_only=self.read_only)

    def mfa_required(self, kind: ActionKind, params: tuple[tuple[str, str], ...] = ()) -> bool:
        """Whether ``kind`` (with the request's ``params``: an automatic budget's add) needs a
        fresh MFA code from this user (an admin of a users table)."""
        principal = self.principal
        return (principal.managed and principal.role is Role.ADMIN and needs_mfa(kind, params)
                and not self.aws_checks_mfa(kind))

    def aws_checks_mfa(self, kind: ActionKind) -> bool:
        """Whether AWS checks the MFA code of ``kind`` (an admin's cloud action under [aws.roles])."""
        return self.aws_roles is not None and self.aws_roles.checks_mfa(kind)

    def mfa_pending(self, kind: ActionKind, params: tuple[tuple[str, str], ...] = ()) -> bool:
        """Whether a code must be entered before ``kind`` (with ``params``) runs now."""
        if self.aws_checks_mfa(kind):
            return bool(self.aws_roles.needs_code())
        return self.mfa_required(kind, params) and not self.mfa.fresh(self.user, self.users.mfa_window_s())

    def verify_mfa(self, code: str, purpose: str = "", kind: ActionKind | None = None) -> None:
        """Check an MFA code (audited either way, with the ``purpose`` it was asked for, e.g.
        ``"stop i-0abc"``). Raises :class:`MfaError` with why it failed. For a ``kind`` that
        :meth:`aws_checks_mfa`, the code goes to the AWS admin session instead, and AWS checks it."""
        if kind is not None and self.aws_checks_mfa(kind):
            # AWS checks it at sts:AssumeRole; the action's own record says what AWS answered.
            self.aws_roles.offer_code(code)
            return
        principal = self.principal
        params = [("for", purpose)] if purpose else []
        try:
            self.mfa.verify(self.user, code)
        except MfaError as exc:
            self._append(principal, MFA_ACTION, self.user, params, f"denied: {exc}")
            raise
        self._append(principal, MFA_ACTION, self.user, params, "ok")

    def enroll_mfa(self) -> tuple[str, str]:
        """A new TOTP secret for this user (audited); returns the secret and its otpauth URI."""
        secret, uri = self.mfa.enroll(self.user)
        self._append(self.principal, "mfa-enroll", self.user, (), "ok")
        return secret, uri

    def may_read_audit(self) -> str | None:
        """Why this user may not read the audit log (admins and auditors may), or None."""
        principal = self.principal
        if principal.role in (Role.ADMIN, Role.AUDITOR):
            return None
        return f"{principal.name} is {principal.role_text}: only admins and auditors read the audit log"

    # ------------------------------------------------------------------ the action path
    def admit(self, request: ActionRequest) -> None:
        principal = self.principal
        reason = denial(principal, request, read_only=self.read_only)
        if reason is not None:
            raise ActionError(reason)
        automatic = request.confirmation.startswith((AUTOMATIC_PREFIX, AUTOPILOT_PREFIX))
        if self.mfa_required(request.kind, request.params) and not automatic:
            if not self.mfa.enrolled(self.user):
                raise ActionError(f"{request.kind.value} needs MFA and {self.user} has none: "
                                  "run gpuconsole users mfa enroll")
            if not self.mfa.fresh(self.user, self.users.mfa_window_s()):
                raise ActionError(f"{request.kind.value} needs a current MFA code (--mfa-code in a command; "
                                  f"a code stays valid {self.users.mfa_window_s():.0f} s)")
        for roles in (self.aws_roles, self.alibaba_roles) if automatic else ():
            if roles is not None and (why := roles.automatic_refusal(request.kind)):
                raise ActionError(why)
        if self.aws_checks_mfa(request.kind) and not automatic and self.aws_roles.needs_code():
            raise ActionError(f"{request.kind.value} needs a current MFA code for the AWS admin role "
                              "(--mfa-code in a command; AWS checks it)")
        try:
            self.audit.check_writable()
        except AuditError as exc:
            raise ActionError(f"nothing runs unrecorded: {exc}") from exc

    def intend(self, request: ActionRequest) -> None:
        """Write that ``request`` starts now (result ``started``), before it runs.

        Raises:
            AuditError: the record cannot be written (the action must not run).
        """
        params = _params(request)
        self._append(self._actor(request, params), request.kind.value, request.target, params, STARTED)

    def record(self, result: ActionResult) -> None:
        """Write ``result``. Raises :class:`AuditError` when it cannot be written."""
        params = _params(result.request)
        if result.ok and result.message:
            params.append(("outcome", result.message))  # what was done: the ids a launch created…
        principal = self._actor(result.request, params)
        self._append(principal, result.request.kind.value, result.request.target, params,
                     result_text(result.ok, result.message))

    def _actor(self, request: ActionRequest, params: list[tuple[str, str]]) -> Principal:
        """Who the record names: the login, or the autopilot's rule (then ``params`` gains the
        login it runs as, whose role admitted it)."""
        principal = self.principal
        if request.confirmation.startswith(AUTOPILOT_PREFIX):
            params.append(("runs-as", principal.name))
            principal = Principal(request.confirmation, principal.role, principal.namespaces, managed=principal.managed)
        return principal

    def refuse_override(self, reason: str) -> None:
        """Audit a refused attempt to replace the site's settings (see :mod:`.site`)."""
        self._append(self.principal, SITE_OVERRIDE_ACTION, str(paths.site_dir()), [], f"denied: {reason}")

    def _append(self, principal: Principal, action: str, target: str, params: list[tuple[str, str]] | tuple[()],
                result: str) -> None:
        role = principal.role_text if principal.managed else f"{principal.role_text} (no users table)"
        self.audit.append(principal.name, role, action, target, params, result)


def _params(request: ActionRequest) -> list[tuple[str, str]]:
    """What a record of ``request`` keeps besides its verb and target."""
    params = list(request.params)
    if request.region:
        params.append(("region", request.region))
    if request.confirmation.startswith(AUTOMATIC_PREFIX):
        params.append(("confirmation", request.confirmation))
    return params


def default_guard(*, read_only: bool = False, user: str | None = None,
                  clock: Callable[[], float] = time.time, config: Path | str | None = None) -> Guard:
    """The guard over the files of this home (or the ``GPUCONSOLE_*`` overrides), unless the
    site's settings bind this login (:mod:`.site`; ``config`` is the ``--config`` flag). Its
    audit log is copied to the sinks of the ``[audit]`` table (the site's, when it has one).

    Raises:
        SiteSettingsRefused: the login tried to replace the site's settings (audited first).
    """
    settings = site.load_site()
    files, refused = site.resolve(config, site=settings)
    # The copies of the log go where the site's [audit] table says, when it has one.
    sink_config = settings.config if "audit" in settings.tables else config
    audit = audit_sink.configured(AuditLog(files.audit, clock), sink_config)
    guard = Guard(UsersTable(files.users), MfaStore(files.mfa, clock), audit, user=user, read_only=read_only)
    return _unless_refused(guard, refused)


def _unless_refused(guard: Guard, refused: list[str]) -> Guard:
    """``guard``, or the first refused override as an error once every one is audited."""
    if not refused:
        return guard
    try:
        for reason in refused:
            guard.refuse_override(reason)
    except AuditError as exc:
        raise site.SiteSettingsRefused(f"{refused[0]} (and the attempt could not be recorded: {exc})") from exc
    raise site.SiteSettingsRefused(refused[0])


def demo_guard(*, read_only: bool = False, user: str | None = None,
               clock: Callable[[], float] = time.time) -> Guard:
    """The guard of a demo: the same users table (roles and namespaces apply as in a real
    session), but an audit log and MFA state of its own. Nothing done or typed in a demo reaches
    the real audit log, and a wrong code typed there never counts toward the real lockout.

    They live in ``$GPUCONSOLE_DEMO_DIR`` when set (kept, so a demo's log can be read across
    commands), else in a private temporary folder removed when the process ends.
    """
    kept = paths.demo_dir()
    if kept is not None:
        folder = paths.private_dir(kept)
    else:
        folder = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-"))  # 0700
        atexit.register(shutil.rmtree, folder, True)
    files, refused = site.resolve()
    mfa = MfaStore(files.mfa, clock).private_copy(folder / "mfa.json")
    guard = Guard(UsersTable(files.users), mfa, AuditLog(folder / "audit.db", clock), user=user, read_only=read_only)
    return _unless_refused(guard, [r for r in refused if not r.startswith(paths.AUDIT_ENV)])  # the demo's log is its own
