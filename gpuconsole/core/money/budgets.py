"""Budgets: spend against a limit over a period and a scope, with thresholds that act.

A scope is ``all``, ``tag:Key=Value`` or ``namespace:NS``; a period the UTC day, the UTC month,
or custom dates (an open end is cumulative). Spend and forecast come from the latest snapshot's
instances. Pure: no I/O, no clock. How budgets are written is :mod:`budget_words`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuconsole.core.money import costs
from gpuconsole.core.money.currency import Rates, convert
from gpuconsole.core.money.budget_words import (
    ACTION_WORDS,
    AMOUNT_RULE,
    MAX_AMOUNT,
    MAX_PERCENT,
    NAME_RE,
    NAMESPACE_MAX,
    NAMESPACE_RE,
    NAMESPACE_RULE,
    THRESHOLD_SYNTAX,
    BudgetError,
    ScopeError,
    amount_problem,
    describe_period,
    format_date,
    format_threshold,
    namespace_problem,
    parse_amount,
    parse_date,
    parse_period,
    parse_scope,
    parse_threshold,
    scope_parts,
    threshold_key,
    validate,
)
from gpuconsole.model import (
    Budget,
    BudgetAction,
    BudgetPeriod,
    BudgetStatus,
    CronJob,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    PendingAction,
    Threshold,
    ThresholdBasis,
    unfinished,
)

__all__ = [
    "ACTION_WORDS", "AMOUNT_RULE", "DEMO_BUDGETS", "DEMO_SPRINT", "MAX_AMOUNT", "MAX_LISTED", "MAX_PERCENT",
    "NAMESPACE_MAX", "NAMESPACE_RE", "NAMESPACE_RULE", "NAME_RE", "OPEN_FORECAST_S", "SPRINT_FULL_S",
    "SPRINT_LENGTH_S", "THRESHOLD_SYNTAX", "BudgetError", "ScopeError", "amount_problem", "cronjobs_in_scope",
    "describe_crossing", "describe_period", "evaluate", "evaluate_all", "format_date", "format_threshold",
    "impact_line", "in_scope", "namespace_problem", "parse_amount", "parse_date", "parse_period",
    "parse_scope", "parse_threshold", "period_bounds", "period_open", "plan_action", "scope_parts",
    "size_sprint", "spot_skip_reason", "threshold_key", "usd", "validate",
]

# The budgets the demo opens with: a fleet limit, a team limit, a daily research limit, an
# inference limit, and a short "sprint" that crosses its thresholds in the demo's first minutes.
# The sprint's amount is 0 here: the console sizes it from the fleet's burn rate at the start
# (:func:`size_sprint`), so it behaves the same at any time of the month.
DEMO_SPRINT = Budget(
    name="sprint",
    amount=0.0,
    period=BudgetPeriod.CUSTOM,
    scope="all",
    thresholds=(
        Threshold(50.0),
        Threshold(80.0),
        Threshold(100.0, actions=(BudgetAction.NOTIFY, BudgetAction.STOP_ALL)),
    ),
    origin="demo",
)
DEMO_BUDGETS: tuple[Budget, ...] = (
    Budget(name="fleet", amount=80_000.0, period=BudgetPeriod.MONTHLY, scope="all", origin="demo"),
    Budget(name="team-nlp", amount=25_000.0, period=BudgetPeriod.MONTHLY, scope="tag:Project=nlp", origin="demo"),
    Budget(name="research-daily", amount=2_000.0, period=BudgetPeriod.DAILY, scope="tag:Project=research", origin="demo"),
    Budget(name="inference", amount=2_500.0, period=BudgetPeriod.MONTHLY, scope="tag:Project=inference", origin="demo"),
    DEMO_SPRINT,
)
SPRINT_FULL_S = 300.0  # the sprint reaches 100% this long after the demo starts (50% at half)
SPRINT_LENGTH_S = 900.0  # and its custom period ends this long after the start

OPEN_FORECAST_S = 30 * 86400.0  # how far an open-ended custom budget forecasts


# --------------------------------------------------------------------------- spend


def in_scope(instances: Iterable[Instance], scope: str, jobs: Sequence[Job] = ()) -> list[Instance]:
    kind, key, value = scope_parts(scope)
    if kind == "all":
        return list(instances)
    if kind == "tag":
        return [i for i in instances if i.tag(key) == value]
    live = unfinished(jobs) if isinstance(jobs, tuple) else jobs  # a reading's: its live jobs, made once
    nodes = {j.node for j in live if j.namespace == key and j.state is JobState.RUNNING and j.node}
    return [i for i in instances if i.node in nodes]


def cronjobs_in_scope(cronjobs: Iterable[CronJob], scope: str) -> list[CronJob]:
    """The CronJobs a scope covers: all of them, those of a namespace, none for a tag (CronJobs
    carry no cloud tags)."""
    kind, key, _ = scope_parts(scope)
    if kind == "all":
        return list(cronjobs)
    if kind == "namespace":
        return [c for c in cronjobs if c.namespace == key]
    return []


def period_bounds(budget: Budget, now: float) -> tuple[float, float]:
    """Start and end of the period containing ``now``; an open-ended custom period "ends"
    :data:`OPEN_FORECAST_S` after ``now`` (its forecast horizon)."""
    if budget.period is BudgetPeriod.DAILY:
        start = costs.day_start(now)
        return start, start + 86400.0
    if budget.period is BudgetPeriod.CUSTOM:
        start = budget.starts if budget.starts is not None else 0.0
        end = budget.ends if budget.ends is not None else max(now, start) + OPEN_FORECAST_S
        return start, end
    return costs.month_start(now), costs.month_end(now)


def period_open(budget: Budget, now: float) -> bool:
    """Whether ``now`` is inside the budget's period (a custom period may not have begun or be over)."""
    if budget.period is not BudgetPeriod.CUSTOM:
        return True
    start, end = period_bounds(budget, now)
    return start <= now < end


