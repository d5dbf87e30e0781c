"""``gpuconsole audit``: verify the hash chain, list and export records, and usage by user.

``audit verify`` exits 0 when the chain is intact, 1 naming the first record edited,
deleted or moved, and 3 when this login may not read the log (which proves nothing either way); with a remote copy (``[audit] cloudwatch_log_group``) it holds this login's
chain against it, and names the first record missing, extra or different on either side.
``list`` and ``export`` (admins and auditors) take the same filters as the Audit pane, and read
the shared remote copy (every login's records) when there is one, else this login's own log. ``usage`` sums GPU-hours and cost per user and per namespace over a period.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from gpuconsole.cli.access import BadInput, CommandFailed, finish, make_guard
from gpuconsole.cli.audit_relay import add_relay_parser, run_relay
from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of

CANNOT_VERIFY = 3  # audit verify's exit status for a log this login may not read

# audit list: the parameters give first and may go; the time gives last, the record's number never
LIST_COLUMNS = (Column("SEQ", right=True, key=True), Column("TIME", give=1, least=20), Column("ACTOR", give=3, least=8),
                Column("ROLE", give=4, least=8), Column("ACTION", give=2, least=10), Column("TARGET", give=5, least=12),
                Column("RESULT", give=6, least=7), Column("PARAMS", give=7, least=10, drop=True))
USAGE_COLUMNS = (Column("GPU-HOURS", right=True), Column("COST", right=True), Column("JOBS", right=True))


def _date(end: bool) -> Any:
    def convert(text: str) -> float:
        from gpuconsole.core.money.budgets import BudgetError, parse_date

        try:
            return float(parse_date(text, end=end))
        except BudgetError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = "date"
    return convert


def _output_file(text: str) -> str:
    """A file to write in a directory that exists: an export never creates directories."""
    from pathlib import Path

    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory: name a file in it")
    if not _replaceable(path):
        raise argparse.ArgumentTypeError(f"{text} is not a regular file (a device, a pipe or a link): name a new or regular file")
    parent = path.parent
    if not parent.is_dir():
        if parent.exists():
            raise argparse.ArgumentTypeError(f"{parent} is not a directory: write the file elsewhere")
        raise argparse.ArgumentTypeError(f"directory {parent} does not exist: create it first, or write elsewhere")
    return str(path)


def _replaceable(path: Any) -> bool:
    from gpuconsole.core.paths import is_regular_or_missing

    return is_regular_or_missing(path)


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", action="store_true", help="read this login's own log, not the shared remote copy")
    parser.add_argument("--actor", default="", metavar="USER", help="records of actors whose name contains USER")
    parser.add_argument("--action", default="", metavar="VERB", help="records whose action contains VERB (stop, delete-job…)")
    parser.add_argument("--target", default="", metavar="TEXT", help="records whose target contains TEXT")
    parser.add_argument("--result", default="", choices=("", "ok", "denied", "failed"), help="only this result")
    parser.add_argument("--since", type=_date(False), default=None, metavar="DATE", help="from DATE (YYYY-MM-DD[THH:MM], UTC)")
    parser.add_argument("--until", type=_date(True), default=None, metavar="DATE", help="up to DATE, inclusive")


def add_audit_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    audit = sub.add_parser("audit", help="verify, list and export the audit log; usage by user",
                           description="The append-only, hash-chained log of every change and every denied attempt.")
    actions = audit.add_subparsers(dest="audit_command", metavar="ACTION", parser_class=type(audit), required=True)
    actions.add_parser("verify", help="check the hash chain, against the remote copy when there is one "
                                      "(exit 1 naming the first bad record, 3 when this login may not read it)")
    listing = actions.add_parser("list", help="list records, newest last")
    _filters(listing)
    listing.add_argument("--limit", type=int, default=50, metavar="N", help="the newest N records (default 50; 0: all)")
    listing.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_wide_option(listing)
    export = actions.add_parser("export", help="every matching record as CSV or JSON")
    _filters(export)
    form = export.add_mutually_exclusive_group(required=True)
    form.add_argument("--csv", dest="format", action="store_const", const="csv")
    form.add_argument("--json", dest="format", action="store_const", const="json")
    export.add_argument("--output", "-o", type=_output_file, default=None, metavar="FILE",
                        help="write to FILE (0600) in a directory that exists, instead of stdout")
    add_relay_parser(actions)
    usage = actions.add_parser("usage", parents=[common], help="GPU-hours and cost per user and namespace")
    usage.add_argument("--since", type=_date(False), default=None, metavar="DATE", help="from DATE (default: 30 days ago)")
    usage.add_argument("--until", type=_date(True), default=None, metavar="DATE", help="up to DATE (default: now)")
    usage.add_argument("--wait", type=float, default=5.0, metavar="S", help="seconds to wait for the sources")
    usage.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_wide_option(usage)


def run_audit(args: argparse.Namespace, make_console: Any = None, out: TextIO | None = None) -> int:
    return finish(lambda o: _run(args, make_console, o), out)


def _filter(args: argparse.Namespace) -> Any:
    from gpuconsole.core.access.audit import AuditFilter

    return AuditFilter(actor=args.actor, action=args.action, target=args.target, since=args.since,
                       until=args.until, result=args.result)


def _run(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.access import audit, audit_remote, audit_relay, audit_sink

    if args.audit_command == "relay":
        return run_relay(args, out)
    guard = make_guard(args)
    relay = audit_sink.relay_socket(guard.audit)
    if args.audit_command == "verify":
        verdict = audit_relay.relay_verdict(relay) if relay else audit_remote.verify_anchored(guard.audit)
        if verdict.ok:
            out.write(verdict.message + "\n")
            return 0
        where = f"the relay's chain, through {relay}" if relay else str(guard.audit.path)
        if verdict.unreadable:
            print(f"gpuconsole: audit log cannot be verified: {verdict.message}; this says nothing about "
                  f"tampering ({verdict.hint}; {where})", file=sys.stderr)
            return CANNOT_VERIFY
        print(f"gpuconsole: audit log TAMPERED: {verdict.message} ({where})", file=sys.stderr)
        return 1
    why = guard.may_read_audit()
    if why is not None:
        raise CommandFailed(why)
    if args.audit_command == "usage":
        return _usage(args, make_console, out)
    if relay is not None and not args.local:  # the relay's chain: every login's records
        records = [r for r in audit_relay.relay_records(relay) if _filter(args).matches(r)]
    else:
        findings: list[str] = []
        shared = None if args.local else audit_remote.shared_records(guard.audit, _filter(args), findings)
        records = guard.audit.records(_filter(args)) if shared is None else shared
        for line in findings:  # the shared copy's chains that do not hold: never shown as genuine
            print(f"gpuconsole: warning: {line}", file=sys.stderr)
    if args.audit_command == "export":
        text = audit.to_csv(records) if args.format == "csv" else audit.to_json(records)
        if args.output:
            from pathlib import Path

            from gpuconsole.core.paths import write_private

            target = Path(args.output)
            if not target.parent.is_dir():  # removed since the command line was read
                raise BadInput(f"argument --output/-o: directory {target.parent} does not exist: create it first")
            if not _replaceable(target):  # replaced since the command line was read
                raise BadInput(f"argument --output/-o: {target} is not a regular file: name a new or regular file")
            try:
                write_private(target, text)
            except OSError as exc:
                raise BadInput(f"argument --output/-o: cannot write {target}: {exc.strerror or exc}") from None
            out.write(f"{len(records)} record(s) written to {args.output}\n")
        else:
            out.write(text)
        return 0
    if args.limit:
        records = records[-args.limit:]
    if args.json:
        out.write(audit.to_json(records))
        return 0
    if not records:
        filtered = any((args.actor, args.action, args.target, args.result, args.since, args.until))
        out.write("no audit records match these filters\n" if filtered else "no audit records yet\n")
        return 0
    rows = [(r.seq, r.ts, r.actor, r.role, r.action, r.target, r.result,
             " ".join(f"{k}={v}" for k, v in json.loads(r.params).items() if v)) for r in records]
    for line in render_table(LIST_COLUMNS, rows, width_of(args)):
        out.write(line + "\n")
    return 0


def _usage(args: argparse.Namespace, make_console: Any, out: TextIO) -> int:
    from gpuconsole.core.money.usage import usage_report

    console = make_console(args)
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(args.wait)
        snap = console.snapshot
        now = snap.taken_at or time.time()
        until = args.until if args.until is not None else now
        since = args.since if args.since is not None else until - 30 * 86400
        report = usage_report(snap.jobs, snap.instances, since, until)
    finally:
        console.close()
    if args.json:
        out.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return 0
    if not report.by_user:
        span = " to ".join(time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)) for t in (report.since, report.until))
        out.write(f"no GPU-hours used from {span} UTC\n")
        return 0
    width = width_of(args)
    for title, lines in (("USER", report.by_user), ("NAMESPACE", report.by_namespace)):
        rows = [(line.key, f"{line.gpu_hours:.2f}", f"${line.cost:,.2f}", line.jobs) for line in lines]
        for text in render_table((Column(title, key=True), *USAGE_COLUMNS), rows, width):
            out.write(text + "\n")
        out.write("\n")
    out.write(f"total: {report.gpu_hours:.2f} GPU-hours, ${report.cost:,.2f}\n")
    return 0
