"""``gpuconsole notify``: the one sender of alerts, and what it has sent.

``notify run`` sends: one process at a time (the autopilot's Lease or host lock: the other
stands by and says who sends), one line per event (``--json``), a clean stop on SIGTERM.
``notify list`` shows the active alerts and their delivery per channel, ``notify status`` the
sender and each channel's health, ``notify test CHANNEL`` sends a test alert and its resolve,
``notify manifest`` prints the Deployment or the systemd unit that runs the sender.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, finish
from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

FIRST_ANSWER_S = 10.0
NO_CHANNELS = "no notification channels: add [[notify]] tables to the config file (kind, url, …)"
LIST_COLUMNS = (Column("ALERT", key=True), Column("SEVERITY"), Column("STATE"), Column("SINCE"),
                Column("DELIVERY", give=2, least=12), Column("SUMMARY", give=3, least=12, drop=True))
STATUS_COLUMNS = (Column("CHANNEL", key=True), Column("KIND"), Column("TARGET"), Column("WAITING"),
                  Column("HEALTH", give=3, least=12))


def add_notify_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("notify", parents=[common], help="send alerts to Alertmanager, Slack, PagerDuty, SNS, e-mail, webhooks",
                       description="The one sender of alerts: run it, see what it sent, test a channel.")
    verbs = p.add_subparsers(dest="notify_command", metavar="ACTION", parser_class=type(p), required=True)
    run = verbs.add_parser("run", parents=[common], help="send alerts every --interval seconds (stop: SIGTERM)")
    run.add_argument("--once", action="store_true", help="one refresh, then exit")
    run.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON line per event")
    run.add_argument("--notify-demo", action="store_true",
                     help="with --demo: send the demo's alerts to the channels, each marked demo")
    run.add_argument("--lock", default=None, metavar="PATH",
                     help="without a cluster: the sender lock file (default: the autopilot's)")
    run.add_argument("--lease-seconds", type=int, default=15, metavar="S",
                     help="on a cluster: how long the Lease outlives a sender that stopped renewing it (default 15)")
    add_wide_option(run)
    ls = verbs.add_parser("list", parents=[common], help="active alerts and their delivery per channel")
    ls.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON ([] when none)")
    add_wide_option(ls)
    st = verbs.add_parser("status", parents=[common], help="who sends, and each channel's health")
    st.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    st.add_argument("--lock", default=None, metavar="PATH", help="the sender lock file notify run was given")
    add_wide_option(st)
    test = verbs.add_parser("test", parents=[common], help="send a test alert and its resolve through CHANNEL")
    test.add_argument("channel", metavar="CHANNEL")
    man = verbs.add_parser("manifest", parents=[common], help="print a Kubernetes Deployment or a systemd unit")
    which = man.add_mutually_exclusive_group(required=True)
    which.add_argument("--kubernetes", action="store_true", help="ServiceAccount, Role, ConfigMap, PVC, Deployment")
    which.add_argument("--systemd", action="store_true", help="a systemd unit for a bastion")
    man.add_argument("--image", default="gpuconsole:latest", metavar="IMAGE", help="container image (--kubernetes)")


def run_notify(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _dispatch(args, make_console, o), out)


def _dispatch(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    verb = args.notify_command
    if verb == "manifest":
        return _manifest(args, out)
    if verb == "run":
        return _run(args, make_console, out)
    channels = _channels(args)
    if verb == "test":
        return _test(args, channels, out)
    outbox = _outbox(args)
    try:
        return _list(args, channels, outbox, out) if verb == "list" else _status(args, channels, outbox, out)
    finally:
        outbox.close()


def _channels(args: argparse.Namespace) -> Any:
    from gpuconsole.core.config import ConfigError
    from gpuconsole.core.notify.config import load_channels

    try:
        return load_channels(args.config)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def _outbox(args: argparse.Namespace, *, keep: bool = True) -> Any:
    """The episodes and queues; a demo's are its own (``$GPUCONSOLE_DEMO_DIR``, else in memory)."""
    import sqlite3

    from gpuconsole.core.notify.outbox import Outbox
    from gpuconsole.core.notify.status import queue_path

    path: Path | str | None = queue_path(args.demo) if keep else None
    path = ":memory:" if path is None else path
    try:
        return Outbox(path)
    except (OSError, sqlite3.Error) as exc:
        raise BadInput(f"the notification queue {path} cannot be opened: {exc}") from None