def evaluate(budget: Budget, instances: Sequence[Instance], now: float, jobs: Sequence[Job] = (),
             rates: Rates = ()) -> BudgetStatus:
    """Spend, burn rate, forecast and crossed thresholds of one budget at ``now``, in the budget's
    currency: spend in another one counts through ``rates`` (``[money] rates``), else is left
    out and the status says so."""
    scoped, left_out = convert(in_scope(instances, budget.scope, jobs), budget.currency, rates)
    start, end = period_bounds(budget, now)
    burn = costs.burn_per_hour(scoped)
    if now < start:
        spent, forecast = 0.0, burn * (end - start) / 3600.0
    else:
        until = min(now, end)
        spent = costs.spend(scoped, start, until)
        forecast = spent + burn * max(0.0, end - now) / 3600.0
    crossed = tuple(t for t in budget.thresholds if _crossed(t, budget.amount, spent, forecast))
    return BudgetStatus(budget=budget, spent=spent, forecast=forecast, burn_per_hour=burn, crossed=crossed,
                        left_out=left_out)


def _crossed(threshold: Threshold, amount: float, spent: float, forecast: float) -> bool:
    value = spent if threshold.basis is ThresholdBasis.ACTUAL else forecast
    return amount > 0 and value >= amount * threshold.percent / 100.0


def evaluate_all(
    budgets: Iterable[Budget], instances: Sequence[Instance], now: float, jobs: Sequence[Job] = (),
    rates: Rates = (),
) -> tuple[BudgetStatus, ...]:
    return tuple(evaluate(b, instances, now, jobs, rates) for b in budgets)


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


def size_sprint(template: Budget, instances: Sequence[Instance], start: float) -> Budget:
    """The demo sprint with its amount set: what the scope burns in :data:`SPRINT_FULL_S` at
    ``start`` (at least $1), so 50% is passed after half that time and 80% soon after."""
    burn = costs.burn_per_hour(in_scope(instances, template.scope))
    amount = round(max(1.0, burn * SPRINT_FULL_S / 3600.0), 2)
    return Budget(
        name=template.name, amount=amount, period=BudgetPeriod.CUSTOM, scope=template.scope,
        thresholds=template.thresholds, automatic=template.automatic, starts=start, ends=start + SPRINT_LENGTH_S,
        notify_command=template.notify_command, webhook=template.webhook, origin=template.origin,
    )


# --------------------------------------------------------------------------- actions


MAX_LISTED = 4


