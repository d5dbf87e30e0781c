"""``gpuconsole access``: the IAM roles gpuconsole acts through, and who it acts as now.

``access iam-policy [--terraform] [--account ID]`` prints the three roles and their policies as
JSON (or Terraform) for an administrator to create; ``access whoami [--json]`` shows the login
and its gpuconsole role, the AWS identity and the role it acts through, the MFA state, the
Kubernetes user and what RBAC lets it do to jobs in each watched namespace (``--namespace``),
the TLS floor and the version each source negotiated, and what is missing to set each of these
up; the text answer fits 80 columns. Both exit 0; whoami exits 1 only when it cannot run at all.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from typing import Any, TextIO

from gpuconsole.cli.access import add_mfa_option, ensure_mfa, finish
from gpuconsole.cli.table import WIDTH


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
    who = verbs.add_parser("whoami", parents=[common],
                           help="login, role, AWS identity and role, MFA, Kubernetes user and RBAC, TLS",
                           description="Who the console acts as, in gpuconsole, AWS and Kubernetes (with what RBAC "
                                       "allows on jobs in each watched namespace), the TLS in use, "
                                       "and what is not set up.")
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
    from gpuconsole.core.access.whoami import EVERY_NAMESPACE, context_for, whoami
    from gpuconsole.core.ops.actions import ActionKind

    console = make_console(args)
    try:
        if args.mfa_code and console.services.guard.aws_checks_mfa(ActionKind.START):
            ensure_mfa(console.services.guard, ActionKind.START, args.mfa_code, "access whoami")
        answer = whoami(context_for(console))
    finally:
        console.close()
    if args.json:
        out.write(json.dumps(answer, indent=2, default=str) + "\n")
        return 0
    for name, section in answer.items():
        out.write(f"{name}\n")
        for key, value in section.items():
            if key == "jobs" and isinstance(value, dict):
                for namespace, verbs in value.items():
                    where = "every namespace" if namespace == EVERY_NAMESPACE else namespace
                    out.write(_line(f"jobs in {where}", _verbs_text(verbs)))
            elif key != "missing":
                out.write(_line(key.replace("_", " "), _shown(value)))
        for step in section.get("missing", ()):
            out.write(_line("missing", step))
    return 0


def _line(label: str, value: Any) -> str:
    """``  label: value``, wrapped to :data:`WIDTH` columns under its label."""
    return textwrap.fill(f"{label}: {value}", WIDTH, initial_indent="  ", subsequent_indent="      ",
                         break_on_hyphens=False) + "\n"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none yet"
    return str(value)


def _verbs_text(verbs: dict[str, dict[str, Any]]) -> str:
    """``may list; may not create, delete, patch`` (RBAC's answers for one namespace), with the
    reason when the cluster could not be asked."""
    allowed = [v for v, a in verbs.items() if a.get("allowed") is True]
    refused = [v for v, a in verbs.items() if a.get("allowed") is False]
    unknown = [v for v, a in verbs.items() if a.get("allowed") is None]
    parts = [f"may {', '.join(allowed)}"] if allowed else []
    parts += [f"may not {', '.join(refused)}"] if refused else []
    if unknown:
        parts.append(f"unknown {', '.join(unknown)} ({verbs[unknown[0]].get('reason', '')})")
    return "; ".join(parts)
