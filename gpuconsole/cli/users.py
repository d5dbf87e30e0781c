"""``gpuconsole users``: the users table (roles and namespaces) and MFA enrolment.

``users init`` makes the OS user running it the first admin of a fresh install and enrols its
MFA; after that only an admin (with a current MFA code) adds, changes or removes users. Every
change goes through the action path, so it is checked and audited like any other.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from gpuconsole.cli.access import (
    BadInput,
    CommandFailed,
    add_mfa_option,
    ensure_mfa,
    finish,
    guarded_log,
    make_guard,
)
from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

ROLES = ("admin", "developer", "auditor")
LIST_COLUMNS = (Column("USER", key=True), Column("ROLE"), Column("NAMESPACES", give=1, least=10))


def _name(text: str) -> str:
    from gpuconsole.core.access.access import AccessError, check_name

    try:
        return check_name(text)
    except AccessError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _namespace(text: str) -> str:
    from gpuconsole.core.access.access import AccessError, check_namespaces

    try:
        return check_namespaces((text,))[0]
    except AccessError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_users_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``users`` takes none of the data-source flags (its ``--namespace`` is a developer's)."""
    users = sub.add_parser("users", help="roles and namespaces of the console's users, and MFA",
                           description="The users table: who is admin, developer or auditor, in which namespaces.")
    actions = users.add_subparsers(dest="users_command", metavar="ACTION", parser_class=type(users), required=True)
    init = actions.add_parser("init", help="make yourself the first admin and enrol your MFA")
    init.add_argument("--no-qr", action="store_true", help="print the otpauth URI only, no QR code")
    for verb, text in (("add", "add a user"), ("set-role", "change a user's role or namespaces")):
        p = actions.add_parser(verb, help=text)
        p.add_argument("name", type=_name, metavar="NAME", help="the OS login of the user")
        p.add_argument("--role", choices=ROLES, required=True)
        p.add_argument("--namespace", dest="user_namespaces", type=_namespace, action="append", default=None,
                       metavar="NS", help="a namespace a developer may act in; repeat for several (* for all)")
        add_mfa_option(p)
    remove = actions.add_parser("remove", help="remove a user")
    remove.add_argument("name", type=_name, metavar="NAME")
    add_mfa_option(remove)
    listing = actions.add_parser("list", help="list the users and who you are")
    listing.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_wide_option(listing)
    mfa = actions.add_parser("mfa", help="enrol or test your MFA (TOTP)")
    mfa_actions = mfa.add_subparsers(dest="mfa_command", metavar="ACTION", parser_class=type(users), required=True)
    enroll = mfa_actions.add_parser("enroll", help="new TOTP secret: prints its URI and a QR code")
    enroll.add_argument("--no-qr", action="store_true", help="print the otpauth URI only, no QR code")
    add_mfa_option(enroll)
    check = mfa_actions.add_parser("verify", help="check a code (opens the MFA window)")
    check.add_argument("code", metavar="CODE")


