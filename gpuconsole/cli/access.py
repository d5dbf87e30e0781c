"""What the guarded commands share: the ``--mfa-code`` option, asking for a code or a
confirmation on a terminal, and turning a refusal into one line and an exit status.

Exit statuses of the commands that change something: 0 done, 1 denied, refused or failed
(the audit log says which), 2 a bad command line.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any, TextIO


class CommandFailed(Exception):
    """The command ran and did not do its work (exit status 1); the message is one line."""


class BadInput(Exception):
    """A bad argument found after parsing (exit status 2); the message is one line."""


def add_mfa_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mfa-code", default=None, metavar="CODE",
                        help="the current code of your authenticator, for actions that need MFA "
                             "(default $GPUCONSOLE_MFA_CODE, else asked on a terminal)")


def make_guard(args: argparse.Namespace) -> Any:
    """The guard of a command: the demo's own (its audit log and MFA state apart) with ``--demo``."""
    from gpuconsole.core.access.guard import default_guard, demo_guard

    read_only = getattr(args, "read_only", False)
    if getattr(args, "demo", False):
        return demo_guard(read_only=read_only)
    from gpuconsole.core.access.audit_sink import settings_from_config
    from gpuconsole.core.config import ConfigError

    try:
        settings_from_config(getattr(args, "config", None))  # a wrong [audit] table is a bad input
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    return default_guard(read_only=read_only, config=getattr(args, "config", None))


def guarded_log(guard: Any) -> Any:
    from gpuconsole.core.ops.actions import ActionLog

    return ActionLog(guard=guard)


def interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def ensure_mfa(guard: Any, kind: Any, code: str | None, target: str = "",
               params: tuple[tuple[str, str], ...] = ()) -> None:
    """Give the guard a fresh MFA code when ``kind`` (with the request's ``params``) needs one
    (from ``--mfa-code``, ``$GPUCONSOLE_MFA_CODE`` or a prompt). A refused code is audited;
    raises :class:`CommandFailed`.

    A code given explicitly is always checked, even while an earlier one keeps the window open:
    a wrong code is refused and counted toward the lockout, never ignored.
    """
    from gpuconsole.core.access.mfa import MfaError, env_code

    if guard.aws_checks_mfa(kind):
        if not guard.mfa_pending(kind, params):
            return  # AWS checks the code: its session is open, or a code already waits for it
    elif not guard.mfa_required(kind, params) or not guard.mfa.enrolled(guard.user):
        return  # not needed, or not enrolled (the guard denies and records it, with the way out)
    code = code or env_code()
    if code is None and not guard.mfa_pending(kind, params):
        return  # none given, and the window of the last code is still open
    if code is None and interactive():
        code = getpass.getpass(f"MFA code for {kind.value}: ")
    if not code:
        return  # the guard denies it, records the attempt and says a code is needed
    try:
        guard.verify_mfa(code, f"{kind.value} {target}".strip(), kind)
    except MfaError as exc:
        raise CommandFailed(f"MFA: {exc}") from None


def permission_line(exc: PermissionError) -> str:
    """A file this login may not use, as one line of denial (never a traceback)."""
    where = f" {exc.filename}" if exc.filename else ""
    return f"denied: this login may not use{where}: {exc.strerror or exc}"


def ask(prompt: str) -> str:
    """A line typed on the terminal, or empty when nobody can type (scripts)."""
    if not interactive():
        return ""
    try:
        return input(f"{prompt} ").strip()
    except EOFError:
        return ""


def finish(run: Any, out: TextIO | None = None) -> int:
    """Run ``run(out)`` and map its failures to one line on stderr and an exit status."""
    from gpuconsole.backends.base import BackendError
    from gpuconsole.core.access.access import AccessError
    from gpuconsole.core.access.audit import AuditError
    from gpuconsole.core.ops.actions import ActionError

    out = out or sys.stdout
    try:
        return int(run(out))
    except BadInput as exc:
        print(f"gpuconsole: error: {exc}", file=sys.stderr)
        return 2
    except (CommandFailed, ActionError, AccessError, AuditError, BackendError) as exc:  # a backend's read, too
        print(f"gpuconsole: error: {exc}", file=sys.stderr)
        return 1
    except PermissionError as exc:
        print(f"gpuconsole: error: {permission_line(exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
