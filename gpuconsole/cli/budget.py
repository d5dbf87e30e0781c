"""``gpuconsole budget``: add, list, remove and check budgets from scripts and cron.

``budget check`` exits 0 when every budget is under its thresholds, 1 when one is crossed, 2 on
an error; with ``--enforce`` it also runs what is due this period (never an action that waits
for a user's yes). Every change goes through :class:`~gpuconsole.core.ops.budget_ops.BudgetOps`,
so the command line and the console accept and refuse the same budgets.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from gpuconsole.cli.table import Column, add_wide_option, render_table, width_of, wrap

CHECK_SCHEMA = "gpuconsole.budget-check/1"
LIST_SCHEMA = "gpuconsole.budgets/1"
PERIODS = ("monthly", "daily", "custom")
NO_BUDGETS = "no budgets (add one with: gpuconsole budget add NAME --amount USD)"
# budget list: the thresholds give first and may go, then the period and the scope are cut
LIST_COLUMNS = (Column("NAME", key=True), Column("AMOUNT", right=True), Column("PERIOD", give=3, least=10),
                Column("SCOPE", give=2, least=10), Column("THRESHOLDS", give=4, least=10, drop=True),
                Column("AUTO"), Column("FROM", give=1, least=6, drop=True))


# --------------------------------------------------------------------------- parser


def _amount(text: str) -> float:
    from gpuconsole.core.money.budgets import parse_amount

    return float(_rule(parse_amount)(text))


def _rule(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a budgets parser (its one-line error becomes argparse's)."""

    def convert(text: str) -> Any:
        from gpuconsole.core.money.budgets import BudgetError

        try:
            return parse(text)
        except BudgetError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _threshold(text: str) -> Any:
    from gpuconsole.core.money.budgets import parse_threshold

    return _rule(parse_threshold)(text)


def _scope(text: str) -> str:
    from gpuconsole.core.money.budgets import parse_scope

    _rule(parse_scope)(text)
    return text


def _start(text: str) -> float:
    from gpuconsole.core.money.budgets import parse_date

    return float(_rule(parse_date)(text))


def _end(text: str) -> float:
    from gpuconsole.core.money.budgets import parse_date

    return float(_rule(lambda t: parse_date(t, end=True))(text))


