"""``gpuconsole snapshot``: the console's state once, as text or JSON, for scripts.

The JSON document has the sections ``gpus``, ``jobs``, ``cronjobs``, ``nodes``, ``instances``,
``budgets``, ``sources``, ``alerts`` and ``spend``; field names are those of
:mod:`gpuconsole.model`, times are POSIX seconds, money is US dollars.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from gpuconsole.core.fleet.console import Console
from gpuconsole.model import FleetSnapshot, to_jsonable

SCHEMA = "gpuconsole.snapshot/1"


def snapshot_document(snap: FleetSnapshot) -> dict[str, Any]:
    """The JSON document for one snapshot."""
    return {
        "schema": SCHEMA,
        "taken_at": snap.taken_at,
        "demo": snap.demo,
        "gpus": to_jsonable(snap.gpus),
        "jobs": to_jsonable(snap.jobs),
        "cronjobs": to_jsonable(snap.cronjobs),
        "nodes": to_jsonable(snap.nodes),
        "instances": to_jsonable(snap.instances),
        "budgets": [
            {**to_jsonable(b.budget), "spent": b.spent, "forecast": b.forecast, "burn_per_hour": b.burn_per_hour,
             "percent": b.percent, "crossed": to_jsonable(b.crossed)}
            for b in snap.budgets
        ],
        "sources": [
            {**to_jsonable(s), "status": s.describe(snap.taken_at)} for s in snap.sources
        ],
        "alerts": to_jsonable(snap.alerts),
        "spend": {"today": snap.spend_today, "month": snap.spend_month, "burn_per_hour": snap.burn_per_hour,
                  "billed_month": snap.billed_month, "billed_note": snap.billed_note},
        "pending_actions": to_jsonable(snap.pending_actions),
        "costs": cost_section(snap),
    }


def cost_section(snap: FleetSnapshot) -> dict[str, Any]:
    """Month-to-date spend attributed down the chain, idle waste, and what schedules will cost."""
    from gpuconsole.core.money import costs
    from gpuconsole.core.money.idle import by_owner

    now = snap.taken_at
    start = costs.month_start(now)
    return {
        "month_start": start,
        "by_namespace": to_jsonable(costs.per_namespace(snap.jobs, snap.instances, start, now)),
        "by_job": to_jsonable(costs.per_job(snap.jobs, snap.instances, start, now)),
        **{f"by_tag_{key.lower()}": to_jsonable(costs.per_tag(snap.instances, key, start, now))
           for key in ("Owner", "Project", "Budget")},
        "idle_gpus": to_jsonable(snap.idle),
        "idle_by_owner": to_jsonable(by_owner(snap.idle)),
        "cronjobs_next_30_days": to_jsonable(snap.cronjob_costs),
    }


def run_snapshot(console: Console, *, as_json: bool, wait: float, out: TextIO | None = None) -> int:
    """Poll every source once, print, and close. Returns the exit status."""
    out = out or sys.stdout
    try:
        console.start()
        console.wait_for_first_answers(wait)
        snap = console.snapshot
    finally:
        console.close()
    if as_json:
        json.dump(snapshot_document(snap), out, indent=2)
        out.write("\n")
    else:
        out.write(render_text(snap))
    return 0


def render_text(snap: FleetSnapshot) -> str:
    """A plain-text report of one snapshot (no colour, fits 100 columns)."""
    from gpuconsole.ui.format import age, money, short_node

    lines: list[str] = []
    now = snap.taken_at
    lines.append("sources: " + ", ".join(f"{s.kind.value}={s.name} ({s.describe(now)})" for s in snap.sources))
    hints = [s for s in snap.sources if s.hint]
    for s in hints:
        lines.append(f"  {s.kind.value}: {s.hint}")
    if hints and not snap.demo:
        lines.append("  or try the console on a simulated fleet: gpuconsole --demo")
    lines.append(f"spend: today {money(snap.spend_today)}, this month {money(snap.spend_month)}, burning {money(snap.burn_per_hour)}/h")
    if snap.gpus:
        lines.append("")
        lines.append(f"{'NODE':<22} {'IDX':>3} {'MODEL':<24} {'UTIL':>5} {'MEMORY':>15} {'TEMP':>5} {'POWER':>7} MIG")
        for g in snap.gpus:
            lines.append(
                f"{short_node(g.node)[:22]:<22} {g.index:>3} {g.name[:24]:<24} {g.utilization:>4.0f}% "
                f"{g.memory_used_mib:>6}/{g.memory_total_mib:<6}M {g.temperature_c:>3}°C {g.power_w:>6.0f}W {g.mig_mode.value}"
            )
            for mig in g.mig_slices:
                util = "" if mig.utilization is None else f"{mig.utilization:>4.0f}%"
                lines.append(f"{'':<22} {'':>3}   └ {mig.profile:<20} {util:>5} {mig.memory_used_mib:>6}/{mig.memory_total_mib:<6}M")
    if snap.jobs:
        lines.append("")
        lines.append(f"{'STATE':<10} {'NAMESPACE':<12} {'NAME':<32} {'GPUS':>9} {'AGE':>6}  REASON")
        for j in snap.jobs:
            lines.append(f"{j.state.value:<10} {j.namespace:<12} {j.name[:32]:<32} {j.gpu_request:>9} {age(now - j.created):>6}  {j.pending_reason or ''}")
    if snap.instances:
        lines.append("")
        lines.append(f"{'ID':<20} {'TYPE':<14} {'AZ':<11} {'MARKET':<9} {'STATE':<13} {'$/H':>8} {'COST':>11}")
        for i in snap.instances:
            lines.append(f"{i.instance_id:<20} {i.instance_type:<14} {i.availability_zone:<11} {i.market.value:<9} {i.state.value:<13} {i.price_per_hour:>8.3f} {money(i.accrued_cost):>11}")
    if snap.budgets:
        lines.append("")
        for b in snap.budgets:
            lines.append(f"budget {b.budget.name}: {money(b.spent)} of {money(b.budget.amount)} ({b.percent:.0f}%) {b.budget.period.value}, forecast {money(b.forecast)}")
    if snap.alerts:
        lines.append("")
        lines.extend(f"{a.severity.value}: {a.message}" for a in snap.alerts)
    return "\n".join(lines) + "\n"