def leader_sender(args: argparse.Namespace) -> Any:
    """The sender ``autopilot run`` calls while it leads (it holds the same Lease or lock), or
    None: no ``[[notify]]`` channels (nothing is opened), or a demo without ``--notify-demo``."""
    from gpuconsole.core.notify.sender import NotifySender

    if args.demo and not args.notify_demo:
        return None
    channels = _channels(args)
    return NotifySender(channels, _outbox(args)) if channels else None


def sign_as_console(args: argparse.Namespace, console: Any) -> None:
    """An sns channel signs as every other AWS call of this run: its profile, its role session."""
    from gpuconsole.core.notify.channels import use_console_aws

    roles = console.services.aws_roles
    use_console_aws(getattr(args, "profile", None), roles.refresh if roles is not None else None)


def write_report(report: Any, out: TextIO, width: int, as_json: bool) -> None:
    """One line per event of a sender's cycle (fired, resolved, delivered, failed)."""
    for line in report.lines():
        _write(out, line, wrap(_text(line), width), as_json)


def _leadership(args: argparse.Namespace, job_backend: object) -> Any:
    import tempfile

    from gpuconsole.core.notify import sender_lock_path
    from gpuconsole.core.ops.autopilot.leader import default_identity, leadership_for

    namespace = args.namespaces[0] if args.namespaces else "default"
    default_lock = (Path(tempfile.gettempdir()) / f"gpuconsole-demo-{os.getpid()}.lock" if args.demo
                    else sender_lock_path())
    lock = Path(args.lock) if getattr(args, "lock", None) else default_lock
    return leadership_for(job_backend, namespace, lock, identity=f"{default_identity()} (notify run)",
                          lease_s=getattr(args, "lease_seconds", 15))


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.backends.base import BackendError
    from gpuconsole.core.notify.alerts import recorded_actions
    from gpuconsole.core.notify.sender import NotifySender

    if args.lease_seconds < 2:
        raise BadInput(f"--lease-seconds must be 2 or more, not {args.lease_seconds}")
    if args.notify_demo and not args.demo:
        raise BadInput("--notify-demo goes with --demo")
    channels = _channels(args)
    as_json, width = bool(getattr(args, "json", False)), width_of(args)
    if args.demo and not args.notify_demo:
        channels = ()
        _write(out, {"event": "demo", "sends": False},
               wrap("demo: sending nowhere (add --notify-demo to send its alerts, marked demo)", width), as_json)
    elif not channels:
        raise BadInput(NO_CHANNELS)
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    outbox = _outbox(args) if channels else _outbox(args, keep=False)  # a demo sending nowhere keeps nothing
    console = make_console(args)
    sign_as_console(args, console)
    leader = _leadership(args, console.services.jobs.backend)
    sender = NotifySender(channels, outbox)
    said = ""
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(FIRST_ANSWER_S)
        while not stop.is_set():
            try:
                leads = leader.acquire()
            except BackendError as exc:
                leads, line = False, f"not sending: {exc}"
                if line != said:
                    _write(out, {"event": "standby", "error": str(exc)}, wrap(line, width), as_json)
                said = line
            else:
                if not leads:
                    holder = leader.holder() or "another process"
                    line = f"standing by: {holder} sends"
                    if line != said:
                        _write(out, {"event": "standby", "holder": holder}, wrap(line, width), as_json)
                    said = line
            if leads:
                if said != "leading":
                    _write(out, {"event": "sending", "holder": leader.identity},
                           wrap(f"sending as {leader.identity}", width), as_json)
                    said = "leading"
                report = sender.cycle(console.snapshot, () if args.demo else recorded_actions(args.config))
                write_report(report, out, width, as_json)
            if args.once:
                break
            stop.wait(args.interval)
    finally:
        leader.release()
        console.close()
        outbox.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _text(line: dict[str, Any]) -> str:
    event = line["event"]
    if event == "fired":
        return f"fired {line['id']} ({line['severity']}): {line['summary']}"
    if event == "resolved":
        return f"resolved {line['id']}"
    if event == "delivered":
        return f"{line['channel']}: sent {line['status']} {line['message']}"
    return f"{line['channel']}: failed: {line['error']}"


