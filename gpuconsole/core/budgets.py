"""Budgets: spend against a limit over a period and a scope, with thresholds.

A scope is ``all``, ``tag:Key=Value`` (instances carrying that tag) or ``namespace:NS``
(instances whose node runs jobs of that namespace — an approximation until per-job cost
attribution lands). Spend and forecast are computed from the instances of the latest snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuconsole.core import costs
from gpuconsole.model import (
    Budget,
    BudgetPeriod,
    BudgetStatus,
    Instance,
    Job,
    JobState,
    Threshold,
    ThresholdBasis,
)

# The budgets the demo opens with: a fleet limit, a team limit and a daily research limit.
DEMO_BUDGETS: tuple[Budget, ...] = (
    Budget(name="fleet", amount=80_000.0, period=BudgetPeriod.MONTHLY, scope="all"),
    Budget(name="team-nlp", amount=25_000.0, period=BudgetPeriod.MONTHLY, scope="tag:Project=nlp"),
    Budget(name="research-daily", amount=2_000.0, period=BudgetPeriod.DAILY, scope="tag:Project=research"),
    Budget(name="inference", amount=2_500.0, period=BudgetPeriod.MONTHLY, scope="tag:Project=inference"),
)


class ScopeError(ValueError):
    """A scope string that is not ``all``, ``tag:Key=Value`` or ``namespace:NS``."""


def parse_scope(scope: str) -> tuple[str, str, str]:
    """Split a scope into (kind, key, value). Raises :class:`ScopeError` with a one-line message."""
    if scope == "all":
        return ("all", "", "")
    kind, _, rest = scope.partition(":")
    if kind == "tag" and "=" in rest and rest.split("=", 1)[0]:
        key, value = rest.split("=", 1)
        return ("tag", key, value)
    if kind == "namespace" and rest:
        return ("namespace", rest, "")
    raise ScopeError(f"bad budget scope {scope!r}: use all, tag:Key=Value or namespace:NAME")


def in_scope(instances: Iterable[Instance], scope: str, jobs: Sequence[Job] = ()) -> list[Instance]:
    kind, key, value = parse_scope(scope)
    if kind == "all":
        return list(instances)
    if kind == "tag":
        return [i for i in instances if i.tag(key) == value]
    nodes = {j.node for j in jobs if j.namespace == key and j.state is JobState.RUNNING and j.node}
    return [i for i in instances if i.node in nodes]


def period_bounds(budget: Budget, now: float) -> tuple[float, float]:
    if budget.period is BudgetPeriod.DAILY:
        start = costs.day_start(now)
        return start, start + 86400.0
    return costs.month_start(now), costs.month_end(now)


def evaluate(budget: Budget, instances: Sequence[Instance], now: float, jobs: Sequence[Job] = ()) -> BudgetStatus:
    """Spend, burn rate, forecast and crossed thresholds of one budget at ``now``."""
    scoped = in_scope(instances, budget.scope, jobs)
    start, end = period_bounds(budget, now)
    spent = costs.spend(scoped, start, now)
    burn = costs.burn_per_hour(scoped)
    forecast = spent + burn * max(0.0, end - now) / 3600.0
    crossed = tuple(t for t in budget.thresholds if _crossed(t, budget.amount, spent, forecast))
    return BudgetStatus(budget=budget, spent=spent, forecast=forecast, burn_per_hour=burn, crossed=crossed)


def _crossed(threshold: Threshold, amount: float, spent: float, forecast: float) -> bool:
    value = spent if threshold.basis is ThresholdBasis.ACTUAL else forecast
    return amount > 0 and value >= amount * threshold.percent / 100.0


def evaluate_all(
    budgets: Iterable[Budget], instances: Sequence[Instance], now: float, jobs: Sequence[Job] = ()
) -> tuple[BudgetStatus, ...]:
    return tuple(evaluate(b, instances, now, jobs) for b in budgets)


def describe_crossing(status: BudgetStatus) -> str | None:
    """One line for the most serious crossed threshold, or None when none is crossed."""
    if not status.crossed:
        return None
    b = status.budget
    if status.percent >= 100:
        return f"budget {b.name} is over its limit: ${status.spent:,.0f} of ${b.amount:,.0f} ({status.percent:.0f}%)"
    if any(t.basis is ThresholdBasis.FORECAST for t in status.crossed):
        return f"budget {b.name} heading for ${status.forecast:,.0f} of ${b.amount:,.0f} (now {status.percent:.0f}%)"
    top = max(t.percent for t in status.crossed)
    return f"budget {b.name} passed {top:g}%: ${status.spent:,.0f} of ${b.amount:,.0f}"
