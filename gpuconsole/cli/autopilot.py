"""``gpuconsole autopilot`` and ``gpuconsole rule``: the autopilot as a service, and its rules.

``autopilot run`` is the headless engine: one JSON line per decision (``--json``), one replica
acting at a time (a file lock on this host), a clean stop on SIGTERM; while it leads it is also
the sender of alerts to the ``[[notify]]`` channels (the same Lease or lock as ``notify run``,
so one process sends). ``autopilot plan`` shows
what every rule would do now and why, changing nothing; so does ``run`` with ``--read-only``.
``autopilot manifest`` prints the Kubernetes objects or the systemd unit that run it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, finish
from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

FIRST_ANSWER_S = 30.0  # at most; it goes on as soon as every source has answered once
NO_RULES = "no autopilot rules: add [[rules]] to the config file, or use gpuconsole rule add"
# rule list: the last decision gives first and may go, then the scope
RULE_COLUMNS = (Column("NAME", key=True), Column("KIND"), Column("SCOPE", give=2, least=10), Column("FROM"),
                Column("STATE"), Column("LAST DECISION", give=3, least=12, drop=True))


def add_autopilot_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    ap = sub.add_parser("autopilot", parents=[common], help="run the rules that scale, stop idle GPUs and recover spot work",
                        description="The autopilot engine: run it, see its plan, or print how to deploy it.")
    verbs = ap.add_subparsers(dest="autopilot_command", metavar="ACTION", parser_class=type(ap), required=True)
    run = verbs.add_parser("run", parents=[common], help="act on the rules every --interval seconds (stop: SIGTERM)")
    run.add_argument("--once", action="store_true", help="one refresh, then exit")
    run.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON line per decision")
    add_wide_option(run)
    run.add_argument("--lock", default=None, metavar="PATH",
                     help="without a cluster: the leader lock file (default: beside the autopilot database)")
    run.add_argument("--lease-seconds", type=int, default=15, metavar="S",
                     help="on a cluster: how long the Lease outlives a leader that stopped renewing it (default 15)")
    run.add_argument("--notify-demo", action="store_true",
                     help="with --demo: send the demo's alerts to the [[notify]] channels, each marked demo")
    plan = verbs.add_parser("plan", parents=[common], help="what every rule would do now, and why (changes nothing)")
    plan.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON lines")
    add_wide_option(plan)
    man = verbs.add_parser("manifest", parents=[common], help="print a Kubernetes Deployment or a systemd unit")
    which = man.add_mutually_exclusive_group(required=True)
    which.add_argument("--kubernetes", action="store_true", help="ServiceAccount, Role, RoleBinding, ConfigMap, Deployment")
    which.add_argument("--systemd", action="store_true", help="a systemd unit for a bastion")
    man.add_argument("--image", default="gpuconsole:latest", metavar="IMAGE", help="container image (--kubernetes)")
    rule = sub.add_parser("rule", parents=[common], help="list, add or remove autopilot rules",
                          description="Rules from the config file's [[rules]] and those added here (kept in the autopilot database).")
    rverbs = rule.add_subparsers(dest="rule_command", metavar="ACTION", parser_class=type(rule), required=True)
    rlist = rverbs.add_parser("list", parents=[common], help="every rule and where it comes from")
    rlist.add_argument("--json", dest="rules_json", action="store_true", help="print JSON ([] when there is none)")
    add_wide_option(rlist)
    add = rverbs.add_parser("add", parents=[common], help="add a rule, written as one TOML inline table")
    add.add_argument("table", metavar="TOML", help='e.g. \'{ name = "autostop", kind = "idle-stop", idle_for = "30m" }\'')
    rm = rverbs.add_parser("remove", parents=[common], help="remove a rule added with rule add")
    rm.add_argument("name", metavar="NAME")
    for verb in ("pause", "resume"):
        p = rverbs.add_parser(verb, parents=[common], help=f"{verb} a rule")
        p.add_argument("name", metavar="NAME")


def run_autopilot(args: argparse.Namespace, make_console: Any, out: TextIO | None = None) -> int:
    return finish(lambda o: _dispatch(args, make_console, o), out)


def _dispatch(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    if args.command == "rule":
        return _rule(args, out)
    if args.autopilot_command == "manifest":
        return _manifest(args, out)
    return _engine(args, make_console, out, plan_only=args.autopilot_command == "plan")


def _open_state(args: argparse.Namespace | None = None) -> Any:
    """The autopilot database; a demo's is its own (in ``$GPUCONSOLE_DEMO_DIR`` when set, else
    in memory), so nothing a demo's rules do reaches the real cooldowns."""
    import sqlite3

    from gpuconsole.core import paths
    from gpuconsole.core.ops.autopilot.loading import state_path
    from gpuconsole.core.ops.autopilot.state import AutopilotState

    if args is not None and args.demo:
        kept = paths.demo_dir()
        path: Path | str = paths.private_dir(kept) / "autopilot.db" if kept is not None else ":memory:"
    else:
        path = state_path()
    try:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        return AutopilotState(path)
    except (OSError, sqlite3.Error) as exc:
        raise BadInput(f"the autopilot database {path} cannot be opened: {exc}") from None


