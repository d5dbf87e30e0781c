"""The fleet as Prometheus metric families, read from the snapshot the console composed last.

A scrape never reaches a backend: :class:`FleetCollector` turns the newest
:class:`~gpuconsole.model.FleetSnapshot` (composed by the console's own polling threads) into
families, and the autopilot's action counts come from a tally the console refreshes on a
periodic job (:class:`AutopilotTally`). Names and units follow Prometheus' conventions (base
units, ``_total`` counters, HELP on every family), as ``promtool check metrics`` checks them.

A figure that cannot be known has no sample, never 0: no cloud source, no burn rate; no GPU
source, no idle cost. Whether a source is up is always known, so it is 0 or 1.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gpuconsole.core.money import costs
from gpuconsole.core.money.budget_words import ScopeError, scope_parts
from gpuconsole.model import FleetSnapshot, JobState, SourceKind, SourceState

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from gpuconsole.core.access.audit import AuditLog

PREFIX = "gpuconsole_"
KNOWN_STATES = (SourceState.LIVE, SourceState.STALE)  # a reading to figure from (stale: late, still the last one)

ActionKey = tuple[str, str, str]  # (rule, action, outcome)


def known(snap: FleetSnapshot, *kinds: SourceKind) -> bool:
    """Whether every source of ``kinds`` has a reading the snapshot's figures come from."""
    for kind in kinds:
        status = snap.source(kind)
        if status is None or status.state not in KNOWN_STATES:
            return False
    return True


def _gauge(name: str, text: str, labels: tuple[str, ...] = (), unit: str = "") -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, text, labels=list(labels), unit=unit)


def source_families(snap: FleetSnapshot) -> Iterator[Metric]:
    """Whether each configured source answers, and when it last did; when the snapshot was made."""
    taken = _gauge("snapshot_timestamp_seconds", "When the snapshot served was composed (Unix time).", unit="seconds")
    taken.add_metric([], snap.taken_at)
    up = _gauge("source_up", "1 when the source's last poll answered, 0 when it failed or is late.",
                ("source", "backend"))
    last = _gauge("source_last_success_timestamp_seconds", "When the source last answered (Unix time).",
                  ("source", "backend"), unit="seconds")
    for status in snap.sources:
        if status.state is SourceState.UNCONFIGURED:
            continue  # no backend of that kind: nothing to be up or down
        labels = [status.kind.value, status.name]
        up.add_metric(labels, 1.0 if status.state is SourceState.LIVE else 0.0)
        if status.updated_at is not None and status.error != "cached":
            last.add_metric(labels, status.updated_at)
    yield from (taken, up, last)


def cost_families(snap: FleetSnapshot) -> Iterator[Metric]:
    """Burn rate, what idle billed GPUs cost, and each namespace's jobs' rate (dollars per hour)."""
    burn = _gauge("burn_dollars_per_hour", "What the billed instances cost per hour now, in US dollars.")
    idle = _gauge("idle_gpu_cost_dollars_per_hour",
                  "What the billed GPUs doing nothing now cost per hour, in US dollars.")
    namespaces = _gauge("namespace_cost_dollars_per_hour",
                        "What the running jobs of a namespace cost per hour (their GPUs' share of the instance "
                        "price), in US dollars.", ("namespace",))
    if known(snap, SourceKind.CLOUD):
        burn.add_metric([], snap.burn_per_hour)
    if known(snap, SourceKind.CLOUD, SourceKind.GPUS):
        prices = costs.gpu_price_per_hour(snap.instances)
        idle.add_metric([], costs.idle_cost_per_hour((g for g in snap.gpus if not g.busy), prices))
    if known(snap, SourceKind.CLOUD, SourceKind.JOBS):
        now = snap.taken_at
        for line in costs.per_namespace(snap.jobs, snap.instances, costs.month_start(now), now):
            namespaces.add_metric([line.key], line.per_hour)
    yield from (burn, idle, namespaces)


def budget_families(snap: FleetSnapshot) -> Iterator[Metric]:
    """Each budget's limit, spend in its period, and the forecast at the period's end."""
    spent = _gauge("budget_spent_dollars", "Spent in the budget's current period, in US dollars.", ("budget",),
                   unit="dollars")
    limit = _gauge("budget_limit_dollars", "The budget's limit, in US dollars.", ("budget",), unit="dollars")
    forecast = _gauge("budget_forecast_dollars", "The budget's spend forecast at its period's end, in US dollars.",
                      ("budget",), unit="dollars")
    for status in snap.budgets:
        name = status.budget.name
        limit.add_metric([name], status.budget.amount)
        if _budget_known(snap, status.budget.scope):
            spent.add_metric([name], status.spent)
            forecast.add_metric([name], status.forecast)
    yield from (spent, limit, forecast)


