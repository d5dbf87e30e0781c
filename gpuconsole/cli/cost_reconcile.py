"""``gpuconsole cost reconcile``: each instance's estimated cost per day beside what Cost Explorer
billed for it, and the difference in dollars and percent.

The bill comes from ``GetCostAndUsageWithResources`` (the last 14 days, where the account has
opted in to resource-level data): one request, counted against ``--billing-calls`` like every
Cost Explorer request. The estimate is the console's own (CloudTrail's runs, the billing rules,
the volumes).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from gpuconsole.cli.table import WIDTH, Column, add_wide_option, render_table, width_of, wrap
from gpuconsole.core.money.periods import RESOURCE_DAYS

FIRST_ANSWER_S = 20.0  # how long to wait for the cloud's first poll
COLUMNS = (Column("INSTANCE", key=True), Column("DAY"), Column("ESTIMATE", right=True), Column("BILLED", right=True),
           Column("DIFF $", right=True), Column("DIFF %", right=True))


def _days(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of days, got {text!r}") from None
    if not 1 <= value <= RESOURCE_DAYS:
        raise argparse.ArgumentTypeError(f"must be 1 to {RESOURCE_DAYS} (Cost Explorer keeps {RESOURCE_DAYS} days per resource), got {value}")
    return value


def add_reconcile_parser(commands: Any, common: argparse.ArgumentParser | None) -> None:
    p = commands.add_parser(
        "reconcile",
        parents=[common] if common is not None else [],
        help="each instance's estimate per day vs what Cost Explorer billed (resource level)",
        description="Compare each instance's estimated cost per UTC day with Cost Explorer's resource-level "
                    "daily cost (GetCostAndUsageWithResources; the account must have opted in). One request, "
                    "counted against --billing-calls.",
    )
    p.add_argument("--days", type=_days, default=RESOURCE_DAYS, metavar="N",
                   help=f"the last N whole UTC days (1-{RESOURCE_DAYS}, default {RESOURCE_DAYS})")
    p.add_argument("--json", dest="reconcile_json", action="store_true", help="print JSON (rows and the fleet per day)")
    add_wide_option(p)


def _document(rows: tuple[Any, ...], basis: str) -> dict[str, Any]:
    days = sorted({r.day for r in rows})
    fleet = []
    for day in days:
        estimate = sum(r.estimate for r in rows if r.day == day)
        billed = sum(r.billed for r in rows if r.day == day)
        fleet.append({"day": day, "estimate": round(estimate, 6), "billed": round(billed, 6),
                      "difference": round(estimate - billed, 6),
                      "difference_pct": round(100.0 * (estimate - billed) / billed, 4) if billed else None})
    return {
        "spend_basis": basis or None,
        "rows": [{"instance_id": r.instance_id, "day": r.day, "estimate": round(r.estimate, 6), "billed": round(r.billed, 6),
                  "difference": round(r.difference, 6),
                  "difference_pct": round(r.percent, 4) if r.percent is not None else None} for r in rows],
        "fleet": fleet,
    }


def _text(doc: dict[str, Any], days: int, width: int | None = WIDTH) -> str:
    rows = [(r["instance_id"], r["day"], f"{r['estimate']:,.2f}", f"{r['billed']:,.2f}", f"{r['difference']:+,.2f}",
             f"{r['difference_pct']:+.1f}%" if r["difference_pct"] is not None else "-") for r in doc["rows"]]
    lines = render_table(COLUMNS, rows, width)
    if not rows:
        lines.append(f"no instance estimated or billed in the last {days} day(s)")
    for f in doc["fleet"]:
        pct = f" ({f['difference_pct']:+.1f}%)" if f["difference_pct"] is not None else ""
        lines.append(wrap(f"fleet {f['day']}: estimate ${f['estimate']:,.2f}, billed ${f['billed']:,.2f}, "
                          f"difference ${f['difference']:+,.2f}{pct}", width))
    if doc["spend_basis"]:
        lines.append(wrap(f"estimates: {doc['spend_basis']}", width))
    return "\n".join(lines) + "\n"


def run_reconcile(args: argparse.Namespace, make_console: Callable[..., Any], out: TextIO | None = None,
                  err: TextIO | None = None) -> int:
    """Exit 0 with the table, 1 when the cloud or Cost Explorer cannot answer (one line)."""
    from gpuconsole.core.money.reconcile import reconcile
    from gpuconsole.model import SourceKind, SourceState

    out, err = out or sys.stdout, err or sys.stderr
    console = make_console(args, act_on_budgets=False)
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(FIRST_ANSWER_S)
        console.stop()
        cloud = console.snapshot.source(SourceKind.CLOUD)
        if cloud is None or cloud.state is not SourceState.LIVE:
            what = cloud.describe(console.snapshot.taken_at) if cloud is not None else "not configured"
            print(f"gpuconsole: cannot reconcile: the cloud source is {what}", file=err)
            return 1
        explorer = console.services.cost_explorer
        from gpuconsole.backends.base import ResourceCosts

        if explorer is None or not isinstance(explorer.provider, ResourceCosts):
            print("gpuconsole: cannot reconcile: no Cost Explorer for this cloud (or --billing-calls 0)", file=err)
            return 1
        console.load_cloud_history()
        try:
            billed, _ = explorer.fetch_resources(args.days)
        except Exception as exc:  # noqa: BLE001 - the limit, a refusal, an outage: one line
            print(f"gpuconsole: cannot reconcile: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=err)
            return 1
        snap = console.snapshot
        rows = reconcile(snap.instances, billed, snap.taken_at, args.days)
        doc = _document(rows, snap.spend_basis)
        if args.reconcile_json:
            json.dump(doc, out, indent=2)
            out.write("\n")
        else:
            out.write(_text(doc, args.days, width_of(args)))
        return 0
    finally:
        console.close()