def run_users(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``users ACTION``. Returns the exit status."""
    return finish(lambda o: _run(args, o), out)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    guard = make_guard(args)
    command = args.users_command
    if command == "list":
        return _list(guard, args, out)
    if command == "mfa":
        return _mfa(guard, args, out)
    if command == "init":
        return _init(guard, args, out)
    return _change(guard, args, out)


def _list(guard: Any, args: argparse.Namespace, out: TextIO) -> int:
    table = guard.users
    me = guard.principal
    users = table.list() if table.exists else ()
    if args.json:
        doc = {"schema": "gpuconsole.users/1", "table": str(table.path), "exists": table.exists,
               "you": {"name": me.name, "role": me.role_text, "managed": me.managed},
               "mfa_window_s": table.mfa_window_s(),
               "users": [{"name": u.name, "role": u.role.value, "namespaces": list(u.namespaces),
                          "mfa": guard.mfa.enrolled(u.name) if u.name == guard.user else None} for u in users]}
        out.write(json.dumps(doc, indent=2) + "\n")
        return 0
    width = width_of(args)
    if not table.exists:
        out.write(wrap(f"no users table yet ({table.path}): {me.name} acts as admin without MFA; "
                       "every action is audited. Run gpuconsole users init to set roles up.", width) + "\n")
        return 0
    rows = [(u.name + (" (you)" if u.name == me.name else ""), u.role.value,
             ", ".join(u.namespaces) if u.namespaces else ("all" if u.role.value != "developer" else "-")) for u in users]
    for line in render_table(LIST_COLUMNS, rows, width):
        out.write(line + "\n")
    if me.role is None:
        out.write(wrap(f"you ({me.name}) are not in the table: you may change nothing", width) + "\n")
    return 0


def _init(guard: Any, args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionKind, ActionRequest, run_action

    if guard.users.exists:
        raise CommandFailed(f"a users table exists already at {guard.users.path}: use users add / set-role")
    request = ActionRequest(ActionKind.USER_ADD, guard.user, params=(("role", "admin"), ("init", "yes")))
    run_action(request, lambda: f"{guard.users.init(guard.user).name} is the first admin", guarded_log(guard))
    out.write(wrap(f"{guard.user} is now admin; the users table is {guard.users.path}") + "\n")
    _enroll(guard, args, out)
    return 0


def _change(guard: Any, args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.access.access import Role
    from gpuconsole.core.ops.actions import ActionKind, ActionRequest, run_action

    command = args.users_command
    kind = {"add": ActionKind.USER_ADD, "set-role": ActionKind.USER_SET_ROLE, "remove": ActionKind.USER_REMOVE}[command]
    if not guard.users.exists:
        raise BadInput("no users table yet: run gpuconsole users init first")
    namespaces = tuple(getattr(args, "user_namespaces", None) or ())
    role = Role(args.role) if command != "remove" else None
    if role is not None and role is not Role.DEVELOPER and namespaces:
        raise BadInput("--namespace applies to developers only (admins and auditors see every namespace)")
    params: tuple[tuple[str, str], ...] = ()
    if role is not None:
        params = (("role", role.value), ("namespaces", ",".join(namespaces)))
    ensure_mfa(guard, kind, args.mfa_code, args.name)

    def do() -> str:
        if command == "add":
            user = guard.users.add(args.name, role, namespaces)
            return f"added {user.name} as {user.role.value}"
        if command == "set-role":
            keep = namespaces if args.user_namespaces is not None else (None if role is Role.DEVELOPER else ())
            user = guard.users.set_role(args.name, role, keep)
            return f"{user.name} is now {user.role.value}"
        guard.users.remove(args.name)
        return f"removed {args.name}"

    result = run_action(ActionRequest(kind, args.name, params=params), _access_errors(do), guarded_log(guard))
    out.write(wrap(result.message) + "\n")
    return 0


def _access_errors(do: Any) -> Any:
    """A users-table refusal (the last admin, an unknown user) as a failed action."""
    from gpuconsole.backends.base import BackendError
    from gpuconsole.core.access.access import AccessError

    def run() -> str:
        try:
            return str(do())
        except AccessError as exc:
            raise BackendError(str(exc)) from exc

    return run


def _mfa(guard: Any, args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.access.mfa import MfaError

    if args.mfa_command == "verify":
        try:
            guard.verify_mfa(args.code)
        except MfaError as exc:
            raise CommandFailed(f"MFA: {exc}") from None
        out.write(f"code accepted: destructive actions are open for {guard.users.mfa_window_s():.0f} s\n")
        return 0
    if guard.mfa.enrolled(guard.user):
        # Replacing a secret needs the current one, or a stolen session could drop the MFA.
        code = args.mfa_code
        if not code:
            from gpuconsole.cli.access import interactive

            if interactive():
                import getpass

                code = getpass.getpass("current MFA code (you are enrolled already): ")
        if not code:
            raise CommandFailed("you are enrolled already: pass --mfa-code with a current code to replace the secret")
        try:
            guard.verify_mfa(code)
        except MfaError as exc:
            raise CommandFailed(f"MFA: {exc}") from None
    _enroll(guard, args, out)
    return 0


def _enroll(guard: Any, args: argparse.Namespace, out: TextIO) -> None:
    from gpuconsole.core.access.mfa import qr_text

    _secret, uri = guard.enroll_mfa()
    out.write(wrap(f"MFA secret for {guard.user} saved in {guard.mfa.path} (readable by you only).") + "\n")
    out.write("Add it to an authenticator app (scan the code, or enter the URI):\n")
    out.write(uri + "\n")
    if not args.no_qr:
        out.write(qr_text(uri))
    out.write("Check it with: gpuconsole users mfa verify CODE\n")
