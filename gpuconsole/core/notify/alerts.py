"""The one alert model the notifications send: each condition of a snapshot with a stable identity.

An alert is ``kind:subject`` (``gpu-idle:GPU-…``, ``budget:team-a:80``, ``source:aws``), a
severity, a one-line summary, details (figures, owner, job, namespace, $/h) and the labels a
channel routes on. :func:`conditions` reads them off one :class:`FleetSnapshot`; each carries
``since`` when the snapshot's history already shows how long it has held (an idle GPU's
``idle_since``, a pending job's creation), so a sender that starts late does not wait again.
:data:`KINDS` holds each kind's ``for`` (how long a condition must hold before it fires).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gpuconsole.core.money import costs
from gpuconsole.core.money.budget_words import threshold_key
from gpuconsole.core.money.budgets import usd
from gpuconsole.model import FleetSnapshot, InstanceState, JobState, Market, Severity, SourceState, ThresholdBasis
from gpuconsole.model.autopilot import AutopilotRuleStatus

HOT_GPU_C = 85
AUTOPILOT_ALERT_S = 15 * 60.0  # an autopilot action stays an (info) alert this long, then resolves
SEVERITY_ORDER = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(frozen=True, slots=True)
class AlertKind:
    """What every alert of one kind shares: its Alertmanager ``alertname`` and its ``for``."""

    name: str
    alertname: str
    for_s: float


KINDS: dict[str, AlertKind] = {k.name: k for k in (
    AlertKind("budget", "GpuconsoleBudgetCrossed", 0.0),
    AlertKind("source", "GpuconsoleSourceDown", 0.0),
    AlertKind("gpu-idle", "GpuconsoleGpuIdle", 600.0),
    AlertKind("job-pending", "GpuconsoleJobPending", 600.0),
    AlertKind("gpu-hot", "GpuconsoleGpuHot", 120.0),
    AlertKind("spot", "GpuconsoleSpotInterrupted", 0.0),
    AlertKind("autopilot", "GpuconsoleAutopilotAction", 0.0),
    AlertKind("rule-paused", "GpuconsoleRulePaused", 0.0),
    AlertKind("gpu-xid", "GpuconsoleGpuXid", 0.0),
    AlertKind("security", "GpuconsoleSecurity", 0.0),
    AlertKind("slo", "GpuconsoleSloBreached", 0.0),
    AlertKind("test", "GpuconsoleTest", 0.0),
)}


class NotifyAlert(msgspec.Struct, frozen=True, kw_only=True):
    """One alert as every channel tells it.

    ``labels`` are what a router matches (``namespace``, ``instance_id``, ``gpu``, ``budget``,
    ``rule`` where they apply); ``details`` are figures in words, for the text of a message.
    """

    identity: str  # kind:subject
    kind: str
    severity: Severity
    summary: str
    details: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    since: float | None = None  # when the snapshot's history shows it began

    @property
    def description(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.details)

    def with_demo(self) -> NotifyAlert:
        """The alert marked as the demo's: a ``demo`` label and ``[demo]`` before its summary."""
        return msgspec.structs.replace(self, summary=f"[demo] {self.summary}", labels=(*self.labels, ("demo", "true")))


def severity_at_least(severity: Severity, floor: Severity) -> bool:
    return SEVERITY_ORDER[severity] >= SEVERITY_ORDER[floor]


def conditions(snap: FleetSnapshot) -> dict[str, NotifyAlert]:
    """Every alert condition true in ``snap``, by identity."""
    found: list[NotifyAlert] = []
    found += _sources(snap)
    found += _budgets(snap)
    found += _idle_gpus(snap)
    found += _pending_jobs(snap)
    found += _hot_gpus(snap)
    found += _spot(snap)
    found += autopilot_actions(snap.autopilot, snap.taken_at)
    found += _paused_rules(snap)
    found += _xid(snap)
    found += _security(snap)
    found += _slo_breaches(snap)
    out = {a.identity: a for a in found}
    return {k: v.with_demo() for k, v in out.items()} if snap.demo else out


