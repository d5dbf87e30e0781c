"""Budgets: spend against a limit over a period and a scope, with thresholds that act.

A scope is ``all``, ``tag:Key=Value`` (instances carrying that tag) or ``namespace:NS``
(instances whose node runs jobs of that namespace — an approximation until per-job cost
attribution lands). Spend and forecast are computed from the instances of the latest snapshot.

A period is the UTC calendar day, the UTC calendar month, or custom dates: ``starts`` and
``ends`` (an open end means "cumulative from ``starts`` on"; its forecast looks
:data:`OPEN_FORECAST_S` ahead).

Thresholds are written ``PCT[f]:ACTION[+ACTION]``: ``80:notify``, ``100:notify+stop-all``,
``100:notify+stop-all+terminate-spot`` (stop what can stop, end the one-time spot instances);
an ``f`` after the percentage puts the threshold on the forecast (``100f:notify``), and a bare
percentage (``80``) means ``80:notify``. Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from gpuconsole.core.money import costs
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
)

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
MAX_PERCENT = 1000.0
MAX_AMOUNT = 100_000_000.0  # $100 million: beyond any GPU budget; above it is a typo (or 1e309)
AMOUNT_RULE = f"more than $0 and at most ${MAX_AMOUNT:,.0f}"
# A Kubernetes namespace is an RFC 1123 label. The job form checks namespaces with this same rule
# (core/ops/manifests.py holds a copy of the pattern; core/money may not import core/ops).
NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMESPACE_MAX = 63
NAMESPACE_RULE = f"a namespace is a lowercase RFC 1123 label (a-z, 0-9, '-', at most {NAMESPACE_MAX})"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
ACTION_WORDS = ", ".join(a.value for a in BudgetAction)
THRESHOLD_SYNTAX = "PCT[f]:ACTION[+ACTION], e.g. 80:notify, 100:notify+stop-all or 100f:notify"


class BudgetError(ValueError):
    """Bad budget input (a threshold, scope, period, date or amount); the message is one line."""


class ScopeError(BudgetError):
    """A scope string that is not ``all``, ``tag:Key=Value`` or ``namespace:NS``."""


# --------------------------------------------------------------------------- words


def namespace_problem(name: str) -> str | None:
    """Why ``name`` is not a Kubernetes namespace (one line), or None when it is one."""
    if not name:
        return "required"
    if len(name) > NAMESPACE_MAX or not NAMESPACE_RE.match(name):
        return NAMESPACE_RULE
    return None


def amount_problem(amount: float) -> str | None:
    """Why ``amount`` cannot be a budget's limit (one line), or None when it can."""
    if not math.isfinite(amount) or not 0 < amount <= MAX_AMOUNT:
        return f"must be {AMOUNT_RULE}"
    return None


def parse_amount(text: str) -> float:
    """``"$25,000"`` → ``25000.0``. Raises :class:`BudgetError` with one line: not a number,
    not finite (``1e309``, ``nan``), not more than $0 or more than :data:`MAX_AMOUNT`."""
    words = text.strip().replace(",", "").lstrip("$").strip()
    try:
        amount = float(words)
    except ValueError:
        raise BudgetError(f"expected a number of dollars, got {text.strip()!r}") from None
    problem = amount_problem(amount)
    if problem is not None:
        raise BudgetError(f"{problem}, got {text.strip()}")
    return amount


def parse_scope(scope: str) -> tuple[str, str, str]:
    """Split a scope into (kind, key, value). Raises :class:`ScopeError` with a one-line message,
    also for a ``namespace:`` that is not a Kubernetes namespace (the job form's rule)."""
    kind, key, value = _scope_parts(scope)
    if kind == "namespace" and (problem := namespace_problem(key)) is not None:
        raise ScopeError(f"bad budget scope {scope!r}: {problem}")
    return kind, key, value


def _scope_parts(scope: str) -> tuple[str, str, str]:
    """:func:`parse_scope` without the namespace rule: how spend is counted for a budget saved
    before the rule (a bad namespace matches no job, so such a budget counts nothing)."""
    if scope == "all":
        return ("all", "", "")
    kind, _, rest = scope.partition(":")
    if kind == "tag" and "=" in rest and rest.split("=", 1)[0]:
        key, value = rest.split("=", 1)
        return ("tag", key, value)
    if kind == "namespace" and rest:
        return ("namespace", rest, "")
    raise ScopeError(f"bad budget scope {scope!r}: use all, tag:Key=Value or namespace:NAME")


def parse_threshold(text: str) -> Threshold:
    """``"100:notify+stop-all"`` → ``Threshold(100, ACTUAL, (NOTIFY, STOP_ALL))``; ``"100f:notify"``
    is on the forecast; ``"80"`` alone means ``80:notify``.

    Raises:
        BudgetError: one line naming what is wrong.
    """
    raw = text.strip()
    head, sep, tail = raw.partition(":")
    head = head.strip().lower()
    basis = ThresholdBasis.ACTUAL
    if head.endswith("f"):
        basis, head = ThresholdBasis.FORECAST, head[:-1]
    head = head.rstrip("%").strip()
    try:
        percent = float(head)
    except ValueError:
        raise BudgetError(f"bad threshold {text!r}: use {THRESHOLD_SYNTAX}") from None
    if not math.isfinite(percent) or not 0 < percent <= MAX_PERCENT:
        raise BudgetError(f"bad threshold {text!r}: the percentage must be more than 0 and at most {MAX_PERCENT:g}")
    if not sep:
        return Threshold(percent, basis, (BudgetAction.NOTIFY,))
    actions: list[BudgetAction] = []
    for word in tail.split("+"):
        word = word.strip().lower()
        try:
            action = BudgetAction(word)
        except ValueError:
            what = f"unknown action {word!r}" if word else "an empty action"
            raise BudgetError(f"bad threshold {text!r}: {what} (actions: {ACTION_WORDS})") from None
        if action not in actions:
            actions.append(action)
    return Threshold(percent, basis, tuple(actions))


