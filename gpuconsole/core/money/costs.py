"""What the fleet costs: spend and burn rate, who and what it is spent on, and where the month
is heading. Pure: instances, GPUs and jobs in, :class:`~gpuconsole.model.CostLine` values out.

An instance with billing spans is billed by :mod:`billing`; one without (a cloud's describe call
does not say when it stopped) is counted for the overlap of its life with the period while
billed, and for what it accrued if launched in the period and no longer billed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import lru_cache

from cronsim import CronSim, CronSimError

from gpuconsole.core.money.billing import MIN_BILLED_S as MIN_BILLED_S  # re-exported, with billed_cost
from gpuconsole.core.money.billing import billed_cost as billed_cost
from gpuconsole.core.money.billing import spent_by
from gpuconsole.core.money.periods import day_start as day_start  # re-exported: callers ask costs for the calendar
from gpuconsole.core.money.periods import month_end, month_start
from gpuconsole.core.money.storage import storage_cost
from gpuconsole.model import (
    Budget,
    BudgetPeriod,
    CostLine,
    CronJob,
    Gpu,
    Instance,
    Job,
    JobState,
    MigMode,
)
from gpuconsole.model import mig_share as mig_share  # re-exported: the attribution's and usage's share

UNTAGGED = "(untagged)"
FORECAST_HORIZON_S = 30 * 86400.0


# --------------------------------------------------------------------------- spend


def _overlap(a: float, b: float, start: float, end: float) -> float:
    """Seconds of ``[a, b)`` within ``[start, end)``."""
    return max(0.0, min(b, end) - max(a, start))


_SPEND_KEPT: ContextVar[dict[tuple[int, float, float], tuple[Instance, float]] | None] = ContextVar(
    "spend_kept", default=None)


@contextmanager
def one_moment() -> Iterator[None]:
    """Within it (on this thread), an instance's spend over one window is worked out once: a
    snapshot asks the same instances' spend for the day, the month and each budget's period,
    most of them the month again."""
    token = _SPEND_KEPT.set({})
    try:
        yield
    finally:
        _SPEND_KEPT.reset(token)


def instance_spend(instance: Instance, start: float, now: float) -> float:
    """Dollars an instance cost between ``start`` and ``now``."""
    kept = _SPEND_KEPT.get()
    if kept is None:
        return _instance_spend(instance, start, now)
    key = (id(instance), start, now)
    hit = kept.get(key)
    if hit is not None and hit[0] is instance:
        return hit[1]
    value = _instance_spend(instance, start, now)
    kept[key] = (instance, value)
    return value


def _instance_spend(instance: Instance, start: float, now: float) -> float:
    """Compute (:func:`_compute_spend`) plus the EBS volumes attached to it."""
    compute = _compute_spend(instance, start, now)
    return compute + storage_cost(instance.volumes, start, now) if instance.volumes else compute


def _compute_spend(instance: Instance, start: float, now: float) -> float:
    if instance.billing:
        return spent_by(instance.billing, start, now)
    overlap = max(0.0, now - max(start, instance.launch_time))
    at_price = instance.price_per_hour * overlap / 3600.0
    if instance.bills_now:
        return min(at_price, instance.accrued_cost) if instance.accrued_cost else at_price
    if instance.launch_time >= start:
        return min(instance.accrued_cost, at_price) if at_price else instance.accrued_cost
    return 0.0


def spend(instances: Iterable[Instance], start: float, now: float) -> float:
    return sum(instance_spend(i, start, now) for i in instances)


def burn_per_hour(instances: Iterable[Instance]) -> float:
    """Dollars per hour the billed instances cost right now (a stopped one its cloud still bills,
    an Azure VM stopped but not deallocated, counts)."""
    return sum(i.price_per_hour for i in instances if i.bills_now)


def gpu_price_per_hour(instances: Iterable[Instance]) -> dict[str, float]:
    """Price of one GPU-hour on each node (instance price / GPUs), keyed by node name."""
    prices: dict[str, float] = {}
    for inst in instances:
        if inst.node and inst.gpus and inst.state.billed:
            prices[inst.node] = inst.price_per_hour / inst.gpus
    return prices


def idle_cost_per_hour(gpus: Iterable[Gpu], node_gpu_price: dict[str, float]) -> float:
    """What the GPUs doing nothing cost per hour right now (billed, but not busy)."""
    return sum(node_gpu_price.get(g.node, 0.0) for g in gpus if not g.busy)


# --------------------------------------------------------------------------- attribution


def per_instance(instances: Iterable[Instance], start: float, now: float) -> list[CostLine]:
    """Spend of each instance (key: instance id)."""
    return _ranked(CostLine("instance", i.instance_id, instance_spend(i, start, now), _rate(i)) for i in instances)


def per_gpu(instances: Iterable[Instance], gpus: Iterable[Gpu], start: float, now: float) -> list[CostLine]:
    """Each GPU's share of its node's instance: instance cost / the GPUs reported on that node.

    GPUs on a node no instance backs are left out, and so is an instance whose node reports
    no GPUs (:func:`per_instance` lists it).
    """
    gpus = list(gpus)
    counts: dict[str, int] = {}
    for g in gpus:
        counts[g.node] = counts.get(g.node, 0) + 1
    shares: dict[str, tuple[float, float]] = {}
    for inst in instances:
        n = counts.get(inst.node or "", 0)
        if n:
            shares[inst.node or ""] = (instance_spend(inst, start, now) / n, _rate(inst) / n)
    lines = []
    for g in gpus:
        share = shares.get(g.node)
        if share is not None:
            lines.append(CostLine("gpu", g.uuid, share[0], share[1]))
    return _ranked(lines)


def per_mig_slice(instances: Iterable[Instance], gpus: Iterable[Gpu], start: float, now: float) -> list[CostLine]:
    """Each MIG device's part of its GPU's share, by compute share (``3g.40gb``: 3/7).

    Compute slices no MIG device holds are not listed: their part stays with the GPU.
    """
    gpus = list(gpus)
    by_gpu = {line.key: line for line in per_gpu(instances, gpus, start, now)}
    lines = []
    for g in gpus:
        line = by_gpu.get(g.uuid)
        if line is None or g.mig_mode is not MigMode.ENABLED:
            continue
        for s in g.mig_slices:
            share = mig_share(s.profile)
            lines.append(CostLine("mig", s.uuid, line.amount * share, line.per_hour * share))
    return _ranked(lines)


def per_job(jobs: Iterable[Job], instances: Iterable[Instance], start: float, now: float) -> list[CostLine]:
    """What each job's GPUs cost while it ran within ``[start, now)`` (key: ``namespace/name``).

    GPU-seconds of the job × the price of a GPU-hour on its node (instance price / GPUs); a MIG
    job holds its profile's share of a GPU. ``per_hour`` is the rate of a job still running.
    Jobs that never ran, or whose node no instance backs any more, are left out.
    """
    prices = _node_gpu_prices(instances)
    lines = []
    for job in jobs:
        price = prices.get(job.node or "")
        if price is None or job.started is None:
            continue
        devices = job_gpus(job)
        finished = job.finished if job.finished is not None else now
        seconds = _overlap(job.started, finished, start, now)
        running = job.state is JobState.RUNNING
        lines.append(CostLine("job", f"{job.namespace}/{job.name}", devices * seconds * price / 3600.0,
                              devices * price if running else 0.0))
    return _ranked(lines)


def per_namespace(jobs: Iterable[Job], instances: Iterable[Instance], start: float, now: float) -> list[CostLine]:
    """Job costs (:func:`per_job`) summed by namespace."""
    amounts: dict[str, list[float]] = {}
    for line in per_job(jobs, instances, start, now):
        acc = amounts.setdefault(line.key.split("/", 1)[0], [0.0, 0.0])
        acc[0] += line.amount
        acc[1] += line.per_hour
    return _ranked(CostLine("namespace", ns, a, r) for ns, (a, r) in amounts.items())


def per_tag(instances: Iterable[Instance], key: str, start: float, now: float) -> list[CostLine]:
    """Instance spend summed by the value of tag ``key`` (Owner, Project, Budget…);
    instances without it under ``(untagged)``."""
    amounts: dict[str, list[float]] = {}
    for inst in instances:
        acc = amounts.setdefault(inst.tag(key) or UNTAGGED, [0.0, 0.0])
        acc[0] += instance_spend(inst, start, now)
        acc[1] += _rate(inst)
    return _ranked(CostLine(f"tag:{key}", value, a, r) for value, (a, r) in amounts.items())


def _rate(inst: Instance) -> float:
    return inst.price_per_hour if inst.bills_now else 0.0


def _node_gpu_prices(instances: Iterable[Instance]) -> dict[str, float]:
    """GPU-hour price per node, billed or not: a finished job's node may be stopped by now."""
    return {i.node: i.price_per_hour / i.gpus for i in instances if i.node and i.gpus}


