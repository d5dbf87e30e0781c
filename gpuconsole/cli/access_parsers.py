"""The command families that change or audit things one at a time: ``users``, ``audit``,
``instance``, ``job``, ``service`` and ``process`` (each in its own module), wired into the CLI in one place."""

from __future__ import annotations

import argparse
from typing import Any


def add_access_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    from gpuconsole.cli.audit import add_audit_parser
    from gpuconsole.cli.instance import add_instance_parser
    from gpuconsole.cli.job import add_job_parser
    from gpuconsole.cli.process import add_process_parser
    from gpuconsole.cli.users import add_users_parser

    add_users_parser(sub, common)
    add_audit_parser(sub, common)
    add_instance_parser(sub, common)
    add_job_parser(sub, common)
    from gpuconsole.cli.service import add_service_parser

    add_service_parser(sub, common)
    add_process_parser(sub, common)
    from gpuconsole.cli.access_roles import add_access_roles_parser
    from gpuconsole.cli.keys import add_keys_parser

    add_access_roles_parser(sub, common)
    add_keys_parser(sub, common)


def run_access_command(args: argparse.Namespace, make_console: Any) -> int:
    """Run ``users``, ``audit``, ``instance``, ``job``, ``service`` or ``process``; the exit status."""
    if args.command == "users":
        from gpuconsole.cli.users import run_users

        return run_users(args)
    if args.command == "audit":
        from gpuconsole.cli.audit import run_audit

        return run_audit(args, make_console)
    if args.command == "instance":
        from gpuconsole.cli.instance import run_instance

        return run_instance(args, make_console)
    if args.command == "access":
        from gpuconsole.cli.access_roles import run_access_roles

        return run_access_roles(args, make_console)
    if args.command == "keys":
        from gpuconsole.cli.keys import run_keys

        return run_keys(args)
    if args.command == "service":
        from gpuconsole.cli.service import run_service

        return run_service(args, make_console)
    if args.command == "process":
        from gpuconsole.cli.process import run_process

        return run_process(args, make_console)
    from gpuconsole.cli.job import run_job

    return run_job(args, make_console)