def format_threshold(threshold: Threshold) -> str:
    """The words :func:`parse_threshold` reads back: ``100f:notify+stop-spot``."""
    return f"{threshold_key(threshold)}:{'+'.join(a.value for a in threshold.actions)}"


def threshold_key(threshold: Threshold) -> str:
    """The percentage and basis without the actions (``80``, ``100f``): what "fired" is keyed by."""
    return f"{threshold.percent:g}{'f' if threshold.basis is ThresholdBasis.FORECAST else ''}"


def parse_period(text: str) -> BudgetPeriod:
    try:
        return BudgetPeriod(text.strip().lower())
    except ValueError:
        raise BudgetError(f"bad period {text!r}: use monthly, daily or custom") from None


def parse_date(text: str, *, end: bool = False) -> float:
    """An ISO date or date-time as POSIX seconds (UTC unless it names a zone).

    A bare date is midnight UTC; with ``end`` it is the midnight after, so ``--to 2026-11-30``
    includes the whole of that day.
    """
    raw = text.strip()
    try:
        if len(raw) == 10:
            day = datetime.fromisoformat(raw).replace(tzinfo=UTC)
            return day.timestamp() + (86400.0 if end else 0.0)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BudgetError(f"bad date {text!r}: use YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_date(ts: float) -> str:
    d = datetime.fromtimestamp(ts, UTC)
    if (d.hour, d.minute, d.second) == (0, 0, 0):
        return d.strftime("%Y-%m-%d")
    return d.strftime("%Y-%m-%dT%H:%MZ")


def describe_period(budget: Budget) -> str:
    """``monthly``, ``daily``, ``2026-11-01 to 2026-11-30`` (inclusive) or ``from 2026-11-16T14:00Z (cumulative)``."""
    if budget.period is not BudgetPeriod.CUSTOM:
        return budget.period.value
    start = format_date(budget.starts) if budget.starts is not None else "the beginning"
    if budget.ends is None:
        return f"from {start} (cumulative)"
    end = format_date(budget.ends)
    if len(end) == 10:  # ends at midnight: name the last whole day, as --to takes it
        end = format_date(budget.ends - 86400.0)
    return f"{start} to {end}"


def validate(budget: Budget) -> Budget:
    """``budget`` if a user may save it. Raises :class:`BudgetError` with one line otherwise."""
    if not NAME_RE.match(budget.name):
        raise BudgetError(f"bad budget name {budget.name!r}: letters, digits, '.', '_' and '-', at most 64")
    if (problem := amount_problem(budget.amount)) is not None:
        raise BudgetError(f"bad amount {budget.amount:g} for budget {budget.name}: {problem}")
    parse_scope(budget.scope)
    if not budget.thresholds:
        raise BudgetError(f"budget {budget.name} has no thresholds: give at least one, e.g. 80:notify")
    for t in budget.thresholds:
        if not 0 < t.percent <= MAX_PERCENT or not t.actions:
            raise BudgetError(f"bad threshold {format_threshold(t)} for budget {budget.name}")
    if budget.period is BudgetPeriod.CUSTOM:
        if budget.starts is None:
            raise BudgetError(f"budget {budget.name}: a custom period needs a start date")
        if budget.ends is not None and budget.ends <= budget.starts:
            raise BudgetError(f"budget {budget.name}: the period ends before it starts")
    elif budget.starts is not None or budget.ends is not None:
        raise BudgetError(f"budget {budget.name}: start and end dates are for custom periods only")
    if budget.webhook:
        url = budget.webhook
        local = any(url.startswith(f"http://{h}") and url[len(f"http://{h}"):][:1] in ("", ":", "/") for h in _LOCAL_HOSTS)
        if not (url.startswith("https://") or local):
            raise BudgetError(f"bad webhook {url!r}: use an https:// URL (http:// only to localhost)")
    if "\n" in budget.notify_command or "\0" in budget.notify_command:
        raise BudgetError("bad notify command: one line, please")
    return budget


# --------------------------------------------------------------------------- spend


def in_scope(instances: Iterable[Instance], scope: str, jobs: Sequence[Job] = ()) -> list[Instance]:
    kind, key, value = _scope_parts(scope)
    if kind == "all":
        return list(instances)
    if kind == "tag":
        return [i for i in instances if i.tag(key) == value]
    nodes = {j.node for j in jobs if j.namespace == key and j.state is JobState.RUNNING and j.node}
    return [i for i in instances if i.node in nodes]


def cronjobs_in_scope(cronjobs: Iterable[CronJob], scope: str) -> list[CronJob]:
    """The CronJobs a scope covers: all of them, those of a namespace, none for a tag (CronJobs
    carry no cloud tags)."""
    kind, key, _ = _scope_parts(scope)
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


def evaluate(budget: Budget, instances: Sequence[Instance], now: float, jobs: Sequence[Job] = ()) -> BudgetStatus:
    """Spend, burn rate, forecast and crossed thresholds of one budget at ``now``."""
    scoped = in_scope(instances, budget.scope, jobs)
    start, end = period_bounds(budget, now)
    burn = costs.burn_per_hour(scoped)
    if now < start:
        spent, forecast = 0.0, burn * (end - start) / 3600.0
    else:
        until = min(now, end)
        spent = costs.spend(scoped, start, until)
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
    running is named in the detail, so a user sees what still burns money.
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
    running = [i for i in in_scope(instances, budget.scope, jobs) if i.state is InstanceState.RUNNING]
    targets = [i for i in running if _takes(action, i)]
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
