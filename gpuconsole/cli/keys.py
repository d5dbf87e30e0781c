"""``gpuconsole keys rotate``: a new IAM access key for an AWS profile, the old one retired.

The steps and their checks are the core's (:mod:`gpuconsole.core.access.key_rotation`); this
module asks before starting (``--yes`` for scripts) and prints each step's one line. Exit
statuses: 0 rotated, 1 refused or failed (the audit log says which step), 2 a bad command line.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, CommandFailed, ask, finish, guarded_log, make_guard
from gpuconsole.cli.table import wrap


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not 0 <= value <= 3650:
        raise argparse.ArgumentTypeError(f"must be from 0 to 3650 days, got {text}")
    return value


def add_keys_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    keys = sub.add_parser("keys", parents=[common], help="rotate the IAM access key of an AWS profile",
                          description="Access keys of the AWS profile (the deployment guide rotates them every 90 days).")
    verbs = keys.add_subparsers(dest="keys_command", metavar="ACTION", parser_class=type(keys), required=True)
    rotate = verbs.add_parser("rotate", parents=[common], help="create a new key, install it, retire the old one",
                              description="Create a new access key for the profile's IAM user, write it into the "
                                          "shared credentials file (0600), check it with STS, deactivate the old key, "
                                          "and delete it after the grace period on a later run.")
    rotate.add_argument("--yes", action="store_true", help="rotate without asking")
    rotate.add_argument("--grace", type=_days, default=7.0, metavar="DAYS",
                        help="days an old key stays inactive before a later run deletes it (default 7)")


def run_keys(args: argparse.Namespace, out: TextIO | None = None) -> int:
    return finish(lambda o: _rotate(args, o), out)


def _rotate(args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.access.key_rotation import (
        KeyRotation,
        KeyRotationError,
        RetiredKeys,
        iam_keys_for,
        profile_key,
        short,
    )

    if args.demo:
        raise BadInput("keys rotate renews a real AWS key: the demo has none (drop --demo)")
    try:
        key = profile_key(args.profile)
    except KeyRotationError as exc:
        raise CommandFailed(str(exc)) from None
    if not args.yes:
        answer = ask(f"Rotate access key {short(key.key_id)} of profile {key.profile}? (y/n)")
        if answer.lower() not in ("y", "yes"):
            raise BadInput("rotation not confirmed: pass --yes, or answer y on a terminal")

    def say(line: str) -> None:
        out.write(wrap(line) + "\n")
        out.flush()

    rotation = KeyRotation(key, iam_keys_for(key.profile), guarded_log(make_guard(args)), RetiredKeys(), say=say)
    try:
        rotation.run(args.grace)
    except KeyRotationError as exc:
        raise CommandFailed(str(exc)) from None
    return 0