def _list(args: argparse.Namespace, channels: Any, outbox: Any, out: TextIO) -> int:
    rows = []
    for ep in sorted(outbox.active().values(), key=lambda e: e.started):
        per: dict[str, dict[str, Any]] = {}
        for m in outbox.deliveries(ep.identity):
            if not m.id.startswith(f"{ep.identity}@{ep.started:.0f}:"):
                continue  # an earlier episode's
            per[m.channel] = {"message": m.id, "status": m.status, "delivered_at": m.delivered,
                              "attempts": m.attempts, "error": m.error or None}
        alert = ep.alert
        rows.append({"id": ep.identity, "kind": alert["kind"], "severity": alert["severity"],
                     "summary": alert["summary"], "state": "firing" if ep.fired is not None else "pending",
                     "started_at": ep.started, "fired_at": ep.fired, "labels": dict(alert.get("labels", ())),
                     "deliveries": per})
    if getattr(args, "json", False):
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if not rows:
        out.write(wrap("no active alerts", width_of(args)) + "\n")
        return 0
    table = [(r["id"], r["severity"], r["state"], _ago(r["started_at"]),
              ", ".join(f"{c} {'sent' if d['delivered_at'] else 'waiting'}" for c, d in r["deliveries"].items()) or "-",
              r["summary"]) for r in rows]
    for line in render_table(LIST_COLUMNS, table, width_of(args)):
        out.write(line + "\n")
    return 0


def _ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    import humanize

    return humanize.naturaldelta(max(0.0, time.time() - ts)) + " ago"


def _status(args: argparse.Namespace, channels: Any, outbox: Any, out: TextIO) -> int:
    from gpuconsole.core.notify import sender_lock_path
    from gpuconsole.core.ops.autopilot.leader import FileLeadership

    lock = Path(args.lock) if getattr(args, "lock", None) else sender_lock_path()
    holder = FileLeadership(lock).holder()
    rows = []
    for c in channels:
        h = outbox.health(c.name)
        health = (f"failing since {_ago(h.failing_since)}: {h.last_error}" if h.failing_since is not None
                  else f"ok, last sent {_ago(h.last_ok)}" if h.last_ok is not None else "nothing sent yet")
        rows.append({"channel": c.name, "kind": c.kind, "target": c.host, "waiting": h.waiting,
                     "failing_since": h.failing_since, "error": h.last_error or None, "last_ok": h.last_ok,
                     "health": health})
    if getattr(args, "json", False):
        out.write(json.dumps({"sender": holder or None, "channels": rows}, indent=2) + "\n")
        return 0
    width = width_of(args)
    out.write(wrap(f"sender: {holder}" if holder else "sender: none running on this host", width) + "\n")
    if not rows:
        out.write(wrap(NO_CHANNELS, width) + "\n")
        return 0
    table = [(r["channel"], r["kind"], r["target"], r["waiting"], r["health"]) for r in rows]
    for line in render_table(STATUS_COLUMNS, table, width):
        out.write(line + "\n")
    return 0


def _test(args: argparse.Namespace, channels: Any, out: TextIO) -> int:
    from gpuconsole.core.notify.alerts import channel_test_alert
    from gpuconsole.core.notify.outbox import Outbox
    from gpuconsole.core.notify.sender import NotifySender

    by_name = {c.name: c for c in channels}
    if args.channel not in by_name:
        raise BadInput(f"no channel {args.channel!r} (channels: {', '.join(by_name) or 'none'})")
    channel = by_name[args.channel]
    sender = NotifySender((channel,), Outbox(":memory:"))
    sender.test(channel, channel_test_alert(channel.name))
    out.write(wrap(f"sent a test alert and its resolve through {channel.describe()}", width_of(args)) + "\n")
    return 0


def _manifest(args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.core.notify.deploy import SENDER

    return print_manifest(SENDER, args, out)


def print_manifest(service: Any, args: argparse.Namespace, out: TextIO) -> int:
    """``COMMAND manifest --kubernetes | --systemd`` for ``service`` (``autopilot manifest`` too)."""
    from gpuconsole.core.config import ConfigError
    from gpuconsole.core.ops.deploy import manifest

    try:
        out.write(manifest(service, kubernetes=args.kubernetes, namespace=args.namespaces[0] if args.namespaces else None,
                           image=args.image, config=args.config))
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    return 0


def _write(out: TextIO, obj: dict[str, Any], text: str, as_json: bool) -> None:
    out.write((json.dumps(obj, sort_keys=True) if as_json else text) + "\n")
    out.flush()
