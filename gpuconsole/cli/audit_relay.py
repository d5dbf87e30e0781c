"""``gpuconsole audit relay``: run the audit relay (root, as a system service), or print its
systemd units with ``audit relay manifest``. See :mod:`gpuconsole.core.access.audit_relay`."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any, TextIO

from gpuconsole.cli.access import CommandFailed

DEFAULT_SOCKET = "/run/gpuconsole/audit.sock"
DEFAULT_DB = "/var/lib/gpuconsole/audit-relay.db"


def add_relay_parser(actions: Any) -> None:
    relay = actions.add_parser(
        "relay", help="run the audit relay that every login's records reach (root), or print its systemd units",
        description="Listen on a Unix socket every login may connect to; take each record's login from the "
                    "socket's peer credentials; keep one root-owned chain and ship it to root's own [audit] copies.")
    relay.add_argument("what", nargs="?", choices=["manifest"], help="manifest: print the systemd socket and service units")
    relay.add_argument("--socket", default=DEFAULT_SOCKET, metavar="PATH", help=f"the socket (default {DEFAULT_SOCKET})")
    relay.add_argument("--db", default=DEFAULT_DB, metavar="PATH", help=f"the relay's chain (default {DEFAULT_DB})")


def run_relay(args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.access import audit_relay, audit_remote, audit_sink, site
    from gpuconsole.core.access.access import Role, UsersTable
    from gpuconsole.core.access.audit import AuditLog

    if args.what == "manifest":
        command = shutil.which("gpuconsole") or f"{sys.executable} -m gpuconsole"
        out.write(audit_relay.MANIFEST.format(socket=args.socket, db=args.db, command=command))
        return 0
    if os.geteuid() != 0:
        raise CommandFailed("the audit relay runs as root: its chain must be one no login can write")
    settings = site.load_site()
    users = UsersTable(settings.users) if settings.users is not None else None

    def role_of(login: str) -> str | None:
        """The site's role of ``login`` ("none" for a login the table does not name); None without a table."""
        if users is None or not users.exists:
            return None
        return users.principal(login).role_text

    def may_read(uid: int) -> bool:
        return uid == 0 or role_of(audit_relay.login_of(uid)) in (Role.ADMIN.value, Role.AUDITOR.value)

    audit_relay.private_db(Path(args.db))
    config = settings.config if "audit" in settings.tables else None
    log = audit_sink.attach(AuditLog(Path(args.db)), _without_relay(audit_sink.settings_from_config(config)))
    relay = audit_relay.AuditRelay(log, may_read, role_of, verify=lambda: audit_remote.verify_anchored(log))
    print(f"gpuconsole: audit relay on {args.socket}, its chain in {args.db}", file=sys.stderr)
    try:
        relay.serve(Path(args.socket), inherited_fd=audit_relay.systemd_socket())
    except KeyboardInterrupt:
        relay.stop()
    except OSError as exc:
        raise CommandFailed(f"the audit relay cannot listen on {args.socket}: {exc.strerror or exc}") from None
    return 0


def _without_relay(settings: Any) -> Any:
    """Root's own copies: the relay never sends its records to itself, and sends them as the
    machine's service role, not as a login's IAM user (``account`` binds the logins' own sinks)."""
    import dataclasses

    return dataclasses.replace(settings, relay=None, account=None)
