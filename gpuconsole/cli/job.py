"""``gpuconsole job``: submit, delete, suspend, resume and trigger jobs from a script, and move a
job Kueue has not admitted to another LocalQueue, or deactivate / reactivate its Workload.

The same door as the Jobs pane (:class:`~gpuconsole.core.ops.job_ops.JobOps`): the role,
namespace, MFA and audit checks and the confirmations are the core's. A delete or a suspend
needs ``--yes`` (or a y on a terminal).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpuconsole.cli.access import add_mfa_option, ask, ensure_mfa, finish
from gpuconsole.cli.table import wrap

KINDS = ("Job", "CronJob")


def _ref(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def add_job_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    job = sub.add_parser("job", parents=[common], help="submit, delete, suspend, resume or trigger a job",
                         description="Change one Job or CronJob through the console's checks and audit log.")
    verbs = job.add_subparsers(dest="job_command", metavar="ACTION", parser_class=type(job), required=True)
    submit = verbs.add_parser("submit", parents=[common], help="submit a Job (or a CronJob with --schedule)")
    submit.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
    submit.add_argument("--image", required=True, metavar="IMAGE")
    submit.add_argument("--gpus-per-pod", dest="pod_gpus", type=int, default=1, metavar="N", help="GPUs per pod (default 1)")
    submit.add_argument("--command", dest="job_cmdline", default="", metavar="CMD", help="shell line to run (default: the image's)")
    submit.add_argument("--schedule", default="", metavar="CRON", help="a cron schedule: submit a CronJob")
    submit.add_argument("--queue", default="", metavar="QUEUE",
                        help="a Kueue LocalQueue of the namespace (NAME or kueue:NAME), or a Volcano queue (volcano:NAME)")
    submit.add_argument("--dry-run", action="store_true", help="let the cluster check it; create nothing")
    add_mfa_option(submit)
    for verb, text in (("delete", "delete a Job or CronJob"), ("suspend", "suspend a Job or CronJob"),
                       ("resume", "resume a suspended Job or CronJob"), ("trigger", "run a CronJob now")):
        p = verbs.add_parser(verb, parents=[common], help=text)
        p.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
        if verb != "trigger":
            p.add_argument("--kind", dest="object_kind", choices=KINDS, default="Job", help="Job (default) or CronJob")
        if verb in ("delete", "suspend"):
            p.add_argument("--yes", action="store_true", help=f"{verb} without asking")
        add_mfa_option(p)
    move = verbs.add_parser("move", parents=[common], help="move a queued Job to another LocalQueue (Kueue)")
    move.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
    move.add_argument("queue", metavar="LOCALQUEUE", help="a LocalQueue of the Job's namespace")
    add_mfa_option(move)
    for verb, text in (("deactivate", "keep a queued Job's Workload out of its queue (Kueue)"),
                       ("reactivate", "put a deactivated Workload back in its queue")):
        p = verbs.add_parser(verb, parents=[common], help=text)
        p.add_argument("ref", type=_ref, metavar="NAMESPACE/NAME")
        add_mfa_option(p)


def run_job(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionKind

    namespace, name = args.ref
    verb = args.job_command
    object_kind = getattr(args, "object_kind", "CronJob")
    kind = {"submit": ActionKind.SUBMIT_JOB, "delete": ActionKind.DELETE_JOB, "resume": ActionKind.RESUME_JOB,
            "trigger": ActionKind.TRIGGER_CRONJOB, "move": ActionKind.MOVE_QUEUE,
            "deactivate": ActionKind.DEACTIVATE_WORKLOAD, "reactivate": ActionKind.REACTIVATE_WORKLOAD,
            "suspend": ActionKind.SUSPEND_JOB if object_kind == "Job" else ActionKind.SUSPEND_CRONJOB}[verb]
    console = make_console(args)
    try:
        jobs = console.services.jobs
        confirmation = ""
        if verb in ("delete", "suspend"):
            asked = ask(f"{verb.capitalize()} {object_kind} {namespace}/{name}? (y/n)").lower() if not args.yes else ""
            confirmation = "yes" if args.yes or asked in ("y", "yes") else ""
        if console.services.guard.why_not(kind, f"{namespace}/{name}") is None and not getattr(args, "dry_run", False):
            ensure_mfa(console.services.guard, kind, args.mfa_code, f"{namespace}/{name}")
        if verb == "submit":
            result = jobs.submit(_request(args, namespace, name, console.services.guard.user), dry_run=args.dry_run)
        elif verb == "delete":
            result = jobs.delete(object_kind, namespace, name, confirmation)
        elif verb == "suspend":
            result = jobs.suspend(object_kind, namespace, name, confirmation)
        elif verb == "resume":
            result = jobs.resume(object_kind, namespace, name)
        elif verb == "move":
            result = jobs.move_queue(namespace, name, args.queue)
        elif verb in ("deactivate", "reactivate"):
            result = jobs.set_workload_active(namespace, name, verb == "reactivate")
        else:
            result = jobs.trigger(namespace, name)
    finally:
        console.close()
    out.write(wrap(result.message) + "\n")
    return 0


def _request(args: argparse.Namespace, namespace: str, name: str, owner: str) -> Any:
    from gpuconsole.core.ops.manifests import JobRequest
    from gpuconsole.core.ops.queue_manifest import parse_choice

    local_queue, volcano_queue = parse_choice(args.queue)
    return JobRequest(name=name, namespace=namespace, image=args.image, gpus=args.pod_gpus,
                      command=args.job_cmdline, schedule=args.schedule, owner=owner, queue=local_queue,
                      volcano_queue=volcano_queue)