def job_gpus(job: Job | CronJob) -> float:
    """GPUs a job holds, a MIG device counting as its compute share."""
    if job.mig_profile:
        return max(job.gpus, 1) * mig_share(job.mig_profile)
    return float(job.gpus)


def _ranked(lines: Iterable[CostLine]) -> list[CostLine]:
    return sorted(lines, key=lambda line: (-line.amount, -line.per_hour, line.key))


# --------------------------------------------------------------------------- forecasts


def month_end_forecast(spent_so_far: float, burn_per_hour: float, now: float,
                       history: Sequence[tuple[float, float]] = ()) -> float:
    """Spend at the end of the month: what is spent plus a rate × the hours left.

    The rate is the current burn rate, blended with the average hourly spend of ``history``
    (``(timestamp, cumulative spend)`` points of this month; other months' points are ignored)
    when it covers some time. The burn rate says what runs now; the average remembers the jobs
    and instances that come and go. The average weighs half the blend once the history covers
    a day, and proportionally less for a shorter history: ``w = 0.5 × min(1, span / 24 h)``,
    ``rate = (1 − w) × burn + w × average``.
    """
    left_h = max(0.0, month_end(now) - now) / 3600.0
    rate = burn_per_hour
    first = month_start(now)
    points = sorted(p for p in history if first <= p[0] <= now)
    if len(points) >= 2 and points[-1][0] > points[0][0]:
        span = points[-1][0] - points[0][0]
        average = max(0.0, points[-1][1] - points[0][1]) * 3600.0 / span
        weight = 0.5 * min(1.0, span / 86400.0)
        rate = (1.0 - weight) * burn_per_hour + weight * average
    return spent_so_far + rate * left_h


