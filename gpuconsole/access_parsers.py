"""The command families that change or audit things one at a time: ``users``, ``audit``,
``instance``, ``job`` and ``process`` (each in its own module), wired into the CLI in one place."""

from __future__ import annotations

import argparse
from typing import Any


def add_access_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    from gpuconsole.audit_cmd import add_audit_parser
    from gpuconsole.instance_cmd import add_instance_parser
    from gpuconsole.job_cmd import add_job_parser
    from gpuconsole.process_cmd import add_process_parser
    from gpuconsole.users_cmd import add_users_parser

    add_users_parser(sub, common)
    add_audit_parser(sub, common)
    add_instance_parser(sub, common)
    add_job_parser(sub, common)
    add_process_parser(sub, common)


def run_access_command(args: argparse.Namespace, make_console: Any) -> int:
    """Run ``users``, ``audit``, ``instance``, ``job`` or ``process``; the exit status."""
    if args.command == "users":
        from gpuconsole.users_cmd import run_users

        return run_users(args)
    if args.command == "audit":
        from gpuconsole.audit_cmd import run_audit

        return run_audit(args, make_console)
    if args.command == "instance":
        from gpuconsole.instance_cmd import run_instance

        return run_instance(args, make_console)
    if args.command == "process":
        from gpuconsole.process_cmd import run_process

        return run_process(args, make_console)
    from gpuconsole.job_cmd import run_job

    return run_job(args, make_console)