def add_budget_parser(sub: Any, common: argparse.ArgumentParser, seconds: Callable[[str], float]) -> None:
    """Add ``budget`` and its actions to the CLI's subparsers (``seconds``: the CLI's type for --wait)."""
    budget = sub.add_parser(
        "budget",
        parents=[common],
        help="add, list, remove and check budgets (for scripts and cron)",
        description="Budgets with thresholds that notify, stop instances or suspend CronJobs.",
    )
    actions = budget.add_subparsers(dest="budget_command", metavar="ACTION", parser_class=type(budget), required=True)
    add = actions.add_parser(
        "add", parents=[common], help="add a budget",
        description="Add a budget. Without --period or dates it counts spend from now on (cumulative, no end).",
        epilog="thresholds: PCT[f]:ACTION[+ACTION]; actions notify, stop-spot, stop-all, suspend-cronjobs, "
               "terminate-spot (ends one-time spot instances, which cannot stop); "
               "an f after the percentage puts it on the forecast (100f:notify). "
               "Default: 50:notify 80:notify 100:notify 100f:notify.",
    )
    add.add_argument("name", metavar="NAME", help="the budget's name (letters, digits, . _ -)")
    add.add_argument("--amount", type=_amount, required=True, metavar="USD",
                     help="the limit in US dollars, more than $0 and at most $100,000,000")
    add.add_argument("--period", choices=PERIODS, default=None,
                     help="monthly or daily (UTC calendar), or custom (--from, --to); default: from now on, no end")
    add.add_argument("--from", dest="starts", type=_start, default=None, metavar="DATE",
                     help="start of a custom period (YYYY-MM-DD or YYYY-MM-DDTHH:MM, UTC; default now)")
    add.add_argument("--to", dest="ends", type=_end, default=None, metavar="DATE",
                     help="end of a custom period, inclusive (default: no end)")
    add.add_argument("--scope", type=_scope, default="all", metavar="SCOPE",
                     help="all (default), tag:KEY=VALUE or namespace:NS (a Kubernetes namespace)")
    add.add_argument("--threshold", dest="thresholds", type=_threshold, action="append", default=None,
                     metavar="PCT:ACTION[+ACTION]", help="repeat for several, e.g. --threshold 80:notify --threshold 100:notify+stop-all")
    add.add_argument("--automatic", action="store_true",
                     help="run stop, terminate-spot and suspend actions without asking (an admin needs --mfa-code)")
    add.add_argument("--notify-command", default="", metavar="CMD",
                     help="shell command notify runs, with GPUCONSOLE_BUDGET, GPUCONSOLE_MESSAGE … in its environment")
    add.add_argument("--webhook", default="", metavar="URL", help="https URL notify POSTs a JSON body to")
    add.add_argument("--replace", action="store_true", help="replace a saved budget of that name")

    listing = actions.add_parser("list", parents=[common], help="list budgets and where they come from")
    listing.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_wide_option(listing)

    remove = actions.add_parser("remove", parents=[common], help="remove a saved budget")
    remove.add_argument("name", metavar="NAME")
    from gpuconsole.cli.access import add_mfa_option

    add_mfa_option(add)  # adding or replacing an automatic budget needs a fresh code from an admin
    add_mfa_option(remove)

    check = actions.add_parser(
        "check", parents=[common], help="read the sources once: exit 0 under all thresholds, 1 past one, 2 on error",
        description="Read every source once and compare spend with each budget's thresholds.",
    )
    check.add_argument("names", nargs="*", metavar="NAME", help="check only these budgets")
    check.add_argument("--enforce", action="store_true",
                       help="run what is due: notifications and the automatic budgets' actions (once per period)")
    check.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    add_wide_option(check)
    check.add_argument("--wait", type=seconds, default=10.0, metavar="S",
                       help="seconds to wait for every source's first answer (default 10)")


# --------------------------------------------------------------------------- running


class _Failed(Exception):
    """A one-line reason the command cannot do its work (exit 2)."""


class _Denied(_Failed):
    """The guard refused the change: a role, a missing or wrong MFA code (exit 1, as other commands)."""


