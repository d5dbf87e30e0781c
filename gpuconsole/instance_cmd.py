"""``gpuconsole instance``: start, stop, reboot or terminate an instance from a script.

The same door as the Instances pane (:meth:`CloudOps.perform`): the role, MFA and audit checks
and the confirmations are the core's. A stop or a reboot needs ``--yes`` (or a y on a terminal);
a terminate needs its id typed again (``--confirm ID``, or on a terminal).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpuconsole.access_cmd import BadInput, add_mfa_option, ask, ensure_mfa, finish

VERBS = ("start", "stop", "reboot", "terminate")


def _instance_id(text: str) -> str:
    if not text or any(c.isspace() for c in text) or len(text) > 64:
        raise argparse.ArgumentTypeError(f"not an instance id: {text!r}")
    return text


def add_instance_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    inst = sub.add_parser("instance", parents=[common], help="start, stop, reboot or terminate a cloud instance",
                          description="Act on one instance through the console's checks and audit log.")
    verbs = inst.add_subparsers(dest="instance_command", metavar="ACTION", parser_class=type(inst), required=True)
    for verb in VERBS:
        p = verbs.add_parser(verb, parents=[common], help=f"{verb} an instance")
        p.add_argument("instance_id", type=_instance_id, metavar="ID")
        if verb == "terminate":
            p.add_argument("--confirm", default="", metavar="ID", help="the instance id again: a terminate cannot be undone")
        elif verb != "start":
            p.add_argument("--yes", action="store_true", help=f"{verb} without asking")
        p.add_argument("--wait", type=float, default=5.0, metavar="S", help="seconds to wait for the cloud's answer")
        add_mfa_option(p)


def run_instance(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.actions import ActionKind, ActionRequest, confirmation_prompt

    kind = ActionKind(args.instance_command)
    target = args.instance_id
    console = make_console(args)
    try:
        region = _region(console, args, kind, target)
        confirmation = ""
        if kind is ActionKind.TERMINATE:
            confirmation = args.confirm or ask(confirmation_prompt(kind, target))
        elif kind.destructive:
            confirmation = "yes" if args.yes or ask(confirmation_prompt(kind, target)).lower() in ("y", "yes") else ""
        if console.guard.why_not(kind, target) is None:
            ensure_mfa(console.guard, kind, args.mfa_code, target)
        result = console.cloud.perform(ActionRequest(kind, target, region, confirmation))
    finally:
        console.close()
    out.write(result.message + "\n")
    return 0


def _region(console: Any, args: argparse.Namespace, kind: Any, target: str) -> str:
    """The instance's region, from what the cloud lists (else the first region asked for); the
    cloud is not asked when the action is denied anyway."""
    if console.guard.why_not(kind, target) is not None:
        return args.regions[0] if args.regions else ""
    console.start(open_store=False)
    console.wait_for_first_answers(args.wait)
    for inst in console.snapshot.instances:
        if inst.instance_id == target:
            return str(inst.region)
    if console.cloud.available and console.snapshot.instances:
        raise BadInput(f"no instance {target} in {', '.join(console.cloud.regions) or 'the cloud'}")
    return args.regions[0] if args.regions else ""

