"""One immutable :class:`FleetSnapshot` from the sources' latest readings and the services.

:func:`compose` holds no state of its own: what it keeps between snapshots (the idle tracker,
the schedules' costs) lives in the :class:`Services` it is given, and the time is an argument,
so a test or a benchmark composes exactly the moment it wants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from gpuconsole.core.fleet.alerts import derive_alerts
from gpuconsole.core.fleet.queues import priced_queues
from gpuconsole.core.money import costs
from gpuconsole.core.money.currency import BASE, convert
from gpuconsole.core.money.reconcile import last_day_line
from gpuconsole.core.money.run_history import basis_text
from gpuconsole.core.money.storage import storage_cost
from gpuconsole.model import (
    Alert,
    CloudReading,
    FleetSnapshot,
    GpuReading,
    Instance,
    JobsReading,
    Severity,
    SourceKind,
    SourceStatus,
)

if TYPE_CHECKING:
    from gpuconsole.core.fleet.services import Services
    from gpuconsole.core.money.cost_explorer import CostExplorer


@dataclass(frozen=True, slots=True)
class Readings:
    """What a snapshot is made of besides the services.

    Attributes:
        gpus / jobs / cloud: each source's latest reading (None before the first, or no source).
        sources: every source's status.
        alerts: the console's own alerts (the cache, key hygiene), listed first.
        services: the inference services' latest reading.
    """

    gpus: object | None
    jobs: object | None
    cloud: object | None
    sources: tuple[SourceStatus, ...]
    alerts: tuple[Alert, ...] = ()
    services: object | None = None

    @classmethod
    def of(cls, reading: Callable[[SourceKind], object | None], sources: tuple[SourceStatus, ...],
           alerts: tuple[Alert, ...] = ()) -> Readings:
        """The readings ``reading(kind)`` gives for each kind, with ``sources`` and ``alerts``."""
        return cls(reading(SourceKind.GPUS), reading(SourceKind.JOBS), reading(SourceKind.CLOUD), sources, alerts,
                   reading(SourceKind.SERVICES))


def compose(readings: Readings, services: Services, now: float) -> FleetSnapshot:
    """The fleet at ``now``: priced instances, spend, idle GPUs, budgets, schedules' costs, the
    autopilot's state and every alert. Each instance's spend per window is worked out once."""
    with costs.one_moment():
        return _compose(readings, services, now)


def _compose(readings: Readings, services: Services, now: float) -> FleetSnapshot:
    gpu_reading, jobs_reading, cloud_reading = readings.gpus, readings.jobs, readings.cloud
    gpus = gpu_reading.gpus if isinstance(gpu_reading, GpuReading) else ()
    jobs = jobs_reading.jobs if isinstance(jobs_reading, JobsReading) else ()
    cronjobs = jobs_reading.cronjobs if isinstance(jobs_reading, JobsReading) else ()
    nodes = jobs_reading.nodes if isinstance(jobs_reading, JobsReading) else ()
    queues = jobs_reading.queues if isinstance(jobs_reading, JobsReading) else ()
    instances = cloud_reading.instances if isinstance(cloud_reading, CloudReading) else ()
    cloud, explorer = services.cloud, services.cost_explorer
    instances = cloud.price_instances(instances, now)
    # Idle time counts to when the GPUs were read: a reading from before a pause says nothing of since.
    read_at = min(now, gpu_reading.taken_at) if isinstance(gpu_reading, GpuReading) else now
    idle = services.idle.update(gpus, instances, read_at)
    billed_month, billed_note = None, ""
    if explorer is not None:
        billed_month = explorer.total()
        billed_note = f"Cost Explorer, {explorer.age_text()}"
    loose = cloud.loose_volumes()
    # Fleet totals are in US dollars: another currency counts through [money] rates, else is left out.
    counted, left_out = convert(instances, BASE, services.budget_ops.book.config.rates)
    spend_today = costs.spend(counted, costs.day_start(now), now) + storage_cost(loose, costs.day_start(now), now)
    spend_month = costs.spend(counted, costs.month_start(now), now) + storage_cost(loose, costs.month_start(now), now)
    if isinstance(cloud_reading, CloudReading):
        spend_today = cloud_reading.spend_today if cloud_reading.spend_today is not None else spend_today
        spend_month = cloud_reading.spend_month if cloud_reading.spend_month is not None else spend_month
    snapshot = FleetSnapshot(
        taken_at=now,
        gpus=gpus,
        jobs=jobs,
        cronjobs=cronjobs,
        nodes=nodes,
        instances=instances,
        sources=readings.sources,
        spend_today=spend_today,
        spend_month=spend_month,
        burn_per_hour=costs.burn_per_hour(counted),
        spend_left_out=left_out,
        idle=idle,
        billed_month=billed_month,
        billed_note=billed_note,
        spend_basis=basis_text(instances),
        day_difference=day_difference(explorer, instances, now),
        demo=services.demo,
    )
    budget_states, pending, budget_alerts = services.budget_ops.evaluate(snapshot)
    budgets = tuple(status.budget for status in budget_states)
    cron_lines, cron_warnings = services.cron_costs(jobs_reading, cloud_reading, cronjobs, jobs, instances, budgets, now)
    autopilot = services.autopilot
    served, slo_alerts = services.serving.compose(readings.services, snapshot, services.budget_ops.book.config.rates, now)
    snapshot = msgspec.structs.replace(snapshot, budgets=budget_states, pending_actions=pending, cronjob_costs=cron_lines,
                                       autopilot=autopilot.statuses(now), autopilot_leader=autopilot.holder,
                                       services=served, queues=priced_queues(queues, jobs, instances, budget_states))
    cron_alerts = tuple(Alert(Severity.WARNING, "budget", w, now) for w in cron_warnings)
    return derive_alerts(snapshot, [*readings.alerts, *autopilot.alerts(now), *slo_alerts], budget_alerts + cron_alerts)


def day_difference(explorer: CostExplorer | None, instances: tuple[Instance, ...], now: float) -> str:
    """The fleet's estimate vs Cost Explorer for the last full day, when a per-resource answer
    is cached."""
    answer = explorer.resources() if explorer is not None else None
    return last_day_line(instances, answer[0], now) if answer is not None else ""