# Kubernetes accepts these shorthands; cronsim wants five fields.
_CRON_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


def _cron_fields(schedule: str) -> str:
    fields = schedule.split()
    if fields and fields[0].startswith(("CRON_TZ=", "TZ=")):  # counted in UTC: over 30 days, ±1 run
        fields = fields[1:]
    text = " ".join(fields)
    return _CRON_MACROS.get(text, text)


def _next_run(schedule: str, after: float) -> float | None:
    """The first run strictly after ``after``."""
    when = next(CronSim(schedule, datetime.fromtimestamp(after, UTC)), None)
    return when.timestamp() if when is not None else None


def _count_runs(schedule: str, lo: float, hi: float) -> int:
    """Runs in ``[lo, hi)``, one by one."""
    runs = 0
    for when in CronSim(schedule, datetime.fromtimestamp(lo - 1.0, UTC)):
        if when.timestamp() >= hi:
            break
        runs += 1
    return runs


@lru_cache(maxsize=256)
def _runs_between(schedule: str, start: float, end: float) -> int:
    """Runs in ``(start, end]``, both on whole minutes, counted a UTC day at a time.

    Hours and minutes do not depend on the day, so every day that has a run has as many as
    the first full such day: a day after that costs one look-up, and an every-minute schedule
    over 30 days is counted in two days' steps instead of 43,200.
    """
    lo, hi = start + 60.0, end + 60.0  # runs fall on whole minutes: (start, end] is [lo, hi)
    runs = 0
    per_day: int | None = None
    day = lo
    while day < hi:
        stop = min(hi, (day // 86400.0 + 1.0) * 86400.0)
        full = day % 86400.0 == 0.0 and stop - day == 86400.0
        if full and per_day is not None:
            first = _next_run(schedule, day - 1.0)
            runs += per_day if first is not None and first < stop else 0
        else:
            n = _count_runs(schedule, day, stop)
            if full and n:
                per_day = n
            runs += n
        day = stop
    return runs


def cronjob_runs(cronjob: CronJob, start: float, end: float) -> int:
    """Scheduled runs of ``cronjob`` in ``(start, end]`` (UTC); none while it is suspended.

    Counted to the minute (cron's resolution), so repeated calls within a minute are cached.
    Kubernetes' ``@daily``-style shorthands are understood; a ``CRON_TZ=`` prefix is dropped.

    Raises:
        ValueError: a schedule cron cannot read.
    """
    if cronjob.suspended or end <= start:
        return 0
    try:
        return _runs_between(_cron_fields(cronjob.schedule), float(math.floor(start / 60.0) * 60),
                             float(math.floor(end / 60.0) * 60))
    except CronSimError as exc:
        raise ValueError(f"CronJob {cronjob.namespace}/{cronjob.name}: bad schedule {cronjob.schedule!r}: {exc}") from exc


def cronjob_cost(cronjob: CronJob, typical_runtime_s: float, price_per_gpu_hour: float,
                 start: float, end: float) -> float:
    """What the runs scheduled in ``(start, end]`` cost: runs × runtime × GPUs × price."""
    runs = cronjob_runs(cronjob, start, end)
    return runs * typical_runtime_s / 3600.0 * job_gpus(cronjob) * price_per_gpu_hour


def cronjob_monthly_cost(cronjob: CronJob, typical_runtime_s: float, price_per_gpu_hour: float, now: float) -> float:
    """What the schedule costs over the next 30 days (a MIG profile counts as its share of a GPU)."""
    return cronjob_cost(cronjob, typical_runtime_s, price_per_gpu_hour, now, now + FORECAST_HORIZON_S)


def cronjob_breaks_budget(cronjob: CronJob, typical_runtime_s: float, price_per_gpu_hour: float,
                          budget: Budget, now: float) -> str | None:
    """One line when the CronJob's schedule alone would spend more than ``budget``'s amount over
    one of its periods (the next 24 h for a daily budget, 30 days for a monthly one, the rest of
    a custom one), else None."""
    if budget.period is BudgetPeriod.DAILY:
        end, period = now + 86400.0, "a day"
    elif budget.period is BudgetPeriod.CUSTOM and budget.ends is not None:
        end, period = budget.ends, "the budget's period"
    else:
        end, period = now + FORECAST_HORIZON_S, "30 days"
    cost = cronjob_cost(cronjob, typical_runtime_s, price_per_gpu_hour, max(now, budget.starts or now), end)
    if cost <= budget.amount:
        return None
    runs = cronjob_runs(cronjob, max(now, budget.starts or now), end)
    return (f"CronJob {cronjob.namespace}/{cronjob.name} ({cronjob.schedule}) alone costs ${cost:,.0f} in {period} "
            f"({runs} runs), over budget {budget.name}'s ${budget.amount:,.0f}")
