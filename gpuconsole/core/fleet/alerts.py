"""The alerts the overview lists, derived from one snapshot: sources down, hot GPUs, spot
instances going away, idle billed GPUs, jobs pending too long; most severe first."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from gpuconsole.core.money import costs
from gpuconsole.core.money.idle import by_owner
from gpuconsole.model import Alert, FleetSnapshot, InstanceState, JobState, Market, Severity, SourceState, unfinished

HOT_GPU_C = 85
PENDING_TOO_LONG_S = 600
ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def derive_alerts(snap: FleetSnapshot, extra: Iterable[Alert] = (), budget_alerts: tuple[Alert, ...] = ()) -> FleetSnapshot:
    """``snap`` with its alerts: ``extra`` (the console's own: cache, key hygiene, autopilot),
    the sources', the budgets' (from :meth:`BudgetOps.evaluate`) and the fleet's, most severe first."""
    now = snap.taken_at
    alerts: list[Alert] = list(extra)
    for status in snap.sources:
        if status.state in (SourceState.ERROR, SourceState.STALE) and status.error != "cached":
            alerts.append(Alert(Severity.WARNING, status.name, f"{status.kind.value} source {status.describe(now)}", now))
    alerts.extend(budget_alerts)
    hot = [g for g in snap.gpus if g.temperature_c >= HOT_GPU_C]
    if hot:
        alerts.append(Alert(Severity.WARNING, "gpus", f"{len(hot)} GPU(s) at or above {HOT_GPU_C} °C", now))
    gone = [i for i in snap.instances if i.state in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED) and i.market is Market.SPOT]
    for inst in gone:
        alerts.append(Alert(Severity.WARNING, "cloud", f"spot instance {inst.instance_id} ({inst.instance_type}) {inst.state.value}", now))
    idle_alert = idle_gpus_alert(snap)
    if idle_alert is not None:
        alerts.append(idle_alert)
    waiting = [j for j in unfinished(snap.jobs) if j.state is JobState.PENDING and now - j.created > PENDING_TOO_LONG_S]
    if waiting:
        alerts.append(Alert(Severity.INFO, "jobs", f"{len(waiting)} job(s) pending for over 10 min", now))
    alerts.sort(key=lambda a: ORDER[a.severity])
    return msgspec.structs.replace(snap, alerts=tuple(alerts))


def idle_gpus_alert(snap: FleetSnapshot) -> Alert | None:
    """The waste of GPUs idle for 30+ min while billed when there are any; else what the GPUs
    idle at this moment cost (the per-GPU scan runs only in that second case)."""
    now = snap.taken_at
    if snap.idle:
        per_hour = sum(g.per_hour for g in snap.idle)
        wasted = sum(g.wasted for g in snap.idle)
        owners = by_owner(snap.idle)
        top = f"; most: {owners[0].key} ${owners[0].amount:,.2f}" if owners else ""
        return Alert(Severity.WARNING, "costs",
                     f"{len(snap.idle)} GPU(s) idle for 30+ min while billed: wasting ${per_hour:,.2f}/h, "
                     f"${wasted:,.2f} so far{top}", now)
    prices = costs.gpu_price_per_hour(snap.instances)
    idle = [g for g in snap.gpus if not g.busy and g.node in prices]
    if not idle:
        return None
    per_hour = costs.idle_cost_per_hour(idle, prices)
    return Alert(Severity.INFO, "costs", f"{len(idle)} billed GPU(s) idle, costing ${per_hour:,.2f}/h", now)
