"""``gpuconsole instance``: launch, start, stop, reboot or terminate an instance from a script.

The same doors as the launch wizard and the Instances pane (:meth:`CloudOps.launch`,
:meth:`CloudOps.perform`): the role, MFA and audit checks and the confirmations are the core's.
A launch, a stop or a reboot needs ``--yes`` (or a y on a terminal); a terminate needs its id
typed again (``--confirm ID``, or on a terminal).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, add_mfa_option, ask, ensure_mfa, finish
from gpuconsole.cli.table import wrap
from gpuconsole.model.cloud import INSTANCE_ID_FORM, is_instance_id

VERBS = ("start", "stop", "power-off", "reboot", "terminate")


def _instance_id(text: str) -> str:
    if not is_instance_id(text):
        raise argparse.ArgumentTypeError(f"not an instance id: {text!r} (an id is {INSTANCE_ID_FORM})")
    return text


def add_instance_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    inst = sub.add_parser("instance", parents=[common], help="start, stop, reboot or terminate a cloud instance",
                          description="Act on one instance through the console's checks and audit log.")
    verbs = inst.add_subparsers(dest="instance_command", metavar="ACTION", parser_class=type(inst), required=True)
    launch = verbs.add_parser("launch", parents=[common], help="launch GPU instances (on-demand or spot)",
                              description="Launch like the wizard does: encrypted volumes, IMDSv2 required, and on a "
                                          "capacity error the next zone that offers the type.")
    launch.add_argument("--type", dest="instance_type", required=True, metavar="TYPE", help="instance type, e.g. g5.xlarge")
    launch.add_argument("--image", default="", metavar="AMI", help="image id (default: the region's Deep Learning AMI for the workload)")
    launch.add_argument("--spot", action="store_true", help="a spot instance instead of on-demand")
    launch.add_argument("--count", type=int, default=1, metavar="N", help="how many (default 1)")
    launch.add_argument("--zone", default="", metavar="AZ", help="availability zone (default: any that offers the type)")
    launch.add_argument("--workload", choices=("training", "inference"), default="training",
                        help="picks the default image (default training)")
    launch.add_argument("--tag", dest="tags", action="append", default=[], metavar="KEY=VALUE",
                        help="a tag, e.g. Budget=sprint (repeatable)")
    launch.add_argument("--only-this-zone", action="store_true", help="do not fall back to other zones or types")
    launch.add_argument("--yes", action="store_true", help="launch without asking")
    add_mfa_option(launch)
    for verb in VERBS:
        p = verbs.add_parser(verb, parents=[common], help=f"{verb} an instance" if verb != "power-off" else
                             "power off an Azure VM without deallocating it: its compute STILL BILLS (stop deallocates)")
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
    from gpuconsole.core.ops.actions import (
        ActionKind,
        ActionRequest,
        confirmation_prompt,
    )

    if args.instance_command == "launch":
        return _launch(args, make_console, out)
    kind = ActionKind(args.instance_command)
    target = args.instance_id
    console = make_console(args)
    try:
        if console.services.guard.aws_checks_mfa(kind) and console.services.guard.why_not(kind, target) is None:
            ensure_mfa(console.services.guard, kind, args.mfa_code, target)  # AWS's admin session, before the cloud is read
        region = _region(console, args, kind, target)
        confirmation = ""
        if kind is ActionKind.TERMINATE:
            confirmation = args.confirm or ask(confirmation_prompt(kind, target))
        elif kind.destructive:
            confirmation = "yes" if args.yes or ask(confirmation_prompt(kind, target)).lower() in ("y", "yes") else ""
        if console.services.guard.why_not(kind, target) is None:
            ensure_mfa(console.services.guard, kind, args.mfa_code, target)
        result = console.services.cloud.perform(ActionRequest(kind, target, region, confirmation))
    finally:
        console.close()
    out.write(wrap(result.message) + "\n")
    return 0


def _region(console: Any, args: argparse.Namespace, kind: Any, target: str) -> str:
    """The instance's region, from what the cloud lists (else the first region asked for); the
    cloud is not asked when the action is denied anyway."""
    if console.services.guard.why_not(kind, target) is not None:
        return args.regions[0] if args.regions else ""
    console.start(open_store=False)
    console.wait_for_first_answers(args.wait)
    for inst in console.snapshot.instances:
        if inst.instance_id == target:
            return str(inst.region)
    if console.services.cloud.available and console.snapshot.instances:
        raise BadInput(f"no instance {target} in {', '.join(console.services.cloud.regions) or 'the cloud'}")
    return args.regions[0] if args.regions else ""



def _launch(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionKind
    from gpuconsole.model import LaunchSpec, Market, Workload

    if args.count < 1:
        raise BadInput(f"--count must be 1 or more, not {args.count}")
    tags = []
    for tag in args.tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise BadInput(f"--tag wants KEY=VALUE, not {tag!r}")
        tags.append((key, value))
    console = make_console(args)
    try:
        region = args.regions[0] if args.regions else (console.services.cloud.regions[0] if console.services.cloud.regions else "")
        if not region:
            raise BadInput("no region: pass --region R (or set one in the AWS profile)")
        target = args.instance_type
        allowed = console.services.guard.why_not(ActionKind.LAUNCH, target) is None
        if allowed and console.services.guard.aws_checks_mfa(ActionKind.LAUNCH):
            ensure_mfa(console.services.guard, ActionKind.LAUNCH, args.mfa_code, target)  # AWS's admin session, before AWS is read
        image = args.image
        if not image and allowed:
            image = console.services.cloud.default_image(region, Workload(args.workload)).image_id
        spec = LaunchSpec(region, args.instance_type, image or "ami-unknown", Market.SPOT if args.spot else Market.ON_DEMAND,
                          count=args.count, availability_zone=args.zone, tags=tuple(tags))
        if allowed:
            market = "spot" if args.spot else "on-demand"
            asked = "" if args.yes else ask(f"Launch {args.count} × {args.instance_type} ({market}) in {args.zone or region}? (y/n)")
            if not (args.yes or asked.lower() in ("y", "yes")):
                raise BadInput("launch not confirmed: pass --yes, or answer y on a terminal")
            ensure_mfa(console.services.guard, ActionKind.LAUNCH, args.mfa_code, target)
        result = console.services.cloud.launch(spec, try_alternatives=not args.only_this_zone)
    finally:
        console.close()
    final = result.spec or spec
    ids = ", ".join(i.instance_id for i in result.instances)
    out.write(wrap(f"launched {ids} ({final.instance_type}, {final.market.value}) in {final.availability_zone or final.region}") + "\n")
    return 0
