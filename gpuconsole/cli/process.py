"""``gpuconsole process kill PID``: send SIGTERM or SIGKILL to a GPU process from a script.

The same door as the GPUs pane's ``T`` / ``K`` keys (:meth:`GpuOps.kill`): the console reads the
GPUs once to find the process, then the role, namespace, MFA and audit checks and the
confirmation are the core's. It needs ``--yes`` (or a y on a terminal).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, add_mfa_option, ask, ensure_mfa, finish
from gpuconsole.cli.table import wrap

SIGNALS = {"TERM": "SIGTERM", "SIGTERM": "SIGTERM", "KILL": "SIGKILL", "SIGKILL": "SIGKILL"}


def _pid(text: str) -> int:
    try:
        pid = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return pid


def _signal(text: str) -> str:
    name = SIGNALS.get(text.upper())
    if name is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a signal the console sends: TERM or KILL")
    return name


def add_process_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    proc = sub.add_parser("process", parents=[common], help="signal a process that holds a GPU",
                          description="Send SIGTERM or SIGKILL to a GPU process through the console's checks and audit log.")
    verbs = proc.add_subparsers(dest="process_command", metavar="ACTION", parser_class=type(proc), required=True)
    kill = verbs.add_parser("kill", parents=[common], help="send SIGTERM (default) or SIGKILL to a GPU process")
    kill.add_argument("pid", type=_pid, metavar="PID")
    kill.add_argument("--signal", type=_signal, default="SIGTERM", metavar="SIG", help="TERM (default: it may save its work) or KILL")
    kill.add_argument("--yes", action="store_true", help="send it without asking")
    kill.add_argument("--wait", type=float, default=5.0, metavar="S", help="seconds to wait for the GPU source's answer")
    add_mfa_option(kill)


def run_process(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionKind

    console = make_console(args)
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(args.wait)
        found = next(((g, p) for g in console.snapshot.gpus for p in g.processes if p.pid == args.pid), None)
        if found is None:
            raise BadInput(f"no process {args.pid} holds a GPU that the GPU source shows (see gpuconsole gpus --once)")
        gpu, proc = found
        asked = "" if args.yes else ask(f"Send {args.signal} to pid {proc.pid} ({proc.name}) on GPU {gpu.index} of {gpu.node}? (y/n)")
        confirmation = "yes" if args.yes or asked.lower() in ("y", "yes") else ""
        request = console.services.gpus.kill_request(gpu.uuid, proc.pid, args.signal, confirmation)
        if console.services.guard.why_not(ActionKind.KILL_PROCESS, request.target, params=request.params) is None:
            ensure_mfa(console.services.guard, ActionKind.KILL_PROCESS, args.mfa_code, request.target)
        result = console.services.gpus.kill(gpu.uuid, proc.pid, args.signal, confirmation)
    finally:
        console.close()
    out.write(wrap(result.message) + "\n")
    return 0