def _rules(args: argparse.Namespace, state: Any) -> Any:
    """The config file's and the database's rules (in a demo without any, the demo's)."""
    from gpuconsole.core.access.site import site_rules_file
    from gpuconsole.core.ops.autopilot.loading import console_rules
    from gpuconsole.core.ops.autopilot.rules import RuleError

    try:
        return console_rules(args.config, state, demo=args.demo, site_config=site_rules_file())
    except RuleError as exc:
        raise BadInput(str(exc)) from None


def _rule(args: argparse.Namespace, out: TextIO) -> int:
    import tomllib

    from gpuconsole.core.access.guard import default_guard
    from gpuconsole.core.ops.actions import ActionLog
    from gpuconsole.core.ops.autopilot import rule_ops
    from gpuconsole.core.ops.autopilot.rules import RuleError

    state = _open_state()
    try:
        rules = _rules(args, state)
        if args.rule_command == "list":
            if getattr(args, "rules_json", False):
                rows = [{"name": r.name, "kind": r.kind, "scope": r.scope.text(), "origin": r.origin,
                         "paused": state.get(r.name).paused, "last_decision": state.get(r.name).last_decision or None}
                        for r in rules]
                out.write(json.dumps(rows, indent=2) + "\n")
                return 0
            if not rules:
                out.write(wrap(NO_RULES, width_of(args)) + "\n")
                return 0
            rows = [(r.name, r.kind, r.scope.text(), r.origin, "paused" if state.get(r.name).paused else "active",
                     state.get(r.name).last_decision) for r in rules]
            for line in render_table(RULE_COLUMNS, rows, width_of(args)):
                out.write(line + "\n")
            return 0
        log = ActionLog(guard=default_guard(read_only=args.read_only))
        try:
            if args.rule_command == "add":
                try:
                    table = tomllib.loads(f"rule = {args.table}")["rule"]
                except tomllib.TOMLDecodeError as exc:
                    raise BadInput(f"not a TOML inline table: {str(exc).splitlines()[0]}") from None
                if not isinstance(table, dict):
                    raise BadInput("write the rule as one TOML inline table: { name = \"…\", kind = \"…\", … }")
                result = rule_ops.add_rule(state, table, rules, log)
            else:
                by_name = {r.name: r for r in rules}
                if args.name not in by_name:
                    raise BadInput(f"no rule {args.name!r} (rules: {', '.join(by_name) or 'none'})")
                rule = by_name[args.name]
                if args.rule_command == "remove":
                    result = rule_ops.remove_rule(state, rule, log)
                else:
                    result = rule_ops.set_paused(state, rule, args.rule_command == "pause", log)
        except RuleError as exc:
            raise BadInput(str(exc)) from None
        out.write(wrap(result.message) + "\n")
        return 0
    finally:
        state.close()


def _manifest(args: argparse.Namespace, out: TextIO) -> int:
    from gpuconsole.cli.notify import print_manifest
    from gpuconsole.core.ops.autopilot.deploy import AUTOPILOT

    return print_manifest(AUTOPILOT, args, out)


