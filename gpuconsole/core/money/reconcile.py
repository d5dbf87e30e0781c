"""The estimate against the bill: each instance's estimated cost per UTC day beside what Cost
Explorer billed for it (resource-level daily cost: the instance and its EBS volumes).

Budgets stop instances on the estimate, so it has to be what AWS will bill; this is how to tell.
A difference is ``estimate − billed``: positive when the console counts more than the bill.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from gpuconsole.core.money.costs import instance_spend
from gpuconsole.core.money.periods import day_start
from gpuconsole.model import Instance, Value

DAY_S = 86400.0


class DayDifference(Value):
    """One instance on one UTC day."""

    instance_id: str
    day: str  # "2026-11-30"
    estimate: float
    billed: float

    @property
    def difference(self) -> float:
        return self.estimate - self.billed

    @property
    def percent(self) -> float | None:
        """The difference as a percentage of the bill; None when nothing was billed."""
        return 100.0 * self.difference / self.billed if self.billed else None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


def full_days(now: float, days: int) -> list[tuple[str, float]]:
    """The last ``days`` whole UTC days before today, oldest first: ``(day, its midnight)``."""
    today = day_start(now)
    return [(_iso(today - k * DAY_S), today - k * DAY_S) for k in range(days, 0, -1)]


def reconcile(instances: Iterable[Instance], billed: Iterable[tuple[str, str, float]], now: float,
              days: int) -> tuple[DayDifference, ...]:
    """Estimate and billed cost of each instance on each of the last ``days`` whole days.

    ``billed`` rows are ``(resource id, day, dollars)``; an instance's volumes' rows count toward
    the instance, as its estimate counts them. A day with neither an estimate nor a bill is left
    out.
    """
    by_resource: dict[tuple[str, str], float] = {}
    for resource, day, amount in billed:
        by_resource[(resource, day)] = by_resource.get((resource, day), 0.0) + amount
    out: list[DayDifference] = []
    for inst in sorted(instances, key=lambda i: i.instance_id):
        ids = (inst.instance_id, *(v.volume_id for v in inst.volumes))
        for day, midnight in full_days(now, days):
            estimate = instance_spend(inst, midnight, min(now, midnight + DAY_S))
            bill = sum(by_resource.get((i, day), 0.0) for i in ids)
            if estimate or bill:
                out.append(DayDifference(inst.instance_id, day, estimate, bill))
    return tuple(out)


def fleet_day(rows: Sequence[DayDifference], day: str) -> tuple[float, float]:
    """The fleet's estimate and bill on ``day``."""
    on_day = [r for r in rows if r.day == day]
    return sum(r.estimate for r in on_day), sum(r.billed for r in on_day)


def last_day_line(instances: Iterable[Instance], billed: Iterable[tuple[str, str, float]], now: float) -> str:
    """One line for the Overview: the fleet's estimate vs the bill for yesterday (UTC)."""
    [(day, _)] = full_days(now, 1)
    estimate, bill = fleet_day(reconcile(instances, billed, now, 1), day)
    if not estimate and not bill:
        return ""
    diff = estimate - bill
    percent = f" ({100.0 * diff / bill:+.1f}%)" if bill else ""
    return f"{day}: estimate ${estimate:,.2f} vs billed ${bill:,.2f}, {'+' if diff >= 0 else '-'}${abs(diff):,.2f}{percent}"
