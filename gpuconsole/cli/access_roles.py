"""``gpuconsole access``: the IAM roles gpuconsole acts through, and who it acts as now.

``access iam-policy [--terraform] [--account ID]`` prints the three roles and their policies as
JSON (or Terraform) for an administrator to create; ``access whoami [--json]`` shows the login
and its gpuconsole role, the AWS identity and the role it acts through, the MFA state, the TLS
version of AWS, and what is missing to set each of these up. Both exit 0; whoami exits 1 only
when it cannot run at all.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, TextIO

from gpuconsole.cli.access import add_mfa_option, ensure_mfa, finish


def _account(text: str) -> str:
    if not re.fullmatch(r"\d{12}", text):
        raise argparse.ArgumentTypeError(f"not an AWS account id (12 digits): {text!r}")
    return text


def add_access_roles_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    access = sub.add_parser("access", parents=[common], help="the IAM roles gpuconsole acts through; who you are",
                            description="IAM roles for gpuconsole's roles, and the identity the console acts as.")
    verbs = access.add_subparsers(dest="access_command", metavar="ACTION", parser_class=type(access), required=True)
    policy = verbs.add_parser("iam-policy", help="print the admin, developer and auditor IAM roles and policies",
                              description="The three IAM roles (trust and permissions) as JSON, or as Terraform.")
    policy.add_argument("--terraform", action="store_true", help="print Terraform (HCL) instead of JSON")
    policy.add_argument("--account", type=_account, default=None, metavar="ID",
                        help="the AWS account id to trust (default a placeholder, ACCOUNT_ID)")
    who = verbs.add_parser("whoami", parents=[common], help="login, gpuconsole role, AWS identity and role, MFA, TLS",
                           description="Who the console acts as, in gpuconsole and in AWS, and what is not set up.")
    who.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_mfa_option(who)  # an admin's AWS session under [aws.roles] opens only with a code


def run_access_roles(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    if args.access_command == "iam-policy":
        from gpuconsole.core.access import iam_policy

        out.write(iam_policy.as_terraform() if args.terraform
                  else iam_policy.as_json(args.account or iam_policy.ACCOUNT_PLACEHOLDER))
        return 0
    from gpuconsole.core.access.whoami import context_for, whoami
    from gpuconsole.core.ops.actions import ActionKind

    console = make_console(args)
    try:
        if args.mfa_code and console.guard.aws_checks_mfa(ActionKind.START):
            ensure_mfa(console.guard, ActionKind.START, args.mfa_code, "access whoami")
        answer = whoami(context_for(console))
    finally:
        console.close()
    if args.json:
        out.write(json.dumps(answer, indent=2, default=str) + "\n")
        return 0
    for name, section in answer.items():
        out.write(f"{name}\n")
        for key, value in section.items():
            if key == "missing":
                continue
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            out.write(f"  {key.replace('_', ' ')}: {shown}\n")
        for step in section.get("missing", ()):
            out.write(f"  missing: {step}\n")
    return 0
