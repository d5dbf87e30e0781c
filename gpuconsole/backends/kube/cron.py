"""CronJobs: their schedules read as cron reads them, and when each runs next."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from gpuconsole.backends.kube import schema
from gpuconsole.backends.kube.records import (
    CronJobRecord,
    gpu_request,
    parse_time,
    pod_devices,
    pods_at_once,
    template_spec,
)
from gpuconsole.model import CronJob, JobsReading

# Kubernetes accepts these shorthands; cron itself wants five fields.
_CRON_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


def cron_expression(schedule: str, time_zone: str | None) -> tuple[str, str | None]:
    """``(five fields, zone)`` of a CronJob schedule: macros expanded, a ``CRON_TZ=`` / ``TZ=``
    prefix moved into the zone (``spec.timeZone`` wins, as in the CronJob controller)."""
    fields = schedule.split()
    zone = time_zone
    if fields and fields[0].startswith(("CRON_TZ=", "TZ=")):
        zone = zone or fields[0].split("=", 1)[1]
        fields = fields[1:]
    text = " ".join(fields)
    return _CRON_MACROS.get(text, text), zone


def next_run(expression: str, zone: str | None, after: float) -> float | None:
    """The first run of ``expression`` in ``zone`` (UTC when unknown) strictly after ``after``;
    ``None`` for a schedule cron cannot read."""
    try:
        tz = ZoneInfo(zone) if zone else UTC
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC
    try:
        when = next(CronSim(expression, datetime.fromtimestamp(after, tz)), None)
    except (CronSimError, ValueError):
        return None
    return when.timestamp() if when is not None else None


def cronjob_record(obj: Mapping[str, Any] | schema.CronJob) -> CronJobRecord:
    """Read a batch/v1 CronJob (plain JSON or already decoded as :class:`schema.CronJob`).

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    cron = schema.convert(obj, schema.CronJob)
    meta, spec = cron.metadata, cron.spec
    status = cron.status or schema.EMPTY_CRONJOB_STATUS
    schedule = spec.schedule
    job_spec = spec.jobTemplate.spec if spec.jobTemplate is not None else None
    job_spec = job_spec or schema.EMPTY_JOB_SPEC
    gpus, mig = gpu_request(pod_devices(template_spec(job_spec)), pods_at_once(job_spec))
    zone = spec.timeZone
    expression, zone = cron_expression(schedule, zone if isinstance(zone, str) else None)
    cronjob = CronJob(
        uid=meta.uid,
        name=meta.name,
        namespace=meta.namespace or "default",
        schedule=schedule,
        created=parse_time(meta.creationTimestamp) or 0.0,
        suspended=spec.suspend is True,
        last_schedule=parse_time(status.lastScheduleTime),
        gpus=gpus,
        mig_profile=mig,
        active=len(status.active or ()),
    )
    return CronJobRecord(cronjob, expression, zone)



def next_cron_change(reading: JobsReading) -> float | None:
    """When a reading's next-run times go out of date: its earliest next run."""
    times = [c.next_schedule for c in reading.cronjobs if c.next_schedule is not None]
    return min(times) if times else None