def _engine(args: argparse.Namespace, make_console: Any, out: TextIO, *, plan_only: bool) -> int:
    if not plan_only and args.lease_seconds < 2:
        raise BadInput(f"--lease-seconds must be 2 or more, not {args.lease_seconds}")
    if not plan_only and args.notify_demo and not args.demo:
        raise BadInput("--notify-demo goes with --demo")
    state = _open_state(args)  # a plan reads cooldowns and pauses; an engine without hands writes nothing
    try:
        rules = _rules(args, state)
        if not rules:
            raise BadInput(NO_RULES)
        return _loop(args, make_console, out, state, rules, plan_only=plan_only)
    finally:
        state.close()


def _loop(args: argparse.Namespace, make_console: Any, out: TextIO, state: Any, rules: Any, *, plan_only: bool) -> int:
    """Refresh after refresh (once for a plan or ``--once``) until SIGTERM: lead or stand by,
    decide, act, and say so."""
    import tempfile

    from gpuconsole.backends.base import BackendError
    from gpuconsole.cli.notify import leader_sender, sign_as_console, write_report
    from gpuconsole.core.notify.alerts import recorded_actions
    from gpuconsole.core.ops.autopilot.actuator import CloudActuator
    from gpuconsole.core.ops.autopilot.engine import Engine
    from gpuconsole.core.ops.autopilot.leader import leadership_for
    from gpuconsole.core.ops.autopilot.loading import state_path

    as_json = bool(getattr(args, "json", False))
    width = width_of(args)
    alerts: list[str] = []
    engine = Engine(rules, state, on_alert=alerts.append)
    stop = threading.Event()
    console = make_console(args)
    leader = None
    sender = None
    previous = None
    if not plan_only and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if not plan_only:
            sender = leader_sender(args)  # None without [[notify]] channels: no queue is made
            if sender is not None:
                sign_as_console(args, console)
            namespace = args.namespaces[0] if args.namespaces else "default"
            default_lock = (Path(tempfile.gettempdir()) / f"gpuconsole-demo-{os.getpid()}.lock" if args.demo
                            else state_path().with_suffix(".lock"))
            lock = Path(args.lock) if args.lock else default_lock
            leader = leadership_for(console.services.jobs.backend, namespace, lock, lease_s=args.lease_seconds)
            engine.on_acted = leader.share
        console.start(open_store=False)
        console.wait_for_first_answers(FIRST_ANSWER_S)
        act = not (plan_only or args.read_only)
        actuator = CloudActuator(console.services.cloud, console.services.service_ops) if act else None
        once = plan_only or args.once
        while not stop.is_set():
            try:
                leads = leader is None or leader.acquire()
            except BackendError as exc:  # the API server cannot say who leads: act on nothing
                _write(out, {"leader": False, "error": str(exc)}, wrap(f"not acting: {exc}", width), as_json)
                leads = False
                if once:
                    return 1
            else:
                if not leads:
                    assert leader is not None
                    _write(out, {"leader": False, "holder": leader.holder()},
                           wrap(f"standing by: {leader.holder()} leads", width), as_json)
            if leads:
                state.forget()  # a rule paused or resumed from another terminal counts now
                if leader is not None:
                    state.adopt(leader.shared())  # cooldowns another replica started
                for d in engine.tick(console.snapshot, actuator):
                    _write(out, d.as_dict() if as_json else None, wrap(_line(d), width), as_json)
                for line in alerts:
                    print(f"gpuconsole: alert: {line}", file=sys.stderr)
                alerts.clear()
                if sender is not None:  # the sender of alerts is whoever leads
                    report = sender.cycle(console.snapshot, () if args.demo else recorded_actions(args.config))
                    write_report(report, out, width, as_json)
            if once:
                break
            stop.wait(args.interval)
    finally:
        if leader is not None:
            leader.release()
        console.close()
        if sender is not None:
            sender.outbox.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _line(d: Any) -> str:
    figures = f" [{d.figures_text()}]" if d.figures else ""
    outcome = f" → {d.outcome}" if d.outcome else ""
    return f"{d.rule}: {d.verb}: {d.reason}{figures}{outcome}"


def _write(out: TextIO, obj: dict[str, Any] | None, text: str, as_json: bool) -> None:
    out.write((json.dumps(obj, sort_keys=True) if as_json else text) + "\n")
    out.flush()