def run_budget(args: argparse.Namespace, *, make_console: Callable[..., Any], open_store: Callable[[], Any],
               out: TextIO | None = None) -> int:
    """Run ``budget ACTION``. Returns the exit status."""
    out = out or sys.stdout
    try:
        if args.budget_command == "check":
            return _check(args, make_console, out)
        return {"add": _add, "list": _list, "remove": _remove}[args.budget_command](args, open_store, out)
    except _Failed as exc:
        print(f"gpuconsole: error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, _Denied) else 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _config(args: argparse.Namespace) -> Any:
    from gpuconsole.core.config import ConfigError
    from gpuconsole.core.money.budget_config import load_config

    try:
        return load_config(args.config)
    except ConfigError as exc:
        raise _Failed(str(exc)) from None


def _ops(args: argparse.Namespace, store: Any) -> Any:
    from gpuconsole.cli.access import guarded_log, make_guard
    from gpuconsole.core.ops.budget_ops import BudgetOps

    return BudgetOps(store=store, config=_config(args), demo_start=time.time() if args.demo else None, act=False,
                     log=guarded_log(make_guard(args)))


def _add(args: argparse.Namespace, open_store: Callable[[], Any], out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionDenied, ActionError
    from gpuconsole.model import DEFAULT_THRESHOLDS, Budget, BudgetPeriod

    if args.no_db:
        raise _Failed("budgets are saved in the cache database: run budget add without --no-db, or declare it in the config file")
    dates = args.starts is not None or args.ends is not None
    if args.period in ("monthly", "daily"):
        if dates:
            raise _Failed("--from and --to go with --period custom")
        period, starts, ends = BudgetPeriod(args.period), None, None
    else:
        period, starts, ends = BudgetPeriod.CUSTOM, args.starts if args.starts is not None else time.time(), args.ends
    budget = Budget(
        name=args.name, amount=args.amount, period=period, scope=args.scope,
        thresholds=tuple(args.thresholds) if args.thresholds else DEFAULT_THRESHOLDS,
        automatic=args.automatic, starts=starts, ends=ends,
        notify_command=args.notify_command, webhook=args.webhook,
    )
    store = open_store()
    try:
        ops = _ops(args, store)
        try:
            request = ops.add_request(budget, replace=args.replace)
            _mfa(ops, args, request.kind, request.target, request.params)
            result = ops.add(budget, replace=args.replace)
        except ActionDenied as exc:
            raise _Denied(str(exc)) from None
        except ActionError as exc:
            raise _Failed(str(exc)) from None
    finally:
        store.close()
    out.write(wrap(result.message) + "\n")
    return 0


def _remove(args: argparse.Namespace, open_store: Callable[[], Any], out: TextIO) -> int:
    from gpuconsole.core.ops.actions import ActionDenied, ActionError, ActionKind

    store = open_store()
    try:
        try:
            ops = _ops(args, store)
            _mfa(ops, args, ActionKind.BUDGET_REMOVE, args.name)
            result = ops.remove(args.name)
        except ActionDenied as exc:
            raise _Denied(str(exc)) from None
        except ActionError as exc:
            raise _Failed(str(exc)) from None
    finally:
        if store is not None:
            store.close()
    out.write(wrap(result.message) + "\n")
    return 0


def _mfa(ops: Any, args: argparse.Namespace, kind: Any, target: str, params: tuple[tuple[str, str], ...] = ()) -> None:
    """A fresh MFA code for an admin's budget remove, or add of an automatic budget (the guard
    denies and records it without)."""
    from gpuconsole.cli.access import CommandFailed, ensure_mfa

    try:
        ensure_mfa(ops.log.guard, kind, args.mfa_code, target, params)
    except CommandFailed as exc:
        raise _Denied(str(exc)) from None


def _list(args: argparse.Namespace, open_store: Callable[[], Any], out: TextIO) -> int:
    from gpuconsole.core.money import budgets as rules
    from gpuconsole.model import to_jsonable

    store = open_store()
    try:
        ops = _ops(args, store)
        budgets = ops.budgets()
    finally:
        if store is not None:
            store.close()
    if args.json:
        doc = {
            "schema": LIST_SCHEMA,
            "config": str(ops.config.path) if ops.config.path else None,
            "budgets": [
                {**to_jsonable(b), "period_text": rules.describe_period(b),
                 "thresholds_text": [rules.format_threshold(t) for t in b.thresholds]}
                for b in budgets
            ],
        }
        json.dump(doc, out, indent=2)
        out.write("\n")
        return 0
    if not budgets:
        out.write(NO_BUDGETS + "\n")
        return 0
    rows = [(b.name, rules.usd(b.amount), rules.describe_period(b), b.scope,
             " ".join(rules.format_threshold(t) for t in b.thresholds), "yes" if b.automatic else "no", b.origin)
            for b in budgets]
    for line in render_table(LIST_COLUMNS, rows, width_of(args)):
        out.write(line + "\n")
    return 0


def _check(args: argparse.Namespace, make_console: Callable[..., Any], out: TextIO) -> int:
    from gpuconsole.core.money import budgets as rules
    from gpuconsole.model import SourceKind, SourceState, to_jsonable

    _config(args)  # a bad file is an error here, not only an alert
    console = make_console(args, act_on_budgets=False, automation=bool(args.enforce))  # enforcing acts by itself
    results: tuple[Any, ...] = ()
    errors: list[str] = []
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(args.wait)
        console.stop()  # no poll after this: what is printed is what is enforced
        console.load_cloud_history()  # spend with the instances' earlier runs (CloudTrail)
        snap = console.snapshot
        ops = console.services.budget_ops
        statuses, pending, _ = ops.evaluate(snap)
        known = {s.budget.name for s in statuses}
        unknown = [n for n in args.names if n not in known]
        if unknown:
            raise _Failed(f"no budget named {', '.join(unknown)} (see gpuconsole budget list)")
        if args.names:
            statuses = tuple(s for s in statuses if s.budget.name in args.names)
            pending = tuple(p for p in pending if p.budget in args.names)
        cloud = snap.source(SourceKind.CLOUD)
        if statuses and (cloud is None or cloud.state is not SourceState.LIVE):
            what = cloud.describe(snap.taken_at) if cloud is not None else "not configured"
            errors.append(f"cannot check budgets: the cloud source is {what}")
        elif args.enforce:
            results = ops.enforce(set(args.names) or None)
    finally:
        console.close()
    failed = [r.message for r in results if not r.ok]
    crossed = any(s.crossed for s in statuses)
    code = 2 if errors or failed else 1 if crossed else 0
    if args.json:
        doc = {
            "schema": CHECK_SCHEMA,
            "taken_at": snap.taken_at,
            "demo": snap.demo,
            "status": "error" if code == 2 else "crossed" if crossed else "ok",
            "exit": code,
            "budgets": [_status_doc(s, snap.taken_at) for s in statuses],
            "pending_actions": to_jsonable(pending),
            "enforced": [{"kind": r.request.kind.value, "target": r.request.target, "ok": r.ok, "message": r.message}
                         for r in results],
            "errors": errors + failed,
        }
        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        if not statuses:
            out.write(NO_BUDGETS + "\n")
        width = width_of(args)
        for s in statuses:
            b = s.budget
            state = "crossed " + " ".join(rules.format_threshold(t) for t in s.crossed) if s.crossed else "under all thresholds"
            basis = f" [spend: {s.spend_basis}]" if s.spend_basis else ""
            out.write(wrap(f"budget {b.name}: {rules.usd(s.spent)} of {rules.usd(b.amount)} ({s.percent:.0f}%) "
                           f"{rules.describe_period(b)}, forecast {rules.usd(s.forecast)}; {state}{basis}", width) + "\n")
        ran = {(r.request.target, dict(r.request.params).get("threshold")) for r in results}
        for p in pending:
            if (f"budget {p.budget}", f"{p.percent:g}{'f' if p.basis.value == 'forecast' else ''}") in ran:
                continue
            waits = "runs automatically with --enforce" if p.automatic else "waits for a user's yes"
            out.write(wrap(f"pending: budget {p.budget} at {p.percent:g}%: {p.action.value} ({waits}): {p.detail}", width) + "\n")
        for r in results:
            out.write(wrap(f"{'done' if r.ok else 'failed'}: {r.message}", width) + "\n")
    for line in errors:
        print(f"gpuconsole: error: {line}", file=sys.stderr)
    return code


def _status_doc(status: Any, now: float) -> dict[str, Any]:
    from gpuconsole.core.money import budgets as rules

    b = status.budget
    start, end = rules.period_bounds(b, now)
    # A real cloud's spend says what it covers: "CloudTrail history" or "since last start only".
    basis = {"spend_basis": status.spend_basis} if status.spend_basis else {}
    return {
        **basis,
        "name": b.name,
        "amount": b.amount,
        "period": b.period.value,
        "period_start": start,
        "period_end": b.ends if b.period.value == "custom" else end,
        "scope": b.scope,
        "origin": b.origin,
        "automatic": b.automatic,
        "spent": status.spent,
        "forecast": status.forecast,
        "percent": status.percent,
        "burn_per_hour": status.burn_per_hour,
        "crossed": [rules.format_threshold(t) for t in status.crossed],
    }
