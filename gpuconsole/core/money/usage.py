"""Usage analysis for auditors: GPU-hours and cost per user and per namespace over a period.

A job's GPU-hours are its GPUs (a MIG device counting as its compute share, as in
:mod:`gpuconsole.core.money.costs`) × the hours it ran within the period; its cost is those GPU-hours
× the GPU-hour price of its node (the instance's price / its GPUs). A job whose node no priced
instance backs still counts its GPU-hours, at no cost. The user is the job's ``owner`` label.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuconsole.core.money.costs import mig_share
from gpuconsole.model import Instance, Job

UNKNOWN = "(no owner)"


@dataclass(frozen=True, slots=True)
class UsageLine:
    key: str
    gpu_hours: float
    cost: float
    jobs: int


@dataclass(frozen=True, slots=True)
class UsageReport:
    since: float
    until: float
    by_user: tuple[UsageLine, ...]
    by_namespace: tuple[UsageLine, ...]

    @property
    def gpu_hours(self) -> float:
        return sum(line.gpu_hours for line in self.by_user)

    @property
    def cost(self) -> float:
        return sum(line.cost for line in self.by_user)

    def as_dict(self) -> dict[str, object]:
        def lines(items: tuple[UsageLine, ...]) -> list[dict[str, object]]:
            return [{"key": i.key, "gpu_hours": round(i.gpu_hours, 4), "cost": round(i.cost, 4), "jobs": i.jobs}
                    for i in items]

        return {"schema": "gpuconsole.usage/1", "since": self.since, "until": self.until,
                "gpu_hours": round(self.gpu_hours, 4), "cost": round(self.cost, 4),
                "by_user": lines(self.by_user), "by_namespace": lines(self.by_namespace)}

    def text(self) -> str:
        out = []
        for title, items in (("USER", self.by_user), ("NAMESPACE", self.by_namespace)):
            out.append(f"{title:<24} {'GPU-HOURS':>10} {'COST':>12} {'JOBS':>5}")
            out.extend(f"{i.key:<24} {i.gpu_hours:>10.2f} {'$' + format(i.cost, ',.2f'):>12} {i.jobs:>5}" for i in items)
            out.append("")
        out.append(f"total: {self.gpu_hours:.2f} GPU-hours, ${self.cost:,.2f}")
        return "\n".join(out) + "\n"


def job_gpus(job: Job) -> float:
    if job.mig_profile:
        return max(job.gpus, 1) * mig_share(job.mig_profile)
    return float(job.gpus)


def usage_report(jobs: Iterable[Job], instances: Iterable[Instance], since: float, until: float) -> UsageReport:
    """GPU-hours and cost of ``jobs`` within ``[since, until)``, per owner and per namespace."""
    prices = {i.node: i.price_per_hour / i.gpus for i in instances if i.node and i.gpus}
    users: dict[str, list[float]] = {}
    spaces: dict[str, list[float]] = {}
    for job in jobs:
        if job.started is None:
            continue
        end = job.finished if job.finished is not None else until
        seconds = max(0.0, min(end, until) - max(job.started, since))
        if seconds <= 0:
            continue
        hours = job_gpus(job) * seconds / 3600.0
        cost = hours * prices.get(job.node or "", 0.0)
        for table, key in ((users, job.owner or UNKNOWN), (spaces, job.namespace)):
            acc = table.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += hours
            acc[1] += cost
            acc[2] += 1
    return UsageReport(since, until, _ranked(users), _ranked(spaces))


def _ranked(table: dict[str, list[float]]) -> tuple[UsageLine, ...]:
    lines = (UsageLine(k, v[0], v[1], int(v[2])) for k, v in table.items())
    return tuple(sorted(lines, key=lambda line: (-line.cost, -line.gpu_hours, line.key)))