def plan_action(
    budget: Budget,
    threshold: Threshold,
    action: BudgetAction,
    instances: Sequence[Instance],
    cronjobs: Sequence[CronJob] = (),
    jobs: Sequence[Job] = (),
) -> PendingAction | None:
    """What a crossed threshold's non-notify ``action`` would act on, or None when nothing.

    What EC2 lets stop is stopped: ``stop-all`` takes running on-demand instances and spot
    instances of persistent requests with the ``stop`` interruption behaviour, ``stop-spot``
    only those spot ones. One-time spot instances cannot be stopped (EC2 refuses), so a stop
    leaves them running at full price: ``terminate-spot`` ends them, and only it. A spot
    instance whose request kind is unknown (the lookup failed) is never a target. What is left
    running is named in the detail, so a user sees what still burns money. ``stop-all`` also
    takes a stopped instance whose compute still bills (``bills_now``: an Azure VM powered off
    but still allocated), and stopping it ends its billing (Azure deallocates it).
    """
    if action is BudgetAction.NOTIFY:
        return None
    if action is BudgetAction.SUSPEND_CRONJOBS:
        jobs_in = [c for c in cronjobs_in_scope(cronjobs, budget.scope) if not c.suspended]
        if not jobs_in:
            return None
        listed = _listed([f"{c.namespace}/{c.name}" for c in jobs_in])
        detail = f"suspend {len(jobs_in)} CronJob{'s' if len(jobs_in) != 1 else ''}: {listed}"
        return _pending(budget, threshold, action, tuple(c.uid for c in jobs_in), detail)
    scoped = in_scope(instances, budget.scope, jobs)
    running = [i for i in scoped if i.state is InstanceState.RUNNING]
    # A stopped instance whose compute still bills (an Azure VM powered off but still allocated,
    # an ECS one stopped in standard mode) is stopped again, the way that ends its bill.
    billing_stopped = ([i for i in scoped if i.state is InstanceState.STOPPED and i.bills_now]
                       if action is BudgetAction.STOP_ALL else [])
    targets = [i for i in running if _takes(action, i)] + billing_stopped
    verb = "terminate" if action is BudgetAction.TERMINATE_SPOT else "stop"
    parts: list[str] = []
    if targets:
        listed = _listed([f"{i.instance_id} ({i.instance_type}, ${i.price_per_hour:,.2f}/h)" for i in targets])
        parts.append(f"{verb} {len(targets)} instance{'s' if len(targets) != 1 else ''}: {listed}")
    if action is BudgetAction.TERMINATE_SPOT:
        unknown = [i for i in running if i.market is Market.SPOT and not i.spot_type]
        if unknown:
            parts.append(f"left running: spot instance{'s' if len(unknown) != 1 else ''} "
                         f"{_listed([i.instance_id for i in unknown])} of an unknown request kind")
    else:
        # Unknown request kinds count as one-time here (EC2 would refuse to stop those too); with
        # terminate-spot in the threshold, its own pending action names them instead.
        unstoppable = [i for i in running if i.market is Market.SPOT and not i.stoppable_spot]
        if unstoppable and BudgetAction.TERMINATE_SPOT not in threshold.actions:
            parts.append(spot_skip_reason(unstoppable))
    if not parts:
        return None
    return _pending(budget, threshold, action, tuple(i.instance_id for i in targets), "; ".join(parts))


def _takes(action: BudgetAction, instance: Instance) -> bool:
    """Whether ``action`` acts on the running ``instance`` (see :func:`plan_action`)."""
    if action is BudgetAction.TERMINATE_SPOT:
        return instance.one_time_spot
    if action is BudgetAction.STOP_SPOT:
        return instance.stoppable_spot
    return action is BudgetAction.STOP_ALL and (instance.market is Market.ON_DEMAND or instance.stoppable_spot)


def spot_skip_reason(spot: Sequence[Instance]) -> str:
    if len(spot) == 1:
        return f"cannot stop one-time spot instance {spot[0].instance_id}: terminate it by hand"
    return f"cannot stop one-time spot instances {_listed([i.instance_id for i in spot])}: terminate them by hand"


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return f"{shown} and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else shown


def _pending(budget: Budget, threshold: Threshold, action: BudgetAction, targets: tuple[str, ...],
             detail: str) -> PendingAction:
    return PendingAction(budget=budget.name, percent=threshold.percent, basis=threshold.basis, action=action,
                         targets=targets, automatic=budget.automatic, detail=detail)


def impact_line(status: BudgetStatus, hourly: float, now: float) -> str:
    """``budget research: $820 of $1,000 now; this launch adds $98/h → forecast $2,400 (240%) by
    period end`` — what a launch at ``hourly`` dollars an hour does to a budget."""
    b = status.budget
    _, end = period_bounds(b, now)
    hours = max(0.0, end - now) / 3600.0
    forecast = status.forecast + hourly * hours
    percent = 100.0 * forecast / b.amount if b.amount else 0.0
    horizon = "in 30 days" if b.period is BudgetPeriod.CUSTOM and b.ends is None else "by period end"
    return (f"budget {b.name}: {usd(status.spent)} of {usd(b.amount)} now; this launch adds {usd(hourly)}/h "
            f"→ forecast {usd(forecast)} ({percent:.0f}%) {horizon}")


def usd(amount: float) -> str:
    """``$1,000``, ``$98``, ``$0.42``: whole dollars from $10, cents below."""
    return f"${amount:,.0f}" if abs(amount) >= 10 else f"${amount:,.2f}"