def _sources(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    for s in snap.sources:
        if s.state in (SourceState.ERROR, SourceState.STALE) and s.error != "cached":
            yield NotifyAlert(identity=f"source:{s.name}", kind="source", severity=Severity.WARNING,
                              summary=f"{s.kind.value} source {s.name} {s.describe(snap.taken_at)}",
                              labels=(("source", s.name),))


def _budgets(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    for status in snap.budgets:
        b = status.budget
        for t in status.crossed:
            key = threshold_key(t)
            forecast = t.basis is ThresholdBasis.FORECAST
            critical = t.percent >= 100 and not forecast
            summary = (f"budget {b.name} forecast passed {t.percent:g}%: heading for {usd(status.forecast)} of "
                       f"{usd(b.amount)} (now {status.percent:.0f}%)" if forecast else
                       f"budget {b.name} passed {t.percent:g}%: {usd(status.spent)} of {usd(b.amount)} ({status.percent:.0f}%)")
            yield NotifyAlert(
                identity=f"budget:{b.name}:{key}", kind="budget",
                severity=Severity.CRITICAL if critical else Severity.WARNING, summary=summary,
                details=(("spent", usd(status.spent)), ("amount", usd(b.amount)), ("forecast", usd(status.forecast)),
                         ("burn", f"{usd(status.burn_per_hour)}/h")),
                labels=(("budget", b.name), ("threshold", key)))


def _idle_gpus(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    """Billed GPUs idle now; those the snapshot has seen idle for 30+ min carry ``idle_since``."""
    known = {g.uuid: g for g in snap.idle}
    prices = costs.gpu_price_per_hour(snap.instances)
    node_instance = {i.node: i.instance_id for i in snap.instances if i.node}
    for g in snap.gpus:
        idle = known.get(g.uuid)
        if idle is None and (g.busy or g.node not in prices):
            continue
        per_hour = idle.per_hour if idle is not None else prices[g.node]
        owner = idle.owner if idle is not None else ""
        instance = idle.instance_id if idle is not None else node_instance.get(g.node, "")
        details = [("node", g.node), ("utilization", f"{g.utilization:.0f}%"), ("cost", f"{usd(per_hour)}/h")]
        if owner:
            details.append(("owner", owner))
        labels = [("gpu", g.uuid)] + ([("instance_id", instance)] if instance else [])
        yield NotifyAlert(identity=f"gpu-idle:{g.uuid}", kind="gpu-idle", severity=Severity.WARNING,
                          summary=f"GPU {g.index} on {g.node} idle while billed ({usd(per_hour)}/h)",
                          details=tuple(details), labels=tuple(labels),
                          since=idle.idle_since if idle is not None else None)


def _pending_jobs(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    for j in snap.jobs:
        if j.state is JobState.PENDING:
            details = [("gpus", j.gpu_request)] + ([("reason", j.pending_reason)] if j.pending_reason else [])
            if j.owner:
                details.append(("owner", j.owner))
            yield NotifyAlert(identity=f"job-pending:{j.namespace}/{j.name}", kind="job-pending", severity=Severity.INFO,
                              summary=f"job {j.namespace}/{j.name} pending", details=tuple(details),
                              labels=(("namespace", j.namespace), ("job", j.name)), since=j.created)


def _hot_gpus(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    for g in snap.gpus:
        if g.temperature_c >= HOT_GPU_C:
            yield NotifyAlert(identity=f"gpu-hot:{g.uuid}", kind="gpu-hot", severity=Severity.WARNING,
                              summary=f"GPU {g.index} on {g.node} at {g.temperature_c} °C",
                              details=(("node", g.node), ("temperature", f"{g.temperature_c} °C")),
                              labels=(("gpu", g.uuid),))


def _spot(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    for i in snap.instances:
        if i.market is Market.SPOT and i.state in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED):
            yield NotifyAlert(identity=f"spot:{i.instance_id}", kind="spot", severity=Severity.WARNING,
                              summary=f"spot instance {i.instance_id} ({i.instance_type}) {i.state.value}",
                              labels=(("instance_id", i.instance_id),))


def _paused_rules(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    """An autopilot rule that paused itself (too many actions, a failure): nobody asked it to."""
    for r in snap.autopilot:
        if r.paused and r.paused_reason:
            yield NotifyAlert(identity=f"rule-paused:{r.name}", kind="rule-paused", severity=Severity.WARNING,
                              summary=f"autopilot rule {r.name} paused itself: {r.paused_reason}",
                              labels=(("rule", r.name),))


def _xid(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    """A GPU whose driver reported an XID error (a lost GPU, a fault the job may not survive)."""
    for g in snap.gpus:
        if g.xid_errors:
            yield NotifyAlert(identity=f"gpu-xid:{g.uuid}:{g.xid_errors}", kind="gpu-xid", severity=Severity.CRITICAL,
                              summary=f"GPU {g.index} on {g.node} reported XID {g.xid_errors}",
                              details=(("node", g.node), ("xid", str(g.xid_errors))), labels=(("gpu", g.uuid),))


def _security(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    """The console's key hygiene (an access key past 90 days, a certificate about to expire):
    one alert per finding, named by what it says up to its first figure."""
    for alert in snap.alerts:
        if alert.source == "security":
            subject = alert.message.split(" is ")[0].split(" expire")[0]
            yield NotifyAlert(identity=f"security:{subject}", kind="security", severity=alert.severity,
                              summary=alert.message, labels=(("finding", subject),))


def _slo_breaches(snap: FleetSnapshot) -> Iterable[NotifyAlert]:
    """An inference service missing its SLO ([[services.slo]]), since it began to."""
    for alert in snap.alerts:
        if alert.source != "services":
            continue
        key = alert.message.split(" ", 1)[0]
        service = next((s for s in snap.services if s.key == key), None)
        if service is None or service.slo is None:
            continue
        details = tuple((name, f"{value:,.3g}") for name, value in service.slo.values)
        yield NotifyAlert(identity=f"slo:{key}", kind="slo", severity=alert.severity, summary=alert.message,
                          details=details, labels=(("namespace", service.namespace), ("service", service.name)),
                          since=service.slo.since)


def autopilot_actions(rules: Iterable[AutopilotRuleStatus], now: float) -> list[NotifyAlert]:
    """One alert per autopilot action of the last :data:`AUTOPILOT_ALERT_S` seconds."""
    out = []
    for r in rules:
        if r.acted_at is not None and 0 <= now - r.acted_at <= AUTOPILOT_ALERT_S:
            out.append(NotifyAlert(identity=f"autopilot:{r.name}:{int(r.acted_at)}", kind="autopilot",
                                   severity=Severity.INFO, summary=f"autopilot rule {r.name} acted: {r.acted}",
                                   labels=(("rule", r.name),), since=r.acted_at))
    return out


def recorded_actions(config: Path | str | None) -> list[NotifyAlert]:
    """The autopilot's recent actions as its database records them, for a sender that is not
    the autopilot (``notify run``); none when there is no database or its rules cannot be read
    (the autopilot reports those itself)."""
    from gpuconsole.core.ops.autopilot.loading import all_rules, state_path
    from gpuconsole.core.ops.autopilot.rules import RuleError
    from gpuconsole.core.ops.autopilot.state import AutopilotState

    path = state_path()
    if not path.exists():
        return []
    try:
        state = AutopilotState(path)
    except (OSError, sqlite3.Error):
        return []
    try:
        statuses = []
        for rule in all_rules(config, state):
            st = state.get(rule.name)
            statuses.append(AutopilotRuleStatus(rule.name, rule.kind, rule.scope.text(), "", acted=st.last_decision,
                                                acted_at=st.last_action_at))
        return autopilot_actions(statuses, time.time())
    except (RuleError, sqlite3.Error):
        return []
    finally:
        state.close()


def channel_test_alert(channel: str) -> NotifyAlert:
    """What ``notify test CHANNEL`` sends (then resolves)."""
    return NotifyAlert(identity=f"test:{channel}", kind="test", severity=Severity.INFO,
                       summary=f"gpuconsole test alert for channel {channel}", labels=(("channel", channel),))
