"""``gpuconsole snapshot``: the console's state once, as text or JSON, for scripts.

The JSON document has the sections ``gpus``, ``jobs``, ``cronjobs``, ``nodes``, ``instances``,
``services`` (inference services, as ``gpuconsole service list --json`` prints them), ``budgets``,
``sources``, ``alerts`` and ``spend``; field names are those of
:mod:`gpuconsole.model`, times are POSIX seconds; an instance's money is in its ``currency``, the
totals in US dollars (``spend.left_out`` names what another currency leaves out).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from gpuconsole.cli.table import WIDTH, Column, cut, render_table, wrap
from gpuconsole.core.fleet.console import Console
from gpuconsole.cli.gpus import gpu_document
from gpuconsole.cli.service import service_document
from gpuconsole.model import FleetSnapshot, InstanceState, Queue, to_jsonable

SCHEMA = "gpuconsole.snapshot/1"

# The tables of the text report; to fit, the model, the reason and the zone give first.
GPU_COLUMNS = (Column("NODE", key=True), Column("IDX", right=True, key=True), Column("MODEL", give=3, least=10),
               Column("UTIL", right=True), Column("MEMORY", right=True), Column("TEMP", right=True),
               Column("POWER", right=True), Column("MIG", give=1, least=3))
JOB_COLUMNS = (Column("STATE", give=1, least=7), Column("NAMESPACE", give=2, least=9), Column("NAME", key=True),
               Column("GPUS", right=True), Column("AGE", right=True), Column("REASON", give=4, least=8))
INSTANCE_COLUMNS = (Column("ID", key=True), Column("TYPE", give=1, least=9), Column("AZ", give=3, least=6),
                    Column("CLOUD", give=4, least=3), Column("MARKET", give=2, least=6), Column("STATE", give=2, least=7),
                    Column("$/H", right=True), Column("COST", right=True))


def snapshot_document(snap: FleetSnapshot) -> dict[str, Any]:
    """The JSON document for one snapshot."""
    return {
        "schema": SCHEMA,
        "taken_at": snap.taken_at,
        "demo": snap.demo,
        "gpus": [gpu_document(g, percent=False) for g in snap.gpus],
        "jobs": to_jsonable(snap.jobs),
        "cronjobs": to_jsonable(snap.cronjobs),
        "nodes": to_jsonable(snap.nodes),
        "queues": [queue_document(q) for q in snap.queues],
        "instances": [{**to_jsonable(i), "bills_now": i.bills_now} for i in snap.instances],
        "services": [service_document(s) for s in snap.services],
        "budgets": [
            {**to_jsonable(b.budget), "spent": b.spent, "forecast": b.forecast, "burn_per_hour": b.burn_per_hour,
             "percent": b.percent, "crossed": to_jsonable(b.crossed), "left_out": b.left_out or None}
            for b in snap.budgets
        ],
        "sources": [
            {**to_jsonable(s), "status": s.describe(snap.taken_at)} for s in snap.sources
        ],
        "alerts": to_jsonable(snap.alerts),
        "spend": {"today": snap.spend_today, "month": snap.spend_month, "burn_per_hour": snap.burn_per_hour,
                  "billed_month": snap.billed_month, "billed_note": snap.billed_note,
                  "left_out": snap.spend_left_out or None},
        "pending_actions": to_jsonable(snap.pending_actions),
        "costs": cost_section(snap),
    }


def queue_document(queue: Queue) -> dict[str, Any]:
    """A cluster-wide queue (a Kueue ClusterQueue or a Volcano Queue) in ``snapshot --json``."""
    return {"name": queue.name, "kind": queue.kind.value, "cohort": queue.cohort, "gpu_quota": queue.gpu_quota,
            "gpu_used": queue.gpu_used, "gpu_borrowed": queue.gpu_borrowed, "gpu_lent": queue.gpu_lent,
            "gpu_borrowing_limit": queue.gpu_borrowing_limit, "gpu_lending_limit": queue.gpu_lending_limit,
            "pending_workloads": queue.pending_workloads, "admitted_workloads": queue.admitted_workloads,
            "usd_per_hour": queue.usd_per_hour, "flavors": list(queue.flavors), "active": queue.active,
            "local_queues": list(queue.local_queues), "budgets": list(queue.budgets)}


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


def run_snapshot(console: Console, *, as_json: bool, wait: float, out: TextIO | None = None,
                 width: int | None = WIDTH) -> int:
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
        out.write(render_text(snap, width))
    return 0


def render_text(snap: FleetSnapshot, width: int | None = WIDTH) -> str:
    """A plain-text report of one snapshot (no colour), in ``width`` columns (None: whole)."""
    from gpuconsole.ui.format import age, money, short_node

    lines: list[str] = []
    now = snap.taken_at
    lines += _sources(snap, width)
    hints = [s for s in snap.sources if s.hint]
    for s in hints:
        lines.append(wrap(f"  {s.kind.value}: {s.hint}", width, indent="    "))
    if hints and not snap.demo:
        lines.append("  or try the console on a simulated fleet: gpuconsole --demo")
    lines.append(wrap(f"spend: today {money(snap.spend_today)}, this month {money(snap.spend_month)}, "
                      f"burning {money(snap.burn_per_hour)}/h", width))
    if snap.gpus:
        rows: list[tuple[object, ...]] = []
        for g in snap.gpus:
            rows.append((short_node(g.node), g.index, g.name, f"{g.utilization:.0f}%",
                         f"{g.memory_used_mib}/{g.memory_total_mib}M", f"{g.temperature_c}°C", f"{g.power_w:.0f}W",
                         g.mig_mode.value))
            rows += [("", "", f"  └ {mig.profile}", "" if mig.utilization is None else f"{mig.utilization:.0f}%",
                      f"{mig.memory_used_mib}/{mig.memory_total_mib}M", "", "", "") for mig in g.mig_slices]
        lines += ["", *render_table(GPU_COLUMNS, rows, width)]
    if snap.jobs:
        rows = [(j.state.value, j.namespace, j.name, j.gpu_request, age(now - j.created), j.pending_reason or "")
                for j in snap.jobs]
        lines += ["", *render_table(JOB_COLUMNS, rows, width)]
    if snap.instances:
        rows = [(i.instance_id, i.instance_type, i.availability_zone, i.cloud, i.market.value,
                 "stopped $" if i.state is InstanceState.STOPPED and i.bills_now else i.state.value,
                 f"{i.price_per_hour:.3f}" + ("" if i.currency == "USD" else f" {i.currency}"),
                 money(i.accrued_cost) if i.currency == "USD" else f"{i.accrued_cost:,.2f} {i.currency}")
                for i in snap.instances]
        lines += ["", *render_table(INSTANCE_COLUMNS, rows, width)]
    if snap.budgets:
        lines.append("")
        for b in snap.budgets:
            lines.append(wrap(f"budget {b.budget.name}: {money(b.spent)} of {money(b.budget.amount)} ({b.percent:.0f}%) "
                              f"{b.budget.period.value}, forecast {money(b.forecast)}", width))
    if snap.alerts:
        lines.append("")
        lines.extend(wrap(f"{a.severity.value}: {a.message}", width) for a in snap.alerts)
    return "\n".join(lines) + "\n"


def _sources(snap: FleetSnapshot, width: int | None) -> list[str]:
    """``sources: gpus=sim (live), …`` on one line: the longest statuses are cut to fit, and
    each one cut is then shown whole on a line of its own."""
    statuses = [s.describe(snap.taken_at) for s in snap.sources]
    shown = list(statuses)

    def line() -> str:
        return "sources: " + ", ".join(f"{s.kind.value}={s.name} ({text})" for s, text in zip(snap.sources, shown, strict=True))

    for i in sorted(range(len(shown)), key=lambda i: -len(shown[i])):
        over = len(line()) - width if width is not None else 0
        if over <= 0:
            break
        shown[i] = cut(shown[i], max(len(shown[i]) - over, 8))
    return [line(), *(wrap(f"  {s.kind.value}: {whole}", width, indent="    ")
                      for s, whole, text in zip(snap.sources, statuses, shown, strict=True) if text != whole)]