def _budget_known(snap: FleetSnapshot, scope: str) -> bool:
    """Spend needs the cloud; a namespace's spend needs the jobs too (their nodes)."""
    try:
        kind = scope_parts(scope)[0]
    except ScopeError:
        return False
    return known(snap, SourceKind.CLOUD, SourceKind.JOBS) if kind == "namespace" else known(snap, SourceKind.CLOUD)


def queue_families(snap: FleetSnapshot) -> Iterator[Metric]:
    """Jobs waiting per namespace, and the GPUs they ask for (a MIG device: its compute share)."""
    jobs = _gauge("jobs_pending", "Jobs waiting to be scheduled, per namespace.", ("namespace",))
    gpus = _gauge("pending_gpus", "GPUs the pending jobs ask for (a MIG device counts as its share of a GPU).")
    if known(snap, SourceKind.JOBS):
        waiting = Counter({job.namespace: 0 for job in snap.jobs})
        asked = 0.0
        for job in snap.jobs:
            if job.state is JobState.PENDING:
                waiting[job.namespace] += 1
                asked += max(job.gpus, 1) * costs.mig_share(job.mig_profile) if job.mig_profile else job.gpus
        for namespace, count in sorted(waiting.items()):
            jobs.add_metric([namespace], count)
        gpus.add_metric([], asked)
    yield from (jobs, gpus)


def alert_families(snap: FleetSnapshot, actions: Mapping[ActionKey, int]) -> Iterator[Metric]:
    """The console's active alerts by kind and severity; the autopilot's finished actions."""
    alerts = _gauge("alerts_active", "Alerts the console shows now, by kind (what raised it) and severity.",
                    ("kind", "severity"))
    for (kind, severity), count in sorted(Counter((a.source, a.severity.value) for a in snap.alerts).items()):
        alerts.add_metric([kind, severity], count)
    done = CounterMetricFamily(PREFIX + "autopilot_actions_total",
                               "Actions the autopilot carried out or tried, by rule, action and outcome "
                               "(ok, failed, denied), as the audit log records them.",
                               labels=["rule", "action", "outcome"])
    for (rule, action, outcome), count in sorted(actions.items()):
        done.add_metric([rule, action, outcome], count)
    yield from (alerts, done)


def families(snap: FleetSnapshot, actions: Mapping[ActionKey, int] | None = None) -> list[Metric]:
    """Every family of one snapshot (``actions``: the autopilot's counts, see :class:`AutopilotTally`)."""
    return [*source_families(snap), *cost_families(snap), *budget_families(snap), *queue_families(snap),
            *alert_families(snap, actions or {})]


class FleetCollector(Collector):
    """A ``prometheus_client`` collector of the newest snapshot; a scrape only reads memory.

    Args:
        snapshot: the snapshot the console composed last (e.g. ``lambda: console.snapshot``).
        actions: the autopilot's action counts of the moment.
    """

    def __init__(self, snapshot: Callable[[], FleetSnapshot],
                 actions: Callable[[], Mapping[ActionKey, int]] = dict) -> None:
        self._snapshot = snapshot
        self._actions = actions

    def collect(self) -> Iterator[Metric]:
        yield from families(self._snapshot(), self._actions())

    def describe(self) -> Iterator[Metric]:
        return iter(())  # names are fixed; nothing to check against other collectors at registration


class AutopilotTally:
    """The autopilot's finished actions counted from the audit log (refreshed off the scrape path).

    Each action is recorded as ``autopilot:<rule>`` twice: its intent (``started``) and its
    result (``ok``, ``failed: …``, ``denied: …``); the results are counted.
    """

    ACTOR = "autopilot:"

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self._lock = threading.Lock()
        self._counts: dict[ActionKey, int] = {}

    def refresh(self) -> None:
        """Count again (blocking: run it from a periodic job, never from a scrape)."""
        from gpuconsole.core.access.guard import STARTED
        from gpuconsole.model import AuditFilter

        counts: Counter[ActionKey] = Counter()
        for record in self.audit.records(AuditFilter(actor=self.ACTOR)):
            if record.actor.startswith(self.ACTOR) and record.result != STARTED:
                outcome = record.result.split(":", 1)[0].strip() or "unknown"
                counts[(record.actor[len(self.ACTOR):], record.action, outcome)] += 1
        with self._lock:
            self._counts = dict(counts)

    def counts(self) -> dict[ActionKey, int]:
        with self._lock:
            return self._counts
